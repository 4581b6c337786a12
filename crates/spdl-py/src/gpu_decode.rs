//! GPU decoding entry points of `spdl_rs.io` (the Python wrappers in `spdl_rs/_gpu.py` give
//! them SPDL's signatures): nvJPEG (`decode_image_nvjpeg`, `load_image_batch_nvjpeg`, the
//! CPU-fallback decision and counters), NVDEC (opened at run time; the checks before any
//! device allocation), and NV12 to planar RGB/BGR on the host.
//!
//! Errors: `RuntimeError` when the GPU path cannot run (feature not built, no driver, library
//! missing: the message names which), `ValueError` for bad arguments or a request over the
//! size limits.
//!
//! Built with the `cuda` feature only (spdl-cuda is linked only then); without it each of these
//! names raises `RuntimeError` saying how to rebuild (`cuda::GPU_ONLY`).

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::buffer::CpuBuffer;
use crate::cuda::{CudaBuffer, GpuError};
use spdl_cuda::nvdec::NvdecConfig;
#[cfg(feature = "decode-ffmpeg")]
use spdl_io::ffmpeg::packets::Packets;

/// A C-contiguous buffer-protocol object's bytes, held while in use.
struct Bytes(PyUntypedBuffer);

impl Bytes {
    fn new(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Self> {
        let buf =
            PyUntypedBuffer::get(obj).map_err(|_| {
                PyTypeError::new_err(format!(
                "{what} must be bytes-like (bytes, bytearray, memoryview, a uint8 array), got {}",
                obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ))
            })?;
        if !buf.is_c_contiguous() {
            return Err(PyBufferError::new_err(format!(
                "{what} must be a C-contiguous buffer"
            )));
        }
        Ok(Bytes(buf))
    }

    fn as_slice(&self) -> &[u8] {
        let len = self.0.len_bytes();
        if len == 0 {
            return &[];
        }
        // SAFETY: the export keeps `len` bytes at `buf_ptr` alive and unmoved while held; a
        // concurrent write by another thread can only change the (untrusted) bytes read.
        unsafe { std::slice::from_raw_parts(self.0.buf_ptr().cast::<u8>(), len) }
    }
}

/// Why the nvJPEG batch loaders would decode `data` on the CPU instead of the GPU, or `None`
/// when the GPU takes it: `"progressive JPEG (SOF2)"`, `"arithmetic-coded JPEG"`,
/// `"4 components (CMYK/YCCK)"`, `"corrupt JPEG: ..."`, or the size-limit message (default
/// limits: 178,956,970 pixels, 1 GiB). A header scan only (no GPU, no decode); each such file
/// is counted in `nvjpeg_stats()["cpu_fallbacks"]` when decoded.
#[pyfunction]
pub(crate) fn nvjpeg_fallback_reason(data: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let bytes = Bytes::new(data, "data")?;
    Ok(
        spdl_cuda::jpeg_probe::classify(bytes.as_slice(), &spdl_io::Limits::default())
            .err()
            .map(|r| r.to_string()),
    )
}

/// The native half of `decode_image_nvjpeg` / `load_image_batch_nvjpeg`: decodes `data`
/// (bytes-like JPEGs; `keys` name them in errors) on device `device_index` into one
/// `CUDABuffer` `[N, 3, H, W]` `uint8`, planes in RGB order or BGR with `bgr` (`[3, H, W]`
/// with `single`), SPDL's layout; resized to `scale_width x scale_height` when both are
/// positive (else every image must have the first one's size). Files the GPU does not take
/// are decoded on the CPU and counted.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (data, keys, device_index, scale_width, scale_height, single, bgr=false))]
pub(crate) fn _decode_image_nvjpeg(
    py: Python<'_>,
    data: Vec<Bound<'_, PyAny>>,
    keys: Vec<String>,
    device_index: usize,
    scale_width: i64,
    scale_height: i64,
    single: bool,
    bgr: bool,
) -> PyResult<CudaBuffer> {
    let size = match (scale_width, scale_height) {
        (w, h) if w > 0 && h > 0 => Some((w as usize, h as usize)),
        (w, h) if w <= 0 && h <= 0 => None,
        (w, h) => {
            return Err(PyValueError::new_err(format!(
                "scale_width ({w}) and scale_height ({h}) must both be positive, or both -1"
            )))
        }
    };
    if data.is_empty() {
        return Err(PyValueError::new_err("decode_image_nvjpeg: no image given"));
    }
    if keys.len() != data.len() {
        return Err(PyValueError::new_err("keys and data differ in length"));
    }
    let held: Vec<Bytes> = data
        .iter()
        .map(|d| Bytes::new(d, "src"))
        .collect::<PyResult<_>>()?;
    #[cfg(feature = "decode-nvjpeg")]
    {
        let batch = py.detach(|| -> Result<spdl_cuda::DeviceBatch, GpuError> {
            let jpegs: Vec<(&str, &[u8])> = keys
                .iter()
                .zip(&held)
                .map(|(k, b)| (k.as_str(), b.as_slice()))
                .collect();
            let dec = crate::cuda::nvjpeg_decoder(device_index)?;
            let pix_fmt = if bgr {
                spdl_cuda::nvjpeg::PixFmt::Bgr
            } else {
                spdl_cuda::nvjpeg::PixFmt::Rgb
            };
            let (batch, report) = dec.decode_batch_planar(&jpegs, size, pix_fmt)?;
            for f in &report.fallbacks {
                tracing::debug!(key = %f.key, reason = %f.reason, "nvJPEG: decoded on the CPU");
            }
            Ok(batch)
        })?;
        let [n, c, h, w] = batch.shape;
        let shape = if single {
            vec![c as i64, h as i64, w as i64]
        } else {
            vec![n as i64, c as i64, h as i64, w as i64]
        };
        Ok(CudaBuffer::from_batch(batch, shape))
    }
    #[cfg(not(feature = "decode-nvjpeg"))]
    {
        let _ = (py, held, device_index, size, single, bgr);
        Err(pyo3::exceptions::PyRuntimeError::new_err(
            "nvJPEG unavailable: spdl_rs was built without nvJPEG (the `decode-nvjpeg` feature \
             of crates/spdl-py; built_with_nvjpeg() is False)",
        ))
    }
}

/// The native half of `NvDecDecoder`: an NVDEC request (device, crop `[left, top, right,
/// bottom]` in pixels, scale `(width, height)`, `(-1, -1)`: keep), checked when it meets a
/// codec (`open`) or packets (`decode`, `session`).
#[pyclass(frozen, module = "spdl_rs._native", name = "_NvdecSpec")]
pub(crate) struct NvdecSpec {
    device_index: usize,
    crop: [usize; 4],
    scale: (i64, i64),
}

impl NvdecSpec {
    /// The NVDEC configuration for a `codec` of coded size `width x height`, cropped then
    /// scaled; `ValueError` for a scale with one side given, or a request
    /// `NvdecConfig::check` refuses (against the default limits).
    fn config(&self, codec: String, width: usize, height: usize) -> PyResult<NvdecConfig> {
        let scale = match self.scale {
            (w, h) if w > 0 && h > 0 => Some((w as usize, h as usize)),
            (w, h) if w < 0 && h < 0 => None,
            (w, h) => {
                return Err(PyValueError::new_err(format!(
                    "scale_width ({w}) and scale_height ({h}) must both be positive, or both -1"
                )))
            }
        };
        let config = NvdecConfig {
            codec,
            width,
            height,
            crop: self.crop,
            scale,
        };
        config
            .check(&spdl_io::Limits::default())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(config)
    }

    /// A decoder for `config` on this device, checked against the default limits (call with
    /// the GIL released).
    fn decoder(&self, config: NvdecConfig) -> spdl_cuda::Result<spdl_cuda::nvdec::NvdecDecoder> {
        spdl_cuda::nvdec::NvdecDecoder::new(self.device_index, config, &spdl_io::Limits::default())
    }
}

#[pymethods]
impl NvdecSpec {
    #[new]
    fn new(device_index: usize, crop: [usize; 4], scale: (i64, i64)) -> Self {
        NvdecSpec {
            device_index,
            crop,
            scale,
        }
    }

    /// The check of `nvdec_decoder`: the request for a `codec` of coded size `width x height`
    /// (codec, crop, and the coded and output sizes against the default limits, before any
    /// device allocation), then the NVDEC library, then the driver; returns when a decoder
    /// could be opened. `ValueError` for the request; `RuntimeError` `"NVDEC unavailable:
    /// libnvcuvid.so.1 not found ..."`, `"no CUDA driver: ..."`, or `"unsupported: ..."` in a
    /// build without `decode-nvdec`.
    fn open(&self, py: Python<'_>, codec: String, width: usize, height: usize) -> PyResult<()> {
        let config = self.config(codec, width, height)?;
        py.detach(|| self.decoder(config))
            .map(|_| ())
            .map_err(|e| GpuError::from(e).into())
    }

    /// `NvDecDecoder.decode_packets` and `decode_packets_nvdec` (streaming is `session`): the
    /// `VideoPackets` decoded by NVDEC (H.264/HEVC converted to Annex-B first), cropped then
    /// scaled, as a list of `(CUDABuffer [n, H + H/2, W] uint8 NV12, [pts seconds])`,
    /// `frames_per_batch` frames each (the last shorter). Errors: `TypeError` for other
    /// objects, those of `open`, then `RuntimeError` naming the reason: sizes over the limits
    /// in the bitstream itself, a malformed packet, what this GPU's NVDEC does not decode, or
    /// the failed `cuvid*` / CUDA call.
    fn decode(
        &self,
        py: Python<'_>,
        packets: &Bound<'_, PyAny>,
        frames_per_batch: usize,
    ) -> PyResult<Vec<(CudaBuffer, Vec<f64>)>> {
        #[cfg(all(feature = "decode-nvdec", feature = "decode-ffmpeg"))]
        {
            let (pk, dec, mut annexb) = self.open_for_packets(py, packets)?;
            let out = py.detach(|| -> Result<_, GpuError> {
                let owned = nvdec_input(&pk, annexb.as_mut())?;
                let refs: Vec<(&[u8], i64)> =
                    owned.iter().map(|(b, t)| (b.as_slice(), *t)).collect();
                Ok(dec.decode(&refs, frames_per_batch.max(1))?)
            })?;
            Ok(nvdec_batches(out, seconds_per_tick(&pk)))
        }
        #[cfg(not(all(feature = "decode-nvdec", feature = "decode-ffmpeg")))]
        {
            let _ = (py, packets, frames_per_batch);
            Err(no_nvdec())
        }
    }

    /// A streaming NVDEC session for `packets`' codec and coded size (the first chunk of a
    /// video; its extradata sets up the Annex-B conversion), handing out batches of
    /// `frames_per_batch` frames. Checks and errors in `open`'s order (`ValueError` for the
    /// request, then `RuntimeError` `"NVDEC unavailable: ..."` / `"no CUDA driver: ..."`), then
    /// `RuntimeError` when the parser cannot be made. Nothing is fed yet.
    fn session(
        &self,
        py: Python<'_>,
        packets: &Bound<'_, PyAny>,
        frames_per_batch: usize,
    ) -> PyResult<NvdecSession> {
        if frames_per_batch == 0 {
            return Err(PyValueError::new_err("num_frames must be >= 1, got 0"));
        }
        #[cfg(all(feature = "decode-nvdec", feature = "decode-ffmpeg"))]
        {
            let (pk, dec, annexb) = self.open_for_packets(py, packets)?;
            let live = py.detach(|| -> Result<_, GpuError> {
                Ok(LiveSession {
                    annexb,
                    session: dec.session()?,
                    codec: pk.codec().name(),
                    seconds_per_tick: seconds_per_tick(&pk),
                    frames_per_batch,
                })
            })?;
            Ok(NvdecSession {
                live: std::sync::Mutex::new(live),
            })
        }
        #[cfg(not(all(feature = "decode-nvdec", feature = "decode-ffmpeg")))]
        {
            let _ = (py, packets);
            Err(no_nvdec())
        }
    }
}

/// The packets of a `VideoPackets` (from `demux_video` or `Demuxer.streaming_demux`);
/// `TypeError` naming the type for anything else.
#[cfg(feature = "decode-ffmpeg")]
fn video_packets(obj: &Bound<'_, PyAny>) -> PyResult<std::sync::Arc<Packets>> {
    obj.cast::<crate::media_demux::VideoPackets>()
        .map(|p| std::sync::Arc::clone(&p.get().inner))
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "packets must be VideoPackets (from demux_video), got {}",
                crate::error::type_name(obj)
            ))
        })
}

/// The packets of `pk` as NVDEC's parser is fed them: the bytes (H.264/HEVC converted to
/// Annex-B by `annexb`, other codecs as they are) and the pts in stream time base units (0
/// for a packet without one). Every packet is kept, with or without a pts.
#[cfg(feature = "decode-ffmpeg")]
fn nvdec_input(
    pk: &Packets,
    mut annexb: Option<&mut spdl_cuda::nvdec::AnnexB>,
) -> Result<Vec<(Vec<u8>, i64)>, spdl_cuda::Error> {
    (0..pk.len())
        .map(|i| {
            let data = pk.packet_data(i);
            let bytes = match annexb.as_deref_mut() {
                Some(c) => c.convert(data)?,
                None => data.to_vec(),
            };
            Ok((bytes, pk.packet_pts(i).unwrap_or(0)))
        })
        .collect()
}

#[cfg(all(feature = "decode-nvdec", feature = "decode-ffmpeg"))]
impl NvdecSpec {
    /// The `VideoPackets` `packets`, an NVDEC decoder for their codec and coded size (the
    /// codec's `width` x `height`, what the decoder allocates for), and the Annex-B converter
    /// made from their extradata (`None` for codecs that need none), opened with the GIL
    /// released. Errors: those of `video_packets` and `config`, then the decoder's or
    /// the converter's.
    fn open_for_packets(
        &self,
        py: Python<'_>,
        packets: &Bound<'_, PyAny>,
    ) -> PyResult<(
        std::sync::Arc<Packets>,
        spdl_cuda::nvdec::NvdecDecoder,
        Option<spdl_cuda::nvdec::AnnexB>,
    )> {
        let pk = video_packets(packets)?;
        let c = pk.codec();
        let config = self.config(c.name(), c.width() as usize, c.height() as usize)?;
        let (dec, annexb) = py.detach(|| -> Result<_, GpuError> {
            let dec = self.decoder(config)?;
            let annexb = spdl_cuda::nvdec::AnnexB::new(&c.name(), c.extradata())?;
            Ok((dec, annexb))
        })?;
        Ok((pk, dec, annexb))
    }
}

/// Seconds per tick of `pk`'s stream time base.
#[cfg(all(feature = "decode-nvdec", feature = "decode-ffmpeg"))]
fn seconds_per_tick(pk: &Packets) -> f64 {
    let (num, den) = pk.codec().time_base();
    f64::from(num) / f64::from(den.max(1))
}

/// NVDEC output as Python gets it: `(CUDABuffer [n, H + H/2, W] uint8 NV12, [pts seconds])`
/// per batch; `seconds_per_tick` is the stream's time base.
#[cfg(all(feature = "decode-nvdec", feature = "decode-ffmpeg"))]
fn nvdec_batches(
    out: Vec<spdl_cuda::nvdec::NvdecFrames>,
    seconds_per_tick: f64,
) -> Vec<(CudaBuffer, Vec<f64>)> {
    out.into_iter()
        .map(|f| {
            let (w, h) = f.size;
            let n = f.timestamps.len();
            let secs = f
                .timestamps
                .iter()
                .map(|&t| t as f64 * seconds_per_tick)
                .collect();
            let shape = vec![n as i64, (h * 3 / 2) as i64, w as i64];
            (CudaBuffer::from_batch(f.batch, shape), secs)
        })
        .collect()
}

/// What a live `_NvdecSession` holds: the NVDEC session, the Annex-B converter made from the
/// first packets' extradata, and what later packets must match.
#[cfg(all(feature = "decode-nvdec", feature = "decode-ffmpeg"))]
struct LiveSession {
    session: spdl_cuda::nvdec::NvdecSession,
    annexb: Option<spdl_cuda::nvdec::AnnexB>,
    codec: String,
    seconds_per_tick: f64,
    frames_per_batch: usize,
}

/// The native half of SPDL's streaming `NvDecDecoder` (`init_buffer`,
/// `streaming_decode_packets`, `flush`): one NVDEC parser/decoder session kept alive across
/// calls. Made by `_NvdecSpec.session`; `feed` and `flush` release the GIL.
#[pyclass(frozen, module = "spdl_rs.io", name = "_NvdecSession")]
pub(crate) struct NvdecSession {
    #[cfg(all(feature = "decode-nvdec", feature = "decode-ffmpeg"))]
    live: std::sync::Mutex<LiveSession>,
}

#[pymethods]
impl NvdecSession {
    /// Feeds `packets` (the next chunk: a `VideoPackets` of the same codec as the first one;
    /// H.264/HEVC converted to Annex-B) and returns the full batches of `frames_per_batch`
    /// frames decoded so far, as `[(CUDABuffer [n, H + H/2, W] uint8 NV12, [pts seconds])]`.
    /// `TypeError` for other objects, `ValueError` for another codec; `RuntimeError` naming the reason when
    /// NVDEC fails (the session is then done).
    fn feed(
        &self,
        py: Python<'_>,
        packets: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<(CudaBuffer, Vec<f64>)>> {
        #[cfg(all(feature = "decode-nvdec", feature = "decode-ffmpeg"))]
        {
            let pk = video_packets(packets)?;
            let mut live = crate::lock(&self.live);
            let codec = pk.codec().name();
            if codec != live.codec {
                return Err(PyValueError::new_err(format!(
                    "packets of codec {codec:?} given to an NVDEC decoder streaming {:?}",
                    live.codec
                )));
            }
            let live = &mut *live;
            let out = py.detach(|| -> Result<_, GpuError> {
                let owned = nvdec_input(&pk, live.annexb.as_mut())?;
                let refs: Vec<(&[u8], i64)> =
                    owned.iter().map(|(b, t)| (b.as_slice(), *t)).collect();
                live.session.feed(&refs)?;
                Ok(live.session.take(live.frames_per_batch, false)?)
            })?;
            Ok(nvdec_batches(out, live.seconds_per_tick))
        }
        #[cfg(not(all(feature = "decode-nvdec", feature = "decode-ffmpeg")))]
        {
            let _ = (py, packets);
            Err(no_nvdec())
        }
    }

    /// Sends the end of the stream and returns every frame left, in batches of
    /// `frames_per_batch` (the last one shorter), as `feed` does. Calling it again returns
    /// `[]`. `RuntimeError` naming the reason when NVDEC fails.
    fn flush(&self, py: Python<'_>) -> PyResult<Vec<(CudaBuffer, Vec<f64>)>> {
        #[cfg(all(feature = "decode-nvdec", feature = "decode-ffmpeg"))]
        {
            let mut live = crate::lock(&self.live);
            let live = &mut *live;
            let out = py.detach(|| -> Result<_, GpuError> {
                live.session.flush()?;
                Ok(live.session.take(live.frames_per_batch, true)?)
            })?;
            Ok(nvdec_batches(out, live.seconds_per_tick))
        }
        #[cfg(not(all(feature = "decode-nvdec", feature = "decode-ffmpeg")))]
        {
            let _ = py;
            Err(no_nvdec())
        }
    }
}

/// The error of every NVDEC entry point in a build without NVDEC decoding.
#[cfg(not(all(feature = "decode-nvdec", feature = "decode-ffmpeg")))]
fn no_nvdec() -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err(
        "NVDEC unavailable: spdl_rs was built without NVDEC decoding (the `decode-nvdec` and \
         `decode-ffmpeg` features of crates/spdl-py; built_with_nvcodec() is False)",
    )
}

/// The packets of `VideoPackets` as NVDEC's parser is fed them, concatenated: H.264/HEVC from
/// MP4/MKV converted to an Annex-B byte stream (parameter sets first), other codecs' packets
/// as they are. For tests (decoding the result with FFmpeg checks the conversion without a
/// GPU). `ValueError` for a malformed packet or extradata.
#[pyfunction]
pub(crate) fn _packets_annexb<'py>(
    py: Python<'py>,
    packets: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    #[cfg(feature = "decode-ffmpeg")]
    {
        let pk = video_packets(packets)?;
        let value = |e: spdl_cuda::Error| PyValueError::new_err(e.to_string());
        let mut annexb = spdl_cuda::nvdec::AnnexB::new(&pk.codec().name(), pk.codec().extradata())
            .map_err(value)?;
        let out = nvdec_input(&pk, annexb.as_mut()).map_err(value)?;
        let bytes: Vec<u8> = out.into_iter().flat_map(|(b, _)| b).collect();
        Ok(pyo3::types::PyBytes::new(py, &bytes))
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = (py, packets);
        Err(pyo3::exceptions::PyRuntimeError::new_err(
            "VideoPackets need a decode-ffmpeg build",
        ))
    }
}

/// NV12 frames to planar RGB (or BGR) on the host: `data` is a C-contiguous `uint8` buffer of
/// shape `[N, H + H/2, W]` (as NVDEC's output, SPDL's layout) or `[H + H/2, W]`; the result is
/// a `CPUBuffer` `[N, 3, H, W]` (`[3, H, W]` for one frame). `coeff`: the matrix, SPDL's values
/// (1 BT.709, 4 FCC, 5 BT.470BG, 6 BT.601, 7 SMPTE 240M, 9/10 BT.2020; others mean BT.709;
/// 8 raises). `ValueError` for another shape or dtype.
#[pyfunction]
#[pyo3(signature = (data, coeff=1, bgr=false))]
pub(crate) fn _nv12_to_planar(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    coeff: i32,
    bgr: bool,
) -> PyResult<CpuBuffer> {
    let buf = Bytes::new(data, "NV12 frames")?;
    let shape: Vec<usize> = buf.0.shape().to_vec();
    if buf.0.item_size() != 1 {
        return Err(PyValueError::new_err("NV12 frames must be uint8"));
    }
    let (n, rows, w, batched) = match shape.as_slice() {
        [n, rows, w] => (*n, *rows, *w, true),
        [rows, w] => (1, *rows, *w, false),
        s => {
            return Err(PyValueError::new_err(format!(
                "NV12 frames must be [N, H*3/2, W] or [H*3/2, W], got shape {s:?}"
            )))
        }
    };
    if rows % 3 != 0 {
        return Err(PyValueError::new_err(format!(
            "NV12 frames have H + H/2 rows (a multiple of 3), got {rows}"
        )));
    }
    let h = rows / 3 * 2;
    let out = py
        .detach(|| spdl_cuda::nv12::nv12_to_planar(buf.as_slice(), n, h, w, coeff, bgr))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let shape = if batched {
        vec![n, 3, h, w]
    } else {
        vec![3, h, w]
    };
    Ok(CpuBuffer::from_u8(out, shape, String::new()))
}
