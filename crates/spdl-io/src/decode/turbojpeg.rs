//! libjpeg-turbo backend (feature `decode-turbojpeg`): baseline, progressive,
//! restart markers, arithmetic coding, grayscale, CMYK/YCCK, DCT-domain
//! cropping. Talks to the TurboJPEG 3 API through `turbojpeg::raw` because
//! the safe wrapper exposes neither stop-on-warning nor cropping regions.

use std::ffi::CStr;

use turbojpeg::raw;

use super::jpeg_markers::{self, JpegHeader};
use super::{check_out_len, color, ColorMode, DecodeOptions, Decoder, ImageFormat, Region, Scaled};
use super::{Image, ImageInfo};
use crate::error::{Error, ErrorKind, Result};

/// JPEG decoder on libjpeg-turbo 3 (vendored, statically linked).
///
/// Strict by default: libjpeg-turbo only *warns* about a truncated file and
/// fills the rest with gray, so this decoder sets `TJPARAM_STOPONWARNING`
/// and also requires the EOI marker; a file missing only its EOI is therefore
/// rejected as [`ErrorKind::Truncated`] unless [`DecodeOptions::lenient`] is
/// set, which accepts whatever libjpeg-turbo recovers (like djpeg without
/// `-strict`).
///
/// CMYK/YCCK files are decoded to CMYK by libjpeg-turbo, un-inverted when an
/// Adobe APP14 marker says they were stored inverted, then converted as
/// Pillow does: `R = 255 - min(255, C + K)` (no ICC profile).
#[derive(Debug, Clone, Copy, Default)]
pub struct TurboJpegDecoder {
    _private: (),
}

impl TurboJpegDecoder {
    /// A decoder; each call creates its own libjpeg-turbo handle, so one
    /// value can be shared across threads.
    pub fn new() -> Self {
        Self::default()
    }
}

/// An owned `tjhandle`.
struct Handle(raw::tjhandle);

impl Handle {
    fn new() -> Result<Self> {
        // SAFETY: tj3Init has no preconditions; null is checked below.
        let ptr = unsafe { raw::tj3Init(raw::TJINIT_TJINIT_DECOMPRESS as CInt) };
        if ptr.is_null() {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "libjpeg-turbo: cannot create a decompressor",
            ));
        }
        Ok(Handle(ptr))
    }

    fn set(&self, param: raw::TJPARAM, value: CInt) -> Result<()> {
        // SAFETY: self.0 is a live handle.
        if unsafe { raw::tj3Set(self.0, param as CInt, value) } != 0 {
            return Err(self.error());
        }
        Ok(())
    }

    fn get(&self, param: raw::TJPARAM) -> CInt {
        // SAFETY: self.0 is a live handle.
        unsafe { raw::tj3Get(self.0, param as CInt) }
    }

    fn is_warning(&self) -> bool {
        // SAFETY: self.0 is a live handle.
        unsafe { raw::tj3GetErrorCode(self.0) == raw::TJERR_TJERR_WARNING as CInt }
    }

    /// The last libjpeg-turbo message as an [`Error`]: "premature end" messages
    /// are [`ErrorKind::Truncated`], the rest [`ErrorKind::Corrupt`].
    fn error(&self) -> Error {
        // SAFETY: tj3GetErrorStr returns a NUL-terminated static or per-handle buffer.
        let msg = unsafe { CStr::from_ptr(raw::tj3GetErrorStr(self.0)) }
            .to_string_lossy()
            .into_owned();
        let lower = msg.to_ascii_lowercase();
        let kind = if lower.contains("premature end") {
            ErrorKind::Truncated
        } else if lower.contains("unsupported") || lower.contains("not supported") {
            ErrorKind::Unsupported
        } else {
            ErrorKind::Corrupt
        };
        Error::new(kind, format!("libjpeg-turbo: {msg}"))
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: self.0 came from tj3Init and is destroyed once.
        unsafe { raw::tj3Destroy(self.0) }
    }
}

type CInt = std::os::raw::c_int;

/// The TurboJPEG pixel format to ask for, and its channel count.
fn pixel_format(components: usize, mode: ColorMode) -> (raw::TJPF, usize) {
    match (components, mode) {
        (4, _) => (raw::TJPF_TJPF_CMYK, 4),
        (_, ColorMode::Gray) | (1, ColorMode::Unchanged) => (raw::TJPF_TJPF_GRAY, 1),
        (_, ColorMode::Rgba) => (raw::TJPF_TJPF_RGBA, 4),
        _ => (raw::TJPF_TJPF_RGB, 3),
    }
}

/// Pillow's CMYK -> RGB: `R = 255 - min(255, C + K)`, on un-inverted ink values.
fn cmyk_to(src: &[u8], adobe_inverted: bool, mode: ColorMode, dst: &mut [u8]) {
    let ink = |v: u8| if adobe_inverted { 255 - v } else { v };
    let out_c = color::out_channels(mode, 4);
    for (s, d) in src.chunks_exact(4).zip(dst.chunks_exact_mut(out_c)) {
        let [c, m, y, k] = [ink(s[0]), ink(s[1]), ink(s[2]), ink(s[3])];
        let ch = |x: u8| 255 - (u16::from(x) + u16::from(k)).min(255) as u8;
        let rgb = [ch(c), ch(m), ch(y)];
        match d {
            [l] => {
                let mut tmp = [0u8; 1];
                color::convert_u8(&rgb, 3, &mut tmp, 1);
                *l = tmp[0];
            }
            [r, g, b] => [*r, *g, *b] = rgb,
            [r, g, b, a] if mode == ColorMode::Rgba => {
                [*r, *g, *b, *a] = [rgb[0], rgb[1], rgb[2], 255]
            }
            [dc, dm, dy, dk] => [*dc, *dm, *dy, *dk] = [c, m, y, k],
            _ => {}
        }
    }
}

impl TurboJpegDecoder {
    fn header(bytes: &[u8]) -> Result<(JpegHeader, ImageInfo)> {
        let h = jpeg_markers::parse_header(bytes)?;
        if h.precision != 8 {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("{}-bit JPEG samples (only 8-bit is decoded)", h.precision),
            ));
        }
        if !matches!(h.components, 1 | 3 | 4) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("JPEG with {} components", h.components),
            ));
        }
        let info = ImageInfo {
            format: ImageFormat::Jpeg,
            width: h.width,
            height: h.height,
            channels: h.components,
            bit_depth: 8,
            orientation: h.orientation,
        };
        Ok((h, info))
    }

    /// Decompresses the stored (un-oriented) image, or the stored-coordinate
    /// `crop`, into `dst` with pixel format `pf` (`channels` per pixel).
    /// `eighths` is the DCT scale `M/8` (8: full size). Returns the `(columns, rows)` to trim
    /// from the left/top and the width written.
    fn decompress(
        bytes: &[u8],
        header: &JpegHeader,
        opts: &DecodeOptions,
        (pf, channels): (raw::TJPF, usize),
        crop: Option<Region>,
        eighths: usize,
        dst: &mut Vec<u8>,
    ) -> Result<((usize, usize), usize)> {
        if !opts.lenient {
            jpeg_markers::check_complete(bytes, header.first_scan)?;
        }
        let handle = Handle::new()?;
        handle.set(
            raw::TJPARAM_TJPARAM_STOPONWARNING,
            CInt::from(!opts.lenient),
        )?;
        // SAFETY: bytes is a live slice of the given length.
        if unsafe { raw::tj3DecompressHeader(handle.0, bytes.as_ptr(), bytes.len() as raw::size_t) }
            != 0
        {
            return Err(handle.error());
        }
        let (w, h) = (
            handle.get(raw::TJPARAM_TJPARAM_JPEGWIDTH),
            handle.get(raw::TJPARAM_TJPARAM_JPEGHEIGHT),
        );
        if (usize::try_from(w), usize::try_from(h)) != (Ok(header.width), Ok(header.height)) {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "libjpeg-turbo disagrees about the image size",
            ));
        }
        // DCT-domain downscaling: the IDCT itself produces M/8 of the pixels. The image
        // (and the cropping region below) is then `ceil(size * M / 8)` in every coordinate.
        let scaled = |v: usize| scaled_size(v, eighths);
        if eighths != 8 {
            // TurboJPEG only accepts its factors in lowest terms (3/4, not 6/8).
            let g = gcd(eighths, 8);
            let factor = raw::tjscalingfactor {
                num: (eighths / g) as CInt,
                denom: (8 / g) as CInt,
            };
            // SAFETY: live handle; libjpeg-turbo validates the factor.
            if unsafe { raw::tj3SetScalingFactor(handle.0, factor) } != 0 {
                return Err(handle.error());
            }
        }
        let (full_w, full_h) = (scaled(header.width), scaled(header.height));
        let (mut trim, mut out_w, mut out_h) = ((0, 0), full_w, full_h);
        if let Some(r) = crop {
            // The left edge must sit on an iMCU boundary. Every edge also
            // gets one iMCU of margin, because smooth chroma upsampling treats
            // the region's border as the image border; the margin is trimmed.
            let (mcu_w, mcu_h) = match handle.get(raw::TJPARAM_TJPARAM_SUBSAMP) {
                0 | 3 => (8, 8), // 4:4:4, gray
                1 => (16, 8),    // 4:2:2
                2 => (16, 16),   // 4:2:0
                4 => (8, 16),    // 4:4:0
                5 => (32, 8),    // 4:1:1
                6 => (8, 32),    // 4:4:1
                _ => (0, 0),     // unknown subsampling: decode all, crop after
            };
            // The iMCU in decoded (scaled) pixels.
            let (mcu_w, mcu_h) = (scaled(mcu_w), scaled(mcu_h));
            if let Some(col) = r.x.checked_div(mcu_w) {
                let x0 = (col * mcu_w).saturating_sub(mcu_w);
                let y0 = (r.y / mcu_h * mcu_h).saturating_sub(mcu_h);
                trim = (r.x - x0, r.y - y0);
                out_w = (r.x + r.width + mcu_w).min(full_w) - x0;
                out_h = (r.y + r.height + mcu_h).min(full_h) - y0;
                let region = raw::tjregion {
                    x: x0 as CInt,
                    y: y0 as CInt,
                    w: out_w as CInt,
                    h: out_h as CInt,
                };
                // SAFETY: live handle; libjpeg-turbo validates the region.
                if unsafe { raw::tj3SetCroppingRegion(handle.0, region) } != 0 {
                    return Err(handle.error());
                }
            } else {
                trim = (r.x, r.y);
            }
        }
        let len = out_w * out_h * channels;
        // vec! of zeros maps fresh pages lazily (calloc), so memory is only
        // touched as libjpeg-turbo writes rows.
        *dst = vec![0u8; len];
        // SAFETY: dst holds out_w * out_h * channels bytes, which is what
        // libjpeg-turbo writes for this pixel format and region (pitch 0 = packed).
        let rc = unsafe {
            raw::tj3Decompress8(
                handle.0,
                bytes.as_ptr(),
                bytes.len() as raw::size_t,
                dst.as_mut_ptr(),
                0,
                pf,
            )
        };
        if rc != 0 && !(opts.lenient && handle.is_warning()) {
            return Err(handle.error());
        }
        Ok((trim, out_w))
    }

    /// Decodes `region` (stored coordinates at the `eighths / 8` scale; whole image when
    /// `None`) and converts/orients into a fresh image.
    fn decode_stored(
        bytes: &[u8],
        opts: &DecodeOptions,
        region: Option<Region>,
        eighths: usize,
    ) -> Result<Image> {
        let (header, info) = Self::header(bytes)?;
        let shape = opts.output_shape(&info)?;
        let (pf, pf_c) = pixel_format(header.components, opts.color);
        jpeg_markers::check_plausible_size(bytes, &header)?;
        let mut raw_buf = Vec::new();
        let (trim, dec_w) = Self::decompress(
            bytes,
            &header,
            opts,
            (pf, pf_c),
            region,
            eighths,
            &mut raw_buf,
        )?;
        let full = (
            scaled_size(info.width, eighths),
            scaled_size(info.height, eighths),
        );
        let (w, h) = region.map_or(full, |r| (r.width, r.height));
        // Trim the iMCU-alignment margins in place: row r moves to r's trimmed slot, which is
        // never after it, so no row is overwritten before it is moved. The bottom margin
        // (rows after the window) is cut off by the truncation.
        let (row, keep) = (dec_w * pf_c, w * pf_c);
        if raw_buf.len() < (trim.1 + h) * row || (trim.0 + w) * pf_c > row {
            return Err(Error::new(ErrorKind::Corrupt, "decoded size mismatch"));
        }
        if trim != (0, 0) || dec_w != w {
            for r in 0..h {
                let from = (trim.1 + r) * row + trim.0 * pf_c;
                raw_buf.copy_within(from..from + keep, r * keep);
            }
        }
        raw_buf.truncate(h * keep);
        let pixels = if header.components != 4 && pf_c == shape.channels {
            raw_buf // already the output layout: no copy
        } else {
            let mut pixels = vec![0u8; w * h * shape.channels];
            if header.components == 4 {
                cmyk_to(&raw_buf, header.adobe, opts.color, &mut pixels);
            } else {
                color::convert_u8(&raw_buf, pf_c, &mut pixels, shape.channels);
            }
            pixels
        };
        let mut img = Image::from_u8(pixels, w, h, shape.channels)
            .ok_or_else(|| Error::new(ErrorKind::Corrupt, "decoded size mismatch"))?;
        img.orientation = info.orientation;
        if !opts.keep_orientation {
            img = super::orient(img);
        }
        Ok(img)
    }
}

impl Decoder for TurboJpegDecoder {
    fn name(&self) -> &str {
        "turbojpeg"
    }

    fn matches(&self, bytes: &[u8]) -> bool {
        super::sniff(bytes) == ImageFormat::Jpeg
    }

    fn probe(&self, bytes: &[u8]) -> Result<ImageInfo> {
        Self::header(bytes).map(|(_, info)| info)
    }

    fn decode_into(&self, bytes: &[u8], opts: &DecodeOptions, out: &mut [u8]) -> Result<ImageInfo> {
        let (_, info) = Self::header(bytes)?;
        let shape = opts.output_shape(&info)?;
        check_out_len(out, &shape)?;
        let img = Self::decode_stored(bytes, opts, None, 8)?;
        let src = img.as_u8().unwrap_or_default();
        out[..src.len()].copy_from_slice(src);
        Ok(info)
    }

    fn supports_region(&self) -> bool {
        true
    }

    fn decode_region(&self, bytes: &[u8], opts: &DecodeOptions, region: Region) -> Result<Image> {
        let info = self.probe(bytes)?;
        if !opts.keep_orientation && info.orientation != super::Orientation::Normal {
            // Region is in displayed coordinates; keep it simple and crop after.
            let full = self.decode(bytes, opts)?;
            return super::crop(&full, region);
        }
        region.check_within(info.width, info.height)?;
        Self::decode_stored(bytes, opts, Some(region), 8)
    }

    fn decode(&self, bytes: &[u8], opts: &DecodeOptions) -> Result<Image> {
        Self::decode_stored(bytes, opts, None, 8)
    }

    fn scale_denominators(&self) -> &[usize] {
        &[8, 4, 2]
    }

    fn decode_scaled(
        &self,
        bytes: &[u8],
        opts: &DecodeOptions,
        region: Region,
        denom: usize,
    ) -> Result<Scaled> {
        if !matches!(denom, 1 | 2 | 4 | 8) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("scale 1/{denom}: libjpeg-turbo scales by 1/2, 1/4 or 1/8"),
            ));
        }
        self.decode_scaled_eighths(bytes, opts, region, 8 / denom)
    }

    /// 1/8, 2/8, 3/8 and 4/8 only: libjpeg-turbo's 5x5 to 7x7 IDCTs (and the 10x10 to 14x14
    /// ones it uses to upsample chroma at those scales) are plain C, and decoding at 5/8, 6/8
    /// or 7/8 took 1.2x, 1.6x and 1.7x the time of a full decode on the ImageNet-like corpus
    /// (3/8 and 4/8: 0.8x, 2/8: 0.7x, 1/8: 0.6x). [`Decoder::decode_scaled_eighths`] still
    /// decodes at any `M/8`, `M` in `1..=8`.
    fn scale_eighths(&self) -> &[usize] {
        &[1, 2, 3, 4]
    }

    fn decode_scaled_eighths(
        &self,
        bytes: &[u8],
        opts: &DecodeOptions,
        region: Region,
        eighths: usize,
    ) -> Result<Scaled> {
        let info = self.probe(bytes)?;
        if !(1..=8).contains(&eighths) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("scale {eighths}/8: libjpeg-turbo downscales by M/8 with M in 1..=8"),
            ));
        }
        if !opts.keep_orientation && info.orientation != super::Orientation::Normal {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "scaled decoding of an EXIF-rotated image: decode it whole",
            ));
        }
        region.check_within(info.width, info.height)?;
        let (full_width, full_height) = (
            scaled_size(info.width, eighths),
            scaled_size(info.height, eighths),
        );
        // Scaled pixel i covers full pixels [i * 8 / M, (i + 1) * 8 / M).
        let (x, y) = (region.x * eighths / 8, region.y * eighths / 8);
        let x1 = scaled_size(region.x + region.width, eighths).min(full_width);
        let y1 = scaled_size(region.y + region.height, eighths).min(full_height);
        let scaled = Region {
            x,
            y,
            width: x1 - x,
            height: y1 - y,
        };
        let whole = (scaled.width, scaled.height) == (full_width, full_height);
        let image = Self::decode_stored(bytes, opts, (!whole).then_some(scaled), eighths)?;
        Ok(Scaled {
            image,
            x,
            y,
            full_width,
            full_height,
        })
    }
}

/// `ceil(v * eighths / 8)`: a size at libjpeg-turbo's `M/8` DCT scale.
fn scaled_size(v: usize, eighths: usize) -> usize {
    (v * eighths).div_ceil(8)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
