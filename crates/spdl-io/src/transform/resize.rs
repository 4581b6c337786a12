//! Resizing (fast_image_resize) and flipping of 8-bit `[H, W, C]` images.

use fast_image_resize as fr;

use crate::decode::Image;
use crate::error::{Error, ErrorKind, Result};

/// Resampling filter. Convolution filters widen their support when
/// downscaling, i.e. they antialias like Pillow's `resize` and torchvision's
/// `antialias=True`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Filter {
    /// Nearest neighbour (no antialiasing).
    Nearest,
    /// Triangle filter (Pillow `BILINEAR`), the torchvision default.
    #[default]
    Bilinear,
    /// Catmull-Rom cubic (Pillow `BICUBIC`, a = -0.5).
    Bicubic,
    /// Lanczos, 3 lobes (Pillow `LANCZOS`).
    Lanczos3,
}

impl Filter {
    fn alg(self) -> fr::ResizeAlg {
        match self {
            Filter::Nearest => fr::ResizeAlg::Nearest,
            Filter::Bilinear => fr::ResizeAlg::Convolution(fr::FilterType::Bilinear),
            Filter::Bicubic => fr::ResizeAlg::Convolution(fr::FilterType::CatmullRom),
            Filter::Lanczos3 => fr::ResizeAlg::Convolution(fr::FilterType::Lanczos3),
        }
    }
}

/// A sub-pixel source rectangle (pixels) to resample from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CropBox {
    /// Left edge.
    pub left: f64,
    /// Top edge.
    pub top: f64,
    /// Width.
    pub width: f64,
    /// Height.
    pub height: f64,
}

impl CropBox {
    /// The whole `width x height` image.
    pub fn full(width: usize, height: usize) -> Self {
        CropBox {
            left: 0.0,
            top: 0.0,
            width: width as f64,
            height: height as f64,
        }
    }
}

fn pixel_type(channels: usize) -> Result<fr::PixelType> {
    Ok(match channels {
        1 => fr::PixelType::U8,
        2 => fr::PixelType::U8x2,
        3 => fr::PixelType::U8x3,
        4 => fr::PixelType::U8x4,
        c => {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("cannot resize {c}-channel images"),
            ))
        }
    })
}

/// Resizes `img` (8-bit, 1..=4 channels) to `width x height` pixels.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] for a zero output size, a 16-bit image
/// (decode with an 8-bit [`crate::ColorMode`] first) or more than 4 channels.
pub fn resize(img: &Image, width: usize, height: usize, filter: Filter) -> Result<Image> {
    resize_crop(
        img,
        CropBox::full(img.width, img.height),
        width,
        height,
        filter,
    )
}

/// Resamples the `src` box of `img` to `width x height` pixels (one pass:
/// crop and resize, sub-pixel accurate).
///
/// # Errors
/// As [`resize`], plus [`ErrorKind::InvalidArgument`] when the box is empty
/// or outside the image.
pub fn resize_crop(
    img: &Image,
    src: CropBox,
    width: usize,
    height: usize,
    filter: Filter,
) -> Result<Image> {
    let mut buf = vec![0u8; width * height * img.channels];
    resize_crop_into(img, src, width, height, filter, &mut buf)?;
    Image::from_u8(buf, width, height, img.channels).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidArgument,
            "resize produced a wrong-sized buffer",
        )
    })
}

/// [`resize_crop`] into a caller's buffer of exactly `height * width * channels` bytes
/// (`[H, W, C]`, e.g. a row of a batch), with no allocation of the output.
///
/// # Errors
/// As [`resize_crop`], plus [`ErrorKind::InvalidArgument`] when `out` has another length.
pub fn resize_crop_into(
    img: &Image,
    src: CropBox,
    width: usize,
    height: usize,
    filter: Filter,
    out: &mut [u8],
) -> Result<()> {
    let invalid = |m: String| Error::new(ErrorKind::InvalidArgument, m);
    let data = img.as_u8().ok_or_else(|| {
        invalid("resize needs 8-bit samples; decode with ColorMode Rgb, Gray or Rgba".into())
    })?;
    if width == 0 || height == 0 || img.width == 0 || img.height == 0 {
        return Err(invalid(format!(
            "cannot resize {}x{} to {width}x{height}",
            img.width, img.height
        )));
    }
    if out.len() != width * height * img.channels {
        return Err(invalid(format!(
            "output buffer has {} bytes, {height}x{width}x{} needs {}",
            out.len(),
            img.channels,
            width * height * img.channels
        )));
    }
    let pt = pixel_type(img.channels)?;
    let (w32, h32, ow, oh) = (
        to_u32(img.width)?,
        to_u32(img.height)?,
        to_u32(width)?,
        to_u32(height)?,
    );
    let src_img =
        fr::images::ImageRef::new(w32, h32, data, pt).map_err(|e| invalid(e.to_string()))?;
    let mut dst = fr::images::Image::from_slice_u8(ow, oh, out, pt)
        .map_err(|e| invalid(format!("resize output: {e}")))?;
    let opts = fr::ResizeOptions::new()
        .resize_alg(filter.alg())
        .crop(src.left, src.top, src.width, src.height)
        .use_alpha(false);
    fr::Resizer::new()
        .resize(&src_img, &mut dst, &opts)
        .map_err(|e| invalid(format!("resize: {e}")))
}

fn to_u32(v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("{v} pixels is too large"),
        )
    })
}

/// Mirrors `[H, W, C]` 8-bit pixels of width `width` left-right in place.
pub fn hflip_u8(pixels: &mut [u8], width: usize, channels: usize) {
    let row = width * channels;
    if row == 0 {
        return;
    }
    for r in pixels.chunks_exact_mut(row) {
        for x in 0..width / 2 {
            for k in 0..channels {
                r.swap(x * channels + k, (width - 1 - x) * channels + k);
            }
        }
    }
}

/// Mirrors the image left-right in place.
pub fn hflip(img: &mut Image) {
    let (w, c) = (img.width, img.channels);
    let row = w * c;
    if row == 0 {
        return;
    }
    fn flip_rows<T: Copy>(v: &mut [T], row: usize, w: usize, c: usize) {
        for r in v.chunks_exact_mut(row) {
            for x in 0..w / 2 {
                for k in 0..c {
                    r.swap(x * c + k, (w - 1 - x) * c + k);
                }
            }
        }
    }
    match &mut img.data {
        crate::decode::PixelData::U8(v) => flip_rows(v, row, w, c),
        crate::decode::PixelData::U16(v) => flip_rows(v, row, w, c),
    }
}
