//! Reading one file's bytes, synchronously or on Tokio's blocking pool.

use std::path::Path;

use crate::error::{Error, Result};

/// Reads the whole file at `path` into memory (`std::fs::read`), on the calling thread.
///
/// An empty file gives an empty vector: the decoder, not the reader, reports it.
///
/// # Errors
/// Each error names `path`:
/// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) when nothing is there,
/// [`ErrorKind::PermissionDenied`](crate::ErrorKind::PermissionDenied) when it may not be read,
/// [`ErrorKind::IsADirectory`](crate::ErrorKind::IsADirectory) when it is a folder,
/// [`ErrorKind::Io`](crate::ErrorKind::Io) for any other failure (see
/// [`Error::is_temporary`]).
pub fn read_file(path: impl AsRef<Path>) -> Result<Vec<u8>> {
    let path = path.as_ref();
    std::fs::read(path).map_err(|e| Error::io(e, path))
}

/// Reads the whole file at `path` with `tokio::fs::read`, for an async I/O stage.
///
/// `tokio::fs` runs the blocking `read` on Tokio's blocking thread pool, so this must be awaited
/// inside a Tokio runtime (spdl-core's pipelines run one); it does not start a runtime of its
/// own. A stage that already runs on a blocking pool should call [`read_file`] instead, which
/// avoids the hand-off.
///
/// # Errors
/// The same as [`read_file`], each naming `path`.
pub async fn read_file_async(path: impl AsRef<Path>) -> Result<Vec<u8>> {
    let path = path.as_ref();
    tokio::fs::read(path).await.map_err(|e| Error::io(e, path))
}
