//! Array, archive and WAV fast paths: formats read in place, without a decoder.
//!
//! Each parser reads a byte slice and returns where the payload lies in it (offsets, shapes,
//! element types), so a binding can hand out zero-copy views over the caller's memory:
//!
//! - [`npy`]: NumPy `.npy` (format versions 1.0, 2.0 and 3.0).
//! - [`npz`]: NumPy `.npz` (a ZIP archive of `.npy` members, stored or deflated).
//! - [`tar`]: tar archives (POSIX ustar, GNU long names, PAX), over a slice or a [`std::io::Read`].
//! - [`wav`]: RIFF/WAVE audio (PCM 8/16/24/32 bit, IEEE float 32/64 bit).
//!
//! They mirror SPDL 0.8's `spdl.io.load_npy`, `load_npz`, `iter_tarfile`, `load_wav` and
//! `parse_wav`. Malformed input is an [`crate::Error`] (`Truncated`, `Corrupt`, `Unsupported`,
//! `LimitExceeded`) naming the reason; no input makes them panic.

pub mod npy;
pub mod npz;
pub mod tar;
pub mod wav;

use crate::error::{Error, ErrorKind};

/// Little-endian `u16` at `at` (the caller has checked the bounds).
fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Little-endian `u32` at `at` (the caller has checked the bounds).
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Little-endian `u64` at `at` (the caller has checked the bounds).
fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

fn truncated(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Truncated, message)
}

fn corrupt(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Corrupt, message)
}

fn unsupported(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Unsupported, message)
}

/// `offset..offset + len` of `data`, or a `Truncated` error saying what was cut (spdl-tar's
/// bounds check, which tar headers use too).
fn region<'a>(data: &'a [u8], offset: u64, len: u64, what: &str) -> Result<&'a [u8], Error> {
    spdl_tar::region_or(data, offset, len, what, truncated)
}
