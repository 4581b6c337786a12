//! A tar stream cut into samples by key (WebDataset's grouping), with links resolved and
//! every sample seen handed on once: whole, or as one named failure.

use std::collections::{HashSet, VecDeque};
use std::io::Read;
use std::sync::Arc;

use spdl_tar::{Entry, TarReader};

use super::{ShardError, ShardErrorKind, ShardSample};

/// Closed samples held back before they are handed on (see [`Samples`]): a key that
/// reappears within this many samples fails as a whole (never as two half samples), and
/// links to them resolve without reading the shard again.
pub const REGROUP_WINDOW: usize = 16;

/// Splits a member name into `(key, field)` at the first dot of its file name.
pub(super) fn split_key(name: &str) -> Option<(&str, &str)> {
    let base = name.rfind('/').map_or(0, |i| i + 1);
    let dot = name[base..].find('.')? + base;
    (dot > base).then(|| (&name[..dot], &name[dot + 1..]))
}

/// `path` without `.` and empty components, `..` applied; `None` when `..` climbs above the
/// archive's root.
pub(super) fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

/// The path a link names, normalized: a hard link's target is an archive path, a symbolic
/// link's is relative to the link's directory; `None` when it points outside the archive
/// (absolute, or `..` above its root).
pub(super) fn link_path(name: &str, target: &str, hard: bool) -> Option<String> {
    if hard {
        normalize(target)
    } else if target.starts_with('/') {
        None
    } else {
        let dir = name.rfind('/').map_or("", |i| &name[..i]);
        normalize(&format!("{dir}/{target}"))
    }
}

/// Reads an earlier member of the shard again, for a link whose target is no longer held:
/// called with the target's normalized path and the offset of the link's first header (the
/// target lies before it); gives its bytes, `None` when no member of that name comes before.
pub type Lookback =
    Box<dyn FnMut(&str, u64) -> std::result::Result<Option<Vec<u8>>, String> + Send>;

/// A sample being read or held back, with what is wrong with it (if anything).
struct Held {
    sample: ShardSample,
    problem: Option<(ShardErrorKind, String)>,
}

impl Held {
    fn new(sample: ShardSample, problem: Option<(ShardErrorKind, String)>) -> Self {
        Held { sample, problem }
    }

    /// Keeps the first problem: it is the one that made the sample fail.
    fn fail(&mut self, kind: ShardErrorKind, reason: String) {
        self.problem.get_or_insert((kind, reason));
    }

    /// The bytes of the member whose normalized path is `path`, if this sample holds it.
    fn member(&self, path: &str) -> Option<&[u8]> {
        self.sample
            .fields
            .iter()
            .find(|(f, _)| normalize(&format!("{}.{f}", self.sample.key)).as_deref() == Some(path))
            .map(|(_, d)| d.as_slice())
    }
}

/// An item ready to hand on, and the bytes it spans (`None`: the stream's failure, after
/// which nothing more of the shard can be read).
type Out = (
    std::result::Result<ShardSample, ShardError>,
    Option<(u64, u64)>,
);

/// A tar stream cut into samples (see the module docs of `shards`).
///
/// Every sample seen is handed on once: whole, or as one [`ShardError`] naming the shard,
/// the key and the reason:
/// - links: a hard link (`1`) takes its target's bytes, a symbolic link (`2`) those of the
///   member it names, relative to the link's directory (`tarfile.extractfile`'s reading),
///   when that member came earlier in the stream (chains of links resolve): from the samples
///   still held (the one being read and the last [`REGROUP_WINDOW`]), else read again from
///   the shard's start with [`Samples::with_lookback`] (the shard source sets it, so a
///   resumed read resolves the same links). Otherwise the sample fails (`Link`): a target
///   that is missing, later in the stream, outside the archive (absolute, or `..` above its
///   root), or (without a lookback) no longer held. A link is never handed on as an empty
///   field.
/// - keys out of order: closed samples wait in a window of [`REGROUP_WINDOW`] before they
///   are handed on. A key is one sample when its members are consecutive: members whose key
///   matches a held sample make that sample one `KeyNotGrouped` failure (its members are
///   dropped, never handed on as two half samples), and close the sample being read (which
///   then fails too if more of its members follow).
///   Members of a key handed on earlier (further back than the window) are one
///   `KeyNotGrouped` failure of their own (the sample handed on before stays delivered; a
///   read resumed after that sample does not know its key, and reads them as a sample).
///   Where such a failure was handed on before samples that lie inside its span, the resume
///   point ([`Samples::resume_offset`]) stays before it with a count of items to pass over,
///   so a resumed read gives exactly the rest.
/// - two members of one field: `DuplicateField`; a field required by
///   [`Samples::requiring`] missing: `MissingField`.
/// - the stream: a member cut short, a corrupt header or a lost connection fail the sample
///   being read (with the rest of the shard); a stream that ends after a whole member, with
///   or without the end-of-archive marker, ends the shard; when the cut header's name is
///   known and belongs to another key, the sample before it is whole and delivered, and the
///   cut one is the failure.
///
/// Directories, devices, FIFOs and members without a dot in their file name are not
/// samples. Memory: the held samples' bytes and the keys handed on from the shard (without a
/// lookback, also its member names).
pub struct Samples<R: Read> {
    reader: TarReader<R>,
    shard: usize,
    name: String,
    /// The sample being read.
    current: Option<Held>,
    /// Closed samples not yet handed on, in stream order.
    window: VecDeque<Held>,
    /// Keys handed on from this shard (a reappearing one is a failure of its own).
    handed: HashSet<String>,
    /// Normalized paths of the regular members (and resolved links) read so far (without a
    /// lookback only).
    seen: HashSet<String>,
    out: VecDeque<Out>,
    lookback: Option<Lookback>,
    /// Fields every sample must have (each one of alternatives), see [`Samples::requiring`].
    required: Arc<[Vec<String>]>,
    done: bool,
    /// Offset in the shard of the reader's first byte (a resumed shard starts mid-file).
    base: u64,
    /// Where a read would start again: every item before it was handed on, none after it...
    anchor: u64,
    /// ... but these first items read from `anchor` on (their spans overlap held samples).
    since: u64,
    /// The furthest end of the items handed on since `anchor`.
    reach: u64,
    /// Items still to pass over, unhanded, at the start (a resumed read).
    skip: u64,
    /// Whether the stream's failure was handed on (the rest of the shard is lost).
    failed: bool,
}

impl<R: Read> Samples<R> {
    /// Samples of the tar stream `reader`, for shard number `shard` named `name` in errors.
    pub fn new(reader: R, shard: usize, name: impl Into<String>) -> Self {
        Self::at(reader, shard, name, 0)
    }

    /// As [`Samples::new`], for a `reader` that starts at byte `base` of the shard (a sample
    /// boundary).
    pub fn at(reader: R, shard: usize, name: impl Into<String>, base: u64) -> Self {
        Samples {
            base,
            anchor: base,
            since: 0,
            reach: base,
            skip: 0,
            failed: false,
            reader: TarReader::new(reader),
            shard,
            name: name.into(),
            current: None,
            window: VecDeque::new(),
            handed: HashSet::new(),
            seen: HashSet::new(),
            out: VecDeque::new(),
            lookback: None,
            required: Arc::new([]),
            done: false,
        }
    }

    /// Resolves links whose target is no longer held with `lookback` (which reads the shard
    /// again from its start).
    pub fn with_lookback(mut self, lookback: Lookback) -> Self {
        self.lookback = Some(lookback);
        self
    }

    /// Makes a sample that lacks one of `fields` (each entry: alternatives, one of which is
    /// enough, e.g. `["jpg", "png"]`) one `MissingField` failure naming the key and the field.
    pub fn requiring(mut self, fields: Arc<[Vec<String>]>) -> Self {
        self.required = fields;
        self
    }

    /// Passes over the first `items` items this read would hand on (those a resumed state
    /// says were handed on already).
    pub fn skipping(mut self, items: u64) -> Self {
        self.skip = items;
        self
    }

    /// Where reading this shard would go on after the items handed on so far, as `(offset,
    /// items)`: read again from `offset` and pass over the first `items` items (0 unless a
    /// failure of keys out of order was handed on before samples inside its span); `None`
    /// once the stream's failure was handed on (nothing more of the shard can be read).
    pub fn resume_offset(&self) -> Option<(u64, u64)> {
        (!self.failed).then_some((self.anchor, self.since))
    }

    /// Books an item handed on (or passed over) spanning `span`.
    fn handed_on(&mut self, span: Option<(u64, u64)>) {
        let Some((_, end)) = span else {
            self.failed = true;
            return;
        };
        self.reach = self.reach.max(end);
        // Settled when nothing still to hand on starts before what was handed on ends.
        let held = self
            .current
            .iter()
            .chain(&self.window)
            .map(|h| h.sample.offset);
        let queued = self.out.iter().filter_map(|(_, span)| span.map(|s| s.0));
        if held.chain(queued).all(|start| start >= self.reach) {
            (self.anchor, self.since) = (self.reach, 0);
        } else {
            self.since += 1;
        }
    }

    fn error(&self, kind: ShardErrorKind, key: Option<String>, reason: String) -> ShardError {
        ShardError {
            kind,
            shard: self.name.clone(),
            key,
            reason,
        }
    }

    /// Queues a held sample to be handed on: whole, or as its failure.
    fn emit(&mut self, mut held: Held) {
        let span = (held.sample.offset, held.sample.end);
        self.handed.insert(held.sample.key.clone());
        if held.problem.is_none() {
            let missing = self
                .required
                .iter()
                .find(|alts| !alts.iter().any(|f| held.sample.get(f).is_some()));
            if let Some(alts) = missing {
                let fields: Vec<&str> =
                    held.sample.fields.iter().map(|(f, _)| f.as_str()).collect();
                let reason = format!(
                    "no field {}; its fields: {}",
                    alts.join(" or "),
                    if fields.is_empty() {
                        "none".to_owned()
                    } else {
                        fields.join(", ")
                    }
                );
                held.problem = Some((ShardErrorKind::MissingField, reason));
            }
        }
        let item = match held.problem {
            Some((kind, reason)) => Err(self.error(kind, Some(held.sample.key), reason)),
            None => Ok(held.sample),
        };
        self.out.push_back((item, Some(span)));
    }

    /// Closes the sample being read: it joins the window, whose oldest leaves when full.
    fn close_current(&mut self) {
        if let Some(held) = self.current.take() {
            self.window.push_back(held);
        }
        while self.window.len() > REGROUP_WINDOW {
            if let Some(oldest) = self.window.pop_front() {
                self.emit(oldest);
            }
        }
    }

    /// Closes the sample being read and queues every held sample.
    fn flush(&mut self) {
        self.close_current();
        while let Some(held) = self.window.pop_front() {
            self.emit(held);
        }
    }

    /// The held sample with key `key`: the one being read, or one in the window.
    fn held_mut(&mut self, key: &str) -> Option<&mut Held> {
        if self.current.as_ref().is_some_and(|c| c.sample.key == key) {
            return self.current.as_mut();
        }
        self.window.iter_mut().find(|h| h.sample.key == key)
    }

    /// The bytes a link at byte `at` names, or why it cannot be resolved.
    fn resolve(
        &mut self,
        name: &str,
        target: &str,
        hard: bool,
        at: u64,
    ) -> std::result::Result<Vec<u8>, String> {
        let what = if hard { "hard link" } else { "symbolic link" };
        let Some(path) = link_path(name, target, hard) else {
            return Err(format!("{what} to {target:?} points outside the archive"));
        };
        let held = self.current.iter().chain(self.window.iter().rev());
        for h in held {
            if let Some(data) = h.member(&path) {
                return Ok(data.to_vec());
            }
        }
        if let Some(lookback) = &mut self.lookback {
            return match lookback(&path, at) {
                Ok(Some(data)) => Ok(data),
                Ok(None) => Err(format!(
                    "{what} to {path:?}: no member of that name before the link in the shard"
                )),
                Err(e) => Err(format!("{what} to {path:?}: {e}")),
            };
        }
        Err(if self.seen.contains(&path) {
            format!(
                "{what} to {path:?}: its target was handed on more than {REGROUP_WINDOW} samples before (links reach back that far)"
            )
        } else if self.base > 0 {
            format!(
                "{what} to {path:?}: no member of that name between byte {} (where this read started) and the link",
                self.base
            )
        } else {
            format!("{what} to {path:?}: no member of that name before the link in the shard")
        })
    }

    /// Files one member (or resolved link) `name` spanning bytes `before..after`.
    fn member(
        &mut self,
        name: &str,
        data: std::result::Result<Vec<u8>, String>,
        before: u64,
        after: u64,
    ) {
        let Some((key, field)) = split_key(name) else {
            return;
        };
        // Names are kept only to say why a link failed when no lookback can read it again.
        if self.lookback.is_none() && data.is_ok() {
            if let Some(path) = normalize(name) {
                self.seen.insert(path);
            }
        }
        let in_current = self.current.as_ref().is_some_and(|c| c.sample.key == key);
        if !in_current {
            // Another key's member closes the sample being read, even a stray one: a key is
            // one sample only when its members are consecutive.
            self.close_current();
            let broken = self.window.iter_mut().find(|h| h.sample.key == key);
            if let Some(held) = broken {
                // Members of a closed sample after other samples: the layout is broken. Its
                // span covers them (a resume point never falls between its parts); their
                // bytes stay with it for links to them, and go nowhere else.
                held.fail(
                    ShardErrorKind::KeyNotGrouped,
                    format!(
                        "members of this key are not consecutive ({name} comes after other samples)"
                    ),
                );
            } else {
                let late = || {
                    let reason = format!(
                        "{name} comes after this key's sample was handed on (members not \
                         consecutive; a sample is held back for {REGROUP_WINDOW} samples only)"
                    );
                    (ShardErrorKind::KeyNotGrouped, reason)
                };
                let problem = self.handed.contains(key).then(late);
                self.current = Some(Held::new(
                    ShardSample {
                        shard: self.shard,
                        key: key.to_owned(),
                        fields: Vec::new(),
                        offset: before,
                        end: after,
                    },
                    problem,
                ));
            }
        }
        let Some(held) = self.held_mut(key) else {
            return;
        };
        held.sample.end = held.sample.end.max(after);
        match data {
            Ok(data) => {
                if held.sample.fields.iter().any(|(f, _)| f == field) {
                    held.fail(
                        ShardErrorKind::DuplicateField,
                        format!("two members for field {field:?}"),
                    );
                } else {
                    held.sample.fields.push((field.to_owned(), data));
                }
            }
            Err(reason) => held.fail(ShardErrorKind::Link, format!("{name}: {reason}")),
        }
    }

    /// The stream failed: the held samples that are whole are queued, then the failure, once
    /// for the sample it concerns.
    fn stream_failed(&mut self, e: spdl_tar::Error) {
        // A failed read (a connection lost for good) is no fault of the archive.
        let read_failed = std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
        let kind = match e.kind() {
            _ if read_failed => ShardErrorKind::Read,
            spdl_tar::ErrorKind::Truncated | spdl_tar::ErrorKind::Empty => {
                ShardErrorKind::Truncated
            }
            _ => ShardErrorKind::Corrupt,
        };
        let failed_key = split_key(e.key()).map(|(k, _)| k.to_owned());
        let reason = e.to_string();
        let owner = match &failed_key {
            // A member of the sample being read failed, or the member is not known: that
            // sample may miss members.
            None => self.current.is_some().then_some(None),
            Some(k) if self.current.as_ref().is_some_and(|c| c.sample.key == *k) => Some(None),
            Some(k) => self
                .window
                .iter()
                .position(|h| h.sample.key == *k)
                .map(Some),
        };
        match owner {
            Some(None) => {
                if let Some(cur) = &mut self.current {
                    cur.problem = Some((kind, reason));
                }
                self.flush();
            }
            Some(Some(i)) => {
                self.window[i].problem = Some((kind, reason));
                self.flush();
            }
            None => {
                // Another sample's member: the one read so far is whole.
                self.flush();
                let e = self.error(kind, failed_key, reason);
                self.out.push_back((Err(e), None));
            }
        }
        if let Some(last) = self.out.back_mut() {
            last.1 = None;
        }
    }

    /// Reads members until an item is ready or the stream is over.
    fn fill(&mut self) {
        while self.out.is_empty() && !self.done {
            let before = self.base + self.reader.position();
            match self.reader.next_entry() {
                Ok(Some(entry)) => {
                    let after = self.base + self.reader.position();
                    match entry {
                        Entry::File { name, data } => self.member(&name, Ok(data), before, after),
                        Entry::Link { name, target, hard } => {
                            if split_key(&name).is_some() {
                                let data = self.resolve(&name, &target, hard, before);
                                self.member(&name, data, before, after);
                            }
                        }
                    }
                }
                Ok(None) => {
                    self.done = true;
                    self.flush();
                }
                // A read resumed at the very end of a shard without its end-of-archive marker.
                Err(e) if e.kind() == spdl_tar::ErrorKind::Empty && self.base > 0 => {
                    self.done = true;
                    self.flush();
                }
                Err(e) => {
                    self.done = true;
                    self.stream_failed(e);
                }
            }
        }
    }
}

impl<R: Read> Iterator for Samples<R> {
    type Item = std::result::Result<ShardSample, ShardError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.fill();
            let (item, span) = self.out.pop_front()?;
            self.handed_on(span);
            if self.skip == 0 {
                return Some(item);
            }
            self.skip -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(split_key("d/0001.jpg"), Some(("d/0001", "jpg")));
        assert_eq!(split_key("a.b/0001.seg.png"), Some(("a.b/0001", "seg.png")));
        assert_eq!(split_key("README"), None);
        assert_eq!(split_key("d/.hidden"), None);
    }

    #[test]
    fn paths() {
        assert_eq!(
            normalize("./d//a/../0001.png").as_deref(),
            Some("d/0001.png")
        );
        assert_eq!(normalize("d/../../x"), None);
    }
}
