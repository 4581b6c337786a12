//! SPDL's demuxing API in `spdl_rs.io`: `Demuxer` (`demux_video` / `demux_audio` /
//! `demux_image`, `streaming_demux`, `has_audio`, codec and stream-index accessors), the
//! one-shot `demux_video` / `demux_audio` / `demux_image`, the packet classes
//! (`VideoPackets`, `AudioPackets`, `ImagePackets`: picklable), the codec classes
//! (`VideoCodec`, `AudioCodec`, `ImageCodec`) and `BSF` /
//! `apply_bsf`. Built with the `decode-ffmpeg` feature only.

use std::sync::{Arc, Mutex};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use spdl_io::ffmpeg::bsf;
use spdl_io::ffmpeg::demux::{self, StreamingDemux};
use spdl_io::ffmpeg::frames::MediaKind;
use spdl_io::ffmpeg::packets::{Codec, Packets};
use spdl_io::MediaSource;

use crate::error::io_err;
use crate::lock;
use crate::media::{extract_src, Src};
use crate::media_props::{media_classes, media_pymethods};

// ------------------------------------------------------------------ codecs

media_classes! {
    Codec;
    /// The codec of a video stream, as SPDL's `spdl.io.VideoCodec`: `name`, `width`, `height`,
    /// `pix_fmt`, `frame_rate` / `time_base` / `sample_aspect_ratio` as `(num, den)`, and
    /// (spdl_rs) `rotation` (display rotation in degrees counterclockwise, not applied by
    /// decoding).
    VideoCodec,
    /// The codec of an audio stream, as SPDL's `spdl.io.AudioCodec`: `name`, `sample_rate`,
    /// `num_channels`, `sample_fmt`, `time_base`, `channel_layout`.
    AudioCodec,
    /// The codec of an image, as SPDL's `spdl.io.ImageCodec`: `name`, `width`, `height`,
    /// `pix_fmt`, `time_base`, `sample_aspect_ratio`.
    ImageCodec;
    /// `c` as the codec object of its media kind.
    codec_to_py;
    /// The codec of a `VideoCodec` / `AudioCodec` / `ImageCodec`; `TypeError` otherwise.
    codec_of;
}

media_pymethods! {
    impl VideoCodec, Codec from |c| &c.inner,
    [name, width, height, pix_fmt, frame_rate, time_base, sample_aspect_ratio, rotation]
    repr [name, width, height, pix_fmt, frame_rate, time_base] {}
}

media_pymethods! {
    impl AudioCodec, Codec from |c| &c.inner,
    [name, sample_rate, num_channels, sample_fmt, time_base, channel_layout]
    repr [name, sample_rate, num_channels, sample_fmt] {}
}

media_pymethods! {
    impl ImageCodec, Codec from |c| &c.inner,
    [name, width, height, pix_fmt, time_base, sample_aspect_ratio]
    repr [name, width, height, pix_fmt] {}
}

// ------------------------------------------------------------------ packets

media_classes! {
    Arc<Packets>;
    /// Demuxed video packets with their codec, as SPDL's `spdl.io.VideoPackets`: `len()`,
    /// `timestamp` (the window they were demuxed for, or `None`), `codec` (`VideoCodec`),
    /// `pix_fmt` / `width` / `height` / `frame_rate`, `get_timestamps(*, raw=False)` (pts in
    /// seconds, or time-base units with `raw`, decode order), `clone()` (shares the data).
    /// Picklable (`pickle.dumps(packets)`, also `__getstate__` / `deserialize(bytes)`), to be
    /// decoded in another process.
    VideoPackets,
    /// Demuxed audio packets, as SPDL's `spdl.io.AudioPackets`: `len()`, `timestamp`, `codec`
    /// (`AudioCodec`), `sample_rate`, `num_channels`, `get_timestamps()`, `clone()`; picklable.
    AudioPackets,
    /// The packet of an image, as SPDL's `spdl.io.ImagePackets`: `codec` (`ImageCodec`),
    /// `pix_fmt`, `width`, `height`, `clone()`; picklable.
    ImagePackets;
    /// `p` as the packet object of its media kind.
    packets_to_py;
    /// The packets of a `VideoPackets` / `AudioPackets` / `ImagePackets`; `TypeError` otherwise
    /// (also once consumed).
    packets_of;
    /// As `packets_of`, and marks the object consumed (SPDL moves packets into
    /// `decode_packets`, `apply_bsf` and a `Decoder`: later calls raise `TypeError`).
    take_packets;
}

/// `p` as [`packets_to_py`] makes it, or `None` when it holds no packet (what a filter or
/// encoder returns when nothing came out yet).
pub(crate) fn none_if_empty(py: Python<'_>, p: Packets) -> PyResult<Option<Py<PyAny>>> {
    if p.is_empty() {
        return Ok(None);
    }
    packets_to_py(py, p).map(Some)
}

fn deserialize_as(py: Python<'_>, data: &[u8], kind: MediaKind) -> PyResult<Arc<Packets>> {
    let p = py.detach(|| Packets::deserialize(data)).map_err(io_err)?;
    check_kind(p, kind)
}

fn deserialize_view_as(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    kind: MediaKind,
) -> PyResult<Arc<Packets>> {
    let memory = crate::media_frames::buffer_memory(data, "deserialize_view")?;
    let p = py
        .detach(|| Packets::deserialize_view(Box::new(memory)))
        .map_err(io_err)?;
    check_kind(p, kind)
}

fn check_kind(p: Packets, kind: MediaKind) -> PyResult<Arc<Packets>> {
    if p.kind() != kind {
        return Err(PyValueError::new_err(format!(
            "the bytes hold {} packets, not {}",
            p.kind().name(),
            kind.name()
        )));
    }
    Ok(Arc::new(p))
}

fn reduce<'py>(slf: &Bound<'py, PyAny>, p: &Packets) -> PyResult<Bound<'py, PyTuple>> {
    let py = slf.py();
    let data = py.detach(|| p.serialize());
    let f = slf.get_type().getattr("deserialize")?;
    PyTuple::new(
        py,
        [f, PyTuple::new(py, [PyBytes::new(py, &data)])?.into_any()],
    )
}

/// SPDL 0.8.0's `repr` of packets: `VideoPackets<src="path:0", num_packets=25, pts=[0.000,
/// 0.960], timestamp=(0.0, 1.0), Codec=<...>>` (audio marks the last pts `~`; images show the
/// source and codec only).
fn packets_repr(name: &str, p: &Packets) -> String {
    let mut parts = Vec::new();
    if p.kind() == MediaKind::Image {
        parts.push(format!("src=\"{}\"", p.key()));
    } else {
        parts.push(format!("src=\"{}:{}\"", p.key(), p.stream_index()));
        let ts = p.timestamps(false);
        if let (Some(first), Some(last)) = (ts.first(), ts.last()) {
            let tilde = if p.kind() == MediaKind::Audio {
                "~"
            } else {
                ""
            };
            parts.push(format!("num_packets={}", ts.len()));
            parts.push(format!("pts=[{first:.3}, {last:.3}{tilde}]"));
        }
        if let Some((s, e)) = p.timestamp() {
            // Shortest form, `1` for 1.0: as SPDL (C++ fmt) prints the bounds.
            parts.push(format!("timestamp=({s}, {e})"));
        }
    }
    if p.codec_attached() {
        parts.push(codec_summary(p.codec()));
    }
    format!("{name}<{}>", parts.join(", "))
}

/// SPDL's `Codec=<...>` part of a packets `repr`.
fn codec_summary(c: &Codec) -> String {
    let mut p = vec![
        format!("bit_rate={}", c.bit_rate()),
        format!("bits_per_sample={}", c.bits_per_sample()),
        format!("codec=\"{}\"", c.name()),
    ];
    match c.kind() {
        MediaKind::Audio => {
            p.push(format!("sample_format=\"{}\"", c.format_name()));
            p.push(format!("sample_rate={}", c.sample_rate()));
            p.push(format!("num_channels={}", c.num_channels()));
        }
        kind => {
            p.push(format!("pixel_format=\"{}\"", c.format_name()));
            if kind == MediaKind::Video {
                let (n, d) = c.frame_rate();
                p.push(format!("frame_rate={n}/{d}"));
            }
            p.push(format!("width={}", c.width()));
            p.push(format!("height={}", c.height()));
        }
    }
    format!("Codec=<{}>", p.join(", "))
}

/// The methods of the packet class `$ty` of media kind `$kind`: its properties `[...]` (read
/// from the codec) and those every packet class has.
macro_rules! packets_class {
    ($ty:ident, $kind:expr, [$($prop:ident),*]) => {
        media_pymethods! {
            impl $ty, Codec from |p| p.inner.codec(), [$($prop),*] {
                /// The number of packets inside the demuxed window (all without one), as
                /// SPDL: the reference packets before the window's start are not counted.
                fn __len__(&self) -> usize {
                    self.inner.num_in_window()
                }

                /// The time window `(start, end)` in seconds the packets were demuxed for.
                #[getter]
                fn timestamp(&self) -> Option<(f64, f64)> {
                    self.inner.timestamp()
                }

                /// The codec object of the stream; `None` for the chunks of
                /// `streaming_demux` (as SPDL).
                #[getter]
                fn codec(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
                    if !self.inner.codec_attached() {
                        return Ok(None);
                    }
                    codec_to_py(py, self.inner.codec().clone()).map(Some)
                }

                /// Packet presentation timestamps in seconds, as SPDL: those inside the
                /// demuxed window (all without one) in display order; with `raw=True` every
                /// packet's, in decode order.
                #[pyo3(signature = (*, raw=false))]
                fn get_timestamps(&self, raw: bool) -> Vec<f64> {
                    self.inner.timestamps(raw)
                }

                /// A copy sharing the packet data (copying it for `deserialize_view`
                /// packets). `TypeError` once the packets were consumed.
                fn clone(&self) -> PyResult<Self> {
                    crate::media_props::check_live(stringify!($ty), &self.consumed, false)?;
                    Ok($ty {
                        inner: Arc::new((*self.inner).clone()),
                        consumed: Default::default(),
                    })
                }

                /// The packets as bytes (see `deserialize`).
                fn __getstate__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
                    let data = py.detach(|| self.inner.serialize());
                    PyBytes::new(py, &data)
                }

                /// Packets from `__getstate__`'s bytes (in this or another process; trusted
                /// input, as any pickle). `ValueError` for damaged bytes or another media type.
                #[staticmethod]
                fn deserialize(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
                    Ok($ty {
                        inner: deserialize_as(py, data, $kind)?,
                        consumed: Default::default(),
                    })
                }

                /// Packets from `__getstate__`'s bytes without a copy, as SPDL's
                /// `deserialize_view(memoryview)`: they point into `data` (any C-contiguous
                /// buffer), which they keep alive; it must not change while they live.
                /// `clone()` copies. `ValueError` as `deserialize`.
                #[staticmethod]
                fn deserialize_view(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
                    Ok($ty {
                        inner: deserialize_view_as(py, data, $kind)?,
                        consumed: Default::default(),
                    })
                }

                fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
                    let inner = Arc::clone(&slf.get().inner);
                    reduce(slf.as_any(), &inner)
                }

                fn __repr__(&self) -> String {
                    packets_repr(stringify!($ty), &self.inner)
                }
            }
        }
    };
}

packets_class!(
    VideoPackets,
    MediaKind::Video,
    [pix_fmt, width, height, frame_rate]
);
packets_class!(AudioPackets, MediaKind::Audio, [sample_rate, num_channels]);
packets_class!(ImagePackets, MediaKind::Image, [pix_fmt, width, height]);

// ------------------------------------------------------------------ demuxer

/// An owning source for a demuxer: a path, or the bytes (shared without a copy for `bytes`).
fn source(obj: &Bound<'_, PyAny>, name: Option<&str>) -> PyResult<MediaSource<'static>> {
    Ok(match extract_src(obj)? {
        Src::Path(p) => {
            crate::media::check_file(&p)?;
            match name {
                Some(n) => MediaSource::file_owned(p).named(n),
                None => MediaSource::file_owned(p),
            }
        }
        Src::Backed(b) => {
            let key = name.map_or_else(|| bytes_name(b.as_ptr()), str::to_owned);
            MediaSource::shared(key, Arc::from(&b[..]))
        }
        Src::Owned(v) => {
            let addr = PyBuffer::<u8>::get(obj).map_or(v.as_ptr(), |b| b.buf_ptr() as *const u8);
            let key = name.map_or_else(|| bytes_name(addr), str::to_owned);
            MediaSource::shared(key, Arc::from(v))
        }
    })
}

/// SPDL's name of in-memory data in errors and `repr`: `<Bytes: 0x...>`, the address of the
/// caller's buffer.
fn bytes_name(addr: *const u8) -> String {
    format!("<Bytes: {:#x}>", addr as usize)
}

/// A window bound in seconds: a number (`float`, `int`, `Fraction`, `Decimal`) or a string
/// `Fraction` reads (`"1/3"`, `"0.5"`), as SPDL's window values.
fn seconds_of(v: &Bound<'_, PyAny>) -> PyResult<f64> {
    if let Ok(x) = v.extract::<f64>() {
        return Ok(x);
    }
    let frac = v
        .py()
        .import("fractions")?
        .getattr("Fraction")?
        .call1((v,))
        .map_err(|e| {
            PyTypeError::new_err(format!(
                "a time window bound must be a number or a fraction string, got {}: {e}",
                crate::error::type_name(v)
            ))
        })?;
    frac.extract::<f64>()
}

fn window_of(w: Option<&Bound<'_, PyAny>>) -> PyResult<Option<(f64, f64)>> {
    match w {
        None => Ok(None),
        Some(w) if w.is_none() => Ok(None),
        Some(w) => {
            let (s, e): (Bound<'_, PyAny>, Bound<'_, PyAny>) = w.extract().map_err(|_| {
                PyTypeError::new_err("the time window must be a (start, end) pair of seconds")
            })?;
            Ok(Some((seconds_of(&s)?, seconds_of(&e)?)))
        }
    }
}

/// An open container, as SPDL's `spdl.io.Demuxer(src, *, demux_config=None, name=None)`.
/// `src`: a path or bytes-like (bytes are shared, other buffers copied); `name` names the
/// source in errors. Opening and every demux call run with the GIL released.
///
/// - `demux_video(window=None, *, bsf=None)` / `demux_audio(...)` / `demux_image(*, bsf=None)`
///   -> packets of the default stream (a window `(start, end)` in seconds: video from the key
///   frame at or before `start`; audio the packets overlapping it, cut exactly at decoding);
/// - `streaming_demux(indices=None, *, duration=-1, num_packets=-1)` -> an iterator of
///   chunks (exactly one of `duration` seconds / `num_packets` per chunk): packets of stream
///   `indices` (an int, or `None` for stream 0) or `{index: packets}` dicts (a list/set);
/// - `has_audio()`, `video_stream_index`, `audio_stream_index`, `video_codec`,
///   `audio_codec`, `image_codec`; a context manager (`with Demuxer(src) as d:`).
///
/// Raises `ValueError` naming the source for data FFmpeg cannot demux, a missing stream, a
/// bad window or bit-stream filter; `OSError` subclasses for a path that cannot be opened;
/// `RuntimeError` after the demuxer was closed.
#[pyclass(frozen, module = "spdl_rs.io", name = "Demuxer")]
pub(crate) struct Demuxer {
    inner: Arc<Mutex<Option<demux::Demuxer<'static>>>>,
}

impl Demuxer {
    fn with<R>(&self, f: impl FnOnce(&mut demux::Demuxer<'static>) -> PyResult<R>) -> PyResult<R> {
        let mut g = lock(&self.inner);
        let d = g
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("the Demuxer was closed"))?;
        f(d)
    }

    fn demux(
        &self,
        py: Python<'_>,
        kind: MediaKind,
        window: Option<(f64, f64)>,
        bsf: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let p = py.detach(|| self.with(|d| d.demux(kind, window, bsf).map_err(io_err)))?;
        packets_to_py(py, p)
    }
}

/// The `#[pymethods]` of [`Demuxer`]: for each `method: Kind` listed, `method(window=None, *,
/// bsf=None)` giving the default stream of that kind's packets (all, or for `window=(start,
/// end)` seconds), with the doc given; then the other methods.
macro_rules! demuxer_pymethods {
    ([$($(#[doc = $doc:literal])* $method:ident: $kind:ident),+] { $($own:tt)* }) => {
        #[pymethods]
        impl Demuxer {
            $(
                $(#[doc = $doc])*
                #[pyo3(signature = (window=None, *, bsf=None))]
                fn $method(
                    &self,
                    py: Python<'_>,
                    window: Option<&Bound<'_, PyAny>>,
                    bsf: Option<&str>,
                ) -> PyResult<Py<PyAny>> {
                    let w = window_of(window)?;
                    self.demux(py, MediaKind::$kind, w, bsf)
                }
            )+

            $($own)*
        }
    };
}

demuxer_pymethods! {
[
    /// The default video stream's packets (all, or for `window=(start, end)` seconds).
    demux_video: Video,
    /// The default audio stream's packets (all, or for `window=(start, end)` seconds).
    demux_audio: Audio
]
{
    #[new]
    #[pyo3(signature = (src, *, demux_config=None, name=None))]
    fn new(
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        demux_config: Option<&Bound<'_, PyAny>>,
        name: Option<&str>,
    ) -> PyResult<Self> {
        let src = source(src, name)?;
        let cfg = crate::media_config::demux_config_of(demux_config)?;
        let d = py
            .detach(|| demux::Demuxer::open(&src, &cfg))
            .map_err(io_err)?;
        Ok(Demuxer {
            inner: Arc::new(Mutex::new(Some(d))),
        })
    }

    /// The image's packet.
    #[pyo3(signature = (*, bsf=None))]
    fn demux_image(&self, py: Python<'_>, bsf: Option<&str>) -> PyResult<Py<PyAny>> {
        self.demux(py, MediaKind::Image, None, bsf)
    }

    /// Whether the container has an audio stream.
    fn has_audio(&self) -> PyResult<bool> {
        self.with(|d| Ok(d.has_audio()))
    }

    /// Index of the default video stream (`ValueError` without one).
    #[getter]
    fn video_stream_index(&self) -> PyResult<usize> {
        self.with(|d| d.stream_index(MediaKind::Video).map_err(io_err))
    }

    /// Index of the default audio stream (`ValueError` without one).
    #[getter]
    fn audio_stream_index(&self) -> PyResult<usize> {
        self.with(|d| d.stream_index(MediaKind::Audio).map_err(io_err))
    }

    /// `VideoCodec` of the default video stream.
    #[getter]
    fn video_codec(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let c = self.with(|d| d.codec(MediaKind::Video).map_err(io_err))?;
        codec_to_py(py, c)
    }

    /// `AudioCodec` of the default audio stream.
    #[getter]
    fn audio_codec(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let c = self.with(|d| d.codec(MediaKind::Audio).map_err(io_err))?;
        codec_to_py(py, c)
    }

    /// `ImageCodec` of the image.
    #[getter]
    fn image_codec(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let c = self.with(|d| d.codec(MediaKind::Image).map_err(io_err))?;
        codec_to_py(py, c)
    }

    /// Chunks of packets (see the class docs). `ValueError` for neither or both of
    /// `duration` / `num_packets`, or an unknown stream index.
    #[pyo3(signature = (indices=None, *, duration=-1.0, num_packets=-1))]
    fn streaming_demux(
        &self,
        py: Python<'_>,
        indices: Option<&Bound<'_, PyAny>>,
        duration: f64,
        num_packets: i64,
    ) -> PyResult<StreamingDemuxIter> {
        if duration <= 0.0 && num_packets <= 0 {
            return Err(PyValueError::new_err(
                "Either `duration` or `num_packets` must be specified.",
            ));
        }
        if duration > 0.0 && num_packets > 0 {
            return Err(PyValueError::new_err(format!(
                "Only one of `duration` or `num_packets` can be specified. Found: duration={duration}, num_packets={num_packets}."
            )));
        }
        let (idx, unwrap): (Vec<usize>, bool) = match indices {
            None => (vec![0], true),
            Some(i) if i.is_none() => (vec![0], true),
            Some(i) => match i.extract::<usize>() {
                Ok(one) => (vec![one], true),
                Err(_) => {
                    let mut v: Vec<usize> = i
                        .try_iter()?
                        .map(|x| x?.extract::<usize>())
                        .collect::<PyResult<_>>()?;
                    v.sort_unstable();
                    v.dedup();
                    (v, false)
                }
            },
        };
        let dur = (duration > 0.0).then_some(duration);
        let num = (num_packets > 0).then_some(num_packets as usize);
        let state =
            py.detach(|| self.with(|d| d.streaming_demux(&idx, dur, num).map_err(io_err)))?;
        Ok(StreamingDemuxIter {
            demuxer: Arc::clone(&self.inner),
            state: Mutex::new(state),
            unwrap,
        })
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Closes the container (later calls raise `RuntimeError`).
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) {
        lock(&self.inner).take();
    }
}
}

/// The iterator of `Demuxer.streaming_demux`.
#[pyclass(frozen, module = "spdl_rs.io")]
pub(crate) struct StreamingDemuxIter {
    demuxer: Arc<Mutex<Option<demux::Demuxer<'static>>>>,
    state: Mutex<StreamingDemux>,
    unwrap: bool,
}

#[pymethods]
impl StreamingDemuxIter {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let chunk = py.detach(|| {
            let mut d = lock(&self.demuxer);
            let d = d
                .as_mut()
                .ok_or_else(|| PyRuntimeError::new_err("the Demuxer was closed"))?;
            let mut s = lock(&self.state);
            s.next_chunk(d).transpose().map_err(io_err)
        })?;
        let Some(chunk) = chunk else {
            return Err(PyStopIteration::new_err(()));
        };
        if self.unwrap {
            let (_, p) = chunk.into_iter().next().expect("a chunk is never empty");
            return packets_to_py(py, p);
        }
        let d = PyDict::new(py);
        for (i, p) in chunk {
            d.set_item(i, packets_to_py(py, p)?)?;
        }
        Ok(d.into_any().unbind())
    }
}

/// The packets of the default `kind` stream of `src` in `window` seconds (all for `None`),
/// demuxed with the GIL released.
fn demux_one(
    py: Python<'_>,
    kind: MediaKind,
    src: &Bound<'_, PyAny>,
    window: Option<(f64, f64)>,
    demux_config: Option<&Bound<'_, PyAny>>,
    bsf: Option<&str>,
    name: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let cfg = crate::media_config::demux_config_of(demux_config)?;
    let src = source(src, name)?;
    let p = py
        .detach(|| demux::demux(src, kind, window, &cfg, bsf))
        .map_err(io_err)?;
    packets_to_py(py, p)
}

/// Declares `$name(src, *, timestamp=None, demux_config=None, bsf=None, name=None)`, SPDL's
/// one-shot demuxing of the default `$kind` stream (see `Demuxer`), GIL released.
macro_rules! demux_function {
    ($(#[$doc:meta])* $name:ident, $kind:expr) => {
        $(#[$doc])*
        #[pyfunction]
        #[pyo3(signature = (src, *, timestamp=None, demux_config=None, bsf=None, name=None))]
        pub(crate) fn $name(
            py: Python<'_>,
            src: &Bound<'_, PyAny>,
            timestamp: Option<&Bound<'_, PyAny>>,
            demux_config: Option<&Bound<'_, PyAny>>,
            bsf: Option<&str>,
            name: Option<&str>,
        ) -> PyResult<Py<PyAny>> {
            let window = window_of(timestamp)?;
            demux_one(py, $kind, src, window, demux_config, bsf, name)
        }
    };
}

demux_function!(
    /// SPDL's `demux_video(src, *, timestamp=None, demux_config=None, bsf=None, name=None)`:
    /// `VideoPackets` of the default video stream (see `Demuxer`), GIL released.
    demux_video,
    MediaKind::Video
);

demux_function!(
    /// SPDL's `demux_audio(src, *, timestamp=None, demux_config=None, bsf=None, name=None)`:
    /// `AudioPackets` of the default audio stream (see `Demuxer`), GIL released.
    demux_audio,
    MediaKind::Audio
);

/// SPDL's `demux_image(src, *, demux_config=None, bsf=None, name=None)`.
#[pyfunction]
#[pyo3(signature = (src, *, demux_config=None, bsf=None, name=None))]
pub(crate) fn demux_image(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    demux_config: Option<&Bound<'_, PyAny>>,
    bsf: Option<&str>,
    name: Option<&str>,
) -> PyResult<Py<PyAny>> {
    demux_one(py, MediaKind::Image, src, None, demux_config, bsf, name)
}

// ------------------------------------------------------------------ bit-stream filters

/// A bit-stream filter for packets of one codec, as SPDL's `spdl.io.BSF(codec, bsf)`:
/// `filter(packets, flush=False)` -> filtered packets or `None`, `flush()` -> what it held.
/// `ValueError` naming the filter for an unknown one or one that does not fit the codec.
#[pyclass(frozen, module = "spdl_rs.io", name = "BSF")]
pub(crate) struct Bsf {
    inner: Mutex<bsf::Bsf>,
}

#[pymethods]
impl Bsf {
    #[new]
    fn new(codec: &Bound<'_, PyAny>, bsf: &str) -> PyResult<Self> {
        let c = codec_of(codec)?;
        let f = bsf::Bsf::new(&c, bsf).map_err(io_err)?;
        Ok(Bsf {
            inner: Mutex::new(f),
        })
    }

    /// The filtered packets (`None` when none came out). Takes `packets`, as SPDL's (using
    /// them again raises `TypeError`).
    #[pyo3(signature = (packets, flush=false))]
    fn filter(
        &self,
        py: Python<'_>,
        packets: &Bound<'_, PyAny>,
        flush: bool,
    ) -> PyResult<Option<Py<PyAny>>> {
        let p = take_packets(packets)?;
        let out = py
            .detach(|| lock(&self.inner).filter(&p, flush))
            .map_err(io_err)?;
        none_if_empty(py, out)
    }

    /// Ends the stream: the packets the filter still held, or `None`.
    fn flush(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let out = py.detach(|| lock(&self.inner).flush()).map_err(io_err)?;
        none_if_empty(py, out)
    }
}

/// SPDL's `apply_bsf(packets, bsf)`: the packets through the bit-stream filter `bsf` (e.g.
/// `"h264_mp4toannexb"`), GIL released. `ValueError` naming a bad filter.
#[pyfunction]
pub(crate) fn apply_bsf(
    py: Python<'_>,
    packets: &Bound<'_, PyAny>,
    bsf: &str,
) -> PyResult<Py<PyAny>> {
    let p = take_packets(packets)?;
    let out = py.detach(|| bsf::apply_bsf(&p, bsf)).map_err(io_err)?;
    packets_to_py(py, out)
}
