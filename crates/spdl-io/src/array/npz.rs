//! NumPy `.npz` files: a ZIP archive of `.npy` members, written by `numpy.savez` (stored) and
//! `numpy.savez_compressed` (deflated).
//!
//! [`NpzArchive::parse`] reads the ZIP central directory (ZIP64 included, as NumPy writes it)
//! and checks, before anything is inflated, that the declared sizes of the deflated members
//! add up to at most `max_uncompressed_bytes`. [`NpzArchive::member`] then borrows a stored
//! member in place, or inflates a deflated one into exactly its declared size (a stream that
//! inflates to more is `Corrupt`, never a larger allocation); both check the CRC-32.
//! Spec: PKWARE APPNOTE.TXT 6.3 (sections 4.3.7, 4.3.12, 4.3.14-16, 4.5.3).
//!
//! Mirrors SPDL's `spdl.io.load_npz` / `NpzFile` (and `numpy.lib.npyio.NpzFile` for the key
//! lookup without `.npy`).

use std::borrow::Cow;

use super::npy::{self, NpyHeader};
use super::{corrupt, le_u16, le_u32, le_u64, region, truncated, unsupported};
use crate::error::{Error, ErrorKind, Result};

/// SPDL's default for `max_uncompressed_bytes`: 1 GiB.
pub const DEFAULT_MAX_UNCOMPRESSED_BYTES: u64 = 1 << 30;

/// How a member is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Method 0: the bytes are in the archive as they are.
    Stored,
    /// Method 8: raw DEFLATE.
    Deflated,
}

/// One member of the archive, as the central directory describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpzEntry {
    /// The member's file name, e.g. `"x.npy"`.
    pub name: String,
    /// Offset of the member's (compressed) data from the start of the archive.
    pub offset: u64,
    /// Size of the data in the archive, in bytes.
    pub compressed_size: u64,
    /// Size once inflated, in bytes (equal to `compressed_size` when stored).
    pub uncompressed_size: u64,
    /// Stored or deflated.
    pub compression: Compression,
    /// CRC-32 of the uncompressed bytes.
    pub crc32: u32,
}

/// The index of an `.npz` archive: its members in archive order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpzArchive {
    entries: Vec<NpzEntry>,
}

/// A member's `.npy` bytes (borrowed when stored, inflated when deflated) and its header.
#[derive(Debug, Clone)]
pub struct NpzMember<'a> {
    /// The whole `.npy` file of the member.
    pub bytes: Cow<'a, [u8]>,
    /// Its parsed header; the elements are `bytes[header.data_offset..][..header.nbytes]`.
    pub header: NpyHeader,
}

const EOCD_SIG: u32 = 0x0605_4b50;
const EOCD64_LOCATOR_SIG: u32 = 0x0706_4b50;
const EOCD64_SIG: u32 = 0x0606_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const LOCAL_SIG: u32 = 0x0403_4b50;

impl NpzArchive {
    /// Reads the central directory of the ZIP archive `data`.
    ///
    /// Errors: `UnknownFormat` (no end-of-central-directory record), `Truncated` (records or
    /// member data past the end), `Corrupt` (bad signatures, a stored member whose sizes
    /// differ), `Unsupported` (encryption, multi-disk archives, compression other than stored
    /// or deflate), `LimitExceeded` (deflated members declare more than
    /// `max_uncompressed_bytes` in all, checked before inflating anything).
    pub fn parse(data: &[u8], max_uncompressed_bytes: u64) -> Result<Self> {
        if data.is_empty() {
            return Err(Error::new(
                ErrorKind::Empty,
                "The data is not a valid zip file. (no NPZ data: 0 bytes)",
            ));
        }
        let eocd = find_eocd(data)?;
        let mut count = le_u16(data, eocd + 10) as u64;
        let mut cd_size = le_u32(data, eocd + 12) as u64;
        let mut cd_offset = le_u32(data, eocd + 16) as u64;
        let disk = le_u16(data, eocd + 4);
        let cd_disk = le_u16(data, eocd + 6);
        if count == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_offset == 0xFFFF_FFFF {
            (count, cd_size, cd_offset) = read_zip64_eocd(data, eocd)?;
        } else if disk != 0 || cd_disk != 0 {
            return Err(unsupported("multi-disk ZIP archives are not supported"));
        }
        let cd = region(data, cd_offset, cd_size, "the ZIP central directory")?;
        // Each central record takes at least 46 bytes: bounds the allocation below.
        if count > (cd.len() / 46) as u64 {
            return Err(corrupt(format!(
                "the ZIP central directory of {} bytes cannot hold {count} entries",
                cd.len()
            )));
        }
        let mut entries: Vec<NpzEntry> = Vec::with_capacity(count as usize);
        let mut at = 0usize;
        let mut deflated_total: u64 = 0;
        for _ in 0..count {
            let entry = read_central_entry(data, cd, &mut at)?;
            if entry.compression == Compression::Deflated {
                deflated_total = deflated_total.saturating_add(entry.uncompressed_size);
                if deflated_total > max_uncompressed_bytes {
                    return Err(Error::new(
                        ErrorKind::LimitExceeded,
                        format!(
                            "NPZ deflated entries exceed max_uncompressed_bytes ({max_uncompressed_bytes}): {:?} brings the declared total to {deflated_total}",
                            entry.name
                        ),
                    ));
                }
            }
            // A later entry of the same name replaces the earlier one, as in Python's zipfile.
            entries.retain(|e| e.name != entry.name);
            entries.push(entry);
        }
        Ok(NpzArchive { entries })
    }

    /// The members in archive order.
    pub fn entries(&self) -> &[NpzEntry] {
        &self.entries
    }

    /// The member called `key`, or `key + ".npy"` (so `"x"` finds `"x.npy"`).
    pub fn get(&self, key: &str) -> Option<&NpzEntry> {
        self.entries.iter().find(|e| e.name == key).or_else(|| {
            self.entries
                .iter()
                .find(|e| e.name.strip_suffix(".npy") == Some(key))
        })
    }

    /// The `.npy` bytes of `entry` and their header: borrowed from `data` when stored,
    /// inflated when deflated. `data` must be the archive `entry` came from; the region is
    /// bounds-checked again.
    ///
    /// Errors (named after the member): `Truncated` / `Corrupt` for data that does not
    /// inflate to exactly the declared size or fails the CRC-32 check, and those of
    /// [`npy::parse_header`].
    pub fn member<'a>(&self, data: &'a [u8], entry: &NpzEntry) -> Result<NpzMember<'a>> {
        read_member(data, entry).map_err(|e| e.with_key(&entry.name))
    }
}

/// See [`NpzArchive::member`].
fn read_member<'a>(data: &'a [u8], entry: &NpzEntry) -> Result<NpzMember<'a>> {
    let raw = region(
        data,
        entry.offset,
        entry.compressed_size,
        "the member's data",
    )?;
    let bytes: Cow<'a, [u8]> = match entry.compression {
        Compression::Stored => {
            if entry.compressed_size != entry.uncompressed_size {
                return Err(corrupt("a stored member's sizes differ"));
            }
            Cow::Borrowed(raw)
        }
        Compression::Deflated => Cow::Owned(inflate(raw, entry.uncompressed_size)?),
    };
    let crc = crc32fast::hash(&bytes);
    if crc != entry.crc32 {
        return Err(corrupt(format!(
            "CRC-32 mismatch: the data hashes to {crc:08x}, the archive says {:08x}",
            entry.crc32
        )));
    }
    let header = npy::parse_header(&bytes)?;
    Ok(NpzMember { bytes, header })
}

/// Inflates raw DEFLATE `input` into exactly `size` bytes.
fn inflate(input: &[u8], size: u64) -> Result<Vec<u8>> {
    let size = usize::try_from(size)
        .map_err(|_| Error::new(ErrorKind::LimitExceeded, "the member is too large"))?;
    let mut out = Vec::new();
    out.try_reserve_exact(size).map_err(|_| {
        Error::new(
            ErrorKind::LimitExceeded,
            format!("cannot allocate {size} bytes for the inflated member"),
        )
    })?;
    let mut z = flate2::Decompress::new(false);
    loop {
        let before_in = z.total_in();
        let before_out = z.total_out();
        let status = z
            .decompress_vec(
                &input[before_in as usize..],
                &mut out,
                flate2::FlushDecompress::Finish,
            )
            .map_err(|e| corrupt(format!("invalid DEFLATE data: {e}")).with_source(e))?;
        match status {
            flate2::Status::StreamEnd => break,
            _ if out.len() == size => {
                // Full, but the stream goes on: one more byte would exceed the declared size.
                let mut probe = Vec::with_capacity(1);
                let more = z
                    .decompress_vec(
                        &input[z.total_in() as usize..],
                        &mut probe,
                        flate2::FlushDecompress::Finish,
                    )
                    .map_err(|e| corrupt(format!("invalid DEFLATE data: {e}")).with_source(e))?;
                if !probe.is_empty() {
                    return Err(corrupt(format!(
                        "the member inflates to more than its declared {size} bytes"
                    )));
                }
                if more == flate2::Status::StreamEnd {
                    break;
                }
                return Err(truncated("the DEFLATE stream is cut short"));
            }
            _ if z.total_in() == before_in && z.total_out() == before_out => {
                return Err(truncated("the DEFLATE stream is cut short"));
            }
            _ => {}
        }
    }
    if out.len() != size {
        return Err(corrupt(format!(
            "the member inflates to {} bytes, the archive declares {size}",
            out.len()
        )));
    }
    Ok(out)
}

/// Offset of the end-of-central-directory record: the last `PK\5\6` that leaves room for
/// its 22 bytes and comment.
fn find_eocd(data: &[u8]) -> Result<usize> {
    if data.len() < 22 {
        return Err(match data.get(..4) {
            Some(b"PK\x03\x04") | Some(b"PK\x05\x06") => {
                truncated("the ZIP archive ends before its end-of-central-directory record")
            }
            _ if data.len() < 4 && b"PK\x03\x04".starts_with(data) => {
                truncated("the ZIP archive ends before its end-of-central-directory record")
            }
            // SPDL's wording first, so that code matching its messages still does.
            _ => Error::new(
                ErrorKind::UnknownFormat,
                format!(
                    "The data is not a valid zip file. (not a ZIP/NPZ archive: {} bytes)",
                    data.len()
                ),
            ),
        });
    }
    let lowest = data.len().saturating_sub(22 + 0xFFFF);
    for at in (lowest..=data.len() - 22).rev() {
        if le_u32(data, at) == EOCD_SIG && at + 22 + le_u16(data, at + 20) as usize <= data.len() {
            return Ok(at);
        }
    }
    Err(if data.starts_with(b"PK\x03\x04") {
        truncated("the ZIP archive has no end-of-central-directory record (cut short?)")
    } else {
        Error::new(
            ErrorKind::UnknownFormat,
            "Failed to locate the end of the central directory. \
             (not a ZIP/NPZ archive: no end-of-central-directory record)",
        )
    })
}

/// `(entry count, central directory size, central directory offset)` from the ZIP64 records.
fn read_zip64_eocd(data: &[u8], eocd: usize) -> Result<(u64, u64, u64)> {
    let locator = eocd
        .checked_sub(20)
        .filter(|&at| le_u32(data, at) == EOCD64_LOCATOR_SIG)
        .ok_or_else(|| corrupt("ZIP64 sizes without a ZIP64 end-of-central-directory locator"))?;
    if le_u32(data, locator + 16) > 1 {
        return Err(unsupported("multi-disk ZIP archives are not supported"));
    }
    let rec = region(
        data,
        le_u64(data, locator + 8),
        56,
        "the ZIP64 end-of-central-directory record",
    )?;
    if le_u32(rec, 0) != EOCD64_SIG {
        return Err(corrupt("bad ZIP64 end-of-central-directory signature"));
    }
    Ok((le_u64(rec, 32), le_u64(rec, 40), le_u64(rec, 48)))
}

/// Reads the central record at `cd[*at..]`, advances `at`, and locates the data through the
/// local header.
fn read_central_entry(data: &[u8], cd: &[u8], at: &mut usize) -> Result<NpzEntry> {
    let rec = cd
        .get(*at..*at + 46)
        .ok_or_else(|| truncated("a ZIP central directory record is cut short"))?;
    if le_u32(rec, 0) != CENTRAL_SIG {
        return Err(corrupt(format!(
            "bad ZIP central directory signature at byte {}",
            *at
        )));
    }
    let flags = le_u16(rec, 8);
    let method = le_u16(rec, 10);
    let crc32 = le_u32(rec, 16);
    let mut compressed_size = le_u32(rec, 20) as u64;
    let mut uncompressed_size = le_u32(rec, 24) as u64;
    let name_len = le_u16(rec, 28) as usize;
    let extra_len = le_u16(rec, 30) as usize;
    let comment_len = le_u16(rec, 32) as usize;
    let mut local_offset = le_u32(rec, 42) as u64;
    let var = cd
        .get(*at + 46..*at + 46 + name_len + extra_len + comment_len)
        .ok_or_else(|| truncated("a ZIP central directory record is cut short"))?;
    *at += 46 + name_len + extra_len + comment_len;
    let name = String::from_utf8_lossy(&var[..name_len]).into_owned();
    let named = |e: Error| e.with_key(&name);

    // ZIP64 extended information (header id 1): only the fields saturated above, in order.
    let mut extra = &var[name_len..name_len + extra_len];
    while extra.len() >= 4 {
        let id = le_u16(extra, 0);
        let len = le_u16(extra, 2) as usize;
        let body = extra
            .get(4..4 + len)
            .ok_or_else(|| named(corrupt("a ZIP extra field is cut short")))?;
        if id == 1 {
            let mut fields = body.chunks_exact(8).map(|c| le_u64(c, 0));
            let mut take = |v: &mut u64| -> Result<()> {
                if *v == 0xFFFF_FFFF {
                    *v = fields
                        .next()
                        .ok_or_else(|| named(corrupt("a ZIP64 extra field is too short")))?;
                }
                Ok(())
            };
            take(&mut uncompressed_size)?;
            take(&mut compressed_size)?;
            take(&mut local_offset)?;
        }
        extra = &extra[4 + len..];
    }

    if flags & 1 != 0 {
        return Err(named(unsupported(
            "encrypted ZIP members are not supported",
        )));
    }
    let compression = match method {
        0 => Compression::Stored,
        8 => Compression::Deflated,
        m => {
            return Err(named(unsupported(format!(
                "ZIP compression method {m} (stored and deflate are supported)"
            ))))
        }
    };
    if compression == Compression::Stored && compressed_size != uncompressed_size {
        return Err(named(corrupt(format!(
            "stored member with compressed size {compressed_size} != uncompressed size {uncompressed_size}"
        ))));
    }
    let local = region(data, local_offset, 30, "the member's local header").map_err(named)?;
    if le_u32(local, 0) != LOCAL_SIG {
        return Err(named(corrupt("bad ZIP local header signature")));
    }
    let offset = local_offset + 30 + le_u16(local, 26) as u64 + le_u16(local, 28) as u64;
    region(data, offset, compressed_size, "the member's data").map_err(named)?;
    Ok(NpzEntry {
        name,
        offset,
        compressed_size,
        uncompressed_size,
        compression,
        crc32,
    })
}
