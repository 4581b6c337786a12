//! SPDL's `CUDAConfig` / `cuda_config` (which device, which stream) and `CPUStorage` /
//! `cpu_storage` (a block of host memory, page-locked when asked).

use std::ffi::c_int;
use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use spdl_core::buffer::{BufferPool, Pool, PoolConfig, PooledBuffer};

use crate::buffer::{buffer_protocol_pymethods, BufferLayout, CpuBuffer};

/// SPDL's `CUDAConfig`: the CUDA device (and stream) of a GPU call, from `cuda_config`.
///
/// Accepted as `device_config=` by `transfer_buffer`, the loaders (`load_image`,
/// `load_image_batch`, `load_video`, `load_audio`: decoded, then copied to the device),
/// `decode_image_nvjpeg`, `load_image_batch_nvjpeg`, `nv12_to_rgb`/`nv12_to_bgr` and the NVDEC
/// functions.
#[pyclass(frozen, module = "spdl_rs.io", name = "CUDAConfig")]
pub(crate) struct CudaConfig {
    /// The device index (`cuda:N`).
    #[pyo3(get)]
    pub(crate) device_index: usize,
    /// The `cudaStream_t` value the caller's work runs on (`0x2`: per-thread default).
    #[pyo3(get)]
    pub(crate) stream: usize,
    /// SPDL's `(alloc_fn, free_fn)` pair, or `None`: device memory of transfers comes from
    /// `alloc_fn(size, device_index, stream)` and goes back through `free_fn(ptr)`.
    #[pyo3(get)]
    pub(crate) allocator: Option<Py<PyAny>>,
}

#[pymethods]
impl CudaConfig {
    fn __repr__(&self) -> String {
        let allocator = if self.allocator.is_some() {
            ", allocator=(...)"
        } else {
            ""
        };
        format!(
            "CUDAConfig(device_index={}, stream={:#x}{allocator})",
            self.device_index, self.stream
        )
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<CudaConfig>().is_ok_and(|o| {
            let o = o.get();
            let same_allocator = match (&o.allocator, &self.allocator) {
                (None, None) => true,
                (Some(a), Some(b)) => a.is(b),
                _ => false,
            };
            (o.device_index, o.stream) == (self.device_index, self.stream) && same_allocator
        })
    }
}

/// SPDL's `cuda_config(device_index, stream=0x2, allocator=None)`.
///
/// `device_index`: the device (`>= 0`; checked against the devices when first used).
/// `stream`: a `cudaStream_t` as an int (SPDL's default `0x2` is the per-thread default
/// stream, `0` the legacy default stream, or e.g. `torch.cuda.Stream().cuda_stream`).
/// spdl_rs copies on its own stream and, before returning, makes the result ready for
/// work on any stream (the copy is waited for), so `stream` orders nothing further; it is
/// kept on the config. `allocator`: SPDL's pair `(alloc_fn, free_fn)` of device memory
/// functions, e.g. `(torch.cuda.caching_allocator_alloc, torch.cuda.caching_allocator_delete)`:
/// the device memory of `transfer_buffer` and of the loaders' `device_config=` copies is then
/// `alloc_fn(size_in_bytes, device_index, stream)` (an `int` device pointer; SPDL's arguments),
/// handed back with `free_fn(ptr)` once the `CUDABuffer` and every view of it (DLPack, CUDA
/// array interface) are gone, after the copy stream's work. nvJPEG and NVDEC decode into
/// their own device memory: with an allocator they raise `TypeError` (once a device is
/// there; without a driver they raise the driver error as always).
///
/// Raises `ValueError` for a negative index or stream, `TypeError` for an `allocator` that is
/// not a pair of callables. Opens no device (safe before `fork()`).
#[pyfunction]
#[pyo3(signature = (device_index, stream=2, allocator=None))]
pub(crate) fn cuda_config(
    device_index: i64,
    stream: i64,
    allocator: Option<Bound<'_, PyAny>>,
) -> PyResult<CudaConfig> {
    let allocator = match allocator {
        Some(a) if !a.is_none() => {
            let pair: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = a.extract().ok();
            match pair {
                Some((alloc, free)) if alloc.is_callable() && free.is_callable() => {
                    Some(a.unbind())
                }
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "cuda_config: allocator must be a pair of callables (alloc_fn(size, \
                         device_index, stream) -> int, free_fn(ptr)), got {}",
                        crate::error::type_name(&a)
                    )))
                }
            }
        }
        _ => None,
    };
    let device_index = usize::try_from(device_index).map_err(|_| {
        PyValueError::new_err(format!(
            "cuda_config: device_index {device_index} is negative"
        ))
    })?;
    let stream = usize::try_from(stream)
        .map_err(|_| PyValueError::new_err(format!("cuda_config: stream {stream} is negative")))?;
    Ok(CudaConfig {
        device_index,
        stream,
        allocator,
    })
}

/// SPDL's `CPUStorage`: `size` bytes of host memory, page-locked (pinned) when made with
/// `pin_memory=True`. Exposes the buffer protocol (a writable 1-D `uint8` view:
/// `numpy.frombuffer(storage, dtype=...)`, `memoryview(storage)`); the memory lives while
/// the storage or any view of it does.
#[pyclass(frozen, module = "spdl_rs.io", name = "CPUStorage")]
pub(crate) struct CpuStorage {
    /// Shared with the `CPUBuffer`s copied into it (`storage=`), which keep it alive.
    buffer: Arc<PooledBuffer>,
    /// Where `buffer` points, taken once (views write through it).
    ptr: usize,
    shape: [isize; 1],
    pinned: bool,
}

buffer_protocol_pymethods! {
|this| BufferLayout {
    buf: this.ptr as *mut std::ffi::c_void,
    len: this.buffer.len(),
    itemsize: 1,
    format: c"B",
    shape: &this.shape,
    strides: None,
};
impl CpuStorage {
    /// Size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.buffer.len()
    }

    /// Whether the memory is page-locked (`cuMemHostAlloc`).
    #[getter]
    fn pinned(&self) -> bool {
        self.pinned
    }

    /// Address of the first byte.
    #[getter]
    fn data_ptr(&self) -> usize {
        self.ptr
    }

    fn __len__(&self) -> usize {
        self.buffer.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "CPUStorage(nbytes={}, pinned={})",
            self.buffer.len(),
            self.pinned
        )
    }
}
}

/// SPDL's `cpu_storage(size, pin_memory=True)`: `size` bytes of zeroed host memory.
///
/// `pin_memory=True`: page-locked with `cuMemHostAlloc` (portable across devices), which DMA
/// engines copy asynchronously; this needs the CUDA driver and raises `RuntimeError` naming
/// why when there is none (`"cpu_storage(pin_memory=True): no CUDA driver: ..."`; SPDL
/// likewise fails without CUDA), or when built without the `cuda` feature.
/// `pin_memory=False`: ordinary memory, anywhere. `ValueError` for a negative size.
#[pyfunction]
#[pyo3(signature = (size, pin_memory=true))]
pub(crate) fn cpu_storage(py: Python<'_>, size: i64, pin_memory: bool) -> PyResult<CpuStorage> {
    let size = usize::try_from(size)
        .map_err(|_| PyValueError::new_err(format!("cpu_storage: size {size} is negative")))?;
    let config = PoolConfig::default().max_buffers(1);
    let buffer = if pin_memory {
        py.detach(|| crate::cuda::pinned_buffer(size))
            .map_err(|e| PyRuntimeError::new_err(format!("cpu_storage(pin_memory=True): {e}")))?
    } else {
        Pool::host(config)
            .acquire(size)
            .map_err(|e| PyRuntimeError::new_err(format!("cpu_storage: {e}")))?
    };
    let ptr = buffer.as_ptr() as usize;
    Ok(CpuStorage {
        ptr,
        shape: [size as isize],
        pinned: pin_memory,
        buffer: Arc::new(buffer),
    })
}

/// SPDL's `storage=`: copies `buffer` (a decoded `CPUBuffer`) to the start of `storage` and
/// returns a `CPUBuffer` of the same shape, dtype, keys and labels over the storage's memory
/// (which it keeps alive). A later copy into the same storage overwrites it, as in SPDL.
/// `ValueError` when the storage is smaller than the buffer.
#[pyfunction]
pub(crate) fn _copy_into_storage(
    storage: PyRef<'_, CpuStorage>,
    buffer: PyRef<'_, CpuBuffer>,
) -> PyResult<CpuBuffer> {
    let view = buffer.host_view();
    let bytes = view.bytes();
    if bytes.len() > storage.buffer.len() {
        return Err(PyValueError::new_err(format!(
            "storage has {} bytes, the decoded data needs {}",
            storage.buffer.len(),
            bytes.len()
        )));
    }
    let dst = storage.ptr as *mut u8;
    // SAFETY: `dst` is the storage's block of at least `bytes.len()` bytes, kept alive by
    // `storage`; the source is another allocation (a decoded buffer), so they do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
    Ok(CpuBuffer::over(
        storage.buffer.clone(),
        dst,
        view.dtype,
        view.shape.clone(),
        view.keys.clone(),
        view.labels.clone(),
    ))
}
