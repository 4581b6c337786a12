//! Demuxed packets of one stream with their codec, as SPDL's
//! `VideoPackets` / `AudioPackets` / `ImagePackets`, and the codec
//! description (SPDL's `VideoCodec` / `AudioCodec` / `ImageCodec`).
//!
//! Packets can be turned into bytes ([`Packets::serialize`]) and back
//! ([`Packets::deserialize`]), so that they can be sent to another process
//! (SPDL's pickling) and decoded there.

use std::ffi::CStr;

use ffmpeg_next::{self as ff, codec, ffi};

use std::sync::{Arc, Mutex};

use super::frames::{pix_fmt_name, sample_fmt_name, static_name, FrameMemory, MediaKind};
use crate::{Error, ErrorKind, Result};

/// The accessors every list of demuxed packets has ([`Packets`], and
/// [`crate::video::VideoPackets`]), inside its `impl`: `key`, `len`, `is_empty` and
/// `timestamp`, of the fields `key: String`, `packets: Vec<ff::Packet>` and
/// `window: Option<(f64, f64)>`.
macro_rules! packet_list_accessors {
    () => {
        /// The source's name (as in errors).
        pub fn key(&self) -> &str {
            &self.key
        }

        /// Number of packets (for video in MP4, MKV, WebM or AVI, one per frame).
        pub fn len(&self) -> usize {
            self.packets.len()
        }

        /// Whether there is no packet.
        pub fn is_empty(&self) -> bool {
            self.packets.is_empty()
        }

        /// The time window `(start, end)` in seconds the packets were demuxed
        /// for: decoding returns only the frames inside it.
        pub fn timestamp(&self) -> Option<(f64, f64)> {
            self.window
        }
    };
}
pub(crate) use packet_list_accessors;

/// The codec parameters of a stream (an `AVCodecParameters` copy).
pub(crate) struct Params(pub(crate) codec::Parameters);

// SAFETY: `AVCodecParameters` is plain data owned by this value; it is only
// read through `&self` (copied when a decoder is made), so shared references
// on several threads are sound.
unsafe impl Sync for Params {}

impl Clone for Params {
    fn clone(&self) -> Self {
        Params(self.0.clone())
    }
}

impl Params {
    fn raw(&self) -> &ffi::AVCodecParameters {
        // SAFETY: the parameters are valid while `self` lives.
        unsafe { &*self.0.as_ptr() }
    }
}

/// What a stream holds and how it is coded. As SPDL's `VideoCodec`,
/// `AudioCodec` and `ImageCodec` (by [`Codec::kind`]).
#[derive(Clone)]
pub struct Codec {
    kind: MediaKind,
    pub(crate) params: Params,
    pub(crate) time_base: ff::Rational,
    frame_rate: ff::Rational,
    rotation: i32,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("kind", &self.kind)
            .field("name", &self.name())
            .finish()
    }
}

impl Codec {
    pub(crate) fn new(
        kind: MediaKind,
        params: codec::Parameters,
        time_base: ff::Rational,
        frame_rate: ff::Rational,
        rotation: i32,
    ) -> Self {
        // An owned copy: a stream's parameters keep the whole format context
        // alive (and it reads through I/O that the demuxer frees).
        let params = params.clone();
        Codec {
            kind,
            params: Params(params),
            time_base,
            frame_rate,
            rotation,
        }
    }

    /// The stream's display rotation in degrees counterclockwise (0, 90,
    /// 180 or 270) from its display matrix, as ffprobe's `rotation` modulo
    /// 360. Decoding does not apply it: add `transpose=cclock` (90),
    /// `hflip,vflip` (180) or `transpose=clock` (270) to the filter.
    pub fn rotation(&self) -> i32 {
        self.rotation
    }

    /// Audio, video or image.
    pub fn kind(&self) -> MediaKind {
        self.kind
    }

    /// The codec's name, e.g. `"h264"`, `"aac"`, `"mjpeg"`.
    pub fn name(&self) -> String {
        // SAFETY: any codec id; returns a static string.
        static_name(unsafe { ffi::avcodec_get_name(self.params.raw().codec_id) })
    }

    /// Picture width in pixels (0 for audio).
    pub fn width(&self) -> u32 {
        u32::try_from(self.params.raw().width).unwrap_or(0)
    }

    /// Picture height in pixels (0 for audio).
    pub fn height(&self) -> u32 {
        u32::try_from(self.params.raw().height).unwrap_or(0)
    }

    /// The coded pixel format name (`"yuv420p"`, ...), or the sample format
    /// name (`"fltp"`, ...) for audio.
    pub fn format_name(&self) -> String {
        let f = self.params.raw().format;
        match self.kind {
            MediaKind::Audio => sample_fmt_name(f),
            _ => pix_fmt_name(f),
        }
    }

    /// Average frame rate `(num, den)` from the header (`(0, 1)` when unknown).
    pub fn frame_rate(&self) -> (i32, i32) {
        (self.frame_rate.numerator(), self.frame_rate.denominator())
    }

    /// The stream's time base `(num, den)`: packet and frame timestamps are
    /// multiples of it.
    pub fn time_base(&self) -> (i32, i32) {
        (self.time_base.numerator(), self.time_base.denominator())
    }

    /// Sample aspect ratio `(num, den)` (`(0, 1)` when unknown).
    pub fn sample_aspect_ratio(&self) -> (i32, i32) {
        let r = self.params.raw().sample_aspect_ratio;
        (r.num, r.den)
    }

    /// The codec's extradata (`AVCodecParameters.extradata`): for H.264/HEVC
    /// from MP4/MKV the `avcC` / `hvcC` record with the parameter sets (what
    /// a hardware decoder needs to turn the packets into an Annex-B stream);
    /// empty when there is none.
    pub fn extradata(&self) -> &[u8] {
        let p = self.params.raw();
        match usize::try_from(p.extradata_size) {
            // SAFETY: FFmpeg keeps `extradata_size` bytes at `extradata` for
            // the parameters' lifetime, which `&self` borrows.
            Ok(n) if n > 0 && !p.extradata.is_null() => unsafe {
                std::slice::from_raw_parts(p.extradata, n)
            },
            _ => &[],
        }
    }

    /// The stream's bit rate in bits per second from the header (0 when
    /// unknown).
    pub fn bit_rate(&self) -> i64 {
        self.params.raw().bit_rate
    }

    /// Bits per raw sample (`bits_per_raw_sample`: 8 for 8-bit video, 0
    /// when the header does not say), as SPDL's codec summary shows it.
    pub fn bits_per_sample(&self) -> i32 {
        self.params.raw().bits_per_raw_sample
    }

    /// Audio sample rate in Hz (0 for pictures).
    pub fn sample_rate(&self) -> u32 {
        u32::try_from(self.params.raw().sample_rate).unwrap_or(0)
    }

    /// Audio channel count (0 for pictures).
    pub fn num_channels(&self) -> usize {
        usize::try_from(self.params.raw().ch_layout.nb_channels).unwrap_or(0)
    }

    /// The channel layout as FFmpeg describes it (`"stereo"`, `"5.1"`,
    /// `"3 channels"`); empty for pictures.
    pub fn channel_layout(&self) -> String {
        if self.kind != MediaKind::Audio {
            return String::new();
        }
        let mut buf = [0 as std::ffi::c_char; 128];
        // SAFETY: the layout is valid; av_channel_layout_describe writes a
        // NUL-terminated string of at most `buf.len()` bytes.
        let n = unsafe {
            ffi::av_channel_layout_describe(
                &self.params.raw().ch_layout,
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n < 0 {
            return format!("{}c", self.num_channels());
        }
        // SAFETY: NUL-terminated by av_channel_layout_describe.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Demuxed packets of one stream, in decode order, with their codec. As
/// SPDL's `VideoPackets` / `AudioPackets` / `ImagePackets`.
#[derive(derive_more::Debug)]
pub struct Packets {
    pub(crate) key: String,
    pub(crate) codec: Codec,
    #[debug("[{} packets]", packets.len())]
    pub(crate) packets: Vec<ff::Packet>,
    pub(crate) window: Option<(f64, f64)>,
    /// The index of the stream in its container (shown in SPDL's `repr`).
    pub(crate) stream_index: usize,
    /// Whether the codec is shown to users: SPDL's packets of
    /// `streaming_demux` have none (`codec` is `None`).
    pub(crate) codec_attached: bool,
    /// The serialized bytes that view packets ([`Packets::deserialize_view`])
    /// point into; declared after `packets` so that it is dropped after them.
    #[debug(skip)]
    pub(crate) memory: Option<Arc<ViewMemory>>,
}

impl Clone for Packets {
    /// The packets sharing their data (new references to FFmpeg's buffers,
    /// as SPDL's `clone`); view packets ([`Packets::deserialize_view`]) are
    /// copied, so that the clone does not hold their memory.
    fn clone(&self) -> Self {
        Packets {
            key: self.key.clone(),
            codec: self.codec.clone(),
            packets: self.packets.iter().map(share).collect(),
            window: self.window,
            stream_index: self.stream_index,
            codec_attached: self.codec_attached,
            memory: None,
        }
    }
}

/// A new reference to `p`'s data (ffmpeg-next's `Packet::clone` also makes
/// the data writable, which copies it; demuxed packets are never written).
/// A packet without a buffer of its own is copied (`av_packet_ref`'s rule).
fn share(p: &ff::Packet) -> ff::Packet {
    use codec::packet::{Mut as _, Ref as _};
    let mut out = ff::Packet::empty();
    // SAFETY: `out` is a blank packet we own; av_packet_ref gives it a new
    // reference to (or a copy of) `p`'s data and copies its properties and
    // side data; it leaves `out` blank on failure.
    let r = unsafe { ffi::av_packet_ref(out.as_mut_ptr(), p.as_ptr()) };
    if r < 0 {
        return p.clone();
    }
    out
}

/// The memory view packets point into, kept alive while any of them is.
pub(crate) struct ViewMemory(#[allow(dead_code)] Mutex<Box<dyn FrameMemory>>);

impl Packets {
    /// Audio, video or image.
    pub fn kind(&self) -> MediaKind {
        self.codec.kind
    }

    packet_list_accessors!();

    /// The codec of the stream.
    pub fn codec(&self) -> &Codec {
        &self.codec
    }

    /// The index of the stream in its container.
    pub fn stream_index(&self) -> usize {
        self.stream_index
    }

    /// Whether SPDL shows these packets' codec: `false` for the chunks of
    /// `streaming_demux` (and what a bit-stream filter makes of them), whose
    /// `codec` is `None` in SPDL; decoding uses [`Packets::codec`] either way.
    pub fn codec_attached(&self) -> bool {
        self.codec_attached
    }

    /// The packets' presentation timestamps in seconds, as SPDL's
    /// `get_timestamps(raw=...)`: by default those inside the window the
    /// packets were demuxed for (all without one), in display order; with
    /// `raw` every packet's, in decode order (the window's reference packets
    /// before `start` included). Packets without a timestamp are left out.
    pub fn timestamps(&self, raw: bool) -> Vec<f64> {
        let tb = self.codec.time_base;
        let all = self.packets.iter().filter_map(|p| p.pts());
        let seconds = |t| super::seconds(t, tb);
        if raw {
            return all.map(seconds).collect();
        }
        let mut ts: Vec<f64> = match self.window {
            None => all.map(seconds).collect(),
            Some(w) => all
                .filter(|&t| super::in_window(t, tb, w))
                .map(seconds)
                .collect(),
        };
        ts.sort_by(f64::total_cmp);
        ts
    }

    /// The number of packets inside the window the packets were demuxed for
    /// (all without one): what SPDL's `len(packets)` counts, one per frame
    /// the packets decode to for video in MP4, MKV, WebM or AVI.
    pub fn num_in_window(&self) -> usize {
        match self.window {
            None => self.packets.len(),
            Some(_) => self.timestamps(false).len(),
        }
    }

    /// The bytes of packet `i` (empty past the end).
    pub fn packet_data(&self, i: usize) -> &[u8] {
        self.packets.get(i).and_then(|p| p.data()).unwrap_or(&[])
    }

    /// The presentation timestamp of packet `i` in stream time base units
    /// ([`Codec::time_base`]); `None` when it has none or past the end.
    /// Unlike [`Packets::timestamps`], indexes every packet.
    pub fn packet_pts(&self, i: usize) -> Option<i64> {
        self.packets.get(i).and_then(|p| p.pts())
    }

    /// The packets at `range` (sharing their data), keeping the codec and
    /// window.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Packets {
        Packets {
            key: self.key.clone(),
            codec: self.codec.clone(),
            packets: self.packets[range].iter().map(share).collect(),
            window: self.window,
            stream_index: self.stream_index,
            codec_attached: self.codec_attached,
            // The copies of view packets own their data.
            memory: None,
        }
    }

    /// The packets as bytes (codec parameters, time base, window and every
    /// packet's data, timestamps, flags and side data, e.g. an MP3's or
    /// AAC's skip-samples record), for [`Packets::deserialize`] in another
    /// process.
    pub fn serialize(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(
            256 + self.packets.iter().map(|p| p.size() + 40).sum::<usize>(),
        ));
        w.0.extend_from_slice(MAGIC);
        w.u8(match self.codec.kind {
            MediaKind::Audio => 0,
            MediaKind::Video => 1,
            MediaKind::Image => 2,
        });
        w.bytes(self.key.as_bytes());
        let c = &self.codec;
        for v in [
            c.time_base.numerator(),
            c.time_base.denominator(),
            c.frame_rate.numerator(),
            c.frame_rate.denominator(),
            c.rotation,
        ] {
            w.i64(i64::from(v));
        }
        match self.window {
            None => w.u8(0),
            Some((s, e)) => {
                w.u8(1);
                w.f64(s);
                w.f64(e);
            }
        }
        w.i64(self.stream_index as i64);
        w.u8(u8::from(self.codec_attached));
        let p = c.params.raw();
        for v in [
            p.codec_type as i64,
            p.codec_id as i64,
            i64::from(p.codec_tag),
            i64::from(p.format),
            p.bit_rate,
            i64::from(p.bits_per_coded_sample),
            i64::from(p.bits_per_raw_sample),
            i64::from(p.profile),
            i64::from(p.level),
            i64::from(p.width),
            i64::from(p.height),
            i64::from(p.sample_aspect_ratio.num),
            i64::from(p.sample_aspect_ratio.den),
            p.field_order as i64,
            p.color_range as i64,
            p.color_primaries as i64,
            p.color_trc as i64,
            p.color_space as i64,
            p.chroma_location as i64,
            i64::from(p.video_delay),
            i64::from(p.sample_rate),
            i64::from(p.ch_layout.nb_channels),
            // SAFETY: reading the mask variant; it is only used when the
            // order (written next) says it is the mask.
            unsafe { p.ch_layout.u.mask } as i64,
            p.ch_layout.order as i64,
            i64::from(p.block_align),
            i64::from(p.frame_size),
            i64::from(p.initial_padding),
            i64::from(p.trailing_padding),
            i64::from(p.seek_preroll),
        ] {
            w.i64(v);
        }
        let extra = if p.extradata.is_null() || p.extradata_size <= 0 {
            &[][..]
        } else {
            // SAFETY: extradata holds extradata_size bytes.
            unsafe { std::slice::from_raw_parts(p.extradata, p.extradata_size as usize) }
        };
        w.bytes(extra);
        w.i64(self.packets.len() as i64);
        for pkt in &self.packets {
            w.i64(pkt.pts().unwrap_or(i64::MIN));
            w.i64(pkt.dts().unwrap_or(i64::MIN));
            w.i64(pkt.duration());
            w.i64(i64::from(pkt.flags().bits()));
            w.bytes(pkt.data().unwrap_or(&[]));
            // Zeros after each payload: FFmpeg may read that far past a
            // packet's end, which lets deserialize_view point into the bytes.
            w.0.extend_from_slice(&[0; PADDING]);
            let side: Vec<_> = pkt.side_data().collect();
            w.i64(side.len() as i64);
            for sd in side {
                w.i64(ffi::AVPacketSideDataType::from(sd.kind()) as i64);
                w.bytes(sd.data());
            }
        }
        let sum = fnv1a(&w.0);
        w.i64(sum as i64);
        w.0
    }

    /// Packets from [`Packets::serialize`]'s bytes (copied).
    ///
    /// Like a pickle, the bytes are trusted to come from `serialize` (of
    /// the same spdl-rs and FFmpeg build): a checksum over them rejects
    /// damaged bytes, but the codec parameters in them are not validated.
    ///
    /// Errors: `Corrupt` when `data` is not such bytes (wrong header or
    /// checksum, truncated, inconsistent lengths).
    pub fn deserialize(data: &[u8]) -> Result<Packets> {
        Self::parse(data, false)
    }

    /// Packets from [`Packets::serialize`]'s bytes without copying them, as
    /// SPDL's `deserialize_view`: each packet's data points into `memory`,
    /// which the packets keep alive (dropped with the last of them).
    /// Cloning or slicing the packets copies their data (the copies do not
    /// need `memory`). The bytes must not change while the packets live.
    ///
    /// Errors: as [`Packets::deserialize`].
    pub fn deserialize_view(memory: Box<dyn FrameMemory>) -> Result<Packets> {
        let (ptr, len) = memory.as_ptr_len();
        // SAFETY: FrameMemory guarantees `len` readable bytes at `ptr`, the
        // same on every call, until `memory` is dropped; the packets made
        // from this slice keep `memory` (declared after them, so dropped
        // after them) and clones copy the data.
        let data = unsafe { std::slice::from_raw_parts(ptr, len) };
        let mut p = Self::parse(data, true)?;
        p.memory = Some(Arc::new(ViewMemory(Mutex::new(memory))));
        Ok(p)
    }

    fn parse(data: &[u8], view: bool) -> Result<Packets> {
        if data.len() < MAGIC.len() + 8 || !data.starts_with(MAGIC) {
            return Err(corrupt("not serialized spdl-rs packets"));
        }
        let (body, sum) = data.split_at(data.len() - 8);
        if fnv1a(body).to_le_bytes() != sum {
            return Err(corrupt("checksum mismatch (damaged bytes)"));
        }
        let data = body;
        let mut r = Reader { data, pos: 0 };
        if r.take(MAGIC.len())? != MAGIC {
            return Err(corrupt("not serialized spdl-rs packets"));
        }
        let kind = match r.u8()? {
            0 => MediaKind::Audio,
            1 => MediaKind::Video,
            2 => MediaKind::Image,
            k => return Err(corrupt(&format!("unknown media kind {k}"))),
        };
        let key = String::from_utf8_lossy(r.bytes()?).into_owned();
        let mut rat = || -> Result<ff::Rational> { Ok(ff::Rational::new(r.i32()?, r.i32()?)) };
        let time_base = rat()?;
        let frame_rate = rat()?;
        let rotation = r.i32()?;
        let window = match r.u8()? {
            0 => None,
            _ => Some((r.f64()?, r.f64()?)),
        };
        let stream_index =
            usize::try_from(r.i64()?).map_err(|_| corrupt("negative stream index"))?;
        let codec_attached = r.u8()? != 0;
        let mut params = codec::Parameters::new();
        // SAFETY: `params` is a fresh AVCodecParameters we own; every field
        // is written with a value of its own type read back from the bytes
        // that serialize() wrote from such a struct; enum values are
        // transmuted from their own i32 representation; extradata is
        // av_mallocz'ed with FFmpeg's padding (freed with the parameters).
        unsafe {
            let p = &mut *params.as_mut_ptr();
            p.codec_type = std::mem::transmute::<i32, ffi::AVMediaType>(r.i32()?);
            p.codec_id = std::mem::transmute::<u32, ffi::AVCodecID>(r.i32()? as u32);
            p.codec_tag = r.i64()? as u32;
            p.format = r.i32()?;
            p.bit_rate = r.i64()?;
            p.bits_per_coded_sample = r.i32()?;
            p.bits_per_raw_sample = r.i32()?;
            p.profile = r.i32()?;
            p.level = r.i32()?;
            p.width = r.i32()?;
            p.height = r.i32()?;
            p.sample_aspect_ratio = ffi::AVRational {
                num: r.i32()?,
                den: r.i32()?,
            };
            p.field_order = std::mem::transmute::<u32, ffi::AVFieldOrder>(r.i32()? as u32);
            p.color_range = std::mem::transmute::<u32, ffi::AVColorRange>(r.i32()? as u32);
            p.color_primaries = std::mem::transmute::<u32, ffi::AVColorPrimaries>(r.i32()? as u32);
            p.color_trc =
                std::mem::transmute::<u32, ffi::AVColorTransferCharacteristic>(r.i32()? as u32);
            p.color_space = std::mem::transmute::<u32, ffi::AVColorSpace>(r.i32()? as u32);
            p.chroma_location = std::mem::transmute::<u32, ffi::AVChromaLocation>(r.i32()? as u32);
            p.video_delay = r.i32()?;
            p.sample_rate = r.i32()?;
            let nb_channels = r.i32()?;
            let mask = r.i64()? as u64;
            let order = r.i32()?;
            if nb_channels > 0 {
                if order == ffi::AVChannelOrder::AV_CHANNEL_ORDER_NATIVE as i32 && mask != 0 {
                    ffi::av_channel_layout_from_mask(&mut p.ch_layout, mask);
                } else {
                    ffi::av_channel_layout_default(&mut p.ch_layout, nb_channels);
                }
            }
            p.block_align = r.i32()?;
            p.frame_size = r.i32()?;
            p.initial_padding = r.i32()?;
            p.trailing_padding = r.i32()?;
            p.seek_preroll = r.i32()?;
            let extra = r.bytes()?;
            if !extra.is_empty() {
                let buf = ffi::av_mallocz(extra.len() + ffi::AV_INPUT_BUFFER_PADDING_SIZE as usize)
                    .cast::<u8>();
                if buf.is_null() {
                    return Err(Error::new(ErrorKind::LimitExceeded, "out of memory"));
                }
                std::ptr::copy_nonoverlapping(extra.as_ptr(), buf, extra.len());
                p.extradata = buf;
                p.extradata_size = extra.len() as i32;
            }
        }
        let n = usize::try_from(r.i64()?).map_err(|_| corrupt("negative packet count"))?;
        let mut packets = Vec::with_capacity(n.min(data.len() / 40));
        for _ in 0..n {
            let pts = r.i64()?;
            let dts = r.i64()?;
            let duration = r.i64()?;
            let flags = r.i64()? as i32;
            let payload = r.bytes()?;
            if r.take(PADDING)?.iter().any(|&b| b != 0) {
                return Err(corrupt("packet padding is not zero"));
            }
            let mut pkt = if view {
                let mut pkt = ff::Packet::empty();
                // SAFETY: a packet without a buffer (`buf` stays NULL)
                // pointing at `payload`, followed by PADDING zero bytes;
                // FFmpeg copies such data before keeping it, and the caller
                // keeps the bytes alive as long as the packet.
                unsafe {
                    let p = codec::packet::Mut::as_mut_ptr(&mut pkt);
                    (*p).data = payload.as_ptr().cast_mut();
                    (*p).size =
                        i32::try_from(payload.len()).map_err(|_| corrupt("packet too large"))?;
                }
                pkt
            } else {
                ff::Packet::copy(payload)
            };
            pkt.set_pts((pts != i64::MIN).then_some(pts));
            pkt.set_dts((dts != i64::MIN).then_some(dts));
            pkt.set_duration(duration);
            pkt.set_flags(codec::packet::Flags::from_bits_truncate(flags));
            let sides = r.i64()?;
            if !(0..=i64::from(ffi::AVPacketSideDataType::AV_PKT_DATA_NB as i32)).contains(&sides) {
                return Err(corrupt("side data count out of range"));
            }
            for _ in 0..sides {
                let kind = r.i64()?;
                if !(0..ffi::AVPacketSideDataType::AV_PKT_DATA_NB as i64).contains(&kind) {
                    return Err(corrupt("unknown packet side data type"));
                }
                let data = r.bytes()?;
                // SAFETY: `kind` is in 0..AV_PKT_DATA_NB, the enum's own
                // range of values; av_packet_new_side_data allocates `len`
                // bytes (plus padding) owned by the packet, into which
                // exactly `len` bytes are copied.
                unsafe {
                    let kind = std::mem::transmute::<u32, ffi::AVPacketSideDataType>(kind as u32);
                    let dst = ffi::av_packet_new_side_data(
                        codec::packet::Mut::as_mut_ptr(&mut pkt),
                        kind,
                        data.len(),
                    );
                    if dst.is_null() {
                        return Err(Error::new(ErrorKind::LimitExceeded, "out of memory"));
                    }
                    std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len());
                }
            }
            packets.push(pkt);
        }
        if r.pos != data.len() {
            return Err(corrupt("trailing bytes after the packets"));
        }
        Ok(Packets {
            key,
            codec: Codec::new(kind, params, time_base, frame_rate, rotation),
            packets,
            window,
            stream_index,
            codec_attached,
            memory: None,
        })
    }
}

const MAGIC: &[u8] = b"SPDLRS-PACKETS-3";

/// Zero bytes after each serialized payload (FFmpeg's input padding).
const PADDING: usize = ffi::AV_INPUT_BUFFER_PADDING_SIZE as usize;

/// 64-bit FNV-1a, to tell damaged serialized packets.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn corrupt(why: &str) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        format!("cannot read serialized packets: {why}"),
    )
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.i64(b.len() as i64);
        self.0.extend_from_slice(b);
    }
}

struct Reader<'d> {
    data: &'d [u8],
    pos: usize,
}

impl<'d> Reader<'d> {
    fn take(&mut self, n: usize) -> Result<&'d [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| corrupt("truncated"))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn i64(&mut self) -> Result<i64> {
        let b = self.take(8)?;
        Ok(i64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    fn i32(&mut self) -> Result<i32> {
        i32::try_from(self.i64()?).map_err(|_| corrupt("value out of range"))
    }
    fn f64(&mut self) -> Result<f64> {
        let b = self.take(8)?;
        Ok(f64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    fn bytes(&mut self) -> Result<&'d [u8]> {
        let n = usize::try_from(self.i64()?).map_err(|_| corrupt("negative length"))?;
        self.take(n)
    }
}
