//! The CPU batch: many decoded images in one contiguous buffer, described by one
//! [`BatchHeader`] (shape, element type, keys, labels).
//!
//! - [`ImageBatch`]: a batch in a `Vec` ([`collate`], [`collate_normalized`], [`crate::load_batch`]).
//! - [`HostBatch`]: a batch in a buffer from a [`BufferPool`] (plain host memory, or pinned
//!   memory that spdl-cuda's pool hands out before a copy to the GPU): [`collate_into`],
//!   [`collate_normalized_into`], [`crate::load_batch_pooled`]; [`HostBatch::export`] shares it
//!   zero-copy through DLPack ([`crate::dlpack`]).
//!
//! spdl-cuda's `DeviceBatch` carries the same [`BatchHeader`].

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use spdl_core::buffer::{BufferPool, PooledBuffer};

use crate::decode::{Image, PixelData};
use crate::dlpack::{DLDevice, TensorExport};
use crate::error::{Error, ErrorKind, Result};
use crate::transform::Normalize;
use crate::DType;

/// What every batch says about itself, host or device: `shape` is `[N, H, W, C]` for integer
/// data and `[N, C, H, W]` for [`DType::F32`] (normalized), row-major contiguous; `keys` and
/// `labels` have N entries, in row order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchHeader {
    /// Dimensions, in elements.
    pub shape: [usize; 4],
    /// Element type.
    pub dtype: DType,
    /// Sample keys, in batch order.
    pub keys: Vec<String>,
    /// Labels, in batch order.
    pub labels: Vec<Option<i64>>,
}

impl BatchHeader {
    /// A header of `shape` and `dtype` with the keys and labels of `items`, in row order.
    pub fn of_items(shape: [usize; 4], dtype: DType, items: &[BatchItem]) -> Self {
        BatchHeader {
            shape,
            dtype,
            keys: items.iter().map(|it| it.key.clone()).collect(),
            labels: items.iter().map(|it| it.label).collect(),
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.shape[0]
    }

    /// True for a batch of zero samples.
    pub fn is_empty(&self) -> bool {
        self.shape[0] == 0
    }

    /// Size of the data in bytes (`shape.product() * dtype.size()`).
    pub fn nbytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

/// One image with its sample key and optional class label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchItem {
    /// Sample name (file, URL); named in shape errors.
    pub key: String,
    /// Class label, if any.
    pub label: Option<i64>,
    /// The decoded (and transformed) image.
    pub image: Image,
}

impl From<Image> for BatchItem {
    fn from(image: Image) -> Self {
        BatchItem {
            key: String::new(),
            label: None,
            image,
        }
    }
}

/// The samples of a batch, in one contiguous buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchData {
    /// `[N, H, W, C]` 8-bit.
    U8(Vec<u8>),
    /// `[N, H, W, C]` 16-bit (16-bit images collated without conversion).
    U16(Vec<u16>),
    /// `[N, C, H, W]` normalized `f32`.
    F32(Vec<f32>),
}

impl BatchData {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            BatchData::U8(_) => DType::U8,
            BatchData::U16(_) => DType::U16,
            BatchData::F32(_) => DType::F32,
        }
    }
}

/// A collated batch in a `Vec`: its samples and its [`BatchHeader`] (`batch.shape`,
/// `batch.keys`, ... read through it). `shape` is `[N, H, W, C]` for integer data and
/// `[N, C, H, W]` for [`BatchData::F32`]; the header's `dtype` is the data's.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageBatch {
    /// Samples.
    pub data: BatchData,
    /// Shape, element type (that of `data`), keys and labels.
    pub header: BatchHeader,
}

impl ImageBatch {
    /// A batch over `data` laid out as `shape`, with `keys` and `labels` in row order.
    pub fn new(
        data: BatchData,
        shape: [usize; 4],
        keys: Vec<String>,
        labels: Vec<Option<i64>>,
    ) -> Self {
        let dtype = data.dtype();
        ImageBatch {
            data,
            header: BatchHeader {
                shape,
                dtype,
                keys,
                labels,
            },
        }
    }
}

/// `Deref`/`DerefMut` to the batch's `header` field, so that `batch.shape`, `batch.keys`, ...
/// read the one [`BatchHeader`] of each batch type.
macro_rules! deref_to_header {
    ($($batch:ty),+) => {$(
        impl Deref for $batch {
            type Target = BatchHeader;

            fn deref(&self) -> &BatchHeader {
                &self.header
            }
        }

        impl DerefMut for $batch {
            fn deref_mut(&mut self) -> &mut BatchHeader {
                &mut self.header
            }
        }
    )+};
}

deref_to_header!(ImageBatch, HostBatch);

fn sample_name(item: &BatchItem, i: usize) -> String {
    if item.key.is_empty() {
        format!("sample {i}")
    } else {
        item.key.clone()
    }
}

/// The `[H, W, C]` shared by every item, checked before a batch buffer is filled (also by
/// spdl-cuda's collation into pinned memory).
///
/// # Errors
/// [`ErrorKind::Empty`] for no items; [`ErrorKind::ShapeMismatch`] naming the first sample whose
/// shape or bit depth differs from the first one's, and both shapes.
pub fn common_shape(items: &[BatchItem]) -> Result<[usize; 3]> {
    let Some(first) = items.first() else {
        return Err(Error::new(
            ErrorKind::Empty,
            "cannot collate an empty batch",
        ));
    };
    let (shape, depth) = (first.image.shape(), first.image.data.bytes_per_sample());
    for (i, it) in items.iter().enumerate() {
        let (s, d) = (it.image.shape(), it.image.data.bytes_per_sample());
        if s != shape || d != depth {
            return Err(Error::new(
                ErrorKind::ShapeMismatch,
                format!(
                    "sample {i} has shape {s:?} ({}-bit), but {} has shape {shape:?} ({}-bit); \
                     decode with ColorMode::Rgb and a resizing transform to batch mixed images",
                    d * 8,
                    sample_name(first, 0),
                    depth * 8
                ),
            )
            .with_key(&sample_name(it, i)));
        }
        if it.image.data.len() != s.iter().product::<usize>() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "image data length does not match its shape",
            )
            .with_key(&sample_name(it, i)));
        }
    }
    Ok(shape)
}

/// Stacks images into `[N, H, W, C]` (8- or 16-bit, as the images are).
/// Accepts `Vec<Image>` or `Vec<BatchItem>`.
///
/// # Errors
/// [`ErrorKind::Empty`] for no items; [`ErrorKind::ShapeMismatch`] naming
/// the first differing sample and both shapes (e.g. a gray JPEG decoded with
/// [`crate::ColorMode::Unchanged`] next to RGB ones).
pub fn collate<T: Into<BatchItem>>(items: Vec<T>) -> Result<ImageBatch> {
    let items: Vec<BatchItem> = items.into_iter().map(Into::into).collect();
    let [h, w, c] = common_shape(&items)?;
    // One allocation and one memcpy per image: this runs once per batch on the hot path.
    let per = h * w * c;
    let data = match items[0].image.data {
        PixelData::U8(_) => {
            let mut out = Vec::with_capacity(per * items.len());
            for it in &items {
                out.extend_from_slice(it.image.as_u8().unwrap_or_default());
            }
            BatchData::U8(out)
        }
        PixelData::U16(_) => {
            let mut out = Vec::with_capacity(per * items.len());
            for it in &items {
                out.extend_from_slice(it.image.as_u16().unwrap_or_default());
            }
            BatchData::U16(out)
        }
    };
    let dtype = data.dtype();
    Ok(ImageBatch {
        data,
        header: BatchHeader::of_items([items.len(), h, w, c], dtype, &items),
    })
}

/// Stacks images into normalized `f32` `[N, C, H, W]` (see [`Normalize`]).
///
/// # Errors
/// As [`collate`], plus [`ErrorKind::InvalidArgument`] when `norm` does not
/// have one mean/std per channel.
pub fn collate_normalized<T: Into<BatchItem>>(
    items: Vec<T>,
    norm: &Normalize,
) -> Result<ImageBatch> {
    let items: Vec<BatchItem> = items.into_iter().map(Into::into).collect();
    let [h, w, c] = common_shape(&items)?;
    let per = c * h * w;
    let mut data = vec![0f32; per * items.len()];
    for (it, out) in items.iter().zip(data.chunks_exact_mut(per.max(1))) {
        norm.write_chw(&it.image, out)
            .map_err(|e| e.with_key(&it.key))?;
    }
    Ok(ImageBatch {
        data: BatchData::F32(data),
        header: BatchHeader::of_items([items.len(), c, h, w], DType::F32, &items),
    })
}

/// A collated batch in a buffer from a [`BufferPool`]: its bytes
/// (`header.nbytes()` of them, native-endian elements) and its [`BatchHeader`] (read
/// through it: `batch.shape`, `batch.keys`, ...). Dropping it returns the buffer to its pool.
#[derive(Debug)]
pub struct HostBatch {
    /// The bytes.
    pub buffer: PooledBuffer,
    /// Shape, element type, keys and labels.
    pub header: BatchHeader,
}

/// The pool kind of spdl-cuda's page-locked buffers (`PinnedPool`).
const PINNED_KIND: &str = "cuda-pinned";

impl HostBatch {
    /// Whether the buffer is page-locked CUDA memory (from spdl-cuda's `PinnedPool`).
    pub fn is_pinned(&self) -> bool {
        self.buffer.kind() == PINNED_KIND
    }

    /// Drops the rows of the samples that failed (`failed` in row order, as
    /// [`crate::load_batch_pooled`] returns them): the rows after a failure move up in place, the
    /// keys and labels follow, and the batch holds the rows kept (possibly none).
    pub fn drop_failed_rows(&mut self, failed: &[(usize, Error)]) {
        if failed.is_empty() || self.header.is_empty() {
            return;
        }
        let row = self.buffer.len() / self.header.len();
        let header = &mut self.header;
        let kept = drop_failed_rows(
            &mut self.buffer[..],
            row,
            &mut header.keys,
            &mut header.labels,
            failed,
        );
        header.shape[0] = kept;
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
            shape: self.header.shape.iter().map(|&d| d as i64).collect(),
            dtype: self.header.dtype,
            stream: None,
            keep_alive: Arc::new(self),
        }
    }
}

/// A buffer of `len` bytes from `pool`, or [`ErrorKind::Buffer`] (temporary when the pool
/// timed out) with the pool's error as the source.
pub(crate) fn acquire(pool: &dyn BufferPool, len: usize) -> Result<PooledBuffer> {
    pool.acquire(len).map_err(|e| {
        let temporary = spdl_core::ErrorStatus::is_temporary(&e);
        Error::new(
            ErrorKind::Buffer,
            format!("{len} bytes from a {} pool: {e}", pool.kind()),
        )
        .with_temporary(temporary)
        .with_source(e)
    })
}

/// Stacks images (8- or 16-bit, as they are) into `[N, H, W, C]` in a buffer from `pool`:
/// one copy per image, straight into (pinned) memory, as [`collate`] does into a `Vec`.
///
/// # Errors
/// As [`collate`] ([`ErrorKind::Empty`], [`ErrorKind::ShapeMismatch`]); [`ErrorKind::Buffer`]
/// when the pool times out or cannot allocate.
pub fn collate_into(items: Vec<BatchItem>, pool: &dyn BufferPool) -> Result<HostBatch> {
    let [h, w, c] = common_shape(&items)?;
    let per = h * w * c;
    let dtype = match items[0].image.data {
        PixelData::U8(_) => DType::U8,
        PixelData::U16(_) => DType::U16,
    };
    let row = per * dtype.size();
    let mut buffer = acquire(pool, row * items.len())?;
    for (it, out) in items.iter().zip(buffer.chunks_exact_mut(row.max(1))) {
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
        header: BatchHeader::of_items([items.len(), h, w, c], dtype, &items),
    })
}

/// Stacks images into normalized `f32` `[N, C, H, W]` in a buffer from `pool` (see
/// [`Normalize`]), as [`collate_normalized`] does into a `Vec`.
///
/// # Errors
/// As [`collate_into`], plus [`ErrorKind::InvalidArgument`] when `norm` does not fit the
/// channels.
pub fn collate_normalized_into(
    items: Vec<BatchItem>,
    norm: &Normalize,
    pool: &dyn BufferPool,
) -> Result<HostBatch> {
    let [h, w, c] = common_shape(&items)?;
    let per = h * w * c;
    let mut buffer = acquire(pool, per * 4 * items.len())?;
    let floats = as_f32_mut(&mut buffer)?;
    for (it, out) in items.iter().zip(floats.chunks_exact_mut(per.max(1))) {
        norm.write_chw(&it.image, out)
            .map_err(|e| e.with_key(&it.key))?;
    }
    Ok(HostBatch {
        buffer,
        header: BatchHeader::of_items([items.len(), c, h, w], DType::F32, &items),
    })
}

/// A pool buffer's bytes as `f32`s (the pools' buffers are page- or allocator-aligned).
pub(crate) fn as_f32_mut(buffer: &mut PooledBuffer) -> Result<&mut [f32]> {
    let len = buffer.len() / 4;
    let ptr = buffer.as_mut_ptr();
    if (ptr as usize) % std::mem::align_of::<f32>() != 0 {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "pool buffer is not aligned for f32",
        ));
    }
    // SAFETY: the buffer holds `len * 4` initialized bytes, aligned for f32 (checked), any
    // bit pattern is a valid f32, and `buffer` is borrowed mutably for this slice's lifetime.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<f32>(), len) })
}

/// Drops the rows named in `failed` (in row order, as [`crate::load_batch`] and [`crate::load_batch_into`]
/// return them) from a batch whose `data` holds one row of `per` values per key: the rows after
/// a failure move up in place (nothing moves when none failed), and `keys` and `labels` keep
/// the rows kept. Returns how many rows are kept: the first `kept * per` values of `data`.
pub fn drop_failed_rows<T: Copy>(
    data: &mut [T],
    per: usize,
    keys: &mut Vec<String>,
    labels: &mut Vec<Option<i64>>,
    failed: &[(usize, Error)],
) -> usize {
    if failed.is_empty() {
        return keys.len();
    }
    let keep: Vec<usize> = (0..keys.len())
        .filter(|row| failed.binary_search_by_key(row, |(r, _)| *r).is_err())
        .collect();
    for (to, &from) in keep.iter().enumerate() {
        if to != from {
            data.copy_within(from * per..(from + 1) * per, to * per);
        }
    }
    *keys = keep.iter().map(|&i| std::mem::take(&mut keys[i])).collect();
    *labels = keep.iter().map(|&i| labels[i]).collect();
    keep.len()
}
