//! DLPack capsules and `__cuda_array_interface__` dicts for Python, built from spdl-cuda's one
//! description of an export ([`TensorExport`]: the DLPack layouts and dtype live there, for
//! host and device memory alike). Used by `CPUBuffer` and `CUDABuffer`.

use std::ffi::CStr;

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use spdl_cuda::dlpack::{DLManagedTensor, DLManagedTensorVersioned};
use spdl_cuda::{ConsumerStream, TensorExport};

/// `BufferError` for a copy or another device demanded of a zero-copy export.
pub(crate) fn check_dlpack_args(
    own: (i32, i32),
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
    what: &str,
) -> PyResult<()> {
    if copy == Some(true) {
        return Err(PyBufferError::new_err(format!(
            "{what} exports without copying only (copy=True is not supported)"
        )));
    }
    match dl_device {
        Some(dev) if dev != own => Err(PyBufferError::new_err(format!(
            "{what} lives on DLPack device {own:?}, cannot export to device {dev:?}"
        ))),
        _ => Ok(()),
    }
}

/// The `stream` argument of `__dlpack__` for CUDA memory.
pub(crate) fn consumer_stream(stream: Option<&Bound<'_, PyAny>>) -> PyResult<ConsumerStream> {
    let raw = match stream {
        None => None,
        Some(s) if s.is_none() => None,
        Some(s) => Some(s.extract::<i64>().map_err(|_| {
            PyTypeError::new_err("__dlpack__: stream must be an int (a CUDA stream handle) or None")
        })?),
    };
    ConsumerStream::from_dlpack_arg(raw).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Whether `max_version` allows the versioned (DLPack 1.x) capsule.
pub(crate) fn wants_versioned(max_version: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    match max_version {
        None => Ok(false),
        Some(v) if v.is_none() => Ok(false),
        Some(v) => {
            let (major, _minor): (i64, i64) = v.extract().map_err(|_| {
                PyTypeError::new_err("__dlpack__: max_version must be a (major, minor) tuple")
            })?;
            Ok(major >= 1)
        }
    }
}

/// The `__cuda_array_interface__` dict of an export.
pub(crate) fn cai_dict<'py>(
    py: Python<'py>,
    export: &TensorExport,
) -> PyResult<Bound<'py, PyDict>> {
    let cai = export
        .cuda_array_interface()
        .map_err(|e| PyBufferError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    d.set_item("shape", PyTuple::new(py, &cai.shape)?)?;
    d.set_item("typestr", cai.typestr)?;
    d.set_item("data", cai.data)?;
    d.set_item("strides", py.None())?;
    d.set_item("version", cai.version)?;
    d.set_item("stream", cai.stream)?;
    Ok(d)
}

const NAME: &CStr = c"dltensor";
const NAME_VERSIONED: &CStr = c"dltensor_versioned";

/// The two DLPack managed-tensor structs (`"dltensor"` and `"dltensor_versioned"`), to the
/// code that frees them: each has a deleter of its own type.
trait Managed {
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
}

impl Managed for DLManagedTensor {
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

impl Managed for DLManagedTensorVersioned {
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

/// Calls `m`'s deleter (which frees it).
///
/// # Safety
/// `m` is a live tensor from `into_dlpack*`, not deleted yet.
unsafe fn delete<T: Managed>(m: *mut T) {
    // SAFETY: `m` is live (the caller's contract).
    unsafe {
        if let Some(d) = (*m).deleter() {
            d(m);
        }
    }
}

/// Frees the tensor of an unconsumed capsule named `name` (a consumer renames the capsule to
/// `"used_dltensor"` / `"used_dltensor_versioned"` and calls the deleter itself).
///
/// # Safety
/// `capsule` is live; when it is named `name`, it holds a `T` from `into_dlpack*`.
unsafe fn free_unconsumed<T: Managed>(capsule: *mut ffi::PyObject, name: &CStr) {
    // SAFETY: `PyCapsule_IsValid` sets no exception; the pointer is a `T` (the contract).
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, name.as_ptr()) == 1 {
            delete(ffi::PyCapsule_GetPointer(capsule, name.as_ptr()).cast::<T>());
        }
    }
}

/// The destructor of a `"dltensor"` capsule: frees its tensor if no consumer took it.
unsafe extern "C" fn destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by the interpreter with a live capsule; ours hold a `DLManagedTensor`.
    unsafe { free_unconsumed::<DLManagedTensor>(capsule, NAME) }
}

/// As [`destructor`], for `"dltensor_versioned"`.
unsafe extern "C" fn destructor_versioned(capsule: *mut ffi::PyObject) {
    // SAFETY: as in `destructor`, with a `DLManagedTensorVersioned`.
    unsafe { free_unconsumed::<DLManagedTensorVersioned>(capsule, NAME_VERSIONED) }
}

/// A new capsule named `name` owning `m` (with `destructor`), or null with the Python error
/// set, `m` deleted.
///
/// # Safety
/// `m` is a live tensor from `into_dlpack*`, owned by the caller, of the type `destructor`
/// frees for `name`.
unsafe fn new_capsule<T: Managed>(
    m: *mut T,
    name: &CStr,
    destructor: unsafe extern "C" fn(*mut ffi::PyObject),
) -> *mut ffi::PyObject {
    // SAFETY: the caller's contract; on failure the capsule never owned `m`.
    unsafe {
        let cap = ffi::PyCapsule_New(m.cast(), name.as_ptr(), Some(destructor));
        if cap.is_null() {
            delete(m);
        }
        cap
    }
}

/// A DLPack capsule owning `export`'s keep-alive until the consumer (or the capsule's
/// destructor, if never consumed) calls the deleter.
pub(crate) fn capsule(
    py: Python<'_>,
    export: TensorExport,
    versioned: bool,
) -> PyResult<Py<PyAny>> {
    // SAFETY: the pointers come from `into_dlpack*` (heap, owned by the capsule from here),
    // with the destructor of their type.
    unsafe {
        let cap = if versioned {
            new_capsule(
                export.into_dlpack_versioned(),
                NAME_VERSIONED,
                destructor_versioned,
            )
        } else {
            new_capsule(export.into_dlpack(), NAME, destructor)
        };
        if cap.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, cap).unbind())
    }
}
