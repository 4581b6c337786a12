//! Aggregation (batching) and disaggregation.
//!
//! An [`Aggregator`] turns items into groups; the built-in [`Batcher`] makes `Vec`s of `n`
//! items, as SPDL's `aggregate(n, drop_last)`. At the end of an epoch the partial group is
//! flushed (or dropped, and counted, with `drop_last`).

use std::sync::Arc;

use super::{Ids, Msg};
use crate::exec::queue::{QueueRx, QueueTx};
use crate::stats::StageMeter;

/// Groups items; implement it for custom batching (by size in bytes, by sequence length...).
///
/// Contract: an output returned by [`push`](Aggregator::push) or
/// [`flush`](Aggregator::flush) covers every item pushed since the previous output; the
/// engine relies on it to know which source positions an output stands for.
pub trait Aggregator<T>: Send + 'static {
    /// The group type.
    type Output: Send + 'static;

    /// Adds an item; returns a finished group when there is one.
    fn push(&mut self, item: T) -> Option<Self::Output>;

    /// Called at the end of each epoch (and when the input closes): returns the partial group,
    /// or `None` to drop it (the dropped items are counted as skipped).
    fn flush(&mut self) -> Option<Self::Output>;
}

/// Groups items into `Vec`s of `size` items (the last one may be shorter unless `drop_last`).
#[derive(Debug)]
pub struct Batcher<T> {
    size: usize,
    drop_last: bool,
    buf: Vec<T>,
}

impl<T> Batcher<T> {
    /// Batches of `size` items (at least 1); with `drop_last`, a short last batch is dropped.
    pub fn new(size: usize, drop_last: bool) -> Self {
        let size = size.max(1);
        Batcher {
            size,
            drop_last,
            // Grown as items come: a huge `size` must not allocate up front.
            buf: Vec::with_capacity(size.min(1024)),
        }
    }
}

impl<T: Send + 'static> Aggregator<T> for Batcher<T> {
    type Output = Vec<T>;

    fn push(&mut self, item: T) -> Option<Vec<T>> {
        self.buf.push(item);
        (self.buf.len() >= self.size)
            .then(|| std::mem::replace(&mut self.buf, Vec::with_capacity(self.size)))
    }

    fn flush(&mut self) -> Option<Vec<T>> {
        let rest = std::mem::take(&mut self.buf);
        (!rest.is_empty() && !self.drop_last).then_some(rest)
    }
}

/// Runs an aggregator between two queues.
pub(crate) async fn run_aggregate<T, A>(
    mut agg: A,
    meter: Arc<StageMeter>,
    mut input: QueueRx<Msg<T>>,
    output: QueueTx<Msg<A::Output>>,
) where
    T: Send + 'static,
    A: Aggregator<T>,
{
    let mut ids: Vec<u64> = Vec::new();
    let flush = |agg: &mut A, ids: &mut Vec<u64>| {
        let ids = Ids::from_vec(std::mem::take(ids));
        match agg.flush() {
            Some(out) => Some(Msg::Item(ids, out)),
            None if ids.len() > 0 => Some(Msg::Skip(ids)),
            None => None,
        }
    };
    loop {
        let msg = input.recv().await;
        let out = match msg {
            Some(Msg::Item(i, item)) => {
                meter.on_input();
                i.extend_into(&mut ids);
                agg.push(item)
                    .map(|out| Msg::Item(Ids::from_vec(std::mem::take(&mut ids)), out))
            }
            Some(Msg::Skip(i)) => Some(Msg::Skip(i)),
            Some(Msg::EndOfEpoch) => {
                if let Some(m) = flush(&mut agg, &mut ids) {
                    if send_counted(&output, &meter, m).await.is_err() {
                        return;
                    }
                }
                Some(Msg::EndOfEpoch)
            }
            None => {
                if let Some(m) = flush(&mut agg, &mut ids) {
                    let _ = send_counted(&output, &meter, m).await;
                }
                return;
            }
        };
        if let Some(m) = out {
            if send_counted(&output, &meter, m).await.is_err() {
                return;
            }
        }
    }
}

async fn send_counted<U>(
    output: &QueueTx<Msg<U>>,
    meter: &StageMeter,
    m: Msg<U>,
) -> Result<(), ()> {
    if matches!(m, Msg::Item(..)) {
        meter.on_output(1);
    }
    output.send(m).await.map_err(|_| ())
}

/// Splits each `Vec` back into its items; item `i` stands for position `i` of the group.
pub(crate) async fn run_disaggregate<T: Send + 'static>(
    meter: Arc<StageMeter>,
    mut input: QueueRx<Msg<Vec<T>>>,
    output: QueueTx<Msg<T>>,
) {
    while let Some(msg) = input.recv().await {
        let sent = match msg {
            Msg::Item(ids, items) => {
                meter.on_input();
                let n = items.len();
                // Keep per-item positions when they line up; otherwise the last item carries all.
                let mut per_item: Vec<Ids> = match ids {
                    Ids::Many(v) if v.len() == n => v.into_iter().map(Ids::One).collect(),
                    Ids::One(p) if n == 1 => vec![Ids::One(p)],
                    other if n == 0 => {
                        if other.len() > 0 && output.send(Msg::Skip(other)).await.is_err() {
                            return;
                        }
                        Vec::new()
                    }
                    other => {
                        let mut v = vec![Ids::None; n];
                        v[n - 1] = other;
                        v
                    }
                };
                let mut ok = true;
                for (item, ids) in items.into_iter().zip(per_item.drain(..)) {
                    meter.on_output(1);
                    if output.send(Msg::Item(ids, item)).await.is_err() {
                        ok = false;
                        break;
                    }
                }
                ok
            }
            Msg::Skip(ids) => output.send(Msg::Skip(ids)).await.is_ok(),
            Msg::EndOfEpoch => output.send(Msg::EndOfEpoch).await.is_ok(),
        };
        if !sent {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batcher_groups_and_flushes() {
        let mut b = Batcher::new(3, false);
        assert_eq!(b.push(1), None);
        assert_eq!(b.push(2), None);
        assert_eq!(b.push(3), Some(vec![1, 2, 3]));
        assert_eq!(b.push(4), None);
        assert_eq!(b.flush(), Some(vec![4]));
        assert_eq!(b.flush(), None);
        let mut d = Batcher::new(2, true);
        assert_eq!(d.push(1), None);
        assert_eq!(d.flush(), None);
    }
}
