//! Pixels: decode a source photo (libjpeg-turbo), cut and resize a crop (fast_image_resize),
//! encode the result (libjpeg-turbo). Every step is deterministic for a given build.

use anyhow::{Context, Result};
use fast_image_resize::images::{Image as FirImage, ImageRef};
use fast_image_resize::{CpuExtensions, FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use turbojpeg::{Compressor, Decompressor, Image, PixelFormat, ScalingFactor, Subsamp};

use crate::plan::{Sampling, Spec};

/// A decoded source photo, RGB.
pub(crate) struct Photo {
    pub(crate) rgb: Vec<u8>,
    pub(crate) width: u32,
    pub(crate) height: u32,
}

/// Decoded photos are only cut into ~500 px images: big ones are decoded at 1/2 or 1/4 scale
/// (in the DCT, cheap and exact) as long as their long side stays at least this big.
pub(crate) const MIN_DECODED_LONG_SIDE: usize = 1600;

/// A `min_long` for [`decode`] that keeps every photo at full resolution.
pub(crate) const FULL_RESOLUTION: usize = usize::MAX;

/// Decodes a JPEG photo to RGB, scaled down by a power of two as long as its long side stays
/// at least `min_long`.
pub(crate) fn decode(jpeg: &[u8], min_long: usize) -> Result<Photo> {
    let mut d = Decompressor::new()?;
    let header = d.read_header(jpeg)?;
    let long = header.width.max(header.height);
    let scale = [ScalingFactor::ONE_QUARTER, ScalingFactor::ONE_HALF]
        .into_iter()
        .find(|s| s.scale(long) >= min_long)
        .unwrap_or(ScalingFactor::ONE);
    d.set_scaling_factor(scale)?;
    let (width, height) = (scale.scale(header.width), scale.scale(header.height));
    let mut rgb = vec![0u8; width * height * 3];
    d.decompress(
        jpeg,
        Image {
            pixels: &mut rgb[..],
            width,
            pitch: width * 3,
            height,
            format: PixelFormat::RGB,
        },
    )?;
    Ok(Photo {
        rgb,
        width: width as u32,
        height: height as u32,
    })
}

/// Cuts, resizes, mirrors and encodes the image described by `spec` from `photo`.
pub(crate) fn render(photo: &Photo, spec: &Spec, resizer: &mut Resizer) -> Result<Vec<u8>> {
    // The largest crop of the target aspect, scaled, placed in the free room.
    let (pw, ph) = (f64::from(photo.width), f64::from(photo.height));
    let aspect = f64::from(spec.width) / f64::from(spec.height);
    let (max_w, max_h) = if pw / ph > aspect {
        (ph * aspect, ph)
    } else {
        (pw, pw / aspect)
    };
    let (cw, ch) = (max_w * spec.crop_scale, max_h * spec.crop_scale);
    let (cx, cy) = ((pw - cw) * spec.crop_x, (ph - ch) * spec.crop_y);

    let src = ImageRef::new(photo.width, photo.height, &photo.rgb, PixelType::U8x3)?;
    let mut dst = FirImage::new(spec.width, spec.height, PixelType::U8x3);
    let options = ResizeOptions::new()
        .crop(cx, cy, cw, ch)
        .resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3));
    resizer.resize(&src, &mut dst, &options)?;
    let mut rgb = dst.into_vec();
    let (w, h) = (spec.width as usize, spec.height as usize);
    if spec.mirror {
        for row in rgb.chunks_exact_mut(w * 3) {
            let mut px: Vec<[u8; 3]> = row.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect();
            px.reverse();
            row.copy_from_slice(px.as_flattened());
        }
    }

    let mut c = Compressor::new()?;
    c.set_quality(spec.quality)?;
    c.set_progressive(spec.progressive)?;
    let (pixels, format, subsamp) = match spec.sampling {
        Sampling::Gray => (luma(&rgb), PixelFormat::GRAY, Subsamp::Gray),
        Sampling::S420 => (rgb, PixelFormat::RGB, Subsamp::Sub2x2),
        Sampling::S422 => (rgb, PixelFormat::RGB, Subsamp::Sub2x1),
        Sampling::S444 => (rgb, PixelFormat::RGB, Subsamp::None),
    };
    c.set_subsamp(subsamp)?;
    let image = Image {
        pixels: &pixels[..],
        width: w,
        pitch: w * format.size(),
        height: h,
        format,
    };
    c.compress_to_vec(image)
        .with_context(|| format!("cannot encode {}", spec.path))
}

/// A resizer that uses no SIMD: SIMD paths may round differently from one CPU to another, and
/// the corpus must be the same bytes on every machine.
pub(crate) fn portable_resizer() -> Resizer {
    let mut r = Resizer::new();
    // SAFETY: `None` (plain Rust, no CPU extension) runs on every CPU.
    unsafe { r.set_cpu_extensions(CpuExtensions::None) };
    r
}

/// BT.601 luma, in integers.
fn luma(rgb: &[u8]) -> Vec<u8> {
    rgb.chunks_exact(3)
        .map(|p| {
            let y = 77 * u32::from(p[0]) + 150 * u32::from(p[1]) + 29 * u32::from(p[2]) + 128;
            (y >> 8) as u8
        })
        .collect()
}
