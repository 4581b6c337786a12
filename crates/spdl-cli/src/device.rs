//! Where `spdl load`'s batches go. Each batch decodes straight into one buffer from a pool
//! ([`spdl_io::load_batch_pooled`]): plain host memory for `--device cpu`, page-locked
//! (pinned) memory for `--device cuda[:N]`, whose batches are then copied to the GPU on a
//! dedicated stream (spdl-cuda's `DeviceTarget`, linked only with the `cuda` feature). Without
//! the `cuda` feature a GPU device is a clear error.

use std::sync::Arc;

use anyhow::{bail, Result};
use spdl_core::buffer::{BufferPool, HostPool, PoolConfig};
use spdl_core::{Pipeline, PipelineBuilder};
use spdl_io::HostBatch;

/// Something the consumer counts: a host or a device batch.
pub(crate) trait Counted: Send + 'static {
    /// Images in the batch.
    fn images(&self) -> usize;
}

impl Counted for HostBatch {
    fn images(&self) -> usize {
        self.len()
    }
}

#[cfg(feature = "cuda")]
impl Counted for spdl_cuda::DeviceBatch {
    fn images(&self) -> usize {
        self.len()
    }
}

/// What the transfer step measured, for the report.
pub(crate) struct TransferReport {
    pub(crate) device: String,
    pub(crate) gigabytes_per_second: f64,
    pub(crate) bytes: u64,
}

/// Whether `--device` asks for a GPU.
pub(crate) fn is_gpu(device: &str) -> Result<bool> {
    match device {
        "cpu" => Ok(false),
        d if d == "cuda" || d.starts_with("cuda:") => Ok(true),
        d => bail!("--device {d}: expected `cpu`, `cuda` or `cuda:N`"),
    }
}

/// Host batches waiting for the consumer (`--device cpu`).
pub(crate) const HOST_SINK: usize = 3;

/// Batch buffers for every batch that can be alive at once: up to twice the decode stage's
/// concurrency there (its admission limit), `after_decode` past it, and one spare, so that
/// acquiring a buffer never waits.
fn pool_config(decode_concurrency: usize, after_decode: usize) -> PoolConfig {
    PoolConfig::default().max_buffers(2 * decode_concurrency + after_decode + 1)
}

/// The pool host batches decode into (`--device cpu`): buffers are reused once the consumer
/// drops a batch. Past the decode stage: the sink's batches and the one the consumer holds.
pub(crate) fn host_pool(decode_concurrency: usize) -> Arc<dyn BufferPool> {
    Arc::new(HostPool::host(pool_config(
        decode_concurrency,
        HOST_SINK + 1,
    )))
}

/// The device of `--device cuda[:N]`: spdl-cuda's [`spdl_cuda::DeviceTarget`] (its pinned
/// batch pool and its copy stage). Without the `cuda` feature there is none.
#[cfg(feature = "cuda")]
pub(crate) struct Gpu(spdl_cuda::DeviceTarget);

/// Without the `cuda` feature no GPU is ever opened: [`Gpu::open`] says how to rebuild.
#[cfg(not(feature = "cuda"))]
pub(crate) enum Gpu {}

/// Batches past the decode stage on the GPU path: the transfer stage's admission limit (twice
/// its two copies), its sink of two, and the one the consumer holds.
#[cfg(feature = "cuda")]
const GPU_BATCHES_AFTER_DECODE: usize = 4 + 2 + 1;

#[cfg(feature = "cuda")]
impl Gpu {
    /// Opens `device` with a pool of pinned buffers for every batch that can be alive at once
    /// behind a decode stage of `decode_concurrency`.
    ///
    /// # Errors
    /// When the driver or the device cannot be opened.
    pub(crate) fn open(device: &str, decode_concurrency: usize) -> Result<Gpu> {
        let config = pool_config(decode_concurrency, GPU_BATCHES_AFTER_DECODE);
        Ok(Gpu(spdl_cuda::DeviceTarget::open(device.parse()?, config)?))
    }

    /// The pinned pool the batches decode into.
    pub(crate) fn pool(&self) -> Result<Arc<dyn BufferPool>> {
        Ok(self.0.pinned_pool()?)
    }

    /// Appends the host-to-device copy (two at a time) and builds the pipeline; the closure
    /// reports the copies' throughput once the run is over.
    pub(crate) fn transfer(
        self,
        batches: PipelineBuilder<HostBatch>,
        threads: usize,
    ) -> Result<(Pipeline<impl Counted>, impl Fn() -> TransferReport)> {
        let pipeline = batches
            .pipe(
                spdl_core::Op::blocking(self.0.stage()?.op()),
                spdl_core::StageConfig::named("transfer").concurrency(2),
            )
            .sink(2)
            .build(threads)?;
        let target = self.0;
        let report = move || {
            let s = target.stats();
            TransferReport {
                device: target.name(),
                gigabytes_per_second: s.gbps(),
                bytes: s.bytes,
            }
        };
        Ok((pipeline, report))
    }
}

/// The report closure's type where there is no GPU to report on.
#[cfg(not(feature = "cuda"))]
type ReportFn = fn() -> TransferReport;

#[cfg(not(feature = "cuda"))]
impl Gpu {
    /// Always an error: this build has no CUDA support.
    pub(crate) fn open(device: &str, _decode_concurrency: usize) -> Result<Gpu> {
        bail!(
            "--device {device}: this spdl was built without CUDA support; rebuild with \
             `cargo build --release -p spdl-cli --features cuda`"
        )
    }

    pub(crate) fn pool(&self) -> Result<Arc<dyn BufferPool>> {
        match *self {}
    }

    pub(crate) fn transfer(
        self,
        _batches: PipelineBuilder<HostBatch>,
        _threads: usize,
    ) -> Result<(Pipeline<HostBatch>, ReportFn)> {
        match self {}
    }
}
