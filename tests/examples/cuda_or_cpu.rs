//! spdl-cuda's pinned pool under spdl-io's batch: collate decoded images into page-locked
//! (pinned) host memory when a CUDA device is there, ready for an asynchronous host-to-device
//! copy; in plain host memory otherwise.
//! Without a driver (or without the `cuda` feature) every entry point returns an error that
//! `is_unavailable()`, never a panic. Run: `cargo run -p spdl-tests --example cuda_or_cpu`.
use spdl_core::buffer::{BufferPool, Pool, PoolConfig};
use spdl_cuda::{pinned_pool, CudaDevice};
use spdl_io::{collate_into, BatchItem, Image};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pool: Box<dyn BufferPool> = match CudaDevice::local() {
        // The device of `LOCAL_RANK` (torchrun), else 0.
        Ok(device) => Box::new(pinned_pool(&device, PoolConfig::default())?),
        Err(e) if e.is_unavailable() => {
            println!("no GPU here ({e}): host memory");
            Box::new(Pool::host(PoolConfig::default()))
        }
        Err(e) => return Err(e.into()),
    };
    // Two decoded 2x2 RGB images; in a pipeline these come from the decode stage.
    let images: Vec<BatchItem> = (0..2u8)
        .filter_map(|i| Image::from_u8(vec![i; 12], 2, 2, 3))
        .map(BatchItem::from)
        .collect();
    let batch = collate_into(images, pool.as_ref())?; // written once, straight into the pool
    assert_eq!(batch.shape, [2, 2, 2, 3]);
    println!(
        "{:?} {:?}, {} bytes",
        batch.shape,
        batch.dtype,
        batch.buffer.len()
    );
    Ok(())
}
