//! Lanes: how a stage's blocking work runs on the worker pool. A lane is one pool job that
//! keeps taking the stage's queued jobs until none is left, so a busy stage costs one channel
//! hand-off per job rather than one pool submission; at most `max` lanes (the stage's
//! concurrency) run at once. A lane never waits long: with nothing queued it looks again for
//! up to [`crate::exec::spin::SPIN`] (unless other jobs wait for a worker), then ends, and the
//! next [`Lanes::push`] starts one again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use crate::exec::pool::Submitter;
use crate::exec::spin::spin_until;

/// What a lane does with one job; `false` ends the lane (the pipeline is shutting down).
pub(crate) type Work<J> = Box<dyn Fn(J) -> bool + Send + Sync>;

/// Whether the pipeline is shutting down: lanes stop taking jobs.
pub(crate) type IsClosed = Box<dyn Fn() -> bool + Send + Sync>;

/// The lanes of one stage.
pub(crate) struct Lanes<J> {
    tx: Sender<J>,
    rx: Receiver<J>,
    active: AtomicUsize,
    max: usize,
    submitter: Submitter,
    work: Work<J>,
    closed: IsClosed,
}

impl<J: Send + 'static> Lanes<J> {
    /// Lanes running `work` on each job, at most `max` at once, on `submitter`'s pool.
    pub(crate) fn new(
        max: usize,
        submitter: Submitter,
        work: Work<J>,
        closed: IsClosed,
    ) -> Arc<Self> {
        let (tx, rx) = crossbeam_channel::unbounded();
        Arc::new(Lanes {
            tx,
            rx,
            active: AtomicUsize::new(0),
            max: max.max(1),
            submitter,
            work,
            closed,
        })
    }

    /// Queues `job` and starts a lane if fewer than `max` run; `false` once the pool is gone.
    /// The queue is unbounded: the stage (or the head of its group) bounds what it admits.
    pub(crate) fn push(self: &Arc<Self>, job: J) -> bool {
        if self.tx.send(job).is_err() {
            return false;
        }
        if self.try_acquire() {
            let lanes = self.clone();
            return self.submitter.submit(move || lanes.run());
        }
        true
    }

    fn try_acquire(&self) -> bool {
        self.active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |a| {
                (a < self.max).then_some(a + 1)
            })
            .is_ok()
    }

    /// The next queued job. With none queued the lane looks again for a moment
    /// ([`spin_until`]) before it ends, unless other jobs wait for a worker: the stage's
    /// producer is usually about to push one, and a lane that ended costs a pool submission
    /// and a worker wake-up to restart.
    fn next_job(&self) -> Option<J> {
        if let Ok(job) = self.rx.try_recv() {
            return Some(job);
        }
        spin_until(|| !self.rx.is_empty() || !self.submitter.is_idle());
        self.rx.try_recv().ok()
    }

    /// One lane: run queued jobs until none is left, then release the lane slot.
    fn run(self: Arc<Self>) {
        loop {
            while let Some(job) = self.next_job() {
                if (self.closed)() || !(self.work)(job) {
                    break;
                }
            }
            self.active.fetch_sub(1, Ordering::AcqRel);
            // A job queued between our last look and the release would otherwise wait for
            // the next push: look again.
            if self.rx.is_empty() || (self.closed)() || !self.try_acquire() {
                return;
            }
        }
    }
}
