//! A remote shard (HTTP, S3) as a blocking [`Read`]: one sequential stream per shard, through
//! the [`Fetcher`]'s backend. When the connection fails mid-body, the stream is reopened with a
//! range request at the byte it stopped at (the only time a range is asked for), at most
//! [`RetryPolicy::max_retries`](crate::RetryPolicy::max_retries) times in a row without a byte
//! read in between; each reopening has the fetcher's own retries and backoff.

use std::io::Read;
use std::sync::Arc;

use bytes::{Buf as _, Bytes};
use tokio::runtime::Runtime;

use crate::backend::{Chunks, Opened};
use crate::error::{Error, ErrorKind, Result};
use crate::fetch::Fetcher;
use crate::uri::Uri;

/// The body of one remote shard from a byte offset on.
pub(crate) struct RemoteRead {
    rt: Arc<Runtime>,
    fetcher: Fetcher,
    uri: Uri,
    /// Offset in the shard of the next byte handed out.
    pos: u64,
    chunk: Bytes,
    body: Option<Box<dyn Chunks>>,
    /// Bytes the open body should still deliver, when the server said.
    left: Option<u64>,
    /// Failures in a row with no byte read between them.
    failures: u32,
}

impl RemoteRead {
    /// Opens `uri` at byte `start` (errors as [`Fetcher::fetch`], after its retries).
    pub(crate) fn open(rt: Arc<Runtime>, fetcher: Fetcher, uri: Uri, start: u64) -> Result<Self> {
        let opened = rt.block_on(fetcher.open(&uri, start))?;
        Ok(Self::with_body(rt, fetcher, uri, start, opened))
    }

    /// The stream of `uri` from byte `start`, whose body `opened` was already opened there
    /// (a shard opened ahead of its turn, see `ShardSource::with_readahead`).
    pub(crate) fn with_body(
        rt: Arc<Runtime>,
        fetcher: Fetcher,
        uri: Uri,
        start: u64,
        opened: Opened,
    ) -> Self {
        RemoteRead {
            rt,
            fetcher,
            uri,
            pos: start,
            chunk: Bytes::new(),
            body: Some(opened.body),
            left: opened.len,
            failures: 0,
        }
    }

    fn reopen(&mut self) -> Result<()> {
        let opened = self.rt.block_on(self.fetcher.open(&self.uri, self.pos))?;
        self.body = Some(opened.body);
        self.left = opened.len;
        Ok(())
    }

    /// The next chunk of the open body, or why there is none (`Ok(None)`: the end).
    fn next_chunk(&mut self) -> Result<Option<Bytes>> {
        let Some(body) = self.body.as_mut() else {
            return Ok(None);
        };
        let stall = self.fetcher.options().stall_timeout;
        let next = self
            .rt
            .block_on(async { tokio::time::timeout(stall, body.next_chunk()).await });
        match next {
            Ok(Some(Ok(bytes))) => {
                if let Some(left) = &mut self.left {
                    *left = left.saturating_sub(bytes.len() as u64);
                }
                Ok(Some(bytes))
            }
            Ok(Some(Err(e))) => Err(e),
            Ok(None) => match self.left {
                Some(left) if left > 0 => Err(Error::new(
                    ErrorKind::ShortBody,
                    format!("the body ended {left} bytes early"),
                )),
                _ => Ok(None),
            },
            Err(_) => Err(Error::new(
                ErrorKind::Stalled,
                format!(
                    "no data for {} (stall timeout) at byte {}",
                    crate::backend::secs(stall),
                    self.pos
                ),
            )),
        }
    }
}

impl Read for RemoteRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if !self.chunk.is_empty() {
                let n = buf.len().min(self.chunk.len());
                buf[..n].copy_from_slice(&self.chunk[..n]);
                self.chunk.advance(n);
                self.pos += n as u64;
                self.failures = 0;
                return Ok(n);
            }
            if self.body.is_none() {
                // Resume where the last body stopped.
                if let Err(e) = self.reopen() {
                    return Err(std::io::Error::other(e));
                }
            }
            match self.next_chunk() {
                Ok(Some(bytes)) => self.chunk = bytes,
                Ok(None) => return Ok(0),
                Err(e) => {
                    self.body = None;
                    self.failures += 1;
                    if self.failures > self.fetcher.options().retry.max_retries {
                        let e = e
                            .with_uri(crate::backend::shown(&self.uri))
                            .with_attempts(self.failures);
                        return Err(std::io::Error::other(e));
                    }
                }
            }
        }
    }
}
