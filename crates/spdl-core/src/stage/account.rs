//! What one call of an op does to its stage: run it (a panic caught), count it in the stage's
//! statistics, name and record a failure against the failure budgets, and hand on its outputs.
//! Shared by a stage task (`map`) and by the lanes of fused stages (`fused`).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{FailureBudget, Ids, Msg, Outputs};
use crate::error::{Error, ErrorKind};
use crate::stage::failures::Failures;
use crate::stats::{StageMeter, TaskOutcome};

/// One stage's accounting.
#[derive(Clone)]
pub(crate) struct Account {
    pub(crate) meter: Arc<StageMeter>,
    pub(crate) budget: Option<FailureBudget>,
    pub(crate) failures: Arc<Failures>,
}

impl Account {
    /// Whether a failure rate budget is exceeded after a successful call (a count budget only
    /// changes with a failure).
    fn rate_exceeded(&self) -> bool {
        self.failures.check_rate(&self.meter, self.budget)
    }

    /// Records one finished call: its outputs, or `None` for a filter or a failure (named with
    /// the stage and the item's first position), and whether a failure budget is now exceeded.
    pub(crate) fn record<U>(
        &self,
        ids: &Ids,
        took: Duration,
        outcome: Result<Outputs<U>, Error>,
    ) -> (Option<Outputs<U>>, bool) {
        match outcome {
            Ok(Outputs::One(u)) => {
                self.meter.on_task(took, TaskOutcome::Produced(1));
                (Some(Outputs::One(u)), self.rate_exceeded())
            }
            Ok(Outputs::Many(v)) if !v.is_empty() => {
                self.meter.on_task(took, TaskOutcome::Produced(v.len()));
                (Some(Outputs::Many(v)), self.rate_exceeded())
            }
            Ok(Outputs::Streamed(n)) if n > 0 => {
                // Its outputs were counted as they went on.
                self.meter.on_task(took, TaskOutcome::Produced(0));
                (Some(Outputs::Streamed(n)), self.rate_exceeded())
            }
            Ok(_) => {
                self.meter.on_task(took, TaskOutcome::Filtered);
                (None, self.rate_exceeded())
            }
            Err(e) => {
                self.meter.on_task(took, TaskOutcome::Failed);
                let mut e = e.with_stage(self.meter.name());
                if let Some(p) = ids.first() {
                    e = e.with_position(p);
                }
                (None, self.failures.record(&self.meter, self.budget, e))
            }
        }
    }
}

/// Runs one call of a blocking op, catching a panic: its outcome and how long it took.
pub(crate) fn call<T, U>(
    op: &super::BlockingFn<T, U>,
    item: T,
) -> (Result<Outputs<U>, Error>, Duration) {
    let start = Instant::now();
    let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| {
        crate::exec::lanes::as_job_call(|| op(item))
    })) {
        Ok(r) => r.map_err(super::op_error),
        Err(p) => Err(Error::new(ErrorKind::OpPanicked, super::panic_message(p))),
    };
    (outcome, start.elapsed())
}

/// An item's outputs as messages: only the last carries the item's positions, so the source
/// item counts as delivered once all its outputs are; none gives a skip for the positions.
pub(crate) fn messages<U>(items: Vec<U>, ids: Ids) -> Vec<Msg<U>> {
    if items.is_empty() {
        return if ids.len() > 0 {
            vec![Msg::Skip(ids)]
        } else {
            Vec::new()
        };
    }
    let n = items.len();
    let mut ids = Some(ids);
    items
        .into_iter()
        .enumerate()
        .map(|(i, u)| {
            let ids = if i + 1 == n {
                ids.take().unwrap_or_default()
            } else {
                Ids::None
            };
            Msg::Item(ids, u)
        })
        .collect()
}
