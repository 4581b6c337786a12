//! Decoding [`Packets`] into [`Frames`], whole or in a stream, as SPDL's
//! `decode_packets` and `Decoder` / `VideoDecoder` / `AudioDecoder`
//! (`streaming_decode_packets`, `flush`), with an optional filter graph
//! (`filter_desc`) on the decoded frames.

use ffmpeg_next::{self as ff, codec, ffi};

use super::config::DecodeConfig;
use super::filter::FilterGraph;
use super::frames::{Frames, MediaKind};
use super::packets::{Codec, Packets};
use super::{ff_err, init, seconds};
use crate::{Error, ErrorKind, Result};

/// An open decoder for one stream's packets. As SPDL's `Decoder`.
#[derive(derive_more::Debug)]
pub struct Decoder {
    codec: Codec,
    #[debug(skip)]
    dec: codec::decoder::Opened,
    desc: Option<String>,
    #[debug(skip)]
    graph: Option<FilterGraph>,
    /// Frames outside `[start, end)` seconds are dropped (video) or trimmed
    /// by `atrim` (audio): the window of the packets decoded.
    window: Option<(f64, f64)>,
    key: String,
    /// The end of the input was sent (to the decoder and the graph).
    flushed: bool,
}

// SAFETY: the codec context and the filter graph are owned here and only
// used through `&mut self`.
unsafe impl Send for Decoder {}

impl Decoder {
    /// Opens a decoder for packets of `codec` (the codec's default decoder,
    /// or `config.decoder`, with `config.decoder_options`), whose frames go
    /// through `filter_desc` when given (as `ffmpeg -vf` / `-af`).
    ///
    /// Errors: `Unsupported` when FFmpeg has no decoder for the codec or no
    /// decoder named `config.decoder`; `InvalidArgument` for a decoder
    /// option it does not take; `Corrupt` when the codec parameters do not
    /// open. A bad `filter_desc` is reported by the first decode with frames.
    pub fn new(codec: &Codec, filter_desc: Option<&str>, config: &DecodeConfig) -> Result<Self> {
        init();
        let ctx = codec::Context::from_parameters(codec.params.0.clone())
            .map_err(|e| ff_err(ErrorKind::Corrupt, "reading codec parameters", e))?;
        let dec = open_decoder(ctx, codec.time_base, config)?;
        if let Some(d) = filter_desc {
            if d.contains('\0') {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("invalid filter description {d:?}: contains a NUL byte"),
                ));
            }
        }
        Ok(Decoder {
            codec: codec.clone(),
            dec,
            desc: filter_desc.map(str::to_owned),
            graph: None,
            window: None,
            key: String::new(),
            flushed: false,
        })
    }

    /// The frames of `packets` that the decoder can give so far (a decoder
    /// holds a few back for reordering until [`Decoder::flush`]). As SPDL's
    /// `streaming_decode_packets` (one chunk) / `Decoder.decode`.
    ///
    /// Errors: `Corrupt` for undecodable data, `InvalidArgument` for a bad
    /// `filter_desc`; each names the packets' source.
    pub fn decode(&mut self, packets: &Packets) -> Result<Frames> {
        self.key = packets.key.clone();
        if self.window.is_none() {
            self.window = packets.window;
        }
        self.decode_inner(packets, None)
            .map_err(|e| e.with_key(&self.key))
    }

    /// As [`Decoder::decode`], stopping once `limit` frames came out (the
    /// decoder gives them in presentation order, so they are the first).
    fn decode_inner(&mut self, packets: &Packets, limit: Option<usize>) -> Result<Frames> {
        if self.flushed {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the decoder was flushed; make a new one",
            ));
        }
        let mut out = Vec::new();
        // Video frames shown before the window are decoded only to serve as references:
        // the decoder skips the packets no other frame refers to (B-frames, mostly), which
        // `receive` would drop anyway. A seek lands on the key frame before the window, so
        // this is most of the lead-in work of a window far from its key frame.
        let lead_in_end = match (self.codec.kind(), self.window) {
            (MediaKind::Video, Some((start, _))) => Some(start),
            _ => None,
        };
        for p in &packets.packets {
            if let Some(start) = lead_in_end {
                let before = p
                    .pts()
                    .is_some_and(|pts| seconds(pts, self.codec.time_base) < start);
                let discard = if before {
                    ffi::AVDiscard::AVDISCARD_NONREF
                } else {
                    ffi::AVDiscard::AVDISCARD_DEFAULT
                };
                // SAFETY: the open codec context; the decoder reads `skip_frame` per packet.
                unsafe { (*self.dec.as_mut_ptr()).skip_frame = discard };
            }
            self.dec
                .send_packet(p)
                .map_err(|e| ff_err(ErrorKind::Corrupt, "decoding", e))?;
            self.receive(&mut out)?;
            if limit.is_some_and(|n| out.len() >= n) {
                break;
            }
        }
        Ok(self.frames(out))
    }

    /// Ends the stream: the frames the decoder (and filter graph) still
    /// held. As SPDL's `flush`.
    pub fn flush(&mut self) -> Result<Frames> {
        self.flush_inner().map_err(|e| e.with_key(&self.key))
    }

    fn flush_inner(&mut self) -> Result<Frames> {
        let mut out = Vec::new();
        if !self.flushed {
            self.flushed = true;
            // SAFETY: the open codec context; frames still held are all wanted.
            unsafe { (*self.dec.as_mut_ptr()).skip_frame = ffi::AVDiscard::AVDISCARD_DEFAULT };
            match self.dec.send_eof() {
                Ok(()) | Err(ff::Error::Eof) => {}
                Err(e) => return Err(ff_err(ErrorKind::Corrupt, "flushing the decoder", e)),
            }
            self.receive(&mut out)?;
            if let Some(g) = self.graph.as_mut() {
                g.push(None)?;
                drain(g, &mut out)?;
            }
        }
        Ok(self.frames(out))
    }

    fn frames(&self, out: Vec<ff::Frame>) -> Frames {
        let tb = self
            .graph
            .as_ref()
            .map_or(self.codec.time_base, FilterGraph::time_base);
        Frames::new(self.codec.kind(), out, tb)
    }

    /// Moves every frame the decoder has ready into `out` (through the graph).
    fn receive(&mut self, out: &mut Vec<ff::Frame>) -> Result<()> {
        loop {
            // SAFETY: an owned, blank frame for the decoder to fill.
            let mut frame = unsafe { ff::Frame::empty() };
            match self.dec.receive_frame(&mut frame) {
                Ok(()) => {}
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {
                    return Ok(())
                }
                Err(ff::Error::Eof) => return Ok(()),
                Err(e) => return Err(ff_err(ErrorKind::Corrupt, "decoding", e)),
            }
            // SAFETY: a decoded frame; pts := best-effort timestamp, as the
            // ffmpeg command line does.
            let pts = unsafe {
                let p = frame.as_mut_ptr();
                (*p).pts = (*p).best_effort_timestamp;
                (*p).pts
            };
            let is_audio = self.codec.kind() == MediaKind::Audio;
            if let (Some(w), false) = (self.window, is_audio) {
                if pts != ffi::AV_NOPTS_VALUE && !super::in_window(pts, self.codec.time_base, w) {
                    continue;
                }
            }
            let desc = self.graph_desc();
            match desc {
                None => out.push(frame),
                Some(desc) => {
                    if self.graph.is_none() {
                        let tb = self.codec.time_base;
                        // SAFETY: views of `frame` (alive here); ffmpeg-next's
                        // wrappers free what they wrap on drop, so they are
                        // never dropped (ManuallyDrop).
                        let g = unsafe {
                            if is_audio {
                                let a = std::mem::ManuallyDrop::new(ff::frame::Audio::wrap(
                                    frame.as_mut_ptr(),
                                ));
                                FilterGraph::audio(&desc, &a, tb)
                            } else {
                                let v = std::mem::ManuallyDrop::new(ff::frame::Video::wrap(
                                    frame.as_mut_ptr(),
                                ));
                                // One filter thread: FFmpeg 5.1 leaks a failed slice
                                // scaler per extra thread (see filter.rs).
                                FilterGraph::video(&desc, &v, tb, 1)
                            }
                        }?;
                        self.graph = Some(g);
                    }
                    let g = self.graph.as_mut().expect("set above");
                    g.push(Some(&frame))?;
                    drain(g, out)?;
                }
            }
        }
    }

    /// The filter description to run: the user's, with an `atrim` for an
    /// audio window (sample-exact cut) in front.
    fn graph_desc(&self) -> Option<String> {
        let trim = match (self.codec.kind(), self.window) {
            (MediaKind::Audio, Some((s, e))) => {
                // atrim counts in microseconds (int64): bounds past FAR, or an
                // unbounded start, are left out rather than overflowing.
                const FAR: f64 = 1e9;
                let mut bounds = Vec::new();
                if s > 0.0 {
                    bounds.push(format!("start={}", s.min(FAR)));
                }
                if e < FAR {
                    bounds.push(format!("end={}", e.max(0.0)));
                }
                (!bounds.is_empty()).then(|| format!("atrim={}", bounds.join(":")))
            }
            _ => None,
        };
        match (trim, self.desc.as_deref()) {
            (None, None) => None,
            (Some(t), None) => Some(t),
            (None, Some(d)) => Some(d.to_owned()),
            (Some(t), Some(d)) => Some(format!("{t},{d}")),
        }
    }
}

fn drain(g: &mut FilterGraph, out: &mut Vec<ff::Frame>) -> Result<()> {
    loop {
        // SAFETY: an owned, blank frame for the sink to fill.
        let mut f = unsafe { ff::Frame::empty() };
        if !g.pull(&mut f)? {
            return Ok(());
        }
        out.push(f);
    }
}

/// Opens `ctx` (made from a stream's codec parameters; threading already
/// set) as `config.decoder` (else the default decoder of its codec) with
/// `config.decoder_options`, packets in `time_base`: the one way every
/// decoder here is opened ([`Decoder`], `load_video` / `load_audio`,
/// `decode_packets`).
///
/// Errors: `Unsupported` when FFmpeg has no decoder for the codec or none
/// named `config.decoder`; `InvalidArgument` for an option the decoder does
/// not take; `Corrupt` when the parameters do not open.
pub(crate) fn open_decoder(
    mut ctx: codec::Context,
    time_base: ff::Rational,
    config: &DecodeConfig,
) -> Result<codec::decoder::Opened> {
    init();
    let id = ctx.id();
    let decoder_codec = match config.decoder.as_deref() {
        Some(name) => ff::decoder::find_by_name(super::no_nul("decoder", name).map(|()| name)?)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Unsupported,
                    format!("no decoder named {name:?} (see `ffmpeg -decoders`)"),
                )
            })?,
        None => ff::decoder::find(id).ok_or_else(|| {
            Error::new(
                ErrorKind::Unsupported,
                format!("this FFmpeg has no {} decoder", id.name()),
            )
        })?,
    };
    let opts = super::dictionary("decoder option", &config.decoder_options)?;
    // SAFETY: `ctx` is a fresh context from the parameters, owned here; the packet time base
    // is set before opening.
    unsafe {
        let p = ctx.as_mut_ptr();
        (*p).pkt_timebase = time_base.into();
        if (*p).codec_type == ffi::AVMediaType::AVMEDIA_TYPE_VIDEO {
            // Frame planes from the process-wide pool: no fresh pages per call.
            (*p).get_buffer2 = Some(super::frame_pool::get_buffer2);
        }
        super::open_codec(p, &decoder_codec, opts, "decoder", ErrorKind::Corrupt)?;
    }
    Ok(codec::decoder::Opened(codec::decoder::Decoder(ctx)))
}

/// Decodes all of `packets` (the frames inside their time window, when
/// they have one; at most `num_frames`), through `filter_desc`. As SPDL's
/// `decode_packets`. Errors as [`Decoder::new`] and [`Decoder::decode`].
pub fn decode_packets(
    packets: &Packets,
    filter_desc: Option<&str>,
    config: &DecodeConfig,
    num_frames: Option<usize>,
) -> Result<Frames> {
    let mut d =
        Decoder::new(packets.codec(), filter_desc, config).map_err(|e| e.with_key(&packets.key))?;
    // As SPDL, decoding stops once `num_frames` frames came out.
    d.key = packets.key.clone();
    if d.window.is_none() {
        d.window = packets.window;
    }
    let mut frames = d
        .decode_inner(packets, num_frames)
        .map_err(|e| e.with_key(&packets.key))?;
    if num_frames.is_none_or(|n| frames.len() < n) {
        let rest = d.flush()?;
        frames.extend(rest);
    }
    if let Some(n) = num_frames {
        if frames.len() > n {
            let keep: Vec<usize> = (0..n).collect();
            frames = frames.select(&keep, frames.kind())?;
        }
    }
    Ok(frames)
}

/// Splits video packets (decode order) into runs that each start at a key
/// frame and decode on their own, as SPDL 0.8.0 does for sample decoding:
/// `(start, end, lead)` per key frame, where the run `start..end` also takes
/// the later packets shown before the next key frame (some files store a
/// frame after the key frame that follows it), and `lead` counts the packets
/// of the run shown before its key frame (the decoder drops those frames).
fn key_frame_runs(packets: &[ff::Packet]) -> Vec<(usize, usize, usize)> {
    let pts: Vec<i64> = packets
        .iter()
        .map(|p| p.pts().unwrap_or(i64::MIN))
        .collect();
    if pts.is_empty() {
        return Vec::new();
    }
    let mut keys = vec![(0, pts[0])];
    keys.extend(
        packets
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, p)| p.is_key())
            .map(|(i, _)| (i, pts[i])),
    );
    keys.push((packets.len(), i64::MAX));
    keys.windows(2)
        .map(|w| {
            let ((start, first_pts), (next, next_pts)) = (w[0], w[1]);
            let end = (next + 1..pts.len())
                .filter(|&i| pts[i] < next_pts)
                .map(|i| i + 1)
                .max()
                .unwrap_or(next)
                .max(next);
            let lead = (start..end).filter(|&i| pts[i] < first_pts).count();
            (start, end, lead)
        })
        .collect()
}

/// The frames at `indices` (presentation order from 0, within the packets'
/// time window when they have one; any order, repeats allowed), each as one
/// image, through `filter_desc`: as SPDL's `sample_decode_video`, only the
/// runs of packets from the key frame before each wanted frame are decoded,
/// up to the last wanted frame of the run.
///
/// Errors: `InvalidArgument` for an index past the frames the packets hold;
/// otherwise as [`decode_packets`].
pub fn sample_decode_video(
    packets: &Packets,
    indices: &[usize],
    filter_desc: Option<&str>,
    config: &DecodeConfig,
) -> Result<Vec<Frames>> {
    let out_of_range = |i: usize| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "frame index {i} out of range: the packets hold {} frames",
                packets.num_in_window()
            ),
        )
        .with_key(&packets.key)
    };
    if let Some(&i) = indices.iter().find(|&&i| i >= packets.num_in_window()) {
        return Err(out_of_range(i));
    }
    // Indices count from the window's start: skip the reference packets
    // shown before it.
    let offset = match packets.window {
        Some((start, _)) => packets
            .packets
            .iter()
            .filter(|p| {
                p.pts().is_some_and(|t| {
                    let tb = packets.codec.time_base;
                    // SAFETY: pure arithmetic.
                    unsafe { ffi::av_cmp_q(super::ts_q(t, tb), super::seconds_q(start)) < 0 }
                })
            })
            .count(),
        None => 0,
    };
    let runs = key_frame_runs(&packets.packets);
    // For each run, the (output position, index within the run) it serves.
    let mut wanted: std::collections::BTreeMap<usize, Vec<(usize, usize)>> = Default::default();
    for (pos, &i) in indices.iter().enumerate() {
        let g = i + offset;
        let (r, &(start, _, lead)) = runs
            .iter()
            .enumerate()
            .find(|(_, &(s, e, _))| s <= g && g < e)
            .ok_or_else(|| out_of_range(i))?;
        let local = (g - start)
            .checked_sub(lead)
            .ok_or_else(|| out_of_range(i))?;
        wanted.entry(r).or_default().push((pos, local));
    }
    let mut out: Vec<Option<Frames>> = (0..indices.len()).map(|_| None).collect();
    for (r, picks) in wanted {
        let (start, end, _) = runs[r];
        let mut run = packets.slice(start..end);
        run.window = None;
        let last = picks.iter().map(|&(_, l)| l).max().unwrap_or(0);
        let frames = decode_packets(&run, filter_desc, config, Some(last + 1))?;
        for (pos, local) in picks {
            if local >= frames.len() {
                return Err(out_of_range(indices[pos]));
            }
            out[pos] = Some(frames.select(&[local], MediaKind::Image)?);
        }
    }
    Ok(out
        .into_iter()
        .map(|f| f.expect("every index was served"))
        .collect())
}
