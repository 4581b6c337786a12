//! List a folder, read the files (async), decode and resize them on the worker pool, and batch
//! them as `[N, 224, 224, 3]` u8, for two epochs. Run from the repository's root:
//! `cargo run -p spdl-tests --example readme`.
use std::path::PathBuf;

use spdl_core::{Op, Order, PipelineBuilder, StageConfig};
use spdl_io::{collate, key_from_path, BatchItem, Filter, ImageLoader, SampleContext, Transform};
use spdl_sources::{read_file_async, walk_dir, Extensions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Vec<PathBuf> = walk_dir("data/samples", &Extensions::images())?
        .iter()
        .map(|sample| sample.path.clone())
        .collect();
    // ImageNet evaluation: shorter side to 256, center crop 224.
    let loader = ImageLoader::new(Transform::eval(224, Filter::Bilinear));
    let mut pipeline = PipelineBuilder::source(move |_epoch| files.clone()) // any iterator, per epoch
        .pipe(
            Op::future(|path: PathBuf| async move {
                let bytes = read_file_async(&path).await?; // async I/O
                Ok(Some((path, bytes)))
            }),
            StageConfig::named("read").concurrency(16),
        )
        .pipe(
            Op::blocking(move |(path, bytes): (PathBuf, Vec<u8>)| {
                let key = key_from_path(&path); // names the sample in errors and batches
                let ctx = SampleContext {
                    key: &key,
                    index: 0,
                    epoch: 0,
                };
                let image = loader.load(&bytes, &ctx)?; // CPU, on the worker pool
                let label = None;
                Ok(Some(BatchItem { key, label, image }))
            }),
            StageConfig::named("decode")
                .concurrency(4)
                .order(Order::Input),
        )
        .aggregate(32, false) // batches of 32, the last one shorter
        .pipe(
            Op::blocking(|items: Vec<BatchItem>| Ok(Some(collate(items)?))),
            StageConfig::named("collate"),
        )
        .build(4)?; // 4 worker threads
    for epoch in 0..2 {
        for batch in pipeline.iter() {
            let batch = batch?; // an ImageBatch: `[N, 224, 224, 3]` u8 and the sample keys
            println!("epoch {epoch}: {:?} from {}", batch.shape, batch.keys[0]);
        }
    }
    // What was consumed, to resume mid-epoch in a fresh process (`load_state_dict`).
    println!("{:?}", pipeline.state_dict());
    println!("{}", pipeline.stats()); // per stage: items, failures, time per op
    Ok(())
}
