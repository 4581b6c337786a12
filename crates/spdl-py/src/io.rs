//! `spdl_rs.io`: image loading functions. Every one releases the GIL for all its work
//! (reading, decoding, resizing, collating) and returns a zero-copy [`CpuBuffer`].

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::buffer::CpuBuffer;
use crate::error::{io_err, sources_err};
use crate::options::Kwargs;

pub(crate) fn decode(
    loader: &spdl_io::ImageLoader,
    key: &str,
    pos: Pos,
    data: &[u8],
) -> Result<spdl_io::Image, spdl_io::Error> {
    let ctx = spdl_io::SampleContext {
        key,
        index: pos.index,
        epoch: pos.epoch,
    };
    loader.load(data, &ctx)
}

/// Where a sample sits in the pipeline: its position in the epoch's source order and the
/// epoch. Feeds the random draws of `transform="train"` so they do not depend on scheduling.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pos {
    pub(crate) index: u64,
    pub(crate) epoch: u64,
}

/// The sample's position for `transform="train"`: the keywords `index` and `epoch`.
fn sample_pos(kw: &Kwargs<'_>) -> PyResult<Pos> {
    Ok(Pos {
        index: kw.or("index", 0)?,
        epoch: kw.or("epoch", 0)?,
    })
}

/// Reads and decodes the image file at `path`.
///
/// Returns a `CPUBuffer` of shape `[H, W, C]`, dtype `uint8` (`C` = 3 for `color="rgb"`, 1 for
/// `"gray"`, 4 for `"rgba"`; `"unchanged"` keeps the file's channels and depth, `uint16` for
/// 16-bit PNG/TIFF). With `width` and `height`, the image is resized to exactly that size with
/// `filter` (`"nearest"`, `"bilinear"`, `"bicubic"`, `"lanczos"`). EXIF orientation is applied.
/// `lenient=True` accepts truncated JPEGs (the rest is gray, like Pillow's
/// `LOAD_TRUNCATED_IMAGES`). The GIL is released for all the work.
///
/// `transform`: `"resize"` (default: to `width x height` when given, else the decoded size),
/// `"eval"` (resize the shorter side to `size * 256 / 224`, then center-crop `size x size`:
/// the ImageNet evaluation transform) or `"train"` (torchvision's `RandomResizedCrop(size)`
/// with a random horizontal flip, drawn from `(seed, epoch, index)`, so the same arguments give
/// the same pixels). For eval/train, `size` may be replaced by `width == height`.
///
/// Raises `OSError` if the file cannot be read, `ValueError` (message naming the path and the
/// reason, e.g. "truncated", "unknown format") if it cannot be decoded.
///
/// Mirrors SPDL's `spdl.io.load_image` (synchronous, returns pixels).
#[pyfunction]
#[pyo3(signature = (path, width=None, height=None, **options))]
pub(crate) fn load_image(
    py: Python<'_>,
    path: std::path::PathBuf,
    width: Option<usize>,
    height: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<CpuBuffer> {
    let (loader, pos) = Kwargs::parse("load_image", options, |kw| {
        Ok((kw.image_loader(width, height)?, sample_pos(kw)?))
    })?;
    let key = spdl_io::key_from_path(&path);
    let img = py.detach(|| {
        let data = spdl_sources::read_file(&path).map_err(sources_err)?;
        decode(&loader, &key, pos, &data).map_err(io_err)
    })?;
    Ok(CpuBuffer::from_image(img, key, None))
}

/// Decodes an encoded image (JPEG, PNG, GIF, WebP, BMP, TIFF; detected by magic bytes) given
/// as `bytes`.
///
/// Returns a `CPUBuffer` `[H, W, C]` `uint8`; the keyword arguments are those of
/// `load_image` (`index` and `epoch` seed `transform="train"` with `seed`). `key` names the
/// sample in error messages. The GIL is released while decoding.
///
/// Raises `ValueError` naming `key` and the reason when the data cannot be decoded.
///
/// Mirrors SPDL's `spdl.io.decode_image` on bytes.
#[pyfunction]
#[pyo3(signature = (data, width=None, height=None, **options))]
pub(crate) fn decode_image(
    py: Python<'_>,
    data: &[u8],
    width: Option<usize>,
    height: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<CpuBuffer> {
    let (loader, pos, key) = Kwargs::parse("decode_image", options, |kw| {
        let key = kw.or("key", "<bytes>".to_owned())?;
        Ok((kw.image_loader(width, height)?, sample_pos(kw)?, key))
    })?;
    let img = py.detach(|| decode(&loader, &key, pos, data).map_err(io_err))?;
    Ok(CpuBuffer::from_image(img, key, None))
}

/// Reads, decodes, resizes and stacks many images into one batch, in parallel on
/// `num_threads` native threads (default: the number of CPUs, at most 8), without the GIL.
///
/// Returns a `CPUBuffer` of shape `[N, height, width, C]` `uint8`, or, with
/// `normalize=True`, `[N, C, height, width]` `float32` normalized with the ImageNet mean and
/// standard deviation. `keys` are the paths in order. `transform`, `size` and `seed` as in
/// `load_image`; for `"train"`, sample `i` is drawn with `index = i` and `epoch`.
///
/// Raises `OSError` / `ValueError` naming the first sample that failed (all-or-nothing), and
/// `ValueError` for an empty `paths`.
///
/// Mirrors SPDL's `spdl.io.load_image_batch`.
#[pyfunction]
#[pyo3(signature = (paths, width=None, height=None, **options))]
pub(crate) fn load_image_batch(
    py: Python<'_>,
    paths: Vec<std::path::PathBuf>,
    width: Option<usize>,
    height: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<CpuBuffer> {
    if paths.is_empty() {
        return Err(PyValueError::new_err("load_image_batch: paths is empty"));
    }
    let o = BatchOptions::parse("load_image_batch", width, height, options)?;
    let keys = paths.iter().map(|p| spdl_io::key_from_path(p)).collect();
    let samples = batch_samples(keys, None, o.epoch);
    let threads = spdl_io::batch_threads(o.num_threads, paths.len());
    let loaded = py.detach(|| {
        spdl_io::load_batch(&o.loader, &samples, o.norm.as_ref(), threads, |i| {
            read(&paths[i])
        })
    });
    let loaded = loaded.map_err(io_err)?;
    // Strict, as SPDL's: the first failed sample fails the call (a read error as its OSError).
    if let Some((_, e)) = loaded.failed.into_iter().next() {
        let read_error = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<spdl_sources::Error>())
            .map(crate::error::sources_err_ref);
        return Err(read_error.unwrap_or_else(|| io_err(e)));
    }
    Ok(CpuBuffer::from_batch(loaded.batch))
}

/// The keywords of the batch functions: the image keywords, `normalize`, `num_threads` and
/// `epoch`.
struct BatchOptions {
    loader: spdl_io::ImageLoader,
    norm: Option<spdl_io::Normalize>,
    num_threads: Option<usize>,
    epoch: u64,
}

impl BatchOptions {
    /// The keywords `options` of `func`; `ValueError` naming `func` when they do not give every
    /// image one size.
    fn parse(
        func: &'static str,
        width: Option<usize>,
        height: Option<usize>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        Kwargs::parse(func, options, |kw| Self::take(kw, width, height, func))
    }

    fn take(
        kw: &Kwargs<'_>,
        width: Option<usize>,
        height: Option<usize>,
        func: &str,
    ) -> PyResult<Self> {
        let options = kw.image(width, height)?;
        let loader = options.loader().map_err(crate::options::value_err)?;
        if loader.transform == spdl_io::Transform::Identity {
            return Err(PyValueError::new_err(format!(
                "{func}: give width and height (or size, or transform='eval'/'train' with size): a batch needs one image size"
            )));
        }
        Ok(BatchOptions {
            loader,
            norm: kw
                .or("normalize", false)?
                .then(spdl_io::Normalize::imagenet),
            num_threads: kw.opt("num_threads")?,
            epoch: kw.or("epoch", 0)?,
        })
    }
}

/// The samples of a batch: keys, and the dataset index of each (default: the row).
fn batch_samples(
    keys: Vec<String>,
    indices: Option<Vec<u64>>,
    epoch: u64,
) -> Vec<spdl_io::BatchSample> {
    keys.into_iter()
        .enumerate()
        .map(|(i, key)| spdl_io::BatchSample {
            key,
            label: None,
            index: indices.as_ref().map_or(i as u64, |ix| ix[i]),
            epoch,
        })
        .collect()
}

/// A file's bytes; a read error becomes spdl-io's, keeping spdl-sources' as its source and its
/// temporary/permanent status.
fn read(path: &std::path::Path) -> Result<Vec<u8>, spdl_io::Error> {
    spdl_sources::read_file(path).map_err(|e| {
        spdl_io::Error::new(spdl_io::ErrorKind::Read, e.to_string())
            .with_temporary(e.is_temporary())
            .with_source(e)
    })
}

/// Stacks images into one batch: `[N, H, W, C]` (or normalized `[N, C, H, W]` `float32`).
pub(crate) fn collate_items(
    items: Vec<spdl_io::BatchItem>,
    normalize: bool,
) -> Result<spdl_io::ImageBatch, spdl_io::Error> {
    if normalize {
        spdl_io::collate_normalized(items, &spdl_io::Normalize::imagenet())
    } else {
        spdl_io::collate(items)
    }
}

/// The crop box and flip that `transform="train"` draws for one sample of a `width x height`
/// image (pixels, after EXIF orientation), without decoding anything: apply the same geometry
/// to masks, boxes or keypoints, or reproduce the crop in another library.
///
/// Returns `(left, top, crop_width, crop_height, hflip)` in pixels of the source image; the
/// box is resampled to `size x size` and mirrored left-right when `hflip` is true. The draw is
/// torchvision's `RandomResizedCrop.get_params` (scale 0.08-1, ratio 3/4-4/3, 10 attempts then
/// a center crop) and `RandomHorizontalFlip(p=0.5)`, seeded by `(seed, epoch, index)` exactly
/// as `decode_image(..., transform="train")` and `spdl load --transform train` seed it.
///
/// Raises `ValueError` when `width`, `height` or `size` is 0.
#[pyfunction]
#[pyo3(signature = (width, height, *, size=224, seed=0, index=0, epoch=0))]
pub(crate) fn random_resized_crop(
    width: usize,
    height: usize,
    size: usize,
    seed: u64,
    index: u64,
    epoch: u64,
) -> PyResult<(usize, usize, usize, usize, bool)> {
    if width == 0 || height == 0 || size == 0 {
        return Err(PyValueError::new_err(format!(
            "width, height and size must be at least 1, got width={width}, height={height}, size={size}"
        )));
    }
    let ctx = spdl_io::SampleContext {
        key: "",
        index,
        epoch,
    };
    let plan = spdl_io::RandomResizedCrop::new(size, seed).plan(width, height, &ctx);
    // The draw is in whole pixels; the box is stored as f64 for sub-pixel transforms.
    let b = plan.src;
    Ok((
        b.left as usize,
        b.top as usize,
        b.width as usize,
        b.height as usize,
        plan.hflip,
    ))
}

/// Where the samples of [`decode_image_batch`] come from.
enum BatchInput<'a> {
    Bytes(Vec<&'a [u8]>),
    Paths(Vec<std::path::PathBuf>),
}

/// Decodes a batch of encoded images (`data`: a sequence of `bytes`) or reads and decodes
/// files (`paths`), in parallel on `num_threads` native threads, in one call without the GIL;
/// a sample that fails does not fail the batch.
///
/// Returns `(images, failed)`: `images` is a `CPUBuffer` with one row per input, in order,
/// `[N, H, W, C]` `uint8` (or `[N, C, H, W]` `float32` with `normalize=True`), whose failed
/// rows are zeros; `failed` lists `(row, message)` for each sample that could not be read or
/// decoded (the message names the sample and the reason). `keys` name the samples (default:
/// the paths, or `"<bytes #i>"`). The other keyword arguments are those of `load_image_batch`;
/// sample `i` of `transform="train"` is drawn with `index = indices[i]` (default: `i`), so pass
/// the samples' dataset indices for augmentations that differ across batches.
///
/// Raises `ValueError` when both or neither of `data` and `paths` are given, when the size is
/// not fixed (give width and height, or size), when an item of `data` is not `bytes`, or when
/// every sample failed and the shape is unknown (`color="unchanged"`).
///
/// The batch decoder of `spdl_rs.ray.ImageDecoder` (Ray Data `map_batches`).
#[pyfunction]
#[pyo3(signature = (data=None, width=None, height=None, *, paths=None, keys=None, indices=None, **options))]
#[allow(clippy::too_many_arguments)] // the batch, its names and dataset indices, one each
pub(crate) fn decode_image_batch(
    py: Python<'_>,
    data: Option<Vec<Bound<'_, PyAny>>>,
    width: Option<usize>,
    height: Option<usize>,
    paths: Option<Vec<std::path::PathBuf>>,
    keys: Option<Vec<String>>,
    indices: Option<Vec<u64>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(CpuBuffer, Vec<(usize, String)>)> {
    let input = match (&data, paths) {
        (Some(data), None) => BatchInput::Bytes(
            data.iter()
                .enumerate()
                .map(|(i, d)| {
                    d.cast::<pyo3::types::PyBytes>()
                        .map(|b| b.as_bytes())
                        .map_err(|_| {
                            PyValueError::new_err(format!(
                                "decode_image_batch: data[{i}] is not bytes"
                            ))
                        })
                })
                .collect::<PyResult<Vec<&[u8]>>>()?,
        ),
        (None, Some(paths)) => BatchInput::Paths(paths),
        _ => {
            return Err(PyValueError::new_err(
                "decode_image_batch: give exactly one of data and paths",
            ))
        }
    };
    let n = match &input {
        BatchInput::Bytes(d) => d.len(),
        BatchInput::Paths(p) => p.len(),
    };
    let keys = match keys {
        Some(k) if k.len() == n => k,
        Some(k) => {
            return Err(PyValueError::new_err(format!(
                "decode_image_batch: {} keys for {n} samples",
                k.len()
            )))
        }
        None => match &input {
            BatchInput::Bytes(_) => (0..n).map(|i| format!("<bytes #{i}>")).collect(),
            BatchInput::Paths(p) => p.iter().map(|p| spdl_io::key_from_path(p)).collect(),
        },
    };
    if let Some(ix) = &indices {
        if ix.len() != n {
            return Err(PyValueError::new_err(format!(
                "decode_image_batch: {} indices for {n} samples",
                ix.len()
            )));
        }
    }
    let o = BatchOptions::parse("decode_image_batch", width, height, options)?;
    let samples = batch_samples(keys, indices, o.epoch);
    let threads = spdl_io::batch_threads(o.num_threads, n);
    let (loader, norm) = (&o.loader, o.norm.as_ref());
    let loaded = py.detach(|| match &input {
        BatchInput::Bytes(d) => spdl_io::load_batch(loader, &samples, norm, threads, |i| Ok(d[i])),
        BatchInput::Paths(p) => {
            spdl_io::load_batch(loader, &samples, norm, threads, |i| read(&p[i]))
        }
    });
    let loaded = loaded
        .map_err(|e| PyValueError::new_err(format!("decode_image_batch: {}", e.message())))?;
    let failed = loaded
        .failed
        .into_iter()
        .map(|(row, e)| (row, e.to_string()))
        .collect();
    let batch = loaded.batch;
    drop(data);
    Ok((CpuBuffer::from_batch(batch), failed))
}
