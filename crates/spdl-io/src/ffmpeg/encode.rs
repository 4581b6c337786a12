//! Encoding frames and writing containers, as SPDL's `VideoEncoder` / `AudioEncoder`,
//! `video_encode_config` / `audio_encode_config`, `Muxer` and `encode_image`.
//!
//! An [`Encoder`] turns [`Frames`] into [`Packets`] (converting the pixel or sample format
//! through a filter graph when the frames' differs from the encoder's); a [`Muxer`] writes
//! packets (from an encoder, or demuxed ones: remuxing) into a file.

use std::path::{Path, PathBuf};

use ffmpeg_next::{self as ff, codec, ffi, media};
use smart_default::SmartDefault;

use super::filter::FilterGraph;
use super::frames::{
    pix_fmt_from_name, pix_fmt_name, sample_fmt_from_name, sample_fmt_name, Frames, MediaKind,
};
use super::packets::{Codec, Packets};
use super::{ff_err, init};
use crate::{Error, ErrorKind, Result};

/// What video and audio encoders share: how hard they compress, as FFmpeg's codec options
/// `-b`, `-compression_level` and `-qscale` (SPDL's `bit_rate`, `compression_level`, `qscale`).
/// `-1` (the default) leaves FFmpeg's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, SmartDefault)]
pub struct RateControl {
    /// Bits per second; `-1` or 0: the encoder's default.
    #[default(-1)]
    pub bit_rate: i64,
    /// Encoder-specific compression level (e.g. PNG's zlib level, FLAC's 0..12).
    #[default(-1)]
    pub compression_level: i32,
    /// Fixed quantizer (`-qscale`), e.g. 2..31 for MJPEG.
    #[default(-1)]
    pub qscale: i32,
}

impl RateControl {
    /// Sets what is not `-1` on the codec context `p`.
    ///
    /// # Safety
    /// `p` is an unopened codec context.
    unsafe fn apply(&self, p: *mut ffi::AVCodecContext) {
        // SAFETY: as documented.
        unsafe {
            if self.bit_rate > 0 {
                (*p).bit_rate = self.bit_rate;
            }
            if self.compression_level >= 0 {
                (*p).compression_level = self.compression_level;
            }
            if self.qscale >= 0 {
                (*p).flags |= ffi::AV_CODEC_FLAG_QSCALE as i32;
                (*p).global_quality = ffi::FF_QP2LAMBDA * self.qscale;
            }
        }
    }
}

/// Video encoder settings, as SPDL's `video_encode_config`. `-1` / `None` leave FFmpeg's
/// default.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoEncodeConfig {
    /// Picture width in pixels.
    pub width: u32,
    /// Picture height in pixels.
    pub height: u32,
    /// Frames per second `(num, den)`; `None`: 25/1 (images: 1/1).
    pub frame_rate: Option<(i32, i32)>,
    /// The encoder's pixel format; `None`: the frames' if the encoder takes it, else its first.
    pub pix_fmt: Option<String>,
    /// Bit rate, compression level, quantizer.
    pub rate: RateControl,
    /// Key frame interval.
    pub gop_size: i32,
    /// Maximum consecutive B-frames.
    pub max_b_frames: i32,
    /// Colour space tag (`av_color_space_from_name` names, e.g. `"bt709"`).
    pub colorspace: Option<String>,
    /// Colour primaries tag (e.g. `"bt709"`).
    pub color_primaries: Option<String>,
    /// Transfer characteristic tag (e.g. `"bt709"`, `"iec61966-2-1"`).
    pub color_trc: Option<String>,
}

impl VideoEncodeConfig {
    /// `width` x `height` with FFmpeg's defaults for the rest.
    pub fn new(width: u32, height: u32) -> Self {
        VideoEncodeConfig {
            width,
            height,
            frame_rate: None,
            pix_fmt: None,
            rate: RateControl::default(),
            gop_size: -1,
            max_b_frames: -1,
            colorspace: None,
            color_primaries: None,
            color_trc: None,
        }
    }
}

/// Audio encoder settings, as SPDL's `audio_encode_config`.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioEncodeConfig {
    /// Number of channels.
    pub num_channels: usize,
    /// The encoder's sample format; `None`: the frames' if the encoder takes it, else its first.
    pub sample_fmt: Option<String>,
    /// Sample rate in Hz; `None`: 44100.
    pub sample_rate: Option<u32>,
    /// Bit rate, compression level, quantizer.
    pub rate: RateControl,
}

impl AudioEncodeConfig {
    /// `num_channels` channels with FFmpeg's defaults for the rest (the sample format as
    /// [`AudioEncodeConfig::sample_fmt`] says for `None`, 44100 Hz).
    pub fn new(num_channels: usize) -> Self {
        AudioEncodeConfig {
            num_channels,
            sample_fmt: None,
            sample_rate: None,
            rate: RateControl::default(),
        }
    }
}

/// A video or audio encoder setting.
#[derive(Debug, Clone, PartialEq)]
pub enum EncodeConfig {
    /// Video.
    Video(VideoEncodeConfig),
    /// Audio.
    Audio(AudioEncodeConfig),
}

/// An open encoder. As SPDL's `VideoEncoder` / `AudioEncoder`.
#[derive(derive_more::Debug)]
pub struct Encoder {
    #[debug(skip)]
    enc: codec::encoder::Encoder,
    kind: MediaKind,
    time_base: ff::Rational,
    /// The output description (codec parameters of the encoded packets).
    codec: Codec,
    /// Converts frames of another format to the encoder's, made on the first such frame.
    #[debug(skip)]
    convert: Option<FilterGraph>,
    format: i32,
    frame_size: usize,
    flushed: bool,
    key: String,
    /// The last frame's pts in the encoder's time base: two frames on one
    /// timestamp would be dropped by the muxer.
    last_pts: Option<i64>,
}

// SAFETY: the codec context and graph are owned here and used through `&mut self` only.
unsafe impl Send for Encoder {}

fn unsupported(what: String) -> Error {
    Error::new(ErrorKind::Unsupported, what)
}

impl Encoder {
    /// Opens encoder `name` (or the default encoder of `default_codec`) for `config`, with
    /// `options` (encoder private options such as `crf`); `global_header` when the container
    /// wants codec headers out of band (MP4).
    ///
    /// Errors: `Unsupported` for an unknown encoder or one for another media type;
    /// `InvalidArgument` for a pixel/sample format it does not take, an option it does not
    /// know, or settings it rejects.
    pub fn new(
        config: &EncodeConfig,
        name: Option<&str>,
        default_codec: Option<codec::Id>,
        options: &[(String, String)],
        global_header: bool,
    ) -> Result<Self> {
        init();
        let found = match (name, default_codec) {
            (Some(n), _) => ff::encoder::find_by_name(super::no_nul("encoder", n).map(|()| n)?)
                .ok_or_else(|| {
                    unsupported(format!("no encoder named {n:?} (see `ffmpeg -encoders`)"))
                })?,
            (None, Some(id)) => ff::encoder::find(id)
                .ok_or_else(|| unsupported(format!("this FFmpeg has no encoder for {id:?}")))?,
            (None, None) => return Err(unsupported("no encoder given and no default".into())),
        };
        let kind = match config {
            EncodeConfig::Video(_) => MediaKind::Video,
            EncodeConfig::Audio(_) => MediaKind::Audio,
        };
        let want = if kind == MediaKind::Audio {
            media::Type::Audio
        } else {
            media::Type::Video
        };
        if found.medium() != want {
            return Err(unsupported(format!(
                "{} is not a {} encoder",
                found.name(),
                kind.name()
            )));
        }
        let mut ctx = codec::Context::new_with_codec(found);
        let p = ctx_ptr(&mut ctx);
        let time_base;
        let format;
        // SAFETY: `p` is a fresh, unopened codec context of `found`; plain field writes and
        // reads of the codec's static format lists (terminated by -1).
        unsafe {
            match config {
                EncodeConfig::Video(c) => {
                    (*p).width = c.width as i32;
                    (*p).height = c.height as i32;
                    let (n, d) = c.frame_rate.unwrap_or((25, 1));
                    if n <= 0 || d <= 0 {
                        return Err(Error::new(
                            ErrorKind::InvalidArgument,
                            "frame_rate must be positive",
                        ));
                    }
                    (*p).framerate = ffi::AVRational { num: n, den: d };
                    (*p).time_base = ffi::AVRational { num: d, den: n };
                    format = match &c.pix_fmt {
                        Some(f) => pix_fmt_from_name(f)? as i32,
                        None => first_fmt((*found.as_ptr()).pix_fmts.cast()).unwrap_or(-1),
                    };
                    (*p).pix_fmt = std::mem::transmute::<i32, ffi::AVPixelFormat>(format);
                    if c.gop_size >= 0 {
                        (*p).gop_size = c.gop_size;
                    }
                    if c.max_b_frames >= 0 {
                        (*p).max_b_frames = c.max_b_frames;
                    }
                    c.rate.apply(p);
                    color_tags(p, c)?;
                }
                EncodeConfig::Audio(c) => {
                    let rate = c.sample_rate.unwrap_or(44100) as i32;
                    (*p).sample_rate = rate;
                    (*p).time_base = ffi::AVRational { num: 1, den: rate };
                    ffi::av_channel_layout_default(&mut (*p).ch_layout, c.num_channels as i32);
                    format = match &c.sample_fmt {
                        Some(f) => sample_fmt_from_name(f)? as i32,
                        None => first_fmt((*found.as_ptr()).sample_fmts.cast()).unwrap_or(-1),
                    };
                    (*p).sample_fmt = std::mem::transmute::<i32, ffi::AVSampleFormat>(format);
                    c.rate.apply(p);
                }
            }
            if global_header {
                (*p).flags |= ffi::AV_CODEC_FLAG_GLOBAL_HEADER as i32;
            }
            time_base = ff::Rational::from((*p).time_base);
        }
        let options = super::dictionary("encoder option", options)?;
        // SAFETY: `p` is the fresh context of `found`, owned by `ctx` and used only here.
        unsafe { super::open_codec(p, &found, options, "encoder", ErrorKind::InvalidArgument)? };
        let mut params = codec::Parameters::new();
        // SAFETY: the context is open; parameters are copied out of it.
        let frame_size = unsafe {
            ffi::avcodec_parameters_from_context(params.as_mut_ptr(), p);
            usize::try_from((*p).frame_size).unwrap_or(0)
        };
        let fr = match config {
            EncodeConfig::Video(c) => c.frame_rate.unwrap_or((25, 1)),
            EncodeConfig::Audio(_) => (0, 1),
        };
        Ok(Encoder {
            enc: codec::encoder::Encoder(ctx),
            kind,
            time_base,
            codec: Codec::new(kind, params, time_base, ff::Rational::new(fr.0, fr.1), 0),
            convert: None,
            format,
            frame_size,
            flushed: false,
            key: String::new(),
            last_pts: None,
        })
    }

    /// The encoded packets' codec (for [`Muxer::add_remux_stream`] or decoding them).
    pub fn codec(&self) -> &Codec {
        &self.codec
    }

    /// Audio: samples per frame the encoder wants (0: any). As SPDL's `frame_size`.
    pub fn frame_size(&self) -> usize {
        self.frame_size
    }

    /// Encodes `frames` (their pts rescaled from their time base to the encoder's); the
    /// packets ready so far. Errors: `InvalidArgument` for frames of another kind, size or
    /// channel count; `Corrupt` for encoder failures.
    pub fn encode(&mut self, frames: &Frames) -> Result<Packets> {
        if self.flushed {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the encoder was flushed",
            ));
        }
        let frame_audio = frames.kind() == MediaKind::Audio;
        if frame_audio != (self.kind == MediaKind::Audio) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{} frames cannot go into a {} encoder",
                    frames.kind().name(),
                    self.kind.name()
                ),
            ));
        }
        let (n, d) = frames.time_base();
        let src_tb = ff::Rational::new(n, d);
        let mut out = Vec::new();
        for f in frames.raw() {
            // SAFETY: a valid frame; a new reference whose pts is rescaled.
            let mut f = unsafe { super::frames::owned_frame(ffi::av_frame_clone(f.as_ptr())) };
            // SAFETY: `f` is ours; plain field access.
            unsafe {
                let p = f.as_mut_ptr();
                if (*p).pts != ffi::AV_NOPTS_VALUE {
                    (*p).pts = ffi::av_rescale_q((*p).pts, src_tb.into(), self.time_base.into());
                }
                (*p).pict_type = ffi::AVPictureType::AV_PICTURE_TYPE_NONE;
            }
            self.check_shape(&f)?;
            // SAFETY: reading the pts of our own frame.
            let pts = unsafe { (*f.as_ptr()).pts };
            if pts != ffi::AV_NOPTS_VALUE {
                if self.last_pts.is_some_and(|last| pts <= last) {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "frames reach the encoder out of order or on one timestamp ({pts} \
                             after {} in its time base {}/{}): give the encoder the frames' \
                             rate, or convert the rate first (e.g. the fps filter)",
                            self.last_pts.unwrap_or_default(),
                            self.time_base.numerator(),
                            self.time_base.denominator()
                        ),
                    ));
                }
                self.last_pts = Some(pts);
            }
            // SAFETY: reading the format of a valid frame.
            let fmt = unsafe { (*f.as_ptr()).format };
            if fmt != self.format || self.convert.is_some() {
                self.convert_and_send(&f, &mut out)?;
            } else {
                self.send(Some(&f), &mut out)?;
            }
        }
        Ok(self.packets(out))
    }

    /// A frame must have the encoder's picture size, or its channel count and sample rate:
    /// the encoder reads it as its own (a mono frame read as stereo reads past its planes).
    fn check_shape(&self, f: &ff::Frame) -> Result<()> {
        // SAFETY: reading plain fields of a valid frame and of the opened codec context.
        let (f, c) = unsafe { (&*f.as_ptr(), &*self.enc.as_ptr()) };
        let mismatch = if self.kind == MediaKind::Audio {
            (f.ch_layout.nb_channels != c.ch_layout.nb_channels || f.sample_rate != c.sample_rate)
                .then(|| {
                    format!(
                        "audio frames of {} channel(s) at {} Hz cannot go into an encoder of {} \
                         channel(s) at {} Hz (convert them first, e.g. with the filter \
                         \"aresample={},aformat=channel_layouts=...\")",
                        f.ch_layout.nb_channels,
                        f.sample_rate,
                        c.ch_layout.nb_channels,
                        c.sample_rate,
                        c.sample_rate
                    )
                })
        } else {
            (f.width != c.width || f.height != c.height).then(|| {
                format!(
                    "frames of {}x{} cannot go into an encoder of {}x{} (scale them first)",
                    f.width, f.height, c.width, c.height
                )
            })
        };
        match mismatch {
            Some(why) => Err(Error::new(ErrorKind::InvalidArgument, why)),
            None => Ok(()),
        }
    }

    fn convert_and_send(&mut self, f: &ff::Frame, out: &mut Vec<ff::Packet>) -> Result<()> {
        if self.convert.is_none() {
            let g = if self.kind == MediaKind::Audio {
                let desc = format!("aformat=sample_fmts={}", sample_fmt_name(self.format));
                // SAFETY: a view of `f` that is never dropped.
                let a = std::mem::ManuallyDrop::new(unsafe {
                    ff::frame::Audio::wrap(f.as_ptr().cast_mut())
                });
                FilterGraph::audio(&desc, &a, self.time_base)?
            } else {
                let desc = format!("format=pix_fmts={}", pix_fmt_name(self.format));
                // SAFETY: a view of `f` that is never dropped.
                let v = std::mem::ManuallyDrop::new(unsafe {
                    ff::frame::Video::wrap(f.as_ptr().cast_mut())
                });
                FilterGraph::video(&desc, &v, self.time_base, 1)?
            };
            self.convert = Some(g);
        }
        let g = self.convert.as_mut().expect("set above");
        g.push(Some(f))?;
        loop {
            // SAFETY: an owned blank frame for the sink.
            let mut c = unsafe { ff::Frame::empty() };
            if !self.convert.as_mut().expect("set").pull(&mut c)? {
                return Ok(());
            }
            self.send(Some(&c), out)?;
        }
    }

    fn send(&mut self, f: Option<&ff::Frame>, out: &mut Vec<ff::Packet>) -> Result<()> {
        let r = match f {
            Some(f) => self.enc.send_frame(f),
            None => self.enc.send_eof(),
        };
        match r {
            Ok(()) | Err(ff::Error::Eof) => {}
            Err(e) => return Err(ff_err(ErrorKind::InvalidArgument, "encoding", e)),
        }
        loop {
            let mut p = ff::Packet::empty();
            match self.enc.receive_packet(&mut p) {
                Ok(()) => {
                    self.set_duration(&mut p);
                    out.push(p)
                }
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {
                    return Ok(())
                }
                Err(ff::Error::Eof) => return Ok(()),
                Err(e) => return Err(ff_err(ErrorKind::Corrupt, "encoding", e)),
            }
        }
    }

    /// A video packet without a duration gets one frame's (from the encoder's frame rate):
    /// MP4 ends the stream's edit at the last packet's end, so a last packet of duration 0
    /// is marked discarded (the last frame, or a one-frame image, lost on reading).
    fn set_duration(&self, p: &mut ff::Packet) {
        if self.kind != MediaKind::Video || p.duration() > 0 {
            return;
        }
        // SAFETY: reading the frame rate of the opened codec context.
        let rate = unsafe { (*self.enc.as_ptr()).framerate };
        if rate.num > 0 && rate.den > 0 {
            // SAFETY: pure arithmetic on rationals.
            let one = unsafe { ffi::av_rescale_q(1, ffi::av_inv_q(rate), self.time_base.into()) };
            if one > 0 {
                p.set_duration(one);
            }
        }
    }

    fn packets(&self, packets: Vec<ff::Packet>) -> Packets {
        Packets {
            key: self.key.clone(),
            codec: self.codec.clone(),
            packets,
            window: None,
            stream_index: 0,
            codec_attached: true,
            memory: None,
        }
    }

    /// Ends the stream: the packets the encoder still held. As SPDL's `flush`.
    pub fn flush(&mut self) -> Result<Packets> {
        let mut out = Vec::new();
        if !self.flushed {
            self.flushed = true;
            if let Some(g) = self.convert.as_mut() {
                g.push(None)?;
                loop {
                    // SAFETY: an owned blank frame for the sink.
                    let mut c = unsafe { ff::Frame::empty() };
                    if !self.convert.as_mut().expect("set").pull(&mut c)? {
                        break;
                    }
                    self.send(Some(&c), &mut out)?;
                }
            }
            self.send(None, &mut out)?;
        }
        Ok(self.packets(out))
    }
}

fn ctx_ptr(ctx: &mut codec::Context) -> *mut ffi::AVCodecContext {
    // SAFETY: the pointer is used while `ctx` lives (in `Encoder::new`).
    unsafe { ctx.as_mut_ptr() }
}

/// The first entry of an FFmpeg format list terminated by -1 (null: none).
///
/// # Safety
/// `list` is null or a static array of `i32` ending in -1.
unsafe fn first_fmt(list: *const i32) -> Option<i32> {
    if list.is_null() {
        return None;
    }
    // SAFETY: as documented.
    let v = unsafe { *list };
    (v != -1).then_some(v)
}

/// Sets the colour tags of `c` (each `None` leaves FFmpeg's "unspecified").
///
/// # Safety
/// `p` is an unopened codec context.
unsafe fn color_tags(p: *mut ffi::AVCodecContext, c: &VideoEncodeConfig) -> Result<()> {
    let lookup =
        |what: &str, name: &str, f: unsafe extern "C" fn(*const std::ffi::c_char) -> i32| {
            let cs = std::ffi::CString::new(name).unwrap_or_default();
            // SAFETY: a valid C string; the lookup returns a negative value when unknown.
            let v = unsafe { f(cs.as_ptr()) };
            if v < 0 {
                Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("unknown {what} {name:?}"),
                ))
            } else {
                Ok(v)
            }
        };
    // SAFETY: as documented; the values come from FFmpeg's own name tables, so they are
    // valid enum values.
    unsafe {
        if let Some(n) = &c.colorspace {
            (*p).colorspace = std::mem::transmute::<u32, ffi::AVColorSpace>(lookup(
                "colorspace",
                n,
                ffi::av_color_space_from_name,
            )? as u32);
        }
        if let Some(n) = &c.color_primaries {
            (*p).color_primaries = std::mem::transmute::<u32, ffi::AVColorPrimaries>(lookup(
                "color_primaries",
                n,
                ffi::av_color_primaries_from_name,
            )?
                as u32);
        }
        if let Some(n) = &c.color_trc {
            (*p).color_trc = std::mem::transmute::<u32, ffi::AVColorTransferCharacteristic>(
                lookup("color_trc", n, ffi::av_color_transfer_from_name)? as u32,
            );
        }
    }
    Ok(())
}

/// A container being written. As SPDL's `Muxer(dst, *, format=None)`: add streams, `open`,
/// `write` packets per stream, `close` (or `flush` first).
#[derive(derive_more::Debug)]
pub struct Muxer {
    #[debug(skip)]
    out: ff::format::context::Output,
    path: PathBuf,
    /// Each stream's incoming packets' time base.
    in_tb: Vec<ff::Rational>,
    opened: bool,
    closed: bool,
}

// SAFETY: the output context is owned here and used through `&mut self` only.
unsafe impl Send for Muxer {}

impl Muxer {
    /// Creates `path` for writing, as `format` (`ffmpeg -muxers` names) or guessed from the
    /// extension. Errors: `InvalidArgument` naming the path when the format is unknown or
    /// the file cannot be created.
    pub fn new(path: &Path, format: Option<&str>) -> Result<Self> {
        init();
        let key = path.to_string_lossy();
        super::no_nul("output path", &key).map_err(|e| e.with_key(&key))?;
        if let Some(f) = format {
            super::no_nul("container format", f).map_err(|e| e.with_key(&key))?;
        }
        let out = match format {
            Some(f) => ff::format::output_as(path, f),
            None => ff::format::output(path),
        }
        .map_err(|e| {
            ff_err(ErrorKind::InvalidArgument, "creating the output", e)
                .with_key(&path.to_string_lossy())
        })?;
        Ok(Muxer {
            out,
            path: path.to_owned(),
            in_tb: Vec::new(),
            opened: false,
            closed: false,
        })
    }

    fn key(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    fn check_adding(&self) -> Result<()> {
        if self.opened {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "streams must be added before open()",
            ));
        }
        Ok(())
    }

    /// Adds a stream encoded by a new [`Encoder`] (`encoder` by name, else the container's
    /// default codec for the media type); returns the encoder. Errors as [`Encoder::new`].
    pub fn add_encode_stream(
        &mut self,
        config: &EncodeConfig,
        encoder: Option<&str>,
        options: &[(String, String)],
    ) -> Result<Encoder> {
        self.check_adding()?;
        let fmt = self.out.format();
        let file =
            std::ffi::CString::new(self.path.to_string_lossy().as_bytes()).unwrap_or_default();
        // SAFETY: reading the static output format description; av_guess_codec picks the
        // codec by format and file name (image2: `.png` -> PNG, `.jpg` -> MJPEG).
        let (default, global) = unsafe {
            let f = fmt.as_ptr();
            let media = match config {
                EncodeConfig::Video(_) => ffi::AVMediaType::AVMEDIA_TYPE_VIDEO,
                EncodeConfig::Audio(_) => ffi::AVMediaType::AVMEDIA_TYPE_AUDIO,
            };
            let id = ffi::av_guess_codec(
                f.cast_mut(),
                std::ptr::null(),
                file.as_ptr(),
                std::ptr::null(),
                media,
            );
            (
                codec::Id::from(id),
                (*f).flags & ffi::AVFMT_GLOBALHEADER != 0,
            )
        };
        let mut enc = Encoder::new(config, encoder, Some(default), options, global)
            .map_err(|e| e.with_key(&self.key()))?;
        enc.key = self.key();
        self.add_stream(enc.codec())?;
        Ok(enc)
    }

    /// Adds a stream whose packets are written as they are (remuxing demuxed packets of
    /// `codec`). Errors: `InvalidArgument` after `open`.
    pub fn add_remux_stream(&mut self, codec: &Codec) -> Result<()> {
        self.check_adding()?;
        self.add_stream(codec)
    }

    fn add_stream(&mut self, codec: &Codec) -> Result<()> {
        // SAFETY: the context is not yet opened; the new stream (owned by the context) gets a
        // copy of the codec parameters, a zero tag (the muxer chooses) and the time base.
        let ok = unsafe {
            let st = ffi::avformat_new_stream(self.out.as_mut_ptr(), std::ptr::null());
            if st.is_null() {
                false
            } else {
                let r = ffi::avcodec_parameters_copy((*st).codecpar, codec.params.0.as_ptr());
                (*(*st).codecpar).codec_tag = 0;
                (*st).time_base = codec.time_base.into();
                r >= 0
            }
        };
        if !ok {
            return Err(
                Error::new(ErrorKind::LimitExceeded, "out of memory adding a stream")
                    .with_key(&self.key()),
            );
        }
        self.in_tb.push(codec.time_base);
        Ok(())
    }

    /// Writes the container header, with muxer `options`. Errors: `InvalidArgument` for an
    /// option the muxer does not take or streams it cannot hold.
    pub fn open(&mut self, options: &[(String, String)]) -> Result<()> {
        if self.opened {
            return Ok(());
        }
        let key = self.key();
        let options = super::dictionary("muxer option", options).map_err(|e| e.with_key(&key))?;
        let left = self.out.write_header_with(options).map_err(|e| {
            ff_err(ErrorKind::InvalidArgument, "writing the header", e).with_key(&key)
        })?;
        let unused: Vec<String> = left.iter().map(|(k, _)| k.to_owned()).collect();
        if !unused.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("muxer option(s) not recognized: {}", unused.join(", ")),
            )
            .with_key(&key));
        }
        self.opened = true;
        Ok(())
    }

    /// Writes `packets` to stream `index` (timestamps rescaled to the stream's time base).
    /// Errors: `InvalidArgument` for a bad index or before `open`; `Corrupt` from the muxer.
    pub fn write(&mut self, index: usize, packets: &Packets) -> Result<()> {
        let key = self.key();
        if !self.opened || self.closed {
            return Err(
                Error::new(ErrorKind::InvalidArgument, "write() needs an open muxer")
                    .with_key(&key),
            );
        }
        let n = self.in_tb.len();
        let Some(&in_tb) = self.in_tb.get(index) else {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("no stream {index} (the muxer has {n})"),
            )
            .with_key(&key));
        };
        let out_tb = self.out.stream(index).expect("checked").time_base();
        for p in &packets.packets {
            let mut p = p.clone();
            p.rescale_ts(in_tb, out_tb);
            p.set_stream(index);
            p.set_position(-1);
            p.write_interleaved(&mut self.out)
                .map_err(|e| ff_err(ErrorKind::Corrupt, "writing packets", e).with_key(&key))?;
        }
        Ok(())
    }

    /// Writes what the muxer buffered for interleaving.
    pub fn flush(&mut self) -> Result<()> {
        if self.opened && !self.closed {
            // SAFETY: the context is open; a null packet flushes the interleaving queue.
            let r = unsafe {
                ffi::av_interleaved_write_frame(self.out.as_mut_ptr(), std::ptr::null_mut())
            };
            if r < 0 {
                return Err(ff_err(ErrorKind::Corrupt, "flushing", ff::Error::from(r))
                    .with_key(&self.key()));
            }
        }
        Ok(())
    }

    /// Writes the trailer and closes the file (also done, errors ignored, on drop).
    pub fn close(&mut self) -> Result<()> {
        if self.opened && !self.closed {
            self.closed = true;
            let key = self.key();
            self.out
                .write_trailer()
                .map_err(|e| ff_err(ErrorKind::Corrupt, "writing the trailer", e).with_key(&key))?;
        }
        Ok(())
    }
}

impl Drop for Muxer {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Writes one picture to `path` (format from the extension: `.png`, `.jpg`, `.bmp`, ...,
/// encoder the container's default), as SPDL's `encode_image` / `save_image`. `data` is laid
/// out as [`Frames::to_array`] gives `pix_fmt` (`[H, W, 3]` for `rgb24`); `config` (its width
/// and height must match) sets the encoder's pixel format and quality.
///
/// Errors: `InvalidArgument` for a shape that does not fit, an unknown extension or a file
/// that cannot be written; `Unsupported` for formats without an encoder.
pub fn encode_image(
    path: &Path,
    data: &[u8],
    shape: &[usize],
    pix_fmt: &str,
    config: Option<&VideoEncodeConfig>,
) -> Result<()> {
    let mut s = vec![1usize];
    s.extend_from_slice(shape);
    let frames = Frames::from_video_array(data, &s, pix_fmt, (1, 1), 0)?;
    let mut cfg = config
        .cloned()
        .unwrap_or_else(|| VideoEncodeConfig::new(frames.width() as u32, frames.height() as u32));
    if (cfg.width as usize, cfg.height as usize) != (frames.width(), frames.height()) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "encode config is {}x{} but the image is {}x{}",
                cfg.width,
                cfg.height,
                frames.width(),
                frames.height()
            ),
        ));
    }
    cfg.frame_rate.get_or_insert((1, 1));
    let mut mux = Muxer::new(path, None)?;
    let fmt = mux.out.format();
    let file = std::ffi::CString::new(path.to_string_lossy().as_bytes()).unwrap_or_default();
    // SAFETY: as in `add_encode_stream`.
    let id = codec::Id::from(unsafe {
        ffi::av_guess_codec(
            fmt.as_ptr().cast_mut(),
            std::ptr::null(),
            file.as_ptr(),
            std::ptr::null(),
            ffi::AVMediaType::AVMEDIA_TYPE_VIDEO,
        )
    });
    if cfg.pix_fmt.is_none() {
        // The input's format when the encoder takes it (lossless PNG of RGB), else its first.
        if let Some(enc) = ff::encoder::find(id) {
            // SAFETY: the encoder's static pixel format list (or null).
            let list = unsafe { (*enc.as_ptr()).pix_fmts };
            let want = pix_fmt_from_name(pix_fmt)? as i32;
            let mut i = 0;
            // SAFETY: the list ends in -1.
            while !list.is_null() && unsafe { *list.add(i) } as i32 != -1 {
                // SAFETY: within the list.
                if unsafe { *list.add(i) } as i32 == want {
                    cfg.pix_fmt = Some(pix_fmt.to_owned());
                    break;
                }
                i += 1;
            }
        }
    }
    let mut enc = mux.add_encode_stream(&EncodeConfig::Video(cfg), None, &[])?;
    mux.open(&[])?;
    let p = enc.encode(&frames)?;
    mux.write(0, &p)?;
    let p = enc.flush()?;
    mux.write(0, &p)?;
    mux.close()
}
