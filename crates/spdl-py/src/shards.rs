//! `spdl_rs.sources.TarShards`: tar shards in the WebDataset layout from local disk, as a
//! pipeline source (`spdl_sources::shards`). Each shard is read with the GIL released; a
//! sample is a `dict` of its fields' `bytes`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyRuntimeWarning;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use spdl_sources::shards::{list_shards, EpochSamples, ShardSource, ShardState};

use crate::error::sources_err;
use crate::options::Kwargs;

/// Tar shards in the WebDataset layout (`0001.jpg` + `0001.cls` in one shard = one sample),
/// from a local brace pattern (`"data/train-{0000..0127}.tar"`) or a folder of `.tar` files.
///
/// Iterating yields one epoch: this rank's shards (shuffled per epoch from `seed` when
/// `shuffle`, strided over `world_size` ranks like `Sampler`; `rank`/`world_size` default to
/// the torchrun environment), each read once from its start, every sample a `dict`:
/// `{"__key__": "dir/0001", "__shard__": "path.tar", "__state__": (epoch, shard, offset),
/// "jpg": b"...", "cls": b"3"}`. Each `iter()` starts the next epoch (as
/// `PipelineBuilder.add_source` calls it), unless `set_epoch` chose one. `resume(state)` with
/// the `__state__` of the last sample consumed makes the next `iter()` yield the rest of that
/// epoch, seeking into the shard (no shard is read from its start again). When the shards do not divide among the ranks, `drop_last=True`
/// leaves the last ones out, `drop_last=False` repeats the first ones (as `Sampler`).
///
/// A shard that is missing, cut short or corrupt, or a sample with a repeated field, is
/// skipped and named: `failures` lists them for the last epoch, and a `RuntimeWarning` with
/// the count and the first ones is issued at the end of that epoch. The samples before the
/// failure in that shard are delivered; the one being read and the rest of the shard are not.
///
/// Raises `FileNotFoundError` naming a missing shard of the pattern, `ValueError` for a bad
/// pattern or rank.
#[pyclass(frozen, module = "spdl_rs.sources", name = "TarShards")]
pub(crate) struct TarShards {
    source: ShardSource,
    next_epoch: AtomicU64,
    resume_at: Mutex<Option<ShardState>>,
    failures: Arc<Mutex<Vec<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[pymethods]
impl TarShards {
    #[new]
    #[pyo3(signature = (pattern, **options))]
    fn new(py: Python<'_>, pattern: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let (dist, options) = Kwargs::parse("TarShards", options, |kw| kw.sampling())?;
        let shards = py.detach(|| list_shards(pattern)).map_err(sources_err)?;
        let source = ShardSource::new(shards, dist, options).map_err(sources_err)?;
        Ok(TarShards {
            source,
            next_epoch: AtomicU64::new(0),
            resume_at: Mutex::new(None),
            failures: Arc::default(),
        })
    }

    /// The shard files, in list order.
    #[getter]
    fn shards(&self) -> Vec<String> {
        self.source
            .shards()
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    }

    /// The shard indices this rank reads in `epoch`, in reading order.
    fn epoch_shards(&self, epoch: u64) -> Vec<usize> {
        self.source.epoch_shards(epoch)
    }

    /// Makes the next `iter()` read `epoch`.
    fn set_epoch(&self, epoch: u64) {
        self.next_epoch.store(epoch, Ordering::Relaxed);
    }

    /// What failed in the last epoch iterated: `"SHARD: sample KEY: REASON"` per failure.
    #[getter]
    fn failures(&self) -> Vec<String> {
        lock(&self.failures).clone()
    }

    /// Makes the next `iter()` yield the rest of an epoch after the sample whose `__state__`
    /// is `state` (`(epoch, shard, offset)`); later ones go on with the next epochs.
    fn resume(&self, state: (u64, usize, u64)) {
        let (epoch, shard, offset) = state;
        *lock(&self.resume_at) = Some(ShardState {
            epoch,
            shard,
            offset,
        });
    }

    /// Raises `ValueError` when a `resume` state names a shard this rank does not read.
    fn __iter__(&self) -> PyResult<TarShardIter> {
        let (epoch, samples) = match lock(&self.resume_at).take() {
            Some(state) => {
                let samples = self.source.resume(&state).map_err(sources_err)?;
                self.next_epoch.store(state.epoch + 1, Ordering::Relaxed);
                (state.epoch, samples)
            }
            None => {
                let epoch = self.next_epoch.fetch_add(1, Ordering::Relaxed);
                (epoch, self.source.epoch(epoch))
            }
        };
        lock(&self.failures).clear();
        Ok(TarShardIter {
            samples: Mutex::new(samples),
            paths: self.shards(),
            failures: Arc::clone(&self.failures),
            epoch,
            warned: Mutex::new(false),
        })
    }

    fn __repr__(&self) -> String {
        format!("TarShards({} shards)", self.source.shards().len())
    }
}

/// One epoch of a [`TarShards`].
#[pyclass(frozen, module = "spdl_rs.sources", name = "_TarShardIter")]
pub(crate) struct TarShardIter {
    samples: Mutex<EpochSamples>,
    /// The shard paths, for `__shard__`.
    paths: Vec<String>,
    failures: Arc<Mutex<Vec<String>>>,
    epoch: u64,
    warned: Mutex<bool>,
}

#[pymethods]
impl TarShardIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
        loop {
            let next = py.detach(|| lock(&self.samples).next());
            match next {
                Some(Ok(sample)) => {
                    let d = PyDict::new(py);
                    d.set_item("__key__", &sample.key)?;
                    d.set_item("__shard__", self.paths.get(sample.shard))?;
                    d.set_item("__state__", (self.epoch, sample.shard, sample.end))?;
                    for (field, data) in &sample.fields {
                        d.set_item(field, PyBytes::new(py, data))?;
                    }
                    return Ok(Some(d.unbind()));
                }
                Some(Err(e)) => lock(&self.failures).push(e.to_string()),
                None => {
                    let failures = lock(&self.failures).clone();
                    let mut warned = lock(&self.warned);
                    if !failures.is_empty() && !*warned {
                        *warned = true;
                        let shown: Vec<&str> =
                            failures.iter().take(3).map(String::as_str).collect();
                        let msg = format!(
                            "TarShards epoch {}: {} failed (shards or samples skipped): {}",
                            self.epoch,
                            failures.len(),
                            shown.join("; ")
                        );
                        py.import("warnings")?
                            .call_method1("warn", (msg, py.get_type::<PyRuntimeWarning>()))?;
                    }
                    return Ok(None);
                }
            }
        }
    }
}
