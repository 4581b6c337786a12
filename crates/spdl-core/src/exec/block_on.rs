//! Drives a `Stream` from a plain thread (the source thread), parking between items.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

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
