//! Frame-index selections that seek: [`FrameSelection::Indices`] and
//! [`FrameSelection::Step`] start decoding at the key frame before each
//! wanted frame instead of at the start of the stream, so a frame near the
//! end of a long file costs about what one near the start costs.
//!
//! A demux-only pass first lists the stream's packets ([`FrameMap`]): frame
//! `i` (decoded frames in presentation order) is the packet with the `i`-th
//! smallest pts, which is how torchcodec's exact mode and decord number
//! frames too. The frames are then decoded from the nearest key frame and
//! matched to indices by their pts, so they are the bytes a decode from the
//! start gives.
//!
//! Anything this cannot vouch for falls back to decoding from the start
//! (the caller's sequential path): a stream whose packets lack pts or repeat
//! one, packets flagged for discard, a first packet that is not a key frame
//! or not the first shown, an index past the last packet, a seek that lands
//! on a non-key packet or after the wanted frame, a wanted frame the decoder
//! never returns, any decode error after a seek.
//!
//! [`FrameSelection::Indices`]: super::FrameSelection::Indices
//! [`FrameSelection::Step`]: super::FrameSelection::Step

use std::collections::{BinaryHeap, HashMap};

use ff::packet::Ref as _;
use ffmpeg_next as ff;

use super::{assemble, Converter, ConverterFactory, Session, Slots, Video, VideoOptions};
use crate::ffmpeg::{seconds, Demuxer, MediaSource};
use crate::Result;

/// The packets of one video stream, by frame index (presentation order).
struct FrameMap {
    /// pts of frame `i`, stream time base, increasing.
    pts: Vec<i64>,
    /// dts of frame `i`'s packet, when it has one.
    dts: Vec<Option<i64>>,
    /// Position of frame `i`'s packet in decode (file) order.
    decode_pos: Vec<usize>,
    /// The key frame to start decoding from for frame `i`: the key frame
    /// with the largest pts not after frame `i`'s.
    key_for: Vec<usize>,
    /// pts -> frame index.
    index_of: HashMap<i64, usize>,
    /// The scan stopped early: only frames `0..=upto` of the scan are
    /// numbered for sure, and packets after the listed ones (all shown
    /// after those frames) are not in the map.
    partial: bool,
    /// The largest listed pts.
    max_pts: i64,
}

impl FrameMap {
    /// Lists `stream`'s packets (demux only, the decoder sees nothing).
    /// `None` when the stream is not one whose frame indices can be read off
    /// its packets (see the module doc) or the demuxer fails.
    ///
    /// With `upto = Some(k)` the scan stops once frames `0..=k` are known:
    /// when a packet's dts passes the pts of the `k+1`-th smallest pts read
    /// so far (dts only grows and pts >= dts, so no later packet is shown
    /// before those frames). A frame near the start then costs no scan of
    /// the whole file.
    fn scan(demux: &mut Demuxer<'_>, stream: usize, upto: Option<usize>) -> Option<FrameMap> {
        // (pts, dts, key) in decode order.
        let mut packets: Vec<(i64, Option<i64>, bool)> = Vec::new();
        // The `k+1` smallest pts so far (max-heap).
        let mut smallest: BinaryHeap<i64> = BinaryHeap::new();
        let mut partial = false;
        loop {
            let mut packet = ff::Packet::empty();
            match demux.read_packet(&mut packet) {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) => return None,
            }
            if packet.stream() != stream || packet.size() == 0 {
                continue;
            }
            // SAFETY: `packet` holds a packet just read; reading its flags.
            let flags = unsafe { (*packet.as_ptr()).flags };
            if flags & ff::ffi::AV_PKT_FLAG_DISCARD != 0 {
                return None;
            }
            let pts = packet.pts()?;
            packets.push((pts, packet.dts(), packet.is_key()));
            if let Some(k) = upto {
                if smallest.len() <= k {
                    smallest.push(pts);
                } else if smallest.peek().is_some_and(|&top| pts < top) {
                    smallest.pop();
                    smallest.push(pts);
                }
                let known = smallest.len() == k + 1;
                if let (true, Some(dts), Some(&kth)) = (known, packet.dts(), smallest.peek()) {
                    if dts > kth {
                        partial = true;
                        break;
                    }
                }
            }
        }
        let first = packets.first()?;
        if !first.2 || packets.iter().any(|p| p.0 < first.0) {
            return None;
        }
        let mut order: Vec<usize> = (0..packets.len()).collect();
        order.sort_by_key(|&p| packets[p].0);
        if order.windows(2).any(|w| packets[w[0]].0 == packets[w[1]].0) {
            return None;
        }
        let mut key_for = Vec::with_capacity(order.len());
        let mut key = 0usize;
        for (i, &p) in order.iter().enumerate() {
            if packets[p].2 {
                key = i;
            }
            key_for.push(key);
        }
        Some(FrameMap {
            pts: order.iter().map(|&p| packets[p].0).collect(),
            dts: order.iter().map(|&p| packets[p].1).collect(),
            index_of: order
                .iter()
                .enumerate()
                .map(|(i, &p)| (packets[p].0, i))
                .collect(),
            max_pts: order.last().map_or(i64::MIN, |&p| packets[p].0),
            decode_pos: order,
            key_for,
            partial,
        })
    }

    fn len(&self) -> usize {
        self.pts.len()
    }
}

/// How a seeking pass ended.
enum Pass {
    /// Every wanted frame was handed over.
    Done,
    /// The stream did not behave as the map says: decode from the start.
    Fallback,
}

/// Decodes the frames `plan(n)` gives for a stream of `n` frames (any
/// order, repeats allowed; every index `< n`), seeking. With `upto =
/// Some(k)` (no planned index above `k`), `n` may be any count above `k`
/// (the packets are only listed that far). `Ok(None)`: use the sequential
/// path (also when `plan` returns `None`).
pub(super) fn load_planned(
    src: &MediaSource<'_>,
    opts: &VideoOptions,
    upto: Option<usize>,
    plan: impl FnOnce(usize) -> Option<Vec<usize>>,
) -> Result<Option<Video>> {
    let mut session = Session::with_opts(src, opts)?;
    let Some(map) = FrameMap::scan(&mut session.demux, session.stream, upto) else {
        return Ok(None);
    };
    match plan(map.len()) {
        Some(wanted) if wanted.iter().all(|&i| i < map.len()) => {
            decode_into(&mut session, &map, opts, wanted)
        }
        _ => Ok(None),
    }
}

/// Decodes the frames `wanted` (any order, repeats allowed) into one tensor.
fn decode_into(
    session: &mut Session<'_>,
    map: &FrameMap,
    opts: &VideoOptions,
    wanted: Vec<usize>,
) -> Result<Option<Video>> {
    let mut out = Slots::new(&wanted);
    let targets: Vec<usize> = out.of_frame.keys().copied().collect();
    let factory = ConverterFactory {
        info: session.info.clone(),
        opts,
    };
    let mut conv: Option<Converter> = None;
    let pass = run(session, map, &targets, |frame, i, pts| {
        if conv.is_none() {
            conv = Some(factory.build(frame)?);
        }
        let Some(conv) = conv.as_mut() else {
            return Ok(());
        };
        out.put(conv, frame, i, pts, opts)
    })?;
    if matches!(pass, Pass::Fallback) {
        return Ok(None);
    }
    Ok(Some(assemble(
        &session.info,
        conv.as_ref(),
        opts,
        out.data,
        out.pts,
        Some(wanted),
        None,
    )))
}

/// Decodes the frames `targets` (sorted, distinct indices of `map`), seeking
/// to a target's key frame whenever that key frame has not been sent to the
/// decoder yet and is not the next packet, and calls `on_frame(frame, index,
/// pts seconds)` for each target in order.
fn run(
    session: &mut Session<'_>,
    map: &FrameMap,
    targets: &[usize],
    mut on_frame: impl FnMut(&ff::frame::Video, usize, f64) -> Result<()>,
) -> Result<Pass> {
    let mut next = 0usize;
    // Decode position of the last packet sent to the decoder.
    let mut sent: Option<usize> = None;
    // The key frame of the last seek, so a seek that lands earlier is not
    // repeated.
    let mut sought: Option<usize> = None;
    // After a seek: (frame index the first packet must not come after,
    // whether the dts retry was used).
    let mut landing: Option<(usize, bool)> = None;
    let mut frame = ff::frame::Video::empty();
    let time_base = session.time_base;
    // Hands decoded frames over; `Some(pass)` ends the run.
    let mut drain = |session: &mut Session<'_>,
                     next: &mut usize,
                     frame: &mut ff::frame::Video|
     -> Result<Option<Pass>> {
        loop {
            match session.decoder.receive_frame(frame) {
                Ok(()) => {
                    let Some(i) = frame
                        .timestamp()
                        .and_then(|p| map.index_of.get(&p).copied())
                    else {
                        return Ok(Some(Pass::Fallback));
                    };
                    match i.cmp(&targets[*next]) {
                        // Before the wanted frame (or a leading frame of an
                        // open GOP after a seek): not needed.
                        std::cmp::Ordering::Less => {}
                        std::cmp::Ordering::Equal => {
                            on_frame(frame, i, seconds(map.pts[i], time_base))?;
                            *next += 1;
                            if *next == targets.len() {
                                return Ok(Some(Pass::Done));
                            }
                        }
                        // The wanted frame never came out.
                        std::cmp::Ordering::Greater => return Ok(Some(Pass::Fallback)),
                    }
                }
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {
                    return Ok(None)
                }
                Err(ff::Error::Eof) => return Ok(Some(Pass::Fallback)),
                Err(_) => return Ok(Some(Pass::Fallback)),
            }
        }
    };
    if targets.is_empty() {
        return Ok(Pass::Done);
    }
    loop {
        let target = targets[next];
        let key = map.key_for[target];
        let behind = sent.is_none_or(|s| map.decode_pos[key] > s + 1);
        if landing.is_none() && sought != Some(key) && behind {
            session.demux.seek_stream(session.stream, map.pts[key])?;
            session.decoder.flush();
            sought = Some(key);
            landing = Some((target, false));
        }
        let mut packet = ff::Packet::empty();
        if !session.demux.read_packet(&mut packet)? {
            if session.decoder.send_eof().is_err() {
                return Ok(Pass::Fallback);
            }
            return Ok(drain(session, &mut next, &mut frame)?.unwrap_or(Pass::Fallback));
        }
        if packet.stream() != session.stream || packet.size() == 0 {
            continue;
        }
        let Some(pts) = packet.pts() else {
            return Ok(Pass::Fallback);
        };
        let Some(i) = map.index_of.get(&pts).copied() else {
            // Past the listed packets of a partial map (shown after every
            // target): decode on; anything else is not what the map says.
            if map.partial && landing.is_none() && pts > map.max_pts {
                sent = Some(map.len());
                // SAFETY: as below; every frame from here on is decoded.
                unsafe {
                    (*session.decoder.as_mut_ptr()).skip_frame =
                        ff::ffi::AVDiscard::AVDISCARD_DEFAULT
                };
                if session.decoder.send_packet(&packet).is_err() {
                    return Ok(Pass::Fallback);
                }
                if let Some(pass) = drain(session, &mut next, &mut frame)? {
                    return Ok(pass);
                }
                continue;
            }
            return Ok(Pass::Fallback);
        };
        if let Some((limit, retried)) = landing.take() {
            if !packet.is_key() || i > limit {
                // Some demuxers seek by dts: try the key frame's dts once.
                match map.dts[key] {
                    Some(dts) if !retried && dts < map.pts[key] => {
                        session.demux.seek_stream(session.stream, dts)?;
                        session.decoder.flush();
                        landing = Some((limit, true));
                        continue;
                    }
                    _ => return Ok(Pass::Fallback),
                }
            }
        }
        sent = Some(map.decode_pos[i]);
        // A frame shown before the next target is only decoded as a reference: the decoder
        // may skip it when nothing refers to it (it would be dropped above anyway).
        let discard = if i < targets[next] {
            ff::ffi::AVDiscard::AVDISCARD_NONREF
        } else {
            ff::ffi::AVDiscard::AVDISCARD_DEFAULT
        };
        // SAFETY: the open decoder's context; `skip_frame` is read per packet.
        unsafe { (*session.decoder.as_mut_ptr()).skip_frame = discard };
        if session.decoder.send_packet(&packet).is_err() {
            return Ok(Pass::Fallback);
        }
        if let Some(pass) = drain(session, &mut next, &mut frame)? {
            return Ok(pass);
        }
    }
}
