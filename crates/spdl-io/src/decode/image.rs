//! Owned decoded images (`[H, W, C]`, row-major, interleaved) and probe results.

use super::{ImageFormat, Orientation};

/// Pixel samples of an [`Image`]: 8-bit, or 16-bit for high-depth PNG/TIFF
/// decoded with [`crate::ColorMode::Unchanged`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PixelData {
    /// 8-bit samples, `height * width * channels` long.
    U8(Vec<u8>),
    /// 16-bit samples (full 0..=65535 range), `height * width * channels` long.
    U16(Vec<u16>),
}

impl PixelData {
    /// Number of samples.
    pub fn len(&self) -> usize {
        match self {
            PixelData::U8(v) => v.len(),
            PixelData::U16(v) => v.len(),
        }
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes per sample: 1 or 2.
    pub fn bytes_per_sample(&self) -> usize {
        match self {
            PixelData::U8(_) => 1,
            PixelData::U16(_) => 2,
        }
    }
}

/// A decoded image, shape `[height, width, channels]`, interleaved, row-major.
///
/// Channels are 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA, or CMYK for
/// a CMYK JPEG decoded with [`crate::ColorMode::Unchanged`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Samples, `height * width * channels` of them.
    pub data: PixelData,
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Samples per pixel.
    pub channels: usize,
    /// EXIF orientation still to apply to show the image upright:
    /// [`Orientation::Normal`] once it has been applied (the default).
    pub orientation: Orientation,
}

impl Image {
    /// An 8-bit image; `None` when `data.len() != height * width * channels`.
    pub fn from_u8(data: Vec<u8>, width: usize, height: usize, channels: usize) -> Option<Self> {
        (width.checked_mul(height)?.checked_mul(channels)? == data.len()).then_some(Image {
            data: PixelData::U8(data),
            width,
            height,
            channels,
            orientation: Orientation::Normal,
        })
    }

    /// `[height, width, channels]`.
    pub fn shape(&self) -> [usize; 3] {
        [self.height, self.width, self.channels]
    }

    /// The 8-bit samples, or `None` for a 16-bit image.
    pub fn as_u8(&self) -> Option<&[u8]> {
        match &self.data {
            PixelData::U8(v) => Some(v),
            PixelData::U16(_) => None,
        }
    }

    /// The 16-bit samples, or `None` for an 8-bit image.
    pub fn as_u16(&self) -> Option<&[u16]> {
        match &self.data {
            PixelData::U16(v) => Some(v),
            PixelData::U8(_) => None,
        }
    }

    /// The samples of pixel `(x, y)` widened to `u16`, or `None` when out of bounds.
    pub fn pixel(&self, x: usize, y: usize) -> Option<Vec<u16>> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let start = (y * self.width + x) * self.channels;
        let range = start..start + self.channels;
        Some(match &self.data {
            PixelData::U8(v) => v.get(range)?.iter().map(|&s| u16::from(s)).collect(),
            PixelData::U16(v) => v.get(range)?.to_vec(),
        })
    }
}

/// What a decoder learns from the header alone, before any pixel is decoded.
///
/// `width`/`height` are the *stored* dimensions (before EXIF orientation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageInfo {
    /// The container format (from the magic bytes).
    pub format: ImageFormat,
    /// Stored width in pixels.
    pub width: usize,
    /// Stored height in pixels.
    pub height: usize,
    /// Channels the image natively has after palette expansion: 1 gray,
    /// 2 gray+alpha, 3 RGB (or YCbCr JPEG), 4 RGBA or CMYK/YCCK JPEG.
    pub channels: usize,
    /// Bits per sample: 8 or 16 (1/2/4-bit PNG report 8, as they expand to it).
    pub bit_depth: u8,
    /// EXIF orientation tag (1..=8), [`Orientation::Normal`] when absent.
    pub orientation: Orientation,
}

impl ImageInfo {
    /// `(width, height)` as displayed, i.e. swapped for orientations 5..=8.
    pub fn display_size(&self) -> (usize, usize) {
        if self.orientation.swaps_axes() {
            (self.height, self.width)
        } else {
            (self.width, self.height)
        }
    }
}
