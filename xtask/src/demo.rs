//! `cargo xtask demo`: system setup, then `spdl load` in release mode. Without a path it loads
//! the sample photos bundled in `data/samples/`; extra arguments go to `spdl load`
//! (`cargo xtask demo -- --batch-size 8 --json`).

use anyhow::Result;

use crate::cmd::{cargo_release, PassOn};
use crate::setup;

/// `args` all go to `spdl load`.
pub(crate) fn run(args: &PassOn) -> Result<()> {
    setup::system()?;
    cargo_release("run", "spdl-cli")
        .args(["--bin", "spdl", "--", "load"])
        .args(&args.args)
        .run()
}
