//! The one error type of spdl-core.
//!
//! Modelled on OpenDAL's error: a [`ErrorKind`], whether retrying may help
//! ([`Error::is_temporary`]), context (the stage and the sample position) and the source.

use std::fmt;

/// A boxed error from user code (an op, a source). Any `std::error::Error + Send + Sync`
/// converts into it with `?`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `Result` with [`Error`] as the error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The temporary/permanent status every crate's error reports (OpenDAL's model): retry logic
/// reads it. spdl-core's, spdl-io's, spdl-sources' and spdl-cuda's errors implement it.
pub trait ErrorStatus: std::error::Error {
    /// Whether retrying the same call may succeed (a timeout, a 5xx answer, a pool that was
    /// full); `false` for a permanent failure (a missing file, a corrupt image).
    fn is_temporary(&self) -> bool;
}

/// What went wrong, coarsely: callers branch on this, people read the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An op returned an error for one item.
    OpFailed,
    /// An op panicked for one item; the panic was caught and the item dropped.
    OpPanicked,
    /// A failure budget (`max_failures`) was exceeded; the pipeline stopped.
    TooManyFailures,
    /// The source's iterator or stream failed.
    Source,
    /// No item arrived within the caller's timeout (mirrors SPDL's `TimeoutError`).
    Timeout,
    /// The pipeline was stopped, or a thread of it could not be started.
    Stopped,
    /// A builder or call argument is invalid.
    InvalidArgument,
}

impl ErrorKind {
    fn as_str(self) -> &'static str {
        match self {
            ErrorKind::OpFailed => "op failed",
            ErrorKind::OpPanicked => "op panicked",
            ErrorKind::TooManyFailures => "too many failures",
            ErrorKind::Source => "source failed",
            ErrorKind::Timeout => "timed out",
            ErrorKind::Stopped => "pipeline stopped",
            ErrorKind::InvalidArgument => "invalid argument",
        }
    }
}

/// The error of spdl-core: a kind, a message, optional context and an optional source.
///
/// `Display` prints `kind: stage=NAME position=N: message`, the order of every error in the
/// workspace (kind, then context, then reason), so a log line names where the failure happened
/// and which sample it concerned; the context part is left out while none is known.
pub struct Error {
    kind: ErrorKind,
    message: String,
    stage: Option<String>,
    position: Option<u64>,
    temporary: bool,
    source: Option<BoxError>,
    /// The message is the source's own text ([`Error::from_op`]): `source()` then goes on from
    /// the source's cause, so that a reporter walking the chain prints each text once.
    transparent: bool,
}

impl Error {
    /// A new error of `kind` with a human-readable `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            stage: None,
            position: None,
            temporary: false,
            source: None,
            transparent: false,
        }
    }

    /// Wraps an error from user code, keeping it as the source. The status is kept when the
    /// error, or one in its source chain, is spdl-core's (see [`Error::from_status`] for the
    /// other crates' errors). An spdl-core error of the same kind is taken as it is (one
    /// `kind:` prefix, its context, status and source kept).
    pub fn from_op(kind: ErrorKind, source: BoxError) -> Self {
        let source = match source.downcast::<Error>() {
            Ok(same) if same.kind == kind => return *same,
            Ok(other) => other as BoxError,
            Err(source) => source,
        };
        let message = source.to_string();
        let mut chain: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
        let mut temporary = false;
        while let Some(e) = chain {
            if let Some(e) = e.downcast_ref::<Error>() {
                temporary = e.temporary;
                break;
            }
            chain = e.source();
        }
        Error {
            temporary,
            source: Some(source),
            transparent: true,
            ..Error::new(kind, message)
        }
    }

    /// Sets the error this one was caused by (`source()`), when the message says something
    /// of its own (e.g. a failure budget exceeded, caused by the last failure).
    pub fn with_cause(mut self, cause: BoxError) -> Self {
        self.source = Some(cause);
        self.transparent = false;
        self
    }

    /// The wrapped error: an op's own error for [`ErrorKind::OpFailed`] (downcast it, e.g. to
    /// `spdl_io::Error`, for its kind), the cause given to [`Error::with_cause`]; `None` for an
    /// error made by [`Error::new`]. Mirrors `std::io::Error::get_ref`.
    pub fn get_ref(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }

    /// Wraps another crate's error (spdl-io's, spdl-sources', ...) as an op's, keeping its
    /// status, so that [`Error::from_op`] keeps it too when an op returns this error.
    pub fn from_status<E: ErrorStatus + Send + Sync + 'static>(kind: ErrorKind, e: E) -> Self {
        let temporary = e.is_temporary();
        Error {
            temporary,
            ..Error::from_op(kind, Box::new(e))
        }
    }

    /// [`Error::from_status`] for a boxed error that may be an `E` (a native op's error boxed
    /// by `?`); the box comes back unchanged in `Err` when it is not an `E`.
    pub fn from_boxed_status<E: ErrorStatus + Send + Sync + 'static>(
        kind: ErrorKind,
        e: BoxError,
    ) -> std::result::Result<Self, BoxError> {
        e.downcast::<E>().map(|e| Error::from_status(kind, *e))
    }

    /// Sets the stage name this error happened in.
    pub fn with_stage(mut self, stage: impl Into<String>) -> Self {
        self.stage = Some(stage.into());
        self
    }

    /// Sets the position of the sample in its epoch (0-based, in source order).
    pub fn with_position(mut self, position: u64) -> Self {
        self.position = Some(position);
        self
    }

    /// Marks the error as temporary: retrying the same call may succeed.
    pub fn set_temporary(mut self) -> Self {
        self.temporary = true;
        self
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without context.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The stage the error happened in, if known.
    pub fn stage(&self) -> Option<&str> {
        self.stage.as_deref()
    }

    /// The position of the sample in its epoch, if known.
    pub fn position(&self) -> Option<u64> {
        self.position
    }

    /// Whether retrying may succeed (network timeouts, 5xx); `false` by default.
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.as_str())?;
        match (&self.stage, self.position) {
            (Some(s), Some(p)) => write!(f, ": stage={s} position={p}")?,
            (Some(s), None) => write!(f, ": stage={s}")?,
            (None, Some(p)) => write!(f, ": position={p}")?,
            (None, None) => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("message", &self.message);
        if let Some(s) = &self.stage {
            d.field("stage", s);
        }
        if let Some(p) = self.position {
            d.field("position", &p);
        }
        if let Some(s) = &self.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl ErrorStatus for Error {
    fn is_temporary(&self) -> bool {
        self.temporary
    }
}

impl std::error::Error for Error {
    /// The cause. For an op's error wrapped by [`Error::from_op`], whose text this error's
    /// `Display` already shows, the op error's own cause (as `thiserror`'s `transparent`): the
    /// op error itself is [`Error::get_ref`].
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let wrapped = self
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))?;
        if self.transparent {
            wrapped.source()
        } else {
            Some(wrapped)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_op_error_keeps_its_status_when_wrapped() {
        let inner = Error::new(ErrorKind::Source, "pool full").set_temporary();
        let wrapped = Error::from_op(ErrorKind::OpFailed, Box::new(inner));
        assert!(wrapped.is_temporary());
        assert_eq!(wrapped.to_string(), "op failed: source failed: pool full");
        let twice = Error::from_op(ErrorKind::OpFailed, Box::new(wrapped.with_stage("decode")));
        assert!(twice.is_temporary());
        let permanent = Error::new(ErrorKind::Source, "gone");
        assert!(!Error::from_op(ErrorKind::OpFailed, Box::new(permanent)).is_temporary());
        let plain: BoxError = "no status".into();
        assert!(!Error::from_op(ErrorKind::OpFailed, plain).is_temporary());
    }

    #[test]
    fn another_crates_status_is_kept() {
        #[derive(Debug)]
        struct Flaky;
        impl fmt::Display for Flaky {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("flaky")
            }
        }
        impl std::error::Error for Flaky {}
        impl ErrorStatus for Flaky {
            fn is_temporary(&self) -> bool {
                true
            }
        }
        let e = Error::from_status(ErrorKind::OpFailed, Flaky);
        assert!(e.is_temporary());
        let wrapped = Error::from_op(ErrorKind::OpFailed, Box::new(e));
        assert!(wrapped.is_temporary());
        let boxed: BoxError = Box::new(Flaky);
        let found = Error::from_boxed_status::<Flaky>(ErrorKind::OpFailed, boxed).unwrap();
        assert!(found.is_temporary());
        let other: BoxError = "plain".into();
        let back = Error::from_boxed_status::<Flaky>(ErrorKind::OpFailed, other).unwrap_err();
        assert_eq!(back.to_string(), "plain");
        // Taken as it is: one `op failed:` prefix; the foreign error is `get_ref`, and its
        // text is not repeated by `source()` (it has no cause of its own).
        assert_eq!(wrapped.to_string(), "op failed: flaky");
        assert_eq!(wrapped.get_ref().unwrap().to_string(), "flaky");
        assert!(wrapped.get_ref().unwrap().is::<Flaky>());
        assert!(std::error::Error::source(&wrapped).is_none());
    }
}
