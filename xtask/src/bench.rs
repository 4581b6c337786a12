//! `cargo xtask bench <what>`: the benchmarks, one variant each.
//!
//! `overhead` runs the `spdl-benches` crate (criterion, then a Markdown table), `epochs` its
//! `epoch_bubble` example; `decode`, `images`, `train` and `video` are the decode,
//! image-pipeline, training-loop and video benchmarks; `shards` is tar shards from S3 against
//! files, and the decoded cache.

use anyhow::Result;
use clap::Subcommand;

use crate::cmd::{cargo, cargo_release};

mod decode;
mod images;
mod shards;
mod train;
mod video;

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Per-item overhead of spdl-core stages against a hand-written channel chain.
    Overhead {
        /// Only print the Markdown table (skip criterion).
        #[arg(long)]
        table_only: bool,
    },
    /// The epoch bubble: first-batch wait of a new epoch against a mid-epoch wait, with and
    /// without epoch prefetching.
    Epochs,
    /// `spdl load` against the decoder's bare-loop limit on the corpus.
    Decode(decode::Args),
    /// The whole image pipeline: spdl-rs against SPDL 0.8, DataLoader and the limits.
    Images(images::Args),
    /// A training loop: steps/s and time waiting for data, spdl_rs against the DataLoader.
    Train(train::Args),
    /// Video decoding: spdl-io's `load_video` against SPDL 0.8's on H.264 clips.
    Video(video::Args),
    /// Tar shards streamed from S3 (added latency, with and without read-ahead) against
    /// files, and training batches from the decoded cache against JPEGs and TurboLoader.
    Shards(shards::Args),
}

pub(crate) fn run(args: &Args) -> Result<()> {
    match &args.what {
        What::Overhead { table_only } => {
            if !table_only {
                cargo()
                    .args(["bench", "-p", "spdl-benches", "--bench", "overhead"])
                    .run()?;
            }
            cargo_release("run", "spdl-benches")
                .args(["--example", "overhead_table"])
                .run()
        }
        What::Epochs => cargo()
            .args([
                "run",
                "--release",
                "-p",
                "spdl-benches",
                "--example",
                "epoch_bubble",
            ])
            .run(),
        What::Decode(a) => decode::run(a),
        What::Images(a) => images::run(a),
        What::Train(a) => train::run(a),
        What::Video(a) => video::run(a),
        What::Shards(a) => shards::run(a),
    }
}
