//! What flows through a Python-built pipeline: Python objects, or native values (paths, file
//! bytes, decoded images, batches) that native stages process without the GIL. A native value
//! becomes a Python object only when a Python op takes it or the consumer receives it.

use std::path::PathBuf;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyString, PyTuple};

use crate::buffer::CpuBuffer;
use crate::cuda::CudaBuffer;
use crate::error::{type_name, OpError};
use crate::io::Pos;
use crate::with_gil;

/// The input of a native stage that reads files: the path, the sample's key and label, and its
/// position in the epoch (for a listed sample).
pub(crate) struct PathInput {
    pub(crate) path: PathBuf,
    pub(crate) key: String,
    pub(crate) label: Option<i64>,
    pub(crate) pos: Option<Pos>,
}

/// The input of a native stage that decodes bytes: the sample's key, label, bytes and position.
pub(crate) struct BytesInput {
    pub(crate) key: String,
    pub(crate) label: Option<i64>,
    pub(crate) data: Vec<u8>,
    pub(crate) pos: Option<Pos>,
}

/// One item in the pipeline.
pub(crate) enum Item {
    /// Any Python object (what Python ops and sources give, unless it has a native form).
    Py(Py<PyAny>),
    /// A Python `str` (a path or key), kept as Rust so native ops read it without the GIL.
    Str(String),
    /// A sample of a native listing: a path and an optional class label.
    Sample {
        path: std::path::PathBuf,
        label: Option<i64>,
        pos: Option<Pos>,
    },
    /// File contents (from `ops.read_file`).
    Bytes {
        key: String,
        label: Option<i64>,
        data: Vec<u8>,
        pos: Option<Pos>,
    },
    /// A decoded image `[H, W, C]` (from `ops.decode_image` / `ops.load_image`).
    Image {
        key: String,
        label: Option<i64>,
        image: spdl_io::Image,
    },
    /// A collated batch (from `ops.collate`).
    Batch(spdl_io::ImageBatch),
    /// A group of items (from `aggregate`).
    List(Vec<Item>),
    /// A batch collated into pinned memory (`ops.collate()` right before `ops.to_device()`).
    HostBatch(spdl_io::HostBatch),
    /// A batch in device memory (from `ops.to_device`).
    Device(CudaBuffer),
    /// An array parsed from `.npy` or WAV bytes (from `ops.load_npy`, `ops.load_wav`).
    Array(crate::arrays::ArrayOut),
    /// Decoded video frames or audio (from the `ops` video/audio stages).
    #[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
    Media(crate::media::MediaOut),
}

impl Item {
    /// Wraps a Python object; an exact `str` is kept as Rust so native ops need no GIL.
    pub(crate) fn from_py(obj: Bound<'_, PyAny>) -> Item {
        if obj.is_exact_instance_of::<PyString>() {
            if let Ok(s) = obj.cast::<PyString>() {
                if let Ok(s) = s.to_str() {
                    return Item::Str(s.to_owned());
                }
            }
        }
        Item::Py(obj.unbind())
    }

    /// The Python object for this item. Images and batches become [`CpuBuffer`]s without a
    /// copy; file contents become `bytes`; a group becomes a `list`.
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match self {
            Item::Py(o) => o,
            Item::Str(s) => PyString::new(py, &s).into_any().unbind(),
            Item::Sample { path, label, .. } => {
                let key = PyString::new(py, &spdl_io::key_from_path(&path)).into_any();
                match label {
                    None => key.unbind(),
                    Some(l) => PyTuple::new(py, [key, l.into_pyobject(py)?.into_any()])?
                        .into_any()
                        .unbind(),
                }
            }
            Item::Bytes { data, .. } => PyBytes::new(py, &data).into_any().unbind(),
            Item::Image { key, label, image } => {
                Py::new(py, CpuBuffer::from_image(image, key, label))?.into_any()
            }
            Item::Batch(b) => Py::new(py, CpuBuffer::from_batch(b))?.into_any(),
            Item::Media(m) => m.into_py(py)?,
            Item::Array(a) => a.into_py(py)?,
            Item::List(items) => {
                let objs = items
                    .into_iter()
                    .map(|i| i.into_py(py))
                    .collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, objs)?.into_any().unbind()
            }
            Item::HostBatch(b) if b.is_pinned() => {
                // Only when the transfer after it is skipped: a CPU copy, the pinned buffer
                // goes back to its pool.
                let spdl_io::HostBatch { buffer, header } = b;
                let view = CpuBuffer::from_bytes(
                    header.dtype,
                    header.shape.to_vec(),
                    buffer.to_vec(),
                    header.keys,
                    header.labels,
                );
                Py::new(py, view)?.into_any()
            }
            // A host pool buffer: shared without a copy; it goes back to its pool when the
            // last view of it is dropped.
            Item::HostBatch(b) => Py::new(py, CpuBuffer::from_host_batch(b))?.into_any(),
            Item::Device(b) => Py::new(py, b)?.into_any(),
        })
    }

    /// The path this item designates (a `str`, `os.PathLike` or a listed sample), for the
    /// stage `op`; an error naming `op` and what the item is otherwise.
    pub(crate) fn into_path(self, op: &str) -> Result<PathInput, OpError> {
        let (path, label, pos) = match self {
            Item::Str(key) => {
                return Ok(PathInput {
                    path: PathBuf::from(&key),
                    key,
                    label: None,
                    pos: None,
                })
            }
            Item::Sample { path, label, pos } => (path, label, pos),
            Item::Py(obj) => with_gil(|py| {
                obj.bind(py)
                    .extract()
                    .map(|p| (p, None, None))
                    .map_err(|_| {
                        format!(
                            "{op} expects a path (str or os.PathLike), got {}",
                            type_name(obj.bind(py))
                        )
                    })
            })?,
            other => {
                return Err(format!(
                    "{op} expects a path (str or os.PathLike), got {}",
                    other.describe()
                )
                .into())
            }
        };
        let key = spdl_io::key_from_path(&path);
        Ok(PathInput {
            path,
            key,
            label,
            pos,
        })
    }

    /// The file bytes this item holds (from `ops.read_file()`, or a Python bytes-like object:
    /// `bytes`, `bytearray`, a `uint8` buffer, named `"<bytes>"`), for the stage `op` that
    /// reads `what` (e.g. `".npy "`, or `""`); an error naming `op` otherwise.
    pub(crate) fn into_bytes(self, op: &str, what: &str) -> Result<BytesInput, OpError> {
        let wrong = |got: String| {
            format!("{op} expects {what}bytes (e.g. from ops.read_file()), got {got}")
        };
        match self {
            Item::Bytes {
                key,
                label,
                data,
                pos,
            } => Ok(BytesInput {
                key,
                label,
                data,
                pos,
            }),
            Item::Py(obj) => with_gil(|py| {
                let obj = obj.bind(py);
                let data = if let Ok(b) = obj.cast::<PyBytes>() {
                    Some(b.as_bytes().to_vec())
                } else if let Ok(b) = obj.cast::<PyByteArray>() {
                    Some(b.to_vec())
                } else {
                    PyBuffer::<u8>::get(obj).and_then(|b| b.to_vec(py)).ok()
                };
                match data {
                    Some(data) => Ok(BytesInput {
                        key: "<bytes>".to_owned(),
                        label: None,
                        data,
                        pos: None,
                    }),
                    None => Err(wrong(type_name(obj)).into()),
                }
            }),
            other => Err(wrong(other.describe().to_owned()).into()),
        }
    }

    /// A short description for error messages.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Item::Py(_) => "a Python object",
            Item::Str(_) => "a str",
            Item::Sample { .. } => "a listed sample",
            Item::Bytes { .. } => "file bytes",
            Item::Image { .. } => "a decoded image",
            Item::Batch(_) => "a batch",
            Item::List(_) => "a list",
            Item::HostBatch(_) => "a batch in pinned memory",
            Item::Device(_) => "a CUDA batch",
            Item::Array(_) => "an array",
            Item::Media(crate::media::MediaOut::Video(_)) => "decoded video frames",
            Item::Media(crate::media::MediaOut::Audio(_)) => "decoded audio",
        }
    }
}
