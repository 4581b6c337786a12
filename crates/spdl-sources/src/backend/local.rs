//! Local files: `tokio::fs`, byte-exact paths, whole files or ranges.

use std::io::SeekFrom;
use std::ops::Range;
use std::path::Path;

use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};

use super::{Backend, BoxFuture, Capability};
use crate::error::{Error, Result};
use crate::list::SampleList;
use crate::uri::Uri;

/// Local files and folders. Reads are not retried; listing walks a folder (any extension) or
/// reads a list file.
pub(crate) struct LocalBackend;

impl Backend for LocalBackend {
    fn capability(&self) -> Capability {
        Capability {
            read: true,
            read_range: true,
            list: cfg!(feature = "source-local"),
            retry: false,
        }
    }

    fn read<'a>(&'a self, uri: &'a Uri, range: Option<Range<u64>>) -> BoxFuture<'a, Result<Bytes>> {
        Box::pin(async move {
            match uri {
                Uri::Local(path) => read(path, range).await,
                other => Err(super::unsupported(other)),
            }
        })
    }

    fn list<'a>(&'a self, uri: &'a Uri) -> BoxFuture<'a, Result<SampleList>> {
        Box::pin(async move {
            match uri {
                #[cfg(feature = "source-local")]
                Uri::Local(path) if path.is_dir() => {
                    crate::local::walk_dir(path, &crate::local::Extensions::any())
                }
                #[cfg(feature = "source-local")]
                Uri::Local(path) => crate::local::read_list_file(path),
                other => Err(super::unsupported(other)),
            }
        })
    }
}

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
