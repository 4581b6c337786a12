//! Demuxing and decoding in two steps, as SPDL's `demux_video` and
//! `decode_packets`: [`demux_video`] reads the packets of the best video
//! stream (optionally those of a time window) into a [`VideoPackets`], which
//! can be kept, sent to another thread and decoded later by
//! [`decode_packets`], as often as needed.

use ffmpeg_next::{self as ff, codec, media};

use super::{
    assemble, check_limit, graph_plan, Collector, ConverterFactory, Session, Video, VideoInfo,
    VideoOptions,
};
use crate::ffmpeg::decoder::open_decoder;
use crate::ffmpeg::filter::FilterGraph;
use crate::ffmpeg::{ff_err, seconds, to_ts, MediaSource};
use crate::{Error, ErrorKind, Result};

/// The codec parameters of the stream (an `AVCodecParameters` copy).
struct Params(codec::Parameters);

// SAFETY: `AVCodecParameters` is plain data owned by this value; it is only
// read through `&self` (copied by `avcodec_parameters_copy` when a decoder
// is made), so shared references on several threads are sound.
unsafe impl Sync for Params {}

/// The demuxed packets of one video stream, in decode (file) order, with
/// the codec parameters needed to decode them. As SPDL's `VideoPackets`.
#[derive(derive_more::Debug)]
pub struct VideoPackets {
    key: String,
    #[debug(skip)]
    params: Params,
    time_base: ff::Rational,
    #[debug("[{} packets]", packets.len())]
    packets: Vec<ff::Packet>,
    window: Option<(f64, f64)>,
    info: VideoInfo,
}

impl Clone for VideoPackets {
    /// A copy sharing the packets' data (reference counted by FFmpeg).
    fn clone(&self) -> Self {
        VideoPackets {
            key: self.key.clone(),
            params: Params(self.params.0.clone()),
            time_base: self.time_base,
            packets: self.packets.clone(),
            window: self.window,
            info: self.info.clone(),
        }
    }
}

impl VideoPackets {
    crate::ffmpeg::packets::packet_list_accessors!();

    /// Header information of the stream.
    pub fn info(&self) -> &VideoInfo {
        &self.info
    }

    /// The packets' presentation timestamps in seconds, in decode order
    /// (packets without one are left out).
    pub fn timestamps(&self) -> Vec<f64> {
        self.packets
            .iter()
            .filter_map(|p| p.pts())
            .map(|t| seconds(t, self.time_base))
            .collect()
    }
}

/// Reads the packets of `src`'s best video stream: all of them, or with
/// `timestamp = Some((start, end))` those needed for the frames with
/// `start <= pts < end` (from the key frame before `start`, seeking there,
/// to the first packet whose dts reaches `end`). As SPDL's `demux_video`.
///
/// Errors: as [`super::load_video`] for opening and reading;
/// `InvalidArgument` for an empty or reversed window.
pub fn demux_video<'a>(
    src: impl Into<MediaSource<'a>>,
    timestamp: Option<(f64, f64)>,
) -> Result<VideoPackets> {
    let src = src.into();
    demux(&src, timestamp).map_err(|e| src.err(e))
}

fn demux(src: &MediaSource<'_>, window: Option<(f64, f64)>) -> Result<VideoPackets> {
    if let Some((s, e)) = window {
        if s.is_nan() || e.is_nan() || e <= s {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("time window [{s}, {e}) is empty"),
            ));
        }
    }
    let mut session = Session::open(src, 1)?;
    let params = session
        .demux
        .input()
        .streams()
        .best(media::Type::Video)
        .map(|st| st.parameters())
        .ok_or_else(|| Error::new(ErrorKind::Unsupported, "no video stream"))?;
    let tb = session.time_base;
    let end_ts = match window {
        Some((start, end)) => {
            let ts = to_ts(start, tb);
            if ts > session.start_ts {
                session.demux.seek_stream(session.stream, ts)?;
            }
            end.is_finite().then(|| to_ts(end, tb))
        }
        None => None,
    };
    let mut packets = Vec::new();
    loop {
        let mut packet = ff::Packet::empty();
        if !session.demux.read_packet(&mut packet)? {
            break;
        }
        if packet.stream() != session.stream || packet.size() == 0 {
            continue;
        }
        // dts only grows and pts >= dts: from here on every frame is
        // shown at or after `end`.
        if let (Some(end), Some(dts)) = (end_ts, packet.dts()) {
            if dts >= end {
                break;
            }
        }
        packets.push(packet);
    }
    Ok(VideoPackets {
        key: src.key().to_owned(),
        params: Params(params),
        time_base: tb,
        packets,
        window,
        info: session.info.clone(),
    })
}

/// Decodes `packets` into one `[T, H, W, C]` tensor, as [`super::load_video`]
/// does with `opts` (pixel format, size, rotation, threads, `filter_desc`,
/// `decode`: the decoder and its options);
/// `opts.selection` must be [`super::FrameSelection::All`]: the frames are
/// those of the packets' time window (all when it has none), at most
/// `num_frames` of them when given. As SPDL's `decode_packets` followed by
/// `convert_frames`.
///
/// Errors: `Corrupt` / `Unsupported` from the decoder, `InvalidArgument` for
/// another selection or a bad `filter_desc`, `LimitExceeded` over
/// `opts.max_output_bytes`; each names the source.
pub fn decode_packets(
    packets: &VideoPackets,
    opts: &VideoOptions,
    num_frames: Option<usize>,
) -> Result<Video> {
    decode(packets, opts, num_frames).map_err(|e| e.with_key(&packets.key))
}

fn decode(packets: &VideoPackets, opts: &VideoOptions, limit: Option<usize>) -> Result<Video> {
    if opts.selection != super::FrameSelection::All {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "decode_packets decodes the packets' own frames: give no frame selection",
        ));
    }
    let mut ctx = codec::Context::from_parameters(packets.params.0.clone())
        .map_err(|e| ff_err(ErrorKind::Corrupt, "reading codec parameters", e))?;
    ctx.set_threading(codec::threading::Config {
        kind: codec::threading::Type::Frame,
        count: super::checked_threads(opts.threads)?,
        ..Default::default()
    });
    let mut decoder = open_decoder(ctx, packets.time_base, &opts.decode)?
        .video()
        .map_err(|e| ff_err(ErrorKind::InvalidArgument, "not a video decoder", e))?;
    let (graph_desc, info) = graph_plan(&packets.info, opts);
    let mut out = Collector {
        factory: ConverterFactory { info, opts },
        opts,
        conv: None,
        data: Vec::new(),
        pts: Vec::new(),
        indices: Vec::new(),
    };
    let (start, end) = packets.window.unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
    let limit = limit.unwrap_or(usize::MAX);
    let tb = packets.time_base;
    let mut graph: Option<FilterGraph> = None;
    let mut frame = ff::frame::Video::empty();
    let mut filtered = ff::frame::Video::empty();
    let mut n = 0usize;
    // Hands the decoder's frames inside the window to the output.
    let mut take = |decoder: &mut codec::decoder::Video,
                    out: &mut Collector<'_>,
                    graph: &mut Option<FilterGraph>|
     -> Result<()> {
        loop {
            match decoder.receive_frame(&mut frame) {
                Ok(()) => {
                    let pts = frame.timestamp().map_or(0.0, |t| seconds(t, tb));
                    if pts < start || pts >= end || out.pts.len() >= limit {
                        continue;
                    }
                    match graph_desc.as_deref() {
                        None => out.push(&frame, n, pts)?,
                        Some(desc) => {
                            if graph.is_none() {
                                *graph = Some(FilterGraph::video(desc, &frame, tb, opts.threads)?);
                            }
                            if let Some(g) = graph.as_mut() {
                                let ts = frame.timestamp();
                                frame.set_pts(ts);
                                g.push(Some(&*frame))?;
                                out.drain(g, &mut filtered, n)?;
                            }
                        }
                    }
                    n += 1;
                }
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {
                    return Ok(())
                }
                Err(ff::Error::Eof) => return Ok(()),
                Err(e) => return Err(ff_err(ErrorKind::Corrupt, "decoding video", e)),
            }
        }
    };
    for packet in &packets.packets {
        decoder
            .send_packet(packet)
            .map_err(|e| ff_err(ErrorKind::Corrupt, "decoding video", e))?;
        take(&mut decoder, &mut out, &mut graph)?;
    }
    decoder
        .send_eof()
        .map_err(|e| ff_err(ErrorKind::Corrupt, "flushing video decoder", e))?;
    take(&mut decoder, &mut out, &mut graph)?;
    if let Some(g) = graph.as_mut() {
        g.push(None)?;
        out.drain(g, &mut filtered, n)?;
    }
    out.pts.truncate(limit);
    if let Some(conv) = out.conv.as_ref() {
        check_limit(out.pts.len(), conv.frame_len(), opts)?;
        out.data.truncate(out.pts.len() * conv.frame_len());
    }
    Ok(assemble(
        &packets.info,
        out.conv.as_ref(),
        opts,
        out.data,
        out.pts,
        None,
        None,
    ))
}
