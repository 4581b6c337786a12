//! Page-locked ("pinned") host memory for batches: the memory source of a
//! [`spdl_core::buffer::Pool`].
//!
//! DMA engines copy from page-locked memory directly and asynchronously; from ordinary
//! (pageable) memory the driver first stages through its own pinned bounce buffer and the copy
//! blocks the host. Page-locking is expensive (milliseconds per MiB), so buffers are allocated
//! once and reused across batches: a [`PinnedPool`] is spdl-core's pool bookkeeping over
//! [`PinnedAllocator`], as PyTorch's `pin_memory()` is backed by its caching host allocator.

use std::ptr::NonNull;

use spdl_core::buffer::{Pool, PoolConfig, RawAllocator};
use spdl_core::BoxError;

use crate::driver::CudaDevice;
use crate::error::Result;

/// `cuMemHostAlloc` memory of one device's context, `CU_MEMHOSTALLOC_PORTABLE` (usable by
/// every context), page aligned.
#[derive(Debug, Clone)]
pub struct PinnedAllocator {
    device: CudaDevice,
}

impl PinnedAllocator {
    /// The allocator for `device`'s context.
    pub fn new(device: &CudaDevice) -> Self {
        PinnedAllocator {
            device: device.clone(),
        }
    }

    /// The device whose context allocates.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }
}

// SAFETY: `allocate` returns `cuMemHostAlloc` memory of `len` bytes (page aligned, so at least
// `ALIGN`), host-accessible from any thread, freed only by `deallocate` with `cuMemFreeHost`.
unsafe impl RawAllocator for PinnedAllocator {
    const ALIGN: usize = 4096;

    fn kind(&self) -> &'static str {
        "cuda-pinned"
    }

    fn allocate(&self, len: usize) -> std::result::Result<NonNull<u8>, BoxError> {
        #[cfg(feature = "cuda")]
        {
            use cudarc::driver::{result, sys};
            self.device.bind()?;
            // SAFETY: a context is current; the returned memory is uninitialized bytes,
            // which the pool zeroes before handing it out.
            let ptr = unsafe { result::malloc_host(len.max(1), sys::CU_MEMHOSTALLOC_PORTABLE) }
                .map_err(|e| crate::Error::driver("cuMemHostAlloc", e))?;
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| "cuMemHostAlloc returned null".into())
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = len;
            match self.device.never {}
        }
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, len: usize) {
        let _ = len;
        #[cfg(feature = "cuda")]
        {
            if let Err(e) = self.device.bind() {
                tracing::warn!(error = %e, "freeing pinned memory: cannot bind the context");
            }
            // SAFETY: the caller passes memory from `allocate`, i.e. from `cuMemHostAlloc`,
            // that nothing uses any more (the pool's contract).
            if let Err(e) = unsafe { cudarc::driver::result::free_host(ptr.as_ptr().cast()) } {
                tracing::warn!(error = ?e, "cuMemFreeHost failed");
            }
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = ptr;
            match self.device.never {}
        }
    }
}

/// A bounded pool of pinned batch buffers (see [`spdl_core::buffer::Pool`] for reuse, bounds
/// and release on drop). Use it as the batch stage's `&dyn BufferPool` with
/// [`spdl_io::load_batch_pooled`] or [`spdl_io::collate_into`].
pub type PinnedPool = Pool<PinnedAllocator>;

/// A pool of pinned buffers on `device`'s context with `config` (e.g. `max_buffers` = batches
/// in flight + 2). Allocates nothing until the first batch.
///
/// # Errors
/// None today (the driver is already initialized for `device` to exist); kept fallible so a
/// future check of the pinned-memory limit can report.
pub fn pinned_pool(device: &CudaDevice, config: PoolConfig) -> Result<PinnedPool> {
    #[cfg(feature = "cuda")]
    {
        Ok(Pool::new(PinnedAllocator::new(device), config))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = config;
        match device.never {}
    }
}
