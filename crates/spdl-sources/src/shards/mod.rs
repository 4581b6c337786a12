//! Tar shards in the WebDataset layout, from local disk, HTTP(S) or S3: listed from a pattern,
//! dealt to ranks shard by shard, each read as one sequential stream and cut into samples by
//! key, optionally through a bounded shuffle buffer.
//!
//! - [`list_shards`] / [`list_shards_with`]: `train-{0000..0127}.tar` (brace ranges as
//!   WebDataset writes them, with their zero padding, local, `http(s)://` or `s3://`),
//!   `a-{x,y}.tar`, a folder (its `*.tar` files, sorted), an S3 prefix (its `.tar` objects) or
//!   an HTTP/S3 manifest (one shard URI per line).
//! - [`ShardSource`]: which shards this rank reads in an epoch (a [`Sampler`] over the shard
//!   list: shuffled per epoch from the seed, strided over ranks, with the sampler's
//!   [`crate::Remainder`] policy), and [`ShardSource::epoch`], the samples of those shards.
//! - [`Samples`]: a tar stream cut into [`ShardSample`]s: consecutive members with the same key
//!   (`dir/0001.jpg` + `dir/0001.cls` + `dir/0001.json` is sample `dir/0001` with fields
//!   `jpg`, `cls`, `json`). The key is the path up to the first dot of the file name, the field
//!   the rest (WebDataset's `base_plus_ext`); members with no dot in the file name are skipped.
//!   Hard and symbolic links resolve to their target's bytes; see [`Samples`] for links, keys
//!   out of order and cut shards.
//!
//! Every sample is read once per epoch when the shard count is a multiple of the world size
//! (otherwise the remainder policy drops or repeats whole shards); ranks get equal sample
//! counts when the shards hold equal counts, as `spdl shard` writes them.
//!
//! Reading: a local shard with one buffered file; a remote one as one streaming GET (through
//! the [`Fetcher`]'s backend, with its retries), reopened with a range request at the byte it
//! stopped at when the connection breaks. With [`ShardSource::with_shuffle_buffer`]`(n)`,
//! samples wait in a buffer of `n` and leave it in a seeded random order (WebDataset's
//! `shuffle(n)`), on top of the shard-order shuffle.
//!
//! Every sample seen is handed on once, whole or as one failure: `samples + failures = seen`.
//! Failures are named, counted ([`EpochSamples::failures`]) and the epoch goes on: a shard that
//! cannot be opened, is cut short inside a member or header, loses its connection for good or
//! holds a corrupt header is one [`ShardError`] naming the shard and the sample it stopped in
//! (that sample and the rest of the shard are lost, never handed on half-read; the samples
//! before it are delivered); a shard that ends after a whole member without its
//! end-of-archive marker simply ends there. A sample with two members of the same field, a
//! link that cannot be resolved, or members not consecutive in the shard is one error for
//! that sample.
//!
//! Read-ahead: while one remote shard streams, the next [`ShardSource::with_readahead`] shards
//! (default [`DEFAULT_READAHEAD`]) of the rank's order are already being opened (their GETs
//! sent and answered), so a shard's request latency is paid while the one before is read.
//! Their bodies are read only when their turn comes (memory: the connections' socket buffers,
//! no copy of a shard); the order of samples and failures is that of the shard order.
//!
//! Resuming: [`EpochSamples::state`] is a [`ShardState`] (epoch, shard, byte offset, and the
//! shuffle buffer's samples by their byte ranges); [`ShardSource::resume`] goes on from there,
//! seeking (or asking for a range) into the shard and reading each buffered sample by its
//! range: no shard is read again from its start. A state taken after a failure handed on
//! resumes after it (a failed shard is marked [`ShardState::SHARD_DONE`]; a failed sample is
//! passed), and carries the epoch's failure count: each failure is counted once per epoch.

mod lookback;
mod pattern;
mod samples;
mod shuffle;
mod stream;

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, Cursor, Read, Seek, SeekFrom};
use std::sync::Arc;

pub use pattern::{expand_braces, list_shards, list_shards_with};
pub use samples::{Lookback, Samples, REGROUP_WINDOW};

/// Remote shards opened ahead of their turn by default (see [`ShardSource::with_readahead`]).
pub const DEFAULT_READAHEAD: usize = 2;

use crate::error::{Error, ErrorKind, Result};
use crate::fetch::{FetchOptions, Fetcher};
use crate::uri::Uri;
use crate::{DistInfo, Sampler, SamplerOptions};
use shuffle::ShuffleBuffer;

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

    /// The state to resume after this sample in `epoch` when reading without a shuffle
    /// buffer, in a shard whose keys are grouped (see [`ShardSource::resume`]; in general, and
    /// with a buffer, use [`EpochSamples::state`], which also counts failures and keys out of
    /// order).
    pub fn state(&self, epoch: u64) -> ShardState {
        ShardState {
            epoch,
            shard: self.shard,
            offset: self.end,
            skip: 0,
            draws: 0,
            buffered: Vec::new(),
            failures: 0,
        }
    }

    fn span(&self) -> SampleSpan {
        SampleSpan {
            shard: self.shard,
            offset: self.offset,
            end: self.end,
        }
    }
}

/// Where an epoch stands: reading goes on in `shard` (index in the shard list) at byte
/// `offset`, the start of the first sample not yet read, passing over the first `skip` items
/// read from there (handed on already: see [`Samples::resume_offset`]); with a shuffle buffer, `buffered`
/// are the samples read but not yet delivered (in buffer order) and `draws` the samples
/// delivered from the buffer; `failures` are the failures handed on so far in the epoch.
/// Serializable (JSON: `{"epoch":0,"shard":3,"offset":15360}` without a buffer or failure).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ShardState {
    /// The epoch.
    pub epoch: u64,
    /// Index of the shard in the source's shard list.
    pub shard: usize,
    /// Byte offset in that shard, or [`ShardState::SHARD_DONE`]: the shard failed and
    /// reading goes on with the next one.
    pub offset: u64,
    /// Items read from `offset` on that were handed on already (0 but after a failure of keys
    /// out of order handed on before samples inside its span).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skip: u64,
    /// Samples drawn from the shuffle buffer so far in the epoch (0 without a buffer).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub draws: u64,
    /// The samples waiting in the shuffle buffer, in its order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buffered: Vec<SampleSpan>,
    /// Failures handed on so far in the epoch ([`EpochSamples::failures`] of a resume goes on
    /// from there).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u64,
}

impl ShardState {
    /// `offset` of a shard whose failure was handed on: nothing more of it is read.
    pub const SHARD_DONE: u64 = u64::MAX;
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where a sample lies: shard index and the byte range of its members (headers included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SampleSpan {
    /// Index of the shard in the source's shard list.
    pub shard: usize,
    /// Offset of the sample's first header.
    pub offset: u64,
    /// Offset just past its last member.
    pub end: u64,
}

/// What went wrong with a shard or a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShardErrorKind {
    /// The shard could not be opened (missing, unreachable, refused; the [`Error`] of the
    /// file system or of the fetch after its retries).
    Open,
    /// Reading the shard failed for good part way (the connection was lost and could not be
    /// resumed): the sample being read and the rest of the shard are lost.
    Read,
    /// The shard ends inside a member or header, or without its end-of-archive marker.
    Truncated,
    /// A header fails its checksum or is malformed; the rest of the shard is skipped.
    Corrupt,
    /// Two members of one sample have the same field.
    DuplicateField,
    /// A hard or symbolic link of the sample cannot be resolved (see [`Samples`]).
    Link,
    /// The sample lacks a field the reader requires ([`ShardSource::with_required_fields`]).
    MissingField,
    /// The sample's members are not consecutive in the shard (see [`Samples`]).
    KeyNotGrouped,
}

/// A failed shard or sample: the shard path, the sample key when known, and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardError {
    /// What went wrong.
    pub kind: ShardErrorKind,
    /// The shard (a path or URI, credentials redacted).
    pub shard: String,
    /// The sample the failure concerns (the one being read when the shard failed), if known.
    pub key: Option<String>,
    /// A human-readable reason.
    pub reason: String,
}

impl std::fmt::Display for ShardErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ShardErrorKind::Open => "cannot open shard",
            ShardErrorKind::Read => "shard read failed",
            ShardErrorKind::Truncated => "truncated shard",
            ShardErrorKind::Corrupt => "corrupt shard",
            ShardErrorKind::DuplicateField => "duplicate field",
            ShardErrorKind::Link => "unresolved link",
            ShardErrorKind::MissingField => "missing field",
            ShardErrorKind::KeyNotGrouped => "key not grouped",
        })
    }
}

/// `KIND: SHARD[: sample KEY]: REASON`, the workspace's order (kind, context, reason), e.g.
/// `truncated shard: train-0000.tar: sample s/00001: truncated: s/00001.jpg: ...`.
impl std::fmt::Display for ShardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.shard)?;
        if let Some(k) = &self.key {
            write!(f, ": sample {k}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ShardError {}

/// Shards dealt to ranks and read sample by sample (see the module docs).
#[derive(Debug, Clone)]
pub struct ShardSource {
    shards: Arc<[Uri]>,
    sampler: Sampler,
    fetcher: Fetcher,
    buffer: usize,
    readahead: usize,
    required: Arc<[Vec<String>]>,
}

impl ShardSource {
    /// A source over `shards` for rank `dist`; `options` shuffle the shard order per epoch
    /// (seeded) and set the remainder policy when the shards do not divide among the ranks.
    /// Remote shards are read with a [`Fetcher`] with default options (see
    /// [`ShardSource::with_fetcher`]); no shuffle buffer.
    ///
    /// Errors: `InvalidArgument` for an empty shard list (or as [`Sampler::new`]).
    pub fn new(shards: Vec<Uri>, dist: DistInfo, options: SamplerOptions) -> Result<Self> {
        if shards.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "no shard to read"));
        }
        let sampler = Sampler::new(shards.len() as u64, dist, options)?;
        Ok(ShardSource {
            shards: shards.into(),
            sampler,
            fetcher: Fetcher::new(FetchOptions::default())?,
            buffer: 0,
            readahead: DEFAULT_READAHEAD,
            required: Arc::new([]),
        })
    }

    /// Reads remote shards with `fetcher` (its timeouts, retries and S3 settings).
    pub fn with_fetcher(mut self, fetcher: Fetcher) -> Self {
        self.fetcher = fetcher;
        self
    }

    /// Passes samples through a shuffle buffer of `capacity` samples (0 or 1: none), drawn
    /// from with a generator seeded by the sampler's seed, the epoch and the rank. Memory: up
    /// to `capacity` samples' bytes.
    pub fn with_shuffle_buffer(mut self, capacity: usize) -> Self {
        self.buffer = if capacity > 1 { capacity } else { 0 };
        self
    }

    /// Makes every sample that lacks one of `fields` one [`ShardErrorKind::MissingField`]
    /// failure naming the shard, the key, the field and the fields it has. Each entry lists
    /// alternatives, one of which is enough (`vec![vec!["jpg".into(), "png".into()]]`: an
    /// image in either); none by default.
    pub fn with_required_fields(mut self, fields: Vec<Vec<String>>) -> Self {
        self.required = fields.into();
        self
    }

    /// Opens up to `shards` remote shards ahead of the one being read (default
    /// [`DEFAULT_READAHEAD`]; 0: each shard is opened when its turn comes). Each one opened
    /// ahead holds one connection whose body waits in the socket buffers until its turn (no
    /// more memory); samples and failures come in the same order whatever the setting.
    /// Local shards are opened in turn (opening a file costs no round trip).
    pub fn with_readahead(mut self, shards: usize) -> Self {
        self.readahead = shards;
        self
    }

    /// All the shards, in list order.
    pub fn shards(&self) -> &[Uri] {
        &self.shards
    }

    /// The shard indices this rank reads in `epoch`, in reading order.
    pub fn epoch_shards(&self, epoch: u64) -> Vec<usize> {
        let mut sampler = self.sampler.clone();
        sampler.set_epoch(epoch);
        sampler.iter().map(|s| s.index as usize).collect()
    }

    /// The samples of this rank's shards in `epoch`, shard after shard, each shard read once
    /// from its start as a sequential stream, through the shuffle buffer if there is one.
    /// Failures are items ([`ShardError`]); the iteration goes on with the next shard.
    ///
    /// Remote shards are read on a Tokio runtime of the iterator's own: do not iterate from
    /// inside an async task.
    pub fn epoch(&self, epoch: u64) -> EpochSamples {
        let order = self.epoch_shards(epoch);
        let cursor = order.first().map_or((0, 0, 0), |&s| (s, 0, 0));
        self.samples(epoch, &order, (0, 0), cursor, 0, Vec::new(), 0)
    }

    /// The rest of `state.epoch` after the sample `state` was taken at
    /// ([`EpochSamples::state`] or [`ShardSample::state`]): this rank's shards from
    /// `state.shard` on, that shard read from byte `state.offset` (seeked to, or a range
    /// request: no shard is read again from its start; its first `state.skip` items passed
    /// over), and the shuffle buffer refilled with
    /// `state.buffered`, each read by its byte range.
    ///
    /// A `state.offset` of [`ShardState::SHARD_DONE`] goes on with the shard after
    /// `state.shard`; the resumed [`EpochSamples::failures`] start at `state.failures`.
    ///
    /// Errors: `InvalidState` when `state.shard` is not one of this rank's shards in that
    /// epoch, or a buffered sample's shard is out of the list.
    pub fn resume(&self, state: &ShardState) -> Result<EpochSamples> {
        let order = self.epoch_shards(state.epoch);
        if order.is_empty() {
            // This rank reads nothing in that epoch (more ranks than shards, remainder dropped).
            return Ok(self.epoch(state.epoch));
        }
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
        if let Some(bad) = state.buffered.iter().find(|s| s.shard >= self.shards.len()) {
            return Err(Error::new(
                ErrorKind::InvalidState,
                format!(
                    "a buffered sample names shard {} of {}",
                    bad.shard,
                    self.shards.len()
                ),
            ));
        }
        // A failed shard is not read again (its failure was counted).
        let (rest, start) = if state.offset == ShardState::SHARD_DONE {
            (&order[at + 1..], (0, 0))
        } else {
            (&order[at..], (state.offset, state.skip))
        };
        Ok(self.samples(
            state.epoch,
            rest,
            start,
            (state.shard, state.offset, state.skip),
            state.draws,
            state.buffered.clone(),
            state.failures,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn samples(
        &self,
        epoch: u64,
        order: &[usize],
        start: (u64, u64),
        cursor: (usize, u64, u64),
        draws: u64,
        refill: Vec<SampleSpan>,
        failures: u64,
    ) -> EpochSamples {
        let order = order
            .iter()
            .enumerate()
            .map(|(i, &shard)| {
                let (start, skip) = if i == 0 { start } else { (0, 0) };
                Turn {
                    shard,
                    start,
                    skip,
                    opening: None,
                }
            })
            .collect();
        let options = self.sampler.options();
        let key = shuffle::mix(
            options.seed ^ shuffle::mix(epoch ^ shuffle::mix(self.sampler.dist().rank())),
        );
        EpochSamples {
            reader: Reader {
                shards: self.shards.clone(),
                fetcher: self.fetcher.clone(),
                rt: None,
                order,
                readahead: self.readahead,
                required: self.required.clone(),
                current: None,
                cursor,
            },
            epoch,
            buffer: (self.buffer > 0).then(|| ShuffleBuffer::new(self.buffer, key, draws)),
            refill: Some(refill),
            pending: VecDeque::new(),
            ready: VecDeque::new(),
            exhausted: false,
            failures,
        }
    }
}

/// The runtime every remote shard is read on, started with the first one and kept for the
/// process: the HTTP clients' pooled connections belong to the runtime that opened them, so
/// one that stopped (a finished epoch's) would leave the next request waiting forever. One
/// worker thread drives the connections; iterators wait on it with `block_on`.
fn shared_runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    static RUNTIME: std::sync::OnceLock<Arc<tokio::runtime::Runtime>> = std::sync::OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt.clone());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("spdl-shards-io")
        .enable_all()
        .build()
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start a runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| Arc::new(rt)).clone())
}

/// A shard still to read: where to start, and its opening when it was opened ahead.
struct Turn {
    shard: usize,
    start: u64,
    /// Items read from `start` on to pass over (handed on before a resume).
    skip: u64,
    opening: Option<tokio::task::JoinHandle<Result<crate::backend::Opened>>>,
}

/// The shards of an epoch, read one after the other.
struct Reader {
    shards: Arc<[Uri]>,
    fetcher: Fetcher,
    /// The runtime remote shards are read on ([`shared_runtime`]).
    rt: Option<Arc<tokio::runtime::Runtime>>,
    order: VecDeque<Turn>,
    /// Remote shards of `order` opened ahead.
    readahead: usize,
    /// Fields every sample must have ([`ShardSource::with_required_fields`]).
    required: Arc<[Vec<String>]>,
    current: Option<Samples<Box<dyn Read + Send>>>,
    /// The shard being read, where reading it would go on after the items handed on
    /// ([`ShardState::SHARD_DONE`] once its failure was), and the items to pass over there.
    cursor: (usize, u64, u64),
}

impl Drop for Reader {
    fn drop(&mut self) {
        // Openings ahead of an epoch left early: their connections close.
        for turn in &self.order {
            if let Some(h) = &turn.opening {
                h.abort();
            }
        }
    }
}

impl Reader {
    fn runtime(&mut self) -> Result<Arc<tokio::runtime::Runtime>> {
        if let Some(rt) = &self.rt {
            return Ok(rt.clone());
        }
        let rt = shared_runtime()?;
        self.rt = Some(rt.clone());
        Ok(rt)
    }

    /// Opens the next `readahead` remote shards of the order that are not opened yet, each
    /// on the runtime, at its start.
    fn open_ahead(&mut self) {
        let want = self.readahead.min(self.order.len());
        let pending = self
            .order
            .iter()
            .take(want)
            .any(|t| t.opening.is_none() && !matches!(self.shards[t.shard], Uri::Local(_)));
        if !pending {
            return;
        }
        let Ok(rt) = self.runtime() else {
            return; // opened in turn, where the error is reported
        };
        for turn in self.order.iter_mut().take(want) {
            let uri = &self.shards[turn.shard];
            if turn.opening.is_some() || matches!(uri, Uri::Local(_)) {
                continue;
            }
            let (fetcher, uri, start) = (self.fetcher.clone(), uri.clone(), turn.start);
            turn.opening = Some(rt.spawn(async move { fetcher.open(&uri, start).await }));
        }
    }

    /// The shard of `turn` from its start on: a buffered file, or a remote stream (opened
    /// ahead, or now).
    fn open(&mut self, turn: Turn) -> Result<Box<dyn Read + Send>> {
        let Turn {
            shard,
            start,
            opening,
            ..
        } = turn;
        let uri = self.shards[shard].clone();
        if let Uri::Local(path) = &uri {
            let mut f = File::open(path).map_err(|e| Error::io(e, path))?;
            if start > 0 {
                f.seek(SeekFrom::Start(start))
                    .map_err(|e| Error::io(e, path))?;
            }
            return Ok(Box::new(BufReader::with_capacity(1 << 20, f)));
        }
        let rt = self.runtime()?;
        let r = match opening {
            Some(h) => {
                let opened = rt.block_on(h).map_err(|e| {
                    Error::new(ErrorKind::Io, format!("opening the shard failed: {e}"))
                })??;
                stream::RemoteRead::with_body(rt, self.fetcher.clone(), uri, start, opened)
            }
            None => stream::RemoteRead::open(rt, self.fetcher.clone(), uri, start)?,
        };
        Ok(Box::new(BufReader::with_capacity(1 << 20, r)))
    }

    /// One sample by its byte range (a seek or a range request), for a resumed buffer.
    fn read_span(&mut self, span: SampleSpan) -> std::result::Result<ShardSample, ShardError> {
        let name = crate::backend::shown(&self.shards[span.shard]);
        let fail = |kind, reason: String| ShardError {
            kind,
            shard: name.clone(),
            key: None,
            reason,
        };
        let len = span.end.saturating_sub(span.offset);
        let bytes: Vec<u8> = match self.shards[span.shard].clone() {
            Uri::Local(path) => {
                let mut buf = Vec::new();
                File::open(&path)
                    .and_then(|mut f| {
                        f.seek(SeekFrom::Start(span.offset))?;
                        f.take(len).read_to_end(&mut buf)
                    })
                    .map_err(|e| fail(ShardErrorKind::Open, Error::io(e, &path).to_string()))?;
                buf
            }
            uri => {
                let rt = self
                    .runtime()
                    .map_err(|e| fail(ShardErrorKind::Open, e.to_string()))?;
                rt.block_on(
                    self.fetcher
                        .fetch_range(&uri, span.offset..span.end.max(span.offset + 1)),
                )
                .map_err(|e| fail(ShardErrorKind::Open, e.to_string()))?
                .to_vec()
            }
        };
        // The range holds whole members; an end-of-archive marker closes it.
        let data = Cursor::new(bytes).chain(Cursor::new(vec![0u8; 1024]));
        let uri = self.shards[span.shard].clone();
        let mut one = Samples::at(data, span.shard, name.clone(), span.offset)
            .with_lookback(lookback::lookback(uri, self.fetcher.clone()))
            .requiring(self.required.clone());
        match one.next() {
            Some(Ok(s)) if s.end == span.end => Ok(s),
            Some(Ok(s)) => Err(fail(
                ShardErrorKind::Corrupt,
                format!(
                    "sample {} at bytes {}..{} does not end at {} (the shard changed?)",
                    s.key, span.offset, s.end, span.end
                ),
            )),
            Some(Err(e)) => Err(e),
            None => Err(fail(
                ShardErrorKind::Truncated,
                format!("no sample at bytes {}..{}", span.offset, span.end),
            )),
        }
    }
}

impl Iterator for Reader {
    type Item = std::result::Result<ShardSample, ShardError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(samples) = &mut self.current {
                let item = samples.next();
                if item.is_none() {
                    self.current = None;
                } else {
                    let (at, skip) = samples
                        .resume_offset()
                        .unwrap_or((ShardState::SHARD_DONE, 0));
                    self.cursor = (self.cursor.0, at, skip);
                    return item;
                }
            }
            let turn = self.order.pop_front()?;
            self.open_ahead();
            let (shard, base, skip) = (turn.shard, turn.start, turn.skip);
            let name = crate::backend::shown(&self.shards[shard]);
            match self.open(turn) {
                Ok(reader) => {
                    self.cursor = (shard, base, skip);
                    let back = lookback::lookback(self.shards[shard].clone(), self.fetcher.clone());
                    let samples = Samples::at(reader, shard, name, base)
                        .with_lookback(back)
                        .requiring(self.required.clone())
                        .skipping(skip);
                    self.current = Some(samples);
                }
                Err(e) => {
                    self.cursor = (shard, ShardState::SHARD_DONE, 0);
                    return Some(Err(ShardError {
                        kind: ShardErrorKind::Open,
                        shard: name,
                        key: None,
                        reason: e.to_string(),
                    }));
                }
            }
        }
    }
}

/// Iterator of [`ShardSource::epoch`] and [`ShardSource::resume`]: samples, and failures as
/// [`ShardError`] items.
pub struct EpochSamples {
    reader: Reader,
    epoch: u64,
    buffer: Option<ShuffleBuffer<ShardSample>>,
    /// Buffered samples of a resumed state, read on the first `next`.
    refill: Option<Vec<SampleSpan>>,
    /// Failures met while refilling the buffer, handed on first.
    pending: VecDeque<ShardError>,
    /// Refilled samples with no buffer to go to.
    ready: VecDeque<ShardSample>,
    exhausted: bool,
    failures: u64,
}

impl EpochSamples {
    /// Failures handed on so far (shards that failed and samples lost with them count once
    /// each, as their [`ShardError`] items).
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// Where the epoch stands after the items handed on so far: give it to
    /// [`ShardSource::resume`] to go on with the next one.
    pub fn state(&self) -> ShardState {
        let (shard, offset, skip) = self.reader.cursor;
        let (draws, buffered) = match &self.buffer {
            Some(b) => (
                b.draws(),
                self.refill
                    .iter()
                    .flatten()
                    .copied()
                    .chain(b.items().iter().map(ShardSample::span))
                    .collect(),
            ),
            None => (
                0,
                self.refill
                    .iter()
                    .flatten()
                    .copied()
                    .chain(self.ready.iter().map(ShardSample::span))
                    .collect(),
            ),
        };
        ShardState {
            epoch: self.epoch,
            shard,
            offset,
            skip,
            draws,
            buffered,
            failures: self.failures,
        }
    }

    fn counted(&mut self, e: ShardError) -> Option<std::result::Result<ShardSample, ShardError>> {
        self.failures += 1;
        Some(Err(e))
    }
}

impl Iterator for EpochSamples {
    type Item = std::result::Result<ShardSample, ShardError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(spans) = self.refill.take() {
            for span in spans {
                match self.reader.read_span(span) {
                    Ok(s) => match &mut self.buffer {
                        Some(b) => b.push(s),
                        // A state taken with a buffer, resumed without: hand them on first.
                        None => self.ready.push_back(s),
                    },
                    Err(e) => self.pending.push_back(e),
                }
            }
        }
        if let Some(e) = self.pending.pop_front() {
            return self.counted(e);
        }
        if let Some(s) = self.ready.pop_front() {
            return Some(Ok(s));
        }
        let Some(buffer) = &mut self.buffer else {
            return match self.reader.next()? {
                Ok(s) => Some(Ok(s)),
                Err(e) => self.counted(e),
            };
        };
        while !self.exhausted && buffer.wants_more() {
            match self.reader.next() {
                Some(Ok(s)) => buffer.push(s),
                Some(Err(e)) => {
                    self.failures += 1;
                    return Some(Err(e));
                }
                None => self.exhausted = true,
            }
        }
        buffer.draw().map(Ok)
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
}
