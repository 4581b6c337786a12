//! `spdl_rs.sources.TarShards`: tar shards in the WebDataset layout, as a pipeline source
//! (`spdl_sources::shards`), with an optional seeded shuffle buffer. Each shard is read with
//! the GIL released; a sample is a `dict` of its fields' `bytes`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyRuntimeWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use spdl_sources::shards::{list_shards_with, EpochSamples, SampleSpan, ShardSource, ShardState};
use spdl_sources::{FetchOptions, Fetcher};

use crate::error::sources_err;
use crate::lock;
use crate::options::Kwargs;

/// Tar shards in the WebDataset layout (`0001.jpg` + `0001.cls` in one shard = one sample),
/// from a local brace pattern (`"data/train-{0000..0127}.tar"`) or a folder of `.tar` files.
///
/// Iterating yields one epoch: this rank's shards (shuffled per epoch from `seed` when
/// `shuffle`, strided over `world_size` ranks like `Sampler`; `rank`/`world_size` default to
/// the torchrun environment), each read once from its start, every sample a `dict`:
/// `{"__key__": "dir/0001", "__shard__": "path.tar", "__state__": (epoch, shard, offset),
/// "jpg": b"...", "cls": b"3"}`. With `shuffle_buffer=N` (N > 1) samples also pass through a
/// buffer of N samples and leave it in a random order seeded by `seed`, the epoch and the rank
/// (WebDataset's `shuffle(N)`; memory: N samples), and `__state__` is
/// `(epoch, shard, offset, draws, buffered)`, `buffered` being the byte ranges of the samples
/// waiting in the buffer (opaque `bytes`). After a failure of keys out of order, a state
/// carries one more item: the items to pass over at `offset` (`(epoch, shard, offset, skip)`,
/// `(epoch, shard, offset, draws, buffered, skip)`). Each `iter()` starts the next epoch (as
/// `PipelineBuilder.add_source` calls it), unless `set_epoch` chose one. `resume(state)` with
/// the `__state__` of the last sample consumed makes the next `iter()` yield exactly the rest
/// of that epoch, seeking into the shard and reading buffered samples by their ranges (no
/// shard is read from its start again). When the shards do not divide among the ranks,
/// `drop_last=True` leaves the last ones out, `drop_last=False` repeats the first ones (as
/// `Sampler`).
///
/// Shards may also be `http(s)://` or `s3://` URIs (brace patterns, an S3 prefix, a manifest)
/// when the module is built with spdl-py's `source-http` / `source-s3` features (the
/// `spdl-rs-ffmpeg` wheel is);
/// otherwise such a pattern raises `ValueError` naming the missing feature. While one remote
/// shard streams, the next `shard_readahead` (default 2; 0: none) are already opened, so their
/// request latency is not waited for in turn; sample order is the same.
///
/// Every sample seen is yielded once, or is one named failure (`delivered + failed = seen`).
/// Hard and symbolic links inside a shard yield their target's bytes (as
/// `tarfile.extractfile`), when the target came earlier in the shard; a 0-byte member is a
/// 0-byte field; directories and FIFOs are not samples. A shard that is missing, cut short
/// inside a member or header, or corrupt; a sample with a repeated field, an unresolvable
/// link, or members not consecutive in the shard (never yielded as two half samples) is
/// skipped and named: `failures` lists them for the last epoch, and a `RuntimeWarning` with
/// the count and the first ones is issued at the end of that epoch. The samples before the
/// failure in a cut shard are delivered; the one being read and the rest of the shard are
/// not. A shard that ends after a whole member without its end-of-archive marker is read to
/// its end, as `tarfile` does.
///
/// `required=["jpg;png", "cls"]` makes a sample that lacks one of those fields (`;` separates
/// alternatives, one of which is enough) one failure naming the shard, the key, the missing
/// field and the fields it has (`"missing field: SHARD: sample KEY: no field jpg or png; its
/// fields: cls"`), instead of a sample the next stage fails on without that context.
///
/// Raises `FileNotFoundError` naming a missing shard of the pattern, `ValueError` for a bad
/// pattern, rank, unsupported scheme or an empty `required` entry, `TypeError` for a
/// `required` that is not a sequence of `str`.
#[pyclass(frozen, module = "spdl_rs.sources", name = "TarShards")]
pub(crate) struct TarShards {
    source: ShardSource,
    next_epoch: AtomicU64,
    resume_at: Mutex<Option<ShardState>>,
    failures: Arc<Mutex<Vec<String>>>,
    shuffle_buffer: bool,
}

/// `buffered` of a state as bytes: `(shard, offset, end)` as three little-endian u64 each.
fn pack_spans(spans: &[SampleSpan]) -> Vec<u8> {
    let mut out = Vec::with_capacity(spans.len() * 24);
    for s in spans {
        out.extend_from_slice(&(s.shard as u64).to_le_bytes());
        out.extend_from_slice(&s.offset.to_le_bytes());
        out.extend_from_slice(&s.end.to_le_bytes());
    }
    out
}

fn unpack_spans(packed: &[u8]) -> Option<Vec<SampleSpan>> {
    if packed.len() % 24 != 0 {
        return None;
    }
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    packed
        .chunks_exact(24)
        .map(|c| {
            Some(SampleSpan {
                shard: usize::try_from(word(&c[..8])).ok()?,
                offset: word(&c[8..16]),
                end: word(&c[16..]),
            })
        })
        .collect()
}

#[pymethods]
impl TarShards {
    #[new]
    #[pyo3(signature = (pattern, *, shuffle_buffer=0, shard_readahead=spdl_sources::shards::DEFAULT_READAHEAD, required=None, **options))]
    fn new(
        py: Python<'_>,
        pattern: &str,
        shuffle_buffer: usize,
        shard_readahead: usize,
        required: Option<Vec<String>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let required = required
            .unwrap_or_default()
            .iter()
            .map(|entry| {
                let alts: Vec<String> = entry
                    .split(';')
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .map(str::to_owned)
                    .collect();
                if alts.is_empty() {
                    return Err(PyValueError::new_err(format!(
                        "required: {entry:?} names no field"
                    )));
                }
                Ok(alts)
            })
            .collect::<PyResult<Vec<_>>>()?;
        let (dist, options) = Kwargs::parse("TarShards", options, |kw| kw.sampling())?;
        let fetcher = Fetcher::new(FetchOptions::default()).map_err(sources_err)?;
        let shards = py
            .detach(|| {
                let shards = list_shards_with(pattern, &fetcher)?;
                // A scheme this build cannot read fails here, not shard by shard.
                fetcher.capability(&shards[0])?;
                Ok::<_, spdl_sources::Error>(shards)
            })
            .map_err(sources_err)?;
        let source = ShardSource::new(shards, dist, options)
            .map_err(sources_err)?
            .with_fetcher(fetcher)
            .with_shuffle_buffer(shuffle_buffer)
            .with_readahead(shard_readahead)
            .with_required_fields(required);
        Ok(TarShards {
            source,
            next_epoch: AtomicU64::new(0),
            resume_at: Mutex::new(None),
            failures: Arc::default(),
            shuffle_buffer: shuffle_buffer > 1,
        })
    }

    /// The shard files, in list order.
    #[getter]
    fn shards(&self) -> Vec<String> {
        self.source
            .shards()
            .iter()
            .map(ToString::to_string)
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
    /// is `state` (`(epoch, shard, offset[, skip])`, or
    /// `(epoch, shard, offset, draws, buffered[, skip])` with a shuffle buffer); later ones
    /// go on with the next epochs.
    ///
    /// Raises `ValueError` for a tuple of another length or a `buffered` that is not a
    /// multiple of 24 bytes.
    fn resume(&self, state: &Bound<'_, PyTuple>) -> PyResult<()> {
        let bad = || PyValueError::new_err("state must be a __state__ tuple of a TarShards sample");
        let (epoch, shard, offset): (u64, usize, u64) = (
            state.get_item(0)?.extract()?,
            state.get_item(1)?.extract()?,
            state.get_item(2)?.extract()?,
        );
        let (draws, buffered, skip) = match state.len() {
            3 => (0, Vec::new(), 0),
            4 => (0, Vec::new(), state.get_item(3)?.extract()?),
            5 | 6 => {
                let draws: u64 = state.get_item(3)?.extract()?;
                let packed: Vec<u8> = state.get_item(4)?.extract()?;
                let skip: u64 = match state.len() {
                    6 => state.get_item(5)?.extract()?,
                    _ => 0,
                };
                (draws, unpack_spans(&packed).ok_or_else(bad)?, skip)
            }
            _ => return Err(bad()),
        };
        *lock(&self.resume_at) = Some(ShardState {
            epoch,
            shard,
            offset,
            skip,
            draws,
            buffered,
            failures: 0,
        });
        Ok(())
    }

    /// Raises `ValueError` when a `resume` state names a shard this rank does not read.
    fn __iter__(&self) -> PyResult<TarShardIter> {
        let buffered = self.shuffle_buffer;
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
            buffered,
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
    /// Whether a shuffle buffer is in use (`__state__` has five items).
    buffered: bool,
    warned: Mutex<bool>,
}

#[pymethods]
impl TarShardIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
        loop {
            let next = py.detach(|| {
                let mut samples = lock(&self.samples);
                let next = samples.next();
                let state = matches!(next, Some(Ok(_))).then(|| samples.state());
                (next, state)
            });
            match next {
                (Some(Ok(sample)), state) => {
                    let d = PyDict::new(py);
                    d.set_item("__key__", &sample.key)?;
                    d.set_item("__shard__", self.paths.get(sample.shard))?;
                    let st = state.unwrap_or_else(|| sample.state(self.epoch));
                    let mut items: Vec<Py<PyAny>> = vec![
                        st.epoch.into_pyobject(py)?.into_any().unbind(),
                        st.shard.into_pyobject(py)?.into_any().unbind(),
                        st.offset.into_pyobject(py)?.into_any().unbind(),
                    ];
                    if self.buffered {
                        items.push(st.draws.into_pyobject(py)?.into_any().unbind());
                        let spans = PyBytes::new(py, &pack_spans(&st.buffered));
                        items.push(spans.into_any().unbind());
                    }
                    if st.skip > 0 {
                        items.push(st.skip.into_pyobject(py)?.into_any().unbind());
                    }
                    d.set_item("__state__", PyTuple::new(py, items)?)?;
                    for (field, data) in &sample.fields {
                        d.set_item(field, PyBytes::new(py, data))?;
                    }
                    return Ok(Some(d.unbind()));
                }
                (Some(Err(e)), _) => lock(&self.failures).push(e.to_string()),
                (None, _) => {
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
