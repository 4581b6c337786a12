//! The GPU half of `cuda` (built with the `cuda` feature): [`CudaBuffer`], [`CudaTarget`] over
//! spdl-cuda's `DeviceTarget`, `io.transfer_buffer`, and the nvJPEG decoders of the process.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use spdl_core::buffer::{PoolConfig, PooledBuffer};
use spdl_cuda::{ConsumerStream, DeviceBatch, DeviceSelector, DeviceTarget};
use spdl_io::dlpack::TensorExport;
use spdl_io::{BatchHeader, HostBatch};

use crate::buffer::{buffer_pymethods, pymethods_block, CpuBuffer, HostView};
use crate::cuda::GpuError;
use crate::dlpack::{cai_dict, capsule, DlpackArgs};
use crate::lock;
use crate::reserved::Reserved;

/// Pinned batch buffers per device stage: batches collated into pinned memory that wait for
/// their copy, plus the one being copied. When all are in use, batches go through pageable
/// memory instead of waiting (a wait could hold every worker thread).
const PINNED_BUFFERS: usize = 8;

impl From<spdl_cuda::Error> for GpuError {
    fn from(e: spdl_cuda::Error) -> Self {
        match e {
            spdl_cuda::Error::Unsupported(_) if !crate::cuda::BUILT_WITH_CUDA => {
                GpuError(crate::cuda::NOT_BUILT.into())
            }
            e => GpuError(e.to_string()),
        }
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

/// The device of a `to_device` stage or a `transfer_buffer` call: spdl-cuda's
/// [`DeviceTarget`] (the one "open a device" of the workspace, shared with `spdl load`),
/// opened on first use; the outcome, success or error, is kept.
pub(crate) struct CudaTarget(DeviceTarget);

impl CudaTarget {
    /// Resolves the device index; opens nothing.
    ///
    /// `ValueError` / `TypeError` for a bad `device` or `LOCAL_RANK`.
    pub(crate) fn new(device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let selector = DeviceSelector::Index(device_index(device)?);
        let pool = PoolConfig::default().max_buffers(PINNED_BUFFERS);
        Ok(CudaTarget(
            DeviceTarget::new(selector, pool).map_err(GpuError::from)?,
        ))
    }

    /// The device index (`cuda:N`).
    pub(crate) fn index(&self) -> usize {
        self.0.index()
    }

    /// A pinned buffer of this device for `len` bytes, taken from its pool now (so that
    /// collating into it never waits); `None` when the device cannot be opened (the transfer
    /// then reports why) or every pinned buffer is in use.
    pub(crate) fn reserve_pinned(&self, len: usize) -> Option<Reserved> {
        self.0.try_pinned(len).map(Reserved::holding)
    }

    /// Copies a batch collated in pinned memory (waits for the copy).
    pub(crate) fn transfer_host(&self, b: HostBatch) -> Result<CudaBuffer, GpuError> {
        let shape = b.shape.iter().map(|&d| d as i64).collect();
        let batch = self.0.transfer(b)?;
        Ok(CudaBuffer { batch, shape })
    }

    /// Copies a host view to the device and waits for the copy: through a pinned buffer when
    /// one is free (then an asynchronous DMA), else straight from pageable memory. The device
    /// batch is `[rows, H, W, C]` with the view's leading dimensions folded into `rows`; the
    /// `CUDABuffer` keeps the view's own shape.
    pub(crate) fn transfer_view(&self, view: &HostView) -> Result<CudaBuffer, GpuError> {
        let batch = self.0.transfer_bytes(view.bytes(), header_of(view))?;
        Ok(CudaBuffer {
            batch,
            shape: view.shape.iter().map(|&d| d as i64).collect(),
        })
    }

    /// [`CudaTarget::transfer_view`] into memory from `allocator` (SPDL's `cuda_config(
    /// allocator=...)`, called with the caller's `stream` value); a pageable copy (the
    /// allocator's memory is what the caller gets, so no pooled staging is involved).
    pub(crate) fn transfer_view_with(
        &self,
        view: &HostView,
        allocator: &Arc<dyn spdl_cuda::DeviceAllocator>,
        stream: usize,
    ) -> Result<CudaBuffer, GpuError> {
        let batch = self
            .0
            .transfer_bytes_with(view.bytes(), header_of(view), allocator, stream)?;
        Ok(CudaBuffer {
            batch,
            shape: view.shape.iter().map(|&d| d as i64).collect(),
        })
    }
}

/// The header of the device batch a host view is copied into (its shape folded to 4
/// dimensions, see [`fold4`]).
fn header_of(view: &HostView) -> BatchHeader {
    BatchHeader {
        shape: fold4(&view.shape),
        dtype: view.dtype,
        keys: view.keys.clone(),
        labels: view.labels.clone(),
    }
}

/// `size` bytes of page-locked memory of the local rank's device (SPDL's
/// `cpu_storage(pin_memory=True)`).
pub(crate) fn pinned_buffer(size: usize) -> Result<PooledBuffer, GpuError> {
    let target = DeviceTarget::new(
        DeviceSelector::LocalRank,
        PoolConfig::default().max_buffers(1),
    )?;
    let pool = target.pinned_pool()?;
    pool.acquire(size).map_err(|e| GpuError(e.to_string()))
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

buffer_pymethods! {
pymethods_block! {}
impl CudaBuffer, |b| (b.shape, b.batch.header.dtype, b.batch.keys, b.batch.labels) {
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

    fn __repr__(&self) -> String {
        format!(
            "CUDABuffer(shape={:?}, dtype={}, device=cuda:{})",
            self.shape,
            self.batch.header.dtype.name(),
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
        let header = &self.batch.header;
        Ok(CpuBuffer::from_bytes(
            header.dtype,
            shape,
            bytes,
            header.keys.clone(),
            header.labels.clone(),
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
        match targets.iter().find(|t| t.index() == target.index()) {
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

/// nvJPEG decoders, one per device for the process.
#[cfg(feature = "decode-nvjpeg")]
pub(super) mod nvjpeg {
    use std::sync::{Arc, Mutex};

    use spdl_cuda::nvjpeg::{NvjpegDecoder, NvjpegStats};

    use crate::cuda::GpuError;

    /// One decoder per device for the process (handle, state and resize kernel are costly to
    /// make); a failure to make one is not kept.
    static DECODERS: Mutex<Vec<(usize, Arc<NvjpegDecoder>)>> = Mutex::new(Vec::new());

    pub(crate) fn decoder(index: usize) -> Result<Arc<NvjpegDecoder>, GpuError> {
        let mut all = crate::lock(&DECODERS);
        if let Some((_, d)) = all.iter().find(|(i, _)| *i == index) {
            return Ok(d.clone());
        }
        let dev = spdl_cuda::CudaDevice::new(index)?;
        let d = Arc::new(NvjpegDecoder::new(&dev)?.with_limits(spdl_io::Limits::default()));
        all.push((index, d.clone()));
        Ok(d)
    }

    pub(crate) fn stats() -> NvjpegStats {
        let all = crate::lock(&DECODERS);
        let mut s = NvjpegStats::default();
        for (_, d) in all.iter() {
            let t = d.stats();
            s.batches += t.batches;
            s.gpu_images += t.gpu_images;
            s.cpu_fallbacks += t.cpu_fallbacks;
            s.seconds += t.seconds;
        }
        s
    }
}
