//! `spdl_rs.io.load_decoder_plugin`: a third-party decoder loaded from a shared library.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::error::io_err;

/// Loads the decoder plugin at `path` (a shared library built with
/// `spdl_io::export_decoder_plugin!`) and returns its name; from then on every image loader
/// of this process (`load_image`, `decode_image`, the batch loaders and `ops` stages) decodes
/// its format, chosen by content. Raises `ValueError` naming the path when the file is not
/// such a plugin. Only load libraries you trust: loading runs their code.
#[pyfunction]
pub(crate) fn load_decoder_plugin(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    // SAFETY: the caller trusts the library (documented above), as with `ctypes.CDLL`.
    py.detach(|| unsafe { spdl_io::decode::plugin::load(&path) })
        .map_err(io_err)
}
