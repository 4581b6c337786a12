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

/// A decode / collate error: `spdl_rs.io.MediaError("truncated: path.jpg: ...")`, a
/// `ValueError` that is also a `RuntimeError` (what SPDL raises for data it cannot read), so
/// that code catching either works. Takes spdl-io's errors and those that convert into them
/// (spdl-tar's: the same message).
pub(crate) fn io_err(e: impl Into<spdl_io::Error>) -> PyErr {
    let msg = e.into().to_string();
    runtime_twin_err(
        &MEDIA_ERROR,
        "MediaError",
        |py| py.get_type::<PyValueError>(),
        msg,
    )
}

static MEDIA_ERROR: pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>> = pyo3::sync::PyOnceLock::new();
static OPEN_ERROR: pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>> = pyo3::sync::PyOnceLock::new();

/// `msg` raised as `spdl_rs.io.<name>(base, RuntimeError)` (see [`runtime_twin`]), or the
/// error that kept the class from being made.
fn runtime_twin_err(
    cell: &pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>>,
    name: &str,
    base: fn(Python<'_>) -> Bound<'_, pyo3::types::PyType>,
    msg: String,
) -> PyErr {
    Python::attach(|py| match runtime_twin(py, cell, name, base(py)) {
        Ok(t) => PyErr::from_type(t, msg),
        Err(e) => e,
    })
}

/// The class `spdl_rs.io.<name>(base, RuntimeError)`, made once: SPDL raises `RuntimeError`
/// where spdl_rs raises a more precise class, and a switching program may catch either.
fn runtime_twin<'py>(
    py: Python<'py>,
    cell: &pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>>,
    name: &str,
    base: Bound<'py, pyo3::types::PyType>,
) -> PyResult<Bound<'py, pyo3::types::PyType>> {
    let t = cell.get_or_try_init(py, || -> PyResult<_> {
        let bases = (base, py.get_type::<pyo3::exceptions::PyRuntimeError>());
        let ns = pyo3::types::PyDict::new(py);
        ns.set_item("__module__", "spdl_rs.io")?;
        let t = py
            .get_type::<pyo3::types::PyType>()
            .call1((name, bases, ns))?
            .cast_into::<pyo3::types::PyType>()?;
        Ok(t.unbind())
    })?;
    Ok(t.bind(py).clone())
}

/// A source file that cannot be opened: SPDL's `"Failed to open the input ..."`, as
/// `spdl_rs.io.OpenError`, a `FileNotFoundError` that is also a `RuntimeError` (SPDL's class).
pub(crate) fn not_found_err(msg: String) -> PyErr {
    let msg = format!("Failed to open the input {msg}");
    runtime_twin_err(
        &OPEN_ERROR,
        "OpenError",
        |py| py.get_type::<PyFileNotFoundError>(),
        msg,
    )
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
