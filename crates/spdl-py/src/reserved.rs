//! One buffer already taken from a pool (pinned or host memory), handed out as a pool of one:
//! the batch stages take it with a non-waiting `try_acquire` before they decode or collate, so
//! they never wait on a pool while holding a worker, and fall back to fresh memory instead.

use std::sync::Mutex;

use spdl_core::buffer::{BufferPool, PoolStats, PooledBuffer};

use crate::lock;

/// A pool of one buffer, taken from `pool` now if one is free.
pub(crate) struct Reserved {
    buffer: Mutex<Option<PooledBuffer>>,
    kind: &'static str,
}

impl Reserved {
    /// A pool of `buffer`, already taken (e.g. a pinned one from a device target).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn holding(buffer: PooledBuffer) -> Reserved {
        Reserved {
            kind: buffer.kind(),
            buffer: Mutex::new(Some(buffer)),
        }
    }

    /// A buffer of `len` bytes from `pool` if one is free now (`None` when the pool is at its
    /// bounds or cannot allocate: the caller uses fresh memory).
    pub(crate) fn take_from(pool: &dyn BufferPool, len: usize) -> Option<Reserved> {
        match pool.try_acquire(len) {
            Ok(Some(b)) => Some(Reserved::holding(b)),
            _ => None,
        }
    }

    fn take(&self, len: usize) -> spdl_core::Result<Option<PooledBuffer>> {
        match lock(&self.buffer).take() {
            Some(mut b) => {
                b.set_len(len)?;
                Ok(Some(b))
            }
            None => Ok(None),
        }
    }
}

impl BufferPool for Reserved {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn acquire(&self, len: usize) -> spdl_core::Result<PooledBuffer> {
        self.take(len)?.ok_or_else(|| {
            spdl_core::Error::new(
                spdl_core::ErrorKind::InvalidArgument,
                "the reserved buffer was already used",
            )
        })
    }

    fn try_acquire(&self, len: usize) -> spdl_core::Result<Option<PooledBuffer>> {
        self.take(len)
    }

    fn stats(&self) -> PoolStats {
        PoolStats::default()
    }

    fn trim(&self) -> usize {
        0
    }
}
