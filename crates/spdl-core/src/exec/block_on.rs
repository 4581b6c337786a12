//! Drives a `Stream` or a future from a plain thread (the source thread, the consumer),
//! parking while it waits.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

use futures_core::Stream;

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// An iterator over a stream's items, for a thread outside any runtime. Streams that need a
/// tokio reactor (sockets, timers) must bring their own runtime.
pub(crate) struct BlockingStream<T> {
    stream: Pin<Box<dyn Stream<Item = T> + Send>>,
    waker: Option<Waker>,
}

impl<T> BlockingStream<T> {
    pub(crate) fn new(stream: Pin<Box<dyn Stream<Item = T> + Send>>) -> Self {
        BlockingStream {
            stream,
            waker: None,
        }
    }
}

impl<T> Iterator for BlockingStream<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let waker = self
            .waker
            .get_or_insert_with(|| Waker::from(Arc::new(Unpark(std::thread::current()))))
            .clone();
        let mut cx = Context::from_waker(&waker);
        loop {
            match self.stream.as_mut().poll_next(&mut cx) {
                Poll::Ready(item) => return item,
                Poll::Pending => std::thread::park(),
            }
        }
    }
}

/// Polls `fut` from this thread until it is ready (`Some`) or `deadline`, if any, passes
/// (`None`), parking in between. It needs no runtime, so it works while the pipeline's runtime
/// shuts down; `fut` must not need a tokio reactor (a channel receive is fine).
pub(crate) fn block_on_until<F: Future>(fut: F, deadline: Option<Instant>) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Some(out);
        }
        match deadline {
            None => std::thread::park(),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return None;
                }
                std::thread::park_timeout(deadline - now);
            }
        }
    }
}
