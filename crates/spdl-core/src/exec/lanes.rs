//! Lanes: how a stage's blocking work runs on the worker pool. A lane is one pool job that
//! keeps taking the stage's queued jobs until none is left, so a busy stage costs one channel
//! hand-off per job rather than one pool submission; at most `max` lanes (the stage's
//! concurrency) run at once. A lane never waits long: with nothing queued it looks again for
//! up to [`crate::exec::spin::SPIN`] (unless other jobs wait for a worker), then ends, and the
//! next [`Lanes::push`] starts one again.
//!
//! Each job is numbered as it is pushed; the blocking call it makes can read the number
//! ([`call_seq`]), so an op can order its own calls as they were handed out (the Python
//! binding's GIL turnstile) even when the lane that took a job is preempted before it starts;
//! and it can leave work for the moment its outputs have been handed on ([`after_report`]).

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use crate::exec::pool::Submitter;
use crate::exec::spin::spin_until;

/// What a lane does with one job; `false` ends the lane (the pipeline is shutting down).
pub(crate) type Work<J> = Box<dyn Fn(J) -> bool + Send + Sync>;

/// Whether the pipeline is shutting down: lanes stop taking jobs.
pub(crate) type IsClosed = Box<dyn Fn() -> bool + Send + Sync>;

thread_local! {
    /// The number of the job this lane took, until its first blocking call takes it.
    static TAKEN: Cell<Option<u64>> = const { Cell::new(None) };
    /// The number of the job whose blocking call runs on this thread now.
    static CALL: Cell<Option<u64>> = const { Cell::new(None) };
    /// Whether this thread runs a lane's job now.
    static IN_LANE: Cell<bool> = const { Cell::new(false) };
    /// What the job's call left for the moment its outputs are handed on.
    static AFTER_REPORT: RefCell<Vec<Box<dyn FnOnce()>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` once the outputs of the op call running on this thread have been handed on (to
/// the stage's task, or to the tail of its fused group, which keeps their order), or when a
/// stage fused after it starts its own call, whichever comes first; at once outside a stage's
/// blocking call. An op that orders its calls' results uses it to let the next one go only
/// after its own result is on its way.
pub fn after_report(f: impl FnOnce() + 'static) {
    if IN_LANE.with(Cell::get) {
        AFTER_REPORT.with(|a| a.borrow_mut().push(Box::new(f)));
    } else {
        f();
    }
}

/// Runs what the last call left for after its report (see [`after_report`]).
pub(crate) fn reported() {
    let left = AFTER_REPORT.with(|a| std::mem::take(&mut *a.borrow_mut()));
    for f in left {
        f();
    }
}

/// The number of the job whose op call runs on this thread: its place in the order the stage
/// handed its jobs to its lanes (from 0, per stage, over the pipeline's life). `None` outside
/// a stage's own call (a stage fused inline after another, a source, an async op).
///
/// With one thread handing out jobs (a stage's task, or the head of a fused group) the numbers
/// follow the input order; a job may be dropped unrun at shutdown, leaving a gap.
pub fn call_seq() -> Option<u64> {
    CALL.with(Cell::get)
}

/// Runs `call` as the call of the job the current lane took: [`call_seq`] gives its number
/// inside, and `None` again after (for stages run inline after it).
pub(crate) fn as_job_call<R>(call: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CALL.with(|c| c.set(None));
        }
    }
    reported(); // a stage fused after another: that one's outputs are on their way
    CALL.with(|c| c.set(TAKEN.with(Cell::take)));
    let _reset = Reset;
    call()
}

/// The lanes of one stage.
pub(crate) struct Lanes<J> {
    tx: Sender<(u64, J)>,
    rx: Receiver<(u64, J)>,
    /// Jobs pushed so far (the next job's number).
    pushed: AtomicU64,
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
            pushed: AtomicU64::new(0),
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
        let seq = self.pushed.fetch_add(1, Ordering::Relaxed);
        if self.tx.send((seq, job)).is_err() {
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
    fn next_job(&self) -> Option<(u64, J)> {
        if let Ok(job) = self.rx.try_recv() {
            return Some(job);
        }
        spin_until(|| !self.rx.is_empty() || !self.submitter.is_idle());
        self.rx.try_recv().ok()
    }

    /// One lane: run queued jobs until none is left, then release the lane slot.
    fn run(self: Arc<Self>) {
        loop {
            while let Some((seq, job)) = self.next_job() {
                if (self.closed)() {
                    break;
                }
                TAKEN.with(|t| t.set(Some(seq)));
                IN_LANE.with(|l| l.set(true));
                let go_on = (self.work)(job);
                IN_LANE.with(|l| l.set(false));
                TAKEN.with(|t| t.set(None));
                reported();
                if !go_on {
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::Mutex;

    use super::*;
    use crate::exec::pool::WorkerPool;

    /// Each job's call sees its push number; what it leaves for after its report runs once the
    /// job's work is over (no report here), and at once outside a lane.
    #[test]
    fn calls_see_their_push_number_and_run_what_they_left_after() {
        let pool = WorkerPool::new("lanes-test", 2).unwrap();
        let (tx, rx) = mpsc::channel::<(u32, Option<u64>, Option<u64>)>();
        let log = Arc::new(Mutex::new(Vec::new()));
        let work_log = log.clone();
        let tx = Mutex::new(tx);
        let lanes = Lanes::new(
            2,
            pool.submitter(),
            Box::new(move |job: u32| {
                let seen = as_job_call(|| {
                    let log = work_log.clone();
                    after_report(move || log.lock().unwrap().push(job));
                    call_seq()
                });
                // A stage run inline after the call: no number of its own; the first call's
                // leftover ran when this one started.
                let inner = as_job_call(call_seq);
                tx.lock().unwrap().send((job, seen, inner)).unwrap();
                true
            }),
            Box::new(|| false),
        );
        for job in 0..20u32 {
            assert!(lanes.push(job));
        }
        let mut got: Vec<_> = rx.iter().take(20).collect();
        got.sort();
        let want: Vec<_> = (0..20u32).map(|j| (j, Some(u64::from(j)), None)).collect();
        assert_eq!(got, want);
        drop(lanes);
        drop(pool);
        let mut ran = log.lock().unwrap().clone();
        ran.sort();
        assert_eq!(ran, (0..20).collect::<Vec<_>>());
        // Outside a lane: at once.
        let here = Arc::new(Mutex::new(false));
        let flag = here.clone();
        after_report(move || *flag.lock().unwrap() = true);
        assert!(*here.lock().unwrap());
        assert_eq!(call_seq(), None);
    }
}
