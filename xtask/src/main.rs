//! `cargo xtask`: every chore of spdl-rs as one Rust program (the alias is in
//! `.cargo/config.toml`). One module per command; `cmd.rs` runs and echoes processes.
//!
//! xtask itself only depends on pure-Rust crates, so it builds on a machine where
//! `cargo xtask setup` has not run yet. Work that needs native libraries (the corpus
//! generator, which links libjpeg-turbo) lives in its own crate and is started with
//! `cargo run` after setup.

mod bench;
mod cmd;
mod corpus;
mod demo;
mod docs;
mod features;
mod ffmpeg_build;
mod fuzz;
mod gpu_check;
mod setup;
mod test;
mod tidy;
mod wheel;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Chores for spdl-rs
#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install what this machine lacks: apt packages, rustfmt/clippy, the test venv.
    Setup(setup::Args),
    /// Setup, then `spdl load` on the bundled sample photos (extra args are passed on).
    ///
    /// The arguments are passed on to `spdl load` (a path, --batch-size, --size, --threads,
    /// --json, ...).
    Demo(cmd::PassOn),
    /// Setup, then fmt, clippy, tests, docs and the Python tests; prints `N passed, N failed`.
    Test(test::Args),
    /// The documentation site (MkDocs, strict) into `target/site`, with the rustdoc.
    Docs,
    /// Build the deterministic ImageNet-like JPEG corpus (run `cargo xtask corpus --help`).
    ///
    /// The arguments, all for the generator: --out DIR, --count N, --large, --photos DIR,
    /// --seed N, --classes N, --help.
    #[command(disable_help_flag = true)]
    Corpus(cmd::PassOn),
    /// The Python wheels: `--release` builds and checks the distributable ones.
    Wheel(wheel::Args),
    /// Run every cargo-fuzz target in `fuzz/` for `--seconds N` each (needs cargo-fuzz).
    Fuzz(fuzz::Args),
    /// Benchmarks: `overhead`, `epochs`, `decode`, `images`, `train`, `video`, `shards` (see
    /// `cargo xtask bench --help`).
    Bench(bench::Args),
    /// On a GPU machine: CUDA tests, H2D GB/s, nvJPEG pixels and images/s, the Python GPU tests
    /// (see gpu_check.rs).
    GpuCheck(gpu_check::Args),
    /// Check ARCHITECTURE.md's invariants: spdl-core's dependencies, only spdl-py uses PyO3, no
    /// raw task spawns, no module circles.
    Tidy,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Setup(args) => setup::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Test(args) => test::run(&args),
        Command::Corpus(args) => corpus::run(&args),
        Command::Docs => docs::run(),
        Command::Wheel(args) => wheel::run(&args),
        Command::Fuzz(args) => fuzz::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::GpuCheck(args) => gpu_check::run(&args),
        Command::Tidy => tidy::run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The chain of causes, without the backtrace anyhow adds under RUST_BACKTRACE.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
