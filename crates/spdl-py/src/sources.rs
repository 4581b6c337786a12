//! `spdl_rs.sources`: native listings. Given to `PipelineBuilder.add_source`, a [`SampleList`]
//! is iterated in Rust on the source thread, without the GIL.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::error::sources_err;
use crate::io::Pos;
use crate::item::Item;
use crate::lock;
use crate::options::Kwargs;

/// An ordered list of samples: a path and, for `image_folder`, an integer class label.
///
/// Iterating it from Python gives `str` paths (or `(path, label)` tuples when labelled); given
/// to `PipelineBuilder.add_source`, it is iterated natively (no GIL per item) and each epoch
/// goes over it again. Mirrors the file lists SPDL examples build with `glob`.
#[pyclass(frozen, module = "spdl_rs.sources", name = "SampleList")]
pub(crate) struct SampleList {
    pub(crate) samples: Arc<Vec<(PathBuf, Option<i64>)>>,
    classes: Vec<String>,
}

impl SampleList {
    fn from_list(list: spdl_sources::SampleList, classes: Vec<String>) -> Self {
        SampleList {
            samples: Arc::new(
                list.into_samples()
                    .into_iter()
                    .map(|s| (s.path, s.label))
                    .collect(),
            ),
            classes,
        }
    }

    /// The pipeline items of one epoch, each knowing its position and the epoch.
    pub(crate) fn items(
        samples: &Arc<Vec<(PathBuf, Option<i64>)>>,
        epoch: u64,
    ) -> impl Iterator<Item = Item> + Send + 'static {
        let samples = samples.clone();
        (0..samples.len()).map(move |i| Item::Sample {
            path: samples[i].0.clone(),
            label: samples[i].1,
            pos: Some(Pos {
                index: i as u64,
                epoch,
            }),
        })
    }
}

fn sample_to_py(py: Python<'_>, s: &(PathBuf, Option<i64>)) -> PyResult<Py<PyAny>> {
    let key = spdl_io::key_from_path(&s.0);
    Ok(match s.1 {
        None => key.into_pyobject(py)?.into_any().unbind(),
        Some(l) => PyTuple::new(
            py,
            [
                key.into_pyobject(py)?.into_any(),
                l.into_pyobject(py)?.into_any(),
            ],
        )?
        .into_any()
        .unbind(),
    })
}

#[pymethods]
impl SampleList {
    fn __len__(&self) -> usize {
        self.samples.len()
    }

    fn __getitem__(&self, py: Python<'_>, index: isize) -> PyResult<Py<PyAny>> {
        let n = self.samples.len() as isize;
        let i = if index < 0 { index + n } else { index };
        if i < 0 || i >= n {
            return Err(PyIndexError::new_err(format!(
                "index {index} out of range for {n} samples"
            )));
        }
        sample_to_py(py, &self.samples[i as usize])
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let items = self
            .samples
            .iter()
            .map(|s| sample_to_py(py, s))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)?.try_iter().map(|i| i.into_any())
    }

    /// The paths, in order.
    #[getter]
    fn paths(&self) -> Vec<String> {
        self.samples
            .iter()
            .map(|s| spdl_io::key_from_path(&s.0))
            .collect()
    }

    /// The labels, in order (`None` for unlabelled samples).
    #[getter]
    fn labels(&self) -> Vec<Option<i64>> {
        self.samples.iter().map(|s| s.1).collect()
    }

    /// Class names, index = label (`image_folder` only; empty otherwise).
    #[getter]
    fn classes(&self) -> Vec<String> {
        self.classes.clone()
    }

    /// A new list of the samples at `indices`, in that order (repeats allowed): e.g. one
    /// rank's share `list.select(list(sampler))`. Raises `IndexError` for an index out of range.
    fn select(&self, indices: Vec<usize>) -> PyResult<SampleList> {
        let n = self.samples.len();
        let samples = indices
            .into_iter()
            .map(|i| {
                self.samples.get(i).cloned().ok_or_else(|| {
                    PyIndexError::new_err(format!("index {i} out of range for {n} samples"))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(SampleList {
            samples: Arc::new(samples),
            classes: self.classes.clone(),
        })
    }

    fn __repr__(&self) -> String {
        format!("SampleList({} samples)", self.samples.len())
    }

    /// Pickle support (a config holding a `SampleList` runs in another process): rebuilt by
    /// `_native._sample_list(paths, labels, classes)`, the paths byte-exact (as `os.fsdecode`
    /// strings).
    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(
        Bound<'py, PyAny>,
        (Vec<OsString>, Vec<Option<i64>>, Vec<String>),
    )> {
        let rebuild = py.import("spdl_rs._native")?.getattr("_sample_list")?;
        let paths = self
            .samples
            .iter()
            .map(|s| s.0.clone().into_os_string())
            .collect();
        let labels = self.samples.iter().map(|s| s.1).collect();
        Ok((rebuild, (paths, labels, self.classes.clone())))
    }
}

/// Rebuilds a pickled [`SampleList`] (its `__reduce__`). Raises `ValueError` when `paths` and
/// `labels` differ in length.
#[pyfunction]
#[pyo3(name = "_sample_list")]
pub(crate) fn sample_list_from_parts(
    paths: Vec<PathBuf>,
    labels: Vec<Option<i64>>,
    classes: Vec<String>,
) -> PyResult<SampleList> {
    if paths.len() != labels.len() {
        return Err(PyValueError::new_err(format!(
            "{} paths but {} labels",
            paths.len(),
            labels.len()
        )));
    }
    Ok(SampleList {
        samples: Arc::new(paths.into_iter().zip(labels).collect()),
        classes,
    })
}

fn extensions(ext: Option<Vec<String>>) -> spdl_sources::Extensions {
    match ext {
        // The loaded decoder plugins' extensions too (`spdl_rs.io.load_decoder_plugin`).
        None => {
            spdl_sources::Extensions::images_and(spdl_io::Registry::with_defaults().extensions())
        }
        Some(v) => spdl_sources::Extensions::new(v),
    }
}

/// One `RuntimeWarning` per listing warning (a directory loop that was cut).
fn warn_listing(py: Python<'_>, list: &spdl_sources::SampleList) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
    for warning in list.warnings() {
        let text = std::ffi::CString::new(warning.replace('\0', "\\0")).unwrap_or_default();
        PyErr::warn(py, &category, &text, 1)?;
    }
    Ok(())
}

/// Lists the files under `root`, recursively, whose extension is in `extensions` (default:
/// common image extensions and those of the loaded decoder plugins; case-insensitive), sorted by path bytes (the same order on every
/// machine). Releases the GIL while listing.
///
/// Hidden entries (names starting with `.`: `.DS_Store`, AppleDouble `._*`,
/// `.ipynb_checkpoints/`; and `__MACOSX/`) are skipped unless `include_hidden`. Symbolic links
/// are followed; a link back to an ancestor folder is cut with one `RuntimeWarning` naming it;
/// a broken link is listed, and reading it fails naming the path ("broken symbolic link").
///
/// Raises `FileNotFoundError` / `NotADirectoryError` / `OSError` naming the path.
#[pyfunction]
#[pyo3(signature = (root, extensions=None, *, include_hidden=false))]
pub(crate) fn list_files(
    py: Python<'_>,
    root: PathBuf,
    extensions: Option<Vec<String>>,
    include_hidden: bool,
) -> PyResult<SampleList> {
    let ext = self::extensions(extensions);
    let options = spdl_sources::WalkOptions { include_hidden };
    let list = py
        .detach(|| spdl_sources::walk_dir_with(&root, &ext, &options))
        .map_err(sources_err)?;
    warn_listing(py, &list)?;
    Ok(SampleList::from_list(list, Vec::new()))
}

/// Lists `root` in torchvision's `ImageFolder` layout: one sub-folder per class, sorted by
/// name, class `i` has label `i`. Releases the GIL while listing.
///
/// Hidden folders (`.ipynb_checkpoints`, `__MACOSX`) are no class, and hidden files inside
/// classes are skipped, unless `include_hidden`; links are treated as by `list_files`.
///
/// Raises `FileNotFoundError` for a missing root, `ValueError` when there is no class folder
/// or (unless `allow_empty`) a class folder has no image.
#[pyfunction]
#[pyo3(signature = (root, extensions=None, allow_empty=false, *, include_hidden=false))]
pub(crate) fn image_folder(
    py: Python<'_>,
    root: PathBuf,
    extensions: Option<Vec<String>>,
    allow_empty: bool,
    include_hidden: bool,
) -> PyResult<SampleList> {
    let ext = self::extensions(extensions);
    let options = spdl_sources::WalkOptions { include_hidden };
    let folder = py
        .detach(|| spdl_sources::ImageFolder::open_with(&root, &ext, allow_empty, &options))
        .map_err(sources_err)?;
    warn_listing(py, folder.samples())?;
    let classes = folder
        .classes()
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    Ok(SampleList::from_list(folder.into_samples(), classes))
}

/// One rank's share of each epoch, as torch's `DistributedSampler` (see
/// `spdl_sources::Sampler`).
#[pyclass(module = "spdl_rs.sources", name = "Sampler")]
pub(crate) struct Sampler {
    inner: Mutex<spdl_sources::Sampler>,
}

fn remainder_name(r: spdl_sources::Remainder) -> &'static str {
    match r {
        spdl_sources::Remainder::Drop => "drop",
        spdl_sources::Remainder::Pad => "pad",
    }
}

/// `(done_below, done_above)` of a pipeline `state_dict()` (`{"epoch", "done_below",
/// "done_above"}`); `done_below` is `None` when the pipeline finished its epoch 0 (it then
/// reports `{"epoch": 1, "done_below": 0}`): every position is done.
fn pipeline_progress(d: &Bound<'_, PyDict>) -> PyResult<(Option<u64>, Vec<u64>)> {
    let field = |k: &str| {
        d.get_item(k)?.ok_or_else(|| {
            PyValueError::new_err(format!(
                "pipeline_state has no {k:?}: pass a pipeline's state_dict()"
            ))
        })
    };
    let epoch: u64 = field("epoch")?.extract()?;
    let done_below: u64 = field("done_below")?.extract()?;
    let done_above: Vec<u64> = field("done_above")?.extract()?;
    match epoch {
        0 => Ok((Some(done_below), done_above)),
        1 if done_below == 0 && done_above.is_empty() => Ok((None, Vec::new())),
        _ => Err(PyValueError::new_err(format!(
            "pipeline_state is for pipeline epoch {epoch}: a sampler's state covers one epoch, so build one pipeline per sampler epoch"
        ))),
    }
}

fn invalid_state(msg: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("Sampler.from_state: {msg}"))
}

#[pymethods]
impl Sampler {
    #[new]
    #[pyo3(signature = (len, **options))]
    fn new(len: u64, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let (dist, options) = Kwargs::parse("Sampler", options, |kw| kw.sampling())?;
        let inner = spdl_sources::Sampler::new(len, dist, options).map_err(sources_err)?;
        Ok(Sampler {
            inner: Mutex::new(inner),
        })
    }

    /// Selects the epoch (reshuffles with `(seed, epoch)`; starts it afresh).
    fn set_epoch(&self, epoch: u64) {
        lock(&self.inner).set_epoch(epoch);
    }

    #[getter]
    fn epoch(&self) -> u64 {
        lock(&self.inner).epoch()
    }

    #[getter]
    fn rank(&self) -> u64 {
        lock(&self.inner).dist().rank()
    }

    #[getter]
    fn world_size(&self) -> u64 {
        lock(&self.inner).dist().world_size()
    }

    /// This rank's items per epoch (padding included).
    fn __len__(&self) -> usize {
        lock(&self.inner).num_samples() as usize
    }

    /// This rank's dataset indices of the epoch not yet delivered, in order.
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v: Vec<u64> = lock(&self.inner).iter().map(|s| s.index).collect();
        PyList::new(py, v)?.try_iter().map(|i| i.into_any())
    }

    /// As `iter(sampler)`, with `(index, position, padded)`: `position` is the item's place in
    /// the epoch's global order (what `mark_delivered` takes), `padded` marks a repeat that only
    /// evens out the ranks (exclude it from metrics).
    fn iter_with_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v: Vec<(u64, u64, bool)> = lock(&self.inner)
            .iter()
            .map(|s| (s.index, s.position, s.padded))
            .collect();
        PyList::new(py, v)?.try_iter().map(|i| i.into_any())
    }

    /// Records that the item at global `position` was delivered (for `state()`).
    fn mark_delivered(&self, position: u64) -> PyResult<()> {
        lock(&self.inner)
            .mark_delivered(position)
            .map_err(sources_err)
    }

    /// The resumable state of this rank (`spdl_sources::SamplerState`) as a JSON string.
    ///
    /// With `pipeline_state` (a pipeline's `state_dict()`, whose source is this sampler's
    /// share as listed when it started, e.g. `files.select(list(sampler))`), the state also
    /// records what that pipeline delivered; the sampler itself is not changed. Raises
    /// `ValueError` for a malformed `pipeline_state` or a position past the share.
    #[pyo3(signature = (pipeline_state=None))]
    fn state(
        &self,
        py: Python<'_>,
        pipeline_state: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        let sampler = lock(&self.inner);
        let s = match pipeline_state {
            None => sampler.state(),
            Some(p) => {
                let (done_below, done_above) = pipeline_progress(p)?;
                // A finished epoch: every item the pipeline was given.
                let done_below =
                    done_below.unwrap_or(sampler.num_samples() - sampler.num_delivered());
                sampler
                    .state_after(done_below, &done_above)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?
            }
        };
        drop(sampler);
        let d = PyDict::new(py);
        d.set_item("version", s.version)?;
        d.set_item("len", s.len)?;
        d.set_item("shuffle", s.shuffle)?;
        d.set_item("seed", s.seed)?;
        d.set_item("epoch", s.epoch)?;
        d.set_item("remainder", remainder_name(s.remainder))?;
        d.set_item("world_size", s.world_size)?;
        d.set_item("rank", s.rank)?;
        if !s.reshards.is_empty() {
            let list = PyList::empty(py);
            for r in &s.reshards {
                let rd = PyDict::new(py);
                rd.set_item("world_size", r.world_size)?;
                rd.set_item("delivered", r.delivered.clone())?;
                if !r.delivered_ahead.is_empty() {
                    rd.set_item("delivered_ahead", r.delivered_ahead.clone())?;
                }
                list.append(rd)?;
            }
            d.set_item("reshards", list)?;
        }
        d.set_item("delivered", s.delivered)?;
        if !s.delivered_ahead.is_empty() {
            d.set_item("delivered_ahead", s.delivered_ahead)?;
        }
        py.import("json")?.getattr("dumps")?.call1((d,))?.extract()
    }

    /// The sampler `state()` was taken from, where it left off (same world size).
    #[staticmethod]
    fn from_state(py: Python<'_>, state: &str) -> PyResult<Sampler> {
        let d = py
            .import("json")?
            .getattr("loads")?
            .call1((state,))
            .map_err(|e| invalid_state(format!("not a JSON state ({e})")))?;
        let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
            d.get_item(k)
                .map_err(|_| invalid_state(format!("missing {k:?}")))
        };
        let opt = |k: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
            Ok(d.call_method1("get", (k,))?.into_any()).map(|v| (!v.is_none()).then_some(v))
        };
        let num = |v: Bound<'_, PyAny>, k: &str| -> PyResult<u64> {
            v.extract()
                .map_err(|_| invalid_state(format!("{k:?} must be a non-negative int")))
        };
        let remainder = match get("remainder")?.extract::<String>().as_deref() {
            Ok("drop") => spdl_sources::Remainder::Drop,
            Ok("pad") => spdl_sources::Remainder::Pad,
            _ => return Err(invalid_state("\"remainder\" must be \"drop\" or \"pad\"")),
        };
        let mut reshards = Vec::new();
        if let Some(list) = opt("reshards")? {
            for r in list.try_iter()? {
                let r = r?;
                let field = |k: &str| -> PyResult<Bound<'_, PyAny>> {
                    r.get_item(k)
                        .map_err(|_| invalid_state(format!("a reshard has no {k:?}")))
                };
                reshards.push(spdl_sources::Reshard {
                    world_size: num(field("world_size")?, "world_size")?,
                    delivered: field("delivered")?
                        .extract()
                        .map_err(|_| invalid_state("reshard \"delivered\" must be a list"))?,
                    delivered_ahead: match r.call_method1("get", ("delivered_ahead",))? {
                        v if v.is_none() => Vec::new(),
                        v => v.extract().map_err(|_| {
                            invalid_state("reshard \"delivered_ahead\" must be a list")
                        })?,
                    },
                });
            }
        }
        let state = spdl_sources::SamplerState {
            version: get("version")?
                .extract()
                .map_err(|_| invalid_state("\"version\" must be an int"))?,
            len: num(get("len")?, "len")?,
            shuffle: get("shuffle")?
                .extract()
                .map_err(|_| invalid_state("\"shuffle\" must be a bool"))?,
            seed: num(get("seed")?, "seed")?,
            epoch: num(get("epoch")?, "epoch")?,
            remainder,
            world_size: num(get("world_size")?, "world_size")?,
            rank: num(get("rank")?, "rank")?,
            reshards,
            delivered: num(get("delivered")?, "delivered")?,
            delivered_ahead: match opt("delivered_ahead")? {
                None => Vec::new(),
                Some(v) => v
                    .extract()
                    .map_err(|_| invalid_state("\"delivered_ahead\" must be a list"))?,
            },
        };
        let inner = spdl_sources::Sampler::from_state(&state).map_err(sources_err)?;
        Ok(Sampler {
            inner: Mutex::new(inner),
        })
    }

    /// The sampler of rank `rank` of a new world of `world_size` ranks that deals what
    /// `progress` (from [`merge_states`]) left of the epoch: elastic resume after the world size
    /// changed. The new ranks together yield every remaining sample exactly once (plus marked
    /// padding, or with `drop_last=True` up to `world_size - 1` left out). Without `rank` and
    /// `world_size`, they come from torchrun's `RANK` / `WORLD_SIZE`.
    ///
    /// Raises `ValueError` for a malformed or inconsistent `progress`, or an invalid rank.
    #[staticmethod]
    #[pyo3(signature = (progress, *, rank=None, world_size=None, drop_last=false))]
    fn resume(
        py: Python<'_>,
        progress: &str,
        rank: Option<u64>,
        world_size: Option<u64>,
        drop_last: bool,
    ) -> PyResult<Sampler> {
        let progress: spdl_sources::EpochProgress = serde_json::from_str(progress)
            .map_err(|e| PyValueError::new_err(format!("Sampler.resume: bad progress: {e}")))?;
        let dist = match (rank, world_size) {
            (None, None) => spdl_sources::DistInfo::from_env(),
            (r, w) => spdl_sources::DistInfo::new(r.unwrap_or(0), w.unwrap_or(1)),
        }
        .map_err(sources_err)?;
        let remainder = if drop_last {
            spdl_sources::Remainder::Drop
        } else {
            spdl_sources::Remainder::Pad
        };
        // Rebuilding the base sequence is O(len): no GIL needed.
        let inner = py
            .detach(|| spdl_sources::Sampler::resume(&progress, dist, remainder))
            .map_err(sources_err)?;
        Ok(Sampler {
            inner: Mutex::new(inner),
        })
    }

    fn __repr__(&self) -> String {
        let s = lock(&self.inner);
        format!(
            "Sampler(len={}, rank={}, world_size={}, epoch={}, num_samples={})",
            s.len(),
            s.dist().rank(),
            s.dist().world_size(),
            s.epoch(),
            s.num_samples()
        )
    }
}

/// Merges the `state()` of every rank of a job (any order, one per rank) into the epoch's
/// progress, a JSON string for `Sampler.resume` with a new world size: every sample any rank
/// delivered is done, every other one remains (see `spdl_sources::merge_states`). Its size
/// grows with the world sizes and the out-of-order deliveries, not with the dataset.
///
/// Raises `ValueError` when a state is malformed, a rank is missing or repeated, or the states
/// are not of the same job and epoch.
#[pyfunction]
pub(crate) fn merge_states(py: Python<'_>, states: Vec<String>) -> PyResult<String> {
    let states = states
        .iter()
        .enumerate()
        .map(|(i, s)| {
            serde_json::from_str::<spdl_sources::SamplerState>(s).map_err(|e| {
                PyValueError::new_err(format!("merge_states: state {i} is malformed: {e}"))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let progress = py
        .detach(|| spdl_sources::merge_states(&states))
        .map_err(sources_err)?;
    serde_json::to_string(&progress).map_err(|e| PyValueError::new_err(e.to_string()))
}
