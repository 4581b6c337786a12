//! Pipeline statistics as Python objects (read-only attributes; `str()` prints the table).

use pyo3::prelude::*;

/// Mean and percentiles of a stage's per-item task time, in seconds.
#[pyclass(frozen, get_all, module = "spdl_rs.pipeline", name = "TimeSummary")]
#[derive(Clone)]
pub(crate) struct TimeSummary {
    /// Mean, seconds.
    mean: f64,
    /// Median, seconds (within 19%: histogram bucket).
    p50: f64,
    /// 90th percentile, seconds.
    p90: f64,
    /// 99th percentile, seconds.
    p99: f64,
}

/// Counters of one stage.
#[pyclass(frozen, get_all, module = "spdl_rs.pipeline", name = "StageStats")]
#[derive(Clone)]
pub(crate) struct StageStats {
    name: String,
    concurrency: usize,
    items_in: u64,
    items_out: u64,
    filtered: u64,
    failures: u64,
    /// Op calls timed (SPDL's `TaskPerfStats.num_tasks`).
    tasks: u64,
    task_time: TimeSummary,
    busy_fraction: f64,
}

/// Counters of one queue between stages.
#[pyclass(frozen, get_all, module = "spdl_rs.pipeline", name = "QueueStats")]
#[derive(Clone)]
pub(crate) struct QueueStats {
    name: String,
    capacity: usize,
    items: u64,
    occupancy_rate: f64,
    mean_put_wait: f64,
    mean_get_wait: f64,
    /// 90th/99th percentiles of the put and get waits, seconds (within 19%).
    p90_put_wait: f64,
    p99_put_wait: f64,
    p90_get_wait: f64,
    p99_get_wait: f64,
    /// Seconds since the queue was made (`items / elapsed` is SPDL's `qps`).
    elapsed: f64,
}

/// A snapshot of a pipeline's statistics: `stages` (source first) and `queues`.
#[pyclass(frozen, get_all, module = "spdl_rs.pipeline", name = "PipelineStats")]
pub(crate) struct PipelineStats {
    stages: Vec<StageStats>,
    queues: Vec<QueueStats>,
    text: String,
}

impl From<spdl_core::PipelineStats> for PipelineStats {
    fn from(s: spdl_core::PipelineStats) -> Self {
        let text = s.to_string();
        PipelineStats {
            stages: s
                .stages
                .into_iter()
                .map(|t| StageStats {
                    name: t.name,
                    concurrency: t.concurrency,
                    items_in: t.items_in,
                    items_out: t.items_out,
                    filtered: t.filtered,
                    failures: t.failures,
                    tasks: t.tasks,
                    task_time: TimeSummary {
                        mean: t.task_time.mean.as_secs_f64(),
                        p50: t.task_time.p50.as_secs_f64(),
                        p90: t.task_time.p90.as_secs_f64(),
                        p99: t.task_time.p99.as_secs_f64(),
                    },
                    busy_fraction: t.busy_fraction,
                })
                .collect(),
            queues: s
                .queues
                .into_iter()
                .map(|q| QueueStats {
                    name: q.name,
                    capacity: q.capacity,
                    items: q.items,
                    occupancy_rate: q.occupancy_rate,
                    mean_put_wait: q.mean_put_wait.as_secs_f64(),
                    mean_get_wait: q.mean_get_wait.as_secs_f64(),
                    p90_put_wait: q.put_wait.p90.as_secs_f64(),
                    p99_put_wait: q.put_wait.p99.as_secs_f64(),
                    p90_get_wait: q.get_wait.p90.as_secs_f64(),
                    p99_get_wait: q.get_wait.p99.as_secs_f64(),
                    elapsed: q.elapsed.as_secs_f64(),
                })
                .collect(),
            text,
        }
    }
}

#[pymethods]
impl PipelineStats {
    /// The stage whose name is `name`, or `None`.
    fn stage(&self, name: &str) -> Option<StageStats> {
        self.stages.iter().find(|s| s.name == name).cloned()
    }

    fn __str__(&self) -> String {
        self.text.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "PipelineStats({} stages, {} queues)",
            self.stages.len(),
            self.queues.len()
        )
    }
}

#[pymethods]
impl StageStats {
    fn __repr__(&self) -> String {
        format!(
            "StageStats(name={:?}, items_in={}, items_out={}, filtered={}, failures={})",
            self.name, self.items_in, self.items_out, self.filtered, self.failures
        )
    }
}
