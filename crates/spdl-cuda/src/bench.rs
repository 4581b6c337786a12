//! Host-to-device throughput, for `spdl load --device cuda:N` and the GPU check.

use spdl_core::buffer::{BufferPool, PoolConfig};

use crate::driver::CudaDevice;
use crate::error::Result;
use crate::pinned::pinned_pool;
use crate::transfer::TransferStage;

/// Host-to-device copy throughput of one buffer size, in GB/s (10^9 bytes per GPU second,
/// timed with CUDA events, best of `iters` copies after one warm-up).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct H2dThroughput {
    /// Bytes per copy.
    pub bytes: usize,
    /// From page-locked memory (a [`crate::PinnedPool`] buffer).
    pub pinned_gbps: f64,
    /// From ordinary pageable memory (a `Vec<u8>`).
    pub pageable_gbps: f64,
}

/// Measures H2D GB/s for `bytes`-sized copies from pinned and pageable memory on `device`.
///
/// # Errors
/// [`crate::Error::Driver`] / [`crate::Error::Pool`] when allocation or a copy fails.
pub fn measure_h2d(device: &CudaDevice, bytes: usize, iters: usize) -> Result<H2dThroughput> {
    let stage = TransferStage::new(device)?;
    let pool = pinned_pool(device, PoolConfig::default().max_buffers(1))?;
    let pinned = pool.acquire(bytes)?;
    let pageable = vec![1u8; bytes];
    let best = |src: &[u8]| -> Result<f64> {
        let mut best = f64::INFINITY;
        for _ in 0..iters.max(1) + 1 {
            let (_dev, secs) = stage.copy_bytes(src)?;
            best = best.min(secs);
        }
        Ok(bytes as f64 / best / 1e9)
    };
    Ok(H2dThroughput {
        bytes,
        pinned_gbps: best(&pinned)?,
        pageable_gbps: best(&pageable)?,
    })
}
