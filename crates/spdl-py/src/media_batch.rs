//! SPDL's FFmpeg image path behind `spdl_rs.io.load_image` / `load_image_batch` when they are
//! called as SPDL calls them (`filter_desc=`, `pix_fmt=`, `demux_config=`, `strict=`, bytes):
//! each source is demuxed and decoded by FFmpeg and run through the filter string, so the
//! pixels, pixel formats and shapes are those of SPDL (and of `ffmpeg -vf`), not those of the
//! libjpeg-turbo / image-rs loader. Several sources are decoded on native threads with the GIL
//! released (SPDL decodes them one after the other). Built with `decode-ffmpeg` only.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyList;

use spdl_io::ffmpeg::frames::{stack_arrays, FrameArray, Frames, MediaKind};
use spdl_io::ffmpeg::packets::Packets;
use spdl_io::ffmpeg::{decoder, demux, DecodeConfig, DemuxConfig, MediaSource};
use spdl_io::DType;

use crate::buffer::CpuBuffer;
use crate::error::io_err;
use crate::media::{extract_src, Src};

/// Demuxes and decodes the one picture of `src` (named `key` when it is bytes) through
/// `filter_desc` (`None`: the decoder's own pixel format).
fn decode_one(
    src: &Src,
    key: &str,
    filter_desc: Option<&str>,
    demux_cfg: &DemuxConfig,
    decode_cfg: &DecodeConfig,
) -> spdl_io::Result<Frames> {
    let source = match src {
        Src::Path(p) => MediaSource::file(p),
        Src::Backed(b) => MediaSource::bytes(key, b),
        Src::Owned(v) => MediaSource::bytes(key, v),
    };
    let packets = demux::demux(source, MediaKind::Image, None, demux_cfg, None)?;
    decoder::decode_packets(&packets, filter_desc, decode_cfg, None)
}

/// A `CPUBuffer` over `a` (`uint8` moved; other element types copied once into memory
/// aligned for them).
fn buffer_of(a: FrameArray) -> CpuBuffer {
    if a.dtype == DType::U8 {
        return CpuBuffer::from_u8(a.data, a.shape, String::new());
    }
    CpuBuffer::from_bytes(a.dtype, a.shape, a.data, vec![String::new()], vec![None])
}

/// Threads for `n` sources: `num_threads`, else the CPUs (at most 8), never more than `n`.
fn threads_for(n: usize, num_threads: Option<usize>) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    num_threads.unwrap_or(cpus.min(8)).clamp(1, n.max(1))
}

/// Decodes every source in `items` on up to `threads` threads; result `i` is source `i`'s.
fn decode_all(
    items: &[(Src, String)],
    filter_desc: Option<&str>,
    demux_cfg: &DemuxConfig,
    decode_cfg: &DecodeConfig,
    threads: usize,
) -> Vec<spdl_io::Result<Frames>> {
    let run = |(src, key): &(Src, String)| decode_one(src, key, filter_desc, demux_cfg, decode_cfg);
    if threads <= 1 || items.len() <= 1 {
        return items.iter().map(run).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<spdl_io::Result<Frames>>>> =
        items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let out = run(item);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every slot is filled before the scope ends")
        })
        .collect()
}

/// The sources that failed: `(index in srcs, the exception)`.
type Failures = Vec<(usize, Py<PyAny>)>;

/// The FFmpeg image loader of `spdl_rs.io.load_image` / `load_image_batch` in SPDL's call
/// form (see `python/spdl_rs/io.py`): demuxes and decodes each of `srcs` (paths or bytes-like;
/// `names[i]` names bytes in errors) through `filter_desc` (`None`: the decoder's pixel format)
/// with `demux_config` / `decode_config`, on native threads with the GIL released.
///
/// Returns `(result, errors)`: `errors` is a list of `(index, exception)` for the sources that
/// failed (`FileNotFoundError` / `OSError` for a path, `ValueError` naming the source and the
/// reason for data); `result` is, with `stack=True`, one `CPUBuffer` of the decoded pictures
/// stacked on a new first axis (`[N, H, W, C]` for packed RGB, `[N, C, H, W]` for planar, `[N,
/// 1, H*3/2, W]` for `yuv420p` / `nv12`, `uint16` for 16-bit formats; `None` when none decoded),
/// else a list with one `CPUBuffer` (`[H, W, C]`, ...) or `None` per source. Raises
/// `ValueError` when the pictures differ in size or format and cannot be stacked.
#[pyfunction]
#[pyo3(signature = (srcs, filter_desc, demux_config=None, decode_config=None, *, names=None, stack=true, num_threads=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _load_images_ffmpeg(
    py: Python<'_>,
    srcs: Vec<Bound<'_, PyAny>>,
    filter_desc: Option<&str>,
    demux_config: Option<&Bound<'_, PyAny>>,
    decode_config: Option<&Bound<'_, PyAny>>,
    names: Option<Vec<Option<String>>>,
    stack: bool,
    num_threads: Option<usize>,
) -> PyResult<(Py<PyAny>, Failures)> {
    let demux_cfg = crate::media_config::demux_config_of(demux_config)?;
    let decode_cfg = crate::media_config::decode_config_of(decode_config)?;
    let mut errors: Vec<(usize, PyErr)> = Vec::new();
    // Sources that could be read, with their position in `srcs`.
    let mut items: Vec<(Src, String)> = Vec::with_capacity(srcs.len());
    let mut index: Vec<usize> = Vec::with_capacity(srcs.len());
    for (i, obj) in srcs.iter().enumerate() {
        let name = names
            .as_ref()
            .and_then(|n| n.get(i).cloned().flatten())
            .unwrap_or_else(|| "<bytes>".to_owned());
        match extract_src(obj) {
            Ok(src) => {
                items.push((src, name));
                index.push(i);
            }
            Err(e) => errors.push((i, e)),
        }
    }
    let threads = threads_for(items.len(), num_threads);
    let decoded = py.detach(|| decode_all(&items, filter_desc, &demux_cfg, &decode_cfg, threads));
    let mut frames: Vec<Option<Frames>> = (0..srcs.len()).map(|_| None).collect();
    for (i, r) in index.into_iter().zip(decoded) {
        match r {
            Ok(f) => frames[i] = Some(f),
            Err(e) => errors.push((i, io_err(e))),
        }
    }
    errors.sort_by_key(|(i, _)| *i);
    let errors = errors
        .into_iter()
        .map(|(i, e)| (i, e.into_value(py).into_any()))
        .collect();
    if stack {
        let ok: Vec<&Frames> = frames.iter().flatten().collect();
        if ok.is_empty() {
            return Ok((py.None(), errors));
        }
        let a = py.detach(|| stack_arrays(&ok)).map_err(io_err)?;
        return Ok((Py::new(py, buffer_of(a))?.into_any(), errors));
    }
    let list = PyList::empty(py);
    for f in frames {
        match f {
            Some(f) => {
                let a = py.detach(|| f.to_array()).map_err(io_err)?;
                list.append(Py::new(py, buffer_of(a))?)?;
            }
            None => list.append(py.None())?,
        }
    }
    Ok((list.into_any().unbind(), errors))
}

/// The loading half of `_load_media_spdl`: reads `(demux_config,
/// decode_config)` and `(src, name)`, then, GIL released, demuxes the default `kind` stream
/// in `timestamp`, decodes it through `filter_desc` and hands the packets, the frames and the
/// source's key to `finish`.
fn load_spdl<T: Send>(
    py: Python<'_>,
    (src, name): (&Bound<'_, PyAny>, Option<&str>),
    kind: MediaKind,
    timestamp: Option<(f64, f64)>,
    filter_desc: Option<&str>,
    (demux_config, decode_config): (Option<&Bound<'_, PyAny>>, Option<&Bound<'_, PyAny>>),
    finish: impl FnOnce(&Packets, Frames, String) -> spdl_io::Result<T> + Send,
) -> PyResult<T> {
    let demux_cfg = crate::media_config::demux_config_of(demux_config)?;
    let decode_cfg = crate::media_config::decode_config_of(decode_config)?;
    let src = extract_src(src)?;
    let key = name.unwrap_or("<bytes>");
    py.detach(|| {
        let source = match &src {
            Src::Path(p) => MediaSource::file(p),
            Src::Backed(b) => MediaSource::bytes(key, b),
            Src::Owned(v) => MediaSource::bytes(key, v),
        };
        let key = source.key().to_owned();
        let packets = demux::demux(source, kind, timestamp, &demux_cfg, None)?;
        let frames = decoder::decode_packets(&packets, filter_desc, &decode_cfg, None)?;
        finish(&packets, frames, key)
    })
    .map_err(io_err)
}

/// The loaders of `spdl_rs.io.load_audio` (`kind="audio"`) and `load_video`
/// (`kind="video"`) in SPDL's call form (`filter_desc=` given without spdl_rs's own keywords,
/// see `python/spdl_rs/io.py`): demuxes the default stream of that kind of `src` in the
/// `timestamp` window, decodes it through `filter_desc` (`None`: the decoder's own sample or
/// pixel format) with `demux_config` / `decode_config`, GIL released.
///
/// Audio: a `DecodedAudio` whose `waveform` is SPDL's buffer: `[C, S]` for planar sample
/// formats (`fltp`, `s16p`, ...), `[S, C]` for packed ones (`s16`, `flt`, ...), in the
/// format's own type (`int16` for `s16`, `float32` for `flt`, ...). Video: the frames
/// converted as SPDL's `convert_frames` does, a `DecodedVideo` whose `frames` is that buffer
/// (`[T, H, W, C]` for packed RGB, `[T, C, H, W]` for planar formats, `[T, 1, H*3/2, W]` for
/// `yuv420p`, ...), `pts` the filtered frames' times, `indices` `None`, frames never rotated
/// (as SPDL).
///
/// Raises `FileNotFoundError` / `OSError` for a path, `ValueError` naming the source for data
/// that is not usable audio or video (a video stream that decodes to no frame included) or a
/// filter description FFmpeg rejects, or for another `kind`; `TypeError` for another `src`
/// type.
#[pyfunction]
#[pyo3(signature = (kind, src, timestamp, filter_desc, demux_config=None, decode_config=None, name=None))]
#[allow(clippy::too_many_arguments)] // one per argument of the Python call it serves
pub(crate) fn _load_media_spdl(
    py: Python<'_>,
    kind: &str,
    src: &Bound<'_, PyAny>,
    timestamp: Option<(f64, f64)>,
    filter_desc: Option<&str>,
    demux_config: Option<&Bound<'_, PyAny>>,
    decode_config: Option<&Bound<'_, PyAny>>,
    name: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let configs = (demux_config, decode_config);
    let src = (src, name);
    match kind {
        "audio" => {
            let out = load_spdl(
                py,
                src,
                MediaKind::Audio,
                timestamp,
                filter_desc,
                configs,
                |packets, frames, key| {
                    let array = frames.to_array()?;
                    let start = frames.timestamps().first().copied().unwrap_or(0.0);
                    let header = (
                        frames.num_channels(),
                        frames.num_samples(),
                        frames.sample_rate(),
                    );
                    Ok((array, header, start, packets.codec().name(), key))
                },
            );
            let (array, (channels, samples, rate), start, codec, key) = out?;
            let buffer = buffer_of(array);
            let audio = crate::media::AudioFrames::from_parts(
                buffer, channels, samples, rate, start, codec, key,
            );
            Ok(Py::new(py, audio)?.into_any())
        }
        "video" => {
            let out = load_spdl(
                py,
                src,
                MediaKind::Video,
                timestamp,
                filter_desc,
                configs,
                |packets, frames, key| {
                    let array = frames.to_array().map_err(|e| e.with_key(&key))?;
                    let codec = packets.codec();
                    Ok((
                        array,
                        frames.timestamps(),
                        codec.rotation(),
                        codec.name(),
                        key,
                    ))
                },
            );
            let (array, pts, rotation, codec, key) = out?;
            let shape = array.shape.clone();
            let video = crate::media::VideoFrames::from_parts(
                buffer_of(array),
                shape,
                pts,
                rotation,
                codec,
                key,
            );
            Ok(Py::new(py, video)?.into_any())
        }
        k => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "unknown media kind {k:?}: expected \"audio\" or \"video\""
        ))),
    }
}
