//! `spdl_rs.io.load_video` / `load_video_clips` / `load_audio`, their result classes
//! (`VideoFrames`, `AudioFrames`) and the matching native stages of `spdl_rs.ops`.
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
    PyFileNotFoundError, PyIsADirectoryError, PyOSError, PyPermissionError, PyRuntimeError,
    PyTypeError,
};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyByteArray, PyBytes, PyString};

use crate::buffer::CpuBuffer;
use crate::ops::NativeOp;

/// The error every video/audio entry point raises in a build without FFmpeg.
#[cfg_attr(feature = "decode-ffmpeg", allow(dead_code))]
fn no_ffmpeg(what: &str) -> PyErr {
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

/// Reads `src`: a path (`str`, `os.PathLike`) or bytes-like (`bytes`, `bytearray`,
/// `memoryview`, any C-contiguous `uint8` buffer). Raises `TypeError` for anything else.
#[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
pub(crate) fn extract_src(obj: &Bound<'_, PyAny>) -> PyResult<Src> {
    if obj.is_instance_of::<PyString>() || obj.hasattr("__fspath__")? {
        return Ok(Src::Path(obj.extract()?));
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
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into())
        ))),
    }
}

/// An `OSError` subclass naming `path`, when it cannot be opened as a file.
#[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
fn check_file(path: &Path) -> PyResult<()> {
    use std::io::ErrorKind as K;
    let shown = path.display();
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(PyIsADirectoryError::new_err(format!(
            "{shown}: is a directory"
        ))),
        Ok(_) => Ok(()),
        Err(e) => Err(match e.kind() {
            K::NotFound => PyFileNotFoundError::new_err(format!("{shown}: not found")),
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
/// - `rotation`: degrees counterclockwise the frames were turned (0 with
///   `apply_rotation=False`); `stream_rotation`: the stream's display rotation.
#[pyclass(frozen, module = "spdl_rs.io", name = "VideoFrames")]
pub(crate) struct VideoFrames {
    frames: CpuBuffer,
    shape: Vec<usize>,
    pts: Vec<f64>,
    indices: Option<Vec<usize>>,
    rotation: i32,
    stream_rotation: i32,
    num_decoded: Option<usize>,
    codec: String,
    key: String,
    label: Option<i64>,
}

#[pymethods]
impl VideoFrames {
    /// The frames: `CPUBuffer` `uint8` `[T, H, W, C]` (`[N, T, H, W, C]` for clips), sharing
    /// memory with every other view of them (`numpy.asarray`, `torch.from_dlpack`).
    #[getter]
    fn frames(&self) -> CpuBuffer {
        self.frames.share()
    }

    /// The shape of `frames`.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }

    /// Presentation timestamp of each frame, seconds (stream time, as ffprobe's `pts_time`).
    #[getter]
    fn pts(&self) -> Vec<f64> {
        self.pts.clone()
    }

    /// Decoded-frame index of each frame (presentation order from 0); `None` for a
    /// `timestamp=(start, end)` window (decoding started at a seek point).
    #[getter]
    fn indices(&self) -> Option<Vec<usize>> {
        self.indices.clone()
    }

    /// Degrees counterclockwise (0, 90, 180, 270) the frames were turned; 0 when
    /// `apply_rotation=False`.
    #[getter]
    fn rotation(&self) -> i32 {
        self.rotation
    }

    /// The stream's display rotation, degrees counterclockwise (0, 90, 180, 270), applied or not.
    #[getter]
    fn stream_rotation(&self) -> i32 {
        self.stream_rotation
    }

    /// Frames in the stream, counted by decoding, when this call decoded the whole stream from
    /// its start; otherwise `None` (never the container's estimate).
    #[getter]
    fn num_decoded(&self) -> Option<usize> {
        self.num_decoded
    }

    /// Decoder name, e.g. `"h264"`.
    #[getter]
    fn codec(&self) -> &str {
        &self.codec
    }

    /// The source's name: its path, or the `name` given with bytes.
    #[getter]
    fn key(&self) -> &str {
        &self.key
    }

    /// The class label of the sample (from a labelled listing in a pipeline), else `None`.
    #[getter]
    fn label(&self) -> Option<i64> {
        self.label
    }

    /// The number of frames `T` (or clips `N` for clips).
    fn __len__(&self) -> usize {
        self.shape.first().copied().unwrap_or(0)
    }

    fn __repr__(&self) -> String {
        format!(
            "VideoFrames(key={:?}, shape={:?}, codec={:?}, rotation={})",
            self.key, self.shape, self.codec, self.rotation
        )
    }
}

/// A decoded waveform (from `spdl_rs.io.load_audio` or the `spdl_rs.ops` audio stages).
///
/// `waveform` is a zero-copy `CPUBuffer`, `float32`, `[C, S]` (channels first, values in
/// [-1, 1]); `sample_rate` in Hz; `start` the time of the first sample in seconds.
#[pyclass(frozen, module = "spdl_rs.io", name = "AudioFrames")]
pub(crate) struct AudioFrames {
    waveform: CpuBuffer,
    channels: usize,
    samples: usize,
    sample_rate: u32,
    start: f64,
    codec: String,
    key: String,
    label: Option<i64>,
}

#[pymethods]
impl AudioFrames {
    /// The samples: `CPUBuffer` `float32` `[C, S]`, channel after channel (zero-copy).
    #[getter]
    fn waveform(&self) -> CpuBuffer {
        self.waveform.share()
    }

    /// `(C, S)`: channels, samples per channel.
    #[getter]
    fn shape(&self) -> (usize, usize) {
        (self.channels, self.samples)
    }

    /// Sample rate of `waveform`, Hz.
    #[getter]
    fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// Channels `C`.
    #[getter]
    fn num_channels(&self) -> usize {
        self.channels
    }

    /// Samples per channel `S`.
    #[getter]
    fn num_samples(&self) -> usize {
        self.samples
    }

    /// Presentation time of the first sample, seconds.
    #[getter]
    fn start(&self) -> f64 {
        self.start
    }

    /// Duration of `waveform`, seconds (`S / sample_rate`).
    #[getter]
    fn duration(&self) -> f64 {
        self.samples as f64 / f64::from(self.sample_rate.max(1))
    }

    /// Decoder name, e.g. `"pcm_s16le"`, `"mp3float"`, `"flac"`.
    #[getter]
    fn codec(&self) -> &str {
        &self.codec
    }

    /// The source's name: its path, or the `name` given with bytes.
    #[getter]
    fn key(&self) -> &str {
        &self.key
    }

    /// The class label of the sample (from a labelled listing in a pipeline), else `None`.
    #[getter]
    fn label(&self) -> Option<i64> {
        self.label
    }

    fn __repr__(&self) -> String {
        format!(
            "AudioFrames(key={:?}, shape=({}, {}), sample_rate={}, codec={:?})",
            self.key, self.channels, self.samples, self.sample_rate, self.codec
        )
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

    use pyo3::exceptions::PyValueError;
    use spdl_io::audio::{load_audio, AudioOptions};
    use spdl_io::video::{
        load_video, load_video_clips, ClipSampling, FrameSelection, PixelFormat, ScaleFilter,
        VideoOptions,
    };
    use spdl_io::MediaSource;

    use super::*;

    /// What one video/audio call or stage does.
    #[derive(Debug, Clone)]
    pub(crate) enum Spec {
        Video(VideoOptions),
        Clips(ClipSampling, VideoOptions),
        Audio(AudioOptions),
    }

    /// Builds [`VideoOptions`] from the keyword arguments; `ValueError` for bad ones.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn video_options(
        timestamps: Option<(f64, f64)>,
        indices: Option<Vec<i64>>,
        step: Option<usize>,
        played_at: Option<Vec<f64>>,
        width: Option<u32>,
        height: Option<u32>,
        pixel_format: &str,
        filter: &str,
        num_threads: usize,
        apply_rotation: bool,
    ) -> PyResult<VideoOptions> {
        let given = [
            timestamps.is_some(),
            indices.is_some(),
            step.is_some(),
            played_at.is_some(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(PyValueError::new_err(
                "give at most one of timestamp, indices, step, played_at",
            ));
        }
        let selection = if let Some((start, end)) = timestamps {
            if start.is_nan() || end.is_nan() || start < 0.0 || end <= start {
                return Err(PyValueError::new_err(format!(
                    "timestamp must be (start, end) seconds with 0 <= start < end, got ({start}, {end})"
                )));
            }
            FrameSelection::Window { start, end }
        } else if let Some(i) = indices {
            let picked: Option<Vec<usize>> = i.iter().map(|&x| usize::try_from(x).ok()).collect();
            match picked {
                Some(p) => FrameSelection::Indices(p),
                None => {
                    return Err(PyValueError::new_err(format!(
                        "indices count decoded frames from 0 and must be >= 0, got {i:?}"
                    )))
                }
            }
        } else if let Some(k) = step {
            if k == 0 {
                return Err(PyValueError::new_err("step must be at least 1"));
            }
            FrameSelection::Step(k)
        } else if let Some(t) = played_at {
            FrameSelection::PlayedAt(t)
        } else {
            FrameSelection::All
        };
        if width == Some(0) || height == Some(0) {
            return Err(PyValueError::new_err(format!(
                "width and height must be at least 1, got width={width:?}, height={height:?}"
            )));
        }
        let pixel_format = match pixel_format {
            "rgb" | "rgb24" => PixelFormat::Rgb24,
            "bgr" | "bgr24" => PixelFormat::Bgr24,
            "gray" | "grey" | "gray8" => PixelFormat::Gray8,
            other => {
                return Err(PyValueError::new_err(format!(
                    "pixel_format must be one of 'rgb', 'bgr', 'gray', got {other:?}"
                )))
            }
        };
        let filter = match filter {
            "nearest" => ScaleFilter::Nearest,
            "bilinear" => ScaleFilter::Bilinear,
            "bicubic" => ScaleFilter::Bicubic,
            "area" => ScaleFilter::Area,
            other => {
                return Err(PyValueError::new_err(format!(
                    "filter must be one of 'nearest', 'bilinear', 'bicubic', 'area', got {other:?}"
                )))
            }
        };
        Ok(VideoOptions {
            selection,
            width,
            height,
            pixel_format,
            filter,
            threads: num_threads,
            apply_rotation,
            ..Default::default()
        })
    }

    /// Builds [`ClipSampling`]; `ValueError` for zero clips, frames or stride.
    pub(crate) fn clip_sampling(
        num_clips: usize,
        frames_per_clip: usize,
        stride: usize,
    ) -> PyResult<ClipSampling> {
        if num_clips == 0 || frames_per_clip == 0 || stride == 0 {
            return Err(PyValueError::new_err(format!(
                "num_clips, frames_per_clip and stride must be at least 1, got {num_clips}, {frames_per_clip}, {stride}"
            )));
        }
        Ok(ClipSampling {
            num_clips,
            frames_per_clip,
            stride,
        })
    }

    /// Builds [`AudioOptions`]; `ValueError` for bad ones.
    pub(crate) fn audio_options(
        sample_rate: Option<u32>,
        num_channels: Option<u16>,
        timestamps: Option<(f64, f64)>,
    ) -> PyResult<AudioOptions> {
        if sample_rate == Some(0) || num_channels == Some(0) {
            return Err(PyValueError::new_err(format!(
                "sample_rate and num_channels must be at least 1, got {sample_rate:?}, {num_channels:?}"
            )));
        }
        if let Some((start, end)) = timestamps {
            if start.is_nan() || end.is_nan() || start < 0.0 || end <= start {
                return Err(PyValueError::new_err(format!(
                    "timestamp must be (start, end) seconds with 0 <= start < end, got ({start}, {end})"
                )));
            }
        }
        Ok(AudioOptions {
            sample_rate,
            channels: num_channels,
            window: timestamps,
            ..Default::default()
        })
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
        if let Src::Path(p) = &src {
            check_file(p)?;
        }
        py.detach(|| {
            let source = match &src {
                Src::Path(p) => MediaSource::file(p),
                Src::Backed(b) => MediaSource::bytes(key, b),
                Src::Owned(v) => MediaSource::bytes(key, v),
            };
            run(spec, source, None)
        })
        .map_err(crate::error::io_err)
    }

    /// What a video/audio native stage does.
    #[derive(Debug)]
    pub(crate) struct Stage {
        /// The decoding.
        pub(crate) spec: Spec,
        /// Takes file bytes (`ops.read_file()`) when true, else paths.
        pub(crate) from_bytes: bool,
    }

    /// The native stage for `spec`: `from_bytes` takes file bytes (`ops.read_file()`), else
    /// paths.
    pub(crate) fn op(spec: Spec, from_bytes: bool, name: &'static str) -> NativeOp {
        let stage = Stage { spec, from_bytes };
        NativeOp::new(
            crate::ops::NativeKind::Media(std::sync::Arc::new(stage)),
            name,
        )
    }

    /// One item through a media stage (runs on a worker thread, without the GIL unless the
    /// item is a Python object).
    pub(crate) fn apply(
        stage: &Stage,
        name: &str,
        item: crate::item::Item,
    ) -> Result<MediaOut, crate::ops::OpError> {
        use crate::item::Item;
        let spec = &stage.spec;
        if stage.from_bytes {
            let (key, label, data) = match item {
                Item::Bytes {
                    key, label, data, ..
                } => (key, label, data),
                Item::Py(obj) => crate::with_gil(|py| match extract_src(obj.bind(py)) {
                    Ok(Src::Backed(b)) => Ok(("<bytes>".to_owned(), None, b.to_vec())),
                    Ok(Src::Owned(v)) => Ok(("<bytes>".to_owned(), None, v)),
                    _ => Err(format!(
                        "{name} expects bytes (e.g. from ops.read_file()), got {}",
                        crate::ops::type_name(obj.bind(py))
                    )),
                })?,
                other => {
                    return Err(format!(
                        "{name} expects bytes (e.g. from ops.read_file()), got {}",
                        other.describe()
                    )
                    .into())
                }
            };
            Ok(run(spec, MediaSource::bytes(&key, &data), label)?)
        } else {
            let (path, _key, label, _pos) = crate::ops::path_of(item, name)?;
            if let Err(e) = std::fs::metadata(&path) {
                return Err(format!("{}: {e}", path.display()).into());
            }
            Ok(run(spec, MediaSource::file(&path), label)?)
        }
    }
}

#[cfg(feature = "decode-ffmpeg")]
pub(crate) use imp::{apply, Spec, Stage};

/// Decodes the frames of a video (a path or its bytes) into `[T, H, W, C]` `uint8` with their
/// timestamp, with the GIL released. See `spdl_rs.io.load_video` (`python/spdl_rs/io.py`)
/// for the arguments.
#[pyfunction]
#[pyo3(signature = (src, timestamp=None, *, indices=None, step=None, played_at=None, width=None, height=None, pixel_format="rgb", filter="bicubic", num_threads=1, apply_rotation=true, name=None, filter_desc=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn load_video(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    timestamp: Option<(f64, f64)>,
    indices: Option<Vec<i64>>,
    step: Option<usize>,
    played_at: Option<Vec<f64>>,
    width: Option<u32>,
    height: Option<u32>,
    pixel_format: &str,
    filter: &str,
    num_threads: usize,
    apply_rotation: bool,
    name: Option<&str>,
    filter_desc: Option<String>,
) -> PyResult<VideoFrames> {
    #[cfg(feature = "decode-ffmpeg")]
    {
        let mut opts = imp::video_options(
            timestamp,
            indices,
            step,
            played_at,
            width,
            height,
            pixel_format,
            filter,
            num_threads,
            apply_rotation,
        )?;
        opts.filter_desc = filter_desc;
        match imp::run_py(py, &Spec::Video(opts), src, name)? {
            MediaOut::Video(v) => Ok(v),
            MediaOut::Audio(_) => unreachable!("a video spec gives a video"),
        }
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = (py, src, timestamp, indices, step, played_at, width, height);
        let _ = (
            pixel_format,
            filter,
            num_threads,
            apply_rotation,
            name,
            filter_desc,
        );
        Err(no_ffmpeg("load_video"))
    }
}

/// Samples `num_clips` clips of `frames_per_clip` frames (`stride` frames apart) spread
/// evenly over a video, in one decode pass: `[N, T, H, W, C]` `uint8`. See
/// `spdl_rs.io.load_video_clips`.
#[pyfunction]
#[pyo3(signature = (src, num_clips, frames_per_clip, *, stride=1, width=None, height=None, pixel_format="rgb", filter="bicubic", num_threads=1, apply_rotation=true, name=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn load_video_clips(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    num_clips: usize,
    frames_per_clip: usize,
    stride: usize,
    width: Option<u32>,
    height: Option<u32>,
    pixel_format: &str,
    filter: &str,
    num_threads: usize,
    apply_rotation: bool,
    name: Option<&str>,
) -> PyResult<VideoFrames> {
    #[cfg(feature = "decode-ffmpeg")]
    {
        let sampling = imp::clip_sampling(num_clips, frames_per_clip, stride)?;
        let opts = imp::video_options(
            None,
            None,
            None,
            None,
            width,
            height,
            pixel_format,
            filter,
            num_threads,
            apply_rotation,
        )?;
        match imp::run_py(py, &Spec::Clips(sampling, opts), src, name)? {
            MediaOut::Video(v) => Ok(v),
            MediaOut::Audio(_) => unreachable!("a clip spec gives a video"),
        }
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = (py, src, num_clips, frames_per_clip, stride, width, height);
        let _ = (pixel_format, filter, num_threads, apply_rotation, name);
        Err(no_ffmpeg("load_video_clips"))
    }
}

/// Decodes the best audio stream of a file (a path or its bytes) into `[C, S]` `float32`,
/// with the GIL released. See `spdl_rs.io.load_audio`.
#[pyfunction]
#[pyo3(signature = (src, timestamp=None, *, sample_rate=None, num_channels=None, name=None, filter_desc=None))]
pub(crate) fn load_audio(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    timestamp: Option<(f64, f64)>,
    sample_rate: Option<u32>,
    num_channels: Option<u16>,
    name: Option<&str>,
    filter_desc: Option<String>,
) -> PyResult<AudioFrames> {
    #[cfg(feature = "decode-ffmpeg")]
    {
        let mut opts = imp::audio_options(sample_rate, num_channels, timestamp)?;
        opts.filter_desc = filter_desc;
        match imp::run_py(py, &Spec::Audio(opts), src, name)? {
            MediaOut::Audio(a) => Ok(a),
            MediaOut::Video(_) => unreachable!("an audio spec gives audio"),
        }
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = (
            py,
            src,
            timestamp,
            sample_rate,
            num_channels,
            name,
            filter_desc,
        );
        Err(no_ffmpeg("load_audio"))
    }
}

/// The stage behind `spdl_rs.ops.load_video` (paths) and `decode_video` (`from_bytes`).
#[pyfunction]
#[pyo3(name = "op_video", signature = (from_bytes, timestamp=None, *, indices=None, step=None, played_at=None, width=None, height=None, pixel_format="rgb", filter="bicubic", num_threads=1, apply_rotation=true, num_clips=None, frames_per_clip=None, stride=1, filter_desc=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn op_video(
    from_bytes: bool,
    timestamp: Option<(f64, f64)>,
    indices: Option<Vec<i64>>,
    step: Option<usize>,
    played_at: Option<Vec<f64>>,
    width: Option<u32>,
    height: Option<u32>,
    pixel_format: &str,
    filter: &str,
    num_threads: usize,
    apply_rotation: bool,
    num_clips: Option<usize>,
    frames_per_clip: Option<usize>,
    stride: usize,
    filter_desc: Option<String>,
) -> PyResult<NativeOp> {
    let name = if from_bytes {
        "decode_video"
    } else {
        "load_video"
    };
    #[cfg(feature = "decode-ffmpeg")]
    {
        let mut opts = imp::video_options(
            timestamp,
            indices,
            step,
            played_at,
            width,
            height,
            pixel_format,
            filter,
            num_threads,
            apply_rotation,
        )?;
        opts.filter_desc = filter_desc;
        // Checked now, not per item: a filter cannot follow picked frames or clips.
        let picked = matches!(
            opts.selection,
            spdl_io::FrameSelection::Indices(_) | spdl_io::FrameSelection::PlayedAt(_)
        );
        if opts.filter_desc.is_some() && (picked || num_clips.is_some()) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "filter_desc works with all frames, a timestamp window or a step, not with indices, played_at or clips",
            ));
        }
        let spec = match (num_clips, frames_per_clip) {
            (None, None) => Spec::Video(opts),
            (Some(n), Some(t)) => {
                if !matches!(opts.selection, spdl_io::FrameSelection::All) {
                    return Err(pyo3::exceptions::PyValueError::new_err(
                        "clips (num_clips, frames_per_clip) choose their own frames: do not also give timestamp, indices, step or played_at",
                    ));
                }
                Spec::Clips(imp::clip_sampling(n, t, stride)?, opts)
            }
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "give both num_clips and frames_per_clip, or neither",
                ))
            }
        };
        Ok(imp::op(spec, from_bytes, name))
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = (
            timestamp,
            indices,
            step,
            played_at,
            width,
            height,
            pixel_format,
        );
        let _ = (
            filter,
            num_threads,
            apply_rotation,
            num_clips,
            frames_per_clip,
            stride,
            filter_desc,
        );
        Err(no_ffmpeg(name))
    }
}

/// The stage behind `spdl_rs.ops.load_audio` (paths) and `decode_audio` (`from_bytes`).
#[pyfunction]
#[pyo3(name = "op_audio", signature = (from_bytes, timestamp=None, *, sample_rate=None, num_channels=None, filter_desc=None))]
pub(crate) fn op_audio(
    from_bytes: bool,
    timestamp: Option<(f64, f64)>,
    sample_rate: Option<u32>,
    num_channels: Option<u16>,
    filter_desc: Option<String>,
) -> PyResult<NativeOp> {
    let name = if from_bytes {
        "decode_audio"
    } else {
        "load_audio"
    };
    #[cfg(feature = "decode-ffmpeg")]
    {
        let mut opts = imp::audio_options(sample_rate, num_channels, timestamp)?;
        opts.filter_desc = filter_desc;
        Ok(imp::op(Spec::Audio(opts), from_bytes, name))
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = (timestamp, sample_rate, num_channels, filter_desc);
        Err(no_ffmpeg(name))
    }
}

/// The demuxed packets of one video stream (SPDL's `VideoPackets`), from `demux_video`; decode
/// them with `decode_packets`, on any thread, as often as needed. Holds the compressed data
/// only. `len()`: packets (one per frame in MP4/MKV/WebM/AVI); `timestamp`: the window they
/// were demuxed for (or `None`); `codec`: decoder name; `get_timestamps()`: packet pts in
/// seconds, decode order; `clone()` shares the data.
#[pyclass(frozen, module = "spdl_rs.io", name = "VideoPackets")]
pub(crate) struct VideoPackets {
    #[cfg(feature = "decode-ffmpeg")]
    inner: spdl_io::video::VideoPackets,
}

#[cfg(feature = "decode-ffmpeg")]
#[pymethods]
impl VideoPackets {
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The time window `(start, end)` in seconds the packets were demuxed for, or `None`.
    #[getter]
    fn timestamp(&self) -> Option<(f64, f64)> {
        self.inner.timestamp()
    }

    /// Decoder name, e.g. `"h264"`.
    #[getter]
    fn codec(&self) -> &str {
        &self.inner.info().codec
    }

    /// Presentation timestamps of the packets in seconds, in decode order.
    fn get_timestamps(&self) -> Vec<f64> {
        self.inner.timestamps()
    }

    /// A copy sharing the packets' data.
    fn clone(&self) -> VideoPackets {
        VideoPackets {
            inner: self.inner.clone(),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "VideoPackets(src={:?}, codec={:?}, num_packets={}, timestamp={:?})",
            self.inner.key(),
            self.inner.info().codec,
            self.inner.len(),
            self.inner.timestamp()
        )
    }
}

/// Demuxes the best video stream of `src` (path or bytes) into `VideoPackets`, with the GIL
/// released: all packets, or with `timestamp=(start, end)` those needed for the frames with
/// `start <= pts < end` (seeking to the key frame before `start`). SPDL's `demux_video`.
#[pyfunction]
#[pyo3(signature = (src, *, timestamp=None, name=None))]
pub(crate) fn demux_video(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    timestamp: Option<(f64, f64)>,
    name: Option<&str>,
) -> PyResult<VideoPackets> {
    #[cfg(feature = "decode-ffmpeg")]
    {
        use spdl_io::MediaSource;
        let src = extract_src(src)?;
        let key = name.unwrap_or("<bytes>");
        if let Src::Path(p) = &src {
            check_file(p)?;
        }
        let inner = py
            .detach(|| {
                let source = match &src {
                    Src::Path(p) => MediaSource::file(p),
                    Src::Backed(b) => MediaSource::bytes(key, b),
                    Src::Owned(v) => MediaSource::bytes(key, v),
                };
                spdl_io::video::demux_video(source, timestamp)
            })
            .map_err(crate::error::io_err)?;
        Ok(VideoPackets { inner })
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = (py, src, timestamp, name);
        Err(no_ffmpeg("demux_video"))
    }
}

/// Decodes `VideoPackets` into `VideoFrames` (`[T, H, W, C]` `uint8`) with the GIL released:
/// the frames of the packets' window (all without one), at most `num_frames` (`-1`: all),
/// through `filter_desc` and the output options of `load_video`. SPDL's `decode_packets`
/// followed by `convert_frames`.
#[pyfunction]
#[pyo3(signature = (packets, filter_desc=None, *, num_frames=-1, width=None, height=None, pixel_format="rgb", filter="bicubic", num_threads=1, apply_rotation=true))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_packets(
    py: Python<'_>,
    packets: &Bound<'_, VideoPackets>,
    filter_desc: Option<String>,
    num_frames: i64,
    width: Option<u32>,
    height: Option<u32>,
    pixel_format: &str,
    filter: &str,
    num_threads: usize,
    apply_rotation: bool,
) -> PyResult<VideoFrames> {
    #[cfg(feature = "decode-ffmpeg")]
    {
        let limit = match num_frames {
            -1 => None,
            n => Some(usize::try_from(n).map_err(|_| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "num_frames must be -1 (all) or >= 0, got {n}"
                ))
            })?),
        };
        let mut opts = imp::video_options(
            None,
            None,
            None,
            None,
            width,
            height,
            pixel_format,
            filter,
            num_threads,
            apply_rotation,
        )?;
        opts.filter_desc = filter_desc;
        let packets = packets.get();
        let v = py
            .detach(|| spdl_io::video::decode_packets(&packets.inner, &opts, limit))
            .map_err(crate::error::io_err)?;
        let shape = v.shape.to_vec();
        Ok(imp::video_out(
            v,
            shape,
            packets.inner.key().to_owned(),
            None,
        ))
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = (
            py,
            packets,
            filter_desc,
            num_frames,
            width,
            height,
            pixel_format,
        );
        let _ = (filter, num_threads, apply_rotation);
        Err(no_ffmpeg("decode_packets"))
    }
}

impl VideoPackets {
    /// The demuxed packets (what NVDEC decodes).
    #[cfg(feature = "decode-ffmpeg")]
    pub(crate) fn inner(&self) -> &spdl_io::video::VideoPackets {
        &self.inner
    }

    /// `(width, height)` of the coded frames (what a hardware decoder allocates for); `None`
    /// in a build without `decode-ffmpeg`, where no `VideoPackets` exist.
    pub(crate) fn coded_size(&self) -> Option<(usize, usize)> {
        #[cfg(feature = "decode-ffmpeg")]
        {
            let info = self.inner.info();
            Some((info.coded_width as usize, info.coded_height as usize))
        }
        #[cfg(not(feature = "decode-ffmpeg"))]
        {
            None
        }
    }
}
