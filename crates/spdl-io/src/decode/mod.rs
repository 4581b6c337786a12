//! Decoding: the [`Decoder`] trait (probe the header, then decode into a
//! buffer the caller provides), its options, and the built-in backends.
//!
//! Mirrors image-rs's two-phase `ImageDecoder` (`dimensions` then
//! `read_image(&mut [u8])`): a pipeline probes, checks [`Limits`], then lets
//! the decoder write straight into a batch slot.

// Shared helpers serve the built-in decoders; a build with none of them (a registry for
// third-party decoders only) leaves them unused.
#![cfg_attr(
    not(any(feature = "decode-turbojpeg", feature = "image-rs")),
    allow(dead_code)
)]

pub mod color;
mod format;
mod image;
#[cfg(any(feature = "decode-turbojpeg", feature = "image-rs"))]
mod jpeg_markers;
mod limits;
mod orientation;
pub mod plugin;
mod registry;

#[cfg(feature = "image-rs")]
mod image_rs;
#[cfg(feature = "decode-turbojpeg")]
mod turbojpeg;

pub use format::{sniff, ImageFormat};
pub use image::{Image, ImageInfo, PixelData};
#[cfg(feature = "image-rs")]
pub use image_rs::ImageRsDecoder;
pub use limits::Limits;
pub use orientation::Orientation;
pub use registry::{register_global, Registry};
#[cfg(feature = "decode-turbojpeg")]
pub use turbojpeg::TurboJpegDecoder;

/// Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`, never on in a build for
/// users): internal parsers that have no public door of their own.
#[cfg(all(
    feature = "fuzzing",
    any(feature = "decode-turbojpeg", feature = "image-rs")
))]
#[doc(hidden)]
pub mod fuzzing {
    /// Runs the JPEG marker walker (`parse_header`, `check_plausible_size`, `check_complete`)
    /// over `bytes`, and panics when a header it accepts breaks an invariant the decoders rely
    /// on (a zero size, no component, a first scan outside the data). Returns whether the
    /// header parsed.
    pub fn jpeg_markers(bytes: &[u8]) -> bool {
        use super::jpeg_markers::{check_complete, check_plausible_size, parse_header};
        let Ok(header) = parse_header(bytes) else {
            return false;
        };
        assert!(header.width > 0 && header.height > 0, "{header:?}");
        assert!(header.components > 0, "{header:?}");
        assert!(header.first_scan < bytes.len(), "{header:?}");
        let _ = check_plausible_size(bytes, &header);
        let _ = check_complete(bytes, header.first_scan);
        true
    }
}

pub(crate) use format::describe_unknown;
pub(crate) use orientation::apply as apply_orientation;

use crate::error::{Error, ErrorKind, Result};

/// Which channels the decoder outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ColorMode {
    /// 3 channels, 8-bit (the default for training batches). Gray is
    /// replicated, alpha is dropped (no compositing, like Pillow's
    /// `convert("RGB")`), CMYK is converted as Pillow does, 16-bit is scaled
    /// with round(v / 257).
    #[default]
    Rgb,
    /// 1 channel, 8-bit: ITU-R 601-2 luma `0.299 R + 0.587 G + 0.114 B` (Pillow's `L`).
    Gray,
    /// 4 channels, 8-bit; alpha 255 where the source has none, palette tRNS expanded.
    Rgba,
    /// The source's own channels ([`ImageInfo::channels`]) and depth: 16-bit
    /// PNG/TIFF stay 16-bit, CMYK JPEG stays CMYK (un-inverted, C = 255 is full ink).
    Unchanged,
}

/// Options shared by every decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodeOptions {
    /// Output channels and depth.
    pub color: ColorMode,
    /// Keep the stored orientation instead of applying EXIF orientation
    /// (default `false`: pixels come out as a viewer shows them, like Pillow's
    /// `ImageOps.exif_transpose`). When kept, [`Image::orientation`] reports it.
    pub keep_orientation: bool,
    /// Accept damaged files that the library can recover from: JPEGs missing
    /// their EOI marker or cut short (the rest filled with gray, like Pillow's
    /// `LOAD_TRUNCATED_IMAGES`). Default `false`: any libjpeg-turbo warning or
    /// a missing EOI is an error ([`ErrorKind::Truncated`] / [`ErrorKind::Corrupt`]).
    pub lenient: bool,
    /// Size limits checked on the header before allocating.
    pub limits: Limits,
}

/// The layout a decode with given options writes: `[height, width, channels]`
/// samples of `bytes_per_sample` bytes (native-endian for 16-bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputShape {
    /// Width in pixels (after orientation).
    pub width: usize,
    /// Height in pixels (after orientation).
    pub height: usize,
    /// Channels.
    pub channels: usize,
    /// 1 or 2.
    pub bytes_per_sample: usize,
}

impl OutputShape {
    /// Bytes the output buffer needs.
    pub fn len_bytes(&self) -> usize {
        self.width * self.height * self.channels * self.bytes_per_sample
    }
}

impl DecodeOptions {
    /// The output layout for an image with header `info`, after checking the header (every
    /// decoder's, a run-time plugin's included) and [`DecodeOptions::limits`] against the
    /// claimed size.
    ///
    /// # Errors
    /// [`ErrorKind::Corrupt`] for a header no image has: a width or height of 0, channels
    /// outside 1..=4, a bit depth other than 8 or 16. [`ErrorKind::LimitExceeded`] naming the
    /// claimed dimensions.
    pub fn output_shape(&self, info: &ImageInfo) -> Result<OutputShape> {
        check_header(info)?;
        let channels = color::out_channels(self.color, info.channels);
        let bytes_per_sample = if self.color == ColorMode::Unchanged && info.bit_depth > 8 {
            2
        } else {
            1
        };
        self.limits
            .check(info.width, info.height, channels, bytes_per_sample)?;
        let (width, height) = if self.keep_orientation {
            (info.width, info.height)
        } else {
            info.display_size()
        };
        Ok(OutputShape {
            width,
            height,
            channels,
            bytes_per_sample,
        })
    }
}

/// Refuses a header that describes no image, before any size is multiplied or allocated.
pub(crate) fn check_header(info: &ImageInfo) -> Result<()> {
    let problem = if info.width == 0 || info.height == 0 {
        format!("an empty image ({}x{})", info.width, info.height)
    } else if !(1..=4).contains(&info.channels) {
        format!("{} channels (an image has 1 to 4)", info.channels)
    } else if !matches!(info.bit_depth, 8 | 16) {
        format!("a bit depth of {} (8 or 16 are decoded)", info.bit_depth)
    } else {
        return Ok(());
    };
    Err(Error::new(
        ErrorKind::Corrupt,
        format!("the {} header describes {problem}", info.format),
    ))
}

/// A rectangle in pixels, in displayed (oriented) coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Region {
    /// Left column.
    pub x: usize,
    /// Top row.
    pub y: usize,
    /// Width.
    pub width: usize,
    /// Height.
    pub height: usize,
}

impl Region {
    /// Checks that the region is non-empty and inside a `width x height` image.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] otherwise.
    pub fn check_within(&self, width: usize, height: usize) -> Result<()> {
        let fits = self.width > 0
            && self.height > 0
            && self.x.checked_add(self.width).is_some_and(|r| r <= width)
            && self.y.checked_add(self.height).is_some_and(|b| b <= height);
        if fits {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("region {self:?} is empty or outside the {width}x{height} image"),
            ))
        }
    }
}

/// An image decoder backend. Built-in ones and third-party ones register in a
/// [`Registry`] the same way and are chosen by [`Decoder::matches`] on the
/// leading bytes, never by file extension.
///
/// Errors carry no sample key; the [`Registry`] attaches it.
///
/// A decoder of a made-up format, `GRAY` then a width and height byte and the gray samples:
///
/// ```
/// use std::sync::Arc;
/// use spdl_io::decode::{check_out_len, color};
/// use spdl_io::{DecodeOptions, Decoder, Error, ErrorKind, ImageFormat, ImageInfo};
/// use spdl_io::{Orientation, Registry, Result};
///
/// struct Gray;
///
/// impl Decoder for Gray {
///     fn name(&self) -> &str { "gray" }
///     fn matches(&self, bytes: &[u8]) -> bool { bytes.starts_with(b"GRAY") }
///     fn probe(&self, bytes: &[u8]) -> Result<ImageInfo> {
///         let size = bytes.get(4..6).ok_or(Error::new(ErrorKind::Truncated, "no size"))?;
///         Ok(ImageInfo {
///             format: ImageFormat::Other("GRAY"),
///             width: usize::from(size[0]),
///             height: usize::from(size[1]),
///             channels: 1,
///             bit_depth: 8,
///             orientation: Orientation::Normal,
///         })
///     }
///     fn decode_into(&self, bytes: &[u8], opts: &DecodeOptions, out: &mut [u8]) -> Result<ImageInfo> {
///         let info = self.probe(bytes)?; // the header first: limits before any pixel
///         let shape = opts.output_shape(&info)?;
///         check_out_len(out, &shape)?;
///         let gray = bytes.get(6..6 + info.width * info.height)
///             .ok_or(Error::new(ErrorKind::Truncated, "samples cut short"))?;
///         color::convert_u8(gray, 1, out, shape.channels); // to the channels asked for
///         Ok(info)
///     }
/// }
///
/// let mut registry = Registry::with_defaults();
/// registry.register(Arc::new(Gray));
/// let image = registry.decode("two.gray", b"GRAY\x02\x01\x10\x20", &DecodeOptions::default())?;
/// assert_eq!(image.shape(), [1, 2, 3]); // RGB by default
/// assert_eq!(image.as_u8(), Some(&[16, 16, 16, 32, 32, 32][..]));
/// # Ok::<(), Error>(())
/// ```
pub trait Decoder: Send + Sync {
    /// Short name for logs, e.g. `"turbojpeg"`.
    fn name(&self) -> &str;

    /// True when this decoder handles `bytes` (magic-byte check only).
    fn matches(&self, bytes: &[u8]) -> bool;

    /// File extensions this format usually has, lower case without the dot (e.g. `["ppm",
    /// "pgm"]`). Used only to *list* files (the `spdl` command lists the extensions of every
    /// registered decoder); the decoder is still chosen by content. Default: none.
    fn extensions(&self) -> Vec<String> {
        Vec::new()
    }

    /// Reads the header only: size, channels, depth, orientation. Allocates
    /// no pixel memory.
    ///
    /// # Errors
    /// [`ErrorKind::Truncated`] / [`ErrorKind::Corrupt`] for a bad header,
    /// [`ErrorKind::Unsupported`] for a feature this backend lacks.
    fn probe(&self, bytes: &[u8]) -> Result<ImageInfo>;

    /// Decodes into `out`, which must hold at least
    /// [`DecodeOptions::output_shape`]`.len_bytes()` bytes laid out as
    /// `[H, W, C]`. Returns the probed header.
    ///
    /// # Errors
    /// [`ErrorKind::LimitExceeded`] before any work when the header is too
    /// big, [`ErrorKind::InvalidArgument`] when `out` is too small, and the
    /// probe/decode errors (truncated, corrupt, unsupported).
    fn decode_into(&self, bytes: &[u8], opts: &DecodeOptions, out: &mut [u8]) -> Result<ImageInfo>;

    /// True when [`Decoder::decode_region`] decodes less than the whole image.
    fn supports_region(&self) -> bool {
        false
    }

    /// Decodes only `region` (displayed coordinates). The default decodes
    /// everything and crops; backends that can skip work override it.
    ///
    /// # Errors
    /// As [`Decoder::decode_into`], plus [`ErrorKind::InvalidArgument`] for a
    /// region outside the image.
    fn decode_region(&self, bytes: &[u8], opts: &DecodeOptions, region: Region) -> Result<Image> {
        let full = self.decode(bytes, opts)?;
        crop(&full, region)
    }

    /// The downscale factors `1/d` this decoder applies while decoding, largest `d` first
    /// (libjpeg-turbo's DCT scaling: `[8, 4, 2]`); empty (the default) when it cannot.
    fn scale_denominators(&self) -> &[usize] {
        &[]
    }

    /// Decodes `region` (displayed coordinates, full resolution) at `1/denom` of the size,
    /// `denom` one of [`Decoder::scale_denominators`]: the image holds the region's pixels of
    /// the whole image scaled to `ceil(width / denom) x ceil(height / denom)` (see [`Scaled`]).
    /// Decoding fewer pixels is faster than decoding all and resizing: the loader uses it when
    /// the transform shrinks the region at least `denom` times.
    ///
    /// # Errors
    /// [`ErrorKind::Unsupported`] by default; otherwise as [`Decoder::decode_region`], and
    /// [`ErrorKind::InvalidArgument`] for a factor or an orientation the decoder cannot scale.
    fn decode_scaled(
        &self,
        bytes: &[u8],
        opts: &DecodeOptions,
        region: Region,
        denom: usize,
    ) -> Result<Scaled> {
        let _ = (bytes, opts, region);
        Err(Error::new(
            ErrorKind::Unsupported,
            format!("{} cannot decode at scale 1/{denom}", self.name()),
        ))
    }

    /// The finer DCT scales `M/8` (`M` ascending, each below 8) this decoder can decode at
    /// through [`Decoder::decode_scaled_eighths`] and the loader may choose (libjpeg-turbo: 1 to
    /// 4, those faster than a full decode); empty (the default)
    /// when it has none beyond [`Decoder::scale_denominators`].
    fn scale_eighths(&self) -> &[usize] {
        &[]
    }

    /// Decodes `region` (displayed coordinates, full resolution) at `eighths / 8` of the size,
    /// `eighths` one of [`Decoder::scale_eighths`] (or 8 / a denominator of
    /// [`Decoder::scale_denominators`]): the image holds the region's pixels of the whole image
    /// scaled to `ceil(width * eighths / 8) x ceil(height * eighths / 8)`, scaled pixel `i`
    /// covering full pixels `[i * 8 / eighths, (i + 1) * 8 / eighths)` (see [`Scaled`]).
    ///
    /// # Errors
    /// As [`Decoder::decode_scaled`]; [`ErrorKind::Unsupported`] by default for a factor that
    /// is not `1/d` with `d` one of [`Decoder::scale_denominators`].
    fn decode_scaled_eighths(
        &self,
        bytes: &[u8],
        opts: &DecodeOptions,
        region: Region,
        eighths: usize,
    ) -> Result<Scaled> {
        match eighths {
            1 | 2 | 4 => self.decode_scaled(bytes, opts, region, 8 / eighths),
            _ => Err(Error::new(
                ErrorKind::Unsupported,
                format!("{} cannot decode at scale {eighths}/8", self.name()),
            )),
        }
    }

    /// Probes, checks limits, allocates exactly once and decodes.
    ///
    /// # Errors
    /// As [`Decoder::decode_into`].
    fn decode(&self, bytes: &[u8], opts: &DecodeOptions) -> Result<Image> {
        let info = self.probe(bytes)?;
        let shape = opts.output_shape(&info)?;
        let mut buf = vec![0u8; shape.len_bytes()];
        self.decode_into(bytes, opts, &mut buf)?;
        Ok(image_from_bytes(buf, shape, &info, opts))
    }
}

/// A region decoded at a reduced scale ([`Decoder::decode_scaled`]).
#[derive(Debug, Clone)]
pub struct Scaled {
    /// The pixels, `[H, W, C]`.
    pub image: Image,
    /// Column of the image's left edge in the scaled whole image.
    pub x: usize,
    /// Row of the image's top edge in the scaled whole image.
    pub y: usize,
    /// Width of the whole image at this scale (`ceil(width / denom)`, or
    /// `ceil(width * eighths / 8)`).
    pub full_width: usize,
    /// Height of the whole image at this scale.
    pub full_height: usize,
}

/// Wraps a decoded byte buffer as an [`Image`] (16-bit samples are native-endian).
pub(crate) fn image_from_bytes(
    buf: Vec<u8>,
    shape: OutputShape,
    info: &ImageInfo,
    opts: &DecodeOptions,
) -> Image {
    let data = if shape.bytes_per_sample == 2 {
        PixelData::U16(
            buf.chunks_exact(2)
                .map(|b| u16::from_ne_bytes([b[0], b[1]]))
                .collect(),
        )
    } else {
        PixelData::U8(buf)
    };
    Image {
        data,
        width: shape.width,
        height: shape.height,
        channels: shape.channels,
        orientation: if opts.keep_orientation {
            info.orientation
        } else {
            Orientation::Normal
        },
    }
}

/// Copies `region` out of `img`.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] when the region is empty or outside the image.
pub fn crop(img: &Image, region: Region) -> Result<Image> {
    region.check_within(img.width, img.height)?;
    let c = img.channels;
    let rows = region.y..region.y + region.height;
    let cols = |row: usize| {
        let start = (row * img.width + region.x) * c;
        start..start + region.width * c
    };
    let data = match &img.data {
        PixelData::U8(v) => PixelData::U8(rows.flat_map(|r| v[cols(r)].iter().copied()).collect()),
        PixelData::U16(v) => {
            PixelData::U16(rows.flat_map(|r| v[cols(r)].iter().copied()).collect())
        }
    };
    Ok(Image {
        data,
        width: region.width,
        height: region.height,
        channels: c,
        orientation: img.orientation,
    })
}

/// Checks that a caller's output buffer holds `shape`: the first check of every
/// [`Decoder::decode_into`], built-in or plugin.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] naming both sizes when `out` is too small.
pub fn check_out_len(out: &[u8], shape: &OutputShape) -> Result<()> {
    if out.len() < shape.len_bytes() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "output buffer has {} bytes, {}x{}x{} needs {}",
                out.len(),
                shape.height,
                shape.width,
                shape.channels,
                shape.len_bytes()
            ),
        ));
    }
    Ok(())
}

/// Applies `img.orientation` to the pixels and resets it to normal.
pub(crate) fn orient(img: Image) -> Image {
    let o = img.orientation;
    if o == Orientation::Normal {
        return img;
    }
    let (w, h, c) = (img.width, img.height, img.channels);
    let data = match &img.data {
        PixelData::U8(v) => {
            let mut d = vec![0u8; v.len()];
            apply_orientation(o, v, w, h, c, &mut d);
            PixelData::U8(d)
        }
        PixelData::U16(v) => {
            let mut d = vec![0u16; v.len()];
            apply_orientation(o, v, w, h, c, &mut d);
            PixelData::U16(d)
        }
    };
    let (width, height) = if o.swaps_axes() { (h, w) } else { (w, h) };
    Image {
        data,
        width,
        height,
        channels: c,
        orientation: Orientation::Normal,
    }
}
