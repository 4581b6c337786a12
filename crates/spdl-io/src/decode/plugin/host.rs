//! The host side: load a plugin library and register its decoder (feature `decoder-plugins`).

use std::ffi::{c_void, CStr};
use std::path::Path;
use std::sync::Arc;

use super::abi::{
    RawDecodeOptions, RawDecoder, RawError, RawImageInfo, ABI_VERSION, PANIC_ABORT_SYMBOL, SYMBOL,
};
use crate::decode::{
    check_header, register_global, DecodeOptions, Decoder, ImageFormat, ImageInfo,
};
use crate::error::{Error, ErrorKind, Result};

/// Loads the decoder plugin at `path` and registers it for every
/// [`Registry::with_defaults`](crate::Registry::with_defaults) made afterwards (so
/// [`ImageLoader`](crate::ImageLoader), the `spdl` command and `spdl_rs` use it), ahead of
/// the built-in decoders for the content it [`matches`](Decoder::matches). Returns the
/// decoder's name. The library stays loaded for the life of the process.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] naming the path when the library cannot be loaded, lacks
/// the `spdl_decoder_plugin_v1` symbol, was built for another plugin ABI version, or was built
/// with `panic = "abort"` (a panic in it would end this process instead of failing a sample).
///
/// # Safety
/// Loading a library runs its initialisers and trusts its exported table: only load plugins
/// you trust, built with [`export_decoder_plugin!`](crate::export_decoder_plugin).
pub unsafe fn load(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    let fail = |why: String| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("decoder plugin {}: {why}", path.display()),
        )
    };
    // SAFETY: the caller trusts the library (this function's contract).
    let table = unsafe {
        let lib = libloading::Library::new(path).map_err(|e| fail(e.to_string()))?;
        let entry = lib
            .get::<extern "C" fn() -> *const RawDecoder>(SYMBOL)
            .map_err(|_| fail("not a spdl-rs decoder plugin (no spdl_decoder_plugin_v1)".into()))?;
        // Checked before the plugin runs any code of its own (its table is made lazily).
        if let Ok(flag) = lib.get::<*const u8>(PANIC_ABORT_SYMBOL) {
            if !flag.is_null() && **flag != 0 {
                return Err(fail(
                    "built with panic = \"abort\": a panic in it would end this process \
                     instead of failing one sample; build it with panic = \"unwind\" (the default)"
                        .into(),
                ));
            }
        }
        let table = entry();
        // Never unloaded: the table and its strings live inside the library.
        std::mem::forget(lib);
        table
            .as_ref()
            .ok_or_else(|| fail("the plugin returned no table".into()))?
    };
    if table.abi_version != ABI_VERSION {
        return Err(fail(format!(
            "plugin ABI version {}, this build reads version {ABI_VERSION}",
            table.abi_version
        )));
    }
    // SAFETY: the strings are NUL-terminated and live as long as the (never unloaded) library.
    let (name, format, extensions) = unsafe {
        let text = |p| CStr::from_ptr(p).to_string_lossy().into_owned();
        (text(table.name), text(table.format), text(table.extensions))
    };
    let decoder = PluginDecoder {
        table,
        name: name.clone(),
        // One leak per loaded plugin: `ImageFormat::Other` holds a `&'static str`.
        format: ImageFormat::Other(Box::leak(format.into_boxed_str())),
        extensions: extensions.split_whitespace().map(String::from).collect(),
    };
    register_global(Arc::new(decoder));
    Ok(name)
}

/// A plugin's table seen as a [`Decoder`].
struct PluginDecoder {
    table: &'static RawDecoder,
    name: String,
    format: ImageFormat,
    extensions: Vec<String>,
}

// The plugin's decoder is `Send + Sync` on its side (the export requires a `Decoder`).
unsafe impl Send for PluginDecoder {}
unsafe impl Sync for PluginDecoder {}

impl PluginDecoder {
    fn ctx(&self) -> *const c_void {
        self.table.ctx
    }

    fn finish(&self, code: i32, info: &RawImageInfo, err: &RawError) -> Result<ImageInfo> {
        if code != 0 {
            return Err(err.error());
        }
        let invalid = || {
            Error::new(
                ErrorKind::Corrupt,
                format!(
                    "decoder plugin {} reported an invalid header {info:?}",
                    self.name
                ),
            )
        };
        let info = info.info(self.format).ok_or_else(invalid)?;
        // Sizes, channels and depth as for every decoder, before the host sizes a buffer by them.
        check_header(&info).map_err(|e| {
            Error::new(
                e.kind(),
                format!("decoder plugin {}: {}", self.name, e.message()),
            )
        })?;
        Ok(info)
    }
}

impl Decoder for PluginDecoder {
    fn name(&self) -> &str {
        &self.name
    }

    fn extensions(&self) -> Vec<String> {
        self.extensions.clone()
    }

    fn matches(&self, bytes: &[u8]) -> bool {
        // SAFETY: `bytes` is valid for its length during the call.
        unsafe { (self.table.matches)(self.ctx(), bytes.as_ptr(), bytes.len()) }
    }

    fn probe(&self, bytes: &[u8]) -> Result<ImageInfo> {
        let (mut info, mut err) = (RawImageInfo::default(), RawError::default());
        // SAFETY: every pointer is valid for the call.
        let code = unsafe {
            (self.table.probe)(self.ctx(), bytes.as_ptr(), bytes.len(), &mut info, &mut err)
        };
        self.finish(code, &info, &err)
    }

    fn decode_into(&self, bytes: &[u8], opts: &DecodeOptions, out: &mut [u8]) -> Result<ImageInfo> {
        let raw_opts = RawDecodeOptions::from(opts);
        let (mut info, mut err) = (RawImageInfo::default(), RawError::default());
        // SAFETY: every pointer is valid for the call; `out` is borrowed mutably.
        let code = unsafe {
            (self.table.decode_into)(
                self.ctx(),
                bytes.as_ptr(),
                bytes.len(),
                &raw_opts,
                out.as_mut_ptr(),
                out.len(),
                &mut info,
                &mut err,
            )
        };
        self.finish(code, &info, &err)
    }
}
