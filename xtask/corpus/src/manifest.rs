//! `MANIFEST.tsv`: one line per image (path, size, SHA-256, dimensions, encoding), written
//! last, so a corpus with a manifest that matches its files and parameters is complete.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::plan::Spec;

pub(crate) const FILE: &str = "MANIFEST.tsv";
const TITLE: &str =
    "# spdl-rs corpus: deterministic ImageNet-like JPEGs made by `cargo xtask corpus`";
const COLUMNS: &str = "# path\tbytes\tsha256\twidth\theight\tquality\tsampling\tprogressive";

/// One image as written.
pub(crate) struct Entry {
    pub(crate) path: String,
    pub(crate) bytes: u64,
    pub(crate) sha256: String,
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) quality: i32,
    pub(crate) sampling: String,
    pub(crate) progressive: bool,
}

impl Entry {
    pub(crate) fn new(spec: &Spec, jpeg: &[u8]) -> Self {
        Entry {
            path: spec.path.clone(),
            bytes: jpeg.len() as u64,
            sha256: sha256(jpeg),
            width: spec.width,
            height: spec.height,
            quality: spec.quality,
            sampling: spec.sampling.name().to_string(),
            progressive: spec.progressive,
        }
    }

    fn parse(line: &str) -> Option<Entry> {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 8 {
            return None;
        }
        Some(Entry {
            path: f[0].to_string(),
            bytes: f[1].parse().ok()?,
            sha256: f[2].to_string(),
            width: f[3].parse().ok()?,
            height: f[4].parse().ok()?,
            quality: f[5].parse().ok()?,
            sampling: f[6].to_string(),
            progressive: f[7] == "1",
        })
    }
}

pub(crate) fn sha256(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

/// Writes the manifest of `entries` (sorted by path) into `dir`.
pub(crate) fn write(dir: &Path, params: &str, entries: &[Entry]) -> Result<()> {
    let mut s = format!("{TITLE}\n# {params}\n{COLUMNS}\n");
    for e in entries {
        let _ = writeln!(
            s,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            e.path,
            e.bytes,
            e.sha256,
            e.width,
            e.height,
            e.quality,
            e.sampling,
            u8::from(e.progressive)
        );
    }
    let path = dir.join(FILE);
    std::fs::write(&path, s).with_context(|| format!("cannot write {}", path.display()))
}

/// The entries of the corpus in `dir` if it is complete: a manifest made with `params`, listing
/// `count` files that all exist with the recorded size and hash. None otherwise.
pub(crate) fn complete(dir: &Path, params: &str, count: usize) -> Option<Vec<Entry>> {
    let text = std::fs::read_to_string(dir.join(FILE)).ok()?;
    let mut lines = text.lines();
    if lines.next()? != TITLE || lines.next()? != format!("# {params}") {
        return None;
    }
    let entries: Vec<Entry> = lines
        .filter(|l| !l.starts_with('#'))
        .map(Entry::parse)
        .collect::<Option<_>>()?;
    if entries.len() != count {
        return None;
    }
    let intact = entries.iter().all(|e| {
        std::fs::read(dir.join(&e.path))
            .is_ok_and(|d| d.len() as u64 == e.bytes && sha256(&d) == e.sha256)
    });
    intact.then_some(entries)
}
