//! # spdl-cuda: the GPU end of an spdl-rs pipeline
//!
//! ```text
//! decode+transform -> batch (spdl_io::load_batch_pooled into a PinnedPool buffer) -> transfer (TransferStage) -> consumer
//!                                  page-locked host memory                           async H2D on a copy stream     DeviceBatch / DLPack
//! ```
//!
//! GPU only: the CPU batch ([`spdl_io::HostBatch`], its [`spdl_io::BatchHeader`]) and the
//! DLPack export ([`spdl_io::dlpack`]) are spdl-io's; spdl-cli and spdl-py depend on this crate
//! only with their `cuda` feature.
//!
//! - [`driver`]: the CUDA driver, `dlopen`ed at run time and initialized behind a guard;
//!   device selection by index or `LOCAL_RANK` ([`CudaDevice`], [`DeviceSelector`]).
//! - [`target`]: [`DeviceTarget`], "open a device" for copies (its pinned pool and copy
//!   stage), what `spdl load --device cuda` and spdl_rs's `to_device` both use.
//! - [`pinned`]: page-locked batch buffers ([`PinnedPool`]), spdl-core's
//!   [`spdl_core::buffer::Pool`] over `cuMemHostAlloc`, reused across batches; spdl-io's
//!   batch functions write decoded images straight into them.
//! - [`stream`] and [`transfer`]: the per-device copy stream, events, and [`TransferStage`]
//!   (host batch -> [`DeviceBatch`], double-buffered); [`DeviceBatch::export`] describes the
//!   device memory as spdl-io's [`spdl_io::dlpack::TensorExport`].
//! - `nvjpeg` (feature `decode-nvjpeg`): batched GPU JPEG decode with CPU fallback;
//!   [`jpeg_probe`] decides which files go to the CPU (no driver needed).
//! - [`nvdec`]: NVDEC loaded at run time (`libnvcuvid.so.1`, feature `decode-nvdec`) and the
//!   checks done before any device allocation (always built); [`nv12`]: NV12 to planar RGB/BGR on the host.
//! - [`bench`](mod@bench): host-to-device GB/s measurement for `spdl load --device`.
//!
//! Features: `cuda` (cudarc, loaded at run time: builds without CUDA), `decode-nvjpeg`
//! and `decode-nvdec` (imply `cuda`). Without `cuda` every entry point returns
//! [`Error::Unsupported`]`("spdl-cuda was built without the `cuda` feature")`; without a driver
//! [`Error::NoDriver`]; nothing panics.
//!
//! ```
//! use spdl_cuda::{CudaDevice, Error};
//!
//! match CudaDevice::local() {
//!     Ok(dev) => println!("using cuda:{}", dev.index()),
//!     Err(e) if e.is_unavailable() => println!("CPU only: {e}"),
//!     Err(e) => return Err(e),
//! }
//! # Ok::<(), Error>(())
//! ```

pub mod bench;
pub mod driver;
mod dylib;
mod error;
pub mod jpeg_probe;
pub mod nv12;
pub mod nvdec;
#[cfg(feature = "decode-nvjpeg")]
pub mod nvjpeg;
pub mod pinned;
pub mod stream;
pub mod target;
pub mod transfer;

pub use driver::{device_count, driver_available, local_rank, CudaDevice, DeviceSelector};
pub use error::{Error, Result};
pub use pinned::{pinned_pool, PinnedAllocator, PinnedPool};
pub use stream::{ConsumerStream, CopyStream, Event};
pub use target::DeviceTarget;
pub use transfer::{
    DeviceAllocator, DeviceBatch, DeviceBuffer, DeviceMemory, PendingTransfer, TransferIter,
    TransferStage, TransferStats,
};

/// The name of an `nvjpegStatus_t` value (`6` -> `"NVJPEG_STATUS_EXECUTION_FAILED"`).
pub fn nvjpeg_status_name(status: i32) -> &'static str {
    match status {
        0 => "NVJPEG_STATUS_SUCCESS",
        1 => "NVJPEG_STATUS_NOT_INITIALIZED",
        2 => "NVJPEG_STATUS_INVALID_PARAMETER",
        3 => "NVJPEG_STATUS_BAD_JPEG",
        4 => "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
        5 => "NVJPEG_STATUS_ALLOCATOR_FAILURE",
        6 => "NVJPEG_STATUS_EXECUTION_FAILED",
        7 => "NVJPEG_STATUS_ARCH_MISMATCH",
        8 => "NVJPEG_STATUS_INTERNAL_ERROR",
        9 => "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
        10 => "NVJPEG_STATUS_INCOMPLETE_BITSTREAM",
        _ => "unknown nvJPEG status",
    }
}
