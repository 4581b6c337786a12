//! Collation: many decoded images into one contiguous batch buffer.

use crate::decode::{Image, PixelData};
use crate::error::{Error, ErrorKind, Result};
use crate::transform::Normalize;

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

/// A collated batch. `shape` is `[N, H, W, C]` for integer data and
/// `[N, C, H, W]` for [`BatchData::F32`]; `keys` and `labels` have N entries.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageBatch {
    /// Samples.
    pub data: BatchData,
    /// Dimensions in the layout of `data`.
    pub shape: [usize; 4],
    /// Sample keys, in batch order.
    pub keys: Vec<String>,
    /// Labels, in batch order.
    pub labels: Vec<Option<i64>>,
}

impl ImageBatch {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.shape[0]
    }

    /// True for a batch of zero samples (never produced by [`collate`]).
    pub fn is_empty(&self) -> bool {
        self.shape[0] == 0
    }
}

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
    Ok(ImageBatch {
        data,
        shape: [items.len(), h, w, c],
        keys: items.iter().map(|it| it.key.clone()).collect(),
        labels: items.iter().map(|it| it.label).collect(),
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
        shape: [items.len(), c, h, w],
        keys: items.iter().map(|it| it.key.clone()).collect(),
        labels: items.iter().map(|it| it.label).collect(),
    })
}
