//! Helpers for the video and audio tests: fixture paths and a `.npy` reader
//! (`|u1` and `<f4`, C order).
#![allow(dead_code)]

#[path = "../common/npy.rs"]
mod npy_format;

use std::path::PathBuf;

pub(crate) fn media(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/media")
        .join(rel)
}

pub(crate) fn read(path: &PathBuf) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A reference array: shape and values as f64.
#[derive(Debug)]
pub(crate) struct Npy {
    pub(crate) shape: Vec<usize>,
    pub(crate) data: Vec<f64>,
}

pub(crate) fn npy(path: &PathBuf) -> Npy {
    let bytes = read(path);
    let (shape, descr, body) = npy_format::parse(&bytes);
    let data = match descr.as_str() {
        "|u1" => body.iter().map(|&v| f64::from(v)).collect(),
        "<f4" => body
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        other => panic!("unsupported dtype {other} in {}", path.display()),
    };
    Npy { shape, data }
}

/// Largest absolute difference.
pub(crate) fn max_diff(a: impl IntoIterator<Item = f64>, b: impl IntoIterator<Item = f64>) -> f64 {
    a.into_iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}
