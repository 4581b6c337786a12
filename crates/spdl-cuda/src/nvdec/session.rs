//! One NVDEC decode session: parser, decoder and the three parser callbacks
//! (`cuvidCreateVideoParser` / `cuvidParseVideoData`, `cuvidCreateDecoder` in the sequence
//! callback, `cuvidDecodePicture`, `cuvidMapVideoFrame64` + a copy of the NV12 surface into
//! our own device memory in the display callback).

use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::sync::Arc;

use cudarc::driver::sys;

use super::ffi::{self, zeroed};
use super::{NvcuvidLibrary, NvdecConfig};
use crate::dlpack::DType;
use crate::error::{Error, Result};
use crate::stream::CopyStream;
use crate::transfer::{DeviceBatch, DeviceBuffer};

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
struct Session<'a> {
    lib: &'a NvcuvidLibrary,
    config: &'a NvdecConfig,
    limits: &'a spdl_io::Limits,
    stream: &'a Arc<CopyStream>,
    decoder: ffi::Handle,
    /// Coded size the decoder was made for.
    coded: (u32, u32),
    /// Output frame size (after crop and scale).
    out: (usize, usize),
    frames: Vec<(DeviceBuffer, i64)>,
    error: Option<Error>,
}

impl Session<'_> {
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
        real.check(self.limits)?;
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
        let buf = DeviceBuffer::alloc(self.stream, w * h * 3 / 2)?;
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

impl Drop for Session<'_> {
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
    let s = unsafe { &mut *user.cast::<Session<'_>>() };
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
    let s = unsafe { &mut *user.cast::<Session<'_>>() };
    match s.on_decode(pic) {
        Ok(()) => 1,
        Err(e) => s.fail(e),
    }
}

unsafe extern "C" fn display_cb(user: *mut c_void, disp: *mut ffi::ParserDispInfo) -> c_int {
    // SAFETY: as in `sequence_cb`; a null `disp` is the end of the stream.
    let s = unsafe { &mut *user.cast::<Session<'_>>() };
    let Some(disp) = (unsafe { disp.as_ref() }) else {
        return 1;
    };
    match s.on_display(disp) {
        Ok(()) => 1,
        Err(e) => s.fail(e),
    }
}

/// A parser handle, destroyed on drop.
struct Parser<'a> {
    lib: &'a NvcuvidLibrary,
    raw: ffi::Handle,
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: created by cuvidCreateVideoParser, destroyed once.
        unsafe { (self.lib.api.destroy_video_parser)(self.raw) };
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

/// Decodes `packets` (`(Annex-B bytes or the codec's native packets, timestamp)`, in decode
/// order) through one parser/decoder session, flushes it, and returns the frames in batches
/// of `frames_per_batch` (the last one shorter).
pub(super) fn decode(
    lib: &NvcuvidLibrary,
    stream: &Arc<CopyStream>,
    config: &NvdecConfig,
    limits: &spdl_io::Limits,
    packets: &[(&[u8], i64)],
    frames_per_batch: usize,
) -> Result<Vec<NvdecFrames>> {
    stream.device().bind()?;
    let codec = super::cuda_video_codec(&config.codec).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "codec {:?} is not decodable by NVDEC",
            config.codec
        ))
    })?;
    let mut session = Box::new(Session {
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
    // From here until the parser is dropped the session is reached only through `sp` (the
    // callbacks get the same pointer).
    let sp: *mut Session<'_> = &mut *session;
    params.user_data = sp.cast();
    params.sequence_callback = Some(sequence_cb);
    params.decode_picture = Some(decode_cb);
    params.display_picture = Some(display_cb);
    let mut raw: ffi::Handle = std::ptr::null_mut();
    // SAFETY: valid out-pointer and parameters; `session` outlives the parser (dropped after).
    check("cuvidCreateVideoParser", unsafe {
        (lib.api.create_video_parser)(&mut raw, &mut params)
    })?;
    let parser = Parser { lib, raw };
    let feed = |pkt: &mut ffi::SourceDataPacket| -> Result<()> {
        // SAFETY: the parser is live; the payload slice outlives the call (the parser copies
        // what it keeps); callbacks run on this thread during the call, through `sp`, which
        // points into `session`, alive and otherwise unused until the parser is dropped.
        let r = unsafe { (lib.api.parse_video_data)(parser.raw, pkt) };
        if let Some(e) = unsafe { (*sp).error.take() } {
            return Err(e);
        }
        check("cuvidParseVideoData", r)
    };
    for (data, ts) in packets {
        let mut pkt = ffi::SourceDataPacket {
            flags: ffi::PKT_TIMESTAMP,
            payload_size: data.len() as c_ulong,
            payload: data.as_ptr(),
            timestamp: *ts,
        };
        feed(&mut pkt)?;
    }
    let mut eos = ffi::SourceDataPacket {
        flags: ffi::PKT_ENDOFSTREAM,
        payload_size: 0,
        payload: std::ptr::null(),
        timestamp: 0,
    };
    feed(&mut eos)?;
    drop(parser);
    let (w, h) = session.out;
    let frames = std::mem::take(&mut session.frames);
    drop(session);
    if frames.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "NVDEC produced no frame from {} packets",
            packets.len()
        )));
    }
    let frame_bytes = w * h * 3 / 2;
    let mut out = Vec::new();
    for chunk in frames.chunks(frames_per_batch.max(1)) {
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
                [n, h * 3 / 2, w, 1],
                DType::U8,
                (0..n).map(|i| format!("frame {i}")).collect(),
                vec![None; n],
                ready,
            ),
            size: (w, h),
            timestamps: chunk.iter().map(|(_, t)| *t).collect(),
        });
    }
    Ok(out)
}
