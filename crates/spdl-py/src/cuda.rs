//! The GPU end in Python: [`CudaBuffer`] (`spdl_rs.io.CUDABuffer`, a batch in device memory
//! shared zero-copy through DLPack and `__cuda_array_interface__`), the device handle of the
//! `ops.to_device` stage ([`CudaTarget`]), and `io.transfer_buffer`.
//!
//! The work is spdl-cuda's (pinned pool, copy stream, events, device memory kept alive by every
//! view); this module opens devices and builds the Python objects. Which pipeline items go
//! where is `ops.rs`'s (`collate_pinned`, `transfer_item`); the DLPack capsules are
//! `dlpack.rs`'s.
//!
//! No CUDA context is created before the first batch (or a `transfer_buffer` call), so a
//! pipeline can be built before `fork()`. Without the `cuda` feature every GPU call raises
//! `RuntimeError` naming the feature and how to rebuild; without a driver, spdl-cuda's
//! `no CUDA driver: ...`.

use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use spdl_core::buffer::{BufferPool, PoolConfig};
use spdl_cuda::{
    ConsumerStream, CudaDevice, DeviceBatch, DeviceSelector, HostBatch, PinnedPool, TensorExport,
    TransferStage,
};

use crate::buffer::{CpuBuffer, HostView};
use crate::dlpack::{cai_dict, capsule, DlpackArgs};
use crate::lock;
use crate::reserved::Reserved;

/// Whether this build has the `cuda` feature.
pub(crate) const BUILT_WITH_CUDA: bool = cfg!(feature = "cuda");

/// The message of every GPU call in a build without the `cuda` feature.
pub(crate) const NOT_BUILT: &str = "spdl_rs was built without CUDA support (the `cuda` feature \
of crates/spdl-py); rebuild it with `MATURIN_PEP517_ARGS=\"--features cuda\" pip install \
./crates/spdl-py` or `maturin build --release -m crates/spdl-py/Cargo.toml --features cuda` \
(CUDA is loaded at run time: the build needs no CUDA toolkit)";

/// Pinned batch buffers per device stage: batches collated into pinned memory that wait for
/// their copy, plus the one being copied. When all are in use, batches go through pageable
/// memory instead of waiting (a wait could hold every worker thread).
const PINNED_BUFFERS: usize = 8;

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

impl From<spdl_cuda::Error> for GpuError {
    fn from(e: spdl_cuda::Error) -> Self {
        match e {
            spdl_cuda::Error::Unsupported(_) if !BUILT_WITH_CUDA => GpuError(NOT_BUILT.into()),
            e => GpuError(e.to_string()),
        }
    }
}

impl From<GpuError> for PyErr {
    fn from(e: GpuError) -> Self {
        PyRuntimeError::new_err(e.0)
    }
}

/// The device a `device=` argument names: `None` (the `LOCAL_RANK` device, 0 when unset), an
/// `int`, or a string `"cuda"`, `"cuda:N"`, `"N"` (anything else with such a `str()`, e.g. a
/// `torch.device`). `ValueError` for anything else or a bad `LOCAL_RANK`.
fn device_index(device: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
    let selector = match device {
        None => DeviceSelector::LocalRank,
        Some(d) if d.is_none() => DeviceSelector::LocalRank,
        Some(d) if d.is_instance_of::<pyo3::types::PyBool>() => {
            return Err(PyTypeError::new_err("device must be a str, an int or None"))
        }
        Some(d) => match d.extract::<i64>() {
            Ok(i) => DeviceSelector::Index(usize::try_from(i).map_err(|_| {
                PyValueError::new_err(format!("device {i}: a CUDA device index is >= 0"))
            })?),
            Err(_) => d
                .str()?
                .to_str()?
                .parse()
                .map_err(|e: spdl_cuda::Error| PyValueError::new_err(e.to_string()))?,
        },
    };
    selector
        .index()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The opened device of a [`CudaTarget`]: its copy stage and pinned pool.
struct Opened {
    stage: TransferStage,
    pool: PinnedPool,
}

/// The device of a `to_device` stage or a `transfer_buffer` call, opened on first use (the
/// outcome, success or error, is kept).
pub(crate) struct CudaTarget {
    index: usize,
    opened: OnceLock<Result<Opened, String>>,
}

impl CudaTarget {
    /// Checks the build and resolves the device index; opens nothing.
    ///
    /// `RuntimeError` without the `cuda` feature; `ValueError` / `TypeError` for a bad
    /// `device` or `LOCAL_RANK`.
    pub(crate) fn new(device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        if !BUILT_WITH_CUDA {
            return Err(PyRuntimeError::new_err(NOT_BUILT));
        }
        Ok(CudaTarget {
            index: device_index(device)?,
            opened: OnceLock::new(),
        })
    }

    /// The device index (`cuda:N`).
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// The device, its copy stream and pinned pool, opened once (driver initialization,
    /// primary context, stream); every later call returns the first outcome.
    fn open(&self) -> Result<&Opened, GpuError> {
        self.opened
            .get_or_init(|| {
                let open = || -> Result<Opened, GpuError> {
                    let dev = CudaDevice::new(self.index)?;
                    let stage = TransferStage::new(&dev)?;
                    let pool = spdl_cuda::pinned_pool(
                        &dev,
                        PoolConfig::default().max_buffers(PINNED_BUFFERS),
                    )?;
                    Ok(Opened { stage, pool })
                };
                open().map_err(|e| e.0)
            })
            .as_ref()
            .map_err(|m| GpuError(m.clone()))
    }

    /// A pinned buffer of this device for `len` bytes, taken from its pool now (so that
    /// collating into it never waits); `None` when the device cannot be opened (the transfer
    /// then reports why) or every pinned buffer is in use.
    pub(crate) fn reserve_pinned(&self, len: usize) -> Option<Reserved> {
        Reserved::take_from(&self.open().ok()?.pool, len)
    }

    /// Copies a batch collated in pinned memory (waits for the copy).
    pub(crate) fn transfer_host(&self, b: HostBatch) -> Result<CudaBuffer, GpuError> {
        let shape = b.shape.iter().map(|&d| d as i64).collect();
        let batch = self.open()?.stage.transfer(b)?;
        Ok(CudaBuffer { batch, shape })
    }

    /// Copies a host view to the device and waits for the copy: through a pinned buffer when
    /// one is free (then an asynchronous DMA), else straight from pageable memory. The device
    /// batch is `[rows, H, W, C]` with the view's leading dimensions folded into `rows`; the
    /// `CUDABuffer` keeps the view's own shape.
    /// [`CudaTarget::transfer_view`] into memory from `allocator` (SPDL's `cuda_config(
    /// allocator=...)`, called with the caller's `stream` value); a pageable copy (the
    /// allocator's memory is what the caller gets, so no pooled staging is involved).
    pub(crate) fn transfer_view_with(
        &self,
        view: &HostView,
        allocator: &Arc<dyn spdl_cuda::DeviceAllocator>,
        stream: usize,
    ) -> Result<CudaBuffer, GpuError> {
        let opened = self.open()?;
        let batch = opened.stage.transfer_slice_with(
            view.bytes(),
            fold4(&view.shape),
            view.dtype,
            view.keys.clone(),
            view.labels.clone(),
            allocator,
            stream,
        )?;
        Ok(CudaBuffer {
            batch,
            shape: view.shape.iter().map(|&d| d as i64).collect(),
        })
    }

    pub(crate) fn transfer_view(&self, view: &HostView) -> Result<CudaBuffer, GpuError> {
        let opened = self.open()?;
        let bytes = view.bytes();
        let shape = fold4(&view.shape);
        let (dtype, keys, labels) = (view.dtype, view.keys.clone(), view.labels.clone());
        let batch = match opened.pool.try_acquire(bytes.len()) {
            Ok(Some(mut buffer)) => {
                buffer.copy_from_slice(bytes);
                let host = HostBatch {
                    buffer,
                    shape,
                    dtype,
                    keys,
                    labels,
                };
                opened.stage.transfer(host)?
            }
            _ => opened
                .stage
                .transfer_slice(bytes, shape, dtype, keys, labels)?,
        };
        Ok(CudaBuffer {
            batch,
            shape: view.shape.iter().map(|&d| d as i64).collect(),
        })
    }
}

/// Any shape as the 4 dimensions of a device batch with the same element count: leading
/// dimensions folded into the first, missing ones as 1.
fn fold4(shape: &[usize]) -> [usize; 4] {
    let mut out = [1usize; 4];
    let n = shape.len();
    if n <= 4 {
        out[4 - n..].copy_from_slice(shape);
    } else {
        out[0] = shape[..n - 3].iter().product();
        out[1..].copy_from_slice(&shape[n - 3..]);
    }
    out
}

/// A contiguous, row-major array in CUDA device memory: a batch `[N, H, W, C]` (`uint8`, or
/// `uint16` for 16-bit images) or a normalized batch `[N, C, H, W]` (`float32`), on device
/// `device_index`.
///
/// Zero-copy: `torch.from_dlpack(buf)` (DLPack, `kDLCUDA`), `cupy.asarray(buf)`
/// (`__cuda_array_interface__` v3). `__dlpack__(stream=s)` makes the consumer's stream `s`
/// wait (on the GPU) for the copy that fills the buffer, and frees the memory only after the
/// work queued on `s` when the last view is dropped. The memory stays valid until this object
/// and every tensor made from it are gone.
#[pyclass(frozen, module = "spdl_rs.io", name = "CUDABuffer")]
#[derive(Clone)]
pub(crate) struct CudaBuffer {
    batch: DeviceBatch,
    /// The shape shown to Python (the batch's, or the host view's for other ranks).
    shape: Vec<i64>,
}

impl CudaBuffer {
    /// The device index (`cuda:N`) of the memory.
    pub(crate) fn device_ordinal(&self) -> usize {
        self.batch.device_index()
    }

    /// A device batch shown to Python with `shape` (same element count as the batch's).
    #[cfg_attr(not(feature = "decode-nvjpeg"), allow(dead_code))]
    pub(crate) fn from_batch(batch: DeviceBatch, shape: Vec<i64>) -> Self {
        CudaBuffer { batch, shape }
    }

    /// The export description for `consumer`, with this buffer's shape.
    ///
    /// # Safety
    /// As [`DeviceBatch::export`]: a raw consumer stream is 1, 2 or a live stream of this
    /// device's context.
    unsafe fn export(&self, consumer: ConsumerStream) -> Result<TensorExport, GpuError> {
        // SAFETY: forwarded from the caller.
        let mut e = unsafe { self.batch.export(consumer) }?;
        e.shape = self.shape.clone();
        Ok(e)
    }
}

#[pymethods]
impl CudaBuffer {
    /// The shape, e.g. `(N, H, W, C)` for a `uint8` batch or `(N, C, H, W)` for `float32`.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type name: `"uint8"`, `"uint16"` or `"float32"`.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.batch.dtype.name()
    }

    /// The CUDA device index (the `N` of `cuda:N`).
    #[getter]
    fn device_index(&self) -> usize {
        self.batch.device_index()
    }

    /// The device as PyTorch names it, `"cuda:N"`.
    #[getter]
    fn device(&self) -> String {
        format!("cuda:{}", self.batch.device_index())
    }

    /// Device address of the first element (to check that views share memory).
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.batch.data_ptr()
    }

    /// Size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.batch.nbytes()
    }

    /// The copy stream that fills the buffer (a `CUstream` handle as an int).
    #[getter]
    fn stream(&self) -> usize {
        self.batch.stream()
    }

    /// Sample keys (file paths) in batch order.
    #[getter]
    fn keys(&self) -> Vec<String> {
        self.batch.keys.clone()
    }

    /// Class labels in batch order (`None` where the source had none).
    #[getter]
    fn labels(&self) -> Vec<Option<i64>> {
        self.batch.labels.clone()
    }

    fn __len__(&self) -> usize {
        self.shape.first().copied().unwrap_or(0).max(0) as usize
    }

    fn __repr__(&self) -> String {
        format!(
            "CUDABuffer(shape={:?}, dtype={}, device=cuda:{})",
            self.shape,
            self.batch.dtype.name(),
            self.batch.device_index()
        )
    }

    /// Blocks (GIL released) until the data is on the device. Raises `RuntimeError` for an
    /// error of the copy.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.batch.synchronize())
            .map_err(|e| GpuError::from(e).into())
    }

    /// A copy in CPU memory, as a `CPUBuffer` of the same shape and dtype (GIL released; for
    /// checks: training code uses the device tensor). Raises `RuntimeError` if the copy fails.
    fn to_host(&self, py: Python<'_>) -> PyResult<CpuBuffer> {
        let bytes = py.detach(|| self.batch.to_host()).map_err(GpuError::from)?;
        let shape = self.shape.iter().map(|&d| d.max(0) as usize).collect();
        Ok(CpuBuffer::from_bytes(
            self.batch.dtype,
            shape,
            bytes,
            self.batch.keys.clone(),
            self.batch.labels.clone(),
        ))
    }

    /// DLPack device: `(2, device_index)`, i.e. `kDLCUDA`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (2, self.batch.device_index() as i32)
    }

    /// A DLPack capsule sharing the device memory: `"dltensor_versioned"` (DLPack 1.0) when
    /// `max_version >= (1, 0)`, else `"dltensor"`.
    ///
    /// `stream`: the consumer's stream, as the DLPack / array API spec says: `None` or `1`
    /// the legacy default stream, `2` the per-thread default stream, another int a
    /// `cudaStream_t`; the stream is made to wait (on the GPU, the host does not block) for
    /// the copy that fills the buffer. `-1`: no synchronization. `0` raises `ValueError`.
    /// Raises `BufferError` for `copy=True` or a `dl_device` other than this device.
    // The standard keywords, parsed by `DlpackArgs` (what `inspect.signature` shows).
    #[pyo3(
        signature = (**kw),
        text_signature = "($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)"
    )]
    fn __dlpack__(&self, py: Python<'_>, kw: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        let args = DlpackArgs::parse(kw)?;
        args.check_device(self.__dlpack_device__(), "CUDABuffer")?;
        let consumer = args.consumer_stream()?;
        let versioned = args.versioned()?;
        // SAFETY: the DLPack protocol makes the caller pass its own live stream of this
        // device (or 1, 2, -1), which is what `export` requires.
        let export = py.detach(|| unsafe { self.export(consumer) })?;
        capsule(py, export, versioned)
    }

    /// The CUDA Array Interface (version 3): `shape`, `typestr`, `data` (device pointer,
    /// writable), `strides` (`None`: C-contiguous), `version`, and `stream`: the copy stream
    /// to synchronize with before reading, or `None` once the copy has completed.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        // SAFETY: `NoSync` passes no stream handle: nothing is waited on or registered.
        let mut export = unsafe { self.export(ConsumerStream::NoSync) }?;
        if self.batch.ready_event().is_complete().unwrap_or(false) {
            export.stream = None;
        }
        cai_dict(py, &export)
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
        let cuda = self.export.device.device_type == spdl_cuda::DLDeviceType::CUDA;
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
    export.device = spdl_cuda::DLDevice {
        device_type: spdl_cuda::DLDeviceType(device_type),
        device_id,
    };
    export.stream = stream;
    ExportProbe { export }
}

/// SPDL's `cuda_config(allocator=(alloc_fn, free_fn))` as a device allocator: Python calls
/// `alloc_fn(size, device_index, stream) -> int` and `free_fn(ptr)`, taking the GIL for each.
struct PyAllocator {
    alloc: Py<PyAny>,
    free: Py<PyAny>,
}

impl spdl_cuda::DeviceAllocator for PyAllocator {
    fn allocate(&self, len: usize, device_index: usize, stream: usize) -> spdl_cuda::Result<u64> {
        Python::attach(|py| {
            self.alloc
                .call1(py, (len, device_index, stream))
                .and_then(|p| p.extract::<u64>(py))
                .map_err(|e| {
                    spdl_cuda::Error::InvalidArgument(format!(
                        "the device allocator (cuda_config(allocator=...)) failed for {len} bytes \
                         on device {device_index}: {e}"
                    ))
                })
        })
    }

    fn release(&self, ptr: u64) {
        Python::attach(|py| {
            if let Err(e) = self.free.call1(py, (ptr,)) {
                // A drop cannot raise: report it as Python reports errors in __del__.
                e.write_unraisable(py, None);
            }
        })
    }
}

/// The allocator of `cuda_config(allocator=(alloc_fn, free_fn))`; `TypeError` for another shape.
fn py_allocator(pair: &Bound<'_, PyAny>) -> PyResult<Arc<dyn spdl_cuda::DeviceAllocator>> {
    let (alloc, free): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair.extract().map_err(|_| {
        PyTypeError::new_err("allocator must be a pair (alloc_fn, free_fn) of callables")
    })?;
    Ok(Arc::new(PyAllocator {
        alloc: alloc.unbind(),
        free: free.unbind(),
    }))
}

/// Copies a `CPUBuffer` to a CUDA device and returns a `CUDABuffer` of the same shape and
/// dtype (GIL released; waits for the copy). With `allocator` (SPDL's `(alloc_fn, free_fn)`
/// pair of a `cuda_config`), the device memory comes from `alloc_fn(size, device_index,
/// stream)` and goes back through `free_fn(ptr)` when the buffer and its views are gone.
#[pyfunction]
#[pyo3(signature = (buffer, device=None, *, allocator=None, stream=0))]
pub(crate) fn transfer_buffer(
    py: Python<'_>,
    buffer: Bound<'_, PyAny>,
    device: Option<Bound<'_, PyAny>>,
    allocator: Option<Bound<'_, PyAny>>,
    stream: usize,
) -> PyResult<CudaBuffer> {
    let allocator = allocator
        .filter(|a| !a.is_none())
        .map(|a| py_allocator(&a))
        .transpose()?;
    let target = CudaTarget::new(device.as_ref())?;
    // One target per device for the whole process, so that calls reuse its pinned buffers
    // (page-locking costs milliseconds per MiB) and copy stream.
    let target = {
        static TARGETS: Mutex<Vec<Arc<CudaTarget>>> = Mutex::new(Vec::new());
        let mut targets = lock(&TARGETS);
        match targets.iter().find(|t| t.index == target.index) {
            Some(t) => t.clone(),
            None => {
                let t = Arc::new(target);
                targets.push(t.clone());
                t
            }
        }
    };
    let view = match buffer.cast::<CpuBuffer>() {
        Ok(cpu) => cpu.get().host_view(),
        Err(_) => {
            if let Ok(b) = buffer.cast::<CudaBuffer>() {
                if b.get().batch.device_index() == target.index() {
                    return Ok(b.get().clone());
                }
            }
            return Err(PyTypeError::new_err(format!(
                "transfer_buffer expects a CPUBuffer, got {}",
                buffer.get_type().name()?
            )));
        }
    };
    Ok(py.detach(|| match &allocator {
        None => target.transfer_view(&view),
        Some(a) => target.transfer_view_with(&view, a, stream),
    })?)
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
    BUILT_WITH_CUDA && py.detach(|| spdl_cuda::device_count().is_ok_and(|n| n > 0))
}

/// Why no CUDA device can be used (`None` when one can): the build, the driver, or the
/// device count.
#[pyfunction]
pub(crate) fn cuda_unavailable_reason(py: Python<'_>) -> Option<String> {
    if !BUILT_WITH_CUDA {
        return Some(NOT_BUILT.into());
    }
    py.detach(|| match spdl_cuda::device_count() {
        Ok(0) => Some("no CUDA device visible".into()),
        Ok(_) => None,
        Err(e) => Some(GpuError::from(e).0),
    })
}
