//! Video decoding through FFmpeg (feature `decode-ffmpeg`): frames as one
//! `[T, H, W, C]` u8 tensor with their presentation timestamps.
//!
//! - [`load_video`] mirrors SPDL's `spdl.io.load_video` and decord's
//!   `VideoReader.get_batch`: pick frames by time window, by frame indices,
//!   every k-th frame, or the frames shown at given times
//!   ([`FrameSelection`]); scale and convert inside the decode
//!   ([`VideoOptions`]); apply the display rotation.
//! - [`load_video_clips`] samples several clips of T frames with a stride
//!   (pytorchvideo / decord style) in one decode pass.
//! - [`load_video_clip`] decodes one video to a fixed-size `[T, H, W, 3]`
//!   clip (what the `spdl` command uses).
//! - [`probe_video`] reads the header only; [`frame_timestamps`] decodes the
//!   whole stream (no conversion) and gives every frame's timestamp.
//!
//! Index and step selections seek to the key frame before the wanted
//! frames (module `seek`), as time windows do.
//!
//! Frame counts and indices come from decoding, in presentation order; the
//! container's frame count and duration are reported only as estimates
//! ([`VideoInfo::frames_estimate`]) and never used to build indices. An index
//! or time past the last decoded frame is an [`ErrorKind::InvalidArgument`]
//! error ("out of range"), never a hang or a repeated last frame.
//!
//! All functions are plain blocking functions over `Send + Sync` inputs and
//! outputs, for `Op::blocking` stages; each call owns its own FFmpeg
//! contexts, so any number may run at once.
//!
//! ```no_run
//! use spdl_io::video::{load_video, FrameSelection, VideoOptions};
//! use spdl_io::MediaSource;
//!
//! # fn main() -> Result<(), spdl_io::Error> {
//! let bytes = std::fs::read("clip.mp4").unwrap();
//! let opts = VideoOptions {
//!     selection: FrameSelection::Indices(vec![0, 10, 5, 10]),
//!     width: Some(224),
//!     height: Some(224),
//!     ..Default::default()
//! };
//! let video = load_video(MediaSource::bytes("clip.mp4", &bytes), &opts)?;
//! assert_eq!(video.shape, [4, 224, 224, 3]);
//! # Ok(())
//! # }
//! ```

mod convert;
mod packets;
mod seek;

pub use packets::{decode_packets, demux_video, VideoPackets};

use std::collections::BTreeMap;

use ffmpeg_next::{self as ff, codec, format::Pixel, media, software::scaling};
use smart_default::SmartDefault;

use crate::ffmpeg::decoder::open_decoder;
use crate::ffmpeg::filter::FilterGraph;
use crate::ffmpeg::{ff_err, seconds, stream_rotation, to_ts, Demuxer, MediaSource};
use crate::ffmpeg::{DecodeConfig, DemuxConfig};
use crate::{Error, ErrorKind, Result};
use convert::Converter;

/// Which frames [`load_video`] returns. Frame indices count decoded frames
/// in presentation order from 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum FrameSelection {
    /// Every frame.
    #[default]
    All,
    /// Frames with `start <= pts < end` (seconds, stream presentation time as
    /// ffprobe's `pts_time`); `end` may be `f64::INFINITY`. Seeks to the key
    /// frame before `start` first, so the output has no frame indices.
    /// Mirrors SPDL's `timestamps=(start, end)`.
    Window {
        /// Inclusive start, seconds.
        start: f64,
        /// Exclusive end, seconds.
        end: f64,
    },
    /// These frame indices, in this order; repeats allowed (decord's
    /// `get_batch`). An index past the last frame is an error.
    ///
    /// Decoding starts at the key frame before each run of wanted frames
    /// (found by a demux-only pass over the packets), so a frame near the
    /// end of a long file costs about what one near the start costs; the
    /// frames are byte-identical to a decode from the start. Streams whose
    /// packets cannot vouch for the frame numbering (no pts, repeated pts,
    /// not starting on a key frame, damaged) are decoded from the start.
    Indices(Vec<usize>),
    /// Every `k`-th frame: 0, k, 2k, ... (`k >= 1`). For `k >= 2`, seeks
    /// between the wanted frames as [`FrameSelection::Indices`] does.
    Step(usize),
    /// For each time `t` (seconds), the frame on screen at `t`: the one with
    /// `pts <= t < next pts` (torchcodec's `get_frames_played_at`). A time
    /// before the first frame or at/after the end of the last one is an error.
    PlayedAt(Vec<f64>),
}

/// Output pixel layout of [`Video::data`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PixelFormat {
    /// `[.., H, W, 3]` R, G, B.
    #[default]
    Rgb24,
    /// `[.., H, W, 3]` B, G, R (OpenCV order).
    Bgr24,
    /// `[.., H, W, 1]` luma.
    Gray8,
}

impl PixelFormat {
    /// Channels per pixel: 3 or 1.
    pub fn channels(self) -> usize {
        match self {
            PixelFormat::Rgb24 | PixelFormat::Bgr24 => 3,
            PixelFormat::Gray8 => 1,
        }
    }

    fn to_ffmpeg(self) -> Pixel {
        match self {
            PixelFormat::Rgb24 => Pixel::RGB24,
            PixelFormat::Bgr24 => Pixel::BGR24,
            PixelFormat::Gray8 => Pixel::GRAY8,
        }
    }
}

/// The swscale interpolation used when the output size differs from the
/// decoded one (and for chroma upsampling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScaleFilter {
    /// Nearest neighbour.
    Nearest,
    /// Bilinear.
    Bilinear,
    /// Bicubic: the `scale` filter's default in the ffmpeg command line (and
    /// so SPDL's).
    #[default]
    Bicubic,
    /// Area averaging (good for large downscales).
    Area,
}

impl ScaleFilter {
    fn to_flags(self) -> scaling::Flags {
        match self {
            ScaleFilter::Nearest => scaling::Flags::POINT,
            ScaleFilter::Bilinear => scaling::Flags::BILINEAR,
            ScaleFilter::Bicubic => scaling::Flags::BICUBIC,
            ScaleFilter::Area => scaling::Flags::AREA,
        }
    }
}

/// How [`load_video`] decodes. `Default`: all frames, native size, RGB,
/// one decoder thread, rotation applied, at most 4 GiB of output.
#[derive(Debug, Clone, PartialEq, SmartDefault)]
pub struct VideoOptions {
    /// Which frames to return.
    #[default(FrameSelection::All)]
    pub selection: FrameSelection,
    /// Output width in pixels (after rotation); `None` keeps the displayed
    /// width, or follows `height` keeping the aspect ratio.
    pub width: Option<u32>,
    /// Output height in pixels (after rotation); `None` as for `width`.
    pub height: Option<u32>,
    /// Output pixel layout.
    #[default(PixelFormat::Rgb24)]
    pub pixel_format: PixelFormat,
    /// Interpolation for scaling.
    #[default(ScaleFilter::Bicubic)]
    pub filter: ScaleFilter,
    /// Decoder threads (FFmpeg frame threading), and the threads of the
    /// `filter_desc` graph; 0 lets FFmpeg pick one per core. In a pipeline
    /// that decodes many videos at once, 1 is usually best. At most
    /// [`MAX_THREADS`] (more is `InvalidArgument`).
    #[default(1)]
    pub threads: usize,
    /// Turn frames as the stream's display matrix says (as players and the
    /// ffmpeg command line do). Off by default, as SPDL 0.8, whose loaders
    /// return the coded frames; the rotation is reported either way
    /// ([`VideoInfo::rotation`], [`Video::rotation_applied`]).
    pub apply_rotation: bool,
    /// Largest output allowed, in bytes; more is [`ErrorKind::LimitExceeded`]
    /// (checked before allocating).
    #[default(4 << 30)]
    pub max_output_bytes: usize,
    /// An FFmpeg filter graph description (libavfilter, as the ffmpeg
    /// command line's `-vf` and SPDL's `filter_desc`), e.g.
    /// `"fps=5,scale=224:224,format=rgb24"`, run on the selected frames in
    /// presentation order after the display rotation, then converted to
    /// `pixel_format` inside the graph (as `ffmpeg -vf DESC -pix_fmt rgb24`),
    /// then scaled to `width` / `height` when given. With a filter, [`Video::pts`] are the filtered frames' and
    /// [`Video::indices`] is `None`. Works with [`FrameSelection::All`],
    /// [`FrameSelection::Window`] and [`FrameSelection::Step`]; with the
    /// others it is an [`ErrorKind::InvalidArgument`] error, as is a
    /// description FFmpeg rejects.
    pub filter_desc: Option<String>,
    /// How the container is opened (forced format, demuxer options, I/O
    /// buffer size), as SPDL's `demux_config`. Default: probe.
    pub demux: DemuxConfig,
    /// Which decoder and decoder options, as SPDL's `decode_config`; its
    /// options (e.g. `threads`) override [`VideoOptions::threads`].
    /// Default: the codec's own decoder.
    pub decode: DecodeConfig,
}

/// What the container and stream headers say (no decoding).
#[derive(Debug, Clone, PartialEq)]
pub struct VideoInfo {
    /// Decoder name, e.g. `"h264"`.
    pub codec: String,
    /// Coded (stored) width in pixels, before rotation.
    pub coded_width: u32,
    /// Coded (stored) height in pixels, before rotation.
    pub coded_height: u32,
    /// Display rotation in degrees counterclockwise: 0, 90, 180 or 270. It is
    /// ffprobe's display-matrix `rotation` modulo 360 (ffprobe prints -90 for
    /// 270); a clip muxed with `-metadata:s:v rotate=90` reports 90.
    pub rotation: i32,
    /// The stream's time base as (numerator, denominator); timestamps are
    /// exact multiples of it.
    pub time_base: (i32, i32),
    /// Container frame count (`nb_frames`), when the container has one: an
    /// estimate, never used to build indices.
    pub frames_estimate: Option<u64>,
    /// Stream duration in seconds from the header: an estimate.
    pub duration_estimate: Option<f64>,
    /// Average frame rate in frames/s from the header: an estimate (variable
    /// frame rate streams have no single rate).
    pub avg_frame_rate: Option<f64>,
}

/// Decoded frames: `data` is `[T, H, W, C]` u8, row-major.
#[derive(derive_more::Debug, Clone, PartialEq)]
pub struct Video {
    /// `shape[0] * shape[1] * shape[2] * shape[3]` bytes.
    #[debug("[{} bytes]", data.len())]
    pub data: Vec<u8>,
    /// `[T, H, W, C]`: frames, height, width, channels (3 RGB/BGR, 1 gray).
    pub shape: [usize; 4],
    /// Presentation timestamp of each output frame, seconds (the stream's
    /// integer pts times its exact time base).
    pub pts: Vec<f64>,
    /// The decoded-frame index of each output frame; `None` after a seek
    /// ([`FrameSelection::Window`]), where indices are unknown.
    pub indices: Option<Vec<usize>>,
    /// Degrees counterclockwise the frames were turned (0 when
    /// [`VideoOptions::apply_rotation`] is off).
    pub rotation_applied: i32,
    /// Frames in the stream, counted by decoding, when this call decoded to
    /// the end of the stream from its start; `None` otherwise (also after
    /// the seeks of [`FrameSelection::Indices`] and [`FrameSelection::Step`]).
    pub frames_decoded: Option<usize>,
    /// Header information.
    pub info: VideoInfo,
}

impl Video {
    /// Bytes of one frame (`H * W * C`).
    pub fn frame_len(&self) -> usize {
        self.shape[1] * self.shape[2] * self.shape[3]
    }

    /// Frame `t` as `[H, W, C]` bytes; `None` past the end.
    pub fn frame(&self, t: usize) -> Option<&[u8]> {
        let n = self.frame_len();
        self.data.get(t * n..(t + 1) * n)
    }
}

/// Reads the header of `src`'s best video stream (no decoding).
///
/// Errors: as [`load_video`] for opening; `Unsupported` when there is no
/// video stream.
pub fn probe_video<'a>(src: impl Into<MediaSource<'a>>) -> Result<VideoInfo> {
    let src = src.into();
    let session = Session::open(&src, 1)?;
    Ok(session.info)
}

/// Decodes `src`'s frames chosen by `opts.selection` into one `[T, H, W, C]`
/// u8 tensor (RGB by default), scaled and converted inside the decode
/// (swscale straight from the decoder's frame; only the output-size result is
/// copied), turned by the display rotation unless asked not to.
///
/// Mirrors SPDL's `spdl.io.load_video` (demux + decode + filter in one call)
/// and decord's `VideoReader.get_batch` for [`FrameSelection::Indices`].
///
/// Errors (each naming the source's key):
/// - `Empty`, `UnknownFormat`, `Truncated`, `Corrupt`: the bytes are not a
///   usable media file (zero bytes; no container FFmpeg recognizes; data cut
///   short; damaged container or bitstream).
/// - `Unsupported`: no video stream, or no decoder for its codec.
/// - `InvalidArgument`: a frame index or time out of range (after decoding
///   to the end of the stream), no indices, `Step(0)`, an empty or reversed
///   window, a zero output size.
/// - `LimitExceeded`: the output would exceed `opts.max_output_bytes`.
pub fn load_video<'a>(src: impl Into<MediaSource<'a>>, opts: &VideoOptions) -> Result<Video> {
    let src = src.into();
    load(&src, opts).map_err(|e| src.err(e))
}

/// Decodes the whole stream without converting any frame and returns every
/// frame's presentation timestamp in seconds, in presentation order: the
/// exact frame count is the length. Costs one full decode.
///
/// Errors: as [`load_video`].
pub fn frame_timestamps<'a>(src: impl Into<MediaSource<'a>>, threads: usize) -> Result<Vec<f64>> {
    let src = src.into();
    let mut session = Session::open(&src, threads)?;
    let mut pts = Vec::new();
    session
        .run(|_, _, t| {
            pts.push(t);
            Ok(Flow::Continue)
        })
        .map_err(|e| src.err(e))?;
    Ok(pts)
}

/// The most decoder threads a call may ask for ([`VideoOptions::threads`]).
pub const MAX_THREADS: usize = 256;

/// `threads` if FFmpeg can use that many (an `int`, and more threads than
/// [`MAX_THREADS`] only spend memory: FFmpeg makes a decoder copy per thread).
pub(crate) fn checked_threads(threads: usize) -> Result<usize> {
    if threads > MAX_THREADS {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{threads} decoder threads is more than {MAX_THREADS} (0: FFmpeg picks)"),
        ));
    }
    Ok(threads)
}

/// Several clips of `frames_per_clip` frames, `stride` frames apart within a
/// clip, with clip starts spread evenly over the video (the first clip starts
/// at frame 0, the last ends at the last frame), as pytorchvideo's
/// `UniformClipSampler` / decord-based samplers do. At most
/// [`ClipSampling::MAX_FRAMES`] frames in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClipSampling {
    /// Number of clips N.
    pub num_clips: usize,
    /// Frames per clip T.
    pub frames_per_clip: usize,
    /// Distance between consecutive frames of a clip, in frames (>= 1).
    pub stride: usize,
}

impl ClipSampling {
    /// The most frames (`num_clips * frames_per_clip`) one call decodes: the
    /// frame list is made before the output size is known, so an absurd
    /// request is refused here rather than by the allocator.
    pub const MAX_FRAMES: usize = 1 << 20;

    /// The frame indices of each clip for a video of `total` frames. A video
    /// shorter than one clip span repeats its last frame.
    pub fn indices(&self, total: usize) -> Vec<Vec<usize>> {
        let span = (self.frames_per_clip.max(1) - 1) * self.stride.max(1) + 1;
        let last = total.saturating_sub(1);
        let room = total.saturating_sub(span);
        (0..self.num_clips)
            .map(|c| {
                let start = if self.num_clips <= 1 {
                    0
                } else {
                    (room as f64 * c as f64 / (self.num_clips - 1) as f64).round() as usize
                };
                (0..self.frames_per_clip)
                    .map(|i| (start + i * self.stride.max(1)).min(last))
                    .collect()
            })
            .collect()
    }
}

/// Clips from [`load_video_clips`]: `video.data` is `[N * T, H, W, C]`, to be
/// read as `[N, T, H, W, C]`.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoClips {
    /// `[N, T, H, W, C]`.
    pub shape: [usize; 5],
    /// The frames of all clips, clip after clip; `video.shape[0] == N * T`.
    pub video: Video,
}

/// Samples clips as [`ClipSampling`] says, in one decode pass; frames shared
/// by clips are decoded once. `opts.selection` is ignored; `opts.filter_desc`
/// is an `InvalidArgument` error.
///
/// The clip plan needs the frame count before decoding: it is counted from
/// the demuxed packets of the stream (one packet per frame in MP4, MKV, AVI,
/// WebM; never from duration x frame rate). Should the decoder then produce
/// fewer frames than packets (damaged data), indices past its last frame
/// repeat the last decoded frame instead of failing.
///
/// Errors: as [`load_video`]; `InvalidArgument` for zero clips, zero frames
/// per clip or a zero stride; `Empty` for a stream with no frames.
pub fn load_video_clips<'a>(
    src: impl Into<MediaSource<'a>>,
    sampling: &ClipSampling,
    opts: &VideoOptions,
) -> Result<VideoClips> {
    let src = src.into();
    let run = || -> Result<VideoClips> {
        if opts.filter_desc.is_some() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "filter_desc is not supported by clip sampling",
            ));
        }
        if sampling.num_clips == 0 || sampling.frames_per_clip == 0 || sampling.stride == 0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("clip sampling needs non-zero clips, frames and stride: {sampling:?}"),
            ));
        }
        let frames = sampling.num_clips.checked_mul(sampling.frames_per_clip);
        if frames.is_none_or(|n| n > ClipSampling::MAX_FRAMES) {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!(
                    "{} clips of {} frames is more than {} frames",
                    sampling.num_clips,
                    sampling.frames_per_clip,
                    ClipSampling::MAX_FRAMES
                ),
            ));
        }
        let plan = |total: usize| sampling.indices(total).into_iter().flatten().collect();
        let video = load_clip_plan(&src, opts, plan)?;
        Ok(VideoClips {
            shape: [
                sampling.num_clips,
                sampling.frames_per_clip,
                video.shape[1],
                video.shape[2],
                video.shape[3],
            ],
            video,
        })
    };
    run().map_err(|e| src.err(e))
}

/// Decodes `src` to exactly `[frames, height, width, 3]` RGB: `frames`
/// frames spread evenly from the first to the last (repeating frames of a
/// shorter video), each scaled to `width` x `height` after rotation, with
/// `threads` decoder threads. The fixed-size clip the `spdl` command batches.
///
/// Errors: as [`load_video_clips`].
pub fn load_video_clip<'a>(
    src: impl Into<MediaSource<'a>>,
    frames: usize,
    width: u32,
    height: u32,
    threads: usize,
) -> Result<Video> {
    let src = src.into();
    let run = || -> Result<Video> {
        if frames == 0 || width == 0 || height == 0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("clip of {frames} frames at {width}x{height}"),
            ));
        }
        if frames > ClipSampling::MAX_FRAMES {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!(
                    "a clip of {frames} frames is more than {} frames",
                    ClipSampling::MAX_FRAMES
                ),
            ));
        }
        let plan = |total: usize| -> Vec<usize> {
            (0..frames)
                .map(|i| {
                    if frames == 1 {
                        0
                    } else {
                        ((total - 1) as f64 * i as f64 / (frames - 1) as f64).round() as usize
                    }
                })
                .collect()
        };
        let opts = VideoOptions {
            width: Some(width),
            height: Some(height),
            threads,
            ..Default::default()
        };
        load_clip_plan(&src, &opts, plan)
    };
    run().map_err(|e| src.err(e))
}

// ---------------------------------------------------------------------------

/// Whether the decode loop goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// How a decode pass ended.
#[derive(Debug, Clone, Copy)]
struct RunEnd {
    /// Frames decoded in this pass.
    frames: usize,
    /// The decoder was drained to the end of the stream.
    eof: bool,
}

/// An open demuxer + decoder on the best video stream.
struct Session<'a> {
    demux: Demuxer<'a>,
    stream: usize,
    time_base: ff::Rational,
    decoder: codec::decoder::Video,
    info: VideoInfo,
    /// The stream's start time in its time base (0 when unknown).
    start_ts: i64,
}

impl<'a> Session<'a> {
    fn open(src: &MediaSource<'a>, threads: usize) -> Result<Self> {
        Self::open_with(
            src,
            threads,
            &DemuxConfig::default(),
            &DecodeConfig::default(),
        )
    }

    /// As [`Session::open`] with the demuxer and decoder settings of `opts`.
    fn with_opts(src: &MediaSource<'a>, opts: &VideoOptions) -> Result<Self> {
        Self::open_with(src, opts.threads, &opts.demux, &opts.decode)
    }

    fn open_with(
        src: &MediaSource<'a>,
        threads: usize,
        demux_cfg: &DemuxConfig,
        decode_cfg: &DecodeConfig,
    ) -> Result<Self> {
        let demux = Demuxer::open_with(src, demux_cfg)?;
        let (stream, time_base, params, rotation, frames_estimate, duration, fps, start_ts) = {
            let Some(st) = demux.input().streams().best(media::Type::Video) else {
                return Err(src.err(Error::new(ErrorKind::Unsupported, "no video stream")));
            };
            let tb = st.time_base();
            let frames = u64::try_from(st.frames()).ok().filter(|&n| n > 0);
            let duration = (st.duration() > 0 && st.duration() != i64::MIN)
                .then(|| seconds(st.duration(), tb));
            let rate = st.avg_frame_rate();
            let fps = (rate.numerator() > 0 && rate.denominator() > 0).then(|| f64::from(rate));
            let start = if st.start_time() == ff::ffi::AV_NOPTS_VALUE {
                0
            } else {
                st.start_time()
            };
            (
                st.index(),
                tb,
                st.parameters(),
                stream_rotation(&st),
                frames,
                duration,
                fps,
                start,
            )
        };
        let mut ctx = codec::Context::from_parameters(params)
            .map_err(|e| src.err(ff_err(ErrorKind::Corrupt, "reading codec parameters", e)))?;
        ctx.set_threading(codec::threading::Config {
            kind: codec::threading::Type::Frame,
            count: checked_threads(threads).map_err(|e| src.err(e))?,
            ..Default::default()
        });
        let decoder = open_decoder(ctx, time_base, decode_cfg)
            .and_then(|d| {
                d.video()
                    .map_err(|e| ff_err(ErrorKind::InvalidArgument, "not a video decoder", e))
            })
            .map_err(|e| src.err(e))?;
        let codec = decoder
            .codec()
            .map(|c| c.name().to_owned())
            .unwrap_or_default();
        let info = VideoInfo {
            codec,
            coded_width: decoder.width(),
            coded_height: decoder.height(),
            rotation,
            time_base: (time_base.numerator(), time_base.denominator()),
            frames_estimate,
            duration_estimate: duration,
            avg_frame_rate: fps,
        };
        Ok(Session {
            demux,
            stream,
            time_base,
            decoder,
            info,
            start_ts,
        })
    }

    /// Decodes from the current position, calling `on_frame(frame, index in
    /// this pass, pts seconds)` for each frame in presentation order, until
    /// it returns `Stop` or the stream ends.
    fn run(
        &mut self,
        mut on_frame: impl FnMut(&ff::frame::Video, usize, f64) -> Result<Flow>,
    ) -> Result<RunEnd> {
        let mut frame = ff::frame::Video::empty();
        let mut n = 0usize;
        let mut last_pts: Option<f64> = None;
        loop {
            let mut packet = ff::Packet::empty();
            let more = self.demux.read_packet(&mut packet)?;
            if more {
                if packet.stream() != self.stream {
                    continue;
                }
                if let Err(e) = self.decoder.send_packet(&packet) {
                    return Err(self.demux.classify(e, "decoding video"));
                }
            } else if let Err(e) = self.decoder.send_eof() {
                if !matches!(e, ff::Error::Eof) {
                    return Err(self.demux.classify(e, "flushing video decoder"));
                }
            }
            loop {
                match self.decoder.receive_frame(&mut frame) {
                    Ok(()) => {
                        let pts = match frame.timestamp() {
                            Some(ts) => seconds(ts, self.time_base),
                            // No timestamp: one frame duration after the last.
                            None => {
                                let d = frame.packet().duration;
                                last_pts.map_or(0.0, |p| p + seconds(d.max(0), self.time_base))
                            }
                        };
                        last_pts = Some(pts);
                        let flow = on_frame(&frame, n, pts)?;
                        n += 1;
                        if flow == Flow::Stop {
                            return Ok(RunEnd {
                                frames: n,
                                eof: false,
                            });
                        }
                    }
                    Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => break,
                    Err(ff::Error::Eof) => {
                        return Ok(RunEnd {
                            frames: n,
                            eof: true,
                        })
                    }
                    Err(e) => return Err(self.demux.classify(e, "decoding video")),
                }
            }
            if !more {
                return Ok(RunEnd {
                    frames: n,
                    eof: true,
                });
            }
        }
    }
}

fn check_limit(frames: usize, frame_len: usize, opts: &VideoOptions) -> Result<()> {
    let bytes = frames.saturating_mul(frame_len);
    if bytes > opts.max_output_bytes {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            format!(
                "{frames} frames of {frame_len} bytes exceed max_output_bytes {}",
                opts.max_output_bytes
            ),
        ));
    }
    Ok(())
}

fn load(src: &MediaSource<'_>, opts: &VideoOptions) -> Result<Video> {
    if opts.filter_desc.is_some()
        && matches!(
            opts.selection,
            FrameSelection::Indices(_) | FrameSelection::PlayedAt(_)
        )
    {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "filter_desc works with all frames, a time window or a step, not with indices or played_at",
        ));
    }
    match &opts.selection {
        FrameSelection::All => load_filtered(src, opts, |_, _| Keep::Yes, None),
        FrameSelection::Step(k) => {
            if *k == 0 {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "Step(0): step must be >= 1",
                ));
            }
            let k = *k;
            if k > 1 && opts.filter_desc.is_none() {
                let plan = |n: usize| Some((0..n).step_by(k).collect());
                if let Some(video) = seek::load_planned(src, opts, None, plan)? {
                    return Ok(video);
                }
            }
            load_filtered(
                src,
                opts,
                move |i, _| if i % k == 0 { Keep::Yes } else { Keep::No },
                None,
            )
        }
        FrameSelection::Window { start, end } => {
            let (start, end) = (*start, *end);
            if start.is_nan() || end.is_nan() || end <= start {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("time window [{start}, {end}) is empty"),
                ));
            }
            let keep = move |_, pts: f64| {
                if pts >= end {
                    Keep::Stop
                } else if pts >= start {
                    Keep::Yes
                } else {
                    Keep::No
                }
            };
            load_filtered(src, opts, keep, Some(start))
        }
        FrameSelection::Indices(indices) if indices.is_empty() => Err(Error::new(
            ErrorKind::InvalidArgument,
            "no frame indices given: ask for at least one frame",
        )),
        FrameSelection::Indices(indices) => load_indices(src, opts, indices),
        FrameSelection::PlayedAt(times) => load_played_at(src, opts, times),
    }
}

/// Per-frame decision of the streaming selections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    Yes,
    No,
    Stop,
}

/// All / Step / Window: frames appended as they come.
fn load_filtered(
    src: &MediaSource<'_>,
    opts: &VideoOptions,
    keep: impl Fn(usize, f64) -> Keep + Copy,
    seek_to: Option<f64>,
) -> Result<Video> {
    let mut session = Session::with_opts(src, opts)?;
    let mut seeked = false;
    if let Some(start) = seek_to {
        let ts = to_ts(start, session.time_base);
        if ts > session.start_ts {
            session.demux.seek_stream(session.stream, ts)?;
            session.decoder.flush();
            seeked = true;
        }
    }
    let result = filtered_pass(&mut session, opts, keep, seek_to.filter(|_| seeked))?;
    match result {
        Some(video) => Ok(video),
        // The seek landed after the window start: decode from the beginning.
        None => {
            let mut session = Session::with_opts(src, opts)?;
            filtered_pass(&mut session, opts, keep, None)?
                .ok_or_else(|| Error::new(ErrorKind::Corrupt, "decoding restarted twice"))
        }
    }
}

/// One pass of [`load_filtered`]; `None` when `check_start` is set and the
/// first decoded frame comes after it (a seek that overshot).
fn filtered_pass(
    session: &mut Session<'_>,
    opts: &VideoOptions,
    keep: impl Fn(usize, f64) -> Keep,
    check_start: Option<f64>,
) -> Result<Option<Video>> {
    let (graph_desc, info) = graph_plan(&session.info, opts);
    let factory = ConverterFactory { info, opts };
    let time_base = session.time_base;
    let mut out = Collector {
        factory,
        opts,
        conv: None,
        data: Vec::new(),
        pts: Vec::new(),
        indices: Vec::new(),
    };
    let mut graph: Option<FilterGraph> = None;
    let mut filtered = ff::frame::Video::empty();
    let mut overshot = false;
    let end = session.run(|frame, i, pts| {
        if i == 0 {
            if let Some(start) = check_start {
                if pts > start + 1e-9 {
                    overshot = true;
                    return Ok(Flow::Stop);
                }
            }
        }
        match keep(i, pts) {
            Keep::No => Ok(Flow::Continue),
            Keep::Stop => Ok(Flow::Stop),
            Keep::Yes => {
                let Some(desc) = graph_desc.as_deref() else {
                    out.push(frame, i, pts)?;
                    return Ok(Flow::Continue);
                };
                if graph.is_none() {
                    graph = Some(FilterGraph::video(desc, frame, time_base, opts.threads)?);
                }
                if let Some(g) = graph.as_mut() {
                    // The filters see the best-effort timestamp as pts, as in
                    // the ffmpeg command line.
                    let mut input = frame_ref(frame)?;
                    input.set_pts(frame.timestamp());
                    g.push(Some(&*input))?;
                    out.drain(g, &mut filtered, i)?;
                }
                Ok(Flow::Continue)
            }
        }
    })?;
    if overshot {
        return Ok(None);
    }
    if let Some(g) = graph.as_mut() {
        g.push(None)?;
        out.drain(g, &mut filtered, 0)?;
    }
    if check_start.is_none() && end.eof && end.frames == 0 {
        return Err(Error::new(
            ErrorKind::Corrupt,
            "the video stream has packets but no frame could be decoded",
        ));
    }
    let seeked = check_start.is_some();
    let indexed = !seeked && graph_desc.is_none();
    Ok(Some(assemble(
        &session.info,
        out.conv.as_ref(),
        opts,
        out.data,
        out.pts,
        indexed.then_some(out.indices),
        (!seeked && end.eof).then_some(end.frames),
    )))
}

/// The filter graph description `opts.filter_desc` becomes for a stream
/// with `info`, and the info the converter works from. The rotation is the
/// graph's first filter (as the ffmpeg command line's autorotate), so the
/// converter turns nothing; its last converts to the output pixel format, as
/// the command line's `-pix_fmt`, so the converter only copies (or scales).
fn graph_plan(info: &VideoInfo, opts: &VideoOptions) -> (Option<String>, VideoInfo) {
    let mut info = info.clone();
    let Some(desc) = opts.filter_desc.as_deref() else {
        return (None, info);
    };
    let rotation = if opts.apply_rotation {
        info.rotation
    } else {
        0
    };
    let fmt = opts
        .pixel_format
        .to_ffmpeg()
        .descriptor()
        .map_or("rgb24", |p| p.name());
    let desc = match rotation_filter(rotation) {
        Some(r) => format!("{r},{desc},format=pix_fmts={fmt}"),
        None => format!("{desc},format=pix_fmts={fmt}"),
    };
    info.rotation = 0;
    (Some(desc), info)
}

/// The filters that turn a frame `rotation` degrees counterclockwise (the
/// ffmpeg command line's autorotate); `None` for 0.
fn rotation_filter(rotation: i32) -> Option<&'static str> {
    match rotation {
        90 => Some("transpose=cclock"),
        180 => Some("hflip,vflip"),
        270 => Some("transpose=clock"),
        _ => None,
    }
}

/// Output frames appended one after another (the streaming selections).
struct Collector<'o> {
    factory: ConverterFactory<'o>,
    opts: &'o VideoOptions,
    conv: Option<Converter>,
    data: Vec<u8>,
    pts: Vec<f64>,
    indices: Vec<usize>,
}

impl Collector<'_> {
    /// Converts `frame` (decoded frame `i`, or a filtered frame) and appends it.
    fn push(&mut self, frame: &ff::frame::Video, i: usize, pts: f64) -> Result<()> {
        if self.conv.is_none() {
            self.conv = Some(self.factory.build(frame)?);
        }
        let Some(conv) = self.conv.as_mut() else {
            return Ok(());
        };
        let n = conv.frame_len();
        check_limit(self.pts.len() + 1, n, self.opts)?;
        let at = self.data.len();
        self.data.resize(at + n, 0);
        conv.convert(frame, &mut self.data[at..])?;
        self.pts.push(pts);
        self.indices.push(i);
        Ok(())
    }

    /// Appends every frame the graph has ready.
    fn drain(
        &mut self,
        graph: &mut FilterGraph,
        frame: &mut ff::frame::Video,
        i: usize,
    ) -> Result<()> {
        let tb = graph.time_base();
        while graph.pull(frame)? {
            let pts = frame.pts().map_or(0.0, |p| seconds(p, tb));
            self.push(frame, i, pts)?;
        }
        Ok(())
    }
}

/// The [`Video`] of the stream with `info`: `data` holds one frame per entry of `pts`, of the
/// size `conv` converts to (without any frame, `0 x 0` and the channels `opts` asks for).
fn assemble(
    info: &VideoInfo,
    conv: Option<&Converter>,
    opts: &VideoOptions,
    data: Vec<u8>,
    pts: Vec<f64>,
    indices: Option<Vec<usize>>,
    frames_decoded: Option<usize>,
) -> Video {
    let rotation_applied = if opts.apply_rotation {
        info.rotation
    } else {
        0
    };
    let (h, w, c) = match conv {
        Some(c) => (c.height, c.width, c.channels),
        None => (0, 0, opts.pixel_format.channels()),
    };
    Video {
        shape: [pts.len(), h, w, c],
        data,
        pts,
        indices,
        rotation_applied,
        frames_decoded,
        info: info.clone(),
    }
}

/// Frames wanted by index (any order, repeats allowed) and the output they fill: each is
/// converted once, into its first slot, and copied to the slots that repeat it.
struct Slots {
    /// Frame index -> its output slots.
    of_frame: BTreeMap<usize, Vec<usize>>,
    /// The slots' frames, one after another (allocated at the first frame, after the limit
    /// check).
    data: Vec<u8>,
    /// Each slot's pts, in seconds.
    pts: Vec<f64>,
    /// Whether each slot has its frame.
    filled: Vec<bool>,
}

impl Slots {
    /// Slot `s` is to hold frame `indices[s]`.
    fn new(indices: &[usize]) -> Self {
        let mut of_frame: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (slot, &i) in indices.iter().enumerate() {
            of_frame.entry(i).or_default().push(slot);
        }
        Slots {
            of_frame,
            data: Vec::new(),
            pts: vec![0.0; indices.len()],
            filled: vec![false; indices.len()],
        }
    }

    /// Frame `i` (at `pts` seconds), converted by `conv`, into the slots that want it.
    fn put(
        &mut self,
        conv: &mut Converter,
        frame: &ff::frame::Video,
        i: usize,
        pts: f64,
        opts: &VideoOptions,
    ) -> Result<()> {
        let (t, n) = (self.pts.len(), conv.frame_len());
        if self.data.is_empty() {
            check_limit(t, n, opts)?;
            self.data = vec![0; t * n];
        }
        if let Some(to) = self.of_frame.get(&i) {
            let first = to[0];
            conv.convert(frame, &mut self.data[first * n..(first + 1) * n])?;
            for &s in &to[1..] {
                self.data.copy_within(first * n..(first + 1) * n, s * n);
            }
            for &s in to {
                self.pts[s] = pts;
                self.filled[s] = true;
            }
        }
        Ok(())
    }
}

/// Runs a pass, creating the converter from the first frame.
fn session_run_with_converter(
    session: &mut Session<'_>,
    opts: &VideoOptions,
    conv: &mut Option<Converter>,
    mut f: impl FnMut(&mut Converter, &ff::frame::Video, usize, f64) -> Result<Flow>,
) -> Result<RunEnd> {
    // The converter is built from the first frame's size; `Session::run`
    // borrows the session mutably, so the size logic runs on a copy of what
    // it needs.
    let info = session.info.clone();
    let probe = ConverterFactory { info, opts };
    session.run(|frame, i, pts| {
        if conv.is_none() {
            *conv = Some(probe.build(frame)?);
        }
        match conv.as_mut() {
            Some(c) => f(c, frame, i, pts),
            None => Ok(Flow::Stop),
        }
    })
}

/// Builds converters without borrowing the session.
struct ConverterFactory<'o> {
    info: VideoInfo,
    opts: &'o VideoOptions,
}

impl ConverterFactory<'_> {
    fn build(&self, frame: &ff::frame::Video) -> Result<Converter> {
        let opts = self.opts;
        let rotation = if opts.apply_rotation {
            self.info.rotation
        } else {
            0
        };
        let (fw, fh) = (frame.width() as usize, frame.height() as usize);
        if fw == 0 || fh == 0 {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "decoder returned an empty frame",
            ));
        }
        let (dw, dh) = if rotation % 180 == 0 {
            (fw, fh)
        } else {
            (fh, fw)
        };
        let (w, h) = match (opts.width, opts.height) {
            (Some(w), Some(h)) => (w as usize, h as usize),
            (Some(w), None) => (
                w as usize,
                ((w as usize * dh) as f64 / dw as f64).round() as usize,
            ),
            (None, Some(h)) => (
                ((h as usize * dw) as f64 / dh as f64).round() as usize,
                h as usize,
            ),
            (None, None) => (dw, dh),
        };
        if w == 0 || h == 0 || w > 1 << 16 || h > 1 << 16 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("output size {w}x{h} is out of range (1 to 65536)"),
            ));
        }
        // FFmpeg also refuses pictures whose bytes would not fit an `int`
        // (about 2^28 pixels); its scaler would then hand back no picture.
        // SAFETY: a pure size check; no context to log to.
        if unsafe { ff::ffi::av_image_check_size(w as u32, h as u32, 0, std::ptr::null_mut()) } < 0
        {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("output size {w}x{h} is larger than FFmpeg's pictures can be"),
            ));
        }
        Ok(Converter::new(
            w,
            h,
            rotation,
            opts.pixel_format,
            opts.filter,
        ))
    }
}

/// Indices: seek to the key frame before the wanted frames where the
/// stream allows it ([`seek`]), else [`load_indices_sequential`].
fn load_indices(src: &MediaSource<'_>, opts: &VideoOptions, indices: &[usize]) -> Result<Video> {
    // An index past the end goes to the sequential path for its error (it
    // counts the frames by decoding).
    let plan = |n: usize| indices.iter().all(|&i| i < n).then(|| indices.to_vec());
    let upto = indices.iter().copied().max();
    if let Some(video) = seek::load_planned(src, opts, upto, plan)? {
        return Ok(video);
    }
    load_indices_sequential(src, opts, indices, false)
}

/// Clip sampling: the indices `plan(frame count)` (each below the count),
/// seeking where the stream allows it; else the count comes from the
/// packets and the decode runs from the start, clamping to the last decoded
/// frame.
fn load_clip_plan(
    src: &MediaSource<'_>,
    opts: &VideoOptions,
    plan: impl Fn(usize) -> Vec<usize>,
) -> Result<Video> {
    if let Some(video) = seek::load_planned(src, opts, None, |n| Some(plan(n)))? {
        return Ok(video);
    }
    let total = count_packets(src, &opts.demux)?;
    load_indices_sequential(src, opts, &plan(total), true)
}

/// Indices: decode sequentially up to the largest index, converting each
/// wanted frame once into its first slot and copying it to repeats.
/// `clamp`: indices past the end take the last decoded frame (clip
/// sampling) instead of failing.
fn load_indices_sequential(
    src: &MediaSource<'_>,
    opts: &VideoOptions,
    indices: &[usize],
    clamp: bool,
) -> Result<Video> {
    let mut session = Session::with_opts(src, opts)?;
    let t = indices.len();
    let mut out = Slots::new(indices);
    let max = indices.iter().copied().max();
    let mut conv: Option<Converter> = None;
    let mut idx_out = indices.to_vec();
    let mut last: Option<(ff::frame::Video, usize, f64)> = None;
    let end = match max {
        None => RunEnd {
            frames: 0,
            eof: false,
        },
        Some(max) => {
            session_run_with_converter(&mut session, opts, &mut conv, |conv, frame, i, pts| {
                out.put(conv, frame, i, pts, opts)?;
                if i >= max {
                    return Ok(Flow::Stop);
                }
                if clamp {
                    last = Some((frame_ref(frame)?, i, pts));
                }
                Ok(Flow::Continue)
            })?
        }
    };
    if out.filled.iter().any(|f| !f) {
        let decoded = end.frames;
        if clamp {
            if let (Some((frame, i, pts)), Some(conv)) = (last.as_ref(), conv.as_mut()) {
                let n = conv.frame_len();
                let mut buf = vec![0; n];
                conv.convert(frame, &mut buf)?;
                for s in (0..t).filter(|&s| !out.filled[s]) {
                    out.data[s * n..(s + 1) * n].copy_from_slice(&buf);
                    out.pts[s] = *pts;
                    idx_out[s] = *i;
                }
            } else {
                return Err(Error::new(
                    ErrorKind::Empty,
                    "the video stream has no frames",
                ));
            }
        } else {
            let bad = indices
                .iter()
                .copied()
                .filter(|&i| i >= decoded)
                .max()
                .unwrap_or(decoded);
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "frame index {bad} out of range: the video has {decoded} frames (counted by decoding)"
                ),
            ));
        }
    }
    Ok(assemble(
        &session.info,
        conv.as_ref(),
        opts,
        out.data,
        out.pts,
        Some(idx_out),
        end.eof.then_some(end.frames),
    ))
}

/// PlayedAt: the frame with `pts <= t < next pts` for each time.
fn load_played_at(src: &MediaSource<'_>, opts: &VideoOptions, times: &[f64]) -> Result<Video> {
    if let Some(bad) = times.iter().find(|t| !t.is_finite()) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("time {bad} is not finite"),
        ));
    }
    let mut session = Session::with_opts(src, opts)?;
    let t = times.len();
    // Requests sorted by time: (time, slot).
    let mut order: Vec<(f64, usize)> = times.iter().copied().zip(0..).collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut next = 0usize;
    let mut conv: Option<Converter> = None;
    let mut data: Vec<u8> = Vec::new();
    let mut pts_out = vec![0.0; t];
    let mut idx_out = vec![0usize; t];
    let mut prev: Option<(ff::frame::Video, usize, f64)> = None;
    let mut first_pts: Option<f64> = None;
    // Assign `frame` to every pending request with time < `until`.
    let assign = |conv: &mut Converter,
                  data: &mut Vec<u8>,
                  next: &mut usize,
                  (frame, i, pts): (&ff::frame::Video, usize, f64),
                  until: f64,
                  pts_out: &mut [f64],
                  idx_out: &mut [usize]|
     -> Result<()> {
        let n = conv.frame_len();
        let mut first: Option<usize> = None;
        while *next < order.len() && order[*next].0 < until {
            let slot = order[*next].1;
            match first {
                None => {
                    conv.convert(frame, &mut data[slot * n..(slot + 1) * n])?;
                    first = Some(slot);
                }
                Some(f) => data.copy_within(f * n..(f + 1) * n, slot * n),
            }
            pts_out[slot] = pts;
            idx_out[slot] = i;
            *next += 1;
        }
        Ok(())
    };
    let mut last_end = 0.0f64;
    let tb = session.time_base;
    let end = if t == 0 {
        RunEnd {
            frames: 0,
            eof: false,
        }
    } else {
        session_run_with_converter(&mut session, opts, &mut conv, |conv, frame, i, pts| {
            if data.is_empty() {
                check_limit(t, conv.frame_len(), opts)?;
                data = vec![0; t * conv.frame_len()];
            }
            if first_pts.is_none() {
                first_pts = Some(pts);
                if order[0].0 < pts {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "time {} s out of range: before the first frame (pts {pts} s)",
                            order[0].0
                        ),
                    ));
                }
            }
            if let Some((pf, pi, pp)) = prev.as_ref() {
                assign(
                    conv,
                    &mut data,
                    &mut next,
                    (pf, *pi, *pp),
                    pts,
                    &mut pts_out,
                    &mut idx_out,
                )?;
            }
            if next >= order.len() {
                return Ok(Flow::Stop);
            }
            let d = frame.packet().duration;
            last_end = pts + if d > 0 { seconds(d, tb) } else { 0.0 };
            prev = Some((frame_ref(frame)?, i, pts));
            Ok(Flow::Continue)
        })?
    };
    if next < order.len() {
        // Requests at or after the last frame's pts: that frame is on screen
        // until its end (pts + duration).
        match (prev.as_ref(), conv.as_mut()) {
            (Some((pf, pi, pp)), Some(c)) => {
                let until = if last_end > *pp {
                    last_end
                } else {
                    *pp + f64::EPSILON
                };
                assign(
                    c,
                    &mut data,
                    &mut next,
                    (pf, *pi, *pp),
                    until,
                    &mut pts_out,
                    &mut idx_out,
                )?;
                if next < order.len() {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "time {} s out of range: the last frame (pts {pp} s) ends at {until} s",
                            order[next].0
                        ),
                    ));
                }
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::Empty,
                    "the video stream has no frames",
                ))
            }
        }
    }
    Ok(assemble(
        &session.info,
        conv.as_ref(),
        opts,
        data,
        pts_out,
        Some(idx_out),
        end.eof.then_some(end.frames),
    ))
}

/// A new reference to `frame`'s buffers (`av_frame_ref`: no pixel copy,
/// unlike `frame::Video::clone`, which copies every plane).
fn frame_ref(frame: &ff::frame::Video) -> Result<ff::frame::Video> {
    let mut out = ff::frame::Video::empty();
    // SAFETY: `out` is a fresh, empty frame and `frame` a valid decoded one;
    // av_frame_ref only adds references to the source's buffers.
    let ret = unsafe { ff::ffi::av_frame_ref(out.as_mut_ptr(), frame.as_ptr()) };
    if ret < 0 {
        return Err(ff_err(
            ErrorKind::LimitExceeded,
            "referencing a frame",
            ff::Error::from(ret),
        ));
    }
    Ok(out)
}

/// Number of packets of the best video stream (demux only, no decode); `Empty` when there is
/// none, since no clip can be planned from an empty stream.
fn count_packets(src: &MediaSource<'_>, config: &DemuxConfig) -> Result<usize> {
    let mut demux = Demuxer::open_with(src, config)?;
    let Some(stream) = demux
        .input()
        .streams()
        .best(media::Type::Video)
        .map(|s| s.index())
    else {
        return Err(Error::new(ErrorKind::Unsupported, "no video stream"));
    };
    let mut n = 0usize;
    loop {
        let mut packet = ff::Packet::empty();
        if !demux.read_packet(&mut packet)? {
            if n == 0 {
                return Err(Error::new(
                    ErrorKind::Empty,
                    "the video stream has no frames",
                ));
            }
            return Ok(n);
        }
        if packet.stream() == stream && packet.size() > 0 {
            n += 1;
        }
    }
}
