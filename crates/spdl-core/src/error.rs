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
/// `Display` prints `kind [stage=NAME position=N]: message: source`, so a log line names
/// where the failure happened and which sample it concerned.
pub struct Error {
    kind: ErrorKind,
    message: String,
    stage: Option<String>,
    position: Option<u64>,
    temporary: bool,
    source: Option<BoxError>,
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
        }
    }

    /// Wraps an error from user code, keeping it as the source.
    pub fn from_op(kind: ErrorKind, source: BoxError) -> Self {
        let message = source.to_string();
        Error {
            source: Some(source),
            ..Error::new(kind, message)
        }
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
            (Some(s), Some(p)) => write!(f, " [stage={s} position={p}]")?,
            (Some(s), None) => write!(f, " [stage={s}]")?,
            (None, Some(p)) => write!(f, " [position={p}]")?,
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

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
