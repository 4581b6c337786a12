//! SPDL's decoding API in `spdl_rs.io`: `decode_packets`, `Decoder` (streaming decode +
//! `flush`), `sample_decode_video` (`DecodeConfig` lives in `media_config`). Built with the
//! `decode-ffmpeg` feature only.

use std::sync::Mutex;

use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

use spdl_io::ffmpeg::decoder;
use spdl_io::ffmpeg::frames::MediaKind;
use spdl_io::ffmpeg::packets::{Codec, Packets};

use crate::error::io_err;
use crate::lock;
use crate::media_demux::{codec_of, packets_of, take_packets};
use crate::media_frames::frames_to_py;

/// What SPDL's `filter_desc` default (`_FILTER_DESC_DEFAULT`) is spelled as: the default
/// conversion of the codec's kind (see [`default_filter`]).
pub(crate) const FILTER_DESC_DEFAULT: &str = "__PLACEHOLDER__";

/// SPDL's default filter for a codec kind: RGB pictures, planar float audio.
fn default_filter(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Audio => "aformat=sample_fmts=fltp",
        MediaKind::Video | MediaKind::Image => "format=pix_fmts=rgb24",
    }
}

/// The filter description to use: `None` (no filter), the default, or the user's.
fn resolve_filter(desc: Option<&str>, kind: MediaKind) -> Option<String> {
    match desc {
        None => None,
        Some(FILTER_DESC_DEFAULT) => Some(default_filter(kind).to_owned()),
        Some(d) => Some(d.to_owned()),
    }
}

fn limit_of(num_frames: i64) -> PyResult<Option<usize>> {
    match num_frames {
        n if n < 0 => Ok(None),
        n => Ok(Some(n as usize)),
    }
}

/// SPDL's `decode_packets(packets, filter_desc=<default>, decode_config=None, *,
/// num_frames=-1)`: decodes `VideoPackets` / `AudioPackets` / `ImagePackets` into
/// `VideoFrames` / `AudioFrames` / `ImageFrames`, with the GIL released. Only the frames inside
/// the packets' time window are kept (audio cut at the sample), at most `num_frames` (`-1`:
/// all). `filter_desc`: an FFmpeg filter string run on the decoded frames (as `ffmpeg -vf` /
/// `-af`); the default converts to `rgb24` (pictures) or `fltp` (audio); `None` keeps the
/// decoder's format.
///
/// Raises `ValueError` naming the source for undecodable data, a bad filter string or decoder
/// config; `TypeError` for other objects.
#[pyfunction]
#[pyo3(signature = (packets, filter_desc=FILTER_DESC_DEFAULT, decode_config=None, *, num_frames=-1))]
pub(crate) fn decode_packets(
    py: Python<'_>,
    packets: &Bound<'_, PyAny>,
    filter_desc: Option<&str>,
    decode_config: Option<&Bound<'_, PyAny>>,
    num_frames: i64,
) -> PyResult<Py<PyAny>> {
    let p = take_packets(packets)?;
    let cfg = crate::media_config::decode_config_of(decode_config)?;
    let desc = resolve_filter(filter_desc, p.kind());
    let limit = limit_of(num_frames)?;
    let f = py
        .detach(|| decoder::decode_packets(&p, desc.as_deref(), &cfg, limit))
        .map_err(io_err)?;
    frames_to_py(py, f)
}

/// SPDL's `sample_decode_video(packets, indices, *, decode_config=None,
/// filter_desc=<default>)`: the frames at `indices` (presentation order, from 0, within the
/// packets' window) as a list of `ImageFrames`; as SPDL, only the runs of packets from the key
/// frame before each wanted frame are decoded (up to the last wanted frame of the run);
/// `indices` may repeat and come in any order. Raises `IndexError` for an index past
/// `len(packets)`, `ValueError` as `decode_packets`.
#[pyfunction]
#[pyo3(signature = (packets, indices, *, decode_config=None, filter_desc=FILTER_DESC_DEFAULT))]
pub(crate) fn sample_decode_video(
    py: Python<'_>,
    packets: &Bound<'_, PyAny>,
    indices: Vec<i64>,
    decode_config: Option<&Bound<'_, PyAny>>,
    filter_desc: Option<&str>,
) -> PyResult<Py<PyList>> {
    let p = packets_of(packets)?;
    if p.kind() != MediaKind::Video {
        return Err(PyTypeError::new_err(
            "sample_decode_video expects VideoPackets",
        ));
    }
    let idx: Vec<usize> = indices
        .iter()
        .map(|&i| {
            usize::try_from(i)
                .map_err(|_| PyValueError::new_err(format!("frame indices must be >= 0, got {i}")))
        })
        .collect::<PyResult<_>>()?;
    if let Some(&i) = idx.iter().find(|&&i| i >= p.num_in_window()) {
        return Err(PyIndexError::new_err(format!(
            "{}: frame index {i} out of range: the packets hold {} frames",
            p.key(),
            p.num_in_window()
        )));
    }
    let cfg = crate::media_config::decode_config_of(decode_config)?;
    let desc = resolve_filter(filter_desc, MediaKind::Video);
    let frames = py
        .detach(|| decoder::sample_decode_video(&p, &idx, desc.as_deref(), &cfg))
        .map_err(io_err)?;
    let out = PyList::empty(py);
    for one in frames {
        out.append(frames_to_py(py, one)?)?;
    }
    Ok(out.unbind())
}

/// A decoder for the packets of one stream, as SPDL's `spdl.io.Decoder(codec, *,
/// filter_desc=<default>, decode_config=None)` (its `VideoDecoder` / `AudioDecoder`):
///
/// - `decode(packets)` -> the frames these packets give so far (a decoder keeps a few back
///   for reordering), possibly empty;
/// - `streaming_decode_packets(packets)` -> an iterator of frame objects (SPDL's form of
///   `decode`: one non-empty frames object, or nothing);
/// - `flush()` -> an iterator of the frames still held (call once, at the end).
///
/// `spdl_rs.io.Decoder(codec, ...)` makes the subclass of the codec's kind, as SPDL does:
/// [`VideoDecoder`] for a `VideoCodec`, [`AudioDecoder`] for an `AudioCodec` (this base class
/// for an `ImageCodec`).
///
/// `filter_desc` as `decode_packets`; decoding runs with the GIL released. Memory stays
/// bounded by the chunk size however long the stream. Raises `ValueError` naming the source
/// for undecodable data, bad filters or configs, or a `decode` after `flush`.
#[pyclass(frozen, subclass, module = "spdl_rs.io", name = "Decoder")]
pub(crate) struct Decoder {
    inner: Mutex<decoder::Decoder>,
    kind: MediaKind,
}

impl Decoder {
    fn run(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut decoder::Decoder) -> spdl_io::Result<spdl_io::ffmpeg::frames::Frames> + Send,
    ) -> PyResult<Option<Py<PyAny>>> {
        let frames = py.detach(|| f(&mut lock(&self.inner))).map_err(io_err)?;
        if frames.is_empty() {
            return Ok(None);
        }
        frames_to_py(py, frames).map(Some)
    }

    fn check_kind(&self, p: &Packets) -> PyResult<()> {
        if p.kind() != self.kind {
            return Err(PyTypeError::new_err(format!(
                "this decoder takes {} packets, got {} packets",
                self.kind.name(),
                p.kind().name()
            )));
        }
        Ok(())
    }
}

fn iter_of(py: Python<'_>, item: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
    let list = PyList::empty(py);
    if let Some(i) = item {
        list.append(i)?;
    }
    Ok(list.try_iter()?.into_any().unbind())
}

/// The `#[pymethods]` of a decoder class: `$class(codec, *, filter_desc=<default>,
/// decode_config=None)` made by `body` (with the codec read as `c`, the arguments under the
/// names given), then the class's own methods.
macro_rules! decoder_pymethods {
    (
        impl $class:ty, new -> $ret:ty,
        |$c:ident, $codec:ident, $filter_desc:ident, $decode_config:ident| $body:block
        { $($own:tt)* }
    ) => {
        #[pymethods]
        impl $class {
            #[new]
            #[pyo3(signature = (codec, *, filter_desc=FILTER_DESC_DEFAULT, decode_config=None))]
            fn new(
                $codec: &Bound<'_, PyAny>,
                $filter_desc: Option<&str>,
                $decode_config: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<$ret> {
                let $c: Codec = codec_of($codec)?;
                $body
            }

            $($own)*
        }
    };
}

decoder_pymethods! {
impl Decoder, new -> Self, |c, codec, filter_desc, decode_config| {
    let cfg = crate::media_config::decode_config_of(decode_config)?;
    let desc = resolve_filter(filter_desc, c.kind());
    let d = decoder::Decoder::new(&c, desc.as_deref(), &cfg).map_err(io_err)?;
    Ok(Decoder {
        inner: Mutex::new(d),
        kind: c.kind(),
    })
}
{

    /// The frames `packets` give so far (an empty frames object when none yet).
    fn decode(&self, py: Python<'_>, packets: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let p = take_packets(packets)?;
        self.check_kind(&p)?;
        let frames = py.detach(|| lock(&self.inner).decode(&p)).map_err(io_err)?;
        frames_to_py(py, frames)
    }

    /// An iterator over the frames `packets` give so far.
    fn streaming_decode_packets(
        &self,
        py: Python<'_>,
        packets: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let p = take_packets(packets)?;
        self.check_kind(&p)?;
        let out = self.run(py, |d| d.decode(&p))?;
        iter_of(py, out)
    }

    /// An iterator over the frames the decoder (and filter) still held.
    fn flush(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let out = self.run(py, decoder::Decoder::flush)?;
        iter_of(py, out)
    }
}
}

/// Declares `$class`, SPDL's decoder of `$kind` packets: a [`Decoder`] subclass
/// (`streaming_decode_packets`, `flush`, `decode` inherited) made as `$class(codec, *,
/// filter_desc=<default>, decode_config=None)`, which raises `TypeError` "a $class needs a
/// <kind> codec, got a <kind> codec" for a codec of another kind.
macro_rules! typed_decoder {
    ($(#[$doc:meta])* $class:ident, $kind:expr) => {
        $(#[$doc])*
        #[pyclass(frozen, extends = Decoder, module = "spdl_rs.io")]
        pub(crate) struct $class;

        decoder_pymethods! {
            impl $class, new -> PyClassInitializer<Self>,
            |c, codec, filter_desc, decode_config| {
                if c.kind() != $kind {
                    return Err(PyTypeError::new_err(format!(
                        concat!("a ", stringify!($class), " needs a {} codec, got a {} codec"),
                        $kind.name(),
                        c.kind().name()
                    )));
                }
                let d = Decoder::new(codec, filter_desc, decode_config)?;
                Ok(PyClassInitializer::from(d).add_subclass($class))
            }
            {}
        }
    };
}

typed_decoder!(
    /// SPDL's `spdl.io.VideoDecoder`: a [`Decoder`] of video packets (`streaming_decode_packets`,
    /// `flush`, `decode` inherited). `VideoDecoder(codec, *, filter_desc=<default>,
    /// decode_config=None)`; `TypeError` for a codec that is not video.
    VideoDecoder,
    MediaKind::Video
);

typed_decoder!(
    /// SPDL's `spdl.io.AudioDecoder`: a [`Decoder`] of audio packets. `AudioDecoder(codec, *,
    /// filter_desc=<default>, decode_config=None)`; `TypeError` for a codec that is not audio.
    AudioDecoder,
    MediaKind::Audio
);
