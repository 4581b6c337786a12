//! Demuxing into [`Packets`], as SPDL's `Demuxer` (`demux_video`,
//! `demux_audio`, `demux_image`, `streaming_demux`, `has_audio`, codec and
//! stream-index accessors) and the one-shot `demux_video` / `demux_audio` /
//! `demux_image` functions.

use std::collections::BTreeMap;

use ffmpeg_next::{self as ff, media};

use super::bsf::Bsf;
use super::config::DemuxConfig;
use super::frames::MediaKind;
use super::packets::{Codec, Packets};
use super::{to_ts, MediaSource};
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

fn check_window(window: Option<(f64, f64)>) -> Result<()> {
    if let Some((s, e)) = window {
        if s.is_nan() || e.is_nan() || e <= s {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("time window [{s}, {e}) is empty"),
            ));
        }
    }
    Ok(())
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
    /// `window = Some((start, end))` those needed for the frames with
    /// `start <= pts < end` (video: from the key frame at or before
    /// `start`, seeking there; audio: the packets overlapping the window),
    /// passed through the bit-stream filter `bsf` when given. Image: the
    /// first packet of the picture stream. As SPDL's
    /// `Demuxer.demux_video/audio/image`.
    ///
    /// Errors: `Unsupported` (no such stream), `InvalidArgument` (an empty
    /// or reversed window, a bad `bsf`), `Truncated` / `Corrupt` from
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
        let (seek_to, end_ts) = match window {
            Some((start, end)) => (
                Some(to_ts(start, tb).max(start_ts)),
                end.is_finite().then(|| to_ts(end, tb)),
            ),
            None => (None, None),
        };
        if self.dirty && seek_to.is_none_or(|ts| ts <= start_ts) {
            self.rewind()?;
        }
        if let Some(ts) = seek_to.filter(|&ts| ts > start_ts) {
            self.inner.seek_stream(index, ts)?;
        }
        self.dirty = true;
        let start_ts_window = window.map(|(s, _)| to_ts(s, tb));
        let mut packets = Vec::new();
        loop {
            let mut packet = ff::Packet::empty();
            if !self.inner.read_packet(&mut packet)? {
                break;
            }
            if packet.stream() != index || packet.size() == 0 {
                continue;
            }
            if let Some(end) = end_ts {
                let t = match kind {
                    // dts only grows and pts >= dts: from here on every frame
                    // is shown at or after `end`.
                    MediaKind::Video => packet.dts(),
                    _ => packet.pts(),
                };
                if t.is_some_and(|t| t >= end) {
                    break;
                }
            }
            if kind == MediaKind::Audio {
                // Audio packets wholly before the window are not needed.
                if let (Some(s), Some(p)) = (start_ts_window, packet.pts()) {
                    if p + packet.duration().max(0) <= s && packet.duration() > 0 {
                        continue;
                    }
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
