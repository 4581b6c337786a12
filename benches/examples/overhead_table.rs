//! Prints the per-item overhead of spdl-core as a Markdown table:
//! `cargo run --release -p spdl-benches --example overhead_table`.
//! Each cell is an epoch time of `ITEMS` items divided by items x stages: the fastest of
//! `RUNS` epochs (the overhead itself, least disturbed by other processes), and for spdl-core
//! also the median.

use spdl_benches::overhead::{
    ns_per_item_stage, time_epochs, Config, Floor, SpdlChain, ITEMS, QUEUE,
};

const WARMUP: usize = 2;
const RUNS: usize = 9;

fn main() -> anyhow::Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
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
