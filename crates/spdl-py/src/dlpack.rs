//! DLPack capsules and `__cuda_array_interface__` dicts for Python, built from spdl-cuda's one
//! description of an export ([`TensorExport`]: the DLPack layouts and dtype live there, for
//! host and device memory alike). Used by `CPUBuffer` and `CUDABuffer`.

use std::ffi::CStr;

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
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

/// Frees an unconsumed `"dltensor"` capsule's tensor (a consumer renames the capsule to
/// `"used_dltensor"` and calls the deleter itself).
unsafe extern "C" fn destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by the interpreter with a live capsule; `PyCapsule_IsValid` sets no
    // exception; a valid `"dltensor"` capsule of ours holds a pointer from `into_dlpack`.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr())
                .cast::<spdl_cuda::dlpack::DLManagedTensor>();
            if let Some(d) = (*m).deleter {
                d(m);
            }
        }
    }
}

/// As [`destructor`], for `"dltensor_versioned"`.
unsafe extern "C" fn destructor_versioned(capsule: *mut ffi::PyObject) {
    // SAFETY: as in `destructor`, with a pointer from `into_dlpack_versioned`.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME_VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, NAME_VERSIONED.as_ptr())
                .cast::<spdl_cuda::dlpack::DLManagedTensorVersioned>();
            if let Some(d) = (*m).deleter {
                d(m);
            }
        }
    }
}

/// A DLPack capsule owning `export`'s keep-alive until the consumer (or the capsule's
/// destructor, if never consumed) calls the deleter.
pub(crate) fn capsule(
    py: Python<'_>,
    export: TensorExport,
    versioned: bool,
) -> PyResult<Py<PyAny>> {
    // SAFETY: the pointers come from `into_dlpack*` (heap, owned by the capsule from here);
    // if the capsule cannot be made, the tensor is deleted once, here.
    unsafe {
        let cap = if versioned {
            let m = export.into_dlpack_versioned();
            let cap = ffi::PyCapsule_New(
                m.cast(),
                NAME_VERSIONED.as_ptr(),
                Some(destructor_versioned),
            );
            if cap.is_null() {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
            cap
        } else {
            let m = export.into_dlpack();
            let cap = ffi::PyCapsule_New(m.cast(), NAME.as_ptr(), Some(destructor));
            if cap.is_null() {
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
            cap
        };
        if cap.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, cap).unbind())
    }
}
