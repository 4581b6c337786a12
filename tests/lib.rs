//! Shared helpers for the cross-crate tests in `tests/`: a minimal image pipeline built the way
//! the `spdl` command builds it (list -> read -> decode -> collect), over a fixture folder.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use spdl_core::{Op, PipelineBuilder, StageConfig};
use spdl_io::{key_from_path, Image, ImageLoader, SampleContext, Transform};
use spdl_sources::{read_file_async, walk_dir, Extensions};

/// The hard-case fixtures shipped with spdl-io.
pub fn hard_case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/spdl-io/tests/fixtures/hard")
        .join(name)
}

/// What one run over a folder gave.
#[derive(Debug)]
pub struct Outcome {
    /// Files listed.
    pub listed: usize,
    /// File names of the delivered images, with their decoded images.
    pub delivered: Vec<(String, Image)>,
    /// Failures counted by the pipeline.
    pub failed: u64,
    /// The last errors the pipeline logged.
    pub errors: Vec<String>,
}

impl Outcome {
    /// Names of the delivered files.
    pub fn delivered_names(&self) -> BTreeSet<String> {
        self.delivered.iter().map(|(n, _)| n.clone()).collect()
    }
}

/// Runs list -> read (async) -> decode with `transform` -> sink over every image in `dir`.
pub fn run_folder(dir: &Path, transform: Transform, threads: usize) -> Outcome {
    let list = walk_dir(dir, &Extensions::images()).expect("list fixture folder");
    let listed = list.len();
    let paths: Vec<PathBuf> = list.iter().map(|s| s.path.clone()).collect();
    let loader = ImageLoader::new(transform);
    let mut pipeline = PipelineBuilder::source(move |_| paths.clone().into_iter().enumerate())
        .pipe(
            Op::future(|(i, path): (usize, PathBuf)| async move {
                let bytes = read_file_async(&path).await?;
                Ok(Some((i, path, bytes)))
            }),
            StageConfig::named("read").concurrency(8),
        )
        .pipe(
            Op::blocking(move |(i, path, bytes): (usize, PathBuf, Vec<u8>)| {
                let key = key_from_path(&path);
                let ctx = SampleContext {
                    key: &key,
                    index: i as u64,
                    epoch: 0,
                };
                let img = loader.load(&bytes, &ctx)?;
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Ok(Some((name, img)))
            }),
            StageConfig::named("decode").concurrency(threads),
        )
        .build(threads)
        .expect("build pipeline");
    let delivered = pipeline
        .iter()
        .map(|r| r.expect("no budget is set"))
        .collect();
    let stats = pipeline.stats();
    Outcome {
        listed,
        delivered,
        failed: stats.failures(),
        errors: pipeline.last_errors(),
    }
}
