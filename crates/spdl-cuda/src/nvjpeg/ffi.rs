//! The part of `nvjpeg.h` we call, as a table of function pointers from `dlopen` (libloading).
//! No link-time dependency: the crate builds and runs without CUDA installed.

use std::ffi::{c_int, c_uchar, c_void};
use std::path::Path;

use libloading::Library;

/// `nvjpegStatus_t`.
pub(crate) type Status = c_int;
/// `nvjpegHandle_t`.
pub(crate) type Handle = *mut c_void;
/// `nvjpegJpegState_t`.
pub(crate) type State = *mut c_void;
/// `cudaStream_t` (the same object as the driver's `CUstream`).
pub(crate) type Stream = *mut c_void;

/// `NVJPEG_MAX_COMPONENT`.
pub(crate) const MAX_COMPONENT: usize = 4;
/// `NVJPEG_OUTPUT_RGBI`: interleaved RGB, one plane, pitch >= 3 * width.
pub(crate) const OUTPUT_RGBI: c_int = 5;
/// `NVJPEG_CSS_UNKNOWN`.
pub(crate) const CSS_UNKNOWN: c_int = -1;
/// `libraryPropertyType` values for `nvjpegGetProperty`.
pub(crate) const MAJOR_VERSION: c_int = 0;
pub(crate) const MINOR_VERSION: c_int = 1;
pub(crate) const PATCH_LEVEL: c_int = 2;

/// `nvjpegImage_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Image {
    pub(crate) channel: [*mut c_uchar; MAX_COMPONENT],
    pub(crate) pitch: [usize; MAX_COMPONENT],
}

impl Default for Image {
    fn default() -> Self {
        Image {
            channel: [std::ptr::null_mut(); MAX_COMPONENT],
            pitch: [0; MAX_COMPONENT],
        }
    }
}

/// Declares [`Api`] and its symbol lookup from one list of `field: "symbol" = signature;`
/// (each entry point named once).
macro_rules! api {
    ($($field:ident: $name:literal = $ty:ty;)*) => {
        /// The loaded library and its entry points. The pointers are valid while `_lib` is
        /// loaded, i.e. for the life of this value.
        pub(crate) struct Api {
            $(pub(crate) $field: $ty,)*
            _lib: Library,
        }

        impl Api {
            /// Resolves every symbol of `lib` and keeps `lib` loaded with them.
            fn resolve(lib: Library) -> Result<Api, String> {
                Ok(Api {
                    $(
                        // SAFETY: the symbol has the C signature of `nvjpeg.h` that the
                        // field's type spells, and is used only while `lib` is loaded (it is
                        // stored with it).
                        $field: *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                            .map_err(|e| format!("{}: {e}", $name))?,
                    )*
                    _lib: lib,
                })
            }
        }
    };
}

api! {
    get_property: "nvjpegGetProperty" = unsafe extern "C" fn(c_int, *mut c_int) -> Status;
    create_simple: "nvjpegCreateSimple" = unsafe extern "C" fn(*mut Handle) -> Status;
    destroy: "nvjpegDestroy" = unsafe extern "C" fn(Handle) -> Status;
    state_create: "nvjpegJpegStateCreate" = unsafe extern "C" fn(Handle, *mut State) -> Status;
    state_destroy: "nvjpegJpegStateDestroy" = unsafe extern "C" fn(State) -> Status;
    get_image_info: "nvjpegGetImageInfo" = unsafe extern "C" fn(
        Handle,
        *const c_uchar,
        usize,
        *mut c_int,
        *mut c_int,
        *mut c_int,
        *mut c_int,
    ) -> Status;
    decode: "nvjpegDecode" = unsafe extern "C" fn(
        Handle,
        State,
        *const c_uchar,
        usize,
        c_int,
        *mut Image,
        Stream,
    ) -> Status;
    decode_batched_initialize: "nvjpegDecodeBatchedInitialize" =
        unsafe extern "C" fn(Handle, State, c_int, c_int, c_int) -> Status;
    decode_batched: "nvjpegDecodeBatched" = unsafe extern "C" fn(
        Handle,
        State,
        *const *const c_uchar,
        *const usize,
        *mut Image,
        Stream,
    ) -> Status;
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("nvjpeg::Api").finish_non_exhaustive()
    }
}

impl Api {
    /// dlopens `path` (a file path, or a bare soname searched on the library path) and
    /// resolves every symbol.
    pub(crate) fn load(path: &Path) -> Result<Api, String> {
        // SAFETY: loading libnvjpeg runs its initializers, which have no preconditions; the
        // library stays loaded while the `Api` (which owns it) lives.
        let lib = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
        Api::resolve(lib)
    }
}
