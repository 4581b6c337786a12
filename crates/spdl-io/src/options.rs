//! [`ImageOptions`]: how one image is decoded and transformed, the options every image entry
//! point shares (the `spdl` command's flags, the keyword arguments of `spdl_rs.io` and
//! `spdl_rs.ops`), parsed and validated in one place so that the front ends only convert.

use std::str::FromStr;

use smart_default::SmartDefault;

use crate::decode::{ColorMode, Limits};
use crate::error::{Error, ErrorKind, Result};
use crate::loader::ImageLoader;
use crate::transform::{Filter, RandomResizedCrop, Transform};

/// Which transform an [`ImageOptions`] plans. Parsed from `"resize"`, `"eval"`, `"train"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TransformKind {
    /// Squash to `width x height` (or `size x size`); no size at all keeps the decoded size.
    #[default]
    Resize,
    /// ImageNet evaluation: the shorter side to `ceil(size * 256 / 224)`, center crop `size`.
    Eval,
    /// torchvision's `RandomResizedCrop(size)` + horizontal flip, seeded per sample.
    Train,
}

/// Options of one image load: output size, transform, filter, channels, strictness, limits.
/// [`ImageOptions::loader`] checks them together and builds the [`ImageLoader`].
#[derive(Debug, Clone, PartialEq, SmartDefault)]
pub struct ImageOptions {
    /// Output width in pixels (with `height`), for [`TransformKind::Resize`]; the square
    /// transforms accept `width == height` as their size.
    pub width: Option<usize>,
    /// Output height in pixels (with `width`).
    pub height: Option<usize>,
    /// Output side of a square output (`size x size`).
    pub size: Option<usize>,
    /// The transform.
    #[default(TransformKind::Resize)]
    pub transform: TransformKind,
    /// The resampling filter.
    pub filter: Filter,
    /// Output channels.
    pub color: ColorMode,
    /// Accept damaged files the decoder can recover (see [`crate::DecodeOptions::lenient`]).
    pub lenient: bool,
    /// Seed of the train transform's random boxes.
    pub seed: u64,
    /// Decode only the transform's box when the decoder can ([`ImageLoader::region_decode`]).
    #[default(true)]
    pub region_decode: bool,
    /// Decode at a DCT scale when the output is much smaller ([`ImageLoader::scaled_decode`]).
    #[default(true)]
    pub scaled_decode: bool,
    /// Choose the DCT scale among the finer `M/8` factors, within a stated pixel tolerance of
    /// the full decode ([`ImageLoader::fine_scaled_decode`]); default `false`.
    pub fine_scaled_decode: bool,
    /// Size limits checked before allocating.
    pub limits: Limits,
}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}

/// `Some(3)` as `3`, `None` as `None`: how the Python keyword arguments read.
fn shown(v: Option<usize>) -> String {
    v.map_or_else(|| "None".into(), |v| v.to_string())
}

impl ImageOptions {
    /// The planned transform.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] naming the sizes when they do not fit the transform:
    /// `width` and `height` go together (or `size` alone) and are positive; the square
    /// transforms need `size` (or `width == height`).
    pub fn transform(&self) -> Result<Transform> {
        let (w, h, s) = (self.width, self.height, self.size);
        let filter = self.filter;
        Ok(match self.transform {
            TransformKind::Resize => match (w, h, s) {
                (None, None, None) => Transform::Identity,
                (None, None, Some(s)) if s > 0 => Transform::Resize {
                    width: s,
                    height: s,
                    filter,
                },
                (Some(w), Some(h), None) if w > 0 && h > 0 => Transform::Resize {
                    width: w,
                    height: h,
                    filter,
                },
                _ => {
                    return Err(invalid(format!(
                        "width and height must both be given (and positive) or both be None \
                         (or size alone), got width={}, height={}, size={}",
                        shown(w),
                        shown(h),
                        shown(s)
                    )))
                }
            },
            TransformKind::Eval => Transform::eval(self.square_side()?, filter),
            TransformKind::Train => {
                let mut rrc = RandomResizedCrop::new(self.square_side()?, self.seed);
                rrc.filter = filter;
                Transform::RandomResizedCrop(rrc)
            }
        })
    }

    fn square_side(&self) -> Result<usize> {
        let (w, h, s) = (self.width, self.height, self.size);
        let side = match (s, w, h) {
            (Some(s), None, None) => s,
            (None, Some(w), Some(h)) if w == h => w,
            (Some(s), Some(w), Some(h)) if w == s && h == s => s,
            _ => {
                return Err(invalid(format!(
                    "transform={:?} makes a square image: give size (or width == height), got \
                     size={}, width={}, height={}",
                    self.transform.name(),
                    shown(s),
                    shown(w),
                    shown(h)
                )))
            }
        };
        if side == 0 {
            return Err(invalid("size must be at least 1".into()));
        }
        Ok(side)
    }

    /// The loader these options describe.
    ///
    /// # Errors
    /// As [`ImageOptions::transform`].
    pub fn loader(&self) -> Result<ImageLoader> {
        let mut loader = ImageLoader::new(self.transform()?);
        loader.options.color = self.color;
        loader.options.lenient = self.lenient;
        loader.options.limits = self.limits;
        loader.region_decode = self.region_decode;
        loader.scaled_decode = self.scaled_decode;
        loader.fine_scaled_decode = self.fine_scaled_decode;
        Ok(loader)
    }
}

impl TransformKind {
    /// The name it is parsed from.
    pub fn name(self) -> &'static str {
        match self {
            TransformKind::Resize => "resize",
            TransformKind::Eval => "eval",
            TransformKind::Train => "train",
        }
    }
}

/// Parses one of `names` (case-sensitive), or says which are accepted.
fn parse<T: Copy>(what: &str, value: &str, names: &[(&str, T)], shown: &str) -> Result<T> {
    names
        .iter()
        .find(|(n, _)| *n == value)
        .map(|(_, v)| *v)
        .ok_or_else(|| invalid(format!("{what} must be one of {shown}, got {value:?}")))
}

/// `FromStr` for an option enum from its accepted names (case-sensitive); the error names the
/// option and lists `shown`, the names to document.
macro_rules! from_names {
    ($(#[$attr:meta])* $ty:ty, $what:literal, $shown:literal, {$($name:literal => $value:ident),+ $(,)?}) => {
        $(#[$attr])*
        impl FromStr for $ty {
            type Err = Error;

            fn from_str(s: &str) -> Result<Self> {
                parse($what, s, &[$(($name, <$ty>::$value)),+], $shown)
            }
        }
    };
}

from_names!(TransformKind, "transform", "'resize', 'eval', 'train'", {
    "resize" => Resize, "eval" => Eval, "train" => Train,
});

from_names!(Filter, "filter", "'nearest', 'bilinear', 'bicubic', 'lanczos'", {
    "nearest" => Nearest, "bilinear" => Bilinear, "bicubic" => Bicubic,
    "lanczos" => Lanczos3, "lanczos3" => Lanczos3,
});

from_names!(ColorMode, "color", "'rgb', 'gray', 'rgba', 'unchanged'", {
    "rgb" => Rgb, "gray" => Gray, "grey" => Gray, "l" => Gray, "rgba" => Rgba,
    "unchanged" => Unchanged,
});

from_names!(#[cfg(feature = "decode-ffmpeg")] crate::video::PixelFormat, "pixel_format", "'rgb', 'bgr', 'gray'", {
    "rgb" => Rgb24, "rgb24" => Rgb24, "bgr" => Bgr24, "bgr24" => Bgr24,
    "gray" => Gray8, "grey" => Gray8, "gray8" => Gray8,
});

from_names!(#[cfg(feature = "decode-ffmpeg")] crate::video::ScaleFilter, "filter", "'nearest', 'bilinear', 'bicubic', 'area'", {
    "nearest" => Nearest, "bilinear" => Bilinear, "bicubic" => Bicubic, "area" => Area,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_errors_list_the_choices() {
        assert_eq!("lanczos".parse::<Filter>().unwrap(), Filter::Lanczos3);
        assert_eq!("grey".parse::<ColorMode>().unwrap(), ColorMode::Gray);
        let err = "cubic".parse::<Filter>().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("'nearest', 'bilinear'"), "{err}");
        assert!("Eval".parse::<TransformKind>().is_err());
    }

    #[cfg(feature = "decode-ffmpeg")]
    #[test]
    fn video_names_parse_and_errors_list_the_choices() {
        use crate::video::{PixelFormat, ScaleFilter};
        assert_eq!("bgr24".parse::<PixelFormat>().unwrap(), PixelFormat::Bgr24);
        assert_eq!("grey".parse::<PixelFormat>().unwrap(), PixelFormat::Gray8);
        assert_eq!("area".parse::<ScaleFilter>().unwrap(), ScaleFilter::Area);
        let err = "lanczos".parse::<ScaleFilter>().unwrap_err();
        assert_eq!(
            err.message(),
            "filter must be one of 'nearest', 'bilinear', 'bicubic', 'area', got \"lanczos\""
        );
    }

    #[test]
    fn sizes_are_checked_together() {
        let opts = |transform, width, height, size| ImageOptions {
            transform,
            width,
            height,
            size,
            ..ImageOptions::default()
        };
        use TransformKind::*;
        assert_eq!(
            opts(Resize, None, None, None).transform().unwrap(),
            Transform::Identity
        );
        assert!(opts(Resize, Some(3), None, None).transform().is_err());
        assert!(opts(Resize, Some(0), Some(2), None).transform().is_err());
        assert!(opts(Eval, Some(3), Some(4), None).transform().is_err());
        assert!(opts(Eval, None, None, Some(0)).transform().is_err());
        assert_eq!(
            opts(Eval, Some(64), Some(64), None).transform().unwrap(),
            Transform::eval(64, Filter::Bilinear)
        );
        let err = opts(Train, None, None, None).transform().unwrap_err();
        assert!(
            err.message()
                .starts_with("transform=\"train\" makes a square image"),
            "{err}"
        );
    }
}
