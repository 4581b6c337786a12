//! The FFmpeg backend shared by [`crate::video`] and [`crate::audio`]
//! (feature `decode-ffmpeg`): where the bytes come from ([`MediaSource`]),
//! demuxing through custom I/O, and FFmpeg errors mapped to [`Error`].
//!
//! # Supported FFmpeg versions
//!
//! Built on `ffmpeg-next` 9 against the system libraries found by
//! `pkg-config`. Built and tested with FFmpeg 5.1 (Debian 12: libavcodec 59,
//! libavformat 59, libswscale 6, libswresample 4). `ffmpeg-next` 9 also builds
//! against FFmpeg 4.x, 6.x and 7.x; those are not tested here. Call
//! [`ffmpeg_versions`] to see what a binary runs against.
//!
//! # Threads
//!
//! Every call opens its own demuxer, decoder, scaler and resampler, so any
//! number of threads may decode at once; nothing is shared between calls
//! except FFmpeg's global, thread-safe registries. The results are plain
//! `Send + Sync` data.

pub mod bsf;
pub mod config;
pub mod decoder;
pub mod demux;
pub mod encode;
pub(crate) mod filter;
mod frame_pool;
pub mod frames;
pub mod graph;
pub mod image_filter;
mod io;
pub(crate) mod mem;
pub mod packets;

use std::borrow::Cow;
use std::ffi::c_int;
use std::fs::File;
use std::path::Path;
use std::ptr;
use std::sync::{Arc, Once};

use ffmpeg_next::{self as ff, ffi};

use crate::{Error, ErrorKind, Result};
pub use config::{DecodeConfig, DemuxConfig};
use io::{AvioContext, Reader};

/// Where a video or audio sample comes from: bytes already in memory (fetched
/// from HTTP, S3, an archive) or a local file. Both are demuxed through the
/// same custom I/O (an `AVIOContext` with read/seek callbacks), so in-memory
/// bytes need no temporary file and are not copied.
///
/// The key names the sample in every error (`"corrupt: clips/a.mp4: ..."`).
#[derive(Debug, Clone)]
pub struct MediaSource<'a> {
    key: Cow<'a, str>,
    kind: SourceKind<'a>,
}

#[derive(Debug, Clone)]
enum SourceKind<'a> {
    Bytes(&'a [u8]),
    Shared(Arc<[u8]>),
    File(Cow<'a, Path>),
}

impl<'a> MediaSource<'a> {
    /// In-memory bytes of a whole container file, named `key` in errors (use
    /// `""` when no name is known; callers may attach one later with
    /// [`Error::with_key`]).
    pub fn bytes(key: &'a str, data: &'a [u8]) -> Self {
        MediaSource {
            key: Cow::Borrowed(key),
            kind: SourceKind::Bytes(data),
        }
    }

    /// A local file, named by its path in errors.
    pub fn file(path: &'a Path) -> Self {
        MediaSource {
            key: path.to_string_lossy(),
            kind: SourceKind::File(Cow::Borrowed(path)),
        }
    }

    /// Shared in-memory bytes, named `key` in errors: a source that owns
    /// what it reads, for a [`demux::Demuxer`] kept beyond the caller's borrow.
    pub fn shared(key: impl Into<String>, data: Arc<[u8]>) -> MediaSource<'static> {
        MediaSource {
            key: Cow::Owned(key.into()),
            kind: SourceKind::Shared(data),
        }
    }

    /// A local file, owning its path (see [`MediaSource::shared`]).
    pub fn file_owned(path: std::path::PathBuf) -> MediaSource<'static> {
        MediaSource {
            key: Cow::Owned(path.to_string_lossy().into_owned()),
            kind: SourceKind::File(Cow::Owned(path)),
        }
    }

    /// The same source named `key` in errors (e.g. a file under its dataset name).
    pub fn named(mut self, key: &str) -> Self {
        self.key = Cow::Owned(key.to_owned());
        self
    }

    /// The name used in errors.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Attaches this source's key to `err` (if it has none yet).
    pub(crate) fn err(&self, err: Error) -> Error {
        err.with_key(&self.key)
    }
}

impl<'a> From<&'a Path> for MediaSource<'a> {
    fn from(path: &'a Path) -> Self {
        MediaSource::file(path)
    }
}

impl<'a> From<&'a std::path::PathBuf> for MediaSource<'a> {
    fn from(path: &'a std::path::PathBuf) -> Self {
        MediaSource::file(path)
    }
}

impl<'a> From<&'a [u8]> for MediaSource<'a> {
    fn from(data: &'a [u8]) -> Self {
        MediaSource::bytes("", data)
    }
}

impl<'a> From<&'a Vec<u8>> for MediaSource<'a> {
    fn from(data: &'a Vec<u8>) -> Self {
        MediaSource::bytes("", data)
    }
}

/// The versions of the FFmpeg libraries this process runs against, e.g.
/// `"libavcodec 59.37.100, libavformat 59.27.100, libavutil 57.28.100,
/// libswscale 6.7.100, libswresample 4.7.100"`.
pub fn ffmpeg_versions() -> String {
    fn v(n: u32) -> String {
        format!("{}.{}.{}", n >> 16, (n >> 8) & 0xff, n & 0xff)
    }
    // SAFETY: the *_version() functions take no arguments and only return a
    // compile-time constant of the loaded library.
    let (codec, format, util, scale, resample) = unsafe {
        (
            ffi::avcodec_version(),
            ffi::avformat_version(),
            ffi::avutil_version(),
            ffi::swscale_version(),
            ffi::swresample_version(),
        )
    };
    format!(
        "libavcodec {}, libavformat {}, libavutil {}, libswscale {}, libswresample {}",
        v(codec),
        v(format),
        v(util),
        v(scale),
        v(resample)
    )
}

/// The FFmpeg libraries this process runs against as `(name, (major,
/// minor, micro))`, sorted by name: `libavcodec`, `libavfilter`,
/// `libavformat`, `libavutil`, `libswresample`, `libswscale`. SPDL's
/// `get_ffmpeg_versions` gives the same pairs (it lists `libavdevice`,
/// which spdl-rs does not link, instead of the last two).
pub fn ffmpeg_library_versions() -> Vec<(&'static str, (u32, u32, u32))> {
    fn v(n: u32) -> (u32, u32, u32) {
        (n >> 16, (n >> 8) & 0xff, n & 0xff)
    }
    // SAFETY: the *_version() functions take no arguments and only return a
    // compile-time constant of the loaded library.
    unsafe {
        vec![
            ("libavcodec", v(ffi::avcodec_version())),
            ("libavfilter", v(ffi::avfilter_version())),
            ("libavformat", v(ffi::avformat_version())),
            ("libavutil", v(ffi::avutil_version())),
            ("libswresample", v(ffi::swresample_version())),
            ("libswscale", v(ffi::swscale_version())),
        ]
    }
}

/// The names of the filters this FFmpeg has (`ffmpeg -filters`), in
/// libavfilter's order; what a `filter_desc` may use. As SPDL's
/// `get_ffmpeg_filters`.
pub fn ffmpeg_filters() -> Vec<String> {
    let mut names = Vec::new();
    let mut opaque: *mut std::ffi::c_void = ptr::null_mut();
    loop {
        // SAFETY: av_filter_iterate walks libavfilter's static filter table
        // with `opaque` as its cursor; it returns null at the end.
        let f = unsafe { ffi::av_filter_iterate(&mut opaque) };
        if f.is_null() {
            return names;
        }
        // SAFETY: `f` is a static AVFilter whose `name` is a static C string.
        let name = unsafe { std::ffi::CStr::from_ptr((*f).name) };
        names.push(name.to_string_lossy().into_owned());
    }
}

/// FFmpeg's current log level (`av_log_get_level`): -8 quiet, 0 panic,
/// 8 fatal, 16 error, 24 warning, 32 info, 40 verbose, 48 debug, 56 trace.
/// spdl-io sets it to 16 (error) on first use.
pub fn ffmpeg_log_level() -> i32 {
    init();
    // SAFETY: reads a global int.
    unsafe { ffi::av_log_get_level() }
}

/// Sets FFmpeg's log level (process-wide, `av_log_set_level`); values as
/// [`ffmpeg_log_level`]. As SPDL's `set_ffmpeg_log_level`.
pub fn set_ffmpeg_log_level(level: i32) {
    // After the one-time set-up, which would otherwise override it.
    init();
    // SAFETY: sets a global int; FFmpeg reads it without other state.
    unsafe { ffi::av_log_set_level(level) }
}

/// One-time global set-up: FFmpeg's log level goes to `error` so that
/// recoverable decoder warnings on damaged inputs do not flood stderr (the
/// errors that matter come back as [`Error`]s).
pub(crate) fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        // Thread-safe; with the features used here it registers nothing global.
        let _ = ff::init();
        ff::util::log::set_level(ff::util::log::Level::Error);
    });
}

/// An FFmpeg error as an [`Error`] of `kind`, saying what was being done.
pub(crate) fn ff_err(kind: ErrorKind, what: &str, e: ff::Error) -> Error {
    Error::new(kind, format!("{what}: {e}")).with_source(e)
}

/// An open demuxer over custom I/O.
///
/// Field order matters: `input` (the `AVFormatContext`) is dropped before
/// `io` (the `AVIOContext` it reads through).
pub(crate) struct Demuxer<'a> {
    input: ff::format::context::Input,
    io: AvioContext<'a>,
    /// Packets read per stream.
    packets: Vec<u64>,
    /// `IoState::eof_reads` once the headers were read.
    eof_reads_at_open: u64,
    /// A seek happened, so packet counts no longer start at the beginning.
    seeked: bool,
}

impl<'a> Demuxer<'a> {
    /// Opens `src`: probes the container (unless `config` forces a
    /// `format`) and reads the stream headers (`avformat_open_input` +
    /// `avformat_find_stream_info`), with `config`'s demuxer options and I/O
    /// buffer size.
    ///
    /// Errors: `Empty` (zero bytes), `InvalidArgument` (file cannot be opened,
    /// an unknown format name or an option the demuxer does not take),
    /// `UnknownFormat` (no container FFmpeg recognizes), `Truncated` (the
    /// header points past the end of the data), `Corrupt` (anything else).
    pub(crate) fn open_with(src: &MediaSource<'a>, config: &DemuxConfig) -> Result<Self> {
        init();
        let reader = match &src.kind {
            SourceKind::Bytes(data) => {
                if data.is_empty() {
                    return Err(src.err(Error::new(ErrorKind::Empty, "zero bytes")));
                }
                Reader::Slice { data, pos: 0 }
            }
            SourceKind::Shared(data) => {
                if data.is_empty() {
                    return Err(src.err(Error::new(ErrorKind::Empty, "zero bytes")));
                }
                Reader::Shared {
                    data: Arc::clone(data),
                    pos: 0,
                }
            }
            SourceKind::File(path) => {
                let open = |path: &Path| -> std::io::Result<(File, u64)> {
                    let file = File::open(path)?;
                    let size = file.metadata()?.len();
                    Ok((file, size))
                };
                let (file, size) = open(path).map_err(|e| {
                    src.err(
                        Error::new(ErrorKind::InvalidArgument, format!("cannot open file: {e}"))
                            .with_source(e),
                    )
                })?;
                if size == 0 {
                    return Err(src.err(Error::new(ErrorKind::Empty, "zero bytes")));
                }
                Reader::File { file, size }
            }
        };
        let mut io =
            AvioContext::with_buffer_size(reader, config.buffer_size).ok_or_else(|| {
                src.err(Error::new(
                    ErrorKind::LimitExceeded,
                    "out of memory allocating the I/O context",
                ))
            })?;

        // A file is probed and opened under its name, as SPDL (and `ffmpeg -i`) open it by URL:
        // FFmpeg's probes then see the extension, so a `.jpg` opens as `image2` (the whole file,
        // one packet, as SPDL) rather than `jpeg_pipe` (a parser over the bytes, slower). The
        // reads still go through `io`. Bytes have no name, as in SPDL.
        let url: Option<std::ffi::CString> = match &src.kind {
            SourceKind::File(path) => {
                std::ffi::CString::new(path.to_string_lossy().as_bytes()).ok()
            }
            _ => None,
        };
        let url_ptr = url.as_ref().map_or(ptr::null(), |u| u.as_ptr());
        // Probe first, so "not a media file" is told apart from "a damaged one".
        let mut format: *const ffi::AVInputFormat = ptr::null();
        if let Some(name) = config.format.as_deref() {
            no_nul("container format", name).map_err(|e| src.err(e))?;
            let c = std::ffi::CString::new(name).unwrap_or_default();
            // SAFETY: a valid C string; returns a static demuxer or null.
            format = unsafe { ffi::av_find_input_format(c.as_ptr()) };
            if format.is_null() {
                return Err(src.err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("unknown container format {name:?} (see `ffmpeg -demuxers`)"),
                )));
            }
        }
        // SAFETY: `io` is a valid read context; `url_ptr` is null or a C string alive
        // for the call; `format` receives a pointer to a static FFmpeg demuxer
        // description (or stays null on failure).
        let probed = if !format.is_null() {
            0
        } else {
            unsafe {
                ffi::av_probe_input_buffer2(
                    io.as_mut_ptr(),
                    &mut format,
                    url_ptr,
                    ptr::null_mut(),
                    0,
                    0,
                )
            }
        };
        if probed < 0 || format.is_null() {
            let kind = if io.state().io_error.is_some() {
                ErrorKind::Truncated
            } else {
                ErrorKind::UnknownFormat
            };
            return Err(src.err(Error::new(
                kind,
                format!(
                    "not a media container FFmpeg recognizes ({})",
                    ff::Error::from(probed)
                ),
            )));
        }

        // SAFETY: allocation; checked for null.
        let mut ps = unsafe { ffi::avformat_alloc_context() };
        if ps.is_null() {
            return Err(src.err(Error::new(
                ErrorKind::LimitExceeded,
                "out of memory allocating the format context",
            )));
        }
        // SAFETY: `ps` is a fresh format context; `pb` is our context, flagged
        // as custom I/O so FFmpeg never closes it (`io` is freed after `input`).
        // On failure `avformat_open_input` frees `ps` and sets it to null.
        let options =
            dictionary("demuxer option", &config.format_options).map_err(|e| src.err(e))?;
        // SAFETY: hands the dictionary to FFmpeg; taken back with `own` below.
        let mut options = unsafe { options.disown() };
        let ret = unsafe {
            (*ps).pb = io.as_mut_ptr();
            (*ps).flags |= ffi::AVFMT_FLAG_CUSTOM_IO as c_int;
            ffi::avformat_open_input(&mut ps, url_ptr, format, &mut options)
        };
        // SAFETY: what avformat_open_input left in `options` are the entries
        // no demuxer took; read, then freed (ours since `disown`).
        let unused: Vec<String> = unsafe {
            let d = ff::Dictionary::own(options);
            d.iter().map(|(k, _)| k.to_owned()).collect()
        };
        if ret < 0 {
            return Err(src.err(open_error(&io, "opening container", ret)));
        }
        // SAFETY: `ps` was opened by `avformat_open_input`; `Input` takes
        // ownership and closes it (without touching `pb`) on drop.
        let input = unsafe { ff::format::context::Input::wrap(ps) };
        let mut demuxer = Demuxer {
            input,
            io,
            packets: Vec::new(),
            eof_reads_at_open: 0,
            seeked: false,
        };
        if !unused.is_empty() {
            // After wrapping, so that dropping `demuxer` closes the opened input.
            return Err(src.err(Error::new(
                ErrorKind::InvalidArgument,
                format!("demuxer option(s) not recognized: {}", unused.join(", ")),
            )));
        }
        // SAFETY: the context is open; stream info reads through `pb`.
        let ret =
            unsafe { ffi::avformat_find_stream_info(demuxer.input.as_mut_ptr(), ptr::null_mut()) };
        if ret < 0 {
            return Err(src.err(open_error(&demuxer.io, "reading stream info", ret)));
        }
        demuxer.packets = vec![0; demuxer.input.nb_streams() as usize];
        demuxer.eof_reads_at_open = demuxer.io.state().eof_reads;
        Ok(demuxer)
    }

    /// The format context.
    pub(crate) fn input(&self) -> &ff::format::context::Input {
        &self.input
    }

    /// Reads the next packet into `packet`: `Ok(true)`, `Ok(false)` at the
    /// end, or an error (`Truncated` when the data ran out, else `Corrupt`).
    ///
    /// The end of the data counts as `Truncated` when the demuxer had to seek
    /// past it, or when it wanted bytes past the end while a stream still had
    /// packets listed in the container's index (e.g. an MP4 cut inside its
    /// `mdat`: FFmpeg only logs "partial file" there).
    pub(crate) fn read_packet(&mut self, packet: &mut ff::Packet) -> Result<bool> {
        match packet.read(&mut self.input) {
            Ok(()) => {
                if let Some(n) = self.packets.get_mut(packet.stream()) {
                    *n += 1;
                }
                Ok(true)
            }
            Err(ff::Error::Eof) => {
                if self.ran_past_end() {
                    return Err(Error::new(
                        ErrorKind::Truncated,
                        "the data ends before the stream does (the container index points past the end)",
                    ));
                }
                if !self.seeked && self.io.state().eof_reads > self.eof_reads_at_open {
                    for st in self.input.streams() {
                        let listed = u64::try_from(st.frames()).unwrap_or(0);
                        let read = self.packets.get(st.index()).copied().unwrap_or(0);
                        if listed > 0 && read < listed {
                            return Err(Error::new(
                                ErrorKind::Truncated,
                                format!(
                                    "the data ends after {read} of the {listed} packets the container lists for stream {}",
                                    st.index()
                                ),
                            ));
                        }
                    }
                }
                Ok(false)
            }
            Err(e) => Err(self.classify(e, "reading packet")),
        }
    }

    /// Seeks stream `stream` to the key frame at or before `ts` (in the
    /// stream's time base). A target past the end of the data is not taken
    /// for truncation (the caller finds no frames there).
    pub(crate) fn seek_stream(&mut self, stream: usize, ts: i64) -> Result<()> {
        self.seeked = true;
        let was_past_end = self.io.state().past_end;
        // SAFETY: the context is open; `stream` is a valid stream index of it.
        let ret = unsafe {
            ffi::av_seek_frame(
                self.input.as_mut_ptr(),
                stream as c_int,
                ts,
                ffi::AVSEEK_FLAG_BACKWARD as c_int,
            )
        };
        self.io.state_mut().past_end = was_past_end;
        if ret < 0 {
            return Err(self.classify(ff::Error::from(ret), "seeking"));
        }
        Ok(())
    }

    /// Whether a read or seek went past the end of the data so far.
    pub(crate) fn ran_past_end(&self) -> bool {
        self.io.state().past_end || self.io.state().io_error.is_some()
    }

    /// An FFmpeg error during demuxing as `Truncated` (data ran out) or `Corrupt`.
    pub(crate) fn classify(&self, e: ff::Error, what: &str) -> Error {
        let kind = if self.ran_past_end() {
            ErrorKind::Truncated
        } else {
            ErrorKind::Corrupt
        };
        ff_err(kind, what, e)
    }
}

fn open_error(io: &AvioContext<'_>, what: &str, ret: c_int) -> Error {
    let e = ff::Error::from(ret);
    let state = io.state();
    // A header cut short (e.g. MP4 without its `moov` atom) usually ends in
    // InvalidData without a read past the end, so it reads as `Corrupt`.
    let kind = if state.past_end || state.io_error.is_some() {
        ErrorKind::Truncated
    } else {
        ErrorKind::Corrupt
    };
    let hint = if matches!(e, ff::Error::InvalidData | ff::Error::Eof) {
        " (damaged or truncated file)"
    } else {
        ""
    };
    ff_err(kind, &format!("{what}{hint}"), e)
}

/// `seconds` as the nearest fraction with a numerator and denominator up to
/// `i32::MAX` (`1/0` for infinity): how SPDL turns a window bound given as a
/// float into the rational it compares timestamps with, so that `1.1 + 0.3`
/// is `7/5` exactly, as a packet's `17920/12800` is.
pub(crate) fn seconds_q(seconds: f64) -> ffi::AVRational {
    // SAFETY: pure arithmetic.
    unsafe { ffi::av_d2q(seconds, i32::MAX) }
}

/// `ts` in `time_base` as a reduced fraction of seconds (SPDL's
/// `to_rational`).
pub(crate) fn ts_q(ts: i64, time_base: ff::Rational) -> ffi::AVRational {
    let mut q = ffi::AVRational { num: 0, den: 1 };
    let num = ts.saturating_mul(i64::from(time_base.numerator()));
    // SAFETY: av_reduce writes the two out-parameters only.
    unsafe {
        ffi::av_reduce(
            &mut q.num,
            &mut q.den,
            num,
            i64::from(time_base.denominator()),
            i64::from(i32::MAX),
        )
    };
    q
}

/// Whether `ts` in `time_base` lies in the window `[start, end)` seconds,
/// compared as SPDL does (in fractions, see [`seconds_q`]).
pub(crate) fn in_window(ts: i64, time_base: ff::Rational, (start, end): (f64, f64)) -> bool {
    let t = ts_q(ts, time_base);
    // SAFETY: pure arithmetic.
    unsafe { ffi::av_cmp_q(seconds_q(start), t) <= 0 && ffi::av_cmp_q(t, seconds_q(end)) < 0 }
}

/// Seconds of `ts` in `time_base`.
pub(crate) fn seconds(ts: i64, time_base: ff::Rational) -> f64 {
    if time_base.denominator() == 0 {
        return 0.0;
    }
    ts as f64 * f64::from(time_base.numerator()) / f64::from(time_base.denominator())
}

/// `seconds` in `time_base` units, rounded down.
pub(crate) fn to_ts(seconds: f64, time_base: ff::Rational) -> i64 {
    if time_base.numerator() == 0 {
        return 0;
    }
    let v = seconds * f64::from(time_base.denominator()) / f64::from(time_base.numerator());
    v.floor() as i64
}

/// The stream's display rotation in degrees counterclockwise, normalized to
/// 0, 90, 180 or 270, read from its display matrix side data. This is the
/// value ffprobe prints as `rotation` (`av_display_rotation_get`), taken
/// modulo 360: a clip muxed with `-metadata:s:v rotate=90` reports 90 and is
/// shown turned 90 degrees counterclockwise.
pub(crate) fn stream_rotation(stream: &ff::format::stream::Stream<'_>) -> i32 {
    for side in stream.side_data() {
        if side.kind() != ff::codec::packet::side_data::Type::DisplayMatrix {
            continue;
        }
        let data = side.data();
        if data.len() < 36 {
            continue;
        }
        let m: Vec<f64> = data[..36]
            .chunks_exact(4)
            .map(|c| f64::from(i32::from_ne_bytes([c[0], c[1], c[2], c[3]])) / 65536.0)
            .collect();
        // As av_display_rotation_get(): the angle that maps the coded picture
        // to the displayed one, counterclockwise.
        let scale0 = m[0].hypot(m[3]);
        let scale1 = m[1].hypot(m[4]);
        if scale0 == 0.0 || scale1 == 0.0 {
            continue;
        }
        let ccw = -(m[1] / scale1).atan2(m[0] / scale0).to_degrees();
        let q = (ccw / 90.0).round() as i64;
        return (q.rem_euclid(4) * 90) as i32;
    }
    0
}

/// Refuses a string that FFmpeg's C API would cut at a NUL byte (ffmpeg-next
/// panics on one): `InvalidArgument` naming `what`.
pub(crate) fn no_nul(what: &str, s: &str) -> Result<()> {
    if s.contains('\0') {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{what} {s:?} contains a NUL byte"),
        ));
    }
    Ok(())
}

/// Opens the codec context `ctx` with `codec` and `options` (`avcodec_open2`); `role`
/// (`"decoder"` or `"encoder"`) is how errors name it. A failure to open is an `open_kind`
/// error; an option the codec did not take is `InvalidArgument` naming it, e.g. `"decoder
/// option(s) not recognized by h264: nosuchoption"`.
///
/// # Safety
/// `ctx` is a valid codec context of `codec`, not yet open, that nothing else uses during the
/// call.
pub(crate) unsafe fn open_codec(
    ctx: *mut ffi::AVCodecContext,
    codec: &ff::Codec,
    options: ff::Dictionary<'static>,
    role: &str,
    open_kind: ErrorKind,
) -> Result<()> {
    // SAFETY: `ctx` as the caller promises; `options` is handed over and taken back with
    // `own` (what is left are the options nobody took).
    let (ret, unused) = unsafe {
        let mut raw = options.disown();
        let ret = ffi::avcodec_open2(ctx, codec.as_ptr(), &mut raw);
        let left = ff::Dictionary::own(raw);
        let unused: Vec<String> = left.iter().map(|(k, _)| k.to_owned()).collect();
        (ret, unused)
    };
    if ret < 0 {
        return Err(ff_err(
            open_kind,
            &format!("opening the {} {role}", codec.name()),
            ff::Error::from(ret),
        ));
    }
    if !unused.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "{role} option(s) not recognized by {}: {}",
                codec.name(),
                unused.join(", ")
            ),
        ));
    }
    Ok(())
}

/// An FFmpeg dictionary of `options` (`what`: "decoder option", ...);
/// `InvalidArgument` for a key or value with a NUL byte.
pub(crate) fn dictionary(
    what: &str,
    options: &[(String, String)],
) -> Result<ff::Dictionary<'static>> {
    let mut d = ff::Dictionary::new();
    for (k, v) in options {
        no_nul(what, k)?;
        no_nul(what, v)?;
        d.set(k, v);
    }
    Ok(d)
}
