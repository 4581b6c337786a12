//! Rust errors as Python exceptions, keeping the Rust message (which names the sample).

use pyo3::exceptions::{
    PyFileNotFoundError, PyIsADirectoryError, PyNotADirectoryError, PyOSError, PyPermissionError,
    PyValueError,
};
use pyo3::prelude::*;
use pyo3::PyErr;

/// The error of a native op (a Rust error, or a message naming the sample).
pub(crate) type OpError = Box<dyn std::error::Error + Send + Sync>;

/// The name of `obj`'s type, for error messages.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A decode / collate error: `ValueError("truncated: path.jpg: ...")`.
pub(crate) fn io_err(e: spdl_io::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A listing or read error: the matching `OSError` subclass, or `ValueError` for bad input.
pub(crate) fn sources_err(e: spdl_sources::Error) -> PyErr {
    sources_err_ref(&e)
}

/// [`sources_err`] for a borrowed error (one kept as the source of another).
pub(crate) fn sources_err_ref(e: &spdl_sources::Error) -> PyErr {
    use spdl_sources::ErrorKind as K;
    let msg = e.to_string();
    match e.kind() {
        K::NotFound => PyFileNotFoundError::new_err(msg),
        K::PermissionDenied => PyPermissionError::new_err(msg),
        K::IsADirectory => PyIsADirectoryError::new_err(msg),
        K::NotADirectory => PyNotADirectoryError::new_err(msg),
        K::Io | K::SymlinkLoop => PyOSError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}
