//! `spdl_rs.io.load_video` / `load_video_clips` / `load_audio`, their result classes
//! (`DecodedVideo`, `DecodedAudio`) and the matching native stages of `spdl_rs.ops`.
//!
//! The decoding is `spdl-io`'s (`spdl_io::video`, `spdl_io::audio`, feature `decode-ffmpeg`
//! of this crate). Without that feature the functions still exist and raise `RuntimeError`
//! saying how to build with FFmpeg; the result classes exist but are never made.
//!
//! All decoding runs with the GIL released; frames and waveforms become zero-copy
//! [`CpuBuffer`]s.

use std::path::{Path, PathBuf};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{
    PyIsADirectoryError, PyOSError, PyPermissionError, PyRuntimeError, PyTypeError,
};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};

use crate::buffer::{host_array_pymethods, CpuBuffer};
#[cfg(feature = "decode-ffmpeg")]
use crate::options::Kwargs;

/// The error every video/audio entry point raises in a build without FFmpeg.
#[cfg_attr(feature = "decode-ffmpeg", allow(dead_code))]
pub(crate) fn no_ffmpeg(what: &str) -> PyErr {
    PyRuntimeError::new_err(format!(
        "{what}: this spdl_rs was built without FFmpeg (video/audio decoding). Rebuild with the \
         Cargo feature `decode-ffmpeg` (needs FFmpeg's development packages, pkg-config and \
         clang): `maturin build --release -m crates/spdl-py/Cargo.toml --features decode-ffmpeg`, \
         or `pip install ./crates/spdl-py --config-settings=maturin.build-args=--features=decode-ffmpeg`"
    ))
}

/// The FFmpeg libraries this module runs against (e.g. `"libavcodec 59.37.100, ..."`), or
/// `None` when it was built without FFmpeg (then `load_video` / `load_audio` raise
/// `RuntimeError`).
#[pyfunction]
pub(crate) fn ffmpeg_versions() -> Option<String> {
    #[cfg(feature = "decode-ffmpeg")]
    {
        Some(spdl_io::ffmpeg_versions())
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        None
    }
}

/// The FFmpeg libraries as `{"libavcodec": (major, minor, micro), ...}` (SPDL's
/// `spdl.io.utils.get_ffmpeg_versions`). `RuntimeError` in a build without FFmpeg.
#[pyfunction]
pub(crate) fn get_ffmpeg_versions() -> PyResult<std::collections::BTreeMap<String, (u32, u32, u32)>>
{
    #[cfg(feature = "decode-ffmpeg")]
    {
        Ok(spdl_io::ffmpeg_library_versions()
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v))
            .collect())
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        Err(no_ffmpeg("get_ffmpeg_versions"))
    }
}

/// The names of FFmpeg's filters, usable in `filter_desc` (SPDL's `get_ffmpeg_filters`).
/// `RuntimeError` in a build without FFmpeg.
#[pyfunction]
pub(crate) fn get_ffmpeg_filters() -> PyResult<Vec<String>> {
    #[cfg(feature = "decode-ffmpeg")]
    {
        Ok(spdl_io::ffmpeg_filters())
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        Err(no_ffmpeg("get_ffmpeg_filters"))
    }
}

/// FFmpeg's log level (SPDL's `get_ffmpeg_log_level`; spdl_rs starts at 16, error).
/// `RuntimeError` in a build without FFmpeg.
#[pyfunction]
pub(crate) fn get_ffmpeg_log_level() -> PyResult<i32> {
    #[cfg(feature = "decode-ffmpeg")]
    {
        Ok(spdl_io::ffmpeg_log_level())
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        Err(no_ffmpeg("get_ffmpeg_log_level"))
    }
}

/// Sets FFmpeg's process-wide log level (SPDL's `set_ffmpeg_log_level`).
/// `RuntimeError` in a build without FFmpeg.
#[pyfunction]
#[pyo3(signature = (val, /))]
pub(crate) fn set_ffmpeg_log_level(val: i32) -> PyResult<()> {
    #[cfg(feature = "decode-ffmpeg")]
    {
        spdl_io::set_ffmpeg_log_level(val);
        Ok(())
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = val;
        Err(no_ffmpeg("set_ffmpeg_log_level"))
    }
}

/// Where a video or audio comes from.
#[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
pub(crate) enum Src {
    /// A local file (demuxed straight from the file, not read into memory first).
    Path(PathBuf),
    /// `bytes`, shared with Python without a copy.
    Backed(PyBackedBytes),
    /// A copy of a `bytearray`, `memoryview` or other `uint8` buffer.
    Owned(Vec<u8>),
}

#[cfg(feature = "decode-ffmpeg")]
impl Src {
    /// The source to demux, named `key` when it is bytes.
    fn source<'a>(&'a self, key: &'a str) -> spdl_io::MediaSource<'a> {
        use spdl_io::MediaSource;
        match self {
            Src::Path(p) => MediaSource::file(p),
            Src::Backed(b) => MediaSource::bytes(key, b),
            Src::Owned(v) => MediaSource::bytes(key, v),
        }
    }
}

/// Reads `src`: a path (`str`, `os.PathLike`) that can be opened as a file (else the matching
/// `OSError` subclass naming it) or bytes-like (`bytes`, `bytearray`, `memoryview`, any
/// C-contiguous `uint8` buffer). Raises `TypeError` for anything else.
#[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
pub(crate) fn extract_src(obj: &Bound<'_, PyAny>) -> PyResult<Src> {
    if obj.is_instance_of::<PyString>() || obj.hasattr("__fspath__")? {
        let path: PathBuf = obj.extract()?;
        check_file(&path)?;
        return Ok(Src::Path(path));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Src::Backed(PyBackedBytes::from(b.clone())));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Src::Owned(b.to_vec()));
    }
    match PyBuffer::<u8>::get(obj) {
        Ok(buf) => Ok(Src::Owned(buf.to_vec(obj.py())?)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "src must be a path (str or os.PathLike) or bytes-like (bytes, bytearray, memoryview, a uint8 buffer), got {}",
            crate::error::type_name(obj)
        ))),
    }
}

/// An `OSError` subclass naming `path`, when it cannot be opened as a file.
#[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
pub(crate) fn check_file(path: &Path) -> PyResult<()> {
    use std::io::ErrorKind as K;
    let shown = path.display();
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(PyIsADirectoryError::new_err(format!(
            "{shown}: is a directory"
        ))),
        Ok(_) => Ok(()),
        Err(e) => Err(match e.kind() {
            K::NotFound => crate::error::not_found_err(format!("{shown}: not found")),
            K::PermissionDenied => {
                PyPermissionError::new_err(format!("{shown}: permission denied"))
            }
            _ => PyOSError::new_err(format!("{shown}: {e}")),
        }),
    }
}

/// Decoded video frames and their timestamps (from `spdl_rs.io.load_video`,
/// `load_video_clips` or the `spdl_rs.ops` video stages).
///
/// - `frames`: a zero-copy `CPUBuffer`, `uint8`, `[T, H, W, C]` (`[N, T, H, W, C]` for
///   clips), `C` = 3 (RGB/BGR) or 1 (gray);
/// - `pts`: presentation timestamp of each frame in seconds (length `T`, or `N * T`);
/// - `indices`: decoded-frame index of each frame (presentation order from 0), or `None`
///   after a time-window seek;
/// - `rotation`: degrees counterclockwise the frames were turned (0 unless
///   `apply_rotation=True`); `stream_rotation`: the stream's display rotation.
#[pyclass(frozen, module = "spdl_rs.io", name = "DecodedVideo")]
pub(crate) struct VideoFrames {
    frames: CpuBuffer,
    /// The shape of `frames`.
    #[pyo3(get)]
    shape: Vec<usize>,
    /// Presentation timestamp of each frame, seconds (stream time, as ffprobe's `pts_time`).
    #[pyo3(get)]
    pts: Vec<f64>,
    /// Decoded-frame index of each frame (presentation order from 0); `None` for a
    /// `timestamp=(start, end)` window (decoding started at a seek point).
    #[pyo3(get)]
    indices: Option<Vec<usize>>,
    /// Degrees counterclockwise (0, 90, 180, 270) the frames were turned; 0 unless
    /// `apply_rotation=True` (the default is SPDL 0.8's: not turned).
    #[pyo3(get)]
    rotation: i32,
    /// The stream's display rotation, degrees counterclockwise (0, 90, 180, 270), applied or
    /// not.
    #[pyo3(get)]
    stream_rotation: i32,
    /// Frames in the stream, counted by decoding, when this call decoded the whole stream from
    /// its start; otherwise `None` (never the container's estimate).
    #[pyo3(get)]
    num_decoded: Option<usize>,
    /// Decoder name, e.g. `"h264"`.
    #[pyo3(get)]
    codec: String,
    /// The source's name: its path, or the `name` given with bytes.
    #[pyo3(get)]
    key: String,
    /// The class label of the sample (from a labelled listing in a pipeline), else `None`.
    #[pyo3(get)]
    label: Option<i64>,
}

host_array_pymethods! {
impl VideoFrames, |v| v.frames, {
    /// The frames: `CPUBuffer` `uint8` `[T, H, W, C]` (`[N, T, H, W, C]` for clips), sharing
    /// memory with every other view of them (`numpy.asarray`, `torch.from_dlpack`).
    #[getter]
    fn frames(&self) -> CpuBuffer {
        self.frames.share()
    }

    /// The number of frames `T` (or clips `N` for clips).
    fn __len__(&self) -> usize {
        self.shape.first().copied().unwrap_or(0)
    }

    fn __repr__(&self) -> String {
        format!(
            "DecodedVideo(key={:?}, shape={:?}, codec={:?}, rotation={})",
            self.key, self.shape, self.codec, self.rotation
        )
    }
}
}

/// A decoded waveform (from `spdl_rs.io.load_audio` or the `spdl_rs.ops` audio stages).
///
/// `waveform` is a zero-copy `CPUBuffer`, `float32`, `[C, S]` (channels first, values in
/// [-1, 1]); `sample_rate` in Hz; `start` the time of the first sample in seconds.
#[pyclass(frozen, module = "spdl_rs.io", name = "DecodedAudio")]
pub(crate) struct AudioFrames {
    waveform: CpuBuffer,
    /// Channels `C`.
    #[pyo3(get, name = "num_channels")]
    channels: usize,
    /// Samples per channel `S`.
    #[pyo3(get, name = "num_samples")]
    samples: usize,
    /// Sample rate of `waveform`, Hz.
    #[pyo3(get)]
    sample_rate: u32,
    /// Presentation time of the first sample, seconds.
    #[pyo3(get)]
    start: f64,
    /// Decoder name, e.g. `"pcm_s16le"`, `"mp3float"`, `"flac"`.
    #[pyo3(get)]
    codec: String,
    /// The source's name: its path, or the `name` given with bytes.
    #[pyo3(get)]
    key: String,
    /// The class label of the sample (from a labelled listing in a pipeline), else `None`.
    #[pyo3(get)]
    label: Option<i64>,
}

host_array_pymethods! {
impl AudioFrames, |a| a.waveform, {
    /// The samples: `CPUBuffer` `float32` `[C, S]`, channel after channel (zero-copy).
    #[getter]
    fn waveform(&self) -> CpuBuffer {
        self.waveform.share()
    }

    /// The shape of `waveform`: `(C, S)` (channels first: the default `float32` and planar
    /// sample formats), or `(S, C)` for the packed sample format a `filter_desc` gave.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.waveform
            .__array_interface__(py)?
            .as_any()
            .get_item("shape")
    }

    /// Duration of `waveform`, seconds (`S / sample_rate`).
    #[getter]
    fn duration(&self) -> f64 {
        self.samples as f64 / f64::from(self.sample_rate.max(1))
    }

    fn __repr__(&self) -> String {
        format!(
            "DecodedAudio(key={:?}, shape=({}, {}), sample_rate={}, codec={:?})",
            self.key, self.channels, self.samples, self.sample_rate, self.codec
        )
    }
}
}

impl VideoFrames {
    /// Frames decoded elsewhere (SPDL's `load_video(filter_desc=...)` path): `frames` in the
    /// layout SPDL's `convert_frames` gives (`shape`), not rotated, no frame indices.
    #[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
    pub(crate) fn from_parts(
        frames: CpuBuffer,
        shape: Vec<usize>,
        pts: Vec<f64>,
        stream_rotation: i32,
        codec: String,
        key: String,
    ) -> Self {
        VideoFrames {
            frames,
            shape,
            pts,
            indices: None,
            rotation: 0,
            stream_rotation,
            num_decoded: None,
            codec,
            key,
            label: None,
        }
    }
}

impl AudioFrames {
    /// A waveform decoded elsewhere (SPDL's `load_audio(filter_desc=...)` path): `waveform` in
    /// its own sample type and layout, `channels` x `samples` of it.
    #[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        waveform: CpuBuffer,
        channels: usize,
        samples: usize,
        sample_rate: u32,
        start: f64,
        codec: String,
        key: String,
    ) -> Self {
        AudioFrames {
            waveform,
            channels,
            samples,
            sample_rate,
            start,
            codec,
            key,
            label: None,
        }
    }
}

/// A decoded video or audio travelling through a pipeline (native until the consumer or a
/// Python op takes it).
#[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
pub(crate) enum MediaOut {
    Video(VideoFrames),
    Audio(AudioFrames),
}

impl MediaOut {
    /// The decoded samples' memory (shared, not copied) for `ops.to_device`: video frames
    /// `[T, H, W, C]` (`[N, T, H, W, C]` for clips) `uint8`, audio `[C, S]` `float32`.
    pub(crate) fn host_view(&self) -> crate::buffer::HostView {
        match self {
            MediaOut::Video(v) => v.frames.host_view(),
            MediaOut::Audio(a) => a.waveform.host_view(),
        }
    }

    /// The same view of a `VideoFrames` / `AudioFrames` handed over from Python, else `None`.
    pub(crate) fn host_view_of(obj: &Bound<'_, PyAny>) -> Option<crate::buffer::HostView> {
        if let Ok(v) = obj.cast::<VideoFrames>() {
            return Some(v.get().frames.host_view());
        }
        obj.cast::<AudioFrames>()
            .ok()
            .map(|a| a.get().waveform.host_view())
    }

    /// The Python object: `VideoFrames` or `AudioFrames`.
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match self {
            MediaOut::Video(v) => Py::new(py, v)?.into_any(),
            MediaOut::Audio(a) => Py::new(py, a)?.into_any(),
        })
    }
}

#[cfg(feature = "decode-ffmpeg")]
mod imp {
    //! The decoding itself (feature `decode-ffmpeg`).

    use spdl_io::audio::{load_audio, AudioOptions};
    use spdl_io::video::{load_video, load_video_clips, ClipSampling, VideoOptions};
    use spdl_io::MediaSource;

    use super::*;

    /// What one video/audio call or stage does.
    #[derive(Debug, Clone)]
    pub(crate) enum Spec {
        Video(VideoOptions),
        Clips(ClipSampling, VideoOptions),
        Audio(AudioOptions),
    }

    /// What a video call or stage decodes, from its keywords: frames (`timestamp` or a
    /// selection keyword), or clips with `num_clips` and `frames_per_clip` (and `stride`);
    /// `ValueError` for keywords that do not go together, checked before any decoding.
    pub(crate) fn video_spec(kw: &Kwargs<'_>, timestamp: Option<(f64, f64)>) -> PyResult<Spec> {
        use pyo3::exceptions::PyValueError;
        let opts = kw.video(timestamp)?;
        let num_clips: Option<usize> = kw.opt("num_clips")?;
        let frames_per_clip: Option<usize> = kw.opt("frames_per_clip")?;
        // A filter cannot follow picked frames or clips.
        let picked = matches!(
            opts.selection,
            spdl_io::FrameSelection::Indices(_) | spdl_io::FrameSelection::PlayedAt(_)
        );
        if opts.filter_desc.is_some() && (picked || num_clips.is_some()) {
            return Err(PyValueError::new_err(
                "filter_desc works with all frames, a timestamp window or a step, not with indices, played_at or clips",
            ));
        }
        match (num_clips, frames_per_clip) {
            (None, None) => match kw.take::<usize>("stride")? {
                Some(s) if s != 1 => Err(PyValueError::new_err(format!(
                    "stride={s} goes with num_clips and frames_per_clip"
                ))),
                _ => Ok(Spec::Video(opts)),
            },
            (Some(n), Some(t)) if opts.selection == spdl_io::FrameSelection::All => {
                Ok(Spec::Clips(kw.clips(n, t)?, opts))
            }
            (Some(_), Some(_)) => Err(PyValueError::new_err(
                "clips (num_clips, frames_per_clip) choose their own frames: do not also give timestamp, indices, step or played_at",
            )),
            _ => Err(PyValueError::new_err(
                "give both num_clips and frames_per_clip, or neither",
            )),
        }
    }

    pub(crate) fn video_out(
        v: spdl_io::Video,
        shape: Vec<usize>,
        key: String,
        label: Option<i64>,
    ) -> VideoFrames {
        VideoFrames {
            frames: CpuBuffer::from_u8(v.data, shape.clone(), key.clone()),
            shape,
            pts: v.pts,
            indices: v.indices,
            rotation: v.rotation_applied,
            stream_rotation: v.info.rotation,
            num_decoded: v.frames_decoded,
            codec: v.info.codec,
            key,
            label,
        }
    }

    /// Runs `spec` on `src` (named `key` in errors), without the GIL (call it inside
    /// `py.detach` or on a worker thread).
    pub(crate) fn run(
        spec: &Spec,
        src: MediaSource<'_>,
        label: Option<i64>,
    ) -> Result<MediaOut, spdl_io::Error> {
        let key = src.key().to_owned();
        Ok(match spec {
            Spec::Video(opts) => {
                let v = load_video(src, opts)?;
                let shape = v.shape.to_vec();
                MediaOut::Video(video_out(v, shape, key, label))
            }
            Spec::Clips(sampling, opts) => {
                let c = load_video_clips(src, sampling, opts)?;
                MediaOut::Video(video_out(c.video, c.shape.to_vec(), key, label))
            }
            Spec::Audio(opts) => {
                let a = load_audio(src, opts)?;
                let shape = vec![a.channels, a.samples];
                MediaOut::Audio(AudioFrames {
                    waveform: CpuBuffer::from_f32(a.data, shape, key.clone()),
                    channels: a.channels,
                    samples: a.samples,
                    sample_rate: a.sample_rate,
                    start: a.start,
                    codec: a.info.codec,
                    key,
                    label,
                })
            }
        })
    }

    /// Runs `spec` on a Python `src` with the GIL released; errors name the source.
    pub(crate) fn run_py(
        py: Python<'_>,
        spec: &Spec,
        src: &Bound<'_, PyAny>,
        key: Option<&str>,
    ) -> PyResult<MediaOut> {
        let src = extract_src(src)?;
        let key = key.unwrap_or("<bytes>");
        py.detach(|| run(spec, src.source(key), None))
            .map_err(crate::error::io_err)
    }
}

#[cfg(feature = "decode-ffmpeg")]
pub(crate) use imp::{run, Spec};

/// The video/audio functions and stages, by name.
const MEDIA_FUNCS: [&str; 5] = [
    "load_video",
    "load_video_clips",
    "load_audio",
    "decode_video",
    "decode_audio",
];

/// `name` as one of [`MEDIA_FUNCS`]; `ValueError` for another.
pub(crate) fn media_func(name: &str) -> PyResult<&'static str> {
    MEDIA_FUNCS.into_iter().find(|f| *f == name).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!("no media function {name:?}"))
    })
}

/// What the video/audio function or stage `func` decodes, from its keywords.
#[cfg(feature = "decode-ffmpeg")]
pub(crate) fn media_spec(
    func: &str,
    kw: &Kwargs<'_>,
    timestamp: Option<(f64, f64)>,
) -> PyResult<Spec> {
    if func.ends_with("audio") {
        Ok(Spec::Audio(kw.audio(timestamp)?))
    } else {
        imp::video_spec(kw, timestamp)
    }
}

/// Decodes a video or the best audio stream of `src` (a path or its bytes) with the GIL
/// released: the native half of `spdl_rs.io.load_video` (`func`; frames `[T, H, W, C]`
/// `uint8`), `load_video_clips` (clips `[N, T, H, W, C]`, with the keywords `num_clips` and
/// `frames_per_clip`) and `load_audio` (`[C, S]` `float32`); see them (`python/spdl_rs/io.py`)
/// for the arguments. `options`: the video or audio keywords (`spdl_rs/_options.py`).
#[pyfunction]
#[pyo3(signature = (func, src, timestamp=None, *, name=None, **options))]
pub(crate) fn load_media(
    py: Python<'_>,
    func: &str,
    src: &Bound<'_, PyAny>,
    timestamp: Option<(f64, f64)>,
    name: Option<&str>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let func = media_func(func)?;
    #[cfg(feature = "decode-ffmpeg")]
    {
        let spec = Kwargs::parse(func, options, |kw| media_spec(func, kw, timestamp))?;
        imp::run_py(py, &spec, src, name)?.into_py(py)
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = (py, src, timestamp, name, options);
        Err(no_ffmpeg(func))
    }
}
