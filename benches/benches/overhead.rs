//! Per-item overhead of spdl-core stages against a hand-written channel chain (the floor).
//! Throughput is in item-stages: criterion's `elem/s` inverted is ns per item per stage.
//! `cargo run --release -p spdl-benches --example overhead_table` prints a Markdown summary.

use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use spdl_benches::overhead::{Config, Floor, SpdlChain, ITEMS};

fn overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("overhead");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for stages in [1, 3, 6] {
        group.throughput(Throughput::Elements(ITEMS * stages as u64));
        let mut floor = Floor::new(stages);
        group.bench_function(BenchmarkId::new("floor", format!("{stages} stages")), |b| {
            b.iter(|| floor.run_epoch(ITEMS))
        });
        drop(floor);
        for config in Config::all().into_iter().filter(|c| c.stages == stages) {
            let mut chain = SpdlChain::new(config, ITEMS).expect("pipeline builds");
            group.bench_function(BenchmarkId::new("spdl-core", config.label()), |b| {
                b.iter(|| chain.run_epoch().expect("epoch runs"))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
