//! [`DeviceTarget`]: "open a device" for a host-to-device copy, the one place where `spdl load
//! --device cuda[:N]` and spdl_rs's `ops.to_device` / `io.transfer_buffer` get a device, its
//! pool of pinned batch buffers and its copy stage.
//!
//! The device is opened on first use (driver initialization, primary context, copy stream), so
//! a target can be made before `fork()`; the outcome, success or error, is kept.

use std::sync::{Arc, OnceLock};

use spdl_core::buffer::{BufferPool, PoolConfig, PooledBuffer};
use spdl_io::{BatchHeader, HostBatch};

use crate::driver::{CudaDevice, DeviceSelector};
use crate::error::{Error, Result};
use crate::pinned::{pinned_pool, PinnedPool};
use crate::transfer::{DeviceAllocator, DeviceBatch, TransferStage, TransferStats};

/// What an opened target holds.
#[derive(Debug)]
struct Opened {
    stage: TransferStage,
    pool: Arc<PinnedPool>,
}

/// A CUDA device to copy batches to: its index, and once opened its copy stage
/// ([`TransferStage`]) and a pool of pinned batch buffers ([`PinnedPool`]) with the
/// configuration it was made with. Share it (`Arc`) between the stages that use it.
#[derive(Debug)]
pub struct DeviceTarget {
    index: usize,
    pool_config: PoolConfig,
    opened: OnceLock<std::result::Result<Opened, Error>>,
}

impl DeviceTarget {
    /// The device `selector` names (`cuda`, `cuda:N`, `N`, or `LOCAL_RANK`), with pinned batch
    /// buffers bounded by `pool`; opens nothing.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when the crate was built without `cuda`;
    /// [`Error::InvalidArgument`] for a `LOCAL_RANK` that is not an index.
    pub fn new(selector: DeviceSelector, pool: PoolConfig) -> Result<Self> {
        if !cfg!(feature = "cuda") {
            return Err(Error::unsupported_without("cuda"));
        }
        Ok(DeviceTarget {
            index: selector.index()?,
            pool_config: pool,
            opened: OnceLock::new(),
        })
    }

    /// [`DeviceTarget::new`], opened at once (the driver, the device and its stream), so
    /// that a missing driver or device is reported before any work starts.
    ///
    /// # Errors
    /// As [`DeviceTarget::new`]; [`Error::NoDriver`], [`Error::InvalidDevice`],
    /// [`Error::Driver`] from opening the device.
    pub fn open(selector: DeviceSelector, pool: PoolConfig) -> Result<Self> {
        let target = DeviceTarget::new(selector, pool)?;
        target.opened()?;
        Ok(target)
    }

    /// The device index (the `N` of `cuda:N`).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The device as PyTorch and `--device` name it, `cuda:N`.
    pub fn name(&self) -> String {
        format!("cuda:{}", self.index)
    }

    /// The device, its copy stream and its pinned pool, opened once; every later call
    /// returns the first outcome.
    fn opened(&self) -> Result<&Opened> {
        self.opened
            .get_or_init(|| {
                let dev = CudaDevice::new(self.index)?;
                Ok(Opened {
                    stage: TransferStage::new(&dev)?,
                    pool: Arc::new(pinned_pool(&dev, self.pool_config.clone())?),
                })
            })
            .as_ref()
            .map_err(Error::replay)
    }

    /// The pool of pinned buffers batches decode or collate into before their copy.
    ///
    /// # Errors
    /// Those of opening the device.
    pub fn pinned_pool(&self) -> Result<Arc<dyn BufferPool>> {
        Ok(self.opened()?.pool.clone())
    }

    /// A pinned buffer of `len` bytes if one is free now (`None` when every buffer is in use,
    /// the pool cannot allocate, or the device cannot be opened: the copy then reports why).
    pub fn try_pinned(&self, len: usize) -> Option<PooledBuffer> {
        self.opened().ok()?.pool.try_acquire(len).ok().flatten()
    }

    /// The copy stage (for spdl-core's `Op::blocking(stage.op())`).
    ///
    /// # Errors
    /// Those of opening the device.
    pub fn stage(&self) -> Result<&TransferStage> {
        Ok(&self.opened()?.stage)
    }

    /// The copy stage's counters (zero before the device is opened).
    pub fn stats(&self) -> TransferStats {
        match self.opened.get() {
            Some(Ok(o)) => o.stage.stats(),
            _ => TransferStats::default(),
        }
    }

    /// Copies a host batch (pinned or not) to the device and waits for the copy.
    ///
    /// # Errors
    /// Those of opening the device; [`Error::Driver`] when allocation or the copy fails.
    pub fn transfer(&self, batch: HostBatch) -> Result<DeviceBatch> {
        self.opened()?.stage.transfer(batch)
    }

    /// Copies `bytes` (any host memory, laid out as `header` says) to the device and waits:
    /// through a pinned buffer of the pool when one is free (an asynchronous DMA), else
    /// straight from pageable memory.
    ///
    /// # Errors
    /// As [`DeviceTarget::transfer`]; [`Error::InvalidArgument`] when `bytes` does not match
    /// `header`.
    pub fn transfer_bytes(&self, bytes: &[u8], header: BatchHeader) -> Result<DeviceBatch> {
        let opened = self.opened()?;
        match opened.pool.try_acquire(bytes.len()) {
            Ok(Some(mut buffer)) if bytes.len() == header.nbytes() => {
                buffer.copy_from_slice(bytes);
                opened.stage.transfer(HostBatch { buffer, header })
            }
            _ => opened.stage.transfer_slice(bytes, header),
        }
    }

    /// [`DeviceTarget::transfer_bytes`] into memory from `allocator` (SPDL's `cuda_config(
    /// allocator=...)`, called with the caller's `user_stream`); a pageable copy, since the
    /// allocator's memory is what the caller gets.
    ///
    /// # Errors
    /// As [`DeviceTarget::transfer_bytes`]; what the allocator reports.
    pub fn transfer_bytes_with(
        &self,
        bytes: &[u8],
        header: BatchHeader,
        allocator: &Arc<dyn DeviceAllocator>,
        user_stream: usize,
    ) -> Result<DeviceBatch> {
        self.opened()?
            .stage
            .transfer_slice_into(bytes, header, Some((allocator, user_stream)))
    }
}
