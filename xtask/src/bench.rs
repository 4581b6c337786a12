//! `cargo xtask bench <what>`: the benchmarks, one variant each.
//!
//! `overhead` runs the `spdl-benches` crate (criterion, then a Markdown table), `epochs` its
//! `epoch_bubble` example; `decode`, `images`, `train` and `video` are the decode,
//! image-pipeline, training-loop and video benchmarks; `shards` is tar shards from S3 against
//! files, and the decoded cache.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Subcommand;

use crate::cmd::{cargo, cargo_release, corpus, Cmd};

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

/// The arguments every corpus benchmark takes (`decode`, `shards`, `train`).
#[derive(clap::Args)]
pub(crate) struct CorpusArgs {
    /// The corpus folder [default: the one `cargo xtask corpus` builds, 2,000 JPEGs].
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Rounds per configuration (the tables show the median; `decode` also the min and max).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Decode threads of spdl-rs (`spdl load`, `spdl_rs`).
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

impl CorpusArgs {
    /// The corpus folder, built first when none is given.
    fn corpus(&self) -> Result<PathBuf> {
        corpus(self.corpus.as_ref())
    }

    /// `cmd` with `--corpus`, `--rounds` and `--threads` for a Python harness in `bench/`.
    fn pass_on(&self, cmd: Cmd, corpus: &Path) -> Cmd {
        cmd.arg("--corpus")
            .arg(corpus)
            .args(["--rounds", &self.rounds.to_string()])
            .args(["--threads", &self.threads.to_string()])
    }
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
