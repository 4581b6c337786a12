//! The per-sample entry point a pipeline stage calls: probe, plan, decode
//! (only the needed region when the decoder can), transform.

use std::sync::Arc;

use crate::decode::Image;
use crate::decode::{DecodeOptions, Region, Registry};
use crate::error::Result;
use crate::transform::{apply_plan, apply_plan_into, CropBox, Plan, SampleContext, Transform};

/// Decodes and transforms one encoded image per call. Cheap to clone and
/// safe to share across worker threads.
#[derive(Debug, Clone)]
pub struct ImageLoader {
    /// Decoders to choose from (by magic bytes).
    pub registry: Arc<Registry>,
    /// Decode options (color mode, orientation, strictness, limits).
    pub options: DecodeOptions,
    /// Transform applied after decoding.
    pub transform: Transform,
    /// Decode only the transform's source box when the decoder supports it
    /// (libjpeg-turbo cropping; default `true`). libjpeg-turbo then runs no IDCT or colour
    /// conversion outside the box, and no Huffman decoding below it: skipping to the last row
    /// ends the scan (`jpeg_skip_scanlines` in `jdapistd.c` marks the end of image reached).
    /// Rows above the box are still Huffman-decoded (sequential data, no restart markers used).
    pub region_decode: bool,
    /// Decode at a reduced scale when the transform shrinks the source box a lot and the
    /// decoder can (libjpeg-turbo's DCT scaling, like Pillow's `Image.draft`): the largest
    /// `1/d` (8, 4, 2) that leaves the scaled box at least *twice* the output size, so the
    /// final resize still antialiases. Default `true`. On the bundled photos the output stays
    /// within a mean absolute difference of about 1 level (at most 1.5, tested) of the full
    /// decode (`tests/scaled_decode.rs`).
    pub scaled_decode: bool,
    /// With `scaled_decode`, pick the DCT scale among the decoder's finer factors `M/8`
    /// ([`crate::Decoder::scale_eighths`]; libjpeg-turbo: 1/8 to 4/8, the larger ones decode
    /// slower than a full decode) with less headroom: the smallest `M` that keeps the scaled
    /// box at least [`FINE_SCALE_HEADROOM`] times the output size in both directions, instead
    /// of twice (a 1,200x900 crop for a 224 output decodes at 3/8 instead of 4/8, a 700x700
    /// crop at 4/8 instead of in full). Faster, and no longer
    /// the full decode's pixels: on real photos the output stays within a mean absolute
    /// difference of 1.5 levels (u8) of decoding in full and resizing (tested in
    /// `tests/scaled_decode.rs`). Default `false`; the native fused loaders (`spdl load`,
    /// `spdl_rs.ops` image stages) turn it on, the SPDL-API calls keep it off.
    pub fine_scaled_decode: bool,
}

/// How much larger than the output the DCT-scaled box stays with
/// [`ImageLoader::fine_scaled_decode`], so that the final resize still filters: at 1.25 the
/// mean absolute difference to the full decode (eval and train 224, over the images decoded
/// scaled) is 0.41-0.44 levels on the large-photo corpus and 0.56-0.58 on the bundled photos
/// (the ~450x380 ImageNet-like photos are too small for 4/8 and stay at full size); at 1.1
/// single photos reach 3.3 levels, at 1.0 5.0.
pub const FINE_SCALE_HEADROOM: f64 = 1.25;

impl Default for ImageLoader {
    fn default() -> Self {
        ImageLoader::new(Transform::Identity)
    }
}

impl ImageLoader {
    /// Default decoders and options with `transform`.
    pub fn new(transform: Transform) -> Self {
        ImageLoader {
            registry: Arc::new(Registry::with_defaults()),
            options: DecodeOptions::default(),
            transform,
            region_decode: true,
            scaled_decode: true,
            fine_scaled_decode: false,
        }
    }

    /// Decodes `bytes` and applies the transform; output `[H, W, C]`.
    /// The same `(seed, ctx.epoch, ctx.index)` always gives the same result.
    ///
    /// # Errors
    /// Any decode or transform error, naming `ctx.key`.
    pub fn load(&self, bytes: &[u8], ctx: &SampleContext<'_>) -> Result<Image> {
        self.load_inner(bytes, ctx).map_err(|e| e.with_key(ctx.key))
    }

    /// The `[H, W, C]` every output has, when the transform and the color mode fix it (a
    /// resizing or cropping transform and RGB, gray or RGBA output); `None` otherwise.
    pub fn output_shape(&self) -> Option<[usize; 3]> {
        let channels = match self.options.color {
            crate::ColorMode::Rgb => 3,
            crate::ColorMode::Gray => 1,
            crate::ColorMode::Rgba => 4,
            crate::ColorMode::Unchanged => return None,
        };
        let (w, h) = match self.transform {
            Transform::Identity => return None,
            Transform::Resize { width, height, .. } => (width, height),
            Transform::ResizeCenterCrop { crop, .. } => (crop, crop),
            Transform::RandomResizedCrop(r) => r.size,
        };
        Some([h, w, channels])
    }

    /// Decodes and transforms `bytes` straight into `out`, a `[H, W, C]` buffer of
    /// [`ImageLoader::output_shape`] (a row of a batch): no per-image output allocation and no
    /// copy afterwards. Same pixels as [`ImageLoader::load`].
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when the output shape
    /// is not fixed or `out` has another length; otherwise as [`ImageLoader::load`].
    pub fn load_into(&self, bytes: &[u8], ctx: &SampleContext<'_>, out: &mut [u8]) -> Result<()> {
        self.load_into_inner(bytes, ctx, out)
            .map_err(|e| e.with_key(ctx.key))
    }

    fn load_into_inner(&self, bytes: &[u8], ctx: &SampleContext<'_>, out: &mut [u8]) -> Result<()> {
        let Some(shape) = self.output_shape() else {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidArgument,
                "load_into needs a fixed output shape: a resizing transform and RGB, gray or RGBA",
            ));
        };
        if out.len() != shape.iter().product::<usize>() {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidArgument,
                format!(
                    "output buffer has {} bytes, {shape:?} needs {}",
                    out.len(),
                    shape.iter().product::<usize>()
                ),
            ));
        }
        let (img, plan) = self.decode_for_plan(bytes, ctx)?;
        match plan {
            Some(plan) => apply_plan_into(&img, &plan, self.transform.filter(), out),
            // A fixed output shape implies a transform, hence a plan; an error, not a panic.
            None => Err(crate::Error::new(
                crate::ErrorKind::InvalidArgument,
                "load_into needs a resizing transform",
            )),
        }
    }

    /// Only the decode step of [`ImageLoader::load`]: the whole image, the transform's box, or
    /// that box at a DCT scale, as the options choose, without the resize, crop or flip (for
    /// measuring the decode alone, e.g. `spdl limit --decode-only`).
    ///
    /// # Errors
    /// Any decode error, naming `ctx.key`.
    pub fn decode_only(&self, bytes: &[u8], ctx: &SampleContext<'_>) -> Result<Image> {
        self.decode_for_plan(bytes, ctx)
            .map(|(img, _)| img)
            .map_err(|e| e.with_key(ctx.key))
    }

    fn load_inner(&self, bytes: &[u8], ctx: &SampleContext<'_>) -> Result<Image> {
        let (img, plan) = self.decode_for_plan(bytes, ctx)?;
        match plan {
            Some(plan) => apply_plan(&img, &plan, self.transform.filter()),
            None => Ok(img),
        }
    }

    /// Decodes what the transform needs (the whole image, its box, or its box at a DCT
    /// scale) and the plan to finish it, its source box in the decoded image's pixels.
    fn decode_for_plan(
        &self,
        bytes: &[u8],
        ctx: &SampleContext<'_>,
    ) -> Result<(Image, Option<Plan>)> {
        let decoder = self.registry.decoder_for(ctx.key, bytes)?;
        let info = decoder.probe(bytes)?;
        let (w, h) = if self.options.keep_orientation {
            (info.width, info.height)
        } else {
            info.display_size()
        };
        let Some(mut plan) = self.transform.plan(w, h, ctx)? else {
            return Ok((decoder.decode(bytes, &self.options)?, None));
        };
        // The decoded input was checked on the header; the requested output is checked here,
        // before the resize allocates it (at least 3 channels: RGB unless asked otherwise).
        let bytes_per_sample = if info.bit_depth > 8 { 2 } else { 1 };
        self.options.limits.check_output(
            plan.width,
            plan.height,
            info.channels.max(3),
            bytes_per_sample,
        )?;
        let region = covering_region(&plan.src, w, h, MARGIN);
        if let Some(eighths) = self.scale_for(decoder, &info, region, &plan) {
            // `region_decode: false` asks for the whole image: scale it all, then crop.
            let box_to_decode = if self.region_decode && self.fine_scaled_decode {
                // The filter margin in scaled pixels, not full ones.
                covering_region(&plan.src, w, h, MARGIN * 8.0 / eighths as f64)
            } else if self.region_decode {
                region
            } else {
                Region {
                    x: 0,
                    y: 0,
                    width: w,
                    height: h,
                }
            };
            let scaled =
                decoder.decode_scaled_eighths(bytes, &self.options, box_to_decode, eighths)?;
            // Map the source box into the scaled image's pixels: scaled pixel i covers full
            // pixels [i * 8 / M, (i + 1) * 8 / M).
            let f = eighths as f64 / 8.0;
            plan.src.left = plan.src.left * f - scaled.x as f64;
            plan.src.top = plan.src.top * f - scaled.y as f64;
            plan.src.width *= f;
            plan.src.height *= f;
            return Ok((scaled.image, Some(plan)));
        }
        let img = if self.region_decode
            && decoder.supports_region()
            && (region.width, region.height) != (w, h)
        {
            plan.src.left -= region.x as f64;
            plan.src.top -= region.y as f64;
            decoder.decode_region(bytes, &self.options, region)?
        } else {
            decoder.decode(bytes, &self.options)?
        };
        Ok((img, Some(plan)))
    }
}

impl ImageLoader {
    /// The DCT scale `M/8` to decode at (`None`: full size). Coarse (the default): the
    /// largest of the decoder's denominators `d` for which the scaled region is still at least
    /// twice the output size in both directions (with only 1x headroom the final resize barely
    /// filters and mean differences reach 4 levels). Fine: the smallest of the decoder's `M/8`
    /// that keeps [`FINE_SCALE_HEADROOM`].
    fn scale_for(
        &self,
        decoder: &dyn crate::Decoder,
        info: &crate::ImageInfo,
        region: Region,
        plan: &crate::transform::Plan,
    ) -> Option<usize> {
        let oriented =
            !self.options.keep_orientation && info.orientation != crate::Orientation::Normal;
        if !self.scaled_decode || oriented {
            return None;
        }
        if self.fine_scaled_decode && !decoder.scale_eighths().is_empty() {
            let fits = |m: usize| {
                let f = m as f64 / 8.0;
                region.width as f64 * f >= FINE_SCALE_HEADROOM * plan.width as f64
                    && region.height as f64 * f >= FINE_SCALE_HEADROOM * plan.height as f64
            };
            return decoder.scale_eighths().iter().copied().find(|&m| fits(m));
        }
        decoder
            .scale_denominators()
            .iter()
            .copied()
            .find(|&d| region.width >= 2 * d * plan.width && region.height >= 2 * d * plan.height)
            .map(|d| 8 / d)
    }
}

/// Full-resolution pixels kept around the source box for the resampling filter's support.
const MARGIN: f64 = 3.0;

/// The integer pixel rectangle that covers `b` plus `margin` pixels for the
/// resampling filter's support at the box edges.
fn covering_region(b: &CropBox, width: usize, height: usize, margin: f64) -> Region {
    let x0 = (b.left - margin).floor().max(0.0) as usize;
    let y0 = (b.top - margin).floor().max(0.0) as usize;
    let x1 = ((b.left + b.width + margin).ceil() as usize).min(width);
    let y1 = ((b.top + b.height + margin).ceil() as usize).min(height);
    Region {
        x: x0.min(x1.saturating_sub(1)),
        y: y0.min(y1.saturating_sub(1)),
        width: x1.saturating_sub(x0).max(1),
        height: y1.saturating_sub(y0).max(1),
    }
}

/// A printable sample key for a path: valid UTF-8 as is, other bytes escaped
/// as `\xNN` (e.g. `caf\xe9_latin1.png`), never a lossy replacement.
pub fn key_from_path(path: &std::path::Path) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        String::from_utf8(path.as_os_str().as_bytes().to_vec())
            .unwrap_or_else(|e| e.as_bytes().escape_ascii().to_string())
    }
    #[cfg(not(unix))]
    {
        path.to_string_lossy().into_owned()
    }
}
