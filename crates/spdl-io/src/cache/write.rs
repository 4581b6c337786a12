//! Writing a decoded cache: records stored at their index from any thread, in any order;
//! the file appears under its name only once complete.

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::format::{Entry, Header, DATA_OFFSET, NO_LABEL, STORED};
use crate::error::{Error, ErrorKind, Result};

/// Writes a decoded cache of `count` records of one `[H, W, C]` u8 shape. Records are written
/// with [`CacheWriter::put`] (from several threads at once, in any order) straight to their
/// place in a temporary file next to `path`; [`CacheWriter::finish`] writes the checksummed
/// index and header and renames the file to `path`. A record never put is marked missing:
/// reading it is an error naming it.
#[derive(Debug)]
pub struct CacheWriter {
    file: File,
    tmp: PathBuf,
    path: PathBuf,
    header: Header,
    entries: Mutex<Vec<Option<Entry>>>,
}

fn io_err(e: std::io::Error, path: &Path) -> Error {
    Error::new(ErrorKind::Read, format!("decoded cache: {e}"))
        .with_key(&path.display().to_string())
        .with_source(e)
}

impl CacheWriter {
    /// Creates the temporary file for `count` records of `shape` (`[H, W, C]`).
    ///
    /// # Errors
    /// `InvalidArgument` for an empty shape or more than 2^32 - 1 pixels per side; `Read`
    /// (an I/O error) naming the file when it cannot be created.
    pub fn create(path: impl AsRef<Path>, shape: [usize; 3], count: u64) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if shape.contains(&0) || shape.iter().any(|&d| d > u32::MAX as usize) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("decoded cache: shape {shape:?} has an empty or too large side"),
            ));
        }
        // The finished file is renamed over `path`: only a regular file may be replaced (a
        // device node or a link would be swapped for a plain file).
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if !meta.is_file() {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "decoded cache: {} exists and is not a regular file; give a new path",
                        path.display()
                    ),
                ));
            }
        }
        let mut tmp = path.clone().into_os_string();
        tmp.push(".partial");
        let tmp = PathBuf::from(tmp);
        let file = File::create(&tmp).map_err(|e| io_err(e, &tmp))?;
        let record = (shape[0] * shape[1] * shape[2]) as u64;
        let header = Header {
            shape,
            count,
            data_offset: DATA_OFFSET,
            index_offset: DATA_OFFSET + record * count,
            index_crc: 0,
        };
        Ok(CacheWriter {
            file,
            tmp,
            path,
            header,
            entries: Mutex::new(vec![None; count as usize]),
        })
    }

    /// Stores record `index`: `pixels` (`[H, W, C]` u8 of the cache's shape) and its label.
    ///
    /// # Errors
    /// `InvalidArgument` for an index out of range or pixels of another size; `Read` for an
    /// I/O error.
    pub fn put(&self, index: u64, pixels: &[u8], label: Option<i64>) -> Result<()> {
        let record = self.header.record_size();
        if index >= self.header.count || pixels.len() as u64 != record {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "decoded cache: record {index} of {} with {} bytes (expected {record})",
                    self.header.count,
                    pixels.len()
                ),
            ));
        }
        let at = self.header.data_offset + index * record;
        self.file
            .write_all_at(pixels, at)
            .map_err(|e| io_err(e, &self.tmp))?;
        let entry = Entry {
            label: label.unwrap_or(NO_LABEL),
            crc: crc32fast::hash(pixels),
            flags: STORED,
        };
        self.entries.lock().unwrap_or_else(|e| e.into_inner())[index as usize] = Some(entry);
        Ok(())
    }

    /// Writes the index and the header, then renames the file to its name. Returns how many
    /// records are missing (never put).
    ///
    /// # Errors
    /// `Read` for an I/O error (the temporary file is left for inspection).
    pub fn finish(self) -> Result<u64> {
        let entries = self.entries.into_inner().unwrap_or_else(|e| e.into_inner());
        let missing = entries.iter().filter(|e| e.is_none()).count() as u64;
        let mut index = Vec::with_capacity(entries.len() * 16);
        for e in &entries {
            let e = e.unwrap_or(Entry {
                label: NO_LABEL,
                crc: 0,
                flags: 0,
            });
            index.extend_from_slice(&e.to_bytes());
        }
        let header = Header {
            index_crc: crc32fast::hash(&index),
            ..self.header
        };
        let io = |e| io_err(e, &self.tmp);
        self.file
            .write_all_at(&index, header.index_offset)
            .map_err(io)?;
        self.file.write_all_at(&header.to_bytes(), 0).map_err(io)?;
        // Records never put (and an empty index) leave holes: the file still has its full size.
        self.file
            .set_len(header.index_offset + index.len() as u64)
            .map_err(io)?;
        let mut file = self.file;
        file.flush().map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| io_err(e, &self.path))?;
        Ok(missing)
    }
}
