//! The one sanctioned way to spawn a task: aborted when its handle is dropped.
//!
//! Mirrors DataFusion's `SpawnedTask`: dropping a pipeline drops every handle, so every
//! task stops at its next `.await`, and no task outlives the pipeline that started it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::JoinHandle;

/// A spawned task that is aborted when this handle is dropped.
pub(crate) struct SpawnedTask<T> {
    handle: JoinHandle<T>,
}

impl<T: Send + 'static> SpawnedTask<T> {
    /// Spawns `fut` on the current runtime (must be called from within it).
    #[allow(clippy::disallowed_methods)] // the one allowed call site
    pub(crate) fn spawn<F>(fut: F) -> Self
    where
        F: Future<Output = T> + Send + 'static,
    {
        SpawnedTask {
            handle: tokio::spawn(fut),
        }
    }
}

impl<T> Future for SpawnedTask<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.handle).poll(cx)
    }
}

impl<T> Drop for SpawnedTask<T> {
    fn drop(&mut self) {
        self.handle.abort();
    }
}
