//! Per-stage and per-queue statistics: what [`crate::Pipeline::stats`] returns and what the
//! periodic report logs.
//!
//! Task times go into a log-scale histogram (4 buckets per power of two, so a percentile is
//! exact to within 19%); counters are updated by the stage's own task, so they cost one
//! uncontended lock per item.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BUCKETS_PER_OCTAVE: usize = 4;
const BUCKETS: usize = 64 * BUCKETS_PER_OCTAVE;

/// A log-scale histogram of durations (nanoseconds).
#[derive(Clone)]
pub(crate) struct Histogram {
    counts: Vec<u64>,
    total: u64,
    sum_ns: u128,
}

impl Histogram {
    pub(crate) fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            sum_ns: 0,
        }
    }

    fn bucket(ns: u64) -> usize {
        if ns == 0 {
            return 0;
        }
        let log2 = 63 - ns.leading_zeros() as usize;
        // The two bits after the leading one pick the quarter-octave.
        let frac = if log2 >= 2 {
            ((ns >> (log2 - 2)) & 3) as usize
        } else {
            0
        };
        (log2 * BUCKETS_PER_OCTAVE + frac).min(BUCKETS - 1)
    }

    fn upper_bound_ns(bucket: usize) -> u64 {
        let log2 = bucket / BUCKETS_PER_OCTAVE;
        let frac = (bucket % BUCKETS_PER_OCTAVE) as u64;
        if log2 < 2 {
            return 1u64 << (log2 + 1);
        }
        (1u64 << log2) + ((frac + 1) << (log2 - 2))
    }

    /// Records `n` waits of zero.
    pub(crate) fn record_zeros(&mut self, n: u64) {
        self.counts[0] += n;
        self.total += n;
    }

    pub(crate) fn record(&mut self, d: Duration) {
        let ns = d.as_nanos().min(u64::MAX as u128) as u64;
        self.counts[Self::bucket(ns)] += 1;
        self.total += 1;
        self.sum_ns += ns as u128;
    }

    fn quantile(&self, q: f64) -> Duration {
        if self.total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(Self::upper_bound_ns(i));
            }
        }
        Duration::ZERO
    }

    pub(crate) fn summary(&self) -> TimeSummary {
        TimeSummary {
            mean: if self.total == 0 {
                Duration::ZERO
            } else {
                Duration::from_nanos((self.sum_ns / self.total as u128) as u64)
            },
            p50: self.quantile(0.50),
            p90: self.quantile(0.90),
            p99: self.quantile(0.99),
        }
    }
}

/// Mean and percentiles of a duration, each percentile exact to within 19% (histogram bucket).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TimeSummary {
    /// Arithmetic mean.
    pub mean: Duration,
    /// Median.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
}

/// Live counters of one stage, owned by the stage task and read by [`crate::Pipeline::stats`].
pub(crate) struct StageMeter {
    name: String,
    concurrency: usize,
    inner: Mutex<StageInner>,
}

struct StageInner {
    items_in: u64,
    items_out: u64,
    filtered: u64,
    failures: u64,
    task_time: Histogram,
    busy: Duration,
    started: Instant,
}

impl StageMeter {
    pub(crate) fn new(name: String, concurrency: usize) -> Self {
        StageMeter {
            name,
            concurrency,
            inner: Mutex::new(StageInner {
                items_in: 0,
                items_out: 0,
                filtered: 0,
                failures: 0,
                task_time: Histogram::new(),
                busy: Duration::ZERO,
                started: Instant::now(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StageInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn on_input(&self) {
        self.lock().items_in += 1;
    }

    /// Records one finished task: `outputs` items produced (0 = filtered), or a failure.
    pub(crate) fn on_task(&self, took: Duration, outcome: TaskOutcome) {
        let mut s = self.lock();
        s.task_time.record(took);
        s.busy += took;
        match outcome {
            TaskOutcome::Produced(n) => s.items_out += n as u64,
            TaskOutcome::Filtered => s.filtered += 1,
            TaskOutcome::Failed => s.failures += 1,
        }
    }

    /// Records items produced without a timed task (aggregation, pass-through).
    pub(crate) fn on_output(&self, n: u64) {
        self.lock().items_out += n;
    }

    /// Failures and items processed so far, for failure budgets.
    pub(crate) fn failures_and_processed(&self) -> (u64, u64) {
        let s = self.lock();
        (s.failures, s.items_out + s.filtered + s.failures)
    }

    pub(crate) fn snapshot(&self) -> StageStats {
        let s = self.lock();
        let wall = s.started.elapsed();
        let capacity = wall.as_secs_f64() * self.concurrency.max(1) as f64;
        StageStats {
            name: self.name.clone(),
            concurrency: self.concurrency,
            items_in: s.items_in,
            items_out: s.items_out,
            filtered: s.filtered,
            failures: s.failures,
            tasks: s.task_time.total,
            task_time: s.task_time.summary(),
            busy_fraction: if capacity > 0.0 {
                s.busy.as_secs_f64() / capacity
            } else {
                0.0
            },
        }
    }
}

/// How one task ended, for the counters.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TaskOutcome {
    Produced(usize),
    Filtered,
    Failed,
}

/// Statistics of one stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StageStats {
    /// Stage name (given with `StageConfig::name`, or `"{kind}_{index}"`).
    pub name: String,
    /// The stage's concurrency (tasks in flight at most).
    pub concurrency: usize,
    /// Items taken from the input queue.
    pub items_in: u64,
    /// Items put into the output queue (for aggregation: batches).
    pub items_out: u64,
    /// Items the op dropped by returning `Ok(None)`.
    pub filtered: u64,
    /// Items whose op returned `Err` or panicked.
    pub failures: u64,
    /// Op calls timed (one per item taken by a per-item stage; SPDL's `num_tasks`).
    pub tasks: u64,
    /// Time one op call took (seconds of wall time on the worker).
    pub task_time: TimeSummary,
    /// Share of the stage's capacity (wall time x concurrency) spent running ops, 0.0 to 1.0.
    pub busy_fraction: f64,
}

/// Statistics of one queue between stages.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueStats {
    /// `"{upstream stage}->{downstream stage}"`, or `"sink"`.
    pub name: String,
    /// Capacity in items.
    pub capacity: usize,
    /// Items that passed through.
    pub items: u64,
    /// Share of time the queue held at least one item, 0.0 to 1.0 (SPDL's data readiness).
    pub occupancy_rate: f64,
    /// Mean time a put waited for room (backpressure), per item.
    pub mean_put_wait: Duration,
    /// Mean time a get waited for data (starvation), per item.
    pub mean_get_wait: Duration,
    /// Distribution of the put waits (SPDL's `p90_put_time`, `p99_put_time`).
    pub put_wait: TimeSummary,
    /// Distribution of the get waits (SPDL's `p90_get_time`, `p99_get_time`).
    pub get_wait: TimeSummary,
    /// Time since the queue was made (SPDL's `elapsed`, the denominator of `qps`).
    pub elapsed: Duration,
}

/// A snapshot of every stage and queue of a pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineStats {
    /// Stages in data-flow order (the source first).
    pub stages: Vec<StageStats>,
    /// Queues in data-flow order (the sink queue last).
    pub queues: Vec<QueueStats>,
}

impl PipelineStats {
    /// Total failures over all stages.
    pub fn failures(&self) -> u64 {
        self.stages.iter().map(|s| s.failures).sum()
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl fmt::Display for PipelineStats {
    /// Prints two aligned tables: stages, then queues.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<20} {:>4} {:>9} {:>9} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>5}",
            "stage",
            "conc",
            "in",
            "out",
            "filter",
            "fail",
            "mean ms",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "busy"
        )?;
        for s in &self.stages {
            writeln!(
                f,
                "{:<20} {:>4} {:>9} {:>9} {:>7} {:>7} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>4.0}%",
                s.name,
                s.concurrency,
                s.items_in,
                s.items_out,
                s.filtered,
                s.failures,
                ms(s.task_time.mean),
                ms(s.task_time.p50),
                ms(s.task_time.p90),
                ms(s.task_time.p99),
                s.busy_fraction * 100.0
            )?;
        }
        writeln!(
            f,
            "{:<32} {:>5} {:>9} {:>9} {:>12} {:>12}",
            "queue", "cap", "items", "occupied", "put wait ms", "get wait ms"
        )?;
        for q in &self.queues {
            writeln!(
                f,
                "{:<32} {:>5} {:>9} {:>8.0}% {:>12.3} {:>12.3}",
                q.name,
                q.capacity,
                q.items,
                q.occupancy_rate * 100.0,
                ms(q.mean_put_wait),
                ms(q.mean_get_wait)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_within_bucket_error() {
        let mut h = Histogram::new();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary();
        let p50 = s.p50.as_secs_f64() * 1e6;
        let p99 = s.p99.as_secs_f64() * 1e6;
        assert!((500.0..=500.0 * 1.19).contains(&p50), "p50 {p50}");
        assert!((990.0..=990.0 * 1.19).contains(&p99), "p99 {p99}");
        let mean = s.mean.as_secs_f64() * 1e6;
        assert!((mean - 500.5).abs() < 0.01, "mean {mean}");
    }

    #[test]
    fn bucket_bounds_are_monotonic() {
        let mut last = 0;
        for b in 0..BUCKETS - 8 {
            let ub = Histogram::upper_bound_ns(b);
            assert!(ub >= last, "bucket {b}");
            last = ub;
        }
        for ns in [1u64, 3, 7, 100, 12345, 1 << 40] {
            assert!(Histogram::upper_bound_ns(Histogram::bucket(ns)) >= ns);
        }
    }
}
