//! Prints the per-item overhead of spdl-core as a Markdown table:
//! `cargo run --release -p spdl-benches --example overhead_table`.
//! Each cell is the median epoch time over `RUNS` epochs of `ITEMS` items, divided by
//! items x stages.

use spdl_benches::overhead::{
    median_epoch, ns_per_item_stage, Config, Floor, SpdlChain, ITEMS, QUEUE,
};

const WARMUP: usize = 2;
const RUNS: usize = 9;

fn main() -> anyhow::Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{ITEMS} u64 items per epoch through no-op blocking stages, queues of {QUEUE}; \
         floor: one thread per stage; spdl-core: a worker pool of one thread per stage; \
         {cpus} CPUs; median of {RUNS} epochs.\n"
    );
    println!("| config | spdl-core ns/item/stage | floor ns/item/stage | ratio |");
    println!("|---|---:|---:|---:|");
    for stages in [1, 3, 6] {
        let mut floor = Floor::new(stages);
        let floor_time = median_epoch(WARMUP, RUNS, || {
            floor.run_epoch(ITEMS);
            Ok(())
        })?;
        drop(floor);
        let floor_ns = ns_per_item_stage(floor_time, 1, stages);
        for config in Config::all().into_iter().filter(|c| c.stages == stages) {
            let mut chain = SpdlChain::new(config, ITEMS)?;
            let time = median_epoch(WARMUP, RUNS, || chain.run_epoch().map(drop))?;
            let ns = ns_per_item_stage(time, 1, stages);
            println!(
                "| {} | {ns:.0} | {floor_ns:.0} | {:.1}x |",
                config.label(),
                ns / floor_ns
            );
        }
    }
    Ok(())
}
