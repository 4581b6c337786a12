//! The GPU names in a build without the `cuda` feature (spdl-cuda is not linked): types that
//! cannot be made and functions that raise `RuntimeError` saying how to rebuild, so that the
//! CPU code around them needs no `cfg`.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use spdl_core::buffer::PooledBuffer;
use spdl_io::HostBatch;

use crate::buffer::HostView;
use crate::cuda::{GpuError, NOT_BUILT};
use crate::reserved::Reserved;

/// No value: what the stand-ins below hold, so that none is ever made.
#[derive(Clone, Copy)]
enum Never {}

/// Stands in for the device of a `to_device` stage: [`CudaTarget::new`] always raises.
pub(crate) struct CudaTarget(Never);

impl CudaTarget {
    /// Always `RuntimeError`: this build has no CUDA support.
    pub(crate) fn new(_device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        Err(PyRuntimeError::new_err(NOT_BUILT))
    }

    pub(crate) fn index(&self) -> usize {
        match self.0 {}
    }

    pub(crate) fn reserve_pinned(&self, _len: usize) -> Option<Reserved> {
        match self.0 {}
    }

    pub(crate) fn transfer_host(&self, _b: HostBatch) -> Result<CudaBuffer, GpuError> {
        match self.0 {}
    }

    pub(crate) fn transfer_view(&self, _view: &HostView) -> Result<CudaBuffer, GpuError> {
        match self.0 {}
    }
}

/// `spdl_rs.io.CUDABuffer` in a build without CUDA: the class exists (for `isinstance`), no
/// instance of it can.
#[pyclass(frozen, module = "spdl_rs.io", name = "CUDABuffer")]
#[derive(Clone)]
pub(crate) struct CudaBuffer(Never);

impl CudaBuffer {
    pub(crate) fn device_ordinal(&self) -> usize {
        match self.0 {}
    }
}

/// Always a [`GpuError`]: page-locked memory needs the CUDA driver, which this build does not
/// load.
pub(crate) fn pinned_buffer(_size: usize) -> Result<PooledBuffer, GpuError> {
    Err(GpuError(NOT_BUILT.into()))
}

/// The `spdl_rs._native` names that need CUDA (`io.transfer_buffer`, the nvJPEG and NVDEC
/// entry points): in this build each is [`not_built`].
pub(crate) const GPU_ONLY: &[&str] = &[
    "transfer_buffer",
    "nvjpeg_fallback_reason",
    "_decode_image_nvjpeg",
    "_NvdecSpec",
    "_NvdecSession",
    "_packets_annexb",
    "_nv12_to_planar",
];

/// Raises `RuntimeError`: this build of spdl_rs has no CUDA support (the message says how to
/// rebuild it). Takes any arguments, so that every GPU entry point raises the same error.
#[pyfunction]
#[pyo3(signature = (*args, **kwargs))]
pub(crate) fn not_built(
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<()> {
    let _ = (args, kwargs);
    Err(PyRuntimeError::new_err(NOT_BUILT))
}
