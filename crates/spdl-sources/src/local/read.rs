//! Reading one file's bytes, synchronously or on Tokio's blocking pool.

use std::io::Read;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};

/// Reads the whole file at `path` into memory, on the calling thread: one `stat`, `open` and
/// read, as `std::fs::read` (a device or a pipe is checked before it is opened).
///
/// An empty file gives an empty vector: the decoder, not the reader, reports it.
///
/// # Errors
/// Each error names `path`:
/// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) when nothing is there,
/// [`ErrorKind::PermissionDenied`](crate::ErrorKind::PermissionDenied) when it may not be read,
/// [`ErrorKind::IsADirectory`](crate::ErrorKind::IsADirectory) when it is a folder,
/// [`ErrorKind::Io`](crate::ErrorKind::Io) for any other failure (see
/// [`Error::is_temporary`]); [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
/// when a device gives more than [`MAX_STREAM_BYTES`], or for a FIFO or socket.
pub fn read_file(path: impl AsRef<Path>) -> Result<Vec<u8>> {
    let path = path.as_ref();
    let meta = std::fs::metadata(path).map_err(|e| Error::io(e, path))?;
    let size = size_of(&meta, path)?;
    let file = std::fs::File::open(path).map_err(|e| Error::io(e, path))?;
    let mut data = Vec::new();
    match size {
        Some(n) => {
            data.reserve_exact(n);
            let mut file = file;
            file.read_to_end(&mut data)
        }
        // A device (`/dev/zero`) may never end: read at most a bounded amount.
        None => file.take(MAX_STREAM_BYTES + 1).read_to_end(&mut data),
    }
    .map_err(|e| Error::io(e, path))?;
    bounded(data, size, path)
}

/// What `meta` (of `path`, links followed) says of the read: `Some(size)` for a regular file,
/// `None` for a device or a folder (whose read then fails with its own error). A FIFO or a
/// socket is refused: opening one waits for a writer, possibly forever.
fn size_of(meta: &std::fs::Metadata, path: &Path) -> Result<Option<usize>> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_fifo() || kind.is_socket() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "not a regular file (a FIFO or socket, whose read could wait forever)",
        )
        .with_path(path));
    }
    Ok(kind
        .is_file()
        .then(|| usize::try_from(meta.len()).unwrap_or(0)))
}

/// `data` as read; from a device (`size` unknown), an error when it reached the bound.
fn bounded(data: Vec<u8>, size: Option<usize>, path: &Path) -> Result<Vec<u8>> {
    if size.is_none() && data.len() as u64 > MAX_STREAM_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("not a regular file, and it gave more than {MAX_STREAM_BYTES} bytes"),
        )
        .with_path(path));
    }
    Ok(data)
}

/// The most bytes [`read_file`] takes from something that is not a regular file (a device,
/// a pipe), whose size is not known in advance: 1 GiB, the decoders' default output limit.
pub const MAX_STREAM_BYTES: u64 = 1 << 30;

/// Reads the whole file at `path` with `tokio::fs`, for an async I/O stage.
///
/// `tokio::fs` runs the blocking calls on Tokio's blocking thread pool, so this must be awaited
/// inside a Tokio runtime (spdl-core's pipelines run one); it does not start a runtime of its
/// own. A stage that already runs on a blocking pool should call [`read_file`] instead, which
/// avoids the hand-off.
///
/// # Errors
/// The same as [`read_file`], each naming `path`.
pub async fn read_file_async(path: impl AsRef<Path>) -> Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let path = path.as_ref();
    // The kind check is one `stat` on this thread (cheap on a local disk): a hand-off of its
    // own would double the blocking-pool traffic of every read.
    let meta = std::fs::metadata(path).map_err(|e| Error::io(e, path))?;
    if size_of(&meta, path)?.is_some() {
        // A regular file: one hand-off to the blocking pool reads it whole.
        return tokio::fs::read(path).await.map_err(|e| Error::io(e, path));
    }
    // A device: a bounded read (tokio's `File` hands each chunk to the blocking pool).
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| Error::io(e, path))?;
    let mut data = Vec::new();
    file.take(MAX_STREAM_BYTES + 1)
        .read_to_end(&mut data)
        .await
        .map_err(|e| Error::io(e, path))?;
    bounded(data, None, path)
}
