//! The crate's single error type: a kind, the sample key, the reason, a temporary/permanent
//! status ([`spdl_core::ErrorStatus`]) and the source.

use std::fmt;

/// What went wrong, coarse enough for retry/skip logic to match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The bytes match no known image signature (e.g. HTML, text).
    UnknownFormat,
    /// A known format or feature that no registered decoder handles
    /// (e.g. WebP without `decode-image`, arithmetic JPEG on the pure-Rust path).
    Unsupported,
    /// The data ends before the image does (premature end, missing scan data).
    Truncated,
    /// The data is malformed in a way that is not simply a short file.
    Corrupt,
    /// The header claims more pixels or bytes than [`crate::Limits`] allow.
    LimitExceeded,
    /// The input has zero bytes (or an empty batch was collated).
    Empty,
    /// Images in one batch differ in shape or sample type.
    ShapeMismatch,
    /// A caller-supplied argument is invalid (buffer too small, zero size, ...).
    InvalidArgument,
    /// The sample's bytes could not be read (the reader given to [`crate::load_batch`]
    /// failed: a missing file, an I/O error); the reader's error is the source.
    Read,
    /// No buffer for a batch: its pool timed out (temporary) or could not allocate; the
    /// pool's error is the source ([`crate::load_batch_pooled`], [`crate::batch::collate_into`]).
    Buffer,
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
            ErrorKind::ShapeMismatch => "shape mismatch",
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::Read => "read failed",
            ErrorKind::Buffer => "no batch buffer",
        })
    }
}

/// The error of every fallible function in `spdl-io`.
///
/// Displays as `"{kind}: {key}: {message}"`, the order of every error in the workspace (kind,
/// then context, then reason), e.g. `"truncated: photos/a.jpg: premature end of JPEG file"`;
/// the key part is left out while no sample key is known (decoders called directly), and the
/// [`crate::Registry`] / [`crate::ImageLoader`] attach it.
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {}{message}", key_prefix(key))]
pub struct Error {
    kind: ErrorKind,
    key: String,
    message: String,
    temporary: bool,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `"key: "`, or nothing while the key is unknown.
fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}

impl Error {
    /// An error of `kind` with a human-readable `message` and no sample key yet.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            key: String::new(),
            message: message.into(),
            temporary: false,
            source: None,
        }
    }

    /// Attaches the underlying library error (kept for `source()`).
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Sets the sample key (file name, URL, archive member) if none is set yet.
    pub fn with_key(mut self, key: &str) -> Self {
        if self.key.is_empty() {
            self.key = key.to_owned();
        }
        self
    }

    /// Marks the error temporary (retrying may succeed: a [`ErrorKind::Read`] that timed out)
    /// or permanent, the default: decoding the same bytes again fails the same way.
    pub fn with_temporary(mut self, temporary: bool) -> Self {
        self.temporary = temporary;
        self
    }

    /// Whether retrying may succeed; see [`Error::with_temporary`].
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }

    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The sample key, empty when unknown.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The reason, without key and kind.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl spdl_core::ErrorStatus for Error {
    fn is_temporary(&self) -> bool {
        self.temporary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_kind_key_and_reason() {
        let e =
            Error::new(ErrorKind::Truncated, "premature end of JPEG file").with_key("photos/a.jpg");
        assert_eq!(
            e.to_string(),
            "truncated: photos/a.jpg: premature end of JPEG file"
        );
        // The first key wins: inner layers know best.
        assert_eq!(e.with_key("other").key(), "photos/a.jpg");
        assert_eq!(Error::new(ErrorKind::Empty, "x").to_string(), "empty: x");
    }

    #[test]
    fn the_status_survives_wrapping_in_an_op_error() {
        use spdl_core::ErrorKind as Core;
        let read = Error::new(ErrorKind::Read, "timed out").with_key("s3://b/a.jpg");
        assert!(!read.is_temporary());
        let read = read.with_temporary(true);
        let op = spdl_core::Error::from_status(Core::OpFailed, read);
        assert!(op.is_temporary());
        assert_eq!(op.message(), "read failed: s3://b/a.jpg: timed out");
        assert!(spdl_core::Error::from_op(Core::OpFailed, Box::new(op)).is_temporary());
    }

    #[test]
    fn is_send_sync_static() {
        fn check<T: Send + Sync + 'static>() {}
        check::<Error>();
    }
}
