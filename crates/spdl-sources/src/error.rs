//! The one error type of this crate: a kind, the path or URI it concerns, a reason.
//!
//! Modelled on Apache OpenDAL's `Error` (a kind that callers match on, a temporary/permanent
//! status that retry logic reads, context, a source), kept smaller: local sources and the
//! sampler only need the path (and, for list files, the line); remote fetches add the URI, the
//! HTTP status and the number of attempts.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// Result alias used by every fallible function of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, for callers that react differently (skip a sample, retry, abort).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A file or directory does not exist (`ENOENT`), or a symbolic link points nowhere.
    NotFound,
    /// The process may not read a file or list a directory (`EACCES`, `EPERM`).
    PermissionDenied,
    /// A file was expected and the path names a directory (`EISDIR`).
    IsADirectory,
    /// A directory was expected and the path names something else.
    NotADirectory,
    /// Following symbolic links leads back to an ancestor directory.
    SymlinkLoop,
    /// Any other I/O failure; see [`Error::is_temporary`] for whether a retry may help.
    Io,
    /// A line of a list file cannot be used; the error carries the line number.
    InvalidListLine,
    /// An ImageFolder root holds no class sub-folder.
    NoClasses,
    /// An ImageFolder class sub-folder holds no file with an accepted extension.
    EmptyClass,
    /// `RANK`, `WORLD_SIZE` or `LOCAL_RANK` is missing where needed, malformed or inconsistent.
    InvalidDistEnv,
    /// An argument is out of range (a rank not below the world size, a position not in this rank's
    /// share, an index past the end of a list).
    InvalidArgument,
    /// A sampler state does not fit the sampler or the other states it is merged with.
    InvalidState,
    /// A location cannot be parsed as a path or URI (unknown scheme, missing bucket or host).
    InvalidUri,
    /// The URI needs a backend this build lacks (feature `source-http` or `source-s3`), or an
    /// object key the backend cannot address exactly.
    Unsupported,
    /// A server answered with an HTTP status that is not a success (the error carries it, see
    /// [`Error::status`]); 5xx, 408 and 429 are temporary, other statuses permanent.
    Http,
    /// A request did not finish within its per-request timeout, or retries ran past the total
    /// timeout.
    Timeout,
    /// A response body stopped: no byte arrived for the stall timeout.
    Stalled,
    /// A response body ended before its `Content-Length`: never handed on as a truncated file.
    ShortBody,
    /// An HTML page (or another `text/*` answer) came where an image or other binary payload
    /// was expected: typically an error, login or captive-portal page served with status 200.
    NotAnImage,
    /// Connecting, sending or receiving failed (refused, reset, DNS): temporary.
    Network,
    /// Credentials or endpoint settings are missing or invalid.
    Config,
}

impl ErrorKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "not found",
            Self::PermissionDenied => "permission denied",
            Self::IsADirectory => "is a directory",
            Self::NotADirectory => "not a directory",
            Self::SymlinkLoop => "symbolic link loop",
            Self::Io => "I/O error",
            Self::InvalidListLine => "invalid list line",
            Self::NoClasses => "no class folder",
            Self::EmptyClass => "empty class folder",
            Self::InvalidDistEnv => "invalid distributed environment",
            Self::InvalidArgument => "invalid argument",
            Self::InvalidState => "invalid sampler state",
            Self::InvalidUri => "invalid URI",
            Self::Unsupported => "unsupported",
            Self::Http => "HTTP error",
            Self::Timeout => "timed out",
            Self::Stalled => "stalled",
            Self::ShortBody => "short body",
            Self::NotAnImage => "not an image",
            Self::Network => "network error",
            Self::Config => "configuration error",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of every fallible function in this crate.
///
/// The message reads `KIND: PATH[:LINE]: REASON`, for example
/// `not found: data/cat/001.jpg: no such file`. Paths are shown byte-exact: bytes that are not
/// UTF-8 are escaped as `\xNN` (a Latin-1 name shows as `caf\xe9.png`), never replaced. For a
/// remote fetch the URI takes the path's place, and the reason says how many attempts were
/// made: `HTTP error: https://host/a.jpg: 503 Service Unavailable (4 attempts)`.
///
/// Messages never hold credentials: fetch errors are built from the URI, the status and a
/// short reason, never from request headers or signed URLs.
#[derive(Debug)]
pub struct Error(Box<Inner>);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl spdl_core::ErrorStatus for Error {
    fn is_temporary(&self) -> bool {
        Error::is_temporary(self)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The fields of an [`Error`], boxed so that `Result<T, Error>` stays one pointer wide.
#[derive(Debug)]
struct Inner {
    kind: ErrorKind,
    path: Option<PathBuf>,
    uri: Option<String>,
    line: Option<u64>,
    status: Option<u16>,
    attempts: u32,
    temporary: Option<bool>,
    retry_after: Option<std::time::Duration>,
    reason: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// The builder setters of [`Inner`]'s fields: `fn with_x(x) = value;` becomes
/// `with_x(mut self, x) -> Self`, which stores `value` in the field `x`; each is allowed to go
/// unused in builds without the feature named before it (the one whose code sets it).
macro_rules! with_setters {
    (
        $($feature:literal $(#[doc = $doc:expr])*
        fn $name:ident($field:ident: $ty:ty) = $value:expr;)+
    ) => {$(
        #[cfg_attr(not(feature = $feature), allow(dead_code))]
        $(#[doc = $doc])*
        pub(crate) fn $name(mut self, $field: $ty) -> Self {
            self.0.$field = $value;
            self
        }
    )+};
}

impl Error {
    /// An error of `kind` with a reason and no path.
    pub(crate) fn new(kind: ErrorKind, reason: impl Into<String>) -> Self {
        Self(Box::new(Inner {
            kind,
            path: None,
            uri: None,
            line: None,
            status: None,
            attempts: 0,
            temporary: None,
            retry_after: None,
            reason: reason.into(),
            source: None,
        }))
    }

    with_setters! {
        "fetch"
        /// Attaches the URI (shown in place of a path) the error concerns.
        fn with_uri(uri: impl Into<String>) = Some(uri.into());
        "remote"
        /// Attaches the HTTP status a server answered with.
        fn with_status(status: u16) = Some(status);
        "remote"
        /// Marks the error temporary (a retry may help) or permanent, overriding the kind's
        /// default.
        fn with_temporary(temporary: bool) = Some(temporary);
        "remote"
        /// Records the server's `Retry-After`.
        fn with_retry_after(retry_after: Option<std::time::Duration>) = retry_after;
        "remote"
        /// Records how many attempts were made before giving up.
        fn with_attempts(attempts: u32) = attempts;
        "source-local"
        /// Attaches the path the error concerns.
        fn with_path(path: impl Into<PathBuf>) = Some(path.into());
        "source-local"
        /// Attaches a 1-based line number (list files).
        fn with_line(line: u64) = Some(line);
        "remote"
        /// Replaces the reason, keeping kind, path and source.
        fn with_reason(reason: impl Into<String>) = reason.into();
    }

    #[cfg_attr(not(feature = "source-local"), allow(dead_code))]
    /// Maps an I/O error on `path` to a kind and a short reason, keeping it as the source.
    /// A missing file that is a symbolic link says so: listings keep broken links as samples
    /// so that each fails as one sample, and the reason must tell the user what to fix.
    pub(crate) fn io(err: io::Error, path: &Path) -> Self {
        let (kind, reason) = match err.kind() {
            io::ErrorKind::NotFound => match std::fs::read_link(path) {
                Ok(target) => (
                    ErrorKind::NotFound,
                    format!(
                        "broken symbolic link: its target {} does not exist",
                        escape_path(&target)
                    ),
                ),
                Err(_) => (ErrorKind::NotFound, "no such file or directory".into()),
            },
            io::ErrorKind::PermissionDenied => {
                (ErrorKind::PermissionDenied, "permission denied".into())
            }
            io::ErrorKind::IsADirectory => (
                ErrorKind::IsADirectory,
                "is a directory, expected a file".into(),
            ),
            io::ErrorKind::NotADirectory => (
                ErrorKind::NotADirectory,
                "a path component is not a directory".into(),
            ),
            _ => (ErrorKind::Io, err.to_string()),
        };
        let mut e = Self::new(kind, reason);
        e.0.path = Some(path.to_path_buf());
        e.0.source = Some(Box::new(err));
        e
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The file, directory or list file the error concerns, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.0.path.as_deref()
    }

    /// The remote URI (`https://...`, `s3://bucket/key`) the error concerns, when there is one.
    pub fn uri(&self) -> Option<&str> {
        self.0.uri.as_deref()
    }

    /// The HTTP status the server answered with, for [`ErrorKind::Http`] and, where the backend
    /// reports it, [`ErrorKind::NotFound`] / [`ErrorKind::PermissionDenied`].
    pub fn status(&self) -> Option<u16> {
        self.0.status
    }

    /// How many attempts were made (1 when the first failure was permanent); 0 for errors that
    /// did not come from a fetch.
    pub fn attempts(&self) -> u32 {
        self.0.attempts
    }

    /// The delay the server asked for with `Retry-After`, when it sent one.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        self.0.retry_after
    }

    /// The 1-based line of a list file the error concerns, when there is one.
    pub fn line(&self) -> Option<u64> {
        self.0.line
    }

    /// The reason alone, without kind or path.
    pub fn reason(&self) -> &str {
        &self.0.reason
    }

    /// Whether retrying the same operation may succeed: an interrupted or timed-out read, a
    /// 5xx / 408 / 429 answer, throttling, a timeout, a stalled or short body, a reset
    /// connection.
    ///
    /// Everything else is permanent: a missing file stays missing (404), a forbidden one
    /// forbidden (403), a malformed line malformed, an HTML page HTML. Retry logic reads this, as
    /// with OpenDAL's temporary/permanent status.
    pub fn is_temporary(&self) -> bool {
        if let Some(temporary) = self.0.temporary {
            return temporary;
        }
        match self.0.kind {
            ErrorKind::Timeout | ErrorKind::Stalled | ErrorKind::ShortBody | ErrorKind::Network => {
                true
            }
            ErrorKind::Http => self
                .0
                .status
                .is_some_and(|s| s >= 500 || s == 408 || s == 429),
            _ => self
                .0
                .source
                .as_ref()
                .and_then(|e| e.downcast_ref::<io::Error>())
                .is_some_and(|e| {
                    matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::WouldBlock
                    )
                }),
        }
    }

    fn message(&self) -> String {
        let mut out = format!("{}: ", self.0.kind);
        let shown = match (&self.0.uri, &self.0.path) {
            (Some(uri), _) => Some(uri.clone()),
            (None, Some(path)) => Some(escape_path(path)),
            (None, None) => None,
        };
        if let Some(shown) = shown {
            out.push_str(&shown);
            if let Some(line) = self.0.line {
                let _ = write!(out, ":{line}");
            }
            out.push_str(": ");
        }
        out.push_str(&self.0.reason);
        if self.0.attempts > 1 {
            let _ = write!(out, " ({} attempts)", self.0.attempts);
        }
        out
    }
}

/// Renders a path byte-exact: UTF-8 runs as they are, every other byte as `\xNN`.
///
/// `Path::display` replaces invalid bytes with U+FFFD, which loses the name a user needs to
/// find the file; this keeps it.
pub(crate) fn escape_path(path: &Path) -> String {
    escape_bytes(path.as_os_str().as_encoded_bytes())
}

/// Renders bytes as UTF-8 where they are, `\xNN` elsewhere.
pub(crate) fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_kind_path_line_and_reason() {
        let e = Error::new(ErrorKind::InvalidListLine, "label \"x\" is not an integer")
            .with_path("lists/train.txt")
            .with_line(7);
        assert_eq!(
            e.to_string(),
            "invalid list line: lists/train.txt:7: label \"x\" is not an integer"
        );
        assert_eq!(e.line(), Some(7));
    }

    #[test]
    fn io_kinds_are_mapped() {
        let p = Path::new("a.jpg");
        let cases = [
            (io::ErrorKind::NotFound, ErrorKind::NotFound),
            (io::ErrorKind::PermissionDenied, ErrorKind::PermissionDenied),
            (io::ErrorKind::IsADirectory, ErrorKind::IsADirectory),
            (io::ErrorKind::UnexpectedEof, ErrorKind::Io),
        ];
        for (io_kind, kind) in cases {
            let e = Error::io(io::Error::from(io_kind), p);
            assert_eq!(e.kind(), kind);
            assert_eq!(e.path(), Some(p));
            assert!(e.to_string().contains("a.jpg"), "{e}");
            assert!(!e.is_temporary());
        }
        assert!(Error::io(io::Error::from(io::ErrorKind::Interrupted), p).is_temporary());
    }

    #[test]
    fn the_status_survives_wrapping_in_an_op_error() {
        use spdl_core::ErrorKind as Core;
        let p = Path::new("a.jpg");
        for (io_kind, temporary) in [
            (io::ErrorKind::Interrupted, true),
            (io::ErrorKind::NotFound, false),
        ] {
            let e = Error::io(io::Error::from(io_kind), p);
            let op = spdl_core::Error::from_status(Core::OpFailed, e);
            assert_eq!(op.is_temporary(), temporary);
            let again = spdl_core::Error::from_op(Core::OpFailed, Box::new(op));
            assert_eq!(again.is_temporary(), temporary);
            assert!(again.message().contains("a.jpg"), "{again}");
        }
    }

    #[test]
    fn invalid_bytes_are_escaped_not_replaced() {
        assert_eq!(escape_bytes(b"caf\xe9_latin1.png"), "caf\\xe9_latin1.png");
        assert_eq!(escape_bytes("café 🙂.png".as_bytes()), "café 🙂.png");
    }
}
