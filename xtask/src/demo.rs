//! `cargo xtask demo`: system setup, then `spdl load` in release mode. Without a path it loads
//! the sample photos bundled in `data/samples/`; extra arguments go to `spdl load`
//! (`cargo xtask demo -- --batch-size 8 --json`).

use anyhow::Result;

use crate::cmd::cargo_release;
use crate::setup;

/// Arguments of `cargo xtask demo`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Passed on to `spdl load` (a path, --batch-size, --size, --threads, --json, ...).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    setup::system()?;
    cargo_release("run", "spdl-cli")
        .args(["--bin", "spdl", "--", "load"])
        .args(&args.args)
        .run()
}
