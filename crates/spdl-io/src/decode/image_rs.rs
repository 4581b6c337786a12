//! Pure-Rust backend on the `image` crate, one feature per format (`decode-image` turns on
//! all): PNG (`decode-png`: 1..16-bit, palette + tRNS, gray + alpha), JPEG (`decode-jpeg-rs`:
//! zune-jpeg), GIF (`decode-gif`: first frame), WebP (`decode-webp`), BMP (`decode-bmp`), TIFF
//! (`decode-tiff`).

use std::io::Cursor;

use image::{ColorType, ImageDecoder, ImageReader};

use super::jpeg_markers;
use super::{check_out_len, color, DecodeOptions, Decoder, ImageFormat, Orientation};
use super::{Image, ImageInfo, PixelData};
use crate::error::{Error, ErrorKind, Result};

/// Decoder over image-rs 0.25 for the formats this build has (their features).
///
/// JPEG goes through zune-jpeg, which lacks arithmetic coding (reported as
/// [`ErrorKind::Unsupported`]) and, unlike libjpeg-turbo, may not notice a cut
/// file; so in strict mode the EOI marker is required here too.
/// Palette PNGs expand to RGB, or RGBA when they carry tRNS; alpha is dropped
/// for [`crate::ColorMode::Rgb`] without compositing (Pillow's `convert("RGB")`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ImageRsDecoder {
    _private: (),
}

impl ImageRsDecoder {
    /// A decoder (stateless; share it freely).
    pub fn new() -> Self {
        Self::default()
    }
}

fn image_format(f: ImageFormat) -> Option<image::ImageFormat> {
    // Only the formats this build has (one feature each): the registry then says which
    // format a file is and that no decoder for it is registered.
    Some(match f {
        #[cfg(feature = "decode-jpeg-rs")]
        ImageFormat::Jpeg => image::ImageFormat::Jpeg,
        #[cfg(feature = "decode-png")]
        ImageFormat::Png => image::ImageFormat::Png,
        #[cfg(feature = "decode-gif")]
        ImageFormat::Gif => image::ImageFormat::Gif,
        #[cfg(feature = "decode-webp")]
        ImageFormat::WebP => image::ImageFormat::WebP,
        #[cfg(feature = "decode-bmp")]
        ImageFormat::Bmp => image::ImageFormat::Bmp,
        #[cfg(feature = "decode-tiff")]
        ImageFormat::Tiff => image::ImageFormat::Tiff,
        _ => return None,
    })
}

/// Maps an image-rs error to ours; short reads become [`ErrorKind::Truncated`].
fn map_err(e: image::ImageError) -> Error {
    let msg = e.to_string();
    let lower = msg.to_ascii_lowercase();
    let kind = match &e {
        image::ImageError::Limits(_) => ErrorKind::LimitExceeded,
        image::ImageError::Unsupported(_) => ErrorKind::Unsupported,
        image::ImageError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            ErrorKind::Truncated
        }
        _ if lower.contains("eof") || lower.contains("end of") || lower.contains("truncat") => {
            ErrorKind::Truncated
        }
        _ => ErrorKind::Corrupt,
    };
    Error::new(kind, msg).with_source(e)
}

fn channels_and_depth(c: ColorType) -> (usize, u8) {
    let bits = (c.bytes_per_pixel() / c.channel_count().max(1)) * 8;
    (usize::from(c.channel_count()), bits.min(16))
}

/// A header-only decoder (nothing decoded yet) plus what we learned.
fn open<'a>(
    bytes: &'a [u8],
    opts: Option<&DecodeOptions>,
) -> Result<(Box<dyn ImageDecoder + 'a>, ImageInfo)> {
    // Our own Limits are checked by the caller on the returned header, so
    // image-rs must not reject the header first with a vaguer message.
    let format = super::sniff(bytes);
    let Some(fmt) = image_format(format) else {
        return Err(Error::new(
            ErrorKind::UnknownFormat,
            super::describe_unknown(bytes),
        ));
    };
    let mut orientation_from_markers = None;
    if format == ImageFormat::Jpeg {
        let h = jpeg_markers::parse_header(bytes)?;
        if h.arithmetic {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "arithmetic-coded JPEG is not supported by the pure-Rust decoder (enable `decode-turbojpeg`)",
            ));
        }
        if let Some(o) = opts {
            if !o.lenient {
                jpeg_markers::check_complete(bytes, h.first_scan)?;
            }
        }
        orientation_from_markers = Some(h.orientation);
    }
    let mut reader = ImageReader::with_format(Cursor::new(bytes), fmt);
    reader.no_limits();
    let mut dec = reader.into_decoder().map_err(map_err)?;
    let (w, h) = dec.dimensions();
    if w == 0 || h == 0 {
        // The gif crate decodes a 0-pixel-wide screen into an empty "image" (found by the
        // `image_gif` fuzz target); an image without pixels is a broken file, in any format.
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("{format} image of {w}x{h} pixels: a side of zero"),
        ));
    }
    let (channels, bit_depth) = channels_and_depth(dec.color_type());
    let orientation = match orientation_from_markers {
        Some(o) => o,
        None => dec
            .orientation()
            .ok()
            .and_then(|o| Orientation::from_exif(u16::from(o.to_exif())))
            .unwrap_or_default(),
    };
    let info = ImageInfo {
        format,
        width: w as usize,
        height: h as usize,
        channels,
        bit_depth,
        orientation,
    };
    Ok((Box::new(dec), info))
}

/// Rejects a PNG whose IDAT data could not inflate to the claimed size
/// (deflate expands at most 1032:1), before allocating for it, and one with a palette (PLTE)
/// that is not a whole number of RGB entries (PNG spec 11.2.3: an error), which makes png 0.18.1
/// panic (image-rs/image-png#694; found by the `image_rs` fuzz target).
///
/// # Errors
/// [`ErrorKind::Truncated`] naming the claimed size; [`ErrorKind::Corrupt`] for the palette.
fn check_png_plausible(bytes: &[u8], info: &ImageInfo) -> Result<()> {
    let (Some(&depth), Some(&color)) = (bytes.get(24), bytes.get(25)) else {
        return Err(Error::new(ErrorKind::Truncated, "PNG header is cut short"));
    };
    let samples: u64 = match color {
        0 | 3 => 1,
        4 => 2,
        2 => 3,
        _ => 4,
    };
    let row_bytes = (info.width as u64 * samples * u64::from(depth)).div_ceil(8) + 1;
    let raw = row_bytes.saturating_mul(info.height as u64);
    // Walk the chunks, summing IDAT lengths.
    let (mut pos, mut idat) = (8usize, 0u64);
    while let Some(len) = bytes
        .get(pos..pos + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    {
        match bytes.get(pos + 4..pos + 8) {
            Some(b"IDAT") => idat += u64::from(len),
            Some(b"PLTE") if len == 0 || len % 3 != 0 || len > 768 => {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!("PNG palette (PLTE) of {len} bytes is not 1 to 256 RGB entries"),
                ))
            }
            _ => {}
        }
        pos = pos.saturating_add(12).saturating_add(len as usize);
    }
    if raw > idat.saturating_mul(1032).saturating_add(1024) {
        return Err(Error::new(
            ErrorKind::Truncated,
            format!(
                "header claims {}x{} but only {idat} bytes of image data follow (inflating to at most {} of the {raw} bytes needed)",
                info.width,
                info.height,
                idat.saturating_mul(1032)
            ),
        ));
    }
    Ok(())
}

impl ImageRsDecoder {
    fn decode_image(bytes: &[u8], opts: &DecodeOptions) -> Result<(Image, ImageInfo)> {
        let (mut dec, info) = open(bytes, Some(opts))?;
        let shape = opts.output_shape(&info)?;
        // Header passed our limits; still bound image-rs's internal allocations.
        let mut limits = image::Limits::default();
        limits.max_alloc = Some(opts.limits.max_bytes.saturating_mul(2));
        dec.set_limits(limits).map_err(map_err)?;
        match info.format {
            ImageFormat::Png => check_png_plausible(bytes, &info)?,
            ImageFormat::Jpeg => {
                jpeg_markers::check_plausible_size(bytes, &jpeg_markers::parse_header(bytes)?)?
            }
            _ => {}
        }
        let color_type = dec.color_type();
        let total = usize::try_from(dec.total_bytes())
            .map_err(|_| Error::new(ErrorKind::LimitExceeded, "decoded size overflows usize"))?;
        let mut native = vec![0u8; total];
        dec.read_image_boxed(&mut native).map_err(map_err)?;
        let (c, n) = (info.channels, info.width * info.height);
        let data = match color_type {
            ColorType::L8 | ColorType::La8 | ColorType::Rgb8 | ColorType::Rgba8 => {
                let mut out = vec![0u8; n * shape.channels];
                color::convert_u8(&native, c, &mut out, shape.channels);
                PixelData::U8(out)
            }
            ColorType::L16 | ColorType::La16 | ColorType::Rgb16 | ColorType::Rgba16 => {
                let wide: Vec<u16> = native
                    .chunks_exact(2)
                    .map(|b| u16::from_ne_bytes([b[0], b[1]]))
                    .collect();
                if shape.bytes_per_sample == 2 {
                    PixelData::U16(wide)
                } else {
                    let narrow: Vec<u8> = wide.iter().map(|&v| color::u16_to_u8(v)).collect();
                    let mut out = vec![0u8; n * shape.channels];
                    color::convert_u8(&narrow, c, &mut out, shape.channels);
                    PixelData::U8(out)
                }
            }
            other => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!("{other:?} pixels"),
                ));
            }
        };
        let mut img = Image {
            data,
            width: info.width,
            height: info.height,
            channels: shape.channels,
            orientation: info.orientation,
        };
        if img.data.len() != n * shape.channels {
            return Err(Error::new(ErrorKind::Corrupt, "decoded size mismatch"));
        }
        if !opts.keep_orientation {
            img = super::orient(img);
        }
        Ok((img, info))
    }
}

impl Decoder for ImageRsDecoder {
    fn name(&self) -> &str {
        "image-rs"
    }

    fn matches(&self, bytes: &[u8]) -> bool {
        image_format(super::sniff(bytes)).is_some()
    }

    fn probe(&self, bytes: &[u8]) -> Result<ImageInfo> {
        open(bytes, None).map(|(_, info)| info)
    }

    fn decode_into(&self, bytes: &[u8], opts: &DecodeOptions, out: &mut [u8]) -> Result<ImageInfo> {
        let info = self.probe(bytes)?;
        let shape = opts.output_shape(&info)?;
        check_out_len(out, &shape)?;
        let (img, info) = Self::decode_image(bytes, opts)?;
        match &img.data {
            PixelData::U8(v) => out[..v.len()].copy_from_slice(v.as_slice()),
            PixelData::U16(v) => {
                for (d, s) in out.chunks_exact_mut(2).zip(v) {
                    d.copy_from_slice(&s.to_ne_bytes());
                }
            }
        }
        Ok(info)
    }

    fn decode(&self, bytes: &[u8], opts: &DecodeOptions) -> Result<Image> {
        Self::decode_image(bytes, opts).map(|(img, _)| img)
    }
}
