//! The decoder registry: picks a decoder by magic bytes, never by extension.

use std::sync::{Arc, PoisonError, RwLock};

use super::{describe_unknown, sniff, DecodeOptions, Decoder, ImageFormat, Region};
use super::{Image, ImageInfo};
use crate::error::{Error, ErrorKind, Result};

/// Decoders added for the whole process (see [`register_global`]).
static GLOBAL: RwLock<Vec<Arc<dyn Decoder>>> = RwLock::new(Vec::new());

/// Adds `decoder` to every [`Registry::with_defaults`] made from now on, ahead of the
/// built-in decoders, so that code which builds its own registry (the `spdl` command, the
/// Python module, [`ImageLoader`](crate::ImageLoader)) picks it by content too. Decoder
/// plugins loaded from a shared library arrive here (`decode::plugin::load`).
pub fn register_global(decoder: Arc<dyn Decoder>) {
    GLOBAL
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .push(decoder);
}

/// An ordered set of decoders. The most recently registered decoder whose
/// [`Decoder::matches`] accepts the bytes wins, so a third-party decoder
/// registered after [`Registry::with_defaults`] overrides a built-in one.
///
/// ```
/// use spdl_io::{DecodeOptions, ErrorKind, Registry};
///
/// let registry = Registry::with_defaults(); // the built-in decoders of this build
/// // Decoders are chosen by content, never by the name; an error names the sample.
/// let err = registry.decode("a.jpg", b"<html>503</html>", &DecodeOptions::default());
/// let err = err.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::UnknownFormat);
/// assert!(err.to_string().contains("a.jpg"), "{err}");
/// assert!(!registry.names().is_empty());
/// ```
///
/// `docs/decoder-plugin.md` in the repository registers a decoder of its own.
#[derive(Clone, Default)]
pub struct Registry {
    decoders: Vec<Arc<dyn Decoder>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.decoders.iter().map(|d| d.name()))
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in decoders of the enabled features: image-rs (all its
    /// formats), then libjpeg-turbo, which takes JPEG over image-rs; then the
    /// decoders given to [`register_global`] (plugins), which take precedence.
    pub fn with_defaults() -> Self {
        #[allow(unused_mut)]
        let mut r = Self::new();
        #[cfg(feature = "image-rs")]
        r.register(Arc::new(super::ImageRsDecoder::new()));
        #[cfg(feature = "decode-turbojpeg")]
        r.register(Arc::new(super::TurboJpegDecoder::new()));
        let globals = GLOBAL.read().unwrap_or_else(PoisonError::into_inner);
        r.decoders.extend(globals.iter().cloned());
        r
    }

    /// Adds a decoder; it takes precedence over those registered before.
    pub fn register(&mut self, decoder: Arc<dyn Decoder>) -> &mut Self {
        self.decoders.push(decoder);
        self
    }

    /// The [`Decoder::extensions`] of every registered decoder, sorted, without repeats.
    pub fn extensions(&self) -> Vec<String> {
        let mut all: Vec<String> = self.decoders.iter().flat_map(|d| d.extensions()).collect();
        all.sort();
        all.dedup();
        all
    }

    /// Names of the registered decoders, highest precedence first.
    pub fn names(&self) -> Vec<&str> {
        self.decoders.iter().rev().map(|d| d.name()).collect()
    }

    /// The decoder for `bytes`.
    ///
    /// # Errors
    /// [`ErrorKind::Empty`] for 0 bytes, [`ErrorKind::UnknownFormat`] when
    /// nothing recognises the content, [`ErrorKind::Unsupported`] for a known
    /// format without a registered decoder ("content is WebP, not JPEG; no
    /// decoder for WebP"). The error names `key`.
    pub fn decoder_for(&self, key: &str, bytes: &[u8]) -> Result<&dyn Decoder> {
        if bytes.is_empty() {
            return Err(Error::new(ErrorKind::Empty, "empty file (0 bytes)").with_key(key));
        }
        if let Some(d) = self.decoders.iter().rev().find(|d| d.matches(bytes)) {
            return Ok(d.as_ref());
        }
        let format = sniff(bytes);
        let err = if format == ImageFormat::Unknown {
            Error::new(ErrorKind::UnknownFormat, describe_unknown(bytes))
        } else {
            Error::new(
                ErrorKind::Unsupported,
                format!(
                    "content is {format}{}; no decoder registered for {format}",
                    mislabel(key, format)
                ),
            )
        };
        Err(err.with_key(key))
    }

    /// Reads the header of `bytes` (see [`Decoder::probe`]); errors name `key`.
    ///
    /// # Errors
    /// As [`Registry::decoder_for`] and [`Decoder::probe`].
    pub fn probe(&self, key: &str, bytes: &[u8]) -> Result<ImageInfo> {
        let d = self.decoder_for(key, bytes)?;
        d.probe(bytes).map_err(|e| annotate(e, key, bytes))
    }

    /// Decodes `bytes` to an owned image (see [`Decoder::decode`]); errors name `key`.
    ///
    /// # Errors
    /// As [`Registry::decoder_for`] and [`Decoder::decode`].
    pub fn decode(&self, key: &str, bytes: &[u8], opts: &DecodeOptions) -> Result<Image> {
        let d = self.decoder_for(key, bytes)?;
        d.decode(bytes, opts).map_err(|e| annotate(e, key, bytes))
    }

    /// Decodes into a caller buffer (see [`Decoder::decode_into`]); errors name `key`.
    ///
    /// # Errors
    /// As [`Registry::decoder_for`] and [`Decoder::decode_into`].
    pub fn decode_into(
        &self,
        key: &str,
        bytes: &[u8],
        opts: &DecodeOptions,
        out: &mut [u8],
    ) -> Result<ImageInfo> {
        let d = self.decoder_for(key, bytes)?;
        d.decode_into(bytes, opts, out)
            .map_err(|e| annotate(e, key, bytes))
    }

    /// Decodes only `region` (see [`Decoder::decode_region`]); errors name `key`.
    ///
    /// # Errors
    /// As [`Registry::decoder_for`] and [`Decoder::decode_region`].
    pub fn decode_region(
        &self,
        key: &str,
        bytes: &[u8],
        opts: &DecodeOptions,
        region: Region,
    ) -> Result<Image> {
        let d = self.decoder_for(key, bytes)?;
        d.decode_region(bytes, opts, region)
            .map_err(|e| annotate(e, key, bytes))
    }
}

/// `" (file extension says JPEG)"` when the key's extension disagrees with the content.
fn mislabel(key: &str, content: ImageFormat) -> String {
    let ext = key.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ImageFormat::from_extension(ext) {
        Some(claimed) if claimed != content => format!(", not {claimed}"),
        _ => String::new(),
    }
}

/// Adds the key, and the real format when the extension lies.
fn annotate(e: Error, key: &str, bytes: &[u8]) -> Error {
    let hint = mislabel(key, sniff(bytes));
    if hint.is_empty() || !e.key().is_empty() {
        return e.with_key(key);
    }
    let kind = e.kind();
    let msg = format!("{} (content is {}{hint})", e.message(), sniff(bytes));
    Error::new(kind, msg).with_source(e).with_key(key)
}
