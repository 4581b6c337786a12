//! A tar stream cut into samples by key (WebDataset's grouping).

use std::io::Read;

use spdl_io::array::tar::TarReader;

use super::{ShardError, ShardErrorKind, ShardSample};

/// Splits a member name into `(key, field)` at the first dot of its file name.
pub(super) fn split_key(name: &str) -> Option<(&str, &str)> {
    let base = name.rfind('/').map_or(0, |i| i + 1);
    let dot = name[base..].find('.')? + base;
    (dot > base).then(|| (&name[..dot], &name[dot + 1..]))
}

/// A tar stream cut into samples (see the module docs). Yields each complete sample; after a
/// failure of the stream, one error naming the sample it stopped in, then nothing.
pub struct Samples<R: Read> {
    reader: TarReader<R>,
    shard: usize,
    name: String,
    current: Option<ShardSample>,
    /// A sample whose fields repeat: reported when it is complete.
    duplicate: Option<String>,
    /// The stream's failure, reported after the whole sample before it.
    pending: Option<ShardError>,
    done: bool,
    /// Offset in the shard of the reader's first byte (a resumed shard starts mid-file).
    base: u64,
    /// Offset just past the last sample handed on (whole or as its duplicate-field error).
    after: u64,
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
            after: base,
            failed: false,
            reader: TarReader::new(reader),
            shard,
            name: name.into(),
            current: None,
            duplicate: None,
            pending: None,
            done: false,
        }
    }

    /// Where reading this shard would go on after the items handed on so far: the offset just
    /// past the last sample handed on (or the start), `None` once the stream's failure was
    /// handed on (nothing more of the shard can be read).
    pub fn resume_offset(&self) -> Option<u64> {
        (!self.failed).then_some(self.after)
    }

    fn error(&self, kind: ShardErrorKind, key: Option<String>, reason: String) -> ShardError {
        ShardError {
            kind,
            shard: self.name.clone(),
            key,
            reason,
        }
    }

    /// Hands on the finished sample (or its duplicate-field error).
    fn finish_current(&mut self) -> Option<std::result::Result<ShardSample, ShardError>> {
        let sample = self.current.take()?;
        self.after = sample.end;
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
            self.failed = true;
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
                    // A failed read (a connection lost for good) is no fault of the archive.
                    let read_failed =
                        std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
                    let kind = match e.kind() {
                        _ if read_failed => ShardErrorKind::Read,
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
                    self.failed = true;
                    return Some(Err(self.error(kind, key, reason)));
                }
            }
        }
        None
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
}
