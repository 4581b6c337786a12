//! `spdl_rs.io.DecodedCache`: a decoded cache file (`spdl_io::cache`, written by
//! `spdl cache`) served as training batches with crop, flip and normalize at read time, the
//! GIL released.

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use spdl_io::cache::{DecodedCache as Cache, ServeOptions};
use spdl_io::Normalize;

use crate::buffer::CpuBuffer;

fn cache_err(e: spdl_io::Error) -> PyErr {
    match e.kind() {
        spdl_io::ErrorKind::Read => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// A decoded cache: every image of a dataset decoded and resized once (`spdl cache SRC OUT
/// --size 256`) into one memory-mapped file of `[H, W, C]` u8 records with a checksummed
/// index. Record `i` is sample `i` of the listing the cache was built from, so a `Sampler`
/// (shuffle, ranks, `state_dict`) picks the indices exactly as for files.
///
/// `verify=True` checks each record read against its CRC-32 (cheap; a flipped byte is an
/// error, never garbage pixels). Raises `ValueError` naming the file when it is not a cache,
/// has another version, is cut short or fails its header/index checksum; `OSError` when it
/// cannot be opened.
#[pyclass(frozen, module = "spdl_rs.io", name = "DecodedCache")]
pub(crate) struct DecodedCache {
    cache: Cache,
}

#[pymethods]
impl DecodedCache {
    #[new]
    #[pyo3(signature = (path, *, verify=true))]
    fn new(py: Python<'_>, path: std::path::PathBuf, verify: bool) -> PyResult<Self> {
        let cache = py
            .detach(|| Cache::open(&path, verify))
            .map_err(cache_err)?;
        Ok(DecodedCache { cache })
    }

    fn __len__(&self) -> usize {
        self.cache.len()
    }

    /// The stored `(H, W, C)` of every record.
    #[getter]
    fn shape(&self) -> (usize, usize, usize) {
        let [h, w, c] = self.cache.shape();
        (h, w, c)
    }

    /// The label of record `index` (`None` when it has none). Raises `IndexError` for an
    /// index out of range.
    fn label(&self, index: usize) -> PyResult<Option<i64>> {
        if index >= self.cache.len() {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "record {index} out of range: the cache holds {}",
                self.cache.len()
            )));
        }
        Ok(self.cache.label(index))
    }

    /// A batch of records `indices` as a `CPUBuffer`: each cropped to `crop x crop` (`None`:
    /// whole records; at a random position seeded by `seed`, `epoch` and the index when
    /// `random_crop`, else centered), flipped horizontally with probability 1/2 when `flip`
    /// (seeded the same way), and written as `[N, H, W, C]` uint8, or with `normalize=True`
    /// as `[N, C, H, W]` float32 `(x / 255 - mean) / std` (`mean`/`std` default to ImageNet's).
    /// Labels are in `buf.labels`.
    ///
    /// Raises `ValueError` for an empty `indices`, an index out of range, a crop larger than
    /// the records, a corrupt record (naming it), or `mean`/`std` that do not match the
    /// channels; `OSError` for a record that was not stored (its decode failed at build time).
    #[pyo3(signature = (indices, *, epoch=0, crop=None, random_crop=false, flip=false, normalize=false, mean=None, std=None, seed=0))]
    #[allow(clippy::too_many_arguments)]
    fn load_batch(
        &self,
        py: Python<'_>,
        indices: Vec<u64>,
        epoch: u64,
        crop: Option<usize>,
        random_crop: bool,
        flip: bool,
        normalize: bool,
        mean: Option<Vec<f32>>,
        std: Option<Vec<f32>>,
        seed: u64,
    ) -> PyResult<CpuBuffer> {
        if !normalize && (mean.is_some() || std.is_some()) {
            return Err(PyValueError::new_err(
                "mean and std are used only with normalize=True",
            ));
        }
        let norm = normalize.then(|| {
            let base = Normalize::imagenet();
            Normalize {
                mean: mean.unwrap_or(base.mean),
                std: std.unwrap_or(base.std),
            }
        });
        let opts = ServeOptions {
            crop,
            random_crop,
            flip,
            normalize: norm,
            seed,
        };
        let batch = py
            .detach(|| self.cache.load_batch(&indices, epoch, &opts))
            .map_err(cache_err)?;
        Ok(CpuBuffer::from_batch(batch))
    }

    fn __repr__(&self) -> String {
        let [h, w, c] = self.cache.shape();
        format!("DecodedCache({} records of {h}x{w}x{c})", self.cache.len())
    }
}

/// Decodes and resizes the images at `paths` once into a decoded cache at `out` (replaced
/// when complete): record `i` is `paths[i]` as `[size, size, 3]` uint8 (`transform="resize"`
/// squashes, `"eval"` resizes the shorter side to `size * 256 / 224` and center-crops),
/// with `labels[i]` when given. Decodes on `num_threads` threads (default: all cores) with the
/// GIL released. Returns the failures as `"path: reason"` strings (those records are not
/// stored: reading them raises `OSError`).
///
/// Raises `ValueError` for an unknown transform, a zero size, `labels` of another length, or
/// records past the decoders' output limit (before any file is made); `OSError` when the file
/// cannot be written.
#[pyfunction]
#[pyo3(signature = (paths, out, *, size=256, transform="resize", labels=None, num_threads=None))]
pub(crate) fn build_decoded_cache(
    py: Python<'_>,
    paths: Vec<std::path::PathBuf>,
    out: std::path::PathBuf,
    size: usize,
    transform: &str,
    labels: Option<Vec<i64>>,
    num_threads: Option<usize>,
) -> PyResult<Vec<String>> {
    use spdl_io::{ImageOptions, TransformKind};
    let transform = match transform {
        "resize" => TransformKind::Resize,
        "eval" => TransformKind::Eval,
        other => {
            return Err(PyValueError::new_err(format!(
                "transform must be 'resize' or 'eval', not {other:?}"
            )))
        }
    };
    if labels.as_ref().is_some_and(|l| l.len() != paths.len()) {
        return Err(PyValueError::new_err("labels must have one entry per path"));
    }
    if size == 0 {
        return Err(PyValueError::new_err("size must be at least 1"));
    }
    let loader = ImageOptions {
        size: Some(size),
        transform,
        ..ImageOptions::default()
    }
    .loader()
    .map_err(cache_err)?;
    let threads = num_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let report = py
        .detach(|| {
            spdl_io::cache::build_from_files(&paths, labels.as_deref(), &loader, &out, threads)
        })
        .map_err(cache_err)?;
    Ok(report.failures)
}
