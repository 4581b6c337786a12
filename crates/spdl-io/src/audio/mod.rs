//! Audio decoding through FFmpeg (feature `decode-ffmpeg`): a `[C, S]` f32
//! waveform at the native or a requested sample rate and channel count.
//!
//! [`load_audio`] mirrors SPDL's `spdl.io.load_audio` and torchaudio's
//! `load` (channels first, f32 in [-1, 1]; s16 is scaled by 1/32768).
//! Resampling and channel remixing go through FFmpeg's swresample with the
//! same defaults as `ffmpeg -ar R -ac C`; every call builds its own resampler,
//! so no state carries over from one file to the next.
//!
//! ```no_run
//! use spdl_io::audio::{load_audio, AudioOptions};
//! use spdl_io::MediaSource;
//!
//! # fn main() -> Result<(), spdl_io::Error> {
//! let bytes = std::fs::read("speech.flac").unwrap();
//! let opts = AudioOptions { sample_rate: Some(16_000), channels: Some(1), ..Default::default() };
//! let audio = load_audio(MediaSource::bytes("speech.flac", &bytes), &opts)?;
//! assert_eq!(audio.shape()[0], 1);
//! # Ok(())
//! # }
//! ```

use ffmpeg_next::{self as ff, codec, format::Sample, media, software::resampling, ChannelLayout};
use smart_default::SmartDefault;

use crate::ffmpeg::decoder::open_decoder;
use crate::ffmpeg::filter::FilterGraph;
use crate::ffmpeg::{ff_err, seconds, to_ts, Demuxer, MediaSource};
use crate::ffmpeg::{DecodeConfig, DemuxConfig};
use crate::{Error, ErrorKind, Result};

/// How [`load_audio`] decodes. `Default`: native rate and channels, whole
/// stream, at most 2^31 samples in total.
#[derive(Debug, Clone, PartialEq, SmartDefault)]
pub struct AudioOptions {
    /// Output sample rate in Hz; `None` keeps the stream's rate.
    pub sample_rate: Option<u32>,
    /// Output channel count; `None` keeps the stream's. Remixed with
    /// swresample's default matrix (as `ffmpeg -ac N`).
    pub channels: Option<u16>,
    /// Only samples with `start <= t < end` (seconds of stream presentation
    /// time, as ffprobe's `pts_time`); cut at sample precision at the input
    /// rate, before resampling. `end` may be `f64::INFINITY`.
    pub window: Option<(f64, f64)>,
    /// Largest output allowed, in samples over all channels; more is
    /// [`ErrorKind::LimitExceeded`].
    #[default(1 << 31)]
    pub max_samples: usize,
    /// An FFmpeg filter graph description (libavfilter, as the ffmpeg
    /// command line's `-af` and SPDL's `filter_desc`), e.g.
    /// `"aresample=16000,aformat=sample_fmts=fltp"`. It gets the decoded
    /// frames (cut to `window`) in the decoder's sample format, rate and
    /// layout, as the command line's `-af` does (so format-dependent steps,
    /// such as a downmix's normalization for integer samples, match); its
    /// output, in whatever sample format, is read as f32 as the decoder's
    /// is, then resampled to `sample_rate` / `channels` when given.
    /// A description FFmpeg rejects is an [`ErrorKind::InvalidArgument`]
    /// error.
    pub filter_desc: Option<String>,
    /// How the container is opened (forced format, demuxer options, I/O
    /// buffer size), as SPDL's `demux_config`. Default: probe.
    pub demux: DemuxConfig,
    /// Which decoder and decoder options, as SPDL's `decode_config`.
    /// Default: the codec's own decoder.
    pub decode: DecodeConfig,
}

/// A decoded waveform: `data` is `[C, S]` f32, channel after channel.
#[derive(derive_more::Debug, Clone, PartialEq)]
pub struct Audio {
    /// `channels * samples` values in [-1, 1] (float sources may exceed it).
    #[debug("[{} samples]", data.len())]
    pub data: Vec<f32>,
    /// Channels C (in the stream's channel-layout order, e.g. FL, FR, FC,
    /// LFE, BL, BR for 5.1).
    pub channels: usize,
    /// Samples per channel S.
    pub samples: usize,
    /// Sample rate of `data`, Hz.
    pub sample_rate: u32,
    /// Presentation time of the first sample, seconds.
    pub start: f64,
    /// Header information.
    pub info: AudioInfo,
}

impl Audio {
    /// `[C, S]`.
    pub fn shape(&self) -> [usize; 2] {
        [self.channels, self.samples]
    }

    /// Channel `c` (S samples); `None` past the last channel.
    pub fn channel(&self, c: usize) -> Option<&[f32]> {
        self.data.get(c * self.samples..(c + 1) * self.samples)
    }

    /// Duration of `data` in seconds (`samples / sample_rate`).
    pub fn duration(&self) -> f64 {
        self.samples as f64 / f64::from(self.sample_rate.max(1))
    }
}

/// The stream as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioInfo {
    /// Decoder name, e.g. `"mp3float"`, `"pcm_s16le"`.
    pub codec: String,
    /// Native sample rate, Hz.
    pub sample_rate: u32,
    /// Native channel count.
    pub channels: usize,
    /// Native sample format, e.g. `"s16"`, `"fltp"`.
    pub sample_format: String,
}

/// Decodes `src`'s best audio stream into a `[C, S]` f32 waveform.
///
/// Encoder delay and padding are trimmed as the ffmpeg command line trims
/// them (the decoder applies the stream's skip-samples side data, e.g. the
/// LAME tag of an MP3), so lengths match `ffmpeg -i f -f f32le -`.
///
/// Errors (each naming the source's key): `Empty`, `UnknownFormat`,
/// `Truncated`, `Corrupt` as for [`crate::video::load_video`];
/// `Unsupported`: no audio stream or no decoder for it; `InvalidArgument`: a
/// zero rate or channel count, an empty or reversed window, a window that
/// starts after the end of the stream; `LimitExceeded`: more than
/// `max_samples`.
pub fn load_audio<'a>(src: impl Into<MediaSource<'a>>, opts: &AudioOptions) -> Result<Audio> {
    let src = src.into();
    load(&src, opts).map_err(|e| src.err(e))
}

fn load(src: &MediaSource<'_>, opts: &AudioOptions) -> Result<Audio> {
    if opts.sample_rate == Some(0) || opts.channels == Some(0) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "sample rate and channel count must be >= 1",
        ));
    }
    if let Some((s, e)) = opts.window {
        if s.is_nan() || e.is_nan() || e <= s {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("time window [{s}, {e}) is empty"),
            ));
        }
    }
    let mut demux = Demuxer::open_with(src, &opts.demux)?;
    let (stream, time_base, params, start_ts, duration) = {
        let Some(st) = demux.input().streams().best(media::Type::Audio) else {
            return Err(Error::new(ErrorKind::Unsupported, "no audio stream"));
        };
        let start = if st.start_time() == ff::ffi::AV_NOPTS_VALUE {
            0
        } else {
            st.start_time()
        };
        let duration = (st.duration() > 0).then(|| seconds(st.duration(), st.time_base()));
        (st.index(), st.time_base(), st.parameters(), start, duration)
    };
    let ctx = codec::Context::from_parameters(params)
        .map_err(|e| ff_err(ErrorKind::Corrupt, "reading codec parameters", e))?;
    let mut decoder = open_decoder(ctx, time_base, &opts.decode)?
        .audio()
        .map_err(|e| ff_err(ErrorKind::InvalidArgument, "not an audio decoder", e))?;
    let rate = decoder.rate();
    let nch = usize::from(decoder.channels());
    if rate == 0 || nch == 0 {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("stream header says {rate} Hz, {nch} channels"),
        ));
    }
    let info = AudioInfo {
        codec: decoder
            .codec()
            .map(|c| c.name().to_owned())
            .unwrap_or_default(),
        sample_rate: rate,
        channels: nch,
        sample_format: decoder.format().name().to_owned(),
    };

    if let Some((start, _)) = opts.window {
        let ts = to_ts(start, time_base);
        if ts > start_ts {
            demux.seek_stream(stream, ts)?;
            decoder.flush();
        }
    }
    // Window in absolute input-sample positions.
    let window = opts.window.map(|(s, e)| {
        let lo = (s * f64::from(rate)).round() as i64;
        let hi = if e.is_finite() {
            (e * f64::from(rate)).round() as i64
        } else {
            i64::MAX
        };
        (lo, hi)
    });

    // Room for the samples the header announces (the window's share of them), so that the
    // planes do not grow by doubling: each regrowth copies everything decoded so far and
    // touches fresh pages. Capped by max_samples; a wrong header only costs a regrowth.
    let expect = duration
        .map(|d| match opts.window {
            Some((s, e)) => (e.min(d) - s).max(0.0),
            None => d,
        })
        .map_or(0, |d| (d * f64::from(rate)).ceil() as usize + 1)
        .min(opts.max_samples / nch);
    let mut planes: Vec<Vec<f32>> = (0..nch)
        .map(|c| {
            // Channel 0 becomes the output buffer (see below): room for every channel.
            Vec::with_capacity(if c == 0 { expect * nch } else { expect })
        })
        .collect();
    let mut filter = opts
        .filter_desc
        .as_deref()
        .map(|d| AudioFilter::new(d, opts.max_samples));
    let mut first_pos: Option<i64> = None;
    let mut next_pos: Option<i64> = None;
    let mut frame = ff::frame::Audio::empty();
    let mut done = false;
    let mut layout = decoder.channel_layout();
    while !done {
        let mut packet = ff::Packet::empty();
        let more = demux.read_packet(&mut packet)?;
        if more {
            if packet.stream() != stream {
                continue;
            }
            if let Err(e) = decoder.send_packet(&packet) {
                return Err(demux.classify(e, "decoding audio"));
            }
        } else if let Err(e) = decoder.send_eof() {
            if !matches!(e, ff::Error::Eof) {
                return Err(demux.classify(e, "flushing audio decoder"));
            }
        }
        loop {
            match decoder.receive_frame(&mut frame) {
                Ok(()) => {
                    let fch = usize::from(frame.channels());
                    if fch != nch || frame.rate() != rate {
                        return Err(Error::new(
                            ErrorKind::Unsupported,
                            format!(
                                "stream changes from {rate} Hz {nch} ch to {} Hz {fch} ch",
                                frame.rate()
                            ),
                        ));
                    }
                    layout = frame.channel_layout();
                    let n = frame.samples() as i64;
                    // Absolute position of the frame's first sample.
                    let pos = match frame.timestamp() {
                        Some(ts) => (seconds(ts, time_base) * f64::from(rate)).round() as i64,
                        None => next_pos.unwrap_or(0),
                    };
                    next_pos = Some(pos + n);
                    let (lo, hi) = match window {
                        Some((wl, wh)) => {
                            ((wl - pos).clamp(0, n), (wh.saturating_sub(pos)).clamp(0, n))
                        }
                        None => (0, n),
                    };
                    if let Some((_, wh)) = window {
                        if pos >= wh {
                            done = true;
                            break;
                        }
                    }
                    if hi > lo {
                        if first_pos.is_none() {
                            first_pos = Some(pos + lo);
                        }
                        let total = planes[0].len() + (hi - lo) as usize;
                        if total.saturating_mul(nch) > opts.max_samples {
                            return Err(Error::new(
                                ErrorKind::LimitExceeded,
                                format!("more than max_samples {} samples", opts.max_samples),
                            ));
                        }
                        match filter.as_mut() {
                            Some(f) => f.push(&mut frame, lo as usize, hi as usize, pos + lo)?,
                            None => append_f32(&frame, lo as usize, hi as usize, &mut planes)?,
                        }
                    }
                }
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => break,
                Err(ff::Error::Eof) => {
                    done = true;
                    break;
                }
                Err(e) => return Err(demux.classify(e, "decoding audio")),
            }
        }
        if !more {
            done = true;
        }
    }
    if let Some((s, _)) = opts.window {
        if first_pos.is_none() && planes[0].is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("time window starting at {s} s is past the end of the stream"),
            ));
        }
    }
    let start = first_pos.map_or(0.0, |p| p as f64 / f64::from(rate));
    let (planes, layout, rate) = match filter {
        Some(f) => f.finish(&frame, rate)?,
        None => (planes, layout, rate),
    };
    let nch = planes.len();
    let out_rate = opts.sample_rate.unwrap_or(rate);
    let out_ch = opts.channels.map_or(nch, usize::from);
    let planes = if out_rate != rate || out_ch != nch {
        resample(&planes, layout, rate, out_ch, out_rate)?
    } else {
        planes
    };
    let samples = planes.first().map_or(0, Vec::len);
    let channels = planes.len();
    // Channel after channel in one buffer, reusing channel 0's (which has room for all when
    // the header told the length).
    let mut planes = planes.into_iter();
    let mut data = planes.next().unwrap_or_default();
    data.reserve_exact(samples * channels.saturating_sub(1));
    for p in planes {
        data.extend_from_slice(&p);
    }
    Ok(Audio {
        data,
        channels,
        samples,
        sample_rate: out_rate,
        start,
        info,
    })
}

/// The `filter_desc` graph of [`load_audio`]: decoded frames (cut to the
/// window) in the decoder's own sample format, as the ffmpeg command line
/// feeds `-af`; the output is read as f32.
struct AudioFilter<'d> {
    desc: &'d str,
    /// Built from the first frame.
    graph: Option<FilterGraph>,
    planes: Vec<Vec<f32>>,
    layout: ChannelLayout,
    out: ff::frame::Audio,
    max_samples: usize,
}

impl<'d> AudioFilter<'d> {
    fn new(desc: &'d str, max_samples: usize) -> Self {
        AudioFilter {
            desc,
            graph: None,
            planes: Vec::new(),
            layout: ChannelLayout::empty(),
            out: ff::frame::Audio::empty(),
            max_samples,
        }
    }

    /// Sends samples `lo..hi` of `frame`, the first one at sample position
    /// `pos` (its pts in 1/rate), and collects what the graph gives back.
    fn push(&mut self, frame: &mut ff::frame::Audio, lo: usize, hi: usize, pos: i64) -> Result<()> {
        let time_base = ff::Rational::new(1, frame.rate() as i32);
        let part;
        let input = if lo == 0 && hi == frame.samples() {
            frame.set_pts(Some(pos));
            &*frame
        } else {
            part = slice_frame(frame, lo, hi, pos)?;
            &part
        };
        if self.graph.is_none() {
            self.graph = Some(FilterGraph::audio(self.desc, input, time_base)?);
        }
        if let Some(g) = self.graph.as_mut() {
            g.push(Some(input))?;
        }
        self.collect()
    }

    fn collect(&mut self) -> Result<()> {
        let Some(graph) = self.graph.as_mut() else {
            return Ok(());
        };
        while graph.pull(&mut self.out)? {
            let ch = usize::from(self.out.channels());
            if self.planes.is_empty() {
                self.planes = vec![Vec::new(); ch];
                self.layout = self.out.channel_layout();
            } else if self.planes.len() != ch {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "filter output changes from {} to {ch} channels",
                        self.planes.len()
                    ),
                ));
            }
            let n = self.out.samples();
            if (self.planes[0].len() + n).saturating_mul(ch) > self.max_samples {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    format!("more than max_samples {} samples", self.max_samples),
                ));
            }
            append_f32(&self.out, 0, n, &mut self.planes)?;
        }
        Ok(())
    }

    /// Flushes the graph: the filtered planes, their layout and rate.
    /// `probe` (a decoded frame, or an empty one) builds the graph when no
    /// sample reached it, so a bad description still fails.
    fn finish(
        mut self,
        probe: &ff::frame::Audio,
        rate: u32,
    ) -> Result<(Vec<Vec<f32>>, ChannelLayout, u32)> {
        let Some(graph) = self.graph.as_mut() else {
            if probe.format() != Sample::None && probe.rate() > 0 {
                FilterGraph::audio(self.desc, probe, ff::Rational::new(1, probe.rate() as i32))?;
            }
            return Ok((Vec::new(), ChannelLayout::empty(), rate));
        };
        graph.push(None)?;
        let out_rate = graph.sample_rate();
        let channels = graph.channels().max(1);
        self.collect()?;
        if self.planes.is_empty() {
            self.planes = vec![Vec::new(); channels];
        }
        Ok((self.planes, self.layout, out_rate))
    }
}

/// Samples `lo..hi` of `frame` as a new frame in the same format, with pts
/// `pos`.
fn slice_frame(
    frame: &ff::frame::Audio,
    lo: usize,
    hi: usize,
    pos: i64,
) -> Result<ff::frame::Audio> {
    let fmt = frame.format();
    let nch = usize::from(frame.channels());
    let bps = fmt.bytes();
    let mut part = ff::frame::Audio::new(fmt, hi - lo, frame.channel_layout());
    part.set_rate(frame.rate());
    part.set_pts(Some(pos));
    let (planes, width) = if fmt.is_planar() {
        (nch, bps)
    } else {
        (1, bps * nch)
    };
    for p in 0..planes {
        let src = frame.data(p);
        let src = src.get(lo * width..hi * width).ok_or_else(short_frame)?;
        let dst = part.data_mut(p);
        let dst = dst.get_mut(..src.len()).ok_or_else(short_frame)?;
        dst.copy_from_slice(src);
    }
    Ok(part)
}

/// Appends samples `lo..hi` of every channel of `frame` as f32 (u8 as
/// (x - 128) / 128, s16 / 32768, s32 / 2^31, s64 / 2^63, float as is).
fn append_f32(
    frame: &ff::frame::Audio,
    lo: usize,
    hi: usize,
    planes: &mut [Vec<f32>],
) -> Result<()> {
    let fmt = frame.format();
    let nch = planes.len();
    let bps = fmt.bytes();
    let planar = fmt.is_planar();
    let n = frame.samples();
    let conv: fn(&[u8]) -> f32 = match fmt {
        Sample::U8(_) => |b| (f32::from(b[0]) - 128.0) / 128.0,
        Sample::I16(_) => |b| f32::from(i16::from_ne_bytes([b[0], b[1]])) / 32768.0,
        Sample::I32(_) => {
            |b| (f64::from(i32::from_ne_bytes([b[0], b[1], b[2], b[3]])) / 2147483648.0) as f32
        }
        Sample::I64(_) => |b| {
            (i64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f64
                / 9_223_372_036_854_775_808.0) as f32
        },
        Sample::F32(_) => |b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
        Sample::F64(_) => {
            |b| f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32
        }
        Sample::None => {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "decoder returned no sample format",
            ))
        }
    };
    if planar {
        if frame.planes() < nch {
            return Err(Error::new(ErrorKind::Corrupt, "fewer planes than channels"));
        }
        for (c, plane) in planes.iter_mut().enumerate() {
            let bytes = frame.data(c);
            let bytes = bytes.get(..n * bps).ok_or_else(short_frame)?;
            plane.extend(bytes[lo * bps..hi * bps].chunks_exact(bps).map(conv));
        }
    } else {
        let bytes = frame.data(0);
        let bytes = bytes.get(..n * bps * nch).ok_or_else(short_frame)?;
        for s in bytes[lo * bps * nch..hi * bps * nch].chunks_exact(bps * nch) {
            for (c, plane) in planes.iter_mut().enumerate() {
                plane.push(conv(&s[c * bps..(c + 1) * bps]));
            }
        }
    }
    Ok(())
}

fn short_frame() -> Error {
    Error::new(
        ErrorKind::Corrupt,
        "decoded frame is shorter than its sample count",
    )
}

/// The highest sample rate resampled from or to, Hz (real audio tops out at 768 kHz). A header
/// claiming more is corrupt, and swresample refuses such extreme ratios, and ffmpeg-next 9.0
/// then leaks the context it allocated (found by the `ffmpeg` fuzz target).
const MAX_RESAMPLE_RATE: u32 = 1_000_000;

/// Resamples / remixes f32 planes with swresample (a fresh context per call).
///
/// # Errors
/// [`ErrorKind::Unsupported`] when a rate is above [`MAX_RESAMPLE_RATE`] or swresample has no
/// resampler for the conversion.
fn resample(
    planes: &[Vec<f32>],
    layout: ChannelLayout,
    rate: u32,
    out_ch: usize,
    out_rate: u32,
) -> Result<Vec<Vec<f32>>> {
    let nch = planes.len();
    let in_layout = if layout.is_empty() || layout.channels() as usize != nch {
        ChannelLayout::default(nch as i32)
    } else {
        layout
    };
    let out_layout = if out_ch == nch {
        in_layout
    } else {
        ChannelLayout::default(out_ch as i32)
    };
    if rate > MAX_RESAMPLE_RATE || out_rate > MAX_RESAMPLE_RATE {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "cannot resample from {rate} Hz to {out_rate} Hz: rates above {MAX_RESAMPLE_RATE} Hz are refused"
            ),
        ));
    }
    let mut swr = resampling::Context::get(
        Sample::F32(ff::format::sample::Type::Planar),
        in_layout,
        rate,
        Sample::F32(ff::format::sample::Type::Planar),
        out_layout,
        out_rate,
    )
    .map_err(|e| {
        ff_err(
            ErrorKind::Unsupported,
            &format!("no resampler from {rate} Hz {nch} ch to {out_rate} Hz {out_ch} ch"),
            e,
        )
    })?;
    let in_n = planes.first().map_or(0, Vec::len);
    let expected = (in_n as u128 * u128::from(out_rate)).div_ceil(u128::from(rate.max(1)));
    let cap = usize::try_from(expected)
        .unwrap_or(usize::MAX)
        .saturating_add(4096);
    let mut out: Vec<Vec<f32>> = vec![vec![0.0; cap]; out_ch];
    let mut written = 0usize;
    // The input in chunks (so counts fit a C int), then flushes (null input)
    // until nothing is left.
    const CHUNK: usize = 1 << 20;
    let mut offset = 0usize;
    loop {
        let flushing = offset >= in_n;
        let inn = (in_n - offset.min(in_n)).min(CHUNK);
        let room = (cap - written).min(i32::MAX as usize);
        if room == 0 {
            break;
        }
        let in_ptrs: Vec<*const u8> = planes
            .iter()
            .map(|p| p[offset.min(in_n)..].as_ptr().cast())
            .collect();
        let mut out_ptrs: Vec<*mut u8> = out
            .iter_mut()
            .map(|p| p[written..].as_mut_ptr().cast())
            .collect();
        let ip = if flushing {
            std::ptr::null_mut()
        } else {
            in_ptrs.as_ptr().cast_mut()
        };
        // SAFETY: `swr` is configured for planar f32 with `nch` inputs and
        // `out_ch` outputs; `in_ptrs` has `nch` planes with at least `inn`
        // samples each from `offset` (or is null when flushing); every output
        // pointer has `room` writable f32 slots, and swr_convert writes at
        // most `room` samples per plane.
        let got = unsafe {
            ff::ffi::swr_convert(
                swr.as_mut_ptr(),
                out_ptrs.as_mut_ptr(),
                room as std::ffi::c_int,
                ip,
                inn as std::ffi::c_int,
            )
        };
        if got < 0 {
            return Err(ff_err(
                ErrorKind::Corrupt,
                "resampling",
                ff::Error::from(got),
            ));
        }
        written += got as usize;
        if flushing && got == 0 {
            break;
        }
        offset += inn;
    }
    for p in &mut out {
        p.truncate(written);
    }
    Ok(out)
}
