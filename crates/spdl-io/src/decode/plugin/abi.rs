//! The C table a plugin exports, and the plugin-side adapter from a Rust [`Decoder`].
//!
//! Every struct is `#[repr(C)]`; sizes are fixed-width integers so that a host and a plugin
//! built by different compilers agree. Return value of `probe` / `decode_into`: 0 on success,
//! otherwise an error whose kind and message are in the [`RawError`].

use std::ffi::{c_char, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use smart_default::SmartDefault;

use crate::decode::{ColorMode, DecodeOptions, Decoder, ImageInfo, Limits};
use crate::error::{Error, ErrorKind};

/// The version of the table; a host refuses a plugin with another one.
pub const ABI_VERSION: u32 = 1;

/// The symbol a plugin library exports: `extern "C" fn() -> *const RawDecoder`.
pub const SYMBOL: &[u8] = b"spdl_decoder_plugin_v1\0";

/// A `u8` static a plugin library exports beside [`SYMBOL`]: 1 when it was built with
/// `panic = "abort"`, whose panics cannot be caught and would end the host's process, so the
/// host refuses it; 0 otherwise. Plugins built before it existed lack it (nothing is known).
pub const PANIC_ABORT_SYMBOL: &[u8] = b"spdl_decoder_plugin_panic_abort\0";

/// [`ImageInfo`] across the boundary (the format is the plugin's `format` name).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RawImageInfo {
    /// Stored width in pixels.
    pub width: u64,
    /// Stored height in pixels.
    pub height: u64,
    /// Native channels.
    pub channels: u32,
    /// 8 or 16.
    pub bit_depth: u32,
    /// EXIF orientation value 1..=8.
    pub orientation: u32,
}

/// [`DecodeOptions`] across the boundary.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RawDecodeOptions {
    /// 0 RGB, 1 gray, 2 RGBA, 3 unchanged ([`ColorMode`]).
    pub color: u32,
    /// [`DecodeOptions::keep_orientation`].
    pub keep_orientation: bool,
    /// [`DecodeOptions::lenient`].
    pub lenient: bool,
    /// [`Limits::max_pixels`].
    pub max_pixels: u64,
    /// [`Limits::max_bytes`].
    pub max_bytes: u64,
}

/// An error across the boundary: a kind code and a NUL-terminated message.
#[repr(C)]
#[derive(Debug, Clone, Copy, SmartDefault)]
pub struct RawError {
    /// The [`ErrorKind`], numbered by its position in the host's list (append-only).
    pub kind: u32,
    /// UTF-8, NUL-terminated, cut at 511 bytes.
    #[default([0; 512])]
    pub message: [u8; 512],
}

/// The table a plugin exports. `ctx` is the plugin's own pointer, passed back to every call.
#[repr(C)]
#[derive(Debug)]
pub struct RawDecoder {
    /// Must equal [`ABI_VERSION`].
    pub abi_version: u32,
    /// The plugin's state, opaque to the host.
    pub ctx: *const c_void,
    /// The decoder's name (for logs), NUL-terminated, alive as long as the library.
    pub name: *const c_char,
    /// The format's name (e.g. `PNM`), NUL-terminated, alive as long as the library.
    pub format: *const c_char,
    /// [`Decoder::extensions`], space-separated, NUL-terminated (e.g. `ppm pgm`).
    pub extensions: *const c_char,
    /// [`Decoder::matches`].
    pub matches: unsafe extern "C" fn(ctx: *const c_void, data: *const u8, len: usize) -> bool,
    /// [`Decoder::probe`].
    pub probe: unsafe extern "C" fn(
        ctx: *const c_void,
        data: *const u8,
        len: usize,
        info: *mut RawImageInfo,
        err: *mut RawError,
    ) -> i32,
    /// [`Decoder::decode_into`].
    pub decode_into: unsafe extern "C" fn(
        ctx: *const c_void,
        data: *const u8,
        len: usize,
        opts: *const RawDecodeOptions,
        out: *mut u8,
        out_len: usize,
        info: *mut RawImageInfo,
        err: *mut RawError,
    ) -> i32,
}

/// Codes are positions in this list: append only, so that old plugins keep their meaning.
const KINDS: [ErrorKind; 9] = [
    ErrorKind::Corrupt,
    ErrorKind::UnknownFormat,
    ErrorKind::Unsupported,
    ErrorKind::Truncated,
    ErrorKind::LimitExceeded,
    ErrorKind::Empty,
    ErrorKind::ShapeMismatch,
    ErrorKind::InvalidArgument,
    ErrorKind::Read,
];

/// The number of an [`ErrorKind`] in [`RawError::kind`] (unknown numbers read as corrupt).
pub(crate) fn kind_code(kind: ErrorKind) -> u32 {
    KINDS.iter().position(|k| *k == kind).unwrap_or(0) as u32
}

#[cfg(feature = "decoder-plugins")]
pub(crate) fn kind_from_code(code: u32) -> ErrorKind {
    KINDS
        .get(code as usize)
        .copied()
        .unwrap_or(ErrorKind::Corrupt)
}

pub(crate) fn color_code(color: ColorMode) -> u32 {
    match color {
        ColorMode::Rgb => 0,
        ColorMode::Gray => 1,
        ColorMode::Rgba => 2,
        ColorMode::Unchanged => 3,
    }
}

impl From<&DecodeOptions> for RawDecodeOptions {
    fn from(o: &DecodeOptions) -> Self {
        Self {
            color: color_code(o.color),
            keep_orientation: o.keep_orientation,
            lenient: o.lenient,
            max_pixels: o.limits.max_pixels,
            max_bytes: o.limits.max_bytes,
        }
    }
}

impl RawDecodeOptions {
    fn options(&self) -> DecodeOptions {
        DecodeOptions {
            color: match self.color {
                1 => ColorMode::Gray,
                2 => ColorMode::Rgba,
                3 => ColorMode::Unchanged,
                _ => ColorMode::Rgb,
            },
            keep_orientation: self.keep_orientation,
            lenient: self.lenient,
            limits: Limits {
                max_pixels: self.max_pixels,
                max_bytes: self.max_bytes,
            },
        }
    }
}

impl From<&ImageInfo> for RawImageInfo {
    fn from(i: &ImageInfo) -> Self {
        Self {
            width: i.width as u64,
            height: i.height as u64,
            channels: i.channels as u32,
            bit_depth: u32::from(i.bit_depth),
            orientation: u32::from(i.orientation.exif_value()),
        }
    }
}

impl RawImageInfo {
    /// Back to an [`ImageInfo`]; `None` for values out of range.
    #[cfg(feature = "decoder-plugins")]
    pub(crate) fn info(&self, format: crate::ImageFormat) -> Option<ImageInfo> {
        Some(ImageInfo {
            format,
            width: usize::try_from(self.width).ok()?,
            height: usize::try_from(self.height).ok()?,
            channels: usize::try_from(self.channels).ok()?,
            bit_depth: u8::try_from(self.bit_depth).ok()?,
            orientation: crate::decode::Orientation::from_exif(
                u16::try_from(self.orientation).ok()?,
            )?,
        })
    }
}

impl RawError {
    fn set(&mut self, e: &Error) {
        self.kind = kind_code(e.kind());
        let msg = e.message().as_bytes();
        let n = msg.len().min(self.message.len() - 1);
        self.message[..n].copy_from_slice(&msg[..n]);
        self.message[n] = 0;
    }

    /// The error this describes.
    #[cfg(feature = "decoder-plugins")]
    pub(crate) fn error(&self) -> Error {
        let end = self.message.iter().position(|&b| b == 0).unwrap_or(0);
        Error::new(
            kind_from_code(self.kind),
            String::from_utf8_lossy(&self.message[..end]).into_owned(),
        )
    }
}

/// A Rust decoder wrapped as a [`RawDecoder`] table: what
/// [`export_decoder_plugin!`](crate::export_decoder_plugin) builds once per library.
#[derive(Debug)]
pub struct Exported {
    table: RawDecoder,
    _strings: [CString; 3],
}

// The table's pointers refer to the boxed decoder and strings owned by `Exported`, which lives
// in a `static` for the life of the library; the decoder itself is `Send + Sync`.
unsafe impl Send for Exported {}
unsafe impl Sync for Exported {}

impl Exported {
    /// Wraps `decoder`; `format` names its format (e.g. `"PNM"`) in the host's `ImageInfo`.
    pub fn new(decoder: Box<dyn Decoder>, format: &str) -> Self {
        let name = CString::new(decoder.name().replace('\0', "")).unwrap_or_default();
        let format = CString::new(format.replace('\0', "")).unwrap_or_default();
        let extensions =
            CString::new(decoder.extensions().join(" ").replace('\0', "")).unwrap_or_default();
        // Boxed twice for a thin pointer; leaked: the table lives as long as the library,
        // which is never unloaded.
        let ctx: *const Box<dyn Decoder> = Box::into_raw(Box::new(decoder));
        Self {
            table: RawDecoder {
                abi_version: ABI_VERSION,
                ctx: ctx.cast::<c_void>(),
                name: name.as_ptr(),
                format: format.as_ptr(),
                extensions: extensions.as_ptr(),
                matches: raw_matches,
                probe: raw_probe,
                decode_into: raw_decode_into,
            },
            _strings: [name, format, extensions],
        }
    }

    /// The table to return from the exported symbol.
    pub fn table(&self) -> *const RawDecoder {
        &self.table
    }
}

/// # Safety
/// `ctx` comes from [`Exported::new`]; `data` points to `len` readable bytes.
unsafe fn parts<'a>(
    ctx: *const c_void,
    data: *const u8,
    len: usize,
) -> (&'a dyn Decoder, &'a [u8]) {
    // SAFETY: the caller's contract above.
    unsafe {
        let decoder = &**(ctx as *const Box<dyn Decoder>);
        let bytes = if len == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(data, len)
        };
        (decoder, bytes)
    }
}

/// Runs a plugin call, turning a panic into an error: nothing unwinds into the host.
fn guarded(
    err: *mut RawError,
    f: impl FnOnce() -> Result<RawImageInfo, Error>,
    info: *mut RawImageInfo,
) -> i32 {
    let result = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        // The message crosses the boundary (the host never sees the payload itself).
        let why = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a panic without a message");
        Err(Error::new(
            ErrorKind::Corrupt,
            format!("the decoder plugin panicked: {why}"),
        ))
    });
    match result {
        Ok(i) => {
            // SAFETY: the host passes a valid `RawImageInfo` pointer.
            unsafe { *info = i };
            0
        }
        Err(e) => {
            // SAFETY: the host passes a valid `RawError` pointer.
            unsafe { (*err).set(&e) };
            1
        }
    }
}

unsafe extern "C" fn raw_matches(ctx: *const c_void, data: *const u8, len: usize) -> bool {
    // SAFETY: the host keeps the contract of `parts`.
    let (d, bytes) = unsafe { parts(ctx, data, len) };
    catch_unwind(AssertUnwindSafe(|| d.matches(bytes))).unwrap_or(false)
}

unsafe extern "C" fn raw_probe(
    ctx: *const c_void,
    data: *const u8,
    len: usize,
    info: *mut RawImageInfo,
    err: *mut RawError,
) -> i32 {
    // SAFETY: the host keeps the contract of `parts`.
    let (d, bytes) = unsafe { parts(ctx, data, len) };
    guarded(err, || d.probe(bytes).map(|i| RawImageInfo::from(&i)), info)
}

#[allow(clippy::too_many_arguments)] // the C signature
unsafe extern "C" fn raw_decode_into(
    ctx: *const c_void,
    data: *const u8,
    len: usize,
    opts: *const RawDecodeOptions,
    out: *mut u8,
    out_len: usize,
    info: *mut RawImageInfo,
    err: *mut RawError,
) -> i32 {
    // SAFETY: the host keeps the contract of `parts`, passes valid options, and `out` points
    // to `out_len` writable bytes that nothing else touches during the call.
    let (d, bytes, opts, out) = unsafe {
        let (d, bytes) = parts(ctx, data, len);
        let out: &mut [u8] = if out_len == 0 {
            &mut []
        } else {
            std::slice::from_raw_parts_mut(out, out_len)
        };
        (d, bytes, (*opts).options(), out)
    };
    guarded(
        err,
        || {
            d.decode_into(bytes, &opts, out)
                .map(|i| RawImageInfo::from(&i))
        },
        info,
    )
}

/// Exports a decoder from a `cdylib` as a spdl-rs decoder plugin: call it once at the crate's
/// top level with an expression that makes the decoder and the name of its format.
///
/// Build the plugin with `panic = "unwind"` (Cargo's default): a panic in the decoder is then
/// caught on the plugin's side and becomes an error for that one sample, with the panic's
/// message. A plugin built with `panic = "abort"` could end the host's process on any bad
/// input, so the host refuses to load it (the macro records the setting in
/// [`PANIC_ABORT_SYMBOL`](crate::decode::plugin::PANIC_ABORT_SYMBOL)).
///
/// ```ignore
/// spdl_io::export_decoder_plugin!(my_crate::MyDecoder::new(), "MYFMT");
/// ```
#[macro_export]
macro_rules! export_decoder_plugin {
    ($decoder:expr, $format:expr) => {
        /// 1 when this library was built with `panic = "abort"` (the host then refuses it).
        #[no_mangle]
        pub static spdl_decoder_plugin_panic_abort: u8 = cfg!(panic = "abort") as u8;

        /// The entry point spdl-rs looks up (ABI version 1).
        #[no_mangle]
        pub extern "C" fn spdl_decoder_plugin_v1() -> *const $crate::decode::plugin::RawDecoder {
            static EXPORTED: ::std::sync::OnceLock<$crate::decode::plugin::Exported> =
                ::std::sync::OnceLock::new();
            EXPORTED
                .get_or_init(|| {
                    $crate::decode::plugin::Exported::new(::std::boxed::Box::new($decoder), $format)
                })
                .table()
        }
    };
}
