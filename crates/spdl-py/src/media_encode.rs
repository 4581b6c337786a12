//! SPDL's encoding API in `spdl_rs.io`: `video_encode_config` / `audio_encode_config` (and
//! their classes), `Muxer` (`add_encode_stream`, `add_remux_stream`, `open`, `write`, `flush`,
//! `close`), the encoders (`VideoEncoder` / `AudioEncoder`: `encode`, `flush`, `frame_size`)
//! and `encode_image`. Built with the `decode-ffmpeg` feature only.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use spdl_io::ffmpeg::encode;

use crate::error::{io_err, type_name};
use crate::lock;
use crate::media_demux::{codec_of, codec_to_py, none_if_empty, packets_of};
use crate::media_frames::take_frames;

/// Video encoder settings, as SPDL's `spdl.io.VideoEncodeConfig` (from `video_encode_config`).
#[pyclass(frozen, module = "spdl_rs.io", name = "VideoEncodeConfig")]
pub(crate) struct VideoEncodeConfig {
    inner: encode::VideoEncodeConfig,
}

/// Audio encoder settings, as SPDL's `spdl.io.AudioEncodeConfig` (from `audio_encode_config`).
#[pyclass(frozen, module = "spdl_rs.io", name = "AudioEncodeConfig")]
pub(crate) struct AudioEncodeConfig {
    inner: encode::AudioEncodeConfig,
}

#[pymethods]
impl VideoEncodeConfig {
    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

#[pymethods]
impl AudioEncodeConfig {
    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

fn i32_of(name: &str, v: i64) -> PyResult<i32> {
    i32::try_from(v).map_err(|_| PyValueError::new_err(format!("{name} out of range: {v}")))
}

/// The keywords both encode configs take; `ValueError` naming one outside FFmpeg's `int`.
fn rate_control(
    bit_rate: i64,
    compression_level: i64,
    qscale: i64,
) -> PyResult<encode::RateControl> {
    Ok(encode::RateControl {
        bit_rate,
        compression_level: i32_of("compression_level", compression_level)?,
        qscale: i32_of("qscale", qscale)?,
    })
}

/// SPDL's `video_encode_config(*, height, width, frame_rate=None, pix_fmt=None, bit_rate=-1,
/// compression_level=-1, qscale=-1, gop_size=-1, max_b_frames=-1, colorspace=None,
/// color_primaries=None, color_trc=None)`: `-1` / `None` keep FFmpeg's default; `pix_fmt` is
/// the encoder's format (frames of another format are converted); the colour names are
/// FFmpeg's (`"bt709"`, ...; unknown ones raise `ValueError` when the encoder opens).
#[pyfunction]
#[pyo3(signature = (*, height, width, frame_rate=None, pix_fmt=None, bit_rate=-1, compression_level=-1, qscale=-1, gop_size=-1, max_b_frames=-1, colorspace=None, color_primaries=None, color_trc=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn video_encode_config(
    height: u32,
    width: u32,
    frame_rate: Option<(i32, i32)>,
    pix_fmt: Option<String>,
    bit_rate: i64,
    compression_level: i64,
    qscale: i64,
    gop_size: i64,
    max_b_frames: i64,
    colorspace: Option<String>,
    color_primaries: Option<String>,
    color_trc: Option<String>,
) -> PyResult<VideoEncodeConfig> {
    Ok(VideoEncodeConfig {
        inner: encode::VideoEncodeConfig {
            width,
            height,
            frame_rate,
            pix_fmt,
            rate: rate_control(bit_rate, compression_level, qscale)?,
            gop_size: i32_of("gop_size", gop_size)?,
            max_b_frames: i32_of("max_b_frames", max_b_frames)?,
            colorspace,
            color_primaries,
            color_trc,
        },
    })
}

/// SPDL's `audio_encode_config(*, num_channels, sample_fmt=None, sample_rate=None,
/// bit_rate=-1, compression_level=-1, qscale=-1)`.
#[pyfunction]
#[pyo3(signature = (*, num_channels, sample_fmt=None, sample_rate=None, bit_rate=-1, compression_level=-1, qscale=-1))]
pub(crate) fn audio_encode_config(
    num_channels: usize,
    sample_fmt: Option<String>,
    sample_rate: Option<u32>,
    bit_rate: i64,
    compression_level: i64,
    qscale: i64,
) -> PyResult<AudioEncodeConfig> {
    Ok(AudioEncodeConfig {
        inner: encode::AudioEncodeConfig {
            num_channels,
            sample_fmt,
            sample_rate,
            rate: rate_control(bit_rate, compression_level, qscale)?,
        },
    })
}

fn options(d: Option<HashMap<String, String>>) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = d.unwrap_or_default().into_iter().collect();
    v.sort();
    v
}

/// An encoder from `Muxer.add_encode_stream`, as SPDL's `VideoEncoder` / `AudioEncoder`:
/// `encode(frames)` -> the packets ready so far (or `None`), `flush()` -> the rest (or `None`),
/// `frame_size` (audio: samples per frame the encoder wants; 0 for any), `codec`. Write the
/// packets with `Muxer.write(index, packets)`. `add_encode_stream` returns the subclass of
/// the stream's kind, as SPDL: [`VideoEncoder`] or [`AudioEncoder`].
#[pyclass(frozen, subclass, module = "spdl_rs.io", name = "Encoder")]
pub(crate) struct Encoder {
    inner: Mutex<encode::Encoder>,
}

#[pymethods]
impl Encoder {
    /// Encodes `frames`; the packets ready so far, or `None`. `ValueError` for frames the
    /// encoder cannot take. Takes `frames`, as SPDL's (using them again raises `TypeError`).
    fn encode(&self, py: Python<'_>, frames: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyAny>>> {
        let f = take_frames(frames)?;
        let p = py.detach(|| lock(&self.inner).encode(&f)).map_err(io_err)?;
        none_if_empty(py, p)
    }

    /// Ends the stream: the packets still held, or `None`.
    fn flush(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let p = py.detach(|| lock(&self.inner).flush()).map_err(io_err)?;
        none_if_empty(py, p)
    }

    /// Audio: samples per frame the encoder wants (0: any size).
    #[getter]
    fn frame_size(&self) -> usize {
        lock(&self.inner).frame_size()
    }

    /// The codec of the encoded packets.
    #[getter]
    fn codec(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let c = lock(&self.inner).codec().clone();
        codec_to_py(py, c)
    }
}

/// SPDL's `spdl.io.VideoEncoder`: the [`Encoder`] `Muxer.add_encode_stream` returns for a
/// `video_encode_config` (not made directly).
#[pyclass(frozen, extends = Encoder, module = "spdl_rs.io", name = "VideoEncoder")]
pub(crate) struct VideoEncoder;

/// SPDL's `spdl.io.AudioEncoder`: the [`Encoder`] `Muxer.add_encode_stream` returns for an
/// `audio_encode_config` (not made directly).
#[pyclass(frozen, extends = Encoder, module = "spdl_rs.io", name = "AudioEncoder")]
pub(crate) struct AudioEncoder;

/// A container being written, as SPDL's `spdl.io.Muxer(dst, /, *, format=None)`: add
/// streams (`add_encode_stream(config, *, encoder=None, encoder_config=None)` -> an encoder;
/// `add_remux_stream(codec)` for demuxed packets), then `open(muxer_config=None)`,
/// `write(index, packets)`, and `close()` (`with muxer.open(): ...` flushes and closes).
/// Raises `ValueError` naming the file for an unknown format or encoder option, a bad stream
/// index, or writing before `open`.
#[pyclass(frozen, module = "spdl_rs.io", name = "Muxer")]
pub(crate) struct Muxer {
    inner: Mutex<encode::Muxer>,
}

impl Muxer {
    fn with<R>(&self, f: impl FnOnce(&mut encode::Muxer) -> spdl_io::Result<R>) -> PyResult<R> {
        f(&mut lock(&self.inner)).map_err(io_err)
    }
}

#[pymethods]
impl Muxer {
    #[new]
    #[pyo3(signature = (dst, /, *, format=None))]
    fn new(dst: PathBuf, format: Option<&str>) -> PyResult<Self> {
        let m = encode::Muxer::new(&dst, format).map_err(io_err)?;
        Ok(Muxer {
            inner: Mutex::new(m),
        })
    }

    /// Adds a stream encoded from frames; returns its encoder.
    #[pyo3(signature = (config, *, encoder=None, encoder_config=None))]
    fn add_encode_stream(
        &self,
        config: &Bound<'_, PyAny>,
        encoder: Option<&str>,
        encoder_config: Option<HashMap<String, String>>,
    ) -> PyResult<Py<PyAny>> {
        let py = config.py();
        let cfg = if let Ok(v) = config.cast::<VideoEncodeConfig>() {
            encode::EncodeConfig::Video(v.get().inner.clone())
        } else if let Ok(a) = config.cast::<AudioEncodeConfig>() {
            encode::EncodeConfig::Audio(a.get().inner.clone())
        } else {
            return Err(PyTypeError::new_err(format!(
                "config must come from video_encode_config() or audio_encode_config(), got {}",
                type_name(config)
            )));
        };
        let opts = options(encoder_config);
        let e = self.with(|m| m.add_encode_stream(&cfg, encoder, &opts))?;
        let base = PyClassInitializer::from(Encoder {
            inner: Mutex::new(e),
        });
        Ok(match cfg {
            encode::EncodeConfig::Video(_) => {
                Py::new(py, base.add_subclass(VideoEncoder))?.into_any()
            }
            encode::EncodeConfig::Audio(_) => {
                Py::new(py, base.add_subclass(AudioEncoder))?.into_any()
            }
        })
    }

    /// Adds a stream for packets written as they are (`codec` from a demuxer or packets).
    fn add_remux_stream(&self, codec: &Bound<'_, PyAny>) -> PyResult<()> {
        let c = codec_of(codec)?;
        self.with(|m| m.add_remux_stream(&c))
    }

    /// Writes the header (muxer options in `muxer_config`); returns the muxer.
    #[pyo3(signature = (muxer_config=None))]
    fn open(
        slf: Bound<'_, Self>,
        muxer_config: Option<HashMap<String, String>>,
    ) -> PyResult<Bound<'_, Self>> {
        let opts = options(muxer_config);
        slf.get().with(|m| m.open(&opts))?;
        Ok(slf)
    }

    /// Writes `packets` to stream `index` (in the order streams were added).
    fn write(&self, py: Python<'_>, index: usize, packets: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = packets_of(packets)?;
        py.detach(|| self.with(|m| m.write(index, &p)))
    }

    /// Writes what was buffered for interleaving.
    fn flush(&self) -> PyResult<()> {
        self.with(encode::Muxer::flush)
    }

    /// Writes the trailer and closes the file.
    fn close(&self) -> PyResult<()> {
        self.with(encode::Muxer::close)
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> PyResult<()> {
        self.with(encode::Muxer::flush)?;
        self.with(encode::Muxer::close)
    }
}

/// SPDL's `encode_image(path, data, pix_fmt="rgb24", *, encode_config=None)`: writes one
/// picture, format and encoder from the extension (`.png` lossless, `.jpg`, `.bmp`, ...).
/// `data`: a `uint8` array laid out as `convert_frames` gives `pix_fmt` (`[H, W, 3]` for
/// `rgb24` / `bgr24`, `[H, W, 1]` or `[H, W]` for `gray8`, `[3, H, W]` for `yuv444p`). Raises `ValueError`
/// for a shape that does not fit, an unknown extension or an unwritable path.
#[pyfunction]
#[pyo3(signature = (path, data, pix_fmt="rgb24", *, encode_config=None))]
pub(crate) fn encode_image(
    py: Python<'_>,
    path: PathBuf,
    data: &Bound<'_, PyAny>,
    pix_fmt: &str,
    encode_config: Option<&Bound<'_, VideoEncodeConfig>>,
) -> PyResult<()> {
    let buf = PyBuffer::<u8>::get(data)
        .map_err(|e| PyTypeError::new_err(format!("encode_image expects a uint8 array: {e}")))?;
    let bytes = buf.to_vec(py)?;
    let shape = buf.shape().to_vec();
    let cfg = encode_config.map(|c| c.get().inner.clone());
    py.detach(|| encode::encode_image(&path, &bytes, &shape, pix_fmt, cfg.as_ref()))
        .map_err(io_err)
}
