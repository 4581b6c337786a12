//! The crate's one error type: a kind, the member it names, the reason and the source, displayed
//! as every error of the workspace is (`KIND: MEMBER: REASON`).

use std::fmt;

/// What went wrong reading an archive, coarse enough to match on. The kinds (and their
/// names) are those of spdl-io's `ErrorKind` that a tar archive can produce, so an error
/// converted there reads the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The first header fails its checksum: this is not a tar archive.
    UnknownFormat,
    /// A member kind this reader does not handle (GNU and PAX sparse files).
    Unsupported,
    /// The archive ends inside a header, an extended header's entry or a member's data.
    Truncated,
    /// A header fails its checksum, a number field is malformed, the stream cannot be read.
    Corrupt,
    /// An extended header (long name, PAX record) over [`crate::MAX_META_BYTES`].
    LimitExceeded,
    /// Zero bytes: no archive at all.
    Empty,
    /// A call made out of order (an extended header with no pending entry, a short block).
    InvalidArgument,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::UnknownFormat => "unknown format",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::LimitExceeded => "limit exceeded",
            ErrorKind::Empty => "empty",
            ErrorKind::InvalidArgument => "invalid argument",
        })
    }
}

/// The error of every fallible reading function of this crate. Displays as
/// `"{kind}: {member}: {message}"` (`truncated: b.txt: the member's data ends at ...`), the
/// member part left out while none is known.
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {}{message}", key_prefix(key))]
pub struct Error {
    kind: ErrorKind,
    key: String,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}

impl Error {
    /// An error of `kind` with a human-readable `message`, naming no member yet.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            key: String::new(),
            message: message.into(),
            source: None,
        }
    }

    /// Attaches the underlying error (kept for `source()`).
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Names the member (or header offset) if nothing is named yet.
    pub fn with_key(mut self, key: &str) -> Self {
        if self.key.is_empty() {
            self.key = key.to_owned();
        }
        self
    }

    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The member (or `header at N`) named, empty when none is.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The reason, without kind and member.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Bad archive bytes stay bad: no tar error is worth a retry (a failed read of the
/// underlying stream is reported by its reader, before the bytes get here).
impl spdl_core::ErrorStatus for Error {
    fn is_temporary(&self) -> bool {
        false
    }
}

pub(crate) fn truncated(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Truncated, message)
}

pub(crate) fn corrupt(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Corrupt, message)
}

pub(crate) fn unsupported(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Unsupported, message)
}

/// `offset..offset + len` of `data`, or a `Truncated` error saying what was cut.
pub(crate) fn region<'a>(data: &'a [u8], offset: u64, len: u64, what: &str) -> Result<&'a [u8]> {
    crate::region_or(data, offset, len, what, truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_kind_member_and_reason() {
        let e = truncated("cut").with_key("b.txt").with_key("ignored");
        assert_eq!(e.to_string(), "truncated: b.txt: cut");
        assert_eq!(Error::new(ErrorKind::Empty, "x").to_string(), "empty: x");
        assert!(!spdl_core::ErrorStatus::is_temporary(&e));
    }
}
