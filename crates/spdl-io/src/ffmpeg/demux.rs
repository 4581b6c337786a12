//! Demuxing into [`Packets`], as SPDL's `Demuxer` (`demux_video`,
//! `demux_audio`, `demux_image`, `streaming_demux`, `has_audio`, codec and
//! stream-index accessors) and the one-shot `demux_video` / `demux_audio` /
//! `demux_image` functions.

use std::collections::BTreeMap;

use ffmpeg_next::{self as ff, ffi, media};

use super::bsf::Bsf;
use super::config::DemuxConfig;
use super::frames::MediaKind;
use super::packets::{Codec, Packets};
use super::MediaSource;
use crate::{Error, ErrorKind, Result};

/// An open container. As SPDL's `spdl.io.Demuxer`.
///
/// A `Demuxer<'static>` (from [`MediaSource::shared`] or
/// [`MediaSource::file_owned`]) can be kept and used from any thread.
#[derive(derive_more::Debug)]
pub struct Demuxer<'a> {
    #[debug(skip)]
    inner: super::Demuxer<'a>,
    /// To reopen: the exact way back to the first packet of every stream.
    #[debug(skip)]
    src: MediaSource<'a>,
    config: DemuxConfig,
    key: String,
    /// Packets were read, so a whole-stream demux must seek back first.
    dirty: bool,
}

fn kind_media(kind: MediaKind) -> media::Type {
    match kind {
        MediaKind::Audio => media::Type::Audio,
        MediaKind::Video | MediaKind::Image => media::Type::Video,
    }
}

/// A window `[start, end)` must be ordered; an empty one (`start == end`) is
/// valid and selects no frame, as in SPDL.
fn check_window(window: Option<(f64, f64)>) -> Result<()> {
    if let Some((s, e)) = window {
        if s.is_nan() || e.is_nan() || e < s {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("time window [{s}, {e}) is reversed"),
            ));
        }
    }
    Ok(())
}

/// How far past a video window's end demuxing goes (seconds): frames are
/// stored out of display order, so a frame shown before `end` can follow one
/// shown after it. SPDL 0.8.0's margin, so that the same packets are selected.
const VIDEO_END_MARGIN: ffi::AVRational = ffi::AVRational { num: 3, den: 10 };

/// `seconds` in `time_base` units, rounded to the nearest (as FFmpeg's
/// `av_rescale`, which SPDL uses for the seek target).
fn round_ts(seconds: f64, time_base: ff::Rational) -> i64 {
    if time_base.numerator() == 0 {
        return 0;
    }
    let v = seconds * f64::from(time_base.denominator()) / f64::from(time_base.numerator());
    v.round() as i64
}

impl<'a> Demuxer<'a> {
    /// Opens `src` with `config` and reads its stream headers.
    ///
    /// Errors: `Empty`, `UnknownFormat` (not a container FFmpeg
    /// recognizes), `Truncated`, `Corrupt`, `InvalidArgument` (a file that
    /// cannot be opened, an unknown `config.format` or option); each names
    /// the source.
    pub fn open(src: &MediaSource<'a>, config: &DemuxConfig) -> Result<Self> {
        let inner = super::Demuxer::open_with(src, config)?;
        Ok(Demuxer {
            inner,
            src: src.clone(),
            config: config.clone(),
            key: src.key().to_owned(),
            dirty: false,
        })
    }

    /// The source's name (as in errors).
    pub fn key(&self) -> &str {
        &self.key
    }

    fn err(&self, e: Error) -> Error {
        e.with_key(&self.key)
    }

    /// The index of the default ("best") stream of `kind`.
    ///
    /// Errors: `Unsupported` when there is none.
    pub fn stream_index(&self, kind: MediaKind) -> Result<usize> {
        self.inner
            .input()
            .streams()
            .best(kind_media(kind))
            .map(|s| s.index())
            .ok_or_else(|| {
                self.err(Error::new(
                    ErrorKind::Unsupported,
                    format!("no {} stream", kind_media_name(kind)),
                ))
            })
    }

    /// Whether the container has an audio stream.
    pub fn has_audio(&self) -> bool {
        self.inner
            .input()
            .streams()
            .best(media::Type::Audio)
            .is_some()
    }

    /// The codec of the default stream of `kind`. Errors as
    /// [`Demuxer::stream_index`].
    pub fn codec(&self, kind: MediaKind) -> Result<Codec> {
        let i = self.stream_index(kind)?;
        Ok(self.codec_of(i, kind))
    }

    fn codec_of(&self, index: usize, kind: MediaKind) -> Codec {
        let st = self
            .inner
            .input()
            .stream(index)
            .expect("valid stream index");
        let rotation = if kind == MediaKind::Audio {
            0
        } else {
            super::stream_rotation(&st)
        };
        Codec::new(
            kind,
            st.parameters(),
            st.time_base(),
            st.avg_frame_rate(),
            rotation,
        )
    }

    /// Back to the first packet of every stream. Reopens the container:
    /// seeking to the start loses the first packets of other streams in
    /// some containers (MP4 with an edit list).
    fn rewind(&mut self) -> Result<()> {
        self.inner = super::Demuxer::open_with(&self.src, &self.config)?;
        Ok(())
    }

    fn start_ts(&self, index: usize) -> i64 {
        let st = self
            .inner
            .input()
            .stream(index)
            .expect("valid stream index");
        if st.start_time() == ff::ffi::AV_NOPTS_VALUE {
            0
        } else {
            st.start_time()
        }
    }

    /// The packets of the default stream of `kind`: all of them, or with
    /// `window = Some((start, end))` those SPDL 0.8.0 selects for the frames
    /// with `start <= pts < end`: in decode order from the key frame before
    /// `start` (seeking there; the packets before `start` are the references
    /// the window's frames need) up to the first packet shown at or after
    /// `end` (video: `end + 0.3` s, as frames are stored out of display
    /// order). An empty window `[t, t)` is valid: its packets decode to no
    /// frame. Passed through the bit-stream filter `bsf` when given. Image:
    /// the first packet of the picture stream. As SPDL's
    /// `Demuxer.demux_video/audio/image`.
    ///
    /// Errors: `Unsupported` (no such stream), `InvalidArgument` (a
    /// reversed window, a bad `bsf`), `Truncated` / `Corrupt` from
    /// reading; each names the source.
    pub fn demux(
        &mut self,
        kind: MediaKind,
        window: Option<(f64, f64)>,
        bsf: Option<&str>,
    ) -> Result<Packets> {
        self.demux_inner(kind, window, bsf)
            .map_err(|e| e.with_key(&self.key))
    }

    fn demux_inner(
        &mut self,
        kind: MediaKind,
        window: Option<(f64, f64)>,
        bsf: Option<&str>,
    ) -> Result<Packets> {
        check_window(window)?;
        if kind == MediaKind::Image && window.is_some() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "an image has no time window",
            ));
        }
        let index = self.stream_index(kind)?;
        let codec = self.codec_of(index, kind);
        let tb = codec.time_base;
        let start_ts = self.start_ts(index);
        // As SPDL 0.8.0: seek to the key frame before `start` (the target is
        // one tick early, so a key frame exactly at `start` is before it too),
        // then read in decode order until the first packet shown at or after
        // `end` (plus a margin for video). The packets before `start` stay:
        // they are the references the window's frames need.
        let seek_to = window.map(|(s, _)| round_ts(s, tb));
        // In fractions, as SPDL: 1.1 + 0.3 must equal a packet shown at 1.4.
        let end = window.map(|(_, e)| {
            let e = super::seconds_q(e);
            match kind {
                // SAFETY: pure arithmetic.
                MediaKind::Video => unsafe { ffi::av_add_q(e, VIDEO_END_MARGIN) },
                _ => e,
            }
        });
        let seek_target = seek_to
            .map(|t| t.saturating_sub(1))
            .filter(|&t| t > start_ts);
        if self.dirty && seek_target.is_none() {
            self.rewind()?;
        }
        if let Some(ts) = seek_target {
            self.inner.seek_stream(index, ts)?;
        }
        self.dirty = true;
        // A first packet after a seek shown later than `start` may be a
        // leading picture that refers to frames before the key frame (HEVC
        // RASL): seek again from its decode time, once.
        let mut check_first = seek_target.is_some();
        let mut packets = Vec::new();
        loop {
            let mut packet = ff::Packet::empty();
            if !self.inner.read_packet(&mut packet)? {
                break;
            }
            if packet.stream() != index || packet.size() == 0 {
                continue;
            }
            if check_first {
                check_first = false;
                if let (Some(t), Some(pts), Some(dts)) = (seek_to, packet.pts(), packet.dts()) {
                    if pts > t {
                        self.inner.seek_stream(index, dts.saturating_sub(1))?;
                        continue;
                    }
                }
            }
            if let (Some(end), Some(pts)) = (end, packet.pts()) {
                // SAFETY: pure arithmetic.
                if unsafe { ffi::av_cmp_q(super::ts_q(pts, tb), end) } >= 0 {
                    break;
                }
            }
            packets.push(packet);
            if kind == MediaKind::Image {
                break;
            }
        }
        let packets = Packets {
            key: self.key.clone(),
            codec,
            packets,
            window,
            stream_index: index,
            codec_attached: true,
            memory: None,
        };
        match bsf {
            None => Ok(packets),
            Some(name) => {
                let mut f = Bsf::new(packets.codec(), name)?;
                let mut out = f.filter(&packets, true)?;
                out.window = window;
                Ok(out)
            }
        }
    }

    /// Reads the streams `indices` in chunks, as SPDL's
    /// `Demuxer.streaming_demux`: each item maps a stream index to the
    /// packets read for it, a chunk ending after `num_packets` packets or
    /// once its packets span `duration` seconds (exactly one of the two is
    /// given), and the last chunk at the end of the file.
    ///
    /// Errors: `InvalidArgument` for no or both limits, an unknown stream
    /// index; read errors come from the iterator.
    pub fn streaming_demux(
        &mut self,
        indices: &[usize],
        duration: Option<f64>,
        num_packets: Option<usize>,
    ) -> Result<StreamingDemux> {
        let limit = match (duration, num_packets) {
            (Some(d), None) if d > 0.0 => Limit::Duration(d),
            (None, Some(n)) if n > 0 => Limit::Packets(n),
            _ => {
                return Err(self.err(Error::new(
                    ErrorKind::InvalidArgument,
                    "give exactly one of duration (> 0) and num_packets (> 0)",
                )))
            }
        };
        let n = self.inner.input().nb_streams() as usize;
        let mut codecs = BTreeMap::new();
        for &i in indices {
            if i >= n {
                return Err(self.err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("no stream {i} (the container has {n})"),
                )));
            }
            let st = self.inner.input().stream(i).expect("checked");
            let kind = match st.parameters().medium() {
                media::Type::Audio => MediaKind::Audio,
                media::Type::Video => MediaKind::Video,
                other => {
                    return Err(self.err(Error::new(
                        ErrorKind::Unsupported,
                        format!("stream {i} is {other:?}, not audio or video"),
                    )))
                }
            };
            codecs.insert(i, self.codec_of(i, kind));
        }
        if codecs.is_empty() {
            return Err(self.err(Error::new(
                ErrorKind::InvalidArgument,
                "no stream index given",
            )));
        }
        if self.dirty {
            self.rewind()?;
        }
        self.dirty = true;
        Ok(StreamingDemux {
            codecs,
            limit,
            done: false,
        })
    }
}

fn kind_media_name(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Audio => "audio",
        _ => "video",
    }
}

#[derive(Debug, Clone, Copy)]
enum Limit {
    Duration(f64),
    Packets(usize),
}

/// The state of a [`Demuxer::streaming_demux`]: pass the demuxer to
/// [`StreamingDemux::next_chunk`] for each chunk.
#[derive(Debug)]
pub struct StreamingDemux {
    codecs: BTreeMap<usize, Codec>,
    limit: Limit,
    done: bool,
}

impl StreamingDemux {
    /// The next chunk read from `demuxer` (the one this state came from),
    /// `None` at the end; after an error, `None`.
    pub fn next_chunk(
        &mut self,
        demuxer: &mut Demuxer<'_>,
    ) -> Option<Result<BTreeMap<usize, Packets>>> {
        if self.done {
            return None;
        }
        match self.read_chunk(demuxer) {
            Ok(Some(c)) => Some(Ok(c)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e.with_key(&demuxer.key)))
            }
        }
    }

    fn read_chunk(
        &mut self,
        demuxer: &mut Demuxer<'_>,
    ) -> Result<Option<BTreeMap<usize, Packets>>> {
        let mut chunk: BTreeMap<usize, Vec<ff::Packet>> = BTreeMap::new();
        let mut count = 0usize;
        let mut first_time: Option<f64> = None;
        loop {
            let mut packet = ff::Packet::empty();
            if !demuxer.inner.read_packet(&mut packet)? {
                self.done = true;
                break;
            }
            let Some(codec) = self.codecs.get(&packet.stream()) else {
                continue;
            };
            if packet.size() == 0 {
                continue;
            }
            let t = packet
                .pts()
                .or(packet.dts())
                .map(|ts| super::seconds(ts, codec.time_base));
            chunk.entry(packet.stream()).or_default().push(packet);
            count += 1;
            let full = match self.limit {
                Limit::Packets(n) => count >= n,
                Limit::Duration(d) => match (first_time, t) {
                    (None, Some(t)) => {
                        first_time = Some(t);
                        false
                    }
                    (Some(f), Some(t)) => t - f >= d,
                    _ => false,
                },
            };
            if full {
                break;
            }
        }
        if chunk.is_empty() {
            return Ok(None);
        }
        let key = demuxer.key.clone();
        Ok(Some(
            chunk
                .into_iter()
                .map(|(i, packets)| {
                    (
                        i,
                        Packets {
                            key: key.clone(),
                            codec: self.codecs[&i].clone(),
                            packets,
                            window: None,
                            stream_index: i,
                            // As SPDL: chunks of a stream carry no codec (the
                            // decoder was made from the demuxer's).
                            codec_attached: false,
                            memory: None,
                        },
                    )
                })
                .collect(),
        ))
    }
}

/// Opens `src` and demuxes the default stream of `kind` (see
/// [`Demuxer::demux`]). As SPDL's `demux_video` / `demux_audio` /
/// `demux_image` functions.
pub fn demux<'a>(
    src: impl Into<MediaSource<'a>>,
    kind: MediaKind,
    window: Option<(f64, f64)>,
    config: &DemuxConfig,
    bsf: Option<&str>,
) -> Result<Packets> {
    let src = src.into();
    let mut d = Demuxer::open(&src, config)?;
    d.demux(kind, window, bsf)
}
