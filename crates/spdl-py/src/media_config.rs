//! SPDL's demuxer and decoder settings in `spdl_rs.io`: `DemuxConfig` / `demux_config` and
//! `DecodeConfig` / `decode_config`, taken by the packet API (`Demuxer`, `decode_packets`,
//! `Decoder`), the one-call loaders (`load_video`, `load_audio`) and the native stages
//! (`spdl_rs.ops.load_video`, ...). Built with the `decode-ffmpeg` feature only.

use std::collections::HashMap;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::error::type_name;

/// How a container is opened, as SPDL's `spdl.io.DemuxConfig` (made by `demux_config`):
/// `format` forces a container format (`ffmpeg -demuxers` name) instead of probing,
/// `format_options` are demuxer options (e.g. `{"video_size": "64x48"}` for `rawvideo`; one no
/// demuxer takes raises `ValueError`), `buffer_size` is the I/O buffer in bytes.
#[pyclass(frozen, module = "spdl_rs.io", name = "DemuxConfig")]
#[derive(Clone)]
pub(crate) struct DemuxConfig {
    pub(crate) inner: spdl_io::ffmpeg::DemuxConfig,
}

#[pymethods]
impl DemuxConfig {
    #[new]
    #[pyo3(signature = (format=None, format_options=None, buffer_size=8096))]
    fn new(
        format: Option<String>,
        format_options: Option<HashMap<String, String>>,
        buffer_size: i64,
    ) -> PyResult<Self> {
        let buffer_size = usize::try_from(buffer_size)
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                PyValueError::new_err(format!("buffer_size must be > 0, got {buffer_size}"))
            })?;
        let mut opts: Vec<(String, String)> =
            format_options.unwrap_or_default().into_iter().collect();
        opts.sort();
        Ok(DemuxConfig {
            inner: spdl_io::ffmpeg::DemuxConfig {
                format,
                format_options: opts,
                buffer_size,
            },
        })
    }

    /// Pickles as the call that made it (so native stages holding one cross processes).
    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> (
        Bound<'py, pyo3::types::PyType>,
        (Option<String>, HashMap<String, String>, usize),
    ) {
        let c = &slf.get().inner;
        let opts = c.format_options.iter().cloned().collect();
        (slf.get_type(), (c.format.clone(), opts, c.buffer_size))
    }

    fn __repr__(&self) -> String {
        format!(
            "DemuxConfig(format={:?}, format_options={:?}, buffer_size={})",
            self.inner.format, self.inner.format_options, self.inner.buffer_size
        )
    }
}

/// SPDL's `demux_config(format=None, format_options=None, buffer_size=8096)`.
#[pyfunction]
#[pyo3(signature = (format=None, format_options=None, buffer_size=8096))]
pub(crate) fn demux_config(
    format: Option<String>,
    format_options: Option<HashMap<String, String>>,
    buffer_size: i64,
) -> PyResult<DemuxConfig> {
    DemuxConfig::new(format, format_options, buffer_size)
}

/// The settings of a `demux_config=` argument: the defaults for `None`; `TypeError` for
/// anything but a `DemuxConfig`.
pub(crate) fn demux_config_of(
    c: Option<&Bound<'_, PyAny>>,
) -> PyResult<spdl_io::ffmpeg::DemuxConfig> {
    settings_of(c, "demux_config", "DemuxConfig", |d: &DemuxConfig| &d.inner)
}

/// How packets are decoded, as SPDL's `spdl.io.DecodeConfig` (made by `decode_config`):
/// `decoder` picks a decoder by name (`ffmpeg -decoders`; unknown: `ValueError`),
/// `decoder_options` are its options (e.g. `{"threads": "4"}`; one it does not take raises
/// `ValueError`).
#[pyclass(frozen, module = "spdl_rs.io", name = "DecodeConfig")]
#[derive(Clone)]
pub(crate) struct DecodeConfig {
    inner: spdl_io::ffmpeg::DecodeConfig,
}

#[pymethods]
impl DecodeConfig {
    #[new]
    #[pyo3(signature = (decoder=None, decoder_options=None))]
    fn new(decoder: Option<String>, decoder_options: Option<HashMap<String, String>>) -> Self {
        let mut opts: Vec<(String, String)> =
            decoder_options.unwrap_or_default().into_iter().collect();
        opts.sort();
        DecodeConfig {
            inner: spdl_io::ffmpeg::DecodeConfig {
                decoder,
                decoder_options: opts,
            },
        }
    }

    /// Pickles as the call that made it (so native stages holding one cross processes).
    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> (
        Bound<'py, pyo3::types::PyType>,
        (Option<String>, HashMap<String, String>),
    ) {
        let c = &slf.get().inner;
        let opts = c.decoder_options.iter().cloned().collect();
        (slf.get_type(), (c.decoder.clone(), opts))
    }

    fn __repr__(&self) -> String {
        format!(
            "DecodeConfig(decoder={:?}, decoder_options={:?})",
            self.inner.decoder, self.inner.decoder_options
        )
    }
}

/// SPDL's `decode_config(decoder=None, decoder_options=None)`.
#[pyfunction]
#[pyo3(signature = (decoder=None, decoder_options=None))]
pub(crate) fn decode_config(
    decoder: Option<String>,
    decoder_options: Option<HashMap<String, String>>,
) -> DecodeConfig {
    DecodeConfig::new(decoder, decoder_options)
}

/// The settings of a `decode_config=` argument: the defaults for `None`; `TypeError` for
/// anything but a `DecodeConfig`.
pub(crate) fn decode_config_of(
    c: Option<&Bound<'_, PyAny>>,
) -> PyResult<spdl_io::ffmpeg::DecodeConfig> {
    settings_of(c, "decode_config", "DecodeConfig", |d: &DecodeConfig| {
        &d.inner
    })
}

/// The settings held by `c`, an optional `class` object (from `what()`): the default settings
/// for `None`, `TypeError` `"<what> must be a <class> (from <what>()), got <type>"` for any
/// other object.
fn settings_of<T, C>(
    c: Option<&Bound<'_, PyAny>>,
    what: &str,
    class: &str,
    inner: impl FnOnce(&T) -> &C,
) -> PyResult<C>
where
    T: pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync,
    C: Default + Clone,
{
    let Some(c) = c.filter(|c| !c.is_none()) else {
        return Ok(C::default());
    };
    let held = c.cast::<T>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a {class} (from {what}()), got {}",
            type_name(c)
        ))
    })?;
    Ok(inner(held.get()).clone())
}
