//! Decoded FFmpeg frames kept as FFmpeg frames (`AVFrame`s), as SPDL's
//! `VideoFrames`, `AudioFrames` and `ImageFrames`: what a decoder or a
//! [`super::graph::FilterGraph`] produces and what a filter graph takes,
//! turned into one contiguous array by [`Frames::to_array`] (SPDL's
//! `convert_frames`).
//!
//! The frames are reference counted by FFmpeg: slicing and cloning share the
//! pixel/sample data; nothing is copied until [`Frames::to_array`].

use std::ffi::{c_char, CStr, CString};

use ffmpeg_next::{self as ff, ffi};

use crate::{DType, Error, ErrorKind, Result};

/// What the frames hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    /// Audio frames (SPDL's `AudioFrames`).
    Audio,
    /// A sequence of pictures (SPDL's `VideoFrames`).
    Video,
    /// One picture (SPDL's `ImageFrames`).
    Image,
}

impl MediaKind {
    /// `"audio"`, `"video"` or `"image"`.
    pub fn name(self) -> &'static str {
        match self {
            MediaKind::Audio => "audio",
            MediaKind::Video => "video",
            MediaKind::Image => "image",
        }
    }
}

/// A contiguous row-major array: `shape`, element type and native-endian
/// bytes (`data.len() == product(shape) * dtype.size()`).
#[derive(Debug, Clone, PartialEq)]
pub struct FrameArray {
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// The elements.
    pub data: Vec<u8>,
}

/// One or more decoded frames of one kind with their time base. As SPDL's
/// `VideoFrames` / `AudioFrames` / `ImageFrames`.
pub struct Frames {
    kind: MediaKind,
    frames: Vec<ff::Frame>,
    time_base: ff::Rational,
}

impl std::fmt::Debug for Frames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frames")
            .field("kind", &self.kind)
            .field("len", &self.frames.len())
            .field("format", &self.format_name())
            .finish()
    }
}

/// A new reference to `frame`'s data (`av_frame_clone`).
fn frame_ref(frame: &ff::Frame) -> Result<ff::Frame> {
    // SAFETY: `frame` is a valid frame; av_frame_clone returns a new frame
    // referencing the same buffers, or null when out of memory.
    let p = unsafe { ffi::av_frame_clone(frame.as_ptr()) };
    if p.is_null() {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            "out of memory referencing a frame",
        ));
    }
    // SAFETY: `p` is a fresh frame owned by the result (freed on drop).
    Ok(unsafe { owned_frame(p) })
}

/// Wraps an `AVFrame` the caller owns so that dropping the result frees it.
///
/// # Safety
/// `p` must be a valid, uniquely owned `AVFrame`.
pub(crate) unsafe fn owned_frame(p: *mut ffi::AVFrame) -> ff::Frame {
    // ff::frame::Video::wrap marks nothing as owned; go through `empty` +
    // move_ref so that the result owns the frame and frees it on drop.
    // SAFETY: as documented; `empty` allocates an owned frame and
    // av_frame_move_ref moves `p`'s contents into it, leaving `p` blank.
    unsafe {
        let mut out = ff::Frame::empty();
        ffi::av_frame_move_ref(out.as_mut_ptr(), p);
        let mut p = p;
        ffi::av_frame_free(&mut p);
        out
    }
}

/// A pixel format's name (`"rgb24"`, ...; `"none"` for an unknown value).
pub(crate) fn pix_fmt_name(fmt: i32) -> String {
    // SAFETY: `fmt` is an AVPixelFormat value (or -1); the name is a static
    // string or null.
    static_name(unsafe {
        ffi::av_get_pix_fmt_name(std::mem::transmute::<i32, ffi::AVPixelFormat>(fmt))
    })
}

/// A sample format's name (`"fltp"`, ...; `"none"` for an unknown value).
pub(crate) fn sample_fmt_name(fmt: i32) -> String {
    // SAFETY: as pix_fmt_name, for AVSampleFormat.
    static_name(unsafe {
        ffi::av_get_sample_fmt_name(std::mem::transmute::<i32, ffi::AVSampleFormat>(fmt))
    })
}

/// A format's name as FFmpeg returns it: a static NUL-terminated string, or null for an
/// unknown format (`"none"`).
pub(crate) fn static_name(p: *const c_char) -> String {
    if p.is_null() {
        return "none".into();
    }
    // SAFETY: a static NUL-terminated string (the callers' FFmpeg functions return no other).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The AVPixelFormat called `name` (`"rgb24"`, `"yuv420p"`, ...).
pub(crate) fn pix_fmt_from_name(name: &str) -> Result<ffi::AVPixelFormat> {
    fmt_from_name(
        name,
        "pixel",
        ffi::av_get_pix_fmt,
        ffi::AVPixelFormat::AV_PIX_FMT_NONE,
    )
}

/// The AVSampleFormat called `name` (`"fltp"`, `"s16"`, ...).
pub(crate) fn sample_fmt_from_name(name: &str) -> Result<ffi::AVSampleFormat> {
    fmt_from_name(
        name,
        "sample",
        ffi::av_get_sample_fmt,
        ffi::AVSampleFormat::AV_SAMPLE_FMT_NONE,
    )
}

/// The format called `name`, looked up by FFmpeg's `lookup` (`av_get_pix_fmt`,
/// `av_get_sample_fmt`), which returns `none` for a name it does not know; `what`
/// (`"pixel"`, `"sample"`) is the kind of format errors name.
fn fmt_from_name<F: PartialEq>(
    name: &str,
    what: &str,
    lookup: unsafe extern "C" fn(*const c_char) -> F,
    none: F,
) -> Result<F> {
    let c = CString::new(name).map_err(|_| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("{what} format name has a NUL byte"),
        )
    })?;
    // SAFETY: a valid C string; `lookup` takes any and returns `none` when unknown.
    let f = unsafe { lookup(c.as_ptr()) };
    if f == none {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("unknown {what} format {name:?}"),
        ));
    }
    Ok(f)
}

/// How a picture of a pixel format is laid out in an array (SPDL's
/// `convert_frames` layouts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PixLayout {
    /// One interleaved 8-bit plane of `c` channels: `[H, W, C]` (`gray8` is
    /// `[H, W, 1]`, as SPDL's `convert_frames` gives it).
    Packed(usize),
    /// `c` full-size planes: `[C, H, W]` (the 16-bit grays are `[1, H, W]`).
    Planar(usize),
    /// 4:2:0 with separate U and V planes: `[1, H + H/2, W]`, the planes one
    /// after the other (Y, then U, then V, each row after row), as SPDL's
    /// `convert_frames` (`av_image_copy_to_buffer`) lays `yuv420p` out.
    Yuv420p,
    /// 4:2:2 with separate U and V planes: `[1, 2H, W]`, Y then U then V
    /// (SPDL's `yuv422p` layout).
    Yuv422p,
    /// NV12: `[1, H + H/2, W]`, the interleaved UV plane under Y.
    Nv12,
}

fn pix_layout(fmt: ffi::AVPixelFormat) -> Option<PixLayout> {
    use ffi::AVPixelFormat::*;
    Some(match fmt {
        AV_PIX_FMT_RGB24 | AV_PIX_FMT_BGR24 => PixLayout::Packed(3),
        AV_PIX_FMT_RGBA | AV_PIX_FMT_BGRA | AV_PIX_FMT_ARGB | AV_PIX_FMT_ABGR => {
            PixLayout::Packed(4)
        }
        // SPDL converts gray8 as an interleaved format of one channel (the 16-bit grays as
        // planar ones): the same bytes, shaped `[H, W, 1]`.
        AV_PIX_FMT_GRAY8 => PixLayout::Packed(1),
        AV_PIX_FMT_YUV444P | AV_PIX_FMT_YUVJ444P | AV_PIX_FMT_GBRP => PixLayout::Planar(3),
        AV_PIX_FMT_YUV420P | AV_PIX_FMT_YUVJ420P => PixLayout::Yuv420p,
        AV_PIX_FMT_YUV422P | AV_PIX_FMT_YUVJ422P => PixLayout::Yuv422p,
        AV_PIX_FMT_NV12 => PixLayout::Nv12,
        _ => return None,
    })
}

/// The layout of a pixel format of 16-bit elements (little-endian, the
/// host's order on the platforms FFmpeg builds for here), for
/// [`Frames::to_array`] only: the same layouts as the 8-bit formats, one
/// `u16` per sample (values of 10/12-bit formats as stored, not scaled).
fn wide_pix_layout(fmt: ffi::AVPixelFormat) -> Option<PixLayout> {
    use ffi::AVPixelFormat::*;
    if cfg!(target_endian = "big") {
        return None;
    }
    Some(match fmt {
        AV_PIX_FMT_RGB48LE | AV_PIX_FMT_BGR48LE => PixLayout::Packed(3),
        AV_PIX_FMT_RGBA64LE | AV_PIX_FMT_BGRA64LE => PixLayout::Packed(4),
        AV_PIX_FMT_GRAY16LE | AV_PIX_FMT_GRAY10LE | AV_PIX_FMT_GRAY12LE => PixLayout::Planar(1),
        // What 16-bit PNGs decode to. The bytes are kept in the file's (big-endian) order
        // under a native `uint16` type, as SPDL's `convert_frames` and `ffmpeg -f rawvideo`
        // give them: swap the bytes for the values.
        AV_PIX_FMT_RGB48BE | AV_PIX_FMT_BGR48BE => PixLayout::Packed(3),
        AV_PIX_FMT_RGBA64BE | AV_PIX_FMT_BGRA64BE => PixLayout::Packed(4),
        AV_PIX_FMT_GRAY16BE => PixLayout::Planar(1),
        AV_PIX_FMT_YUV444P16LE
        | AV_PIX_FMT_YUV444P10LE
        | AV_PIX_FMT_YUV444P12LE
        | AV_PIX_FMT_GBRP16LE
        | AV_PIX_FMT_GBRP10LE
        | AV_PIX_FMT_GBRP12LE => PixLayout::Planar(3),
        AV_PIX_FMT_YUV420P16LE | AV_PIX_FMT_YUV420P10LE | AV_PIX_FMT_YUV420P12LE => {
            PixLayout::Yuv420p
        }
        _ => return None,
    })
}

/// The array shape of one picture of `w` x `h` in `layout`.
fn picture_shape(layout: PixLayout, w: usize, h: usize) -> Vec<usize> {
    match layout {
        PixLayout::Packed(c) => vec![h, w, c],
        PixLayout::Planar(c) => vec![c, h, w],
        PixLayout::Yuv420p | PixLayout::Nv12 => vec![1, h + h / 2, w],
        PixLayout::Yuv422p => vec![1, 2 * h, w],
    }
}

/// The `(plane, rows, row elements)` copies that make up one picture, in
/// array order: every row of every plane, one after the other (no padding).
fn picture_planes(layout: PixLayout, w: usize, h: usize) -> Vec<(usize, usize, usize)> {
    match layout {
        PixLayout::Packed(c) => vec![(0, h, w * c)],
        PixLayout::Planar(c) => (0..c).map(|p| (p, h, w)).collect(),
        PixLayout::Yuv420p => vec![(0, h, w), (1, h / 2, w / 2), (2, h / 2, w / 2)],
        PixLayout::Yuv422p => vec![(0, h, w), (1, h, w / 2), (2, h, w / 2)],
        PixLayout::Nv12 => vec![(0, h, w), (1, h / 2, w)],
    }
}

fn audio_type(fmt: ffi::AVSampleFormat) -> Option<(DType, bool)> {
    use ffi::AVSampleFormat::*;
    Some(match fmt {
        AV_SAMPLE_FMT_U8 => (DType::U8, false),
        AV_SAMPLE_FMT_U8P => (DType::U8, true),
        AV_SAMPLE_FMT_S16 => (DType::I16, false),
        AV_SAMPLE_FMT_S16P => (DType::I16, true),
        AV_SAMPLE_FMT_S32 => (DType::I32, false),
        AV_SAMPLE_FMT_S32P => (DType::I32, true),
        AV_SAMPLE_FMT_S64 => (DType::I64, false),
        AV_SAMPLE_FMT_S64P => (DType::I64, true),
        AV_SAMPLE_FMT_FLT => (DType::F32, false),
        AV_SAMPLE_FMT_FLTP => (DType::F32, true),
        AV_SAMPLE_FMT_DBL => (DType::F64, false),
        AV_SAMPLE_FMT_DBLP => (DType::F64, true),
        _ => return None,
    })
}

fn frame_channels(f: &ffi::AVFrame) -> usize {
    usize::try_from(f.ch_layout.nb_channels).unwrap_or(0)
}

impl Frames {
    /// Frames of `kind` whose pts are in `time_base`. Frames of one object
    /// must share size and format (checked by [`Frames::to_array`]).
    pub(crate) fn new(kind: MediaKind, frames: Vec<ff::Frame>, time_base: ff::Rational) -> Self {
        Frames {
            kind,
            frames,
            time_base,
        }
    }

    /// The frames (for filter graphs and encoders).
    pub(crate) fn raw(&self) -> &[ff::Frame] {
        &self.frames
    }

    /// Audio, video or image.
    pub fn kind(&self) -> MediaKind {
        self.kind
    }

    /// Number of frames (audio: FFmpeg frames, each of many samples).
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether there is no frame.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The time base of [`Frames::pts`] as `(num, den)`.
    pub fn time_base(&self) -> (i32, i32) {
        (self.time_base.numerator(), self.time_base.denominator())
    }

    fn first(&self) -> Option<&ffi::AVFrame> {
        // SAFETY: every stored frame is a valid AVFrame for as long as `self`.
        self.frames.first().map(|f| unsafe { &*f.as_ptr() })
    }

    /// Picture width in pixels (0 for audio or no frame).
    pub fn width(&self) -> usize {
        match self.kind {
            MediaKind::Audio => 0,
            _ => self
                .first()
                .map_or(0, |f| usize::try_from(f.width).unwrap_or(0)),
        }
    }

    /// Picture height in pixels (0 for audio or no frame).
    pub fn height(&self) -> usize {
        match self.kind {
            MediaKind::Audio => 0,
            _ => self
                .first()
                .map_or(0, |f| usize::try_from(f.height).unwrap_or(0)),
        }
    }

    /// The pixel format (`"rgb24"`, `"yuv420p"`, ...) or sample format
    /// (`"fltp"`, `"s16"`, ...) name of the first frame, `"none"` without one.
    pub fn format_name(&self) -> String {
        match (self.first(), self.kind) {
            (None, _) => "none".into(),
            (Some(f), MediaKind::Audio) => sample_fmt_name(f.format),
            (Some(f), _) => pix_fmt_name(f.format),
        }
    }

    /// Number of planes of the pixel format (`av_pix_fmt_count_planes`);
    /// audio: planes of the sample format (channels when planar, else 1).
    pub fn num_planes(&self) -> usize {
        let Some(f) = self.first() else { return 0 };
        if self.kind == MediaKind::Audio {
            // SAFETY: a sample format value of a valid frame.
            let planar = unsafe {
                ffi::av_sample_fmt_is_planar(std::mem::transmute::<i32, ffi::AVSampleFormat>(
                    f.format,
                ))
            };
            return if planar != 0 { frame_channels(f) } else { 1 };
        }
        // SAFETY: a pixel format value of a valid frame.
        let n = unsafe {
            ffi::av_pix_fmt_count_planes(std::mem::transmute::<i32, ffi::AVPixelFormat>(f.format))
        };
        usize::try_from(n).unwrap_or(0)
    }

    /// Audio: sample rate in Hz (0 for pictures).
    pub fn sample_rate(&self) -> u32 {
        match self.kind {
            MediaKind::Audio => self
                .first()
                .map_or(0, |f| u32::try_from(f.sample_rate).unwrap_or(0)),
            _ => 0,
        }
    }

    /// Audio: number of channels (0 for pictures).
    pub fn num_channels(&self) -> usize {
        match self.kind {
            MediaKind::Audio => self.first().map_or(0, frame_channels),
            _ => 0,
        }
    }

    /// Audio: total samples per channel over all frames.
    pub fn num_samples(&self) -> usize {
        self.frames
            .iter()
            // SAFETY: valid frames.
            .map(|f| usize::try_from(unsafe { (*f.as_ptr()).nb_samples }).unwrap_or(0))
            .sum()
    }

    /// Each frame's presentation timestamp in [`Frames::time_base`] units
    /// (`AV_NOPTS_VALUE` as `i64::MIN` when unknown).
    pub fn pts(&self) -> Vec<i64> {
        // SAFETY: valid frames.
        self.frames
            .iter()
            .map(|f| unsafe { (*f.as_ptr()).pts })
            .collect()
    }

    /// Each frame's presentation time in seconds.
    pub fn timestamps(&self) -> Vec<f64> {
        self.pts()
            .into_iter()
            .map(|p| super::seconds(p, self.time_base))
            .collect()
    }

    /// The frame metadata of the first frame (`AVFrame.metadata`), e.g.
    /// what `cropdetect` or `signalstats` attach.
    pub fn metadata(&self) -> Vec<(String, String)> {
        let Some(f) = self.first() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut e: *const ffi::AVDictionaryEntry = std::ptr::null();
        loop {
            // SAFETY: iterates the frame's dictionary (null is an empty one);
            // "" with IGNORE_SUFFIX matches every key.
            e = unsafe {
                ffi::av_dict_get(f.metadata, c"".as_ptr(), e, ffi::AV_DICT_IGNORE_SUFFIX)
            };
            if e.is_null() {
                return out;
            }
            // SAFETY: entries hold NUL-terminated key/value strings.
            let (k, v) = unsafe { (CStr::from_ptr((*e).key), CStr::from_ptr((*e).value)) };
            out.push((
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            ));
        }
    }

    /// New frames referencing the frames at `indices` (no pixel copy), of
    /// `kind`. Errors: `InvalidArgument` for an index out of range.
    pub fn select(&self, indices: &[usize], kind: MediaKind) -> Result<Frames> {
        let mut frames = Vec::with_capacity(indices.len());
        for &i in indices {
            let f = self.frames.get(i).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "frame index {i} out of range for {} frames",
                        self.frames.len()
                    ),
                )
            })?;
            frames.push(frame_ref(f)?);
        }
        Ok(Frames::new(kind, frames, self.time_base))
    }

    /// A copy sharing the data (reference counted). SPDL's `clone`.
    pub fn try_clone(&self) -> Result<Frames> {
        let all: Vec<usize> = (0..self.frames.len()).collect();
        self.select(&all, self.kind)
    }

    /// Appends `other`'s frames (same kind and source; the time base of
    /// the first non-empty one is kept).
    pub(crate) fn extend(&mut self, other: Frames) {
        if self.frames.is_empty() {
            self.time_base = other.time_base;
        }
        self.frames.extend(other.frames);
    }

    /// The frames as one array, as SPDL's `convert_frames`:
    /// - video `[N, H, W, C]` for packed formats (`rgb24`, `bgr24`,
    ///   `rgba`, ..., and `gray8` as `[N, H, W, 1]`), `[N, C, H, W]` for planar
    ///   ones (`gray16le` is `[N, 1, H, W]`, `yuv444p` / `gbrp` `[N, 3, H, W]`), `[N, 1, H*3/2,
    ///   W]` for `yuv420p` / `nv12` and `[N, 1, 2H, W]` for `yuv422p` (the
    ///   planes one after the other, as `ffmpeg -f rawvideo` writes them);
    ///   `uint8`, or `uint16` in the same layouts for 16-bit and
    ///   high-bit-depth formats (`gray16le`, `rgb48le`, `rgba64le`,
    ///   `yuv444p16le`, `gbrp16le`, `yuv420p10le`, ...: values as stored;
    ///   `gray16be` / `rgb48be` / `rgba64be` bytes as stored, i.e. swapped on
    ///   little-endian hosts, as SPDL);
    ///   images the same without `N`;
    /// - audio `[C, S]` for planar sample formats (`fltp`, `s16p`, ...),
    ///   `[S, C]` for packed ones (`flt`, `s16`, ...), in the format's type.
    ///
    /// Errors: `InvalidArgument` when there is no frame or the frames
    /// differ in size/format; `Unsupported` for other pixel formats (convert
    /// with `format=pix_fmts=rgb24` in a filter graph first).
    pub fn to_array(&self) -> Result<FrameArray> {
        if self.frames.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "no frames to convert",
            ));
        }
        match self.kind {
            MediaKind::Audio => self.audio_array(),
            MediaKind::Video | MediaKind::Image => self.video_array(),
        }
    }

    fn video_array(&self) -> Result<FrameArray> {
        let f0 = self.first().expect("not empty");
        // SAFETY: a pixel format value of a valid frame.
        let fmt = unsafe { std::mem::transmute::<i32, ffi::AVPixelFormat>(f0.format) };
        // Element size in bytes: 1 for 8-bit formats, 2 for 16-bit ones.
        let (layout, es) = pix_layout(fmt)
            .map(|l| (l, 1))
            .or_else(|| wide_pix_layout(fmt).map(|l| (l, 2)))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "cannot convert {} frames to an array (use a filter such as format=pix_fmts=rgb24)",
                        pix_fmt_name(f0.format)
                    ),
                )
            })?;
        let (w, h) = (
            usize::try_from(f0.width).unwrap_or(0),
            usize::try_from(f0.height).unwrap_or(0),
        );
        let odd = match layout {
            PixLayout::Yuv420p | PixLayout::Nv12 => w % 2 == 1 || h % 2 == 1,
            PixLayout::Yuv422p => w % 2 == 1,
            _ => false,
        };
        if odd {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{} frames of odd size {w}x{h} do not fit the [1, H*3/2, W] / [1, 2H, W] \
                     layout (their chroma planes round up); convert them with \
                     format=pix_fmts=rgb24 or scale to an even size",
                    pix_fmt_name(f0.format)
                ),
            ));
        }
        let shape = picture_shape(layout, w, h);
        let per: usize = shape.iter().product::<usize>() * es;
        let mut data = super::mem::zeroed_bytes(per * self.frames.len());
        // (`max(1)`: a picture without pixels gives an empty array.)
        for (f, dst) in self.frames.iter().zip(data.chunks_exact_mut(per.max(1))) {
            // SAFETY: a valid frame for as long as `self`.
            let f = unsafe { &*f.as_ptr() };
            if f.format != f0.format || f.width != f0.width || f.height != f0.height {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "frames differ in size or format ({}x{} {} vs {w}x{h} {})",
                        f.width,
                        f.height,
                        pix_fmt_name(f.format),
                        pix_fmt_name(f0.format)
                    ),
                ));
            }
            let mut at = 0usize;
            for (plane, rows, row_elems) in picture_planes(layout, w, h) {
                let row_bytes = row_elems * es;
                let stride = isize::try_from(f.linesize[plane]).unwrap_or(0);
                for r in 0..rows {
                    // SAFETY: plane `plane` has at least `rows` rows of
                    // `linesize` bytes each, of which `row_bytes` are pixels.
                    let src = unsafe {
                        std::slice::from_raw_parts(
                            f.data[plane].offset(r as isize * stride),
                            row_bytes,
                        )
                    };
                    dst[at..at + row_bytes].copy_from_slice(src);
                    at += row_bytes;
                }
            }
        }
        let shape = match self.kind {
            MediaKind::Image if self.frames.len() == 1 => shape,
            _ => std::iter::once(self.frames.len()).chain(shape).collect(),
        };
        Ok(FrameArray {
            shape,
            dtype: if es == 2 { DType::U16 } else { DType::U8 },
            data,
        })
    }

    fn audio_array(&self) -> Result<FrameArray> {
        let f0 = self.first().expect("not empty");
        // SAFETY: a sample format value of a valid frame.
        let fmt = unsafe { std::mem::transmute::<i32, ffi::AVSampleFormat>(f0.format) };
        let (dtype, planar) = audio_type(fmt).ok_or_else(|| {
            Error::new(
                ErrorKind::Unsupported,
                format!(
                    "cannot convert {} audio to an array",
                    sample_fmt_name(f0.format)
                ),
            )
        })?;
        let c = frame_channels(f0);
        let total = self.num_samples();
        let size = dtype.size();
        let mut data = vec![0u8; total * c * size];
        let mut at = 0usize; // samples per channel written so far
        for f in &self.frames {
            // SAFETY: a valid frame for as long as `self`.
            let f = unsafe { &*f.as_ptr() };
            if f.format != f0.format || frame_channels(f) != c {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "audio frames differ in sample format or channel count",
                ));
            }
            let n = usize::try_from(f.nb_samples).unwrap_or(0);
            if planar {
                for ch in 0..c {
                    // SAFETY: planar audio has one plane of `n` samples per
                    // channel, reached through `extended_data`.
                    let src =
                        unsafe { std::slice::from_raw_parts(*f.extended_data.add(ch), n * size) };
                    let d = (ch * total + at) * size;
                    data[d..d + n * size].copy_from_slice(src);
                }
            } else {
                // SAFETY: packed audio has one plane of `n * c` samples.
                let src = unsafe { std::slice::from_raw_parts(f.data[0], n * c * size) };
                let d = at * c * size;
                data[d..d + n * c * size].copy_from_slice(src);
            }
            at += n;
        }
        let shape = if planar {
            vec![c, total]
        } else {
            vec![total, c]
        };
        Ok(FrameArray { shape, dtype, data })
    }

    /// Video frames from a `uint8` array laid out as [`Frames::to_array`]
    /// gives them for `pix_fmt` (`[N, H, W, C]` for `rgb24`, ...), the i-th
    /// with pts `pts + i` in time base `1 / frame_rate`. The data is copied.
    /// As SPDL's `create_reference_video_frame`.
    ///
    /// Errors: `InvalidArgument` for an unknown `pix_fmt`, a shape that does
    /// not fit it or a zero frame rate; `Unsupported` for a format outside
    /// the layouts above.
    pub fn from_video_array(
        data: &[u8],
        shape: &[usize],
        pix_fmt: &str,
        frame_rate: (i32, i32),
        pts: i64,
    ) -> Result<Frames> {
        let VideoArray {
            fmt,
            layout,
            n,
            w,
            h,
            per,
            bps,
            tb,
        } = VideoArray::check(data.len(), shape, pix_fmt, frame_rate)?;
        last_pts(pts, n)?;
        let mut frames = Vec::with_capacity(n);
        for (i, src) in data.chunks_exact(per.max(1)).take(n).enumerate() {
            let mut v = ff::frame::Video::new(fmt.into(), w as u32, h as u32);
            let mut at = 0usize;
            for (plane, rows, row_elems) in picture_planes(layout, w, h) {
                let row_bytes = row_elems * bps;
                let stride = v.stride(plane);
                let dst = v.data_mut(plane);
                for r in 0..rows {
                    dst[r * stride..r * stride + row_bytes]
                        .copy_from_slice(&src[at..at + row_bytes]);
                    at += row_bytes;
                }
            }
            v.set_pts(Some(pts + i as i64));
            // SAFETY: `v` owns its frame; moving it into an owned Frame.
            let raw = unsafe { ffi::av_frame_clone(v.as_ptr()) };
            if raw.is_null() {
                return Err(out_of_memory());
            }
            // SAFETY: `raw` is a fresh, uniquely owned frame.
            frames.push(unsafe { owned_frame(raw) });
        }
        Ok(Frames::new(MediaKind::Video, frames, tb))
    }

    /// [`Frames::from_video_array`] without the copy: the frames point
    /// into `memory` (laid out as there), which stays alive until the last
    /// frame referring to it is freed. As SPDL's
    /// `create_reference_video_frame`, which references its array. The
    /// frames are read-only: a filter or encoder that writes copies first.
    ///
    /// Errors: as [`Frames::from_video_array`].
    pub fn reference_video_array(
        memory: Box<dyn FrameMemory>,
        shape: &[usize],
        pix_fmt: &str,
        frame_rate: (i32, i32),
        pts: i64,
    ) -> Result<Frames> {
        let (base, len) = memory.as_ptr_len();
        let VideoArray {
            fmt,
            layout,
            n,
            w,
            h,
            per,
            bps,
            tb,
        } = VideoArray::check(len, shape, pix_fmt, frame_rate)?;
        last_pts(pts, n)?;
        let shared = SharedBuffer::new(memory)?;
        let mut frames = Vec::with_capacity(n);
        for i in 0..n {
            // Byte offset and line size of each plane within one picture.
            let planes: Vec<(usize, usize)> = match layout {
                PixLayout::Packed(c) => vec![(0, w * c)],
                PixLayout::Planar(c) => (0..c).map(|p| (p * h * w * bps, w * bps)).collect(),
                // The planes one after the other: Y, U, V.
                PixLayout::Yuv420p => {
                    vec![(0, w), (h * w, w / 2), (h * w + h / 2 * (w / 2), w / 2)]
                }
                PixLayout::Yuv422p => vec![(0, w), (h * w, w / 2), (h * w + h * (w / 2), w / 2)],
                PixLayout::Nv12 => vec![(0, w), (h * w, w)],
            };
            // SAFETY: a fresh, empty AVFrame, filled in below before any use.
            let mut frame = unsafe { ff::Frame::empty() };
            // SAFETY: `frame` is a fresh AVFrame we own; it takes a new
            // reference to the shared buffer (released with the frame), and
            // its plane pointers stay within picture `i` of that buffer:
            // VideoArray::check proved `len == n * per` for this layout.
            unsafe {
                let f = &mut *frame.as_mut_ptr();
                f.format = fmt as i32;
                f.width = w as i32;
                f.height = h as i32;
                f.buf[0] = shared.new_ref()?;
                for (p, (offset, line)) in planes.into_iter().enumerate() {
                    f.data[p] = base.add(i * per + offset).cast_mut();
                    f.linesize[p] = line as i32;
                }
                f.extended_data = f.data.as_mut_ptr();
                f.pts = pts + i as i64;
            }
            frames.push(frame);
        }
        Ok(Frames::new(MediaKind::Video, frames, tb))
    }
}

/// Checks that frames `pts .. pts + n` have representable timestamps.
fn last_pts(pts: i64, n: usize) -> Result<()> {
    i64::try_from(n)
        .ok()
        .and_then(|n| pts.checked_add(n))
        .map(|_| ())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("pts {pts} + {n} frames does not fit a 64-bit timestamp"),
            )
        })
}

/// A `uint8` array's geometry as video frames of one pixel format.
struct VideoArray {
    fmt: ffi::AVPixelFormat,
    layout: PixLayout,
    /// Frames, width, height, bytes per frame.
    n: usize,
    w: usize,
    h: usize,
    per: usize,
    /// Bytes per sample: 2 for `gray16le` / `gray16be`, else 1.
    bps: usize,
    /// `1 / frame_rate`.
    tb: ff::Rational,
}

impl VideoArray {
    /// Checks that `len` bytes of `shape` (in samples) are frames of
    /// `pix_fmt`. Gray formats also take `[N, H, W]` (SPDL's shape for them;
    /// `gray8` else `[N, H, W, 1]`, the 16-bit grays `[N, 1, H, W]`).
    fn check(len: usize, shape: &[usize], pix_fmt: &str, frame_rate: (i32, i32)) -> Result<Self> {
        let fmt = pix_fmt_from_name(pix_fmt)?;
        let (layout, bps) = match fmt {
            ffi::AVPixelFormat::AV_PIX_FMT_GRAY16LE | ffi::AVPixelFormat::AV_PIX_FMT_GRAY16BE => {
                (Some(PixLayout::Planar(1)), 2usize)
            }
            _ => (pix_layout(fmt), 1),
        };
        let layout = layout.ok_or_else(|| {
            Error::new(
                ErrorKind::Unsupported,
                format!("pixel format {pix_fmt:?} is not supported here"),
            )
        })?;
        let gray_nhw;
        let shape = match (layout, shape) {
            (PixLayout::Planar(1), &[n, h, w]) => {
                gray_nhw = [n, 1, h, w];
                &gray_nhw[..]
            }
            (PixLayout::Packed(1), &[n, h, w]) => {
                gray_nhw = [n, h, w, 1];
                &gray_nhw[..]
            }
            _ => shape,
        };
        if frame_rate.0 <= 0 || frame_rate.1 <= 0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "frame_rate must be positive, got {}/{}",
                    frame_rate.0, frame_rate.1
                ),
            ));
        }
        let bad = || {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("array of shape {shape:?} does not fit pixel format {pix_fmt:?}"),
            )
        };
        if shape.len() != 4 || shape.iter().try_fold(bps, |a, &d| a.checked_mul(d)) != Some(len) {
            return Err(bad());
        }
        let n = shape[0];
        let (w, h) = match layout {
            PixLayout::Packed(c) if shape[3] == c => (shape[2], shape[1]),
            PixLayout::Planar(c) if shape[1] == c => (shape[3], shape[2]),
            PixLayout::Yuv420p | PixLayout::Nv12 if shape[1] == 1 && shape[2] % 3 == 0 => {
                (shape[3], shape[2] * 2 / 3)
            }
            PixLayout::Yuv422p if shape[1] == 1 && shape[2] % 2 == 0 => (shape[3], shape[2] / 2),
            _ => return Err(bad()),
        };
        // Subsampled chroma of an odd size rounds up, which these layouts cannot hold.
        let odd = match layout {
            PixLayout::Yuv420p | PixLayout::Nv12 => w % 2 == 1 || h % 2 == 1,
            PixLayout::Yuv422p => w % 2 == 1,
            _ => false,
        };
        // FFmpeg keeps sizes and line sizes in `int`s.
        if odd || picture_shape(layout, w, h) != shape[1..] || len / n.max(1) > i32::MAX as usize {
            return Err(bad());
        }
        if w == 0 || h == 0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "array of shape {shape:?} holds pictures without pixels (width or height 0)"
                ),
            ));
        }
        Ok(VideoArray {
            fmt,
            layout,
            n,
            w,
            h,
            per: len / n.max(1),
            bps,
            tb: ff::Rational::new(frame_rate.1, frame_rate.0),
        })
    }
}

impl Frames {
    /// One audio frame from `data` laid out as [`Frames::to_array`] gives
    /// it for `sample_fmt` (`[C, S]` planar, `[S, C]` packed; native-endian
    /// elements of the format's type), with pts `pts` in time base
    /// `1 / sample_rate`. The data is copied. As SPDL's
    /// `create_reference_audio_frame`.
    ///
    /// Errors: `InvalidArgument` for an unknown format, a shape or byte
    /// count that does not fit it, or a zero rate.
    pub fn from_audio_array(
        data: &[u8],
        shape: [usize; 2],
        sample_fmt: &str,
        sample_rate: u32,
        pts: i64,
    ) -> Result<Frames> {
        let AudioArray {
            fmt,
            c,
            s,
            size,
            planar,
        } = AudioArray::check(data.len(), shape, sample_fmt, sample_rate)?;
        // SAFETY: a fresh AVFrame we own, given its format, sample count, rate
        // and layout before av_frame_get_buffer allocates one plane per channel
        // (planar; reached through `extended_data`, which has room for every
        // channel) or one plane of `s * c` samples (packed), each at least
        // `s * size` (planar) or `s * c * size` bytes; `data` holds
        // `c * s * size` bytes (AudioArray::check).
        let frame = unsafe {
            let mut frame = ff::Frame::empty();
            let f = &mut *frame.as_mut_ptr();
            f.format = fmt as i32;
            f.nb_samples = s as i32;
            f.sample_rate = sample_rate as i32;
            f.pts = pts;
            ffi::av_channel_layout_default(&mut f.ch_layout, c as i32);
            if ffi::av_frame_get_buffer(f, 0) < 0 {
                return Err(out_of_memory());
            }
            let planes = if planar { c } else { 1 };
            let bytes = if planar { s * size } else { s * c * size };
            for plane in 0..planes {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr().add(plane * bytes),
                    *f.extended_data.add(plane),
                    bytes,
                );
            }
            frame
        };
        Ok(Frames::new(
            MediaKind::Audio,
            vec![frame],
            ff::Rational::new(1, sample_rate as i32),
        ))
    }

    /// [`Frames::from_audio_array`] without the copy: the frame points into
    /// `memory`, which stays alive until the frame is freed. As SPDL's
    /// `create_reference_audio_frame`. Planar audio of more than 8 channels
    /// (more planes than an `AVFrame` holds inline) is copied instead.
    ///
    /// Errors: as [`Frames::from_audio_array`].
    pub fn reference_audio_array(
        memory: Box<dyn FrameMemory>,
        shape: [usize; 2],
        sample_fmt: &str,
        sample_rate: u32,
        pts: i64,
    ) -> Result<Frames> {
        let (base, len) = memory.as_ptr_len();
        let AudioArray {
            fmt,
            c,
            s,
            size,
            planar,
        } = AudioArray::check(len, shape, sample_fmt, sample_rate)?;
        if planar && c > ffi::AV_NUM_DATA_POINTERS as usize {
            // SAFETY: FrameMemory promises `len` readable bytes at `base`
            // while `memory` lives (until the end of this call).
            let data = unsafe { std::slice::from_raw_parts(base, len) };
            return Frames::from_audio_array(data, shape, sample_fmt, sample_rate, pts);
        }
        let shared = SharedBuffer::new(memory)?;
        // SAFETY: a fresh, empty AVFrame, filled in below before any use.
        let mut frame = unsafe { ff::Frame::empty() };
        // SAFETY: `frame` is a fresh AVFrame we own; it takes a reference
        // to the shared buffer, and its plane pointers stay within the
        // `c * s * size` bytes AudioArray::check proved are there.
        unsafe {
            let f = &mut *frame.as_mut_ptr();
            f.format = fmt as i32;
            f.nb_samples = s as i32;
            f.sample_rate = sample_rate as i32;
            ffi::av_channel_layout_default(&mut f.ch_layout, c as i32);
            f.buf[0] = shared.new_ref()?;
            if planar {
                for ch in 0..c {
                    f.data[ch] = base.add(ch * s * size).cast_mut();
                }
                f.linesize[0] = (s * size) as i32;
            } else {
                f.data[0] = base.cast_mut();
                f.linesize[0] = (s * c * size) as i32;
            }
            f.extended_data = f.data.as_mut_ptr();
            f.pts = pts;
        }
        Ok(Frames::new(
            MediaKind::Audio,
            vec![frame],
            ff::Rational::new(1, sample_rate as i32),
        ))
    }
}

/// A 2-D array's geometry as one audio frame of one sample format.
struct AudioArray {
    fmt: ffi::AVSampleFormat,
    /// Channels, samples per channel, bytes per sample.
    c: usize,
    s: usize,
    size: usize,
    planar: bool,
}

impl AudioArray {
    /// Checks that `len` bytes of `shape` are samples of `sample_fmt`.
    fn check(len: usize, shape: [usize; 2], sample_fmt: &str, sample_rate: u32) -> Result<Self> {
        let fmt = sample_fmt_from_name(sample_fmt)?;
        let (dtype, planar) = audio_type(fmt).ok_or_else(|| {
            Error::new(
                ErrorKind::Unsupported,
                format!("sample format {sample_fmt:?} is not supported"),
            )
        })?;
        if sample_rate == 0 || i32::try_from(sample_rate).is_err() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "sample_rate must be from 1 to {}, got {sample_rate}",
                    i32::MAX
                ),
            ));
        }
        let (c, s) = if planar {
            (shape[0], shape[1])
        } else {
            (shape[1], shape[0])
        };
        if c == 0 || c.checked_mul(s).and_then(|n| n.checked_mul(dtype.size())) != Some(len) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "array of shape {shape:?} ({len} bytes) does not fit sample format {sample_fmt:?}"
                ),
            ));
        }
        if s == 0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("array of shape {shape:?} holds no samples"),
            ));
        }
        Ok(AudioArray {
            fmt,
            c,
            s,
            size: dtype.size(),
            planar,
        })
    }
}

/// Memory that frames refer to in place, without a copy
/// ([`Frames::reference_video_array`], [`Frames::reference_audio_array`]):
/// a NumPy array's buffer in the Python bindings, a `Vec<u8>` in Rust.
///
/// # Safety
///
/// [`FrameMemory::as_ptr_len`] returns the same pointer and length on every
/// call, and those bytes stay valid for reads until the value is dropped
/// (which may happen on any thread, when the last frame is freed).
pub unsafe trait FrameMemory: Send + 'static {
    /// The start and length of the memory, in bytes.
    fn as_ptr_len(&self) -> (*const u8, usize);
}

// SAFETY: a Vec's heap buffer does not move while the Vec is not changed,
// and it cannot be changed behind the Box the frames own.
unsafe impl FrameMemory for Vec<u8> {
    fn as_ptr_len(&self) -> (*const u8, usize) {
        (self.as_ptr(), self.len())
    }
}

/// An `AVBufferRef` over [`FrameMemory`], read-only; the memory is dropped
/// when the last reference (this one or a frame's) is released.
struct SharedBuffer(*mut ffi::AVBufferRef);

impl SharedBuffer {
    fn new(memory: Box<dyn FrameMemory>) -> Result<Self> {
        unsafe extern "C" fn release(opaque: *mut std::ffi::c_void, _data: *mut u8) {
            // SAFETY: `opaque` is the Box leaked below, released once, by
            // FFmpeg, when the buffer's last reference goes.
            drop(unsafe { Box::from_raw(opaque.cast::<Box<dyn FrameMemory>>()) });
        }
        let (ptr, len) = memory.as_ptr_len();
        let opaque = Box::into_raw(Box::new(memory)).cast::<std::ffi::c_void>();
        // SAFETY: `ptr` / `len` stay valid until `release` drops `memory`;
        // READONLY makes FFmpeg copy before any write.
        let buf = unsafe {
            ffi::av_buffer_create(
                ptr.cast_mut(),
                len,
                Some(release),
                opaque,
                ffi::AV_BUFFER_FLAG_READONLY,
            )
        };
        if buf.is_null() {
            // SAFETY: FFmpeg did not take `opaque`; reclaim it.
            drop(unsafe { Box::from_raw(opaque.cast::<Box<dyn FrameMemory>>()) });
            return Err(out_of_memory());
        }
        Ok(SharedBuffer(buf))
    }

    /// A new reference for a frame's `buf[0]`.
    fn new_ref(&self) -> Result<*mut ffi::AVBufferRef> {
        // SAFETY: `self.0` is a valid reference until drop.
        let r = unsafe { ffi::av_buffer_ref(self.0) };
        if r.is_null() {
            return Err(out_of_memory());
        }
        Ok(r)
    }
}

impl Drop for SharedBuffer {
    fn drop(&mut self) {
        // SAFETY: our own reference, released once.
        unsafe { ffi::av_buffer_unref(&mut self.0) };
    }
}

fn out_of_memory() -> Error {
    Error::new(ErrorKind::LimitExceeded, "out of memory")
}

/// Frames of several objects stacked along a new first axis (SPDL's
/// `convert_frames` of a list): `[B, ...]`. Errors: `InvalidArgument` for
/// an empty list or arrays of different shapes; as [`Frames::to_array`].
pub fn stack_arrays(frames: &[&Frames]) -> Result<FrameArray> {
    let mut out: Option<FrameArray> = None;
    let formats: Vec<String> = frames.iter().map(|f| f.format_name()).collect();
    if let Some(other) = formats.iter().find(|f| **f != formats[0]) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "frames of formats {} and {other} cannot be stacked",
                formats[0]
            ),
        ));
    }
    for f in frames {
        let a = f.to_array()?;
        match out.as_mut() {
            None => {
                // Room for all of them at once: no regrowth copies of the batch.
                let mut data = a.data;
                data.reserve_exact(data.len() * (frames.len() - 1));
                out = Some(FrameArray {
                    shape: std::iter::once(1).chain(a.shape.iter().copied()).collect(),
                    dtype: a.dtype,
                    data,
                })
            }
            Some(o) => {
                if o.shape[1..] != a.shape[..] || o.dtype != a.dtype {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "frames of shape {:?} and {:?} cannot be stacked",
                            &o.shape[1..],
                            a.shape
                        ),
                    ));
                }
                o.shape[0] += 1;
                o.data.extend_from_slice(&a.data);
            }
        }
    }
    out.ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "no frames to convert"))
}
