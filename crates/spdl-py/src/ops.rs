//! `spdl_rs.ops`: native stages. Given to `PipelineBuilder.pipe`, they run entirely in Rust on
//! the worker threads: items that are already native (`str` paths, listed samples, file bytes,
//! images, aggregated lists) are processed without taking the GIL.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use spdl_core::buffer::{HostPool, PoolConfig};

use crate::arrays::ArrayOut;
use crate::buffer::{CpuBuffer, HostView};
use crate::cuda::{CudaBuffer, CudaTarget};
use crate::error::{type_name, OpError};
use crate::io::{collate_items, decode, Pos};
use crate::item::{BytesInput, Item, PathInput};
use crate::options::Kwargs;
use crate::reserved::Reserved;
use crate::with_gil;

/// What a native stage does.
pub(crate) enum NativeKind {
    ReadFile,
    Decode(Arc<spdl_io::ImageLoader>),
    Load(Arc<spdl_io::ImageLoader>),
    Collate {
        normalize: bool,
        /// Host batch buffers, reused once Python drops a batch: a fresh multi-MiB batch
        /// each time costs a page fault per 4 KiB.
        host: HostPool,
    },
    /// A list of encoded images decoded straight into one batch (`ops.decode_image_batch`).
    DecodeBatch {
        loader: Arc<spdl_io::ImageLoader>,
        normalize: bool,
        /// Host batch buffers, reused once Python drops a batch (pinned memory when a
        /// `to_device` follows).
        host: HostPool,
    },
    /// A host-to-device copy (`ops.to_device`).
    ToDevice(Arc<crate::cuda::CudaTarget>),
    /// Video or audio decoding (`ops.load_video`, `decode_video`, `load_audio`,
    /// `decode_audio`).
    #[cfg(feature = "decode-ffmpeg")]
    Media(Arc<MediaStage>),
    /// `.npy` bytes to a NumPy array (`ops.load_npy`).
    LoadNpy,
    /// WAV bytes to a NumPy array (`ops.load_wav`): time offset and duration in seconds.
    LoadWav(Option<f64>, Option<f64>),
}

/// A native pipeline stage (made by `spdl_rs.ops.read_file()`, `decode_image()`,
/// `load_image()` or `collate()`). Pass it to `PipelineBuilder.pipe`; it runs on the Rust
/// worker threads without the GIL. Calling it (`op(x)`) runs it once, with the GIL released.
#[pyclass(frozen, module = "spdl_rs.ops", name = "NativeOp")]
pub(crate) struct NativeOp {
    pub(crate) kind: NativeKind,
    pub(crate) name: &'static str,
    /// Index for items that carry no position (from a Python source): counts the calls.
    counter: AtomicU64,
    /// How to make this op again in another process: a no-argument callable (the
    /// `spdl_rs.ops` constructor with its arguments, a `functools.partial`), set once by that
    /// constructor. `__reduce__` pickles it, so configs holding native ops cross processes.
    recipe: std::sync::OnceLock<Py<PyAny>>,
}

impl NativeOp {
    pub(crate) fn new(kind: NativeKind, name: &'static str) -> Self {
        NativeOp {
            kind,
            name,
            counter: AtomicU64::new(0),
            recipe: std::sync::OnceLock::new(),
        }
    }

    /// The item's position, or the next value of the running counter (epoch 0).
    fn pos(&self, pos: Option<Pos>) -> Pos {
        pos.unwrap_or_else(|| Pos {
            index: self.counter.fetch_add(1, Ordering::Relaxed),
            epoch: 0,
        })
    }
}

/// An image a Python op returned (`spdl_rs.io.load_image`'s `CPUBuffer`, or a NumPy array),
/// `[H, W, C]` or `[H, W]` uint8, copied through the buffer protocol for `collate`. The key is
/// the buffer's first key, else `"<element i>"`.
fn image_from_py(obj: &Bound<'_, PyAny>, i: usize) -> Result<spdl_io::BatchItem, OpError> {
    let py = obj.py();
    let buf = pyo3::buffer::PyBuffer::<u8>::get(obj).map_err(|e| {
        format!(
            "collate: element {i} is a {}, not a uint8 image array ({e})",
            type_name(obj)
        )
    })?;
    let (h, w, c) = match *buf.shape() {
        [h, w, c] => (h, w, c),
        [h, w] => (h, w, 1),
        ref other => {
            return Err(format!(
                "collate: element {i} has shape {other:?}, expected [H, W, C] or [H, W]"
            )
            .into())
        }
    };
    let data = buf
        .to_vec(py)
        .map_err(|e| format!("collate: element {i}: {e}"))?;
    let image = spdl_io::Image::from_u8(data, w, h, c)
        .ok_or_else(|| format!("collate: element {i}: {h}x{w}x{c} does not match its data"))?;
    let key = obj
        .getattr("keys")
        .and_then(|k| k.extract::<Vec<String>>())
        .ok()
        .and_then(|k| k.into_iter().next())
        .unwrap_or_else(|| format!("<element {i}>"));
    let label = obj
        .getattr("labels")
        .and_then(|l| l.extract::<Vec<Option<i64>>>())
        .ok()
        .and_then(|l| l.into_iter().next())
        .flatten();
    Ok(spdl_io::BatchItem { key, label, image })
}

/// The stage's name: `bytes` when it decodes file bytes, else `path`.
fn stage_name(from_bytes: bool, bytes: &'static str, path: &'static str) -> &'static str {
    if from_bytes {
        bytes
    } else {
        path
    }
}

fn read(path: &Path) -> Result<Vec<u8>, OpError> {
    spdl_sources::read_file(path).map_err(|e| e.to_string().into())
}

impl NativeOp {
    /// The device of a `to_device` stage (to collate into its pinned memory just before).
    pub(crate) fn cuda_target(&self) -> Option<Arc<crate::cuda::CudaTarget>> {
        match &self.kind {
            NativeKind::ToDevice(t) => Some(t.clone()),
            _ => None,
        }
    }

    /// Runs the op on one item. Takes the GIL only for an input that is a Python object.
    pub(crate) fn apply(&self, item: Item) -> Result<Option<Item>, OpError> {
        self.apply_before(item, None)
    }

    /// As [`NativeOp::apply`]; `next`: the device of a `to_device` stage that directly
    /// follows, into whose pinned memory `collate` then writes.
    pub(crate) fn apply_before(
        &self,
        item: Item,
        next: Option<&crate::cuda::CudaTarget>,
    ) -> Result<Option<Item>, OpError> {
        match &self.kind {
            NativeKind::ReadFile => {
                let PathInput {
                    path,
                    key,
                    label,
                    pos,
                } = item.into_path("read_file")?;
                let data = read(&path)?;
                Ok(Some(Item::Bytes {
                    key,
                    label,
                    data,
                    pos,
                }))
            }
            NativeKind::Load(loader) => {
                let input = item.into_path("load_image")?;
                let data = read(&input.path)?;
                let image = decode(loader, &input.key, self.pos(input.pos), &data)?;
                let (key, label) = (input.key, input.label);
                Ok(Some(Item::Image { key, label, image }))
            }
            NativeKind::Decode(loader) => {
                let BytesInput {
                    key,
                    label,
                    data,
                    pos,
                } = item.into_bytes("decode_image", "")?;
                let image = decode(loader, &key, self.pos(pos), &data)?;
                Ok(Some(Item::Image { key, label, image }))
            }
            NativeKind::Collate { normalize, host } => {
                let items = list_items(
                    item,
                    "collate expects a list of decoded images (aggregate() after decode_image())",
                )?;
                let mut batch = Vec::with_capacity(items.len());
                for (i, it) in items.into_iter().enumerate() {
                    match it {
                        Item::Image { key, label, image } => {
                            batch.push(spdl_io::BatchItem { key, label, image })
                        }
                        Item::Py(obj) => batch.push(with_gil(|py| image_from_py(obj.bind(py), i))?),
                        other => {
                            return Err(format!(
                                "collate: element {i} is {}, not a decoded image",
                                other.describe()
                            )
                            .into())
                        }
                    }
                }
                let reserve = |len: usize| match next {
                    Some(target) => target.reserve_pinned(len),
                    None => Reserved::take_from(host, len),
                };
                Ok(Some(collate_reserved(reserve, batch, *normalize)?))
            }
            NativeKind::DecodeBatch {
                loader,
                normalize,
                host,
            } => {
                let items = list_items(
                    item,
                    "decode_image_batch expects a list of encoded images (aggregate() after read_file())",
                )?;
                let inputs = items
                    .into_iter()
                    .map(|it| it.into_bytes("decode_image_batch", ""))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Some(
                    self.decode_batch(loader, *normalize, &inputs, host, next)?,
                ))
            }
            NativeKind::ToDevice(target) => Ok(Some(Item::Device(transfer_item(target, item)?))),
            NativeKind::LoadNpy => {
                let b = item.into_bytes("load_npy", ".npy ")?;
                Ok(Some(Item::Array(ArrayOut::npy(b.key, b.data)?)))
            }
            NativeKind::LoadWav(offset, duration) => {
                let b = item.into_bytes("load_wav", "WAV ")?;
                let array = ArrayOut::wav(b.key, b.data, *offset, *duration)?;
                Ok(Some(Item::Array(array)))
            }
            #[cfg(feature = "decode-ffmpeg")]
            NativeKind::Media(stage) => Ok(Some(Item::Media(stage.apply(self.name, item)?))),
        }
    }
}

#[pymethods]
impl NativeOp {
    /// Runs the op on one value, with the GIL released (except to read a Python input).
    fn __call__(&self, py: Python<'_>, item: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let item = Item::from_py(item);
        let out = py.detach(|| self.apply(item)).map_err(|e| {
            match e.downcast_ref::<crate::cuda::GpuError>() {
                Some(_) => PyRuntimeError::new_err(e.to_string()),
                None => PyValueError::new_err(e.to_string()),
            }
        })?;
        match out {
            Some(i) => i.into_py(py),
            None => Ok(py.None()),
        }
    }

    /// The default stage name.
    #[getter]
    fn name(&self) -> &'static str {
        self.name
    }

    fn __repr__(&self) -> String {
        format!("spdl_rs.ops.{}()", self.name)
    }

    /// Records how to make this op again (`recipe()` returns an equal op); set by the
    /// `spdl_rs.ops` constructors. A second call is ignored (the first recipe stays).
    fn _set_recipe(&self, recipe: Py<PyAny>) {
        let _ = self.recipe.set(recipe);
    }

    /// Pickles as its recipe: unpickling calls the `spdl_rs.ops` constructor again with the
    /// same arguments (a fresh op; the call counter restarts). Raises `TypeError` for an op
    /// made without a recipe.
    fn __reduce__(&self, py: Python<'_>) -> PyResult<(Py<PyAny>, Py<pyo3::types::PyTuple>)> {
        match self.recipe.get() {
            Some(r) => Ok((r.clone_ref(py), pyo3::types::PyTuple::empty(py).unbind())),
            None => Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "cannot pickle native op {:?}: it was not made by a spdl_rs.ops constructor",
                self.name
            ))),
        }
    }
}

/// A stage that reads each path (a `str`, `os.PathLike` or a listed sample) into `bytes`
/// (kept native until a Python op or the consumer needs it). Fails with a message naming the
/// path (`not found`, `permission denied`, ...).
#[pyfunction]
#[pyo3(name = "op_read_file")]
pub(crate) fn read_file() -> NativeOp {
    NativeOp::new(NativeKind::ReadFile, "read_file")
}

/// The stage behind `spdl_rs.ops.decode_image` (`from_bytes`: encoded image bytes from
/// `read_file()`) and `load_image` (paths: read and decode in one step): images `[H, W, C]`
/// `uint8`; `options`: the image keywords (`spdl_rs.io.ImageOptions`). For `"train"`, the
/// random crop/flip of a sample is drawn from `(seed, epoch, index)`: `index` is the sample's
/// position in the epoch and `epoch` the pipeline epoch when the source is a
/// `spdl_rs.sources` listing (deterministic, unchanged by concurrency or resume); for other
/// sources, a running count of the items this op has seen, with epoch 0. JPEGs that the
/// transform shrinks are decoded at libjpeg-turbo's finer DCT scales (`M/8`, spdl-io's
/// `ImageLoader::fine_scaled_decode`): within a mean absolute difference of 1.5 levels of
/// decoding in full (about 0.5 on photos), unlike `spdl_rs.io`'s calls. Fails with a message
/// naming the file and the reason.
#[pyfunction]
#[pyo3(name = "op_image", signature = (from_bytes, width=None, height=None, **options))]
pub(crate) fn image(
    from_bytes: bool,
    width: Option<usize>,
    height: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<NativeOp> {
    let name = stage_name(from_bytes, "decode_image", "load_image");
    let mut loader = Kwargs::parse(name, options, |kw| kw.image_loader(width, height))?;
    // A native fused stage: the finer DCT scales (within 1.5 levels of the full decode).
    loader.fine_scaled_decode = true;
    let loader = Arc::new(loader);
    let kind = if from_bytes {
        NativeKind::Decode(loader)
    } else {
        NativeKind::Load(loader)
    };
    Ok(NativeOp::new(kind, name))
}

/// A stage that stacks a list of decoded images (the output of `aggregate(n)` after
/// `decode_image()`) into one `CPUBuffer` `[N, H, W, C]` `uint8`, or `[N, C, H, W]` `float32`
/// normalized with the ImageNet mean/std when `normalize=True`. Keys and labels follow.
/// Fails naming the first image whose shape differs.
#[pyfunction]
#[pyo3(name = "op_collate", signature = (*, normalize=false))]
pub(crate) fn collate(normalize: bool) -> NativeOp {
    let host = HostPool::host(PoolConfig::default().max_buffers(HOST_BATCH_BUFFERS));
    NativeOp::new(NativeKind::Collate { normalize, host }, "collate")
}

/// A stage that decodes a list of encoded images (`aggregate(n)` after `read_file()`) straight
/// into one batch: `[N, H, W, C]` `uint8`, or `[N, C, H, W]` `float32` normalized with the
/// ImageNet mean/std when `normalize=True` (in pinned memory when `to_device` follows).
/// `width`/`height` and `options` as `op_image` (finer DCT scales included); the output size
/// must be fixed. Raises
/// `ValueError` now for a size that is not fixed or bad options.
#[pyfunction]
#[pyo3(name = "op_image_batch", signature = (width=None, height=None, *, normalize=false, **options))]
pub(crate) fn image_batch(
    width: Option<usize>,
    height: Option<usize>,
    normalize: bool,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<NativeOp> {
    let name = "decode_image_batch";
    let mut loader = Kwargs::parse(name, options, |kw| kw.image_loader(width, height))?;
    loader.fine_scaled_decode = true;
    if loader.output_shape().is_none() {
        return Err(PyValueError::new_err(
            "decode_image_batch needs a fixed output size: give width and height (or size)",
        ));
    }
    let loader = Arc::new(loader);
    // Batches alive at once: the stage's (at most twice its concurrency), the queues' and the
    // consumer's; past that a batch takes fresh memory rather than wait.
    let host = HostPool::host(PoolConfig::default().max_buffers(HOST_BATCH_BUFFERS));
    Ok(NativeOp::new(
        NativeKind::DecodeBatch {
            loader,
            normalize,
            host,
        },
        name,
    ))
}

/// A stage that copies each batch to a CUDA device and yields a `CUDABuffer` (same shape and
/// dtype; `[N, H, W, C]` `uint8` after `collate()`). `device`: `"cuda:N"`, `N`, `"cuda"` or
/// `None` (the `LOCAL_RANK` device, 0 when unset). The device is opened on the first batch.
/// Raises `RuntimeError` now in a build without the `cuda` feature, `ValueError` for a bad
/// `device` or `LOCAL_RANK`.
#[pyfunction]
#[pyo3(name = "op_to_device", signature = (device=None))]
pub(crate) fn to_device(device: Option<Bound<'_, PyAny>>) -> PyResult<NativeOp> {
    let target = crate::cuda::CudaTarget::new(device.as_ref())?;
    Ok(NativeOp::new(
        NativeKind::ToDevice(Arc::new(target)),
        "to_device",
    ))
}

/// A stage that turns `.npy` file bytes (from `read_file()`, or Python `bytes`) into a NumPy
/// array, without the GIL: the header is parsed in Rust, and the bytes become the array's
/// memory (no copy) when the consumer or a Python op takes it. Fails with a message naming the
/// file and the reason (`"truncated: x.npy: ..."`).
#[pyfunction]
#[pyo3(name = "op_load_npy")]
pub(crate) fn load_npy() -> NativeOp {
    NativeOp::new(NativeKind::LoadNpy, "load_npy")
}

/// A stage that turns WAV file bytes into a NumPy array `[frames, channels]` without the GIL,
/// as `spdl_rs.io.load_wav` (same window arguments, in seconds). Fails with a message naming
/// the file and the reason.
#[pyfunction]
#[pyo3(name = "op_load_wav", signature = (time_offset_seconds=None, duration_seconds=None))]
pub(crate) fn load_wav(
    time_offset_seconds: Option<f64>,
    duration_seconds: Option<f64>,
) -> NativeOp {
    NativeOp::new(
        NativeKind::LoadWav(time_offset_seconds, duration_seconds),
        "load_wav",
    )
}

/// The stages behind `spdl_rs.ops.load_video`, `load_audio` (paths), `decode_video` and
/// `decode_audio` (file bytes), named by `name`: the video keywords (or clips with
/// `num_clips` and `frames_per_clip`), or the audio keywords.
#[pyfunction]
#[pyo3(name = "op_media", signature = (name, timestamp=None, **options))]
pub(crate) fn media(
    name: &str,
    timestamp: Option<(f64, f64)>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<NativeOp> {
    let name = crate::media::media_func(name)?;
    let from_bytes = name.starts_with("decode");
    #[cfg(feature = "decode-ffmpeg")]
    {
        let spec = Kwargs::parse(name, options, |kw| {
            crate::media::media_spec(name, kw, timestamp)
        })?;
        Ok(MediaStage::op(spec, from_bytes, name))
    }
    #[cfg(not(feature = "decode-ffmpeg"))]
    {
        let _ = (from_bytes, timestamp, options);
        Err(crate::media::no_ffmpeg(name))
    }
}

/// What a video/audio native stage does.
#[cfg(feature = "decode-ffmpeg")]
#[derive(Debug)]
pub(crate) struct MediaStage {
    /// The decoding.
    spec: crate::media::Spec,
    /// Takes file bytes (`ops.read_file()`) when true, else paths.
    from_bytes: bool,
}

#[cfg(feature = "decode-ffmpeg")]
impl MediaStage {
    /// The native stage `name` decoding with `spec`: file bytes (`ops.read_file()`) when
    /// `from_bytes`, else paths.
    fn op(spec: crate::media::Spec, from_bytes: bool, name: &'static str) -> NativeOp {
        let stage = MediaStage { spec, from_bytes };
        NativeOp::new(NativeKind::Media(Arc::new(stage)), name)
    }

    /// One item through the stage `name` (on a worker thread, without the GIL unless the item
    /// is a Python object).
    fn apply(&self, name: &str, item: Item) -> Result<crate::media::MediaOut, OpError> {
        use spdl_io::MediaSource;
        if self.from_bytes {
            let b = item.into_bytes(name, "")?;
            let source = MediaSource::bytes(&b.key, &b.data);
            Ok(crate::media::run(&self.spec, source, b.label)?)
        } else {
            let input = item.into_path(name)?;
            if let Err(e) = std::fs::metadata(&input.path) {
                return Err(format!("{}: {e}", input.path.display()).into());
            }
            let source = MediaSource::file(&input.path);
            Ok(crate::media::run(&self.spec, source, input.label)?)
        }
    }
}

/// The elements of a list item (an `aggregate()` output, or a list a Python aggregator made:
/// its elements read with the GIL); `expects` says what the stage takes, for the error.
fn list_items(item: Item, expects: &str) -> Result<Vec<Item>, OpError> {
    match item {
        Item::List(items) => Ok(items),
        Item::Py(obj) => with_gil(|py| {
            obj.bind(py)
                .try_iter()
                .and_then(|it| {
                    it.map(|v| v.map(Item::from_py))
                        .collect::<PyResult<Vec<_>>>()
                })
                .map_err(|e| format!("{expects}, got {}: {e}", type_name(obj.bind(py))).into())
        }),
        other => Err(format!("{expects}, got {}", other.describe()).into()),
    }
}

/// Host batch buffers an `ops.decode_image_batch` stage keeps for reuse.
const HOST_BATCH_BUFFERS: usize = 16;

impl NativeOp {
    /// `ops.decode_image_batch` on one list: every sample decoded and transformed straight
    /// into its row of one batch buffer: pinned memory of the next stage's device when a
    /// `to_device` follows and a pinned buffer is free, else a reused host buffer, else fresh
    /// memory. Strict, as SPDL's `load_image_batch`: a sample that fails fails the batch,
    /// naming the failed samples.
    fn decode_batch(
        &self,
        loader: &spdl_io::ImageLoader,
        normalize: bool,
        inputs: &[BytesInput],
        host: &HostPool,
        next: Option<&CudaTarget>,
    ) -> Result<Item, OpError> {
        let samples: Vec<spdl_io::BatchSample> = inputs
            .iter()
            .map(|b| {
                let pos = self.pos(b.pos);
                spdl_io::BatchSample {
                    key: b.key.clone(),
                    label: b.label,
                    index: pos.index,
                    epoch: pos.epoch,
                }
            })
            .collect();
        let norm = normalize.then(spdl_io::Normalize::imagenet);
        let bytes = |i: usize| Ok(&inputs[i].data[..]);
        // Checked against the loader's limits before any buffer is taken.
        let len = spdl_io::batch_layout(loader, samples.len(), normalize)?.bytes;
        let reserved = next
            .and_then(|target| target.reserve_pinned(len))
            .or_else(|| Reserved::take_from(host, len));
        let (item, failed) = match reserved {
            Some(reserved) => {
                let (batch, failed) = spdl_io::load_batch_pooled(
                    loader,
                    &samples,
                    norm.as_ref(),
                    1,
                    bytes,
                    &reserved,
                )?;
                (Item::HostBatch(batch), failed)
            }
            None => {
                let loaded = spdl_io::load_batch(loader, &samples, norm.as_ref(), 1, bytes)?;
                (Item::Batch(loaded.batch), loaded.failed)
            }
        };
        let n = failed.len();
        let mut failed = failed.into_iter().map(|(_, e)| e);
        match failed.next() {
            None => Ok(item),
            Some(only) if n == 1 => Err(Box::new(only)),
            Some(first) => {
                let shown: Vec<String> = std::iter::once(first)
                    .chain(failed.take(2))
                    .map(|e| e.to_string())
                    .collect();
                let more = if n > 3 { "; ..." } else { "" };
                Err(format!(
                    "{n} of {} samples failed: {}{more}",
                    samples.len(),
                    shown.join("; ")
                )
                .into())
            }
        }
    }
}

/// Collates decoded images into a buffer `reserve(bytes)` gives (pinned memory of the
/// `to_device` stage that follows, or a reused host buffer): an [`Item::HostBatch`], or a plain
/// [`Item::Batch`] in fresh memory when it gives none (the device cannot be opened, and the
/// transfer then reports why, or every buffer is in use: waiting for one could hold every
/// worker thread while the consumer or the transfer needs one).
fn collate_reserved(
    reserve: impl FnOnce(usize) -> Option<Reserved>,
    items: Vec<spdl_io::BatchItem>,
    normalize: bool,
) -> Result<Item, OpError> {
    let [h, w, c] = spdl_io::batch::common_shape(&items)?;
    let elem = match (&items[0].image.data, normalize) {
        (_, true) => 4,
        (spdl_io::PixelData::U8(_), false) => 1,
        (spdl_io::PixelData::U16(_), false) => 2,
    };
    let Some(reserved) = reserve(items.len() * h * w * c * elem) else {
        return Ok(Item::Batch(collate_items(items, normalize)?));
    };
    let batch = if normalize {
        spdl_io::collate_normalized_into(items, &spdl_io::Normalize::imagenet(), &reserved)?
    } else {
        spdl_io::collate_into(items, &reserved)?
    };
    Ok(Item::HostBatch(batch))
}

const TO_DEVICE_EXPECTS: &str =
    "to_device expects a batch (ops.collate() before it), decoded video or audio, or a CPUBuffer";

/// The `to_device` stage on one item: a batch (pinned or not), a decoded image, a
/// `CPUBuffer` from Python code, or a `CUDABuffer` already on this device (passed on).
fn transfer_item(target: &CudaTarget, item: Item) -> Result<CudaBuffer, OpError> {
    match item {
        Item::HostBatch(b) => Ok(target.transfer_host(b)?),
        Item::Batch(b) => Ok(target.transfer_view(&HostView::from_batch(b))?),
        Item::Image { key, label, image } => {
            Ok(target.transfer_view(&HostView::from_image(image, key, label))?)
        }
        Item::Media(m) => Ok(target.transfer_view(&m.host_view())?),
        Item::Device(b) if b.device_ordinal() == target.index() => Ok(b),
        Item::Device(b) => Err(format!(
            "to_device(cuda:{}): the batch is already on cuda:{}",
            target.index(),
            b.device_ordinal()
        )
        .into()),
        Item::Py(obj) => {
            enum Found {
                Host(HostView),
                Device(CudaBuffer),
            }
            let found = with_gil(|py| -> Result<Found, OpError> {
                let obj = obj.bind(py);
                if let Ok(cpu) = obj.cast::<CpuBuffer>() {
                    return Ok(Found::Host(cpu.get().host_view()));
                }
                if let Some(view) = crate::media::MediaOut::host_view_of(obj) {
                    return Ok(Found::Host(view));
                }
                if let Ok(b) = obj.cast::<CudaBuffer>() {
                    return Ok(Found::Device(b.get().clone()));
                }
                Err(format!("{TO_DEVICE_EXPECTS}, got {}", type_name(obj)).into())
            })?;
            match found {
                Found::Host(view) => Ok(target.transfer_view(&view)?),
                Found::Device(b) => transfer_item(target, Item::Device(b)),
            }
        }
        other => Err(format!("{TO_DEVICE_EXPECTS}, got {}", other.describe()).into()),
    }
}
