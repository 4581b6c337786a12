//! SPDL's FFmpeg frame objects in `spdl_rs.io`: `VideoFrames`, `AudioFrames`, `ImageFrames`
//! (decoded frames kept as FFmpeg frames, from `decode_packets`, a `Decoder` or a
//! `FilterGraph`), `convert_frames` / `convert_array` to zero-copy `CPUBuffer`s and
//! `create_reference_video_frame` / `create_reference_audio_frame`.
//!
//! Built with the `decode-ffmpeg` feature only. The frames are `spdl_io::ffmpeg::frames::Frames`
//! shared by `Arc`: slicing and `clone()` reference the same FFmpeg buffers.

use std::sync::Arc;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PySlice;

use spdl_io::ffmpeg::frames::{stack_arrays, FrameArray, FrameMemory, Frames, MediaKind};
use spdl_io::DType;

use crate::buffer::CpuBuffer;
use crate::error::{io_err, type_name};
use crate::media_props::{media_classes, media_pymethods};

media_classes! {
    Arc<Frames>;
    /// Decoded video frames (FFmpeg frames, not yet an array). As SPDL's `spdl.io.VideoFrames`:
    /// `num_frames` / `len()`, `num_planes`, `width`, `height`, `pix_fmt`, `time_base`,
    /// `get_pts()` (in `time_base` units), `get_timestamps()` (seconds), `frames[i]` (an
    /// `ImageFrames`), `frames[a:b]` / `frames[[i, j]]` (a `VideoFrames`), `clone()`.
    /// `convert_frames(frames)` gives the pixels: `[N, H, W, C]` `uint8` for packed RGB formats,
    /// `[N, C, H, W]` for planar ones, `[N, 1, H*3/2, W]` for `yuv420p` / `nv12`.
    VideoFrames,
    /// Decoded audio frames. As SPDL's `spdl.io.AudioFrames`: `num_frames` / `len()` (samples
    /// per channel, as SPDL counts them), `sample_rate`, `num_channels`, `sample_fmt`, `num_samples`,
    /// `time_base`, `get_pts()`, `get_timestamps()`, `clone()`. `convert_frames(frames)` gives
    /// `[C, S]` for planar sample formats (`fltp`, the default after `decode_packets`) and
    /// `[S, C]` for packed ones, `float32` (other sample types raise `ValueError`: convert with
    /// `aformat=sample_fmts=fltp`).
    AudioFrames,
    /// One decoded picture. As SPDL's `spdl.io.ImageFrames`: `num_planes`, `width`, `height`,
    /// `pix_fmt`, `metadata` (FFmpeg frame metadata), `pts` (seconds, for a frame taken out of a
    /// `VideoFrames`), `clone()`. `convert_frames(frame)` gives `[H, W, C]` (packed RGB) or
    /// `[C, H, W]` (planar) `uint8`.
    ImageFrames;
    /// The Python frame object of `frames`' kind.
    frames_to_py;
    /// The frames of a `VideoFrames`, `AudioFrames` or `ImageFrames`; `TypeError` otherwise
    /// (also once consumed).
    frames_of;
    /// As `frames_of`, and marks the object consumed (SPDL moves frames into
    /// `convert_frames`: later calls raise `TypeError`).
    take_frames;
}

media_pymethods! {
    impl VideoFrames, Frames from |f| &f.inner,
    [num_frames, num_planes, width, height, pix_fmt, time_base, get_pts, clone]
    repr [num_frames, width, height, pix_fmt] {
        /// `frames[i]` -> `ImageFrames`; `frames[a:b:c]` or `frames[[i, j, ...]]` ->
        /// `VideoFrames` (sharing the data). `IndexError` out of range.
        fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
            let n = self.inner.len();
            if let Ok(i) = key.extract::<isize>() {
                let j = if i < 0 { i + n as isize } else { i };
                if j < 0 || j as usize >= n {
                    return Err(PyIndexError::new_err(format!(
                        "frame index {i} out of range for {n} frames"
                    )));
                }
                let f = self
                    .inner
                    .select(&[j as usize], MediaKind::Image)
                    .map_err(io_err)?;
                return frames_to_py(py, f);
            }
            let idx: Vec<usize> = if let Ok(s) = key.cast::<PySlice>() {
                let ind = s.indices(n as isize)?;
                (0..ind.slicelength)
                    .map(|k| (ind.start + k as isize * ind.step) as usize)
                    .collect()
            } else {
                let list: Vec<isize> = key.extract().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "VideoFrames indices must be an int, a slice or a sequence of ints, got {}",
                        type_name(key)
                    ))
                })?;
                list.into_iter()
                    .map(|i| {
                        let j = if i < 0 { i + n as isize } else { i };
                        usize::try_from(j).ok().filter(|&j| j < n).ok_or_else(|| {
                            PyIndexError::new_err(format!(
                                "frame index {i} out of range for {n} frames"
                            ))
                        })
                    })
                    .collect::<PyResult<_>>()?
            };
            let f = self.inner.select(&idx, MediaKind::Video).map_err(io_err)?;
            frames_to_py(py, f)
        }
    }
}

media_pymethods! {
    impl AudioFrames, Frames from |f| &f.inner,
    [sample_rate, num_channels, num_samples, sample_fmt, time_base, get_pts, clone]
    repr [num_frames, sample_rate, num_channels, sample_fmt] {
        /// The number of samples per channel, as SPDL's `AudioFrames.num_frames` (SPDL counts
        /// an audio frame per sample instant, not per FFmpeg frame).
        #[getter]
        fn num_frames(&self) -> usize {
            self.inner.num_samples()
        }

        /// As `num_frames`.
        fn __len__(&self) -> usize {
            self.inner.num_samples()
        }
    }
}

media_pymethods! {
    impl ImageFrames, Frames from |f| &f.inner, [num_planes, width, height, pix_fmt, clone]
    repr [width, height, pix_fmt] {
        /// FFmpeg frame metadata (what filters such as `cropdetect` attach).
        #[getter]
        fn metadata(&self) -> std::collections::BTreeMap<String, String> {
            self.inner.metadata().into_iter().collect()
        }

        /// Presentation time in seconds (meaningful for a frame taken out of a `VideoFrames`).
        #[getter]
        fn pts(&self) -> f64 {
            self.inner.timestamps().first().copied().unwrap_or(0.0)
        }
    }
}

/// A `CPUBuffer` holding `a`: `uint8` pixels / samples are moved; samples of the other types
/// are copied once into memory aligned for their dtype.
fn buffer_of(a: FrameArray, key: String) -> PyResult<CpuBuffer> {
    if a.dtype == DType::U8 {
        return Ok(CpuBuffer::from_u8(a.data, a.shape, key));
    }
    Ok(CpuBuffer::from_bytes(
        a.dtype,
        a.shape,
        a.data,
        vec![key],
        vec![None],
    ))
}

fn check_storage(storage: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    if storage.is_some_and(|s| !s.is_none()) {
        return Err(PyTypeError::new_err(
            "storage= is not supported by spdl_rs (no CPUStorage): leave it None",
        ));
    }
    Ok(())
}

/// SPDL's `convert_frames`: the frames as one zero-copy `CPUBuffer` (a copy out of FFmpeg's
/// buffers, made with the GIL released). `VideoFrames` -> `[N, H, W, C]` (packed RGB) /
/// `[N, C, H, W]` (planar) / `[N, 1, H*3/2, W]` (`yuv420p`, `nv12`) `uint8`; `ImageFrames` ->
/// the same without `N`; `AudioFrames` -> `[C, S]` (planar) / `[S, C]` (packed) `float32`; a
/// list of frame objects -> those stacked on a new first axis `[B, ...]`.
///
/// Raises `ValueError` for frames of another pixel format (add `format=pix_fmts=rgb24` to the
/// filter), other audio sample types, an empty list or frames of different shapes;
/// `TypeError` for other objects or a `storage` (spdl_rs has no `CPUStorage`).
#[pyfunction]
#[pyo3(signature = (frames, storage=None))]
pub(crate) fn convert_frames(
    py: Python<'_>,
    frames: &Bound<'_, PyAny>,
    storage: Option<&Bound<'_, PyAny>>,
) -> PyResult<CpuBuffer> {
    check_storage(storage)?;
    let is_frames = frames.cast::<VideoFrames>().is_ok()
        || frames.cast::<AudioFrames>().is_ok()
        || frames.cast::<ImageFrames>().is_ok();
    if is_frames {
        let one = take_frames(frames)?;
        let a = py.detach(|| one.to_array()).map_err(io_err)?;
        return buffer_of(a, String::new());
    }
    let list: Vec<Bound<'_, PyAny>> = frames.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "convert_frames expects frames or a list of frames, got {}",
            type_name(frames)
        ))
    })?;
    let all: Vec<Arc<Frames>> = list.iter().map(frames_of).collect::<PyResult<_>>()?;
    for f in &list {
        take_frames(f)?;
    }
    let a = py
        .detach(|| stack_arrays(&all.iter().map(|f| &**f).collect::<Vec<_>>()))
        .map_err(io_err)?;
    buffer_of(a, String::new())
}

/// SPDL's `convert_array`: a 1-D `int64` NumPy array (e.g. class labels) as a `CPUBuffer`.
/// spdl_rs's `CPUBuffer` holds `uint8`, `uint16` and `float32` only, so the values are
/// checked to fit `float32` exactly (`|v| <= 2**24`) and stored as `float32`; larger values
/// raise `ValueError`. `storage` must be `None` (`TypeError` otherwise).
#[pyfunction]
#[pyo3(signature = (vals, storage=None))]
pub(crate) fn convert_array(
    vals: &Bound<'_, PyAny>,
    storage: Option<&Bound<'_, PyAny>>,
) -> PyResult<CpuBuffer> {
    check_storage(storage)?;
    let buf = PyBuffer::<i64>::get(vals)
        .map_err(|e| PyTypeError::new_err(format!("convert_array expects an int64 array: {e}")))?;
    let v = buf.to_vec(vals.py())?;
    let data = v
        .iter()
        .map(|&x| {
            if x.unsigned_abs() <= 1 << 24 {
                Ok(x as f32)
            } else {
                Err(PyValueError::new_err(format!(
                    "convert_array: {x} does not fit float32 exactly"
                )))
            }
        })
        .collect::<PyResult<Vec<f32>>>()?;
    let shape = buf.shape().to_vec();
    Ok(CpuBuffer::from_f32(data, shape, String::new()))
}

/// A C-contiguous Python buffer that frames refer to in place; releasing it (with the GIL,
/// as `PyBuffer`'s drop does) lets the exporting array go.
pub(crate) struct ArrayMemory(PyBuffer<u8>);

// SAFETY: a C-contiguous buffer's pointer and length do not change while it is held, and the
// exporter keeps the bytes alive until the buffer is released (on drop).
unsafe impl FrameMemory for ArrayMemory {
    fn as_ptr_len(&self) -> (*const u8, usize) {
        (self.0.buf_ptr() as *const u8, self.0.len_bytes())
    }
}

/// The bytes of the C-contiguous buffer `obj` (a `memoryview`, `bytes`, ...) without a copy,
/// held (and the exporter kept alive) until the returned value is dropped. `TypeError` for
/// an object without a buffer or a non-contiguous one, naming `what`.
pub(crate) fn buffer_memory(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<ArrayMemory> {
    let buf = match PyBuffer::<u8>::get(obj) {
        Ok(b) => b,
        // A buffer of another item type: its bytes.
        Err(_) => {
            let mv = pyo3::types::PyMemoryView::from(obj)
                .map_err(|e| PyTypeError::new_err(format!("{what} expects a memoryview: {e}")))?;
            PyBuffer::<u8>::get(&mv.call_method1("cast", ("B",))?)
                .map_err(|e| PyTypeError::new_err(format!("{what} expects a memoryview: {e}")))?
        }
    };
    if !buf.is_c_contiguous() {
        return Err(PyTypeError::new_err(format!(
            "{what} expects a contiguous buffer"
        )));
    }
    Ok(ArrayMemory(buf))
}

/// `array` as C-contiguous bytes without a copy when it is C-contiguous already (else one
/// copy, by `numpy.ascontiguousarray`), viewed as `uint8`; with its shape in elements.
fn array_memory(array: &Bound<'_, PyAny>, what: &str) -> PyResult<(ArrayMemory, Vec<usize>)> {
    let np = array.py().import("numpy")?;
    let arr = np.call_method1("ascontiguousarray", (array,))?;
    let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
    let bytes = arr.call_method1("view", ("uint8",))?;
    let buf = PyBuffer::<u8>::get(&bytes)
        .map_err(|e| PyTypeError::new_err(format!("{what} expects a NumPy array: {e}")))?;
    Ok((ArrayMemory(buf), shape))
}

/// SPDL's `create_reference_video_frame`: `VideoFrames` referring to a `uint8` array laid out
/// as `convert_frames` gives them for `pix_fmt` (`[N, H, W, 3]` for `rgb24`, `[N, H, W]` (SPDL's
/// shape) or `[N, H, W, 1]` for `gray8`, `[N, 3, H, W]` for `yuv444p`, ...; `gray16` / `gray16le` /
/// `gray16be` take an `int16` or `uint16` `[N, H, W]` array), frame `i` with pts `pts + i` in time base
/// `1 / frame_rate`. As SPDL, the frames point into the array (no copy; a non-contiguous array
/// is made contiguous first) and keep it alive; they are read-only (a filter or encoder that
/// writes copies first). For filter graphs and encoders. Raises `TypeError` for an array of
/// another dtype, `ValueError` for a shape that does not fit `pix_fmt` or an unknown format.
#[pyfunction]
#[pyo3(signature = (array, *, pix_fmt, frame_rate, pts))]
pub(crate) fn create_reference_video_frame(
    array: &Bound<'_, PyAny>,
    pix_fmt: &str,
    frame_rate: (i32, i32),
    pts: i64,
) -> PyResult<VideoFrames> {
    let dtype: String = array
        .py()
        .import("numpy")?
        .call_method1("asarray", (array,))?
        .getattr("dtype")?
        .getattr("name")?
        .extract()?;
    // As SPDL: 16-bit samples for the 16-bit gray formats, 8-bit for the others.
    let want: &[&str] = if pix_fmt.starts_with("gray16") {
        &["int16", "uint16"]
    } else {
        &["uint8"]
    };
    if !want.contains(&dtype.as_str()) {
        return Err(PyTypeError::new_err(format!(
            "create_reference_video_frame with pix_fmt {pix_fmt:?} expects a {} array, got {dtype}",
            want.join(" or ")
        )));
    }
    let (memory, shape) = array_memory(array, "create_reference_video_frame")?;
    let f = Frames::reference_video_array(Box::new(memory), &shape, pix_fmt, frame_rate, pts)
        .map_err(io_err)?;
    Ok(VideoFrames {
        inner: Arc::new(f),
        consumed: Default::default(),
    })
}

/// SPDL's `create_reference_audio_frame`: one `AudioFrames` frame referring to a 2-D array laid
/// out as `convert_frames` gives it for `sample_fmt` (`[C, S]` planar such as `fltp` / `s16p`,
/// `[S, C]` packed such as `flt` / `s16`; the array's dtype must match the format), with pts
/// `pts` in time base `1 / sample_rate`. As SPDL, the frame points into the array (no copy; a
/// non-contiguous array is made contiguous first; planar audio of more than 8 channels is
/// copied) and keeps it alive. Raises `ValueError` for a mismatch.
#[pyfunction]
#[pyo3(signature = (array, *, sample_fmt, sample_rate, pts))]
pub(crate) fn create_reference_audio_frame(
    array: &Bound<'_, PyAny>,
    sample_fmt: &str,
    sample_rate: u32,
    pts: i64,
) -> PyResult<AudioFrames> {
    let arr = array
        .py()
        .import("numpy")?
        .call_method1("asarray", (array,))?;
    let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
    if shape.len() != 2 {
        return Err(PyValueError::new_err(format!(
            "create_reference_audio_frame expects a 2-D array, got shape {shape:?}"
        )));
    }
    let base = sample_fmt.trim_end_matches('p');
    let want = match base {
        "u8" => "uint8",
        "s16" => "int16",
        "s32" => "int32",
        "s64" => "int64",
        "flt" => "float32",
        "dbl" => "float64",
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown sample format {sample_fmt:?}"
            )))
        }
    };
    let dtype: String = arr.getattr("dtype")?.getattr("name")?.extract()?;
    if dtype != want {
        return Err(PyValueError::new_err(format!(
            "sample_fmt {sample_fmt:?} needs a {want} array, got {dtype}"
        )));
    }
    let (memory, _) = array_memory(array, "create_reference_audio_frame")?;
    let f = Frames::reference_audio_array(
        Box::new(memory),
        [shape[0], shape[1]],
        sample_fmt,
        sample_rate,
        pts,
    )
    .map_err(io_err)?;
    Ok(AudioFrames {
        inner: Arc::new(f),
        consumed: Default::default(),
    })
}

/// Runs the FFmpeg filter string `filter_desc` on decoded 8-bit images (`[H, W, 3]` RGB or
/// `[H, W, 1]` gray arrays, e.g. from `load_image`), with the GIL released: a list of
/// `CPUBuffer`s, or with `stack=True` one `[N, H', W', C]` buffer (`ValueError` when the
/// outputs differ in size). Backs `load_image(filter_desc=)` / `load_image_batch(filter_desc=)`.
/// Raises `ValueError` naming the description FFmpeg rejects.
#[pyfunction]
#[pyo3(signature = (images, filter_desc, stack=false))]
pub(crate) fn _filter_images(
    py: Python<'_>,
    images: Vec<Bound<'_, PyAny>>,
    filter_desc: &str,
    stack: bool,
) -> PyResult<Py<PyAny>> {
    let mut inputs = Vec::with_capacity(images.len());
    for obj in &images {
        let buf = PyBuffer::<u8>::get(obj)
            .map_err(|e| PyTypeError::new_err(format!("expected a uint8 image array: {e}")))?;
        let shape = buf.shape().to_vec();
        if shape.len() != 3 {
            return Err(PyValueError::new_err(format!(
                "expected an [H, W, C] image, got shape {shape:?}"
            )));
        }
        let img = spdl_io::Image::from_u8(buf.to_vec(py)?, shape[1], shape[0], shape[2])
            .ok_or_else(|| PyValueError::new_err("image size mismatch"))?;
        inputs.push(img);
    }
    let outs = py
        .detach(|| {
            inputs
                .iter()
                .map(|i| spdl_io::ffmpeg::image_filter::filter_image(i, filter_desc))
                .collect::<spdl_io::Result<Vec<_>>>()
        })
        .map_err(io_err)?;
    if stack {
        let Some(first) = outs.first() else {
            return Err(PyValueError::new_err("no images to stack"));
        };
        let (h, w, c) = (first.height, first.width, first.channels);
        let mut data = Vec::with_capacity(outs.len() * h * w * c);
        for o in &outs {
            if (o.height, o.width, o.channels) != (h, w, c) {
                return Err(PyValueError::new_err(format!(
                    "filter_desc gave images of different sizes ({}x{} and {w}x{h}); end it with a scale to one size",
                    o.width, o.height
                )));
            }
            if let spdl_io::PixelData::U8(v) = &o.data {
                data.extend_from_slice(v);
            }
        }
        let buf = CpuBuffer::from_u8(data, vec![outs.len(), h, w, c], String::new());
        return Ok(Py::new(py, buf)?.into_any());
    }
    let list = pyo3::types::PyList::empty(py);
    for o in outs {
        let shape = vec![o.height, o.width, o.channels];
        let spdl_io::PixelData::U8(v) = o.data else {
            return Err(PyValueError::new_err("unexpected 16-bit output"));
        };
        list.append(Py::new(py, CpuBuffer::from_u8(v, shape, String::new()))?)?;
    }
    Ok(list.into_any().unbind())
}
