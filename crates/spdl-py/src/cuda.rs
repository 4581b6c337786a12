//! The GPU end in Python: [`CudaBuffer`] (`spdl_rs.io.CUDABuffer`, a batch in device memory
//! shared zero-copy through DLPack and `__cuda_array_interface__`), the device handle of the
//! `ops.to_device` stage ([`CudaTarget`]), `io.transfer_buffer`, and what every build reports
//! about CUDA (`cuda_built`, `cuda_available`, `built_with_nvjpeg`, `nvjpeg_stats`, ...).
//!
//! The work is spdl-cuda's (its `DeviceTarget`: pinned pool, copy stream, events, device memory
//! kept alive by every view); `device` (built with the `cuda` feature, the only one that links
//! spdl-cuda) opens devices and builds the Python objects; without the feature, `absent` gives
//! the same names as types that cannot be made and functions that raise. Which pipeline items
//! go where is `ops.rs`'s (`collate_pinned`, `transfer_item`); the DLPack capsules are
//! `dlpack.rs`'s.
//!
//! No CUDA context is created before the first batch (or a `transfer_buffer` call), so a
//! pipeline can be built before `fork()`. Without the `cuda` feature every GPU call raises
//! `RuntimeError` naming the feature and how to rebuild; without a driver, spdl-cuda's
//! `no CUDA driver: ...`.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use spdl_io::dlpack::{DLDevice, DLDeviceType, TensorExport};

use crate::buffer::CpuBuffer;
use crate::dlpack::{cai_dict, capsule, DlpackArgs};

#[cfg(not(feature = "cuda"))]
mod absent;
#[cfg(feature = "cuda")]
mod device;

#[cfg(not(feature = "cuda"))]
pub(crate) use absent::{not_built, pinned_buffer, CudaBuffer, CudaTarget, GPU_ONLY};
#[cfg(all(feature = "cuda", feature = "decode-nvjpeg"))]
pub(crate) use device::nvjpeg::decoder as nvjpeg_decoder;
#[cfg(feature = "cuda")]
pub(crate) use device::{pinned_buffer, transfer_buffer, CudaBuffer, CudaTarget};

/// Whether this build has the `cuda` feature.
pub(crate) const BUILT_WITH_CUDA: bool = cfg!(feature = "cuda");

/// The message of every GPU call in a build without the `cuda` feature.
pub(crate) const NOT_BUILT: &str = "spdl_rs was built without CUDA support (the `cuda` feature \
of crates/spdl-py); rebuild it with `MATURIN_PEP517_ARGS=\"--features cuda\" pip install \
./crates/spdl-py` or `maturin build --release -m crates/spdl-py/Cargo.toml --features cuda` \
(CUDA is loaded at run time: the build needs no CUDA toolkit)";

/// An error of the GPU path (no driver, no device, a failed driver call): raised as
/// `RuntimeError`, where a bad sample is a `ValueError`.
#[derive(Debug)]
pub(crate) struct GpuError(pub(crate) String);

impl std::fmt::Display for GpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GpuError {}

impl From<GpuError> for PyErr {
    fn from(e: GpuError) -> Self {
        PyRuntimeError::new_err(e.0)
    }
}

/// A host stand-in for the export code of [`CudaBuffer`] (tests only: `spdl_rs._native.
/// _export_probe`): a `CPUBuffer`'s memory described as DLPack device `device`, through the
/// same argument checks, capsule and `__cuda_array_interface__` code, with no GPU.
#[pyclass(frozen, module = "spdl_rs._native", name = "_ExportProbe")]
pub(crate) struct ExportProbe {
    export: TensorExport,
}

#[pymethods]
impl ExportProbe {
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.export.dlpack_device()
    }

    // The standard keywords, parsed by `DlpackArgs` (what `inspect.signature` shows).
    #[pyo3(
        signature = (**kw),
        text_signature = "($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)"
    )]
    fn __dlpack__(&self, py: Python<'_>, kw: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        // In CUDABuffer's order, or CPUBuffer's for host memory.
        let args = DlpackArgs::parse(kw)?;
        let cuda = self.export.device.device_type == DLDeviceType::CUDA;
        if !cuda {
            args.check_host_stream()?;
        }
        args.check_device(self.__dlpack_device__(), "_ExportProbe")?;
        if cuda {
            args.consumer_stream()?;
        }
        let versioned = args.versioned()?;
        capsule(py, self.export.clone(), versioned)
    }

    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cai_dict(py, &self.export)
    }
}

/// The stand-in of [`ExportProbe`] (tests): `buffer`'s memory as DLPack device
/// `(device_type, device_id)` with `stream` as the producing stream.
#[pyfunction]
#[pyo3(name = "_export_probe", signature = (buffer, device_type=1, device_id=0, stream=None))]
pub(crate) fn export_probe(
    buffer: PyRef<'_, CpuBuffer>,
    device_type: i32,
    device_id: i32,
    stream: Option<usize>,
) -> ExportProbe {
    let mut export = buffer.host_view().into_export();
    export.device = DLDevice {
        device_type: DLDeviceType(device_type),
        device_id,
    };
    export.stream = stream;
    ExportProbe { export }
}

/// Whether this build has CUDA support (the `cuda` feature).
#[pyfunction]
pub(crate) fn cuda_built() -> bool {
    BUILT_WITH_CUDA
}

/// Whether a CUDA device can be used: built with CUDA, a driver, at least one device. Never
/// raises; initializes the driver (`cuInit`) when the library is present.
#[pyfunction]
pub(crate) fn cuda_available(py: Python<'_>) -> bool {
    #[cfg(feature = "cuda")]
    {
        py.detach(|| spdl_cuda::device_count().is_ok_and(|n| n > 0))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = py;
        false
    }
}

/// Why no CUDA device can be used (`None` when one can): the build, the driver, or the
/// device count.
#[pyfunction]
pub(crate) fn cuda_unavailable_reason(py: Python<'_>) -> Option<String> {
    #[cfg(feature = "cuda")]
    {
        py.detach(|| match spdl_cuda::device_count() {
            Ok(0) => Some("no CUDA device visible".into()),
            Ok(_) => None,
            Err(e) => Some(GpuError::from(e).0),
        })
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = py;
        Some(NOT_BUILT.into())
    }
}

/// SPDL's `built_with_nvjpeg`: whether this build has nvJPEG decoding (the Cargo feature
/// `decode-nvjpeg`; libnvjpeg itself is loaded when first used).
#[pyfunction]
pub(crate) fn built_with_nvjpeg() -> bool {
    cfg!(feature = "decode-nvjpeg")
}

/// SPDL's `built_with_nvcodec`: whether this build decodes video with NVDEC (the features
/// `decode-nvdec`, and `decode-ffmpeg` for the demuxer that feeds it; libnvcuvid itself is
/// loaded when first used).
#[pyfunction]
pub(crate) fn built_with_nvcodec() -> bool {
    cfg!(all(feature = "decode-nvdec", feature = "decode-ffmpeg"))
}

/// The counters of every nvJPEG decoder of this process: `batches`, `gpu_images` (decoded by
/// nvJPEG), `cpu_fallbacks` (decoded by the CPU decoder instead: see
/// `nvjpeg_fallback_reason`), `seconds` (wall time in decode calls). All 0 before the first
/// decode or in a build without nvJPEG.
#[pyfunction]
pub(crate) fn nvjpeg_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    #[cfg(feature = "decode-nvjpeg")]
    let (batches, gpu, cpu, seconds) = {
        let s = device::nvjpeg::stats();
        (s.batches, s.gpu_images, s.cpu_fallbacks, s.seconds)
    };
    #[cfg(not(feature = "decode-nvjpeg"))]
    let (batches, gpu, cpu, seconds) = (0u64, 0u64, 0u64, 0.0f64);
    let d = PyDict::new(py);
    d.set_item("batches", batches)?;
    d.set_item("gpu_images", gpu)?;
    d.set_item("cpu_fallbacks", cpu)?;
    d.set_item("seconds", seconds)?;
    Ok(d)
}
