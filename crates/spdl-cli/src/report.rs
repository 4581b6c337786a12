//! The report printed at the end of `spdl load`: throughput, failures with the file names and
//! reasons, and the per-stage stats table.

use std::fmt;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;
use spdl_core::{BoxError, PipelineStats};

use crate::device::TransferReport;
use crate::{DtypeArg, LayoutArg, LoadArgs};

/// One sample that could not be loaded.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Failure {
    /// The sample's path.
    pub(crate) path: String,
    /// Why (the decoder's or reader's message).
    pub(crate) reason: String,
}

impl Failure {
    /// Records a failure for the report and returns the error for the pipeline to count.
    pub(crate) fn record<E: std::error::Error + Send + Sync + 'static>(
        failures: &Mutex<Vec<Failure>>,
        path: &Path,
        err: E,
    ) -> BoxError {
        let failure = Failure {
            path: spdl_io::key_from_path(path),
            reason: err.to_string(),
        };
        failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(failure);
        Box::new(err)
    }
}

/// Everything `spdl load` measured, with the options it ran with.
pub(crate) struct Report<'a> {
    pub(crate) source: String,
    /// The command line (batch size, output size, transform, epochs).
    pub(crate) args: &'a LoadArgs,
    pub(crate) threads: usize,
    /// The batches' layout and element type, as shown: `[N, H, W, C] u8`.
    pub(crate) layout: &'static str,
    pub(crate) listed_per_epoch: u64,
    pub(crate) images: u64,
    pub(crate) batches: u64,
    pub(crate) bytes_read: u64,
    pub(crate) seconds: f64,
    pub(crate) first_batch_seconds: Option<f64>,
    pub(crate) failures: Vec<Failure>,
    pub(crate) error: Option<String>,
    pub(crate) stats: Option<PipelineStats>,
    /// Host-to-device copies, with `--device cuda`.
    pub(crate) transfer: Option<TransferReport>,
    /// The adaptive fetch concurrency of remote samples (none when fixed).
    pub(crate) fetch: Option<spdl_sources::concurrency::FetchLimiter>,
}

impl<'a> Report<'a> {
    pub(crate) fn new(
        source: &str,
        args: &'a LoadArgs,
        threads: usize,
        listed_per_epoch: u64,
        layout: LayoutArg,
        dtype: DtypeArg,
    ) -> Self {
        Report {
            source: source.to_string(),
            args,
            threads,
            layout: match (layout, dtype) {
                (LayoutArg::Nhwc, DtypeArg::U8) => "[N, H, W, C] u8",
                _ => "[N, C, H, W] f32",
            },
            listed_per_epoch,
            images: 0,
            batches: 0,
            bytes_read: 0,
            seconds: 0.0,
            first_batch_seconds: None,
            failures: Vec::new(),
            error: None,
            stats: None,
            transfer: None,
            fetch: None,
        }
    }

    /// The transform as shown: `eval`, `train` or `resize`.
    fn transform(&self) -> String {
        format!("{:?}", self.args.transform).to_lowercase()
    }

    fn images_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.images as f64 / self.seconds
        } else {
            0.0
        }
    }

    fn megabytes_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes_read as f64 / 1e6 / self.seconds
        } else {
            0.0
        }
    }

    /// The report as JSON (`--json`).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let (stages, queues) = self
            .stats
            .as_ref()
            .map_or((&[][..], &[][..]), |s| (&s.stages[..], &s.queues[..]));
        let stages: Vec<serde_json::Value> = stages
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name, "concurrency": s.concurrency, "items_in": s.items_in,
                    "items_out": s.items_out, "filtered": s.filtered, "failures": s.failures,
                    "task_mean_ms": s.task_time.mean.as_secs_f64() * 1e3,
                    "task_p50_ms": s.task_time.p50.as_secs_f64() * 1e3,
                    "task_p90_ms": s.task_time.p90.as_secs_f64() * 1e3,
                    "task_p99_ms": s.task_time.p99.as_secs_f64() * 1e3,
                    "busy_fraction": s.busy_fraction,
                })
            })
            .collect();
        let queues: Vec<serde_json::Value> = queues
            .iter()
            .map(|q| {
                serde_json::json!({
                    "name": q.name, "capacity": q.capacity, "items": q.items,
                    "occupancy_rate": q.occupancy_rate,
                    "mean_put_wait_ms": q.mean_put_wait.as_secs_f64() * 1e3,
                    "mean_get_wait_ms": q.mean_get_wait.as_secs_f64() * 1e3,
                })
            })
            .collect();
        serde_json::json!({
            "source": self.source,
            "threads": self.threads,
            "batch_size": self.args.batch_size,
            "size": self.args.size,
            "transform": self.transform(),
            "layout": self.layout,
            "epochs": self.args.epochs,
            "listed": self.listed_per_epoch * self.args.epochs,
            "images": self.images,
            "failed": self.failures.len(),
            "batches": self.batches,
            "bytes_read": self.bytes_read,
            "seconds": self.seconds,
            "images_per_second": self.images_per_second(),
            "megabytes_per_second": self.megabytes_per_second(),
            "first_batch_seconds": self.first_batch_seconds,
            "failures": self.failures,
            "error": self.error,
            "device": self.transfer.as_ref().map_or("cpu".to_string(), |t| t.device.clone()),
            "h2d_gigabytes_per_second": self.transfer.as_ref().map(|t| t.gigabytes_per_second),
            "h2d_bytes": self.transfer.as_ref().map(|t| t.bytes),
            // Where the adaptive limit ended and the most it tried (null when fixed).
            "fetch_concurrency": self.fetch.as_ref().map(|l| serde_json::json!({
                "adaptive": true, "final": l.limit(), "peak": l.peak(), "settled": l.is_settled(),
            })),
            "stages": stages,
            "queues": queues,
        })
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let args = self.args;
        let listed = self.listed_per_epoch * args.epochs;
        writeln!(f, "spdl load: {}", self.source)?;
        writeln!(
            f,
            "  {} image{} in {} batch{} of {} ({}, {}x{} {}), {} epoch(s), {} threads",
            self.images,
            if self.images == 1 { "" } else { "s" },
            self.batches,
            if self.batches == 1 { "" } else { "es" },
            args.batch_size,
            self.layout,
            args.size,
            args.size,
            self.transform(),
            args.epochs,
            self.threads
        )?;
        writeln!(
            f,
            "  {:.1} images/s, {:.1} MB/s read, {:.3} s total, first batch after {}",
            self.images_per_second(),
            self.megabytes_per_second(),
            self.seconds,
            self.first_batch_seconds
                .map_or("-".to_string(), |s| format!("{:.3} s", s))
        )?;
        writeln!(
            f,
            "  delivered {} + failed {} = {} of {} listed",
            self.images,
            self.failures.len(),
            self.images + self.failures.len() as u64,
            listed
        )?;
        if let Some(l) = &self.fetch {
            writeln!(
                f,
                "  fetch concurrency: adaptive, {} in flight at the end ({}; the most tried {})",
                l.limit(),
                if l.is_settled() {
                    "settled"
                } else {
                    "still growing"
                },
                l.peak()
            )?;
        }
        if let Some(t) = &self.transfer {
            writeln!(
                f,
                "  to {}: {:.2} GB copied at {:.2} GB/s (pinned memory, dedicated stream)",
                t.device,
                t.bytes as f64 / 1e9,
                t.gigabytes_per_second
            )?;
        }
        if !self.failures.is_empty() {
            writeln!(f, "failures:")?;
            for fl in &self.failures {
                // Errors from spdl-io and spdl-sources name the sample after their kind
                // (`empty: PATH: empty file`): name it once, first (`PATH: empty: empty file`).
                let named = format!("{}: ", fl.path);
                let reason = fl.reason.replacen(&named, "", 1);
                writeln!(f, "  {}: {}", fl.path, reason)?;
            }
        }
        if let Some(e) = &self.error {
            writeln!(f, "pipeline stopped: {e}")?;
        }
        if let Some(stats) = &self.stats {
            writeln!(f)?;
            write!(f, "{stats}")?;
        }
        Ok(())
    }
}

/// Shows what the listing cut (directory loops), one line each on stderr.
pub(crate) fn print_warnings(list: &spdl_sources::SampleList) {
    for warning in list.warnings() {
        eprintln!("warning: {warning}");
    }
}
