//! The batch stage's output in a pool buffer: decoded images collated straight into pinned
//! (or any pooled) memory, ready for an asynchronous host-to-device copy.

use std::sync::Arc;

use spdl_core::buffer::{BufferPool, PooledBuffer};
use spdl_io::{BatchItem, BatchRows, BatchSample, ImageLoader, Normalize, PixelData};

use crate::dlpack::{DLDevice, DType, TensorExport};
use crate::error::{Error, Result};

/// A collated batch in host memory from a [`BufferPool`]: `shape` is `[N, H, W, C]` for
/// [`DType::U8`]/[`DType::U16`] and `[N, C, H, W]` for [`DType::F32`], row-major contiguous.
/// Dropping it returns the buffer to its pool.
#[derive(Debug)]
pub struct HostBatch {
    /// The bytes (`shape.product() * dtype.size()` of them).
    pub buffer: PooledBuffer,
    /// Dimensions, in elements.
    pub shape: [usize; 4],
    /// Element type.
    pub dtype: DType,
    /// Sample keys, in batch order.
    pub keys: Vec<String>,
    /// Labels, in batch order.
    pub labels: Vec<Option<i64>>,
}

impl HostBatch {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.shape[0]
    }

    /// True for zero samples (never produced by [`collate_into`]).
    pub fn is_empty(&self) -> bool {
        self.shape[0] == 0
    }

    /// Size of the data in bytes.
    pub fn nbytes(&self) -> usize {
        self.buffer.len()
    }

    /// Whether the buffer is page-locked CUDA memory (from a [`crate::PinnedPool`]).
    pub fn is_pinned(&self) -> bool {
        self.buffer.kind() == "cuda-pinned"
    }

    /// Drops the rows of the samples that failed (`failed` in row order, as
    /// [`load_batch_pooled`] returns them): the rows after a failure move up in place, the
    /// keys and labels follow, and the batch holds the rows kept (possibly none).
    pub fn drop_failed_rows(&mut self, failed: &[(usize, spdl_io::Error)]) {
        if failed.is_empty() || self.is_empty() {
            return;
        }
        let row = self.buffer.len() / self.len();
        let kept = spdl_io::drop_failed_rows(
            &mut self.buffer[..],
            row,
            &mut self.keys,
            &mut self.labels,
            failed,
        );
        self.shape[0] = kept;
        // A shorter length is always within the capacity.
        let _ = self.buffer.set_len(kept * row);
    }

    /// A zero-copy export description: DLPack device `kDLCUDAHost` for pinned memory,
    /// `kDLCPU` otherwise. The batch is moved into the keep-alive handle.
    pub fn export(self) -> TensorExport {
        let device = if self.is_pinned() {
            DLDevice::cuda_host()
        } else {
            DLDevice::cpu()
        };
        TensorExport {
            data_ptr: self.buffer.as_ptr() as u64,
            device,
            shape: self.shape.iter().map(|&d| d as i64).collect(),
            dtype: self.dtype,
            stream: None,
            keep_alive: Arc::new(self),
        }
    }
}

/// Stacks images (8- or 16-bit, as they are) into `[N, H, W, C]` in a buffer from `pool`:
/// one copy per image, straight into (pinned) memory, as `spdl_io::collate` does into a `Vec`.
///
/// # Errors
/// [`Error::Decode`] for no items or differing shapes (see `spdl_io::batch::common_shape`);
/// [`Error::Pool`] when the pool
/// times out or cannot allocate.
pub fn collate_into(items: Vec<BatchItem>, pool: &dyn BufferPool) -> Result<HostBatch> {
    let [h, w, c] = spdl_io::batch::common_shape(&items)?;
    let per = h * w * c;
    let (dtype, elem) = match items[0].image.data {
        PixelData::U8(_) => (DType::U8, 1),
        PixelData::U16(_) => (DType::U16, 2),
    };
    let mut buffer = pool.acquire(per * elem * items.len())?;
    for (it, out) in items
        .iter()
        .zip(buffer.chunks_exact_mut((per * elem).max(1)))
    {
        match &it.image.data {
            PixelData::U8(v) => out.copy_from_slice(v),
            PixelData::U16(v) => {
                for (o, x) in out.chunks_exact_mut(2).zip(v) {
                    o.copy_from_slice(&x.to_ne_bytes());
                }
            }
        }
    }
    Ok(HostBatch {
        buffer,
        shape: [items.len(), h, w, c],
        dtype,
        keys: items.iter().map(|it| it.key.clone()).collect(),
        labels: items.iter().map(|it| it.label).collect(),
    })
}

/// Stacks images into normalized `f32` `[N, C, H, W]` in a buffer from `pool` (see
/// [`Normalize`]), as `spdl_io::collate_normalized` does into a `Vec`.
///
/// # Errors
/// As [`collate_into`], plus [`Error::Decode`] when `norm` does not fit the channels.
pub fn collate_normalized_into(
    items: Vec<BatchItem>,
    norm: &Normalize,
    pool: &dyn BufferPool,
) -> Result<HostBatch> {
    let [h, w, c] = spdl_io::batch::common_shape(&items)?;
    let per = h * w * c;
    let mut buffer = pool.acquire(per * 4 * items.len())?;
    let floats = as_f32_mut(&mut buffer)?;
    for (it, out) in items.iter().zip(floats.chunks_exact_mut(per.max(1))) {
        norm.write_chw(&it.image, out)
            .map_err(|e| e.with_key(&it.key))?;
    }
    Ok(HostBatch {
        buffer,
        shape: [items.len(), c, h, w],
        dtype: DType::F32,
        keys: items.iter().map(|it| it.key.clone()).collect(),
        labels: items.iter().map(|it| it.label).collect(),
    })
}

/// A pool buffer's bytes as `f32`s (the pool's buffers are page- or allocator-aligned).
fn as_f32_mut(buffer: &mut PooledBuffer) -> Result<&mut [f32]> {
    let len = buffer.len() / 4;
    let ptr = buffer.as_mut_ptr();
    if (ptr as usize) % std::mem::align_of::<f32>() != 0 {
        return Err(Error::InvalidArgument(
            "pool buffer is not aligned for f32".into(),
        ));
    }
    // SAFETY: the buffer holds `len * 4` initialized bytes, aligned for f32 (checked), any
    // bit pattern is a valid f32, and `buffer` is borrowed mutably for this slice's lifetime.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<f32>(), len) })
}

/// Loads `samples` straight into one buffer from `pool` (pinned memory before a device copy):
/// each sample is decoded and transformed into its row (`spdl_io::load_batch_into`), no copy
/// after decoding. `[N, H, W, C]` u8, or `[N, C, H, W]` f32 with `normalize`. A sample that
/// fails leaves its row zero and is returned with its row, in row order.
///
/// # Errors
/// [`Error::Decode`] when the loader's output shape is not fixed or the batch is over the
/// loader's limits ([`spdl_io::batch_layout`], checked before anything is allocated);
/// [`Error::Pool`] when the pool times out or cannot allocate.
pub fn load_batch_pooled<B: AsRef<[u8]>>(
    loader: &ImageLoader,
    samples: &[BatchSample],
    normalize: Option<&Normalize>,
    threads: usize,
    bytes: impl Fn(usize) -> spdl_io::Result<B> + Sync,
    pool: &dyn BufferPool,
) -> Result<(HostBatch, Vec<(usize, spdl_io::Error)>)> {
    // Checked against the loader's limits before anything is allocated.
    let layout = spdl_io::batch_layout(loader, samples.len(), normalize.is_some())?;
    let mut buffer = pool.acquire(layout.bytes)?;
    let (failed, dtype) = match normalize {
        None => {
            let rows = BatchRows::U8(&mut buffer[..]);
            let failed = spdl_io::load_batch_into(loader, samples, None, threads, bytes, rows)?;
            (failed, DType::U8)
        }
        Some(norm) => {
            let rows = BatchRows::F32(as_f32_mut(&mut buffer)?);
            let failed =
                spdl_io::load_batch_into(loader, samples, Some(norm), threads, bytes, rows)?;
            (failed, DType::F32)
        }
    };
    let batch = HostBatch {
        buffer,
        shape: layout.shape,
        dtype,
        keys: samples.iter().map(|s| s.key.clone()).collect(),
        labels: samples.iter().map(|s| s.label).collect(),
    };
    Ok((batch, failed))
}
