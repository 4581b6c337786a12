//! The part of NVIDIA's NVDECODE API (`cuviddec.h`, `nvcuvid.h` of the Video Codec SDK) the
//! decoder uses, written from the documented headers: the structures are `#[repr(C)]` copies
//! of theirs (Linux LP64: `unsigned long` is 64-bit), the entry points are looked up in
//! `libnvcuvid.so.1` at run time.

use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::path::Path;

/// `CUresult`: 0 is `CUDA_SUCCESS`.
pub(crate) type CuResult = c_int;
/// `CUvideoparser`, `CUvideodecoder`: opaque handles.
pub(crate) type Handle = *mut c_void;

/// `cudaVideoSurfaceFormat_NV12`.
pub(crate) const SURFACE_NV12: c_int = 0;
/// `cudaVideoChromaFormat_420`.
pub(crate) const CHROMA_420: c_int = 1;
/// `cudaVideoCreate_PreferCUVID`: decode on the video engine.
pub(crate) const CREATE_PREFER_CUVID: c_ulong = 0x04;
/// `cudaVideoDeinterlaceMode_Weave` (progressive input) and `_Adaptive`.
pub(crate) const DEINTERLACE_WEAVE: c_int = 0;
pub(crate) const DEINTERLACE_ADAPTIVE: c_int = 2;
/// `CUvideopacketflags`.
pub(crate) const PKT_ENDOFSTREAM: c_ulong = 0x01;
pub(crate) const PKT_TIMESTAMP: c_ulong = 0x02;

/// A rectangle of `short`s (`display_area`, `target_rect` of `CUVIDDECODECREATEINFO`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Rect16 {
    pub left: i16,
    pub top: i16,
    pub right: i16,
    pub bottom: i16,
}

/// `CUVIDDECODECAPS` (cuvidGetDecoderCaps).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DecodeCaps {
    pub codec_type: c_int,
    pub chroma_format: c_int,
    pub bit_depth_minus8: c_uint,
    pub reserved1: [c_uint; 3],
    pub is_supported: u8,
    pub num_nvdecs: u8,
    pub output_format_mask: u16,
    pub max_width: c_uint,
    pub max_height: c_uint,
    pub max_mb_count: c_uint,
    pub min_width: u16,
    pub min_height: u16,
    pub is_histogram_supported: u8,
    pub counter_bit_depth: u8,
    pub max_histogram_bins: u16,
    pub reserved3: [c_uint; 10],
}

/// `CUVIDDECODECREATEINFO` (cuvidCreateDecoder).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecodeCreateInfo {
    pub width: c_ulong,
    pub height: c_ulong,
    pub num_decode_surfaces: c_ulong,
    pub codec_type: c_int,
    pub chroma_format: c_int,
    pub creation_flags: c_ulong,
    pub bit_depth_minus8: c_ulong,
    pub intra_decode_only: c_ulong,
    pub max_width: c_ulong,
    pub max_height: c_ulong,
    pub reserved1: c_ulong,
    pub display_area: Rect16,
    pub output_format: c_int,
    pub deinterlace_mode: c_int,
    pub target_width: c_ulong,
    pub target_height: c_ulong,
    pub num_output_surfaces: c_ulong,
    pub vid_lock: *mut c_void,
    pub target_rect: Rect16,
    pub enable_histogram: c_ulong,
    pub reserved2: [c_ulong; 4],
}

/// `CUVIDEOFORMAT`: what the parser's sequence callback reports.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct VideoFormat {
    pub codec: c_int,
    pub frame_rate: [c_uint; 2],
    pub progressive_sequence: u8,
    pub bit_depth_luma_minus8: u8,
    pub bit_depth_chroma_minus8: u8,
    pub min_num_decode_surfaces: u8,
    pub coded_width: c_uint,
    pub coded_height: c_uint,
    /// left, top, right, bottom.
    pub display_area: [c_int; 4],
    pub chroma_format: c_int,
    pub bitrate: c_uint,
    pub display_aspect_ratio: [c_int; 2],
    pub video_signal_description: [u8; 4],
    pub seqhdr_data_length: c_uint,
}

/// `CUVIDPARSERDISPINFO`: a picture ready for display.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct ParserDispInfo {
    pub picture_index: c_int,
    pub progressive_frame: c_int,
    pub top_field_first: c_int,
    pub repeat_first_field: c_int,
    pub timestamp: i64,
}

/// `PFNVIDSEQUENCECALLBACK`: 0 fails, 1 succeeds, >1 sets the parser's surface count.
pub(crate) type SequenceCallback = unsafe extern "C" fn(*mut c_void, *mut VideoFormat) -> c_int;
/// `PFNVIDDECODECALLBACK`: the argument is a `CUVIDPICPARAMS`, passed on untouched.
pub(crate) type DecodeCallback = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
/// `PFNVIDDISPLAYCALLBACK`: a null `CUVIDPARSERDISPINFO` marks the end of the stream.
pub(crate) type DisplayCallback = unsafe extern "C" fn(*mut c_void, *mut ParserDispInfo) -> c_int;

/// `CUVIDPARSERPARAMS` (cuvidCreateVideoParser). Newer SDKs put bit fields in the reserved
/// words and optional callbacks in `reserved2`: zero keeps them off, the size is the same.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct ParserParams {
    pub codec_type: c_int,
    pub max_num_decode_surfaces: c_uint,
    pub clock_rate: c_uint,
    pub error_threshold: c_uint,
    pub max_display_delay: c_uint,
    pub reserved1: [c_uint; 5],
    pub user_data: *mut c_void,
    pub sequence_callback: Option<SequenceCallback>,
    pub decode_picture: Option<DecodeCallback>,
    pub display_picture: Option<DisplayCallback>,
    pub reserved2: [*mut c_void; 7],
    pub ext_video_info: *mut c_void,
}

/// `CUVIDSOURCEDATAPACKET` (cuvidParseVideoData).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct SourceDataPacket {
    pub flags: c_ulong,
    pub payload_size: c_ulong,
    pub payload: *const u8,
    pub timestamp: i64,
}

/// `CUVIDPROCPARAMS` (cuvidMapVideoFrame64).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProcParams {
    pub progressive_frame: c_int,
    pub second_field: c_int,
    pub top_field_first: c_int,
    pub unpaired_field: c_int,
    pub reserved_flags: c_uint,
    pub reserved_zero: c_uint,
    pub raw_input_dptr: u64,
    pub raw_input_pitch: c_uint,
    pub raw_input_format: c_uint,
    pub raw_output_dptr: u64,
    pub raw_output_pitch: c_uint,
    pub reserved1: c_uint,
    pub output_stream: *mut c_void,
    pub reserved: [c_uint; 46],
    pub histogram_dptr: *mut u64,
    pub reserved2: [*mut c_void; 1],
}

/// An all-zero value of one of the structures above (their documented "unset" state).
pub(crate) fn zeroed<T: Zeroable>() -> T {
    // SAFETY: `Zeroable` is implemented only for the `#[repr(C)]` structures of this module,
    // made of integers, raw pointers and `Option<fn>`, for which all-zero bytes are valid.
    unsafe { std::mem::zeroed() }
}

/// Structures for which all-zero bytes are a valid value.
pub(crate) trait Zeroable {}
impl Zeroable for DecodeCaps {}
impl Zeroable for DecodeCreateInfo {}
impl Zeroable for ParserParams {}
impl Zeroable for ProcParams {}

type CreateParserFn = unsafe extern "C" fn(*mut Handle, *mut ParserParams) -> CuResult;
type ParseFn = unsafe extern "C" fn(Handle, *mut SourceDataPacket) -> CuResult;
type DestroyFn = unsafe extern "C" fn(Handle) -> CuResult;
type CapsFn = unsafe extern "C" fn(*mut DecodeCaps) -> CuResult;
type CreateDecoderFn = unsafe extern "C" fn(*mut Handle, *mut DecodeCreateInfo) -> CuResult;
type DecodePictureFn = unsafe extern "C" fn(Handle, *mut c_void) -> CuResult;
type MapFn =
    unsafe extern "C" fn(Handle, c_int, *mut u64, *mut c_uint, *mut ProcParams) -> CuResult;
type UnmapFn = unsafe extern "C" fn(Handle, u64) -> CuResult;

/// The entry points, looked up once; valid while `_lib` is loaded.
#[derive(Debug)]
pub(crate) struct Api {
    pub create_video_parser: CreateParserFn,
    pub parse_video_data: ParseFn,
    pub destroy_video_parser: DestroyFn,
    pub get_decoder_caps: CapsFn,
    pub create_decoder: CreateDecoderFn,
    pub destroy_decoder: DestroyFn,
    pub decode_picture: DecodePictureFn,
    pub map_video_frame64: MapFn,
    pub unmap_video_frame64: UnmapFn,
    _lib: libloading::Library,
}

impl Api {
    /// Loads `path` and looks up every entry point.
    ///
    /// # Errors
    /// The loader's message, or `"missing <symbols>"`.
    pub(crate) fn load(path: &Path) -> std::result::Result<Api, String> {
        // SAFETY: loading runs the library's initializers; libnvcuvid is the driver's own
        // library, whose initializers have no preconditions.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
        let mut missing = Vec::new();
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol has the C signature of the field it is stored in, as
                // declared in NVIDIA's headers; the pointer is used only while `lib` lives.
                match unsafe { lib.get($name.as_bytes()) } {
                    Ok(f) => Some(*f),
                    Err(_) => {
                        missing.push($name);
                        None
                    }
                }
            };
        }
        // Every symbol looked up (so that the error names all that are missing), then the
        // table built if none is.
        macro_rules! api {
            ($($field:ident: $name:literal),* $(,)?) => {{
                $(let $field = sym!($name);)*
                match ($($field,)*) {
                    ($(Some($field),)*) => Ok(Api { $($field,)* _lib: lib }),
                    _ => Err(format!("missing {}", missing.join(", "))),
                }
            }};
        }
        api! {
            create_video_parser: "cuvidCreateVideoParser",
            parse_video_data: "cuvidParseVideoData",
            destroy_video_parser: "cuvidDestroyVideoParser",
            get_decoder_caps: "cuvidGetDecoderCaps",
            create_decoder: "cuvidCreateDecoder",
            destroy_decoder: "cuvidDestroyDecoder",
            decode_picture: "cuvidDecodePicture",
            map_video_frame64: "cuvidMapVideoFrame64",
            unmap_video_frame64: "cuvidUnmapVideoFrame64",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structure_sizes_match_the_headers_on_lp64() {
        // Sizes from the C layout of cuviddec.h / nvcuvid.h on x86_64 / aarch64 Linux.
        assert_eq!(std::mem::size_of::<DecodeCaps>(), 88);
        assert_eq!(std::mem::size_of::<DecodeCreateInfo>(), 176);
        assert_eq!(std::mem::size_of::<VideoFormat>(), 64);
        assert_eq!(std::mem::size_of::<ParserDispInfo>(), 24);
        assert_eq!(std::mem::size_of::<ParserParams>(), 136);
        assert_eq!(std::mem::size_of::<SourceDataPacket>(), 32);
        assert_eq!(std::mem::size_of::<ProcParams>(), 264);
        assert_eq!(std::mem::offset_of!(ProcParams, output_stream), 56);
        assert_eq!(std::mem::offset_of!(DecodeCreateInfo, display_area), 80);
        assert_eq!(std::mem::offset_of!(DecodeCreateInfo, vid_lock), 120);
    }
}
