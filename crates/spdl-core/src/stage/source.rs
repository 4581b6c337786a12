//! The source: runs the user's iterator on its own thread, so a slow iterator (listing a
//! bucket, reading a manifest) never blocks the scheduler.
//!
//! The thread waits for an epoch to be started, iterates `source(epoch)`, numbers each item
//! with its position in the epoch, skips positions already done (resumed state), and sends
//! an end-of-epoch marker.
//!
//! When asked to (`StartEpoch::prefetch_next`), it then goes straight on with the next epoch:
//! its items queue up behind the marker while the consumer takes the current epoch's tail, so
//! the next epoch starts without a bubble. It never runs more than one epoch ahead: the
//! epoch after that waits for the consumer to start the prefetched one.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Ids, Msg};
use crate::exec::queue::QueueTx;
use crate::progress::Progress;
use crate::stage::failures::Failures;
use crate::stats::StageMeter;

/// A boxed iterator, as a source returns for each epoch.
pub type BoxIter<T> = Box<dyn Iterator<Item = T> + Send + 'static>;

/// A source: called once per epoch with the epoch number (0, 1, ...).
pub(crate) type SourceFn<T> = Box<dyn FnMut(u64) -> BoxIter<T> + Send + 'static>;

/// A request to the source thread.
pub(crate) struct StartEpoch {
    pub(crate) epoch: u64,
    /// Positions already done in an earlier process (resume); skipped without being produced.
    pub(crate) done: Progress,
    /// Start epoch `epoch + 1` (nothing skipped) as soon as this one's source is exhausted.
    pub(crate) prefetch_next: bool,
}

/// The source thread's body.
pub(crate) fn run_source<T: Send + 'static>(
    mut source: SourceFn<T>,
    commands: crossbeam_channel::Receiver<StartEpoch>,
    output: QueueTx<Msg<T>>,
    meter: Arc<StageMeter>,
    failures: Arc<Failures>,
) {
    let mut run_epoch = |epoch: u64, done: &Progress| -> bool {
        for (position, item) in source(epoch).enumerate() {
            let position = position as u64;
            if done.contains(position) {
                continue;
            }
            meter.on_input();
            meter.on_output(1);
            failures.emitted.fetch_add(1, Ordering::Relaxed);
            if output
                .blocking_send(Msg::Item(Ids::One(position), item))
                .is_err()
            {
                return false; // shutdown, or a stage stopped on failures
            }
        }
        output.blocking_send(Msg::EndOfEpoch).is_ok()
    };
    // The epoch already produced ahead of the consumer, if any.
    let mut ahead: Option<u64> = None;
    for cmd in commands {
        if ahead != Some(cmd.epoch) && !run_epoch(cmd.epoch, &cmd.done) {
            return;
        }
        ahead = None;
        if cmd.prefetch_next {
            let next = cmd.epoch + 1;
            if !run_epoch(next, &Progress::new()) {
                return;
            }
            ahead = Some(next);
        }
    }
}
