//! One NVDEC decode session: parser, decoder and the three parser callbacks
//! (`cuvidCreateVideoParser` / `cuvidParseVideoData`, `cuvidCreateDecoder` in the sequence
//! callback, `cuvidDecodePicture`, `cuvidMapVideoFrame64` + a copy of the NV12 surface into
//! our own device memory in the display callback). A session lives across calls
//! ([`NvdecSession::feed`] any number of times, then [`NvdecSession::flush`]), so that a long
//! video is decoded in chunks with only the frames not yet taken held on the device.

use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::sync::Arc;

use cudarc::driver::sys;

use super::ffi::{self, zeroed};
use super::{NvcuvidLibrary, NvdecConfig};
use crate::error::{Error, Result};
use crate::stream::CopyStream;
use crate::transfer::{DeviceBatch, DeviceBuffer};
use spdl_io::{BatchHeader, DType};

/// `CUresult` to our error, naming the call.
fn check(call: &'static str, r: ffi::CuResult) -> Result<()> {
    if r == 0 {
        return Ok(());
    }
    let code = match r {
        1 => "CUDA_ERROR_INVALID_VALUE".to_string(),
        2 => "CUDA_ERROR_OUT_OF_MEMORY".to_string(),
        100 => "CUDA_ERROR_NO_DEVICE".to_string(),
        201 => "CUDA_ERROR_INVALID_CONTEXT".to_string(),
        400 => "CUDA_ERROR_INVALID_HANDLE".to_string(),
        801 => "CUDA_ERROR_NOT_SUPPORTED".to_string(),
        999 => "CUDA_ERROR_UNKNOWN".to_string(),
        n => format!("CUresult {n}"),
    };
    Err(Error::Driver { call, code })
}

/// The state the parser callbacks work on (`pUserData`).
struct Session {
    lib: Arc<NvcuvidLibrary>,
    config: NvdecConfig,
    limits: spdl_io::Limits,
    stream: Arc<CopyStream>,
    decoder: ffi::Handle,
    /// Coded size the decoder was made for.
    coded: (u32, u32),
    /// Output frame size (after crop and scale).
    out: (usize, usize),
    frames: Vec<(DeviceBuffer, i64)>,
    error: Option<Error>,
}

impl Session {
    fn on_sequence(&mut self, fmt: &ffi::VideoFormat) -> Result<c_int> {
        let surfaces = c_int::from(fmt.min_num_decode_surfaces.max(1)) + 3;
        if !self.decoder.is_null() {
            if self.coded == (fmt.coded_width, fmt.coded_height) {
                return Ok(surfaces);
            }
            return Err(Error::Unsupported(format!(
                "the stream changes size mid-way ({}x{} to {}x{}); NVDEC reconfiguration is \
                 not supported",
                self.coded.0, self.coded.1, fmt.coded_width, fmt.coded_height
            )));
        }
        if fmt.bit_depth_luma_minus8 != 0 || fmt.chroma_format != ffi::CHROMA_420 {
            return Err(Error::Unsupported(format!(
                "NVDEC output here is 8-bit 4:2:0 (NV12); the stream is {}-bit, chroma format {}",
                8 + fmt.bit_depth_luma_minus8,
                fmt.chroma_format
            )));
        }
        // The real sizes, from the bitstream: checked against the limits before the decoder
        // (and its surfaces) exist, as the request was.
        let [dl, dt, dr, db] = fmt.display_area;
        let (disp_w, disp_h) = (
            usize::try_from(dr - dl).unwrap_or(0),
            usize::try_from(db - dt).unwrap_or(0),
        );
        let real = NvdecConfig {
            width: disp_w,
            height: disp_h,
            ..self.config.clone()
        };
        real.check(&self.limits)?;
        self.limits
            .check(fmt.coded_width as usize, fmt.coded_height as usize, 3, 1)
            .map_err(|e| Error::InvalidArgument(e.message().to_string()))?;
        let (ow, oh) = real.output_size()?;
        if ow % 2 != 0 || oh % 2 != 0 {
            return Err(Error::InvalidArgument(format!(
                "NV12 output needs an even width and height, the crop and scale give {ow}x{oh}"
            )));
        }
        self.check_caps(fmt)?;
        let [cl, ct, cr, cb] = self.config.crop;
        let short = |v: i64| {
            i16::try_from(v).map_err(|_| Error::InvalidArgument(format!("crop edge {v} too large")))
        };
        let mut info: ffi::DecodeCreateInfo = zeroed();
        info.width = c_ulong::from(fmt.coded_width);
        info.height = c_ulong::from(fmt.coded_height);
        info.max_width = info.width;
        info.max_height = info.height;
        info.num_decode_surfaces = surfaces as c_ulong;
        info.codec_type = fmt.codec;
        info.chroma_format = fmt.chroma_format;
        info.creation_flags = ffi::CREATE_PREFER_CUVID;
        info.display_area = ffi::Rect16 {
            left: short(i64::from(dl) + cl as i64)?,
            top: short(i64::from(dt) + ct as i64)?,
            right: short(i64::from(dr) - cr as i64)?,
            bottom: short(i64::from(db) - cb as i64)?,
        };
        info.output_format = ffi::SURFACE_NV12;
        info.deinterlace_mode = if fmt.progressive_sequence != 0 {
            ffi::DEINTERLACE_WEAVE
        } else {
            ffi::DEINTERLACE_ADAPTIVE
        };
        info.target_width = ow as c_ulong;
        info.target_height = oh as c_ulong;
        info.num_output_surfaces = 2;
        let mut dec: ffi::Handle = std::ptr::null_mut();
        // SAFETY: valid out-pointer and a fully initialized create-info; the device's context
        // is current (bound before parsing).
        check("cuvidCreateDecoder", unsafe {
            (self.lib.api.create_decoder)(&mut dec, &mut info)
        })?;
        self.decoder = dec;
        self.coded = (fmt.coded_width, fmt.coded_height);
        self.out = (ow, oh);
        Ok(surfaces)
    }

    /// What the GPU's decoder engine supports, as a named error before creating a decoder.
    fn check_caps(&self, fmt: &ffi::VideoFormat) -> Result<()> {
        let mut caps: ffi::DecodeCaps = zeroed();
        caps.codec_type = fmt.codec;
        caps.chroma_format = fmt.chroma_format;
        caps.bit_depth_minus8 = c_uint::from(fmt.bit_depth_luma_minus8);
        // SAFETY: valid in/out structure; the context is current.
        check("cuvidGetDecoderCaps", unsafe {
            (self.lib.api.get_decoder_caps)(&mut caps)
        })?;
        if caps.is_supported == 0 {
            return Err(Error::Unsupported(format!(
                "this GPU's NVDEC does not decode {} (cudaVideoCodec {})",
                self.config.codec, fmt.codec
            )));
        }
        let (w, h) = (fmt.coded_width, fmt.coded_height);
        let mbs = u64::from(w.div_ceil(16)) * u64::from(h.div_ceil(16));
        if w > caps.max_width
            || h > caps.max_height
            || mbs > u64::from(caps.max_mb_count)
            || w < u32::from(caps.min_width)
            || h < u32::from(caps.min_height)
        {
            return Err(Error::Unsupported(format!(
                "{w}x{h} {} is outside this GPU's NVDEC range ({}x{} to {}x{}, {} macroblocks)",
                self.config.codec,
                caps.min_width,
                caps.min_height,
                caps.max_width,
                caps.max_height,
                caps.max_mb_count
            )));
        }
        Ok(())
    }

    fn on_decode(&mut self, pic: *mut c_void) -> Result<()> {
        if self.decoder.is_null() {
            return Err(Error::InvalidArgument(
                "a picture came before the sequence header".into(),
            ));
        }
        // SAFETY: `pic` is the parser's CUVIDPICPARAMS for this decoder, passed on as is.
        check("cuvidDecodePicture", unsafe {
            (self.lib.api.decode_picture)(self.decoder, pic)
        })
    }

    fn on_display(&mut self, disp: &ffi::ParserDispInfo) -> Result<()> {
        let (w, h) = self.out;
        let frame_bytes = w * h * 3 / 2;
        // The frames stay in device memory until the call returns: bound by the limits'
        // byte budget, checked before each allocation.
        let total = (self.frames.len() as u64 + 1).saturating_mul(frame_bytes as u64);
        if total > self.limits.max_bytes {
            return Err(Error::InvalidArgument(format!(
                "{} NV12 frames of {w}x{h} exceed the limit of {} bytes; decode fewer \
                 packets at a time",
                self.frames.len() + 1,
                self.limits.max_bytes
            )));
        }
        let mut proc: ffi::ProcParams = zeroed();
        proc.progressive_frame = disp.progressive_frame;
        proc.top_field_first = disp.top_field_first;
        proc.unpaired_field = c_int::from(disp.repeat_first_field < 0);
        proc.output_stream = self.stream.stream.cu_stream() as *mut c_void;
        let (mut ptr, mut pitch): (u64, c_uint) = (0, 0);
        // SAFETY: the picture index comes from the parser for this decoder; out-pointers valid.
        check("cuvidMapVideoFrame64", unsafe {
            (self.lib.api.map_video_frame64)(
                self.decoder,
                disp.picture_index,
                &mut ptr,
                &mut pitch,
                &mut proc,
            )
        })?;
        let copied = self.copy_nv12(ptr, pitch as usize, w, h);
        // SAFETY: `ptr` was mapped above and is unmapped once, after the copy finished
        // (copy_nv12 synchronizes the stream).
        let unmapped = check("cuvidUnmapVideoFrame64", unsafe {
            (self.lib.api.unmap_video_frame64)(self.decoder, ptr)
        });
        let buf = copied?;
        unmapped?;
        self.frames.push((buf, disp.timestamp));
        Ok(())
    }

    /// Copies the mapped NV12 surface (luma `h` rows, then chroma `h / 2` rows at `pitch * h`)
    /// into a new contiguous `[h * 3 / 2, w]` buffer, and waits for it.
    fn copy_nv12(&self, src: u64, pitch: usize, w: usize, h: usize) -> Result<DeviceBuffer> {
        let buf = DeviceBuffer::alloc(&self.stream, w * h * 3 / 2)?;
        for (src_off, dst_off, rows) in [(0, 0, h), (pitch * h, w * h, h / 2)] {
            let copy = sys::CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcHost: std::ptr::null(),
                srcDevice: src + src_off as u64,
                srcArray: std::ptr::null_mut(),
                srcPitch: pitch,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                dstHost: std::ptr::null_mut(),
                dstDevice: buf.device_ptr() + dst_off as u64,
                dstArray: std::ptr::null_mut(),
                dstPitch: w,
                WidthInBytes: w,
                Height: rows,
            };
            // SAFETY: source: the mapped surface, `rows` rows of `pitch` bytes from the
            // offset; destination: `buf`, `rows * w` bytes from the offset; both alive until
            // the stream is synchronized below.
            unsafe { sys::cuMemcpy2DAsync_v2(&copy, self.stream.stream.cu_stream()) }
                .result()
                .map_err(|e| Error::driver("cuMemcpy2DAsync", e))?;
        }
        self.stream.synchronize()?;
        Ok(buf)
    }

    fn fail(&mut self, e: Error) -> c_int {
        if self.error.is_none() {
            self.error = Some(e);
        }
        0
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.decoder.is_null() {
            // SAFETY: created in on_sequence, destroyed once; no frame is mapped any more.
            unsafe { (self.lib.api.destroy_decoder)(self.decoder) };
        }
    }
}

unsafe extern "C" fn sequence_cb(user: *mut c_void, fmt: *mut ffi::VideoFormat) -> c_int {
    // SAFETY: `user` is the `Session` given to the parser, alive during the parse call that
    // invokes this callback on the same thread; `fmt` is valid for the call.
    let s = unsafe { &mut *user.cast::<Session>() };
    match unsafe { fmt.as_ref() } {
        Some(fmt) => match s.on_sequence(fmt) {
            Ok(n) => n,
            Err(e) => s.fail(e),
        },
        None => s.fail(Error::InvalidArgument(
            "NVDEC reported no video format".into(),
        )),
    }
}

unsafe extern "C" fn decode_cb(user: *mut c_void, pic: *mut c_void) -> c_int {
    // SAFETY: as in `sequence_cb`.
    let s = unsafe { &mut *user.cast::<Session>() };
    match s.on_decode(pic) {
        Ok(()) => 1,
        Err(e) => s.fail(e),
    }
}

unsafe extern "C" fn display_cb(user: *mut c_void, disp: *mut ffi::ParserDispInfo) -> c_int {
    // SAFETY: as in `sequence_cb`; a null `disp` is the end of the stream.
    let s = unsafe { &mut *user.cast::<Session>() };
    let Some(disp) = (unsafe { disp.as_ref() }) else {
        return 1;
    };
    match s.on_display(disp) {
        Ok(()) => 1,
        Err(e) => s.fail(e),
    }
}

/// Decoded frames: NV12 `[N, H + H/2, W]` u8 in one device buffer, with the packets'
/// timestamps (in the units given), in display order.
#[derive(Debug, Clone)]
pub struct NvdecFrames {
    /// The frames; `batch.shape` is `[N, H * 3 / 2, W, 1]`.
    pub batch: DeviceBatch,
    /// Output width `W` and height `H` (after crop and scale).
    pub size: (usize, usize),
    /// Each frame's timestamp, as passed with its packet.
    pub timestamps: Vec<i64>,
}

/// A live NVDEC session (SPDL's streaming `NvDecDecoder`): a parser whose decoder is made at
/// the first sequence header, kept across [`NvdecSession::feed`] calls until
/// [`NvdecSession::flush`] sends the end of the stream. Decoded frames wait on the device
/// (bounded by `limits.max_bytes`) until [`NvdecSession::take`] batches them.
pub struct NvdecSession {
    /// The parser; destroyed before `state` (which destroys the decoder).
    parser: ffi::Handle,
    /// Boxed so that its address, given to the parser as `pUserData`, never moves.
    state: Box<Session>,
    /// Frames handed out by `take` so far.
    taken: usize,
    flushed: bool,
    /// Set when a call failed: the parser's state is then unknown, so the session is done.
    failed: bool,
}

impl std::fmt::Debug for NvdecSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvdecSession")
            .field("config", &self.state.config)
            .field("pending", &self.state.frames.len())
            .field("taken", &self.taken)
            .field("flushed", &self.flushed)
            .finish()
    }
}

// SAFETY: the parser and decoder handles are owned by this value alone and only used through
// `&mut self` (never from two threads at once); every call first binds the device's context
// on the calling thread, which is all NVDEC requires of the thread.
unsafe impl Send for NvdecSession {}

impl Drop for NvdecSession {
    fn drop(&mut self) {
        // The decoder (destroyed with `state`) needs the context current on this thread,
        // which may not be the one that decoded.
        let _ = self.state.stream.device().bind();
        // SAFETY: created by cuvidCreateVideoParser, destroyed once, before the state its
        // callbacks point to.
        unsafe { (self.state.lib.api.destroy_video_parser)(self.parser) };
    }
}

impl NvdecSession {
    /// Makes the parser (the decoder comes with the first sequence header).
    pub(super) fn new(
        lib: Arc<NvcuvidLibrary>,
        stream: Arc<CopyStream>,
        config: NvdecConfig,
        limits: spdl_io::Limits,
    ) -> Result<Self> {
        stream.device().bind()?;
        let codec = super::cuda_video_codec(&config.codec).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "codec {:?} is not decodable by NVDEC",
                config.codec
            ))
        })?;
        let mut state = Box::new(Session {
            lib,
            config,
            limits,
            stream,
            decoder: std::ptr::null_mut(),
            coded: (0, 0),
            out: (0, 0),
            frames: Vec::new(),
            error: None,
        });
        let mut params: ffi::ParserParams = zeroed();
        params.codec_type = codec;
        params.max_num_decode_surfaces = 1; // raised by the sequence callback's return value
        params.max_display_delay = 0;
        let sp: *mut Session = &mut *state;
        params.user_data = sp.cast();
        params.sequence_callback = Some(sequence_cb);
        params.decode_picture = Some(decode_cb);
        params.display_picture = Some(display_cb);
        let mut raw: ffi::Handle = std::ptr::null_mut();
        // SAFETY: valid out-pointer and parameters; `state` is boxed (fixed address) and
        // outlives the parser (see Drop).
        check("cuvidCreateVideoParser", unsafe {
            (state.lib.api.create_video_parser)(&mut raw, &mut params)
        })?;
        Ok(NvdecSession {
            parser: raw,
            state,
            taken: 0,
            flushed: false,
            failed: false,
        })
    }

    /// Gives one packet (or the end of stream) to the parser; the callbacks decode and copy
    /// out what becomes displayable.
    fn parse(&mut self, pkt: &mut ffi::SourceDataPacket) -> Result<()> {
        if self.failed {
            return Err(Error::InvalidArgument(
                "this NVDEC session failed earlier; make a new decoder".into(),
            ));
        }
        let sp: *mut Session = &mut *self.state;
        // SAFETY: the parser is live; the payload outlives the call (the parser copies what
        // it keeps); the callbacks run on this thread during the call through `sp`, and
        // `self.state` is not otherwise touched until the call returns.
        let r = unsafe { (self.state.lib.api.parse_video_data)(self.parser, pkt) };
        let res = match unsafe { (*sp).error.take() } {
            Some(e) => Err(e),
            None => check("cuvidParseVideoData", r),
        };
        self.failed = res.is_err();
        res
    }

    /// Feeds `packets` (`(bytes, timestamp)` in decode order: Annex-B for H.264/HEVC, see
    /// [`super::AnnexB`]); the frames they complete wait for [`NvdecSession::take`].
    ///
    /// # Errors
    /// As `NvdecDecoder::decode`; [`Error::InvalidArgument`] after [`NvdecSession::flush`] or
    /// after an earlier failure (the session is then done).
    pub fn feed(&mut self, packets: &[(&[u8], i64)]) -> Result<()> {
        if self.flushed {
            return Err(Error::InvalidArgument(
                "packets fed to an NVDEC session after its flush".into(),
            ));
        }
        self.state.stream.device().bind()?;
        for (data, ts) in packets {
            let mut pkt = ffi::SourceDataPacket {
                flags: ffi::PKT_TIMESTAMP,
                payload_size: data.len() as c_ulong,
                payload: data.as_ptr(),
                timestamp: *ts,
            };
            self.parse(&mut pkt)?;
        }
        Ok(())
    }

    /// Sends the end of the stream: the frames NVDEC still held (reordering delay) come out.
    /// Idempotent.
    ///
    /// # Errors
    /// As [`NvdecSession::feed`].
    pub fn flush(&mut self) -> Result<()> {
        if self.flushed {
            return Ok(());
        }
        self.state.stream.device().bind()?;
        let mut eos = ffi::SourceDataPacket {
            flags: ffi::PKT_ENDOFSTREAM,
            payload_size: 0,
            payload: std::ptr::null(),
            timestamp: 0,
        };
        self.parse(&mut eos)?;
        self.flushed = true;
        Ok(())
    }

    /// Decoded frames waiting to be taken.
    pub fn pending(&self) -> usize {
        self.state.frames.len()
    }

    /// Frames handed out by [`NvdecSession::take`] so far.
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// The waiting frames in batches of `frames_per_batch`, display order: only full batches,
    /// or with `all` the shorter rest too. The frames taken leave the session.
    ///
    /// # Errors
    /// [`Error::Driver`] when the batch buffer cannot be allocated or filled.
    pub fn take(&mut self, frames_per_batch: usize, all: bool) -> Result<Vec<NvdecFrames>> {
        let per = frames_per_batch.max(1);
        let n = self.state.frames.len();
        let ready = if all { n } else { n - n % per };
        if ready == 0 {
            return Ok(Vec::new());
        }
        let frames: Vec<_> = self.state.frames.drain(..ready).collect();
        self.taken += ready;
        let stream = &self.state.stream;
        let (w, h) = self.state.out;
        let frame_bytes = w * h * 3 / 2;
        let mut out = Vec::new();
        for chunk in frames.chunks(per) {
            let buf = DeviceBuffer::alloc(stream, frame_bytes * chunk.len())?;
            for (i, (f, _)) in chunk.iter().enumerate() {
                // SAFETY: both are device buffers of at least `frame_bytes` at these offsets,
                // alive until the event below completes (synchronized before returning).
                unsafe {
                    cudarc::driver::result::memcpy_dtod_async(
                        buf.device_ptr() + (i * frame_bytes) as u64,
                        f.device_ptr(),
                        frame_bytes,
                        stream.stream.cu_stream(),
                    )
                }
                .map_err(|e| Error::driver("cuMemcpyDtoDAsync", e))?;
            }
            let ready = stream.record(false)?;
            ready.synchronize()?;
            let n = chunk.len();
            out.push(NvdecFrames {
                batch: DeviceBatch::new(
                    buf,
                    BatchHeader {
                        shape: [n, h * 3 / 2, w, 1],
                        dtype: DType::U8,
                        keys: (0..n).map(|i| format!("frame {i}")).collect(),
                        labels: vec![None; n],
                    },
                    ready,
                ),
                size: (w, h),
                timestamps: chunk.iter().map(|(_, t)| *t).collect(),
            });
        }
        Ok(out)
    }
}

/// Decodes `packets` through one session, flushes it, and returns every frame in batches of
/// `frames_per_batch` (the last one shorter).
pub(super) fn decode(
    mut session: NvdecSession,
    packets: &[(&[u8], i64)],
    frames_per_batch: usize,
) -> Result<Vec<NvdecFrames>> {
    session.feed(packets)?;
    session.flush()?;
    if session.pending() == 0 {
        return Err(Error::InvalidArgument(format!(
            "NVDEC produced no frame from {} packets",
            packets.len()
        )));
    }
    session.take(frames_per_batch, true)
}
