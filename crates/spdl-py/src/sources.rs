//! `spdl_rs.sources`: native listings. Given to `PipelineBuilder.add_source`, a [`SampleList`]
//! is iterated in Rust on the source thread, without the GIL.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::error::sources_err;
use crate::item::{Item, Pos};

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

    fn __repr__(&self) -> String {
        format!("SampleList({} samples)", self.samples.len())
    }
}

fn extensions(ext: Option<Vec<String>>) -> spdl_sources::Extensions {
    match ext {
        None => spdl_sources::Extensions::images(),
        Some(v) => spdl_sources::Extensions::new(v),
    }
}

/// Lists the files under `root`, recursively, whose extension is in `extensions` (default:
/// common image extensions; case-insensitive), sorted by path bytes (the same order on every
/// machine). Releases the GIL while listing.
///
/// Raises `FileNotFoundError` / `NotADirectoryError` / `OSError` naming the path.
#[pyfunction]
#[pyo3(signature = (root, extensions=None))]
pub(crate) fn list_files(
    py: Python<'_>,
    root: PathBuf,
    extensions: Option<Vec<String>>,
) -> PyResult<SampleList> {
    let ext = self::extensions(extensions);
    let list = py
        .detach(|| spdl_sources::walk_dir(&root, &ext))
        .map_err(sources_err)?;
    Ok(SampleList::from_list(list, Vec::new()))
}

/// Lists `root` in torchvision's `ImageFolder` layout: one sub-folder per class, sorted by
/// name, class `i` has label `i`. Releases the GIL while listing.
///
/// Raises `FileNotFoundError` for a missing root, `ValueError` when there is no class folder
/// or (unless `allow_empty`) a class folder has no image.
#[pyfunction]
#[pyo3(signature = (root, extensions=None, allow_empty=false))]
pub(crate) fn image_folder(
    py: Python<'_>,
    root: PathBuf,
    extensions: Option<Vec<String>>,
    allow_empty: bool,
) -> PyResult<SampleList> {
    let ext = self::extensions(extensions);
    let folder = py
        .detach(|| spdl_sources::ImageFolder::open(&root, &ext, allow_empty))
        .map_err(sources_err)?;
    let classes = folder
        .classes()
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    Ok(SampleList::from_list(folder.into_samples(), classes))
}
