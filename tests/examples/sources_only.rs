//! spdl-sources alone: list the bundled photos, deal them to 2 ranks as torch's
//! `DistributedSampler` does, and read rank 0's share, marking each sample delivered so that a
//! checkpoint can resume mid-epoch. Run from the repository's root:
//! `cargo run -p spdl-tests --example sources_only`.
use spdl_sources::{read_file, walk_dir, DistInfo, Extensions, Sampler, SamplerOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dataset = walk_dir("data/samples", &Extensions::images())?; // sorted by path bytes
    let rank0 = DistInfo::new(0, 2)?; // rank 0 of world size 2
    let mut sampler = Sampler::new(dataset.len_u64(), rank0, SamplerOptions::default())?;
    sampler.set_epoch(0);
    let mut bytes = 0;
    for item in sampler.iter() {
        let sample = dataset.get(item.index)?;
        bytes += read_file(&sample.path)?.len();
        sampler.mark_delivered(item.position)?; // once the training step has used it
    }
    println!(
        "rank 0 read {} of {} samples, {bytes} bytes; state {:?}",
        sampler.num_samples(),
        dataset.len(),
        sampler.state()
    );
    Ok(())
}
