//! WebDataset tar shards written at run time, for the local and the remote shard tests
//! (`shards.rs`, `remote_shards.rs`, by `#[path]`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use spdl_tar::TarWriter;

/// Writes `n` shards `train-0000.tar`, `train-0001.tar`, ... into `dir` (created when missing):
/// shard `s` holds samples `s*per .. (s+1)*per`, sample `i` as the members `members(i)`
/// (name, bytes), in order. Returns the shard paths.
pub(crate) fn write_tar_shards(
    dir: &Path,
    n: usize,
    per: usize,
    members: impl Fn(usize) -> Vec<(String, Vec<u8>)>,
) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    (0..n)
        .map(|s| {
            let path = dir.join(format!("train-{s:04}.tar"));
            let mut w = TarWriter::new(std::fs::File::create(&path).unwrap());
            for i in s * per..(s + 1) * per {
                for (name, bytes) in members(i) {
                    w.append(&name, &bytes).unwrap();
                }
            }
            w.finish().unwrap();
            path
        })
        .collect()
}
