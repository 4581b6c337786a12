//! Tar shards in the WebDataset layout, from local disk: listed from a pattern, dealt to ranks
//! shard by shard, each read as one sequential stream and cut into samples by key.
//!
//! - [`list_shards`]: `train-{0000..0127}.tar` (brace ranges as WebDataset writes them, with
//!   their zero padding), `a-{x,y}.tar`, or a folder (its `*.tar` files, sorted).
//! - [`ShardSource`]: which shards this rank reads in an epoch (a [`Sampler`] over the shard
//!   list: shuffled per epoch from the seed, strided over ranks, with the sampler's
//!   [`crate::Remainder`] policy), and [`ShardSource::epoch`], the samples of those shards.
//! - [`Samples`]: a tar stream cut into [`ShardSample`]s: consecutive members with the same key
//!   (`dir/0001.jpg` + `dir/0001.cls` + `dir/0001.json` is sample `dir/0001` with fields
//!   `jpg`, `cls`, `json`). The key is the path up to the first dot of the file name, the field
//!   the rest (WebDataset's `base_plus_ext`); members with no dot in the file name are skipped.
//!
//! Every sample is read once per epoch when the shard count is a multiple of the world size
//! (otherwise the remainder policy drops or repeats whole shards); ranks get equal sample
//! counts when the shards hold equal counts, as `spdl shard` writes them.
//!
//! Failures are named and the epoch goes on: a shard that cannot be opened, is cut short or
//! holds a corrupt header is one [`ShardError`] naming the shard and the sample it stopped in
//! (that sample and the rest of the shard are lost, never handed on half-read); a sample with
//! two members of the same field is one error for that sample.
//!
//! Resuming: [`ShardSample::state`] is a [`ShardState`] (epoch, shard, byte offset);
//! [`ShardSource::resume`] goes on from there, seeking into the shard.
//!
//! Not yet: shards over HTTP or S3, an in-memory shuffle buffer across samples.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use spdl_io::array::tar::TarReader;

use crate::error::{Error, ErrorKind, Result};
use crate::{DistInfo, Sampler, SamplerOptions};

/// One sample: the members of a shard that share a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSample {
    /// Index of the shard in the source's shard list.
    pub shard: usize,
    /// The key: the member path up to the first dot of its file name (e.g. `train/0001`).
    pub key: String,
    /// `(field, bytes)` in archive order, the field being the name after that dot (`jpg`,
    /// `cls`, `seg.png`).
    pub fields: Vec<(String, Vec<u8>)>,
    /// Byte offset in the shard of the sample's first header.
    pub offset: u64,
    /// Byte offset in the shard just past the sample's last member (where the next one starts).
    pub end: u64,
}

impl ShardSample {
    /// The bytes of field `name` (e.g. `"jpg"`), if the sample has one.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, d)| d.as_slice())
    }

    /// The state to resume after this sample in `epoch` (see [`ShardSource::resume`]).
    pub fn state(&self, epoch: u64) -> ShardState {
        ShardState {
            epoch,
            shard: self.shard,
            offset: self.end,
        }
    }
}

/// Where an epoch stands: resume in `shard` (index in the shard list) at byte `offset`, the
/// start of the first sample not yet delivered. Small and serializable (JSON:
/// `{"epoch":0,"shard":3,"offset":15360}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ShardState {
    /// The epoch.
    pub epoch: u64,
    /// Index of the shard in the source's shard list.
    pub shard: usize,
    /// Byte offset in that shard.
    pub offset: u64,
}

/// What went wrong with a shard or a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShardErrorKind {
    /// The shard could not be opened or read (the [`Error`] of the file system).
    Open,
    /// The shard ends inside a member or header, or without its end-of-archive marker.
    Truncated,
    /// A header fails its checksum or is malformed; the rest of the shard is skipped.
    Corrupt,
    /// Two members of one sample have the same field.
    DuplicateField,
}

/// A failed shard or sample: the shard path, the sample key when known, and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardError {
    /// What went wrong.
    pub kind: ShardErrorKind,
    /// The shard file.
    pub shard: PathBuf,
    /// The sample the failure concerns (the one being read when the shard failed), if known.
    pub key: Option<String>,
    /// A human-readable reason.
    pub reason: String,
}

impl std::fmt::Display for ShardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.shard.display())?;
        if let Some(k) = &self.key {
            write!(f, ": sample {k}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ShardError {}

/// Expands WebDataset brace patterns: `{0000..0127}` (inclusive, zero padding kept from the
/// first bound) and `{a,b,c}`, several per pattern. Errors (`InvalidArgument`) for an
/// unclosed brace, a descending or non-numeric range, or more than a million names.
pub fn expand_braces(pattern: &str) -> Result<Vec<String>> {
    const MAX: usize = 1_000_000;
    let Some(open) = pattern.find('{') else {
        return Ok(vec![pattern.to_owned()]);
    };
    let invalid = |why: &str| Error::new(ErrorKind::InvalidArgument, format!("{pattern:?}: {why}"));
    let close = pattern[open..]
        .find('}')
        .map(|i| open + i)
        .ok_or_else(|| invalid("unclosed '{'"))?;
    let (head, body, tail) = (
        &pattern[..open],
        &pattern[open + 1..close],
        &pattern[close + 1..],
    );
    let choices: Vec<String> = if let Some((a, b)) = body.split_once("..") {
        let (lo, hi): (u64, u64) = match (a.parse(), b.parse()) {
            (Ok(lo), Ok(hi)) if lo <= hi => (lo, hi),
            _ => return Err(invalid("a range must be {LOW..HIGH} with LOW <= HIGH")),
        };
        if hi - lo >= MAX as u64 {
            return Err(invalid("the range names more than a million shards"));
        }
        (lo..=hi)
            .map(|i| format!("{i:0width$}", width = a.len()))
            .collect()
    } else {
        body.split(',').map(str::to_owned).collect()
    };
    // The first brace varies slowest, as in WebDataset.
    let rests = expand_braces(tail)?;
    let mut out = Vec::new();
    for c in &choices {
        for rest in &rests {
            out.push(format!("{head}{c}{rest}"));
            if out.len() > MAX {
                return Err(invalid("the pattern names more than a million shards"));
            }
        }
    }
    Ok(out)
}

/// The shard files of `pattern`: a folder (its `*.tar` files, sorted by name) or a brace
/// pattern (see [`expand_braces`]) whose every name must be an existing file.
///
/// Errors: `NotFound` naming the first missing shard, `InvalidArgument` for a bad pattern or
/// a folder with no `.tar` file, I/O errors listing the folder.
pub fn list_shards(pattern: &str) -> Result<Vec<PathBuf>> {
    let as_path = Path::new(pattern);
    if as_path.is_dir() {
        let mut shards = Vec::new();
        let entries = std::fs::read_dir(as_path).map_err(|e| Error::io(e, as_path))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(e, as_path))?;
            let path = entry.path();
            if path.extension().is_some_and(|x| x == "tar") && path.is_file() {
                shards.push(path);
            }
        }
        shards.sort();
        if shards.is_empty() {
            return Err(
                Error::new(ErrorKind::InvalidArgument, "no .tar shard in the folder")
                    .with_path(as_path),
            );
        }
        return Ok(shards);
    }
    let shards: Vec<PathBuf> = expand_braces(pattern)?
        .into_iter()
        .map(PathBuf::from)
        .collect();
    for s in &shards {
        if !s.is_file() {
            return Err(Error::new(ErrorKind::NotFound, "no such shard file").with_path(s));
        }
    }
    Ok(shards)
}

/// Splits a member name into `(key, field)` at the first dot of its file name.
fn split_key(name: &str) -> Option<(&str, &str)> {
    let base = name.rfind('/').map_or(0, |i| i + 1);
    let dot = name[base..].find('.')? + base;
    (dot > base).then(|| (&name[..dot], &name[dot + 1..]))
}

/// A tar stream cut into samples (see the module docs). Yields each complete sample; after a
/// failure of the stream, one error naming the sample it stopped in, then nothing.
pub struct Samples<R: Read> {
    reader: TarReader<R>,
    shard: usize,
    path: PathBuf,
    current: Option<ShardSample>,
    /// A sample whose fields repeat: reported when it is complete.
    duplicate: Option<String>,
    /// The stream's failure, reported after the whole sample before it.
    pending: Option<ShardError>,
    done: bool,
    /// Offset in the shard of the reader's first byte (a resumed shard starts mid-file).
    base: u64,
}

impl<R: Read> Samples<R> {
    /// Samples of the tar stream `reader`, for shard number `shard` at `path` (for errors).
    pub fn new(reader: R, shard: usize, path: impl Into<PathBuf>) -> Self {
        Self::at(reader, shard, path, 0)
    }

    /// As [`Samples::new`], for a `reader` that starts at byte `base` of the shard (a sample
    /// boundary).
    pub fn at(reader: R, shard: usize, path: impl Into<PathBuf>, base: u64) -> Self {
        Samples {
            base,
            reader: TarReader::new(reader),
            shard,
            path: path.into(),
            current: None,
            duplicate: None,
            pending: None,
            done: false,
        }
    }

    fn error(&self, kind: ShardErrorKind, key: Option<String>, reason: String) -> ShardError {
        ShardError {
            kind,
            shard: self.path.clone(),
            key,
            reason,
        }
    }

    /// Hands on the finished sample (or its duplicate-field error).
    fn finish_current(&mut self) -> Option<std::result::Result<ShardSample, ShardError>> {
        let sample = self.current.take()?;
        match self.duplicate.take() {
            Some(field) => Some(Err(self.error(
                ShardErrorKind::DuplicateField,
                Some(sample.key),
                format!("two members for field {field:?}"),
            ))),
            None => Some(Ok(sample)),
        }
    }
}

impl<R: Read> Iterator for Samples<R> {
    type Item = std::result::Result<ShardSample, ShardError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.pending.take() {
            return Some(Err(e));
        }
        while !self.done {
            let before = self.base + self.reader.position();
            match self.reader.next_file() {
                Ok(Some((name, data))) => {
                    let after = self.base + self.reader.position();
                    let Some((key, field)) = split_key(&name) else {
                        continue;
                    };
                    match &mut self.current {
                        Some(s) if s.key == key => {
                            if s.fields.iter().any(|(f, _)| f == field) {
                                self.duplicate.get_or_insert_with(|| field.to_owned());
                            } else {
                                s.fields.push((field.to_owned(), data));
                            }
                            s.end = after;
                        }
                        _ => {
                            let done = self.finish_current();
                            self.current = Some(ShardSample {
                                shard: self.shard,
                                key: key.to_owned(),
                                fields: vec![(field.to_owned(), data)],
                                offset: before,
                                end: after,
                            });
                            if done.is_some() {
                                return done;
                            }
                        }
                    }
                }
                Ok(None) => {
                    self.done = true;
                    return self.finish_current();
                }
                Err(e) => {
                    self.done = true;
                    let kind = match e.kind() {
                        spdl_io::ErrorKind::Truncated | spdl_io::ErrorKind::Empty => {
                            ShardErrorKind::Truncated
                        }
                        _ => ShardErrorKind::Corrupt,
                    };
                    let failed_key = split_key(e.key()).map(|(k, _)| k.to_owned());
                    let reason = e.to_string();
                    // A member of another sample failed: the sample read so far is whole.
                    if let (Some(fk), Some(cur)) = (&failed_key, &self.current) {
                        if *fk != cur.key {
                            self.pending = Some(self.error(kind, failed_key.clone(), reason));
                            return self.finish_current();
                        }
                    }
                    // Otherwise the sample being read may miss members: it fails with the shard.
                    let key = self.current.take().map(|s| s.key).or(failed_key);
                    return Some(Err(self.error(kind, key, reason)));
                }
            }
        }
        None
    }
}

/// Shards dealt to ranks and read sample by sample (see the module docs).
#[derive(Debug, Clone)]
pub struct ShardSource {
    shards: Vec<PathBuf>,
    sampler: Sampler,
}

impl ShardSource {
    /// A source over `shards` for rank `dist`; `options` shuffle the shard order per epoch
    /// (seeded) and set the remainder policy when the shards do not divide among the ranks.
    ///
    /// Errors: `InvalidArgument` for an empty shard list (or as [`Sampler::new`]).
    pub fn new(shards: Vec<PathBuf>, dist: DistInfo, options: SamplerOptions) -> Result<Self> {
        if shards.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "no shard to read"));
        }
        let sampler = Sampler::new(shards.len() as u64, dist, options)?;
        Ok(ShardSource { shards, sampler })
    }

    /// All the shards, in list order.
    pub fn shards(&self) -> &[PathBuf] {
        &self.shards
    }

    /// The shard indices this rank reads in `epoch`, in reading order.
    pub fn epoch_shards(&self, epoch: u64) -> Vec<usize> {
        let mut sampler = self.sampler.clone();
        sampler.set_epoch(epoch);
        sampler.iter().map(|s| s.index as usize).collect()
    }

    /// The samples of this rank's shards in `epoch`, shard after shard, each shard read once
    /// from its start as a sequential stream. Failures are items ([`ShardError`]); the
    /// iteration goes on with the next shard.
    pub fn epoch(&self, epoch: u64) -> EpochSamples {
        EpochSamples {
            shards: self.shards.clone(),
            order: self.epoch_shards(epoch).into(),
            current: None,
            start: None,
        }
    }

    /// The rest of `state.epoch` after a sample's [`ShardSample::state`]: this rank's shards
    /// from `state.shard` on, that shard read from byte `state.offset` (seeked to: no shard is
    /// read again from its start).
    ///
    /// Errors: `InvalidState` when `state.shard` is not one of this rank's shards in that
    /// epoch.
    pub fn resume(&self, state: &ShardState) -> Result<EpochSamples> {
        let order = self.epoch_shards(state.epoch);
        let at = order
            .iter()
            .position(|&s| s == state.shard)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidState,
                    format!(
                        "shard {} is not read by this rank in epoch {}",
                        state.shard, state.epoch
                    ),
                )
            })?;
        Ok(EpochSamples {
            shards: self.shards.clone(),
            order: order[at..].iter().copied().collect(),
            current: None,
            start: Some(state.offset),
        })
    }
}

/// Iterator of [`ShardSource::epoch`].
pub struct EpochSamples {
    shards: Vec<PathBuf>,
    order: VecDeque<usize>,
    current: Option<Samples<BufReader<File>>>,
    /// Where to start in the first shard (a resumed epoch).
    start: Option<u64>,
}

impl Iterator for EpochSamples {
    type Item = std::result::Result<ShardSample, ShardError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(samples) = &mut self.current {
                match samples.next() {
                    Some(item) => return Some(item),
                    None => self.current = None,
                }
            }
            let shard = self.order.pop_front()?;
            let path = &self.shards[shard];
            let base = self.start.take().unwrap_or(0);
            let opened = File::open(path).and_then(|mut f| {
                if base > 0 {
                    f.seek(SeekFrom::Start(base))?;
                }
                Ok(f)
            });
            match opened {
                Ok(f) => {
                    let reader = BufReader::with_capacity(1 << 20, f);
                    self.current = Some(Samples::at(reader, shard, path, base));
                }
                Err(e) => {
                    return Some(Err(ShardError {
                        kind: ShardErrorKind::Open,
                        shard: path.clone(),
                        key: None,
                        reason: Error::io(e, path).to_string(),
                    }))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces() {
        assert_eq!(
            expand_braces("s-{08..11}.tar").unwrap(),
            ["s-08.tar", "s-09.tar", "s-10.tar", "s-11.tar"]
        );
        assert_eq!(
            expand_braces("{a,b}-{0..1}.tar").unwrap(),
            ["a-0.tar", "a-1.tar", "b-0.tar", "b-1.tar"]
        );
        assert_eq!(expand_braces("plain.tar").unwrap(), ["plain.tar"]);
        for bad in ["x{1..", "x{3..1}", "x{a..b}"] {
            assert_eq!(
                expand_braces(bad).unwrap_err().kind(),
                ErrorKind::InvalidArgument
            );
        }
    }

    #[test]
    fn keys() {
        assert_eq!(split_key("d/0001.jpg"), Some(("d/0001", "jpg")));
        assert_eq!(split_key("a.b/0001.seg.png"), Some(("a.b/0001", "seg.png")));
        assert_eq!(split_key("README"), None);
        assert_eq!(split_key("d/.hidden"), None);
    }
}
