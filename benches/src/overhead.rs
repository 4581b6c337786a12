//! Per-item overhead of spdl-core: `u64` items through a chain of no-op blocking stages,
//! against the floor, the same items through a hand-written chain of bounded crossbeam
//! channels with one thread per stage.
//!
//! Both sides use queues of [`QUEUE`] items and as many threads as stages (spdl-core: a worker
//! pool of `stages` threads, plus its source and scheduler threads), and both are built once
//! and then run epoch after epoch of [`ITEMS`] items, so what is timed is the steady state.

use std::hint::black_box;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use spdl_core::{Op, Order, Pipeline, PipelineBuilder, StageConfig};

/// Items per epoch (one measured iteration).
pub const ITEMS: u64 = 20_000;

/// Capacity of every queue, in spdl-core and in the floor.
pub const QUEUE: usize = 16;

/// One measured configuration of spdl-core.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Number of no-op stages.
    pub stages: usize,
    /// Output order of every stage.
    pub order: Order,
    /// Concurrency of every stage.
    pub concurrency: usize,
}

impl Config {
    /// Every configuration: 1, 3 and 6 stages; input and completion order; concurrency 1, 4.
    pub fn all() -> Vec<Config> {
        let mut all = Vec::new();
        for stages in [1, 3, 6] {
            for order in [Order::Input, Order::Completion] {
                for concurrency in [1, 4] {
                    all.push(Config {
                        stages,
                        order,
                        concurrency,
                    });
                }
            }
        }
        all
    }

    /// `6 stages, input, c=4`.
    pub fn label(&self) -> String {
        let order = match self.order {
            Order::Input => "input",
            Order::Completion => "completion",
        };
        format!("{} stages, {order}, c={}", self.stages, self.concurrency)
    }
}

/// A built spdl-core pipeline of no-op stages, ready to run epochs.
pub struct SpdlChain {
    pipeline: Pipeline<u64>,
}

impl SpdlChain {
    /// Builds the pipeline of `config`, each epoch yielding `items` items.
    pub fn new(config: Config, items: u64) -> anyhow::Result<Self> {
        let mut builder = PipelineBuilder::source(move |_epoch| 0..items);
        for i in 0..config.stages {
            builder = builder.pipe(
                Op::blocking(|x: u64| Ok(Some(black_box(x)))),
                StageConfig::named(format!("noop{i}"))
                    .concurrency(config.concurrency)
                    .order(config.order)
                    .queue_size(QUEUE),
            );
        }
        let pipeline = builder.sink(QUEUE).build(config.stages)?;
        Ok(SpdlChain { pipeline })
    }

    /// Runs one epoch; returns the sum of the items (so nothing is optimized away).
    pub fn run_epoch(&mut self) -> anyhow::Result<u64> {
        let mut sum = 0u64;
        for item in self.pipeline.iter() {
            sum = sum.wrapping_add(item?);
        }
        Ok(sum)
    }
}

enum Msg {
    Item(u64),
    EndOfEpoch,
}

/// The floor: a source thread and one thread per stage, joined by bounded channels.
pub struct Floor {
    start: Option<Sender<u64>>,
    output: Receiver<Msg>,
    threads: Vec<JoinHandle<()>>,
}

impl Floor {
    /// Starts the threads of a chain of `stages` no-op stages.
    pub fn new(stages: usize) -> Self {
        let (start, start_rx) = crossbeam_channel::unbounded::<u64>();
        let (tx, mut rx) = crossbeam_channel::bounded(QUEUE);
        let mut threads = vec![std::thread::spawn(move || {
            for n in start_rx {
                for i in 0..n {
                    if tx.send(Msg::Item(i)).is_err() {
                        return;
                    }
                }
                if tx.send(Msg::EndOfEpoch).is_err() {
                    return;
                }
            }
        })];
        for _ in 0..stages {
            let (tx, next_rx) = crossbeam_channel::bounded(QUEUE);
            let input = std::mem::replace(&mut rx, next_rx);
            threads.push(std::thread::spawn(move || {
                for msg in input {
                    let msg = match msg {
                        Msg::Item(x) => Msg::Item(black_box(x)),
                        end => end,
                    };
                    if tx.send(msg).is_err() {
                        return;
                    }
                }
            }));
        }
        Floor {
            start: Some(start),
            output: rx,
            threads,
        }
    }

    /// Runs one epoch of `items` items; returns their sum.
    pub fn run_epoch(&mut self, items: u64) -> u64 {
        let start = self.start.as_ref().expect("running");
        start.send(items).expect("floor source is running");
        let mut sum = 0u64;
        while let Ok(Msg::Item(x)) = self.output.recv() {
            sum = sum.wrapping_add(x);
        }
        sum
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        // Closing the start channel ends the source, and each stage after it in turn.
        self.start = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The engine-ceiling configuration of issue 18: 3 no-op stages at concurrency 8.
pub fn ceiling_configs() -> Vec<Config> {
    [Order::Input, Order::Completion]
        .into_iter()
        .map(|order| Config {
            stages: 3,
            order,
            concurrency: 8,
        })
        .collect()
}

/// CPU time (user + system) used so far by this process's thread named `name` (the first
/// one found), from `/proc/self/task/*/stat`; `None` where that is not available (not Linux)
/// or no such thread runs. Resolution: one clock tick (10 ms at the usual `USER_HZ` of 100,
/// assumed here), so measure over enough items.
pub fn thread_cpu(name: &str) -> Option<Duration> {
    const TICKS_PER_SEC: u64 = 100;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // Fields after the `(comm)`: state is field 3; utime and stime are fields 14 and 15.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        return Some(Duration::from_millis(
            (utime + stime) * 1000 / TICKS_PER_SEC,
        ));
    }
    None
}

/// Nanoseconds per item per stage for `epochs` epochs of [`ITEMS`] items taking `elapsed`.
pub fn ns_per_item_stage(elapsed: Duration, epochs: u64, stages: usize) -> f64 {
    elapsed.as_nanos() as f64 / (epochs * ITEMS * stages as u64) as f64
}

/// The fastest and the median of `runs` epochs, after `warmup` unmeasured ones.
pub struct EpochTimes {
    /// The fastest epoch: on a shared machine other processes only ever add time, so this is
    /// the best estimate of the overhead itself.
    pub fastest: Duration,
    /// The median epoch: a fastest far below it means the epochs are bimodal.
    pub median: Duration,
}

/// Runs `warmup` unmeasured epochs, then times `runs` epochs.
pub fn time_epochs(
    warmup: usize,
    runs: usize,
    mut epoch: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<EpochTimes> {
    for _ in 0..warmup {
        epoch()?;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        epoch()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(EpochTimes {
        fastest: times[0],
        median: times[times.len() / 2],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_chains_deliver_every_item() -> anyhow::Result<()> {
        const N: u64 = 1000;
        let want = (0..N).sum::<u64>();
        for stages in [1, 3] {
            let mut floor = Floor::new(stages);
            assert_eq!(floor.run_epoch(N), want);
            assert_eq!(floor.run_epoch(N), want);
        }
        for config in Config::all().into_iter().filter(|c| c.stages <= 3) {
            let mut chain = SpdlChain::new(config, N)?;
            assert_eq!(chain.run_epoch()?, want, "{}", config.label());
            assert_eq!(chain.run_epoch()?, want, "{}", config.label());
        }
        Ok(())
    }
}
