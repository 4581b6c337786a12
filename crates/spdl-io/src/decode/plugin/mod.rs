//! Decoder plugins loaded at run time from a shared library, so that the `spdl` command and
//! the Python module can use a third party's decoder without being rebuilt.
//!
//! A Rust [`Decoder`](super::Decoder) trait object cannot cross a shared-library boundary
//! (Rust has no stable ABI), so a plugin exports a C table of functions, version
//! [`ABI_VERSION`]: the plugin crate implements [`Decoder`](super::Decoder) as usual, builds
//! as a `cdylib`, and calls [`export_decoder_plugin!`](crate::export_decoder_plugin) once; the
//! host calls `load` (feature `decoder-plugins`) with the library's path, which registers
//! the decoder for every [`Registry::with_defaults`](super::Registry::with_defaults) made
//! afterwards. Panics inside the plugin are caught on its side of the boundary and become
//! [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) errors carrying the panic's message; a
//! plugin built with `panic = "abort"` is refused at load (its panics cannot be caught). Every
//! header a plugin reports is checked like a built-in decoder's before anything is allocated
//! (sizes, 1 to 4 channels, 8 or 16 bits).
//!
//! `examples/decoder-plugin-pnm` in the repository is a complete plugin.

mod abi;
#[cfg(feature = "decoder-plugins")]
mod host;

pub use abi::{
    Exported, RawDecodeOptions, RawDecoder, RawError, RawImageInfo, ABI_VERSION,
    PANIC_ABORT_SYMBOL, SYMBOL,
};
#[cfg(feature = "decoder-plugins")]
pub use host::load;
