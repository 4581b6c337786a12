//! Helpers for the video and audio tests: fixture paths and a `.npy` reader
//! (`|u1` and `<f4`, C order).
#![allow(dead_code)]

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
    let b = read(path);
    assert_eq!(&b[..6], b"\x93NUMPY");
    let (hlen, start) = if b[6] == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
    };
    let header = std::str::from_utf8(&b[start..start + hlen]).unwrap();
    assert!(header.contains("'fortran_order': False"), "{header}");
    let shape: Vec<usize> = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap()
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let body = &b[start + hlen..];
    let data = if header.contains("'|u1'") {
        body.iter().map(|&v| f64::from(v)).collect()
    } else if header.contains("'<f4'") {
        body.chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect()
    } else {
        panic!("unsupported dtype in {header}");
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
