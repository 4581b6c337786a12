//! Local files: `tokio::fs`, byte-exact paths, whole files or ranges.

use std::io::SeekFrom;
use std::ops::Range;
use std::path::Path;

use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};

use crate::error::{Error, Result};

/// The whole file, or `range` of it (cut at the end of the file).
pub(crate) async fn read(path: &Path, range: Option<Range<u64>>) -> Result<Bytes> {
    let Some(range) = range else {
        return tokio::fs::read(path)
            .await
            .map(Bytes::from)
            .map_err(|e| Error::io(e, path));
    };
    let io = |e| Error::io(e, path);
    let mut file = tokio::fs::File::open(path).await.map_err(io)?;
    file.seek(SeekFrom::Start(range.start)).await.map_err(io)?;
    let mut buf = Vec::with_capacity((range.end - range.start).min(64 << 20) as usize);
    file.take(range.end - range.start)
        .read_to_end(&mut buf)
        .await
        .map_err(io)?;
    Ok(Bytes::from(buf))
}
