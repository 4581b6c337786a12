//! The stream-to-stream stage: the user's function gets the epoch's items as a `Stream` and
//! returns a `Stream` of outputs, owning its own concurrency (e.g. `buffer_unordered`).
//!
//! The function is called once per epoch. Positions of consumed items (and of items skipped
//! upstream) are attached to the next output, so resumable state stays exact at the
//! granularity of outputs.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use futures_core::Stream;
use futures_util::StreamExt;

use super::FailureBudget;
use super::{Ids, Msg};
use crate::error::{BoxError, Error, ErrorKind};
use crate::exec::queue::{QueueRx, QueueTx};
use crate::stage::failures::Failures;
use crate::stats::{StageMeter, TaskOutcome};

/// A boxed `Send` stream.
pub type BoxStream<T> = Pin<Box<dyn Stream<Item = T> + Send + 'static>>;

/// The user's stream function.
pub(crate) type StreamFn<T, U> =
    Box<dyn FnMut(BoxStream<T>) -> BoxStream<Result<U, BoxError>> + Send + 'static>;

struct EpochInput<T> {
    rx: QueueRx<Msg<T>>,
    /// Positions consumed since the last output.
    ids: Vec<u64>,
    ended: bool,
    closed: bool,
}

pub(crate) async fn run_stream<T: Send + 'static, U: Send + 'static>(
    mut f: StreamFn<T, U>,
    meter: Arc<StageMeter>,
    failures: Arc<Failures>,
    budget: Option<FailureBudget>,
    input: QueueRx<Msg<T>>,
    output: QueueTx<Msg<U>>,
) {
    let shared = Arc::new(Mutex::new(EpochInput {
        rx: input,
        ids: Vec::new(),
        ended: false,
        closed: false,
    }));
    loop {
        {
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            if s.closed {
                return;
            }
            s.ended = false;
        }
        let src = shared.clone();
        let meter_in = meter.clone();
        let items = futures_util::stream::poll_fn(move |cx| {
            let mut s = src.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if s.ended || s.closed {
                    return Poll::Ready(None);
                }
                match s.rx.poll_recv(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(None) => s.closed = true,
                    Poll::Ready(Some(Msg::EndOfEpoch)) => s.ended = true,
                    Poll::Ready(Some(Msg::Skip(ids))) => ids.extend_into(&mut s.ids),
                    Poll::Ready(Some(Msg::Item(ids, item))) => {
                        meter_in.on_input();
                        ids.extend_into(&mut s.ids);
                        return Poll::Ready(Some(item));
                    }
                }
            }
        });
        let mut outputs = f(Box::pin(items));
        while let Some(out) = outputs.next().await {
            let ids = {
                let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                Ids::from_vec(std::mem::take(&mut s.ids))
            };
            let msg = match out {
                Ok(u) => {
                    meter.on_output(1);
                    Msg::Item(ids, u)
                }
                Err(e) => {
                    meter.on_task(std::time::Duration::ZERO, TaskOutcome::Failed);
                    let e = Error::from_op(ErrorKind::OpFailed, e).with_stage(meter.name());
                    if failures.record(&meter, budget, e) {
                        return;
                    }
                    Msg::Skip(ids)
                }
            };
            if output.send(msg).await.is_err() {
                return;
            }
        }
        drop(outputs);
        // The user's stream may stop before its input ends (e.g. `take(n)`): the rest of the
        // epoch's items are consumed as skipped, so the epoch still ends and is accounted for.
        let mut rest = Vec::new();
        let closed = loop {
            let (ended, closed) = {
                let s = shared.lock().unwrap_or_else(|e| e.into_inner());
                (s.ended, s.closed)
            };
            if ended || closed {
                break closed;
            }
            let next = {
                let src = shared.clone();
                futures_util::future::poll_fn(move |cx| {
                    let mut s = src.lock().unwrap_or_else(|e| e.into_inner());
                    s.rx.poll_recv(cx)
                })
                .await
            };
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            match next {
                None => s.closed = true,
                Some(Msg::EndOfEpoch) => s.ended = true,
                Some(Msg::Skip(ids)) | Some(Msg::Item(ids, _)) => ids.extend_into(&mut rest),
            }
        };
        let ids = {
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            let mut ids = std::mem::take(&mut s.ids);
            ids.extend(rest);
            Ids::from_vec(ids)
        };
        if ids.len() > 0 && output.send(Msg::Skip(ids)).await.is_err() {
            return;
        }
        if closed || output.send(Msg::EndOfEpoch).await.is_err() {
            return;
        }
    }
}
