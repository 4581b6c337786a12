//! The transfer step of `spdl load --device cuda:N`: batches are collated into pinned host
//! memory and copied to the GPU on a dedicated stream (spdl-cuda). Without the `cuda` feature
//! the flag is a clear error.

use anyhow::{bail, Result};

/// Something the consumer counts: a host or a device batch.
pub(crate) trait Counted: Send + 'static {
    /// Images in the batch.
    fn images(&self) -> usize;
}

impl Counted for spdl_io::ImageBatch {
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

#[cfg(feature = "cuda")]
mod gpu {
    use std::sync::Arc;

    use super::*;
    use spdl_core::buffer::PoolConfig;
    use spdl_core::{Op, Pipeline, PipelineBuilder, StageConfig};
    use spdl_cuda::{
        collate_into, collate_normalized_into, pinned_pool, CudaDevice, DeviceBatch, TransferStage,
    };
    use spdl_io::BatchItem;

    impl Counted for DeviceBatch {
        fn images(&self) -> usize {
            self.len()
        }
    }

    /// Appends collate-into-pinned-memory and host-to-device copy stages.
    pub(crate) fn build(
        builder: PipelineBuilder<Vec<BatchItem>>,
        device: &str,
        normalize: bool,
        threads: usize,
    ) -> Result<(Pipeline<DeviceBatch>, impl Fn() -> TransferReport)> {
        let dev = CudaDevice::select(device.parse()?)?;
        // Batches alive at once: sink (2) + in copy (2) + collating (2) + held by the consumer (1).
        let pool = Arc::new(pinned_pool(&dev, PoolConfig::default().max_buffers(8))?);
        let stage = Arc::new(TransferStage::new(&dev)?);
        let collate = Op::blocking(move |items: Vec<BatchItem>| {
            let batch = if normalize {
                collate_normalized_into(items, &spdl_io::Normalize::imagenet(), pool.as_ref())?
            } else {
                collate_into(items, pool.as_ref())?
            };
            Ok(Some(batch))
        });
        let pipeline = builder
            .pipe(
                collate,
                StageConfig::named("collate").concurrency(threads.min(2)),
            )
            .pipe(
                Op::blocking(stage.op()),
                StageConfig::named("transfer").concurrency(2),
            )
            .sink(2)
            .build(threads)?;
        let name = device.to_string();
        let report = move || {
            let s = stage.stats();
            TransferReport {
                device: name.clone(),
                gigabytes_per_second: s.gbps(),
                bytes: s.bytes,
            }
        };
        Ok((pipeline, report))
    }
}

#[cfg(feature = "cuda")]
pub(crate) use gpu::build as build_gpu;

/// The error for `--device cuda` in a build without the `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub(crate) fn no_cuda(device: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "--device {device}: this spdl was built without CUDA support; rebuild with \
         `cargo build --release -p spdl-cli --features cuda`"
    )
}
