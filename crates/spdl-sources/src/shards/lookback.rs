//! Links whose target is no longer held (see [`Samples::with_lookback`]): the shard is read
//! again from its start once, as far as the links need, into an index of its members' names
//! and byte ranges; each target's bytes are then read by their range (a seek, or a range
//! request). However many links a shard holds, its start is read again at most once.
//!
//! [`Samples::with_lookback`]: super::Samples::with_lookback

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};

use spdl_tar::{padded, Entry, TarReader};

use super::samples::{link_path, normalize, Lookback};
use super::{shared_runtime, stream};
use crate::error::Error;
use crate::fetch::Fetcher;
use crate::uri::Uri;

/// Links followed from one to the next before giving up (a chain, not a loop: each target
/// lies before its link).
const MAX_CHAIN: usize = 8;

/// A [`Lookback`] for shard `uri`, read with `fetcher` when remote.
pub(super) fn lookback(uri: Uri, fetcher: Fetcher) -> Lookback {
    let mut index = Index {
        uri,
        fetcher,
        reader: None,
        scanned: 0,
        entries: HashMap::new(),
        failed: None,
    };
    Box::new(move |path: &str, limit: u64| index.find(path, limit))
}

/// Where an indexed entry's bytes are.
enum Target {
    /// A regular member's data: offset and size.
    Data { at: u64, size: u64 },
    /// A link: the path it names.
    Link(String),
}

struct Index {
    uri: Uri,
    fetcher: Fetcher,
    /// The shard read again from its start, at `scanned`.
    reader: Option<TarReader<Box<dyn Read + Send>>>,
    /// Bytes of the shard indexed.
    scanned: u64,
    /// Normalized path: `(offset of its first header, entry)`, in stream order.
    entries: HashMap<String, Vec<(u64, Target)>>,
    /// Why indexing failed (it is not tried again).
    failed: Option<String>,
}

impl Index {
    /// The bytes of the last member named `path` before byte `limit`, following links.
    fn find(&mut self, path: &str, limit: u64) -> Result<Option<Vec<u8>>, String> {
        self.scan_to(limit)?;
        let (mut path, mut limit) = (path.to_owned(), limit);
        for _ in 0..MAX_CHAIN {
            let found = self
                .entries
                .get(&path)
                .and_then(|v| v.iter().rev().find(|(at, _)| *at < limit));
            match found {
                None => return Ok(None),
                Some((_, Target::Data { at, size })) => {
                    let (at, size) = (*at, *size);
                    return self.read(at, size).map(Some);
                }
                Some((at, Target::Link(next))) => (path, limit) = (next.clone(), *at),
            }
        }
        Err(format!("a chain of more than {MAX_CHAIN} links"))
    }

    /// Indexes the shard up to byte `limit` (a link's header: the entries before it are whole).
    fn scan_to(&mut self, limit: u64) -> Result<(), String> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.reader.is_none() && self.scanned < limit {
            match self.open() {
                Ok(r) => self.reader = Some(TarReader::new(r)),
                Err(e) => return Err(self.fail(e)),
            }
        }
        while self.scanned < limit {
            let Some(r) = &mut self.reader else {
                break;
            };
            let before = TarReader::position(r);
            match r.next_entry() {
                Ok(Some(Entry::File { name, data })) => {
                    let size = data.len() as u64;
                    let at = TarReader::position(r).saturating_sub(padded(size));
                    if let Some(p) = normalize(&name) {
                        let list = self.entries.entry(p).or_default();
                        list.push((before, Target::Data { at, size }));
                    }
                }
                Ok(Some(Entry::Link { name, target, hard })) => {
                    if let (Some(p), Some(t)) = (normalize(&name), link_path(&name, &target, hard))
                    {
                        self.entries
                            .entry(p)
                            .or_default()
                            .push((before, Target::Link(t)));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let e = format!("reading the shard again for the target: {e}");
                    return Err(self.fail(e));
                }
            }
            self.scanned = TarReader::position(r);
        }
        Ok(())
    }

    fn fail(&mut self, e: String) -> String {
        self.reader = None;
        self.failed = Some(e.clone());
        e
    }

    /// The shard from its start.
    fn open(&self) -> Result<Box<dyn Read + Send>, String> {
        if let Uri::Local(p) = &self.uri {
            let f = File::open(p).map_err(|e| Error::io(e, p).to_string())?;
            return Ok(Box::new(BufReader::new(f)));
        }
        let rt = shared_runtime().map_err(|e| e.to_string())?;
        let r = stream::RemoteRead::open(rt, self.fetcher.clone(), self.uri.clone(), 0)
            .map_err(|e| e.to_string())?;
        Ok(Box::new(BufReader::new(r)))
    }

    /// `size` bytes at `at` of the shard (a seek, or a range request).
    fn read(&self, at: u64, size: u64) -> Result<Vec<u8>, String> {
        if size == 0 {
            return Ok(Vec::new());
        }
        if let Uri::Local(p) = &self.uri {
            let mut buf = Vec::new();
            File::open(p)
                .and_then(|mut f| {
                    f.seek(SeekFrom::Start(at))?;
                    f.take(size).read_to_end(&mut buf)
                })
                .map_err(|e| Error::io(e, p).to_string())?;
            if buf.len() as u64 != size {
                return Err(format!(
                    "the target's bytes at {at} are cut short (the shard changed?)"
                ));
            }
            return Ok(buf);
        }
        let rt = shared_runtime().map_err(|e| e.to_string())?;
        let bytes = rt
            .block_on(self.fetcher.fetch_range(&self.uri, at..at + size))
            .map_err(|e| e.to_string())?;
        Ok(bytes.to_vec())
    }
}
