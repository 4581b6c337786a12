//! # spdl-tar: tar archives for spdl-rs
//!
//! The regular files of an archive in archive order, as `(name, data)`. One small crate shared
//! by spdl-io (`spdl_io::array::tar` re-exports it: `iter_tarfile` in Python) and spdl-sources
//! (WebDataset shards, local or streamed), so that neither reaches into the other: it depends
//! on nothing of the workspace but spdl-core's error status trait.
//!
//! Reads POSIX ustar (name prefix), GNU (`L` long names, `K` long link names, base-256 sizes)
//! and PAX (`x` headers: `path`, `size`, `linkpath`) archives as GNU tar and Python's
//! `tarfile` write them. Regular files (`0`, NUL, `7`) are members, zero-size ones included;
//! directories and devices are skipped; GNU and PAX sparse files are `Unsupported`.
//!
//! Links (`1` hard, `2` symbolic) carry no data. [`members`] and [`TarCursor`] skip them, as
//! SPDL 0.8.0's `iter_tarfile` does (a link is never yielded as a 0-byte file);
//! [`TarReader::next_entry`] hands them on as [`Entry::Link`] with their target, for a reader
//! that resolves them (the shard reader of `spdl-sources` does, as `tarfile.extractfile`).
//!
//! Three ways in, one header decoder ([`TarDecoder`]):
//! - [`members`] over a slice: each [`TarMember`] says where its data lies, so a binding can
//!   hand out zero-copy views (SPDL's `iter_tarfile` over `bytes`);
//! - [`TarCursor`]: the same, one member at a time, for a caller that keeps the slice itself;
//! - [`TarReader`] over any [`Read`]: one sequential pass, each member's data read into a
//!   `Vec` (a shard streamed from disk or the network).
//!
//! [`TarWriter`] writes archives that all of the above (and GNU tar, `tarfile`) read.
//!
//! The end of the archive is the first all-zero header block (the end-of-archive marker, even
//! cut short); bytes after it are ignored (as GNU tar and `tarfile` do). Data that ends
//! after a whole member (its data complete, padding or not) without the marker ends the
//! archive too, as in `tarfile` and GNU tar: many writers leave the marker out when a job is
//! killed after its last member. A header that fails its checksum is `Corrupt` (the first
//! one: `UnknownFormat`); a member whose data is cut short, a header cut short, or an
//! extended header with no entry after it is `Truncated`, naming the member when its name
//! was read (a cut header's name is read when at least 500 of its bytes are there). Zero
//! bytes are `Empty`.
//! Spec: POSIX.1-2017 `pax` (ustar and pax interchange formats), GNU tar manual "Basic Tar
//! Format".
//!
//! Errors are this crate's [`Error`] (a kind, the member, the reason), displayed as every
//! error of the workspace: `truncated: b.txt: ...`.
//!
//! ```
//! use spdl_tar as tar;
//!
//! # fn main() -> Result<(), spdl_tar::Error> {
//! let mut archive = vec![0u8; 512];
//! archive[..5].copy_from_slice(b"a.txt");
//! archive[124..135].copy_from_slice(b"00000000003"); // size, octal
//! archive[156] = b'0'; // regular file
//! archive[148..156].copy_from_slice(b"        ");
//! let sum: u32 = archive.iter().map(|&b| b as u32).sum();
//! archive[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
//! archive.extend(b"hi\n");
//! archive.resize(512 * 4, 0); // padding + two zero blocks
//!
//! let members = tar::members(&archive).collect::<Result<Vec<_>, _>>()?;
//! assert_eq!(members[0].name, "a.txt");
//! assert_eq!(members[0].data(&archive), b"hi\n");
//! # Ok(())
//! # }
//! ```

use std::io::{Read, Write};

mod error;

use error::{corrupt, region, truncated, unsupported};
pub use error::{Error, ErrorKind, Result};

/// `offset..offset + len` of `data` (offsets as an archive's headers give them), or
/// `cut(message)` saying what was cut: `"{what} ends at byte {end}, past the end of the data
/// ({n} bytes)"`. Shared with spdl-io's other archive readers (ZIP/NPZ), which make their own
/// error of the message.
pub fn region_or<'a, E>(
    data: &'a [u8],
    offset: u64,
    len: u64,
    what: &str,
    cut: impl FnOnce(String) -> E,
) -> std::result::Result<&'a [u8], E> {
    let end = offset.checked_add(len);
    match end {
        Some(end) if end <= data.len() as u64 => Ok(&data[offset as usize..end as usize]),
        _ => Err(cut(format!(
            "{what} ends at byte {}, past the end of the data ({} bytes)",
            end.map_or_else(|| "2^64".to_owned(), |e| e.to_string()),
            data.len()
        ))),
    }
}

/// Size of a tar block (headers and data padding).
pub const BLOCK: usize = 512;

/// Extended-header data (long names, PAX records) larger than this is `LimitExceeded`:
/// names are short, and a streamed archive must not make us buffer gigabytes.
pub const MAX_META_BYTES: u64 = 1 << 20;

/// A regular file in an archive held in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TarMember {
    /// The path as stored (PAX `path`, GNU long name, or ustar prefix + name).
    pub name: String,
    /// Offset of the member's data from the start of the archive.
    pub offset: u64,
    /// Size of the data in bytes.
    pub size: u64,
}

impl TarMember {
    /// The member's bytes in `archive` (the slice it was parsed from).
    ///
    /// # Panics
    /// If `archive` is not that slice (shorter than `offset + size`).
    pub fn data<'a>(&self, archive: &'a [u8]) -> &'a [u8] {
        &archive[self.offset as usize..(self.offset + self.size) as usize]
    }
}

/// What a header block announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A regular file of `size` bytes; its data follows the header.
    File {
        /// The member's path.
        name: String,
        /// Size of its data.
        size: u64,
    },
    /// Extended-header data of `size` bytes follows: pass it to [`TarDecoder::meta`].
    Meta {
        /// Size of the data.
        size: u64,
    },
    /// A hard link (`1`) or symbolic link (`2`): no data follows.
    Link {
        /// The link's own path.
        name: String,
        /// The path it names (ustar `linkname`, GNU `K` long link name, PAX `linkpath`): for a
        /// hard link, a member path of the archive; for a symbolic link, relative to the
        /// link's directory unless it starts with `/`.
        target: String,
        /// Hard link (`true`) or symbolic link.
        hard: bool,
    },
    /// An entry that is neither a regular file nor a link (directory, device, FIFO, unknown
    /// type): skip `size` bytes of data.
    Skip {
        /// Size of the data to skip (before padding).
        size: u64,
    },
    /// The end-of-archive marker (an all-zero block).
    End,
}

/// Which extended header is pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetaKind {
    LongName,
    LongLink,
    Pax,
    GlobalPax,
}

/// Decodes header blocks and the extended headers that apply to the next one; knows nothing
/// of where the bytes come from.
#[derive(Debug, Default, Clone)]
pub struct TarDecoder {
    pending: Option<MetaKind>,
    long_name: Option<String>,
    long_link: Option<String>,
    pax_path: Option<String>,
    pax_linkpath: Option<String>,
    pax_size: Option<u64>,
    pax_sparse: bool,
    headers: u64,
}

/// `size` rounded up to whole blocks.
pub fn padded(size: u64) -> u64 {
    size.div_ceil(BLOCK as u64).saturating_mul(BLOCK as u64)
}

impl TarDecoder {
    /// A decoder at the start of an archive.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether an extended header (long name, PAX) waits for the entry it describes.
    pub fn has_pending(&self) -> bool {
        self.pending.is_some()
            || self.long_name.is_some()
            || self.long_link.is_some()
            || self.pax_path.is_some()
            || self.pax_linkpath.is_some()
            || self.pax_size.is_some()
    }

    /// Decodes one 512-byte header block.
    ///
    /// Errors: `UnknownFormat` (the first header fails its checksum), `Corrupt` (a later one
    /// does, or a numeric field is not a number), `Unsupported` (sparse files),
    /// `LimitExceeded` (extended-header data over [`MAX_META_BYTES`]),
    /// `InvalidArgument` (a block that is not 512 bytes, or [`TarDecoder::meta`] not called
    /// after a [`Record::Meta`]).
    pub fn header(&mut self, block: &[u8]) -> Result<Record> {
        if block.len() != BLOCK {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("a tar header block is 512 bytes, got {}", block.len()),
            ));
        }
        if self.pending.is_some() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "extended-header data expected before the next header",
            ));
        }
        if block.iter().all(|&b| b == 0) {
            return Ok(Record::End);
        }
        let first = self.headers == 0;
        self.headers += 1;
        check_checksum(block, first)?;
        let header_size = number(&block[124..136], "size")?;
        let flag = block[156];
        let meta = match flag {
            b'L' => Some(MetaKind::LongName),
            b'K' => Some(MetaKind::LongLink),
            b'x' | b'X' => Some(MetaKind::Pax),
            b'g' => Some(MetaKind::GlobalPax),
            _ => None,
        };
        if let Some(kind) = meta {
            if header_size > MAX_META_BYTES {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    format!(
                        "a tar extended header of {header_size} bytes (at most {MAX_META_BYTES})"
                    ),
                ));
            }
            self.pending = Some(kind);
            return Ok(Record::Meta { size: header_size });
        }
        let name = self.take_name(block);
        let target = self.take_link(block);
        let size = self.pax_size.take().unwrap_or(header_size);
        let sparse = std::mem::take(&mut self.pax_sparse);
        match flag {
            // `tarfile` reads no data for links, whatever their size field says.
            b'1' | b'2' => {
                return Ok(Record::Link {
                    name,
                    target,
                    hard: flag == b'1',
                })
            }
            b'0' | b'7' => {}
            // Old (pre-POSIX) archives mark directories by a trailing slash only.
            0 if !name.ends_with('/') => {}
            0 => return Ok(Record::Skip { size }),
            b'S' => return Err(sparse_error(&name)),
            // Devices, directories, FIFOs: `tarfile` reads no data for these.
            b'3'..=b'6' => return Ok(Record::Skip { size: 0 }),
            _ => return Ok(Record::Skip { size }),
        }
        if sparse {
            return Err(sparse_error(&name));
        }
        Ok(Record::File { name, size })
    }

    /// Feeds the data of the extended header announced by the last [`Record::Meta`].
    ///
    /// Errors: `Corrupt` for a malformed PAX record, `InvalidArgument` if no extended header
    /// was announced.
    pub fn meta(&mut self, data: &[u8]) -> Result<()> {
        let kind = self.pending.take().ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                "no tar extended header is pending",
            )
        })?;
        match kind {
            MetaKind::LongName => self.long_name = Some(c_string(data)),
            MetaKind::LongLink => self.long_link = Some(c_string(data)),
            MetaKind::Pax => {
                for (key, value) in pax_records(data)? {
                    match key {
                        "path" => self.pax_path = Some(value.to_owned()),
                        "linkpath" => self.pax_linkpath = Some(value.to_owned()),
                        "size" => {
                            self.pax_size = Some(value.parse().map_err(|_| {
                                corrupt(format!("PAX size {value:?} is not a number"))
                            })?)
                        }
                        k if k.starts_with("GNU.sparse.") => self.pax_sparse = true,
                        _ => {}
                    }
                }
            }
            // Global defaults: checked for form, not applied (no writer we read sets a path
            // or size there).
            MetaKind::GlobalPax => {
                pax_records(data)?;
            }
        }
        Ok(())
    }

    /// The entry's name: PAX `path`, else GNU long name, else ustar prefix + name.
    fn take_name(&mut self, block: &[u8]) -> String {
        let long = self.long_name.take();
        if let Some(p) = self.pax_path.take() {
            return p;
        }
        if let Some(n) = long {
            return n;
        }
        let name = c_string(&block[..100]);
        // POSIX ustar ("ustar\0" + "00") has a 155-byte prefix; GNU's "ustar  \0" has not.
        if &block[257..263] == b"ustar\0" {
            let prefix = c_string(&block[345..500]);
            if !prefix.is_empty() {
                return format!("{prefix}/{name}");
            }
        }
        name
    }

    /// The entry's link target: PAX `linkpath`, else GNU long link name, else `linkname`.
    fn take_link(&mut self, block: &[u8]) -> String {
        let long = self.long_link.take();
        self.pax_linkpath
            .take()
            .or(long)
            .unwrap_or_else(|| c_string(&block[157..257]))
    }

    /// The name of the entry whose header block was cut after `partial.len()` bytes, when it
    /// can be known: the whole name and prefix fields are there (500 bytes) and no extended
    /// header set another one.
    pub fn partial_name(&self, partial: &[u8]) -> Option<String> {
        if self.has_pending() || partial.len() < 500 {
            return None;
        }
        let mut block = [0u8; BLOCK];
        block[..partial.len()].copy_from_slice(partial);
        Some(self.clone().take_name(&block)).filter(|n| !n.is_empty())
    }
}

fn sparse_error(name: &str) -> Error {
    unsupported("sparse tar members are not supported").with_key(name)
}

/// Bytes up to the first NUL, as UTF-8 (invalid sequences replaced).
fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// A numeric header field: octal text (NUL/space terminated), or GNU base-256 (high bit set).
fn number(field: &[u8], what: &str) -> Result<u64> {
    if field[0] & 0x80 != 0 {
        if field[0] != 0x80 {
            return Err(corrupt(format!("negative base-256 tar {what} field")));
        }
        let mut v: u64 = 0;
        for &b in &field[1..] {
            v = v
                .checked_mul(256)
                .and_then(|v| v.checked_add(b as u64))
                .ok_or_else(|| corrupt(format!("tar {what} field overflows 64 bits")))?;
        }
        return Ok(v);
    }
    let end = field.iter().position(|&c| c == 0).unwrap_or(field.len());
    let text = std::str::from_utf8(&field[..end])
        .map_err(|_| corrupt(format!("tar {what} field is not text")))?
        .trim_matches(' ');
    if text.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(text, 8)
        .map_err(|_| corrupt(format!("tar {what} field {text:?} is not an octal number")))
}

/// Checks the header checksum (the unsigned or, for old writers, signed byte sum with the
/// checksum field counted as spaces).
fn check_checksum(block: &[u8], first: bool) -> Result<()> {
    let stored = number(&block[148..156], "checksum");
    let (mut unsigned, mut signed) = (0u64, 0i64);
    for (i, &b) in block.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        unsigned += b as u64;
        signed += b as i8 as i64;
    }
    match stored {
        Ok(s) if s == unsigned || s as i64 == signed => Ok(()),
        _ if first => Err(Error::new(
            ErrorKind::UnknownFormat,
            "not a tar archive (the first header fails its checksum)",
        )),
        _ => Err(corrupt("a tar header fails its checksum")),
    }
}

/// The `"LEN key=value\n"` records of PAX extended-header data.
fn pax_records(data: &[u8]) -> Result<Vec<(&str, &str)>> {
    let bad = || corrupt("malformed PAX extended header record");
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() && rest[0] != 0 {
        let space = rest.iter().position(|&c| c == b' ').ok_or_else(bad)?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        if len <= space + 1 || len > rest.len() || rest[len - 1] != b'\n' {
            return Err(bad());
        }
        let record = std::str::from_utf8(&rest[space + 1..len - 1]).map_err(|_| bad())?;
        let (key, value) = record.split_once('=').ok_or_else(bad)?;
        out.push((key, value));
        rest = &rest[len..];
    }
    Ok(out)
}

/// Walks an archive held in memory, one member at a time. Keeps only a position, so the
/// caller may hold the bytes however it likes (e.g. a Python buffer).
#[derive(Debug, Default, Clone)]
pub struct TarCursor {
    pos: u64,
    decoder: TarDecoder,
    done: bool,
}

impl TarCursor {
    /// A cursor at the start of an archive.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next regular file of `data` (always the same archive), `None` at the end. After
    /// an error, or the end, it returns `None`.
    ///
    /// Errors: those of [`TarDecoder::header`], and `Truncated` (naming the member) when a
    /// header or a member's data extends past the end of `data`.
    pub fn next_member(&mut self, data: &[u8]) -> Result<Option<TarMember>> {
        if self.done {
            return Ok(None);
        }
        let result = self.advance(data);
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result
    }

    fn advance(&mut self, data: &[u8]) -> Result<Option<TarMember>> {
        let len = data.len() as u64;
        loop {
            let rest = &data[self.pos.min(len) as usize..];
            if rest.len() < BLOCK {
                if len == 0 {
                    return Err(Error::new(ErrorKind::Empty, "no tar data (0 bytes)"));
                }
                if self.decoder.has_pending() {
                    return Err(truncated(
                        "the tar archive ends after an extended header, before its entry",
                    ));
                }
                // No end marker after a whole member, or the marker cut short: every member
                // is whole.
                if rest.iter().all(|&b| b == 0) {
                    return Ok(None);
                }
                let e = truncated(format!(
                    "a tar header at byte {} is cut short ({} bytes)",
                    self.pos,
                    rest.len()
                ));
                return Err(match self.decoder.partial_name(rest) {
                    Some(name) => e.with_key(&name),
                    None => e,
                });
            }
            let header_at = self.pos;
            let record = self
                .decoder
                .header(&rest[..BLOCK])
                .map_err(|e| at_offset(e, header_at))?;
            let start = self.pos + BLOCK as u64;
            match record {
                Record::End => return Ok(None),
                Record::File { name, size } => {
                    if start.checked_add(size).is_none_or(|end| end > len) {
                        return Err(truncated(format!(
                            "the member's {size} bytes extend past the end of the archive ({len} bytes)"
                        ))
                        .with_key(&name));
                    }
                    self.pos = start.saturating_add(padded(size));
                    return Ok(Some(TarMember {
                        name,
                        offset: start,
                        size,
                    }));
                }
                Record::Meta { size } => {
                    let meta = region(data, start, size, "a tar extended header")?;
                    self.decoder.meta(meta)?;
                    self.pos = start + padded(size);
                }
                // Links carry no data; SPDL 0.8.0's `iter_tarfile` skips them.
                Record::Link { .. } => self.pos = start,
                Record::Skip { size } => {
                    if start.checked_add(size).is_none_or(|end| end > len) {
                        return Err(truncated(format!(
                            "an entry's {size} bytes extend past the end of the archive"
                        )));
                    }
                    self.pos = start.saturating_add(padded(size));
                }
            }
        }
    }
}

fn at_offset(e: Error, at: u64) -> Error {
    let kind = e.kind();
    let msg = format!("{} (header at byte {at})", e.message());
    let key = e.key().to_owned();
    Error::new(kind, msg).with_key(&key)
}

/// The regular files of the archive `data`, in order; each item says where the member's
/// data lies in `data` (no copy). Iteration stops after the first error.
pub fn members(data: &[u8]) -> Members<'_> {
    Members {
        data,
        cursor: TarCursor::new(),
    }
}

/// Iterator of [`members`].
#[derive(Debug, Clone)]
pub struct Members<'a> {
    data: &'a [u8],
    cursor: TarCursor,
}

impl Iterator for Members<'_> {
    type Item = Result<TarMember>;

    fn next(&mut self) -> Option<Self::Item> {
        self.cursor.next_member(self.data).transpose()
    }
}

/// One entry of [`TarReader::next_entry`]: a regular file and its data, or a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file (zero-size ones included).
    File {
        /// Its path.
        name: String,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// A hard or symbolic link (see [`Record::Link`]).
    Link {
        /// The link's own path.
        name: String,
        /// The path it names.
        target: String,
        /// Hard link (`true`) or symbolic link.
        hard: bool,
    },
}

/// Reads a tar archive from a stream in one pass: the regular files as `(name, data)`
/// (links skipped; [`TarReader::next_entry`] hands them on). Iteration stops after the first
/// error.
#[derive(Debug)]
pub struct TarReader<R> {
    inner: R,
    decoder: TarDecoder,
    done: bool,
    pos: u64,
}

impl<R: Read> TarReader<R> {
    /// A reader at the start of the archive `inner` (wrap a file in a `BufReader`).
    pub fn new(inner: R) -> Self {
        TarReader {
            inner,
            decoder: TarDecoder::new(),
            done: false,
            pos: 0,
        }
    }

    /// Bytes consumed from the stream so far (headers, data and padding).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The next regular file and its data, `None` at the end.
    ///
    /// Errors: those of [`TarDecoder::header`]; `Truncated` (naming the member) when the
    /// stream ends inside a header or a member; `Corrupt` wrapping a read error.
    pub fn next_file(&mut self) -> Result<Option<(String, Vec<u8>)>> {
        loop {
            match self.next_entry()? {
                Some(Entry::File { name, data }) => return Ok(Some((name, data))),
                Some(Entry::Link { .. }) => {}
                None => return Ok(None),
            }
        }
    }

    /// The next regular file or link, `None` at the end (see [`TarReader::next_file`] for
    /// the errors).
    pub fn next_entry(&mut self) -> Result<Option<Entry>> {
        if self.done {
            return Ok(None);
        }
        let result = self.advance();
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result
    }

    fn advance(&mut self) -> Result<Option<Entry>> {
        let mut block = [0u8; BLOCK];
        loop {
            let got = self.fill(&mut block)?;
            if got == 0 && self.pos == 0 {
                return Err(Error::new(ErrorKind::Empty, "no tar data (0 bytes)"));
            }
            if got < BLOCK {
                // No end marker after a whole member, or the marker cut short.
                if !self.decoder.has_pending() && block[..got].iter().all(|&b| b == 0) {
                    return Ok(None);
                }
                let e = truncated(format!(
                    "the tar stream ends inside a header at byte {}",
                    self.pos - got as u64
                ));
                return Err(match self.decoder.partial_name(&block[..got]) {
                    Some(name) => e.with_key(&name),
                    None => e,
                });
            }
            let header_at = self.pos - BLOCK as u64;
            match self
                .decoder
                .header(&block)
                .map_err(|e| at_offset(e, header_at))?
            {
                Record::End => return Ok(None),
                Record::File { name, size } => {
                    let data = self.read_data(size).map_err(|e| e.with_key(&name))?;
                    return Ok(Some(Entry::File { name, data }));
                }
                Record::Link { name, target, hard } => {
                    return Ok(Some(Entry::Link { name, target, hard }))
                }
                Record::Meta { size } => {
                    let data = self.read_data(size)?;
                    self.decoder.meta(&data)?;
                }
                Record::Skip { size } => {
                    self.skip(size)?;
                }
            }
        }
    }

    /// Reads up to `buf.len()` bytes, fewer only at the end of the stream.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(read_error(e)),
            }
        }
        self.pos += got as u64;
        Ok(got)
    }

    /// Reads `size` bytes of data and its padding. Grows the buffer as bytes arrive, so a
    /// header that lies about the size cannot make it allocate more than the stream holds.
    fn read_data(&mut self, size: u64) -> Result<Vec<u8>> {
        let mut data = Vec::new();
        let got = (&mut self.inner)
            .take(size)
            .read_to_end(&mut data)
            .map_err(read_error)?;
        self.pos += got as u64;
        if (got as u64) < size {
            return Err(truncated(format!(
                "the tar stream ends after {got} of the member's {size} bytes"
            )));
        }
        self.skip_padding(size)?;
        Ok(data)
    }

    fn skip(&mut self, size: u64) -> Result<()> {
        let got = std::io::copy(&mut (&mut self.inner).take(size), &mut std::io::sink())
            .map_err(read_error)?;
        self.pos += got;
        if got < size {
            return Err(truncated(format!(
                "the tar stream ends inside an entry ({got} of {size} bytes)"
            )));
        }
        self.skip_padding(size)
    }

    /// Skips the padding after `size` bytes of data; a stream that ends inside the padding of
    /// the last member is accepted (the data is complete).
    fn skip_padding(&mut self, size: u64) -> Result<()> {
        let pad = padded(size) - size;
        let got = std::io::copy(&mut (&mut self.inner).take(pad), &mut std::io::sink())
            .map_err(read_error)?;
        self.pos += got;
        Ok(())
    }
}

impl<R: Read> Iterator for TarReader<R> {
    type Item = Result<(String, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_file().transpose()
    }
}

/// Writes a tar archive of regular files (and links, directories and PAX headers, for tests
/// and tools): GNU format (ustar header, `L`/`K` long-name entries for paths over 100 bytes,
/// base-256 sizes over 8 GiB), mode 0644, owner 0, mtime 0, so that the same files give the
/// same bytes. GNU tar, `tarfile` and WebDataset read it.
#[derive(Debug)]
pub struct TarWriter<W: Write> {
    inner: W,
    written: u64,
}

impl<W: Write> TarWriter<W> {
    /// A writer at the start of an archive.
    pub fn new(inner: W) -> Self {
        TarWriter { inner, written: 0 }
    }

    /// Bytes written so far (headers, data and padding).
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Appends a regular file `name` holding `data`.
    ///
    /// Errors: `InvalidInput` for an empty name or one with a NUL byte; those of the writer.
    pub fn append(&mut self, name: &str, data: &[u8]) -> std::io::Result<()> {
        check_name(name)?;
        self.named(name, b'0', data, "")
    }

    /// An entry whose name may need a GNU `L` long-name entry before it.
    fn named(&mut self, name: &str, flag: u8, data: &[u8], link: &str) -> std::io::Result<()> {
        if name.len() > 100 {
            let mut long = name.as_bytes().to_vec();
            long.push(0);
            self.entry("././@LongLink", b'L', &long, "")?;
        }
        self.entry(name, flag, data, link)
    }

    /// Appends a hard link (`hard`: type `1`, as GNU tar writes the second name of a file) or
    /// a symbolic link (type `2`) `name` to `target`, with no data; a target over 100 bytes
    /// goes in a GNU `K` long-link entry.
    ///
    /// Errors: `InvalidInput` for an empty name or target, or one with a NUL byte; those of
    /// the writer.
    pub fn append_link(&mut self, name: &str, target: &str, hard: bool) -> std::io::Result<()> {
        check_name(name)?;
        check_name(target)?;
        if target.len() > 100 {
            let mut long = target.as_bytes().to_vec();
            long.push(0);
            self.entry("././@LongLink", b'K', &long, "")?;
        }
        self.named(name, if hard { b'1' } else { b'2' }, &[], target)
    }

    /// Appends a directory entry `name` (type `5`; a `/` is added when missing).
    ///
    /// Errors: as [`TarWriter::append`].
    pub fn append_dir(&mut self, name: &str) -> std::io::Result<()> {
        check_name(name)?;
        let name = if name.ends_with('/') {
            name.to_owned()
        } else {
            format!("{name}/")
        };
        self.named(&name, b'5', &[], "")
    }

    /// Appends a PAX extended header (type `x`) whose `records` (`key`, `value`), e.g.
    /// `("path", "...")` or `("comment", "...")`, apply to the next entry.
    ///
    /// Errors: `InvalidInput` for a key with `=` or a NUL byte; those of the writer.
    pub fn append_pax(&mut self, records: &[(&str, &str)]) -> std::io::Result<()> {
        let mut data = Vec::new();
        for (key, value) in records {
            if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("PAX record {key:?} is malformed"),
                ));
            }
            // "LEN key=value\n", LEN counting its own digits.
            let body = format!(" {key}={value}\n");
            let mut len = body.len() + 1;
            while len.to_string().len() + body.len() != len {
                len = len.to_string().len() + body.len();
            }
            data.extend(format!("{len}{body}").as_bytes());
        }
        self.entry("././@PaxHeader", b'x', &data, "")
    }

    /// Writes the end-of-archive marker (two zero blocks) and returns the inner writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.inner.write_all(&[0u8; 2 * BLOCK])?;
        self.written += 2 * BLOCK as u64;
        self.inner.flush()?;
        Ok(self.inner)
    }

    fn entry(&mut self, name: &str, flag: u8, data: &[u8], link: &str) -> std::io::Result<()> {
        let mut h = [0u8; BLOCK];
        let n = name.len().min(100);
        h[..n].copy_from_slice(&name.as_bytes()[..n]);
        let l = link.len().min(100);
        h[157..157 + l].copy_from_slice(&link.as_bytes()[..l]);
        h[100..108].copy_from_slice(b"0000644\0");
        h[108..116].copy_from_slice(b"0000000\0");
        h[116..124].copy_from_slice(b"0000000\0");
        let size = data.len() as u64;
        if size < 1 << 33 {
            h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
        } else {
            h[124] = 0x80;
            h[128..136].copy_from_slice(&size.to_be_bytes());
        }
        h[136..148].copy_from_slice(b"00000000000\0");
        h[156] = flag;
        h[257..265].copy_from_slice(b"ustar  \0");
        h[148..156].copy_from_slice(b"        ");
        let sum: u64 = h.iter().map(|&b| b as u64).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        self.inner.write_all(&h)?;
        self.inner.write_all(data)?;
        let pad = (padded(size) - size) as usize;
        self.inner.write_all(&[0u8; BLOCK][..pad])?;
        self.written += BLOCK as u64 + padded(size);
        Ok(())
    }
}

fn check_name(name: &str) -> std::io::Result<()> {
    if name.is_empty() || name.contains('\0') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("tar member name {name:?} is empty or holds a NUL byte"),
        ));
    }
    Ok(())
}

fn read_error(e: std::io::Error) -> Error {
    Error::new(ErrorKind::Corrupt, format!("reading the tar stream: {e}")).with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header block with a valid checksum.
    fn header(name: &str, size: u64, flag: u8) -> Vec<u8> {
        let mut h = vec![0u8; BLOCK];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
        h[156] = flag;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| b as u32).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        h
    }

    fn entry(name: &str, data: &[u8], flag: u8) -> Vec<u8> {
        let mut e = header(name, data.len() as u64, flag);
        e.extend(data);
        e.resize(e.len().next_multiple_of(BLOCK), 0);
        e
    }

    fn collect(data: &[u8]) -> Result<Vec<(String, Vec<u8>)>> {
        let in_memory: Vec<_> = members(data)
            .map(|m| m.map(|m| (m.name.clone(), m.data(data).to_vec())))
            .collect::<Result<_>>()?;
        let streamed: Vec<_> = TarReader::new(data).collect::<Result<_>>()?;
        assert_eq!(in_memory, streamed);
        Ok(in_memory)
    }

    #[test]
    fn long_names_pax_and_skipped_entries() {
        let long = "d/".repeat(80) + "file.bin";
        let mut a = entry("dir/", b"", b'5');
        a.extend(entry("././@LongLink", format!("{long}\0").as_bytes(), b'L'));
        a.extend(entry("trunc", b"abc", b'0'));
        let pax_name = "p".repeat(150) + ".json";
        let rec = format!(" path={pax_name}\n");
        let rec = format!("{}{rec}", rec.len() + 3);
        a.extend(entry("PaxHeaders/x", rec.as_bytes(), b'x'));
        a.extend(entry("short", b"{}", b'0'));
        a.extend(entry("empty", b"", b'0'));
        a.extend(header("link", 0, b'2'));
        a.extend([0u8; 1024]);
        a.extend(b"trailing garbage after the end marker");
        let got = collect(&a).unwrap();
        assert_eq!(
            got,
            [
                (long, b"abc".to_vec()),
                (pax_name, b"{}".to_vec()),
                ("empty".to_owned(), vec![]),
            ]
        );
    }

    #[test]
    fn errors_are_named() {
        let mut a = entry("a.txt", b"hello", b'0');
        a.extend(entry("b.txt", &[7u8; 600], b'0'));
        // Cut inside b.txt's data.
        let cut = &a[..512 + 512 + 512 + 100];
        let err = members(cut).nth(1).unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Truncated);
        assert_eq!(err.key(), "b.txt");
        let err = TarReader::new(cut).nth(1).unwrap().unwrap_err();
        assert_eq!((err.kind(), err.key()), (ErrorKind::Truncated, "b.txt"));

        let mut bad = a.clone();
        bad[1024 + 3] ^= 0xff; // b.txt's header
        let err = members(&bad).nth(1).unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        assert!(err.to_string().contains("byte 1024"), "{err}");

        let err = members(b"<html>not a tar</html>".repeat(30).as_slice())
            .next()
            .unwrap()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnknownFormat);
        assert_eq!(
            members(&[]).next().unwrap().unwrap_err().kind(),
            ErrorKind::Empty
        );
        // No end marker after a whole member: the archive ends there, as in `tarfile`.
        let mut it = members(&a[..1024]);
        assert_eq!(it.next().unwrap().unwrap().data(&a), b"hello");
        assert!(it.next().is_none());
        assert_eq!(TarReader::new(&a[..1024]).count(), 1);
        // A header cut after its name fields names its member; one cut before does not.
        for (cut, key) in [(1024 + 500, "b.txt"), (1024 + 499, "")] {
            let err = members(&a[..cut]).nth(1).unwrap().unwrap_err();
            assert_eq!((err.kind(), err.key()), (ErrorKind::Truncated, key));
            let err = TarReader::new(&a[..cut]).nth(1).unwrap().unwrap_err();
            assert_eq!((err.kind(), err.key()), (ErrorKind::Truncated, key));
        }
        assert_eq!(
            members(&a[..700]).next().unwrap().unwrap().data(&a),
            b"hello"
        );
        assert_eq!(
            members(&a[..1100]).nth(1).unwrap().unwrap_err().kind(),
            ErrorKind::Truncated
        );
    }

    #[test]
    fn links_are_entries_of_the_stream_and_skipped_in_memory() {
        let mut a = entry("d/0001.png", b"red", b'0');
        let mut hard = header("d/0002.png", 0, b'1');
        hard[157..167].copy_from_slice(b"d/0001.png");
        let sum: u32 = hard[..148]
            .iter()
            .chain(&hard[156..])
            .map(|&b| b as u32)
            .sum();
        hard[148..155].copy_from_slice(format!("{:06o}\0", sum + 8 * 32).as_bytes());
        a.extend(hard);
        let long_target = "t/".repeat(60) + "0001.png";
        a.extend(entry(
            "././@LongLink",
            format!("{long_target}\0").as_bytes(),
            b'K',
        ));
        a.extend(header("d/0003.png", 0, b'2'));
        let rec = " linkpath=0001.png\n";
        let rec = format!("{}{rec}", rec.len() + 2);
        a.extend(entry("PaxHeaders/0004", rec.as_bytes(), b'x'));
        a.extend(header("d/0004.png", 0, b'2'));
        a.extend([0u8; 1024]);
        let mut r = TarReader::new(a.as_slice());
        let mut got = Vec::new();
        while let Some(e) = r.next_entry().unwrap() {
            got.push(e);
        }
        let link = |name: &str, target: &str, hard| Entry::Link {
            name: name.into(),
            target: target.into(),
            hard,
        };
        assert_eq!(
            got,
            [
                Entry::File {
                    name: "d/0001.png".into(),
                    data: b"red".to_vec()
                },
                link("d/0002.png", "d/0001.png", true),
                link("d/0003.png", &long_target, false),
                link("d/0004.png", "0001.png", false),
            ]
        );
        // `members` and `next_file` skip links (SPDL 0.8.0's `iter_tarfile`).
        assert_eq!(
            collect(&a).unwrap(),
            [("d/0001.png".into(), b"red".to_vec())]
        );
    }

    #[test]
    fn writer_round_trips() {
        let long = "k/".repeat(70) + "0001.jpg";
        let files = [
            ("0001.cls", b"3".to_vec()),
            (long.as_str(), vec![9u8; 700]),
            ("empty", vec![]),
        ];
        let mut w = TarWriter::new(Vec::new());
        for (n, d) in &files {
            w.append(n, d).unwrap();
        }
        assert!(w.append("", b"x").is_err());
        let archive = w.finish().unwrap();
        assert_eq!(archive.len() % BLOCK, 0);
        let got = collect(&archive).unwrap();
        let want: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|(n, d)| (n.to_string(), d.clone()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn numbers() {
        assert_eq!(number(b"0000644\0", "mode").unwrap(), 0o644);
        assert_eq!(number(b"  17 \0\0\0", "size").unwrap(), 0o17);
        let mut big = [0u8; 12];
        big[0] = 0x80;
        big[7] = 2; // 2 << 32
        assert_eq!(number(&big, "size").unwrap(), 2 << 32);
        assert_eq!(
            number(b"9\0\0\0\0\0\0\0", "size").unwrap_err().kind(),
            ErrorKind::Corrupt
        );
    }
}
