//! The decoded cache's file layout (version 1, little-endian):
//!
//! | bytes | what |
//! |---|---|
//! | 0..8 | magic `SPDLDEC\0` |
//! | 8..12 | version (1) |
//! | 12..16, 16..20, 20..24 | channels, height, width of every record |
//! | 24..32 | record count |
//! | 32..40 | offset of record 0 (4096: page-aligned) |
//! | 40..48 | offset of the index (just past the last record) |
//! | 48..52 | CRC-32 of the index |
//! | 52..124 | zero |
//! | 124..128 | CRC-32 of bytes 0..124 |
//!
//! Record `i` is `height * width * channels` bytes (`[H, W, C]` u8) at
//! `data_offset + i * record_size`. The index has one 16-byte entry per record: label (i64,
//! `i64::MIN` for none), the record's CRC-32, flags (bit 0: stored; a sample that failed to
//! decode when the cache was built is not). The file ends with the index.

use crate::error::{Error, ErrorKind, Result};

pub(super) const MAGIC: &[u8; 8] = b"SPDLDEC\0";
pub(super) const VERSION: u32 = 1;
pub(super) const HEADER: usize = 128;
pub(super) const DATA_OFFSET: u64 = 4096;
pub(super) const ENTRY: usize = 16;
pub(super) const NO_LABEL: i64 = i64::MIN;
pub(super) const STORED: u32 = 1;

/// What the header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub(super) shape: [usize; 3],
    pub(super) count: u64,
    pub(super) data_offset: u64,
    pub(super) index_offset: u64,
    pub(super) index_crc: u32,
}

impl Header {
    pub(super) fn record_size(&self) -> u64 {
        (self.shape[0] * self.shape[1] * self.shape[2]) as u64
    }

    pub(super) fn to_bytes(self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        // Stored as channels, height, width.
        b[12..16].copy_from_slice(&(self.shape[2] as u32).to_le_bytes());
        b[16..20].copy_from_slice(&(self.shape[0] as u32).to_le_bytes());
        b[20..24].copy_from_slice(&(self.shape[1] as u32).to_le_bytes());
        b[24..32].copy_from_slice(&self.count.to_le_bytes());
        b[32..40].copy_from_slice(&self.data_offset.to_le_bytes());
        b[40..48].copy_from_slice(&self.index_offset.to_le_bytes());
        b[48..52].copy_from_slice(&self.index_crc.to_le_bytes());
        let crc = crc32fast::hash(&b[..124]);
        b[124..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and checks a header; `file_len` is the file's size. Errors name `path`:
    /// `UnknownFormat` (no magic), `Unsupported` (another version), `Corrupt` (checksum,
    /// impossible fields), `Truncated` (the file is shorter than its header says).
    pub(super) fn parse(b: &[u8], file_len: u64, path: &str) -> Result<Header> {
        let err = |kind, msg: String| Error::new(kind, msg).with_key(path);
        if !MAGIC.starts_with(&b[..b.len().min(8)]) || b.is_empty() {
            return Err(err(
                ErrorKind::UnknownFormat,
                "not a decoded cache (no SPDLDEC magic)".into(),
            ));
        }
        if b.len() < HEADER {
            return Err(err(
                ErrorKind::Truncated,
                format!("decoded cache: {} bytes, shorter than its header", b.len()),
            ));
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        if crc32fast::hash(&b[..124]) != u32_at(124) {
            return Err(err(
                ErrorKind::Corrupt,
                "decoded cache: header checksum mismatch".into(),
            ));
        }
        let version = u32_at(8);
        if version != VERSION {
            return Err(err(
                ErrorKind::Unsupported,
                format!("decoded cache version {version}; this build reads version {VERSION}"),
            ));
        }
        let (c, h, w) = (
            u32_at(12) as usize,
            u32_at(16) as usize,
            u32_at(20) as usize,
        );
        let h = Header {
            shape: [h, w, c],
            count: u64_at(24),
            data_offset: u64_at(32),
            index_offset: u64_at(40),
            index_crc: u32_at(48),
        };
        let data_end = h
            .record_size()
            .checked_mul(h.count)
            .and_then(|n| n.checked_add(h.data_offset));
        let index_end = h
            .count
            .checked_mul(ENTRY as u64)
            .and_then(|n| n.checked_add(h.index_offset));
        let (Some(data_end), Some(index_end)) = (data_end, index_end) else {
            return Err(err(
                ErrorKind::Corrupt,
                "decoded cache: sizes overflow".into(),
            ));
        };
        if h.record_size() == 0 || h.data_offset < HEADER as u64 || data_end > h.index_offset {
            return Err(err(
                ErrorKind::Corrupt,
                format!(
                    "decoded cache: impossible layout (shape {:?}, {} records, index at {})",
                    h.shape, h.count, h.index_offset
                ),
            ));
        }
        if file_len < index_end {
            return Err(err(
                ErrorKind::Truncated,
                format!("decoded cache: {file_len} bytes, its header says {index_end}"),
            ));
        }
        Ok(h)
    }
}

/// One index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) label: i64,
    pub(super) crc: u32,
    pub(super) flags: u32,
}

impl Entry {
    pub(super) fn to_bytes(self) -> [u8; ENTRY] {
        let mut b = [0u8; ENTRY];
        b[..8].copy_from_slice(&self.label.to_le_bytes());
        b[8..12].copy_from_slice(&self.crc.to_le_bytes());
        b[12..].copy_from_slice(&self.flags.to_le_bytes());
        b
    }

    pub(super) fn parse(b: &[u8]) -> Entry {
        let mut l = [0u8; 8];
        l.copy_from_slice(&b[..8]);
        Entry {
            label: i64::from_le_bytes(l),
            crc: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            flags: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        }
    }
}
