//! Failure accounting shared by every stage: per-stage and pipeline-wide budgets, the last
//! errors (for the final report), and the error that stopped the pipeline, if any.
//!
//! As in SPDL 0.8 (`_FailCounter`): a stage with its own budget is judged by it alone; every
//! other stage is judged by the pipeline-wide budget against the failures of all stages
//! (a rate: failures over the op calls of all stages).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crossbeam_channel::{Receiver, Sender, TrySendError};

use super::FailureBudget;
use crate::error::{BoxError, Error, ErrorKind};
use crate::stats::StageMeter;

/// How many recent errors are kept for the report and the final error.
const LAST_ERRORS: usize = 5;

/// How many failures wait unread in [`Pipeline::failures`](crate::Pipeline::failures) before
/// newer ones are only counted: memory stays bounded when nobody reads them.
pub const FAILURE_REPORTS: usize = 4096;

/// One sample that failed in one stage, as a Rust consumer receives it beside the items
/// ([`Pipeline::failures`](crate::Pipeline::failures)): the pipeline skipped the sample,
/// counted it in the stage's statistics, and went on.
#[derive(Debug, Clone)]
pub struct SampleFailure {
    /// The stage the sample failed in (its [`StageConfig`](crate::StageConfig) name).
    pub stage: String,
    /// The sample's position in its epoch (0-based, source order); `None` for a failure that
    /// stands for no one sample (a streaming stage's output between inputs).
    pub position: Option<u64>,
    /// The error: [`ErrorKind::OpFailed`] or [`ErrorKind::OpPanicked`] with the stage and
    /// position as context; the op's own error is [`Error::get_ref`] (downcast it to
    /// `spdl_io::Error` and the like for its kind) and its causes follow in `source()`.
    pub error: Arc<Error>,
}

pub(crate) struct Failures {
    budget: Option<FailureBudget>,
    total: AtomicU64,
    /// Source items emitted: a pipeline-wide rate's denominator until the stages are known.
    pub(crate) emitted: AtomicU64,
    last: Mutex<VecDeque<Arc<Error>>>,
    abort: Mutex<Option<Error>>,
    /// Every stage's meter (set once the pipeline is built), for a pipeline-wide rate.
    stages: OnceLock<Vec<Arc<StageMeter>>>,
    reports: (Sender<SampleFailure>, Receiver<SampleFailure>),
    /// Failures not sent to `reports` because [`FAILURE_REPORTS`] were waiting unread.
    unreported: AtomicU64,
}

impl Failures {
    pub(crate) fn new(budget: Option<FailureBudget>) -> Self {
        Failures {
            budget,
            total: AtomicU64::new(0),
            emitted: AtomicU64::new(0),
            last: Mutex::new(VecDeque::new()),
            abort: Mutex::new(None),
            stages: OnceLock::new(),
            reports: crossbeam_channel::bounded(FAILURE_REPORTS),
            unreported: AtomicU64::new(0),
        }
    }

    /// The receiving end of the per-sample failure reports.
    pub(crate) fn reports(&self) -> Receiver<SampleFailure> {
        self.reports.1.clone()
    }

    /// Failures that were counted but not reported (the report queue was full).
    pub(crate) fn unreported(&self) -> u64 {
        self.unreported.load(Ordering::Relaxed)
    }

    /// Gives the stages' meters (the source first), once the pipeline is built.
    pub(crate) fn set_stages(&self, stages: Vec<Arc<StageMeter>>) {
        let _ = self.stages.set(stages);
    }

    /// Op calls settled in all stages but the source (a pipeline-wide rate's denominator),
    /// computed only once a failure was recorded.
    fn processed(&self) -> u64 {
        match self.stages.get() {
            Some(stages) => stages
                .iter()
                .skip(1)
                .map(|s| s.failures_and_processed().1)
                .sum(),
            None => self.emitted.load(Ordering::Relaxed),
        }
    }

    /// Records one failure in `stage`, logs it, and returns `true` if a budget is now exceeded
    /// (the stage must then stop taking input).
    pub(crate) fn record(
        &self,
        stage: &StageMeter,
        stage_budget: Option<FailureBudget>,
        err: Error,
    ) -> bool {
        tracing::warn!(stage = stage.name(), position = err.position(), "{err}");
        let total = self.total.fetch_add(1, Ordering::Relaxed) + 1;
        let err = Arc::new(err);
        let report = SampleFailure {
            stage: stage.name().to_string(),
            position: err.position(),
            error: Arc::clone(&err),
        };
        // Never blocks a stage: a full queue (nobody reading) only counts the report.
        if let Err(TrySendError::Full(_)) = self.reports.0.try_send(report) {
            self.unreported.fetch_add(1, Ordering::Relaxed);
        }
        {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            if last.len() == LAST_ERRORS {
                last.pop_front();
            }
            last.push_back(err);
        }
        if let Some(b) = stage_budget {
            let (stage_failures, stage_processed) = stage.failures_and_processed();
            if b.exceeded(stage_failures, stage_processed) {
                self.abort(stage.name(), b, stage_failures);
                return true;
            }
            return false;
        }
        if let Some(b) = self.budget {
            let processed = match b {
                FailureBudget::Count(_) => 0,
                FailureBudget::Rate(_) => self.processed(),
            };
            if b.exceeded(total, processed) {
                self.abort(stage.name(), b, total);
                return true;
            }
        }
        false
    }

    /// After a successful call in `stage`: whether a rate budget is now exceeded. As SPDL,
    /// which checks its rate after every task: a rate reached before the probation ended is
    /// still caught by the successes that end it.
    pub(crate) fn check_rate(
        &self,
        stage: &StageMeter,
        stage_budget: Option<FailureBudget>,
    ) -> bool {
        let (budget, failures, processed) = match (stage_budget, self.budget) {
            (Some(b @ FailureBudget::Rate(_)), _) => {
                let (f, p) = stage.failures_and_processed();
                (b, f, p)
            }
            (None, Some(b @ FailureBudget::Rate(_))) => {
                let total = self.total.load(Ordering::Relaxed);
                // The sum over the stages only once a failure makes it matter.
                (b, total, if total > 0 { self.processed() } else { 0 })
            }
            _ => return false,
        };
        if failures > 0 && budget.exceeded(failures, processed) {
            self.abort(stage.name(), budget, failures);
            return true;
        }
        false
    }

    fn abort(&self, stage: &str, budget: FailureBudget, count: u64) {
        let mut slot = self.abort.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return;
        }
        let last = self.last_errors().join("\n  ");
        let limit = match budget {
            FailureBudget::Count(n) => format!("max_failures={n}"),
            FailureBudget::Rate(r) => format!("max_failure_rate={r}"),
        };
        let mut error = Error::new(
            ErrorKind::TooManyFailures,
            format!("{count} failures exceed {limit}; last errors:\n  {last}"),
        )
        .with_stage(stage);
        // The failure that tipped the budget is the cause, for error reporters and downcasts.
        let cause = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .back()
            .cloned();
        if let Some(cause) = cause {
            error = error.with_cause(Box::new(cause) as BoxError);
        }
        *slot = Some(error);
    }

    /// The error that stopped the pipeline, if a budget was exceeded.
    pub(crate) fn take_abort(&self) -> Option<Error> {
        self.abort.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Whether a budget was exceeded.
    pub(crate) fn aborted(&self) -> bool {
        self.abort
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The most recent errors, oldest first.
    pub(crate) fn last_errors(&self) -> Vec<String> {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|e| e.to_string())
            .collect()
    }
}
