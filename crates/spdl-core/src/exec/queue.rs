//! Bounded queues between stages, instrumented for the stats.
//!
//! A thin wrapper over `tokio::sync::mpsc::channel`: the bound is the backpressure (a full
//! queue makes its producer wait), and every put and get records how long it waited and
//! whether the queue held data (SPDL's "data readiness": the share of time the queue was
//! non-empty; near 0 at the sink means the consumer waits for data).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::exec::block_on::block_on_until;
use crate::exec::spin::spin_until;
use crate::stats::{Histogram, QueueStats};

/// Shared counters of one queue.
pub(crate) struct QueueMeter {
    name: String,
    capacity: usize,
    inner: Mutex<MeterInner>,
}

struct MeterInner {
    /// Items in the queue as the meter counts them. A put is counted just after the item is
    /// in, so its get (on another thread) may be counted first: the count then dips below
    /// zero for a moment instead of losing that get, and the non-empty clock runs from a
    /// count of 1 to the next count of 0.
    len: i64,
    items: u64,
    nonempty_since: Option<Instant>,
    nonempty_total: Duration,
    put_wait: Duration,
    get_wait: Duration,
    /// Distributions of the waits, for SPDL's p90/p99 put and get times.
    put_hist: Histogram,
    get_hist: Histogram,
    started: Instant,
}

impl QueueMeter {
    fn new(name: String, capacity: usize) -> Self {
        QueueMeter {
            name,
            capacity,
            inner: Mutex::new(MeterInner {
                len: 0,
                items: 0,
                nonempty_since: None,
                nonempty_total: Duration::ZERO,
                put_wait: Duration::ZERO,
                get_wait: Duration::ZERO,
                put_hist: Histogram::new(),
                get_hist: Histogram::new(),
                started: Instant::now(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MeterInner> {
        // A poisoned meter only means a panic elsewhere; the counters are still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn on_put(&self, waited: Duration) {
        let mut m = self.lock();
        m.put_wait += waited;
        m.put_hist.record(waited);
        m.len += 1;
        if m.len == 1 {
            m.nonempty_since = Some(Instant::now());
        }
    }

    fn on_get(&self, waited: Duration) {
        let mut m = self.lock();
        m.get_wait += waited;
        m.get_hist.record(waited);
        m.items += 1;
        m.len -= 1;
        if m.len == 0 {
            if let Some(t) = m.nonempty_since.take() {
                m.nonempty_total += t.elapsed();
            }
        }
    }

    /// `n` messages passed between two fused stages: through this queue's place at once.
    /// One lock for all `n`: they never wait and the queue never holds them.
    pub(crate) fn pass(&self, n: u64) {
        let mut m = self.lock();
        m.items += n;
        m.put_hist.record_zeros(n);
        m.get_hist.record_zeros(n);
    }

    /// A snapshot for [`crate::stats::PipelineStats`].
    pub(crate) fn snapshot(&self) -> QueueStats {
        let m = self.lock();
        let elapsed = m.started.elapsed();
        let nonempty = m.nonempty_total + m.nonempty_since.map_or(Duration::ZERO, |t| t.elapsed());
        let per_item = |d: Duration| {
            if m.items == 0 {
                Duration::ZERO
            } else {
                d / m.items as u32
            }
        };
        QueueStats {
            name: self.name.clone(),
            capacity: self.capacity,
            items: m.items,
            occupancy_rate: if elapsed.is_zero() {
                0.0
            } else {
                nonempty.as_secs_f64() / elapsed.as_secs_f64()
            },
            mean_put_wait: per_item(m.put_wait),
            mean_get_wait: per_item(m.get_wait),
            put_wait: m.put_hist.summary(),
            get_wait: m.get_hist.summary(),
            elapsed,
        }
    }
}

/// The meter of a queue that two fused stages replace (items pass it without waiting).
pub(crate) fn passing_meter(name: String, capacity: usize) -> Arc<QueueMeter> {
    Arc::new(QueueMeter::new(name, capacity.max(1)))
}

/// Creates a bounded queue of `capacity` items named `name`.
pub(crate) fn queue<T>(name: String, capacity: usize) -> (QueueTx<T>, QueueRx<T>, Arc<QueueMeter>) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let meter = Arc::new(QueueMeter::new(name, capacity.max(1)));
    (
        QueueTx {
            tx,
            meter: meter.clone(),
        },
        QueueRx {
            rx,
            meter: meter.clone(),
        },
        meter,
    )
}

/// The sending half; a failed send means the receiver is gone (shutdown).
pub(crate) struct QueueTx<T> {
    tx: mpsc::Sender<T>,
    meter: Arc<QueueMeter>,
}

/// The receiver is gone: the pipeline is shutting down.
#[derive(Debug)]
pub(crate) struct Closed;

/// What a non-waiting put or get found instead of room or an item.
pub(crate) enum Busy<T> {
    /// The queue is full (put) or empty (get); a put hands the item back.
    Wait(T),
    /// The other side is gone (put), or gone with the queue empty (get).
    Closed,
}

impl<T> QueueTx<T> {
    /// Puts `item` if there is room now, without waiting.
    pub(crate) fn try_send(&self, item: T) -> Result<(), Busy<T>> {
        match self.tx.try_send(item) {
            Ok(()) => {
                self.meter.on_put(Duration::ZERO);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Busy::Closed),
            Err(mpsc::error::TrySendError::Full(item)) => Err(Busy::Wait(item)),
        }
    }

    /// Puts `item`, waiting while the queue is full.
    pub(crate) async fn send(&self, item: T) -> Result<(), Closed> {
        let item = match self.try_send(item) {
            Ok(()) => return Ok(()),
            Err(Busy::Closed) => return Err(Closed),
            Err(Busy::Wait(item)) => item,
        };
        let t = Instant::now();
        self.tx.send(item).await.map_err(|_| Closed)?;
        self.meter.on_put(t.elapsed());
        Ok(())
    }

    /// Puts the messages waiting in `outbox`, in order, while the queue has room now (a stage
    /// keeps its outputs in an outbox while the next queue is full, and goes on working).
    /// Returns whether any moved.
    pub(crate) fn try_send_from(&self, outbox: &mut VecDeque<T>) -> Result<bool, Closed> {
        let mut moved = false;
        while let Some(m) = outbox.pop_front() {
            match self.try_send(m) {
                Ok(()) => moved = true,
                Err(Busy::Wait(m)) => {
                    outbox.push_front(m);
                    break;
                }
                Err(Busy::Closed) => return Err(Closed),
            }
        }
        Ok(moved)
    }

    /// Waits for room, then puts the first message of `outbox`. Cancel-safe: if the wait is
    /// dropped, nothing was taken from the outbox.
    pub(crate) async fn send_first_of(&self, outbox: &mut VecDeque<T>) -> Result<(), Closed> {
        let permit = self.reserve().await?;
        if let Some(m) = outbox.pop_front() {
            permit.send(m);
        }
        Ok(())
    }

    /// Waits for room, then puts the item `make` returns. Cancel-safe: if the wait is dropped,
    /// nothing was taken (used in `select!` so a stage keeps working while its output is full).
    pub(crate) async fn reserve(&self) -> Result<Permit<'_, T>, Closed> {
        let t = Instant::now();
        let permit = self.tx.reserve().await.map_err(|_| Closed)?;
        Ok(Permit {
            permit,
            meter: &self.meter,
            waited: t.elapsed(),
        })
    }

    /// Puts `item` from a thread outside the runtime (the source), blocking while the queue
    /// is full.
    ///
    /// A full queue is waited on until half of it is free, not one slot: waking the thread for
    /// every slot the consumer frees costs a futex wake and a context switch per item, which
    /// was the largest share of the engine's per-item cost. The thread is the queue's only
    /// producer, so the room it waited for is still there when it sends; and when the
    /// consumer wants an item the queue is empty, so the wait never holds the pipeline up.
    pub(crate) fn blocking_send(&self, item: T) -> Result<(), Closed> {
        let item = match self.try_send(item) {
            Ok(()) => return Ok(()),
            Err(Busy::Closed) => return Err(Closed),
            Err(Busy::Wait(item)) => item,
        };
        let t = Instant::now();
        let room = (self.meter.capacity / 2).max(1);
        match block_on_until(self.tx.reserve_many(room), None) {
            // The permits go back to the queue: they only mark the wait's end.
            Some(Ok(permits)) => drop(permits),
            _ => return Err(Closed),
        }
        // There is room now, so this does not wait (unless another producer took it).
        self.tx.blocking_send(item).map_err(|_| Closed)?;
        self.meter.on_put(t.elapsed());
        Ok(())
    }
}

/// Room for one item in a queue; see [`QueueTx::reserve`].
pub(crate) struct Permit<'a, T> {
    permit: mpsc::Permit<'a, T>,
    meter: &'a QueueMeter,
    waited: Duration,
}

impl<T> Permit<'_, T> {
    /// Puts `item` into the reserved slot.
    pub(crate) fn send(self, item: T) {
        self.permit.send(item);
        self.meter.on_put(self.waited);
    }
}

/// The receiving half.
pub(crate) struct QueueRx<T> {
    rx: mpsc::Receiver<T>,
    meter: Arc<QueueMeter>,
}

impl<T> QueueRx<T> {
    /// Takes the next item if one is queued now, without waiting.
    pub(crate) fn try_recv(&mut self) -> Result<T, Busy<()>> {
        match self.rx.try_recv() {
            Ok(item) => {
                self.meter.on_get(Duration::ZERO);
                Ok(item)
            }
            Err(mpsc::error::TryRecvError::Disconnected) => Err(Busy::Closed),
            Err(mpsc::error::TryRecvError::Empty) => Err(Busy::Wait(())),
        }
    }

    /// Takes the next item; `None` once every sender is gone and the queue is empty.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        match self.try_recv() {
            Ok(item) => Some(item),
            Err(Busy::Closed) => None,
            Err(Busy::Wait(())) => {
                let t = Instant::now();
                let item = self.rx.recv().await?;
                self.meter.on_get(t.elapsed());
                Some(item)
            }
        }
    }

    /// Polls for the next item (for `Stream` implementations).
    pub(crate) fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        let r = self.rx.poll_recv(cx);
        if let std::task::Poll::Ready(Some(_)) = &r {
            self.meter.on_get(Duration::ZERO);
        }
        r
    }

    /// Takes the next item from a thread outside the runtime (the consumer), blocking until
    /// one arrives. On an empty queue it looks again for a moment ([`spin_until`]) before it
    /// sleeps: a consumer faster than the pipeline would otherwise be put to sleep and woken
    /// for every item.
    pub(crate) fn blocking_recv(&mut self) -> Option<T> {
        if let Ok(item) = self.try_recv() {
            return Some(item);
        }
        let t = Instant::now();
        spin_until(|| !self.rx.is_empty() || self.rx.is_closed());
        let item = match self.rx.try_recv() {
            Ok(item) => item,
            Err(_) => self.rx.blocking_recv()?,
        };
        self.meter.on_get(t.elapsed());
        Some(item)
    }

    /// Closes the queue: senders fail from now on; items already queued can still be taken.
    pub(crate) fn close(&mut self) {
        self.rx.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A put counted after its get (the two happen on different threads) must not leave the
    /// meter counting an item that is gone: the queue would then look non-empty forever.
    #[test]
    fn a_get_counted_before_its_put_leaves_the_queue_empty() {
        let meter = QueueMeter::new("q".into(), 4);
        meter.on_get(Duration::ZERO);
        meter.on_put(Duration::ZERO);
        assert_eq!(meter.lock().len, 0);
        assert!(
            meter.lock().nonempty_since.is_none(),
            "the non-empty clock must not run"
        );
        // An ordinary put and get start and stop the clock.
        meter.on_put(Duration::ZERO);
        assert!(meter.lock().nonempty_since.is_some());
        meter.on_get(Duration::ZERO);
        assert_eq!(meter.lock().len, 0);
        assert!(meter.lock().nonempty_since.is_none());
        assert_eq!(meter.snapshot().items, 2);
    }
}
