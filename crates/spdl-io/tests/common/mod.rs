//! Test helpers: fixture paths and a minimal `.npy` reader (u8 / little-endian u16).
#![allow(dead_code)]

#[path = "npy.rs"]
mod npy_format;

use std::path::PathBuf;

use spdl_io::{DecodeOptions, Error, Image, Registry};

pub(crate) fn hard(case: &str, file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hard")
        .join(case)
        .join(file)
}

pub(crate) fn read(path: &PathBuf) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A reference array: shape and samples widened to u16.
#[derive(Debug)]
pub(crate) struct Npy {
    pub(crate) shape: Vec<usize>,
    pub(crate) data: Vec<u16>,
}

/// Parses `.npy` with dtype `|u1` or `<u2`.
pub(crate) fn npy(path: &PathBuf) -> Npy {
    let bytes = read(path);
    let (shape, descr, body) = npy_format::parse(&bytes);
    let data = match descr.as_str() {
        "|u1" => body.iter().map(|&v| u16::from(v)).collect(),
        "<u2" => body
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect(),
        other => panic!("unsupported dtype {other} in {}", path.display()),
    };
    Npy { shape, data }
}

pub(crate) fn samples(img: &Image) -> Vec<u16> {
    match &img.data {
        spdl_io::PixelData::U8(v) => v.iter().map(|&x| u16::from(x)).collect(),
        spdl_io::PixelData::U16(v) => v.clone(),
    }
}

/// Max |a - b| over all samples; panics on a shape mismatch (gray npy may be 2-D).
pub(crate) fn max_diff(img: &Image, reference: &Npy) -> u16 {
    let mut shape = reference.shape.clone();
    if shape.len() == 2 {
        shape.push(1);
    }
    assert_eq!(img.shape().to_vec(), shape, "shape vs reference");
    samples(img)
        .iter()
        .zip(&reference.data)
        .map(|(&a, &b)| a.abs_diff(b))
        .max()
        .unwrap_or(0)
}

pub(crate) fn decode(case: &str, file: &str, opts: &DecodeOptions) -> Result<Image, Error> {
    Registry::with_defaults().decode(file, &read(&hard(case, file)), opts)
}

pub(crate) fn px(img: &Image, x: usize, y: usize) -> Vec<u16> {
    img.pixel(x, y).unwrap()
}

pub(crate) fn assert_close(got: &[u16], want: &[u16], tol: u16, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            g.abs_diff(*w) <= tol,
            "{what}: got {got:?}, want {want:?} (+-{tol})"
        );
    }
}
