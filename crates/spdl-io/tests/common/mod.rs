//! Test helpers: fixture paths and a minimal `.npy` reader (u8 / little-endian u16).
// Each test binary uses some of the helpers (and of the shared ones re-exported here).
#![allow(dead_code, unused_imports)]

#[path = "fixtures.rs"]
mod fixtures;

use std::path::PathBuf;

pub(crate) use fixtures::{fixture, largest_diff, read};
use spdl_io::{DecodeOptions, Error, Image, Registry};

pub(crate) fn hard(case: &str, file: &str) -> PathBuf {
    fixtures::fixture("hard").join(case).join(file)
}

/// A reference array: shape and samples widened to u16.
pub(crate) type Npy = fixtures::Npy<u16>;

/// Parses `.npy` with dtype `|u1` or `<u2`.
pub(crate) fn npy(path: &PathBuf) -> Npy {
    fixtures::load(path, "<u2", 2, |c| u16::from_le_bytes([c[0], c[1]]))
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
