//! SPDL's `FilterGraph` in `spdl_rs.io`: a user-described FFmpeg filter graph with its own
//! `buffer` / `abuffer` inputs and `buffersink` / `abuffersink` outputs, fed and drained with
//! frame objects. Built with the `decode-ffmpeg` feature only.

use std::sync::Mutex;

use pyo3::prelude::*;

use spdl_io::ffmpeg::graph;

use crate::error::io_err;
use crate::lock;
use crate::media_frames::{frames_of, frames_to_py};

/// An FFmpeg filter graph described in full, as SPDL's `spdl.io.FilterGraph(filter_desc)`:
/// e.g. `"buffer=video_size=320x240:pix_fmt=yuv420p:time_base=1/25:pixel_aspect=1/1,hflip,buffersink"`
/// (see `get_buffer_desc` / `get_abuffer_desc` for the sources). Several inputs or outputs
/// are told apart by their instance names (`buffer@in0`, `buffersink@out1`), given as
/// `key=`.
///
/// - `add_frames(frames, *, key=None)`: sends `VideoFrames` / `ImageFrames` / `AudioFrames`
///   into an input (their pts in that input's time base);
/// - `flush()`: ends every input, so that filters holding frames back release them;
/// - `get_frames(*, key=None)`: every frame ready at an output, or `None`;
/// - `dump()`: the configured graph as text.
///
/// Raises `ValueError` naming the description for one FFmpeg rejects (unknown filter,
/// unconnected pad, no source or sink), and for an unknown or missing `key`.
#[pyclass(frozen, module = "spdl_rs.io", name = "FilterGraph")]
pub(crate) struct FilterGraph {
    inner: Mutex<graph::FilterGraph>,
}

impl FilterGraph {
    fn with<R>(&self, f: impl FnOnce(&mut graph::FilterGraph) -> R) -> R {
        let mut g = lock(&self.inner);
        f(&mut g)
    }
}

#[pymethods]
impl FilterGraph {
    #[new]
    fn new(filter_desc: &str) -> PyResult<Self> {
        let g = graph::FilterGraph::new(filter_desc).map_err(io_err)?;
        Ok(FilterGraph {
            inner: Mutex::new(g),
        })
    }

    /// Sends `frames` into the input `key` (optional with one input), with the GIL released.
    #[pyo3(signature = (frames, *, key=None))]
    fn add_frames(
        &self,
        py: Python<'_>,
        frames: &Bound<'_, PyAny>,
        key: Option<&str>,
    ) -> PyResult<()> {
        let f = frames_of(frames)?;
        py.detach(|| self.with(|g| g.add_frames(&f, key)))
            .map_err(io_err)
    }

    /// Marks the end of every input.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.with(graph::FilterGraph::flush))
            .map_err(io_err)
    }

    /// Every frame ready at the output `key` (optional with one output), or `None`.
    #[pyo3(signature = (*, key=None))]
    fn get_frames(&self, py: Python<'_>, key: Option<&str>) -> PyResult<Option<Py<PyAny>>> {
        let out = py
            .detach(|| self.with(|g| g.get_frames(key)))
            .map_err(io_err)?;
        out.map(|f| frames_to_py(py, f)).transpose()
    }

    /// The graph as text (`avfilter_graph_dump`).
    fn dump(&self) -> String {
        self.with(|g| g.dump())
    }

    /// Instance names of the inputs (the `key`s of `add_frames`).
    #[getter]
    fn input_names(&self) -> Vec<String> {
        self.with(|g| g.input_names().into_iter().map(str::to_owned).collect())
    }

    /// Instance names of the outputs (the `key`s of `get_frames`).
    #[getter]
    fn output_names(&self) -> Vec<String> {
        self.with(|g| g.output_names().into_iter().map(str::to_owned).collect())
    }
}
