//! DLPack capsules and `__cuda_array_interface__` dicts for Python, built from spdl-cuda's one
//! description of an export ([`TensorExport`]: the DLPack layouts and dtype live there, for
//! host and device memory alike). Used by `CPUBuffer` and `CUDABuffer`.

use std::ffi::CStr;

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use spdl_io::dlpack::{ConsumerStream, DLManagedTensor, DLManagedTensorVersioned, TensorExport};

/// The keyword arguments of `__dlpack__` as the array API standard gives them (`stream`,
/// `max_version`, `dl_device`, `copy`, each `None` by default), read in one place for every
/// exporter; each exporter checks them in the order its memory needs.
pub(crate) struct DlpackArgs<'py> {
    stream: Option<Bound<'py, PyAny>>,
    max_version: Option<Bound<'py, PyAny>>,
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
}

impl<'py> DlpackArgs<'py> {
    /// The arguments `kwargs`: `TypeError` naming an unknown keyword, or for a `dl_device`
    /// that is not a `(type, id)` tuple or a `copy` that is not a bool.
    pub(crate) fn parse(kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Self> {
        let (mut stream, mut max_version, mut dl_device, mut copy) = (None, None, None, None);
        for (key, value) in kwargs.into_iter().flatten() {
            let slot = match key.extract::<String>()?.as_str() {
                "stream" => &mut stream,
                "max_version" => &mut max_version,
                "dl_device" => &mut dl_device,
                "copy" => &mut copy,
                other => {
                    return Err(PyTypeError::new_err(format!(
                        "__dlpack__() got an unexpected keyword argument '{other}'"
                    )))
                }
            };
            *slot = Some(value).filter(|v| !v.is_none());
        }
        Ok(DlpackArgs {
            stream,
            max_version,
            dl_device: dl_device
                .map(|d| {
                    d.extract()
                        .map_err(|e| named(d.py(), e, "dl_device must be a (type, id) tuple"))
                })
                .transpose()?,
            copy: copy
                .map(|c| {
                    c.extract()
                        .map_err(|e| named(c.py(), e, "copy must be a bool or None"))
                })
                .transpose()?,
        })
    }

    /// `BufferError` for `copy=True` or a `dl_device` other than `own`, the DLPack device of
    /// `what`: its export is zero-copy, on its own device.
    pub(crate) fn check_device(&self, own: (i32, i32), what: &str) -> PyResult<()> {
        if self.copy == Some(true) {
            return Err(PyBufferError::new_err(format!(
                "{what} exports without copying only (copy=True is not supported)"
            )));
        }
        match self.dl_device {
            Some(dev) if dev != own => Err(PyBufferError::new_err(format!(
                "{what} lives on DLPack device {own:?}, cannot export to device {dev:?}"
            ))),
            _ => Ok(()),
        }
    }

    /// Whether the consumer takes the versioned capsule (`max_version >= (1, 0)`, DLPack
    /// 1.x); `TypeError` for a `max_version` that is not a `(major, minor)` tuple.
    pub(crate) fn versioned(&self) -> PyResult<bool> {
        let Some(v) = &self.max_version else {
            return Ok(false);
        };
        let (major, _minor): (i64, i64) = v.extract().map_err(|_| {
            PyTypeError::new_err("__dlpack__: max_version must be a (major, minor) tuple")
        })?;
        Ok(major >= 1)
    }

    /// `stream` as CUDA memory reads it (the array API's convention): `None` or `1` the legacy
    /// default stream, `2` the per-thread default stream, `-1` no synchronization, another
    /// positive int a `cudaStream_t`. `TypeError` for a non-int, `ValueError` for `0` and
    /// other negative values.
    pub(crate) fn consumer_stream(&self) -> PyResult<ConsumerStream> {
        let raw = self.stream_int("stream must be an int (a CUDA stream handle) or None")?;
        ConsumerStream::from_dlpack_arg(raw).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// `stream` for host memory: accepted as the array API requires (an int or `None`, with
    /// no effect); `TypeError` for anything else.
    pub(crate) fn check_host_stream(&self) -> PyResult<()> {
        self.stream_int("stream must be an int or None").map(|_| ())
    }

    fn stream_int(&self, message: &str) -> PyResult<Option<i64>> {
        let Some(s) = &self.stream else {
            return Ok(None);
        };
        s.extract::<i64>()
            .map(Some)
            .map_err(|e| named(s.py(), e, message))
    }
}

/// A `TypeError` from extracting an argument, given `__dlpack__`'s own message; other errors
/// (an `OverflowError` for an int out of range) as they are.
fn named(py: Python<'_>, e: PyErr, message: &str) -> PyErr {
    if e.is_instance_of::<PyTypeError>(py) {
        PyTypeError::new_err(format!("__dlpack__: {message}"))
    } else {
        e
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
