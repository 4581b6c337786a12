//! Prints the per-item overhead of spdl-core as a Markdown table:
//! `cargo run --release -p spdl-benches --example overhead_table`.
//! Each cell is an epoch time of `ITEMS` items divided by items x stages: the fastest of
//! `RUNS` epochs (the overhead itself, least disturbed by other processes), and for spdl-core
//! also the median. Then the engine ceiling: items/s through 3 no-op stages at concurrency 8,
//! and the CPU the scheduler thread spends per item (per item through the whole chain).
//! `--ceiling` prints only the engine ceiling.

use spdl_benches::overhead::{
    ceiling_configs, ns_per_item_stage, thread_cpu, time_epochs, Config, Floor, SpdlChain, ITEMS,
    QUEUE,
};

const WARMUP: usize = 2;
const RUNS: usize = 9;

fn main() -> anyhow::Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if !std::env::args().any(|a| a == "--ceiling") {
        overhead_table(cpus)?;
    }
    ceiling_table()
}

/// Per-item overhead per stage against the crossbeam floor, for every [`Config`].
fn overhead_table(cpus: usize) -> anyhow::Result<()> {
    println!(
        "{ITEMS} u64 items per epoch through no-op blocking stages, queues of {QUEUE}; \
         floor: one thread per stage; spdl-core: a worker pool of one thread per stage; \
         {cpus} CPUs; fastest (and median) of {RUNS} epochs.\n"
    );
    println!(
        "| config | spdl-core ns/item/stage | floor ns/item/stage | ratio | spdl-core median |"
    );
    println!("|---|---:|---:|---:|---:|");
    for stages in [1, 3, 6] {
        let mut floor = Floor::new(stages);
        let floor_times = time_epochs(WARMUP, RUNS, || {
            floor.run_epoch(ITEMS);
            Ok(())
        })?;
        drop(floor);
        let floor_ns = ns_per_item_stage(floor_times.fastest, 1, stages);
        for config in Config::all().into_iter().filter(|c| c.stages == stages) {
            let mut chain = SpdlChain::new(config, ITEMS)?;
            let times = time_epochs(WARMUP, RUNS, || chain.run_epoch().map(drop))?;
            let ns = ns_per_item_stage(times.fastest, 1, stages);
            let median = ns_per_item_stage(times.median, 1, stages);
            println!(
                "| {} | {ns:.0} | {floor_ns:.0} | {:.1}x | {median:.0} |",
                config.label(),
                ns / floor_ns
            );
        }
    }
    Ok(())
}

/// Items/s through 3 no-op stages at concurrency 8, and the scheduler thread's CPU per item.
fn ceiling_table() -> anyhow::Result<()> {
    println!(
        "\nEngine ceiling: {ITEMS} items per epoch through 3 no-op stages at concurrency 8 \
         (3 workers); fastest (and median) of {RUNS} epochs; scheduler CPU over all {RUNS} \
         measured epochs (thread `spdl-scheduler`, 10 ms ticks).\n"
    );
    println!("| config | items/s | items/s median | scheduler CPU us/item |");
    println!("|---|---:|---:|---:|");
    for config in ceiling_configs() {
        let mut chain = SpdlChain::new(config, ITEMS)?;
        for _ in 0..WARMUP {
            chain.run_epoch()?;
        }
        let cpu_before = thread_cpu("spdl-scheduler");
        let times = time_epochs(0, RUNS, || chain.run_epoch().map(drop))?;
        let cpu = thread_cpu("spdl-scheduler")
            .zip(cpu_before)
            .map(|(after, before)| after.saturating_sub(before));
        let per_s = |d: std::time::Duration| ITEMS as f64 / d.as_secs_f64();
        let cpu_us = cpu.map_or("n/a".to_string(), |c| {
            format!(
                "{:.2}",
                c.as_secs_f64() * 1e6 / (ITEMS as f64 * RUNS as f64)
            )
        });
        println!(
            "| {} | {:.0} | {:.0} | {cpu_us} |",
            config.label(),
            per_s(times.fastest),
            per_s(times.median)
        );
    }
    Ok(())
}
