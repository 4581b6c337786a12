//! `cargo xtask corpus`: system setup, then the corpus generator `xtask/corpus` (package
//! `xtask-corpus`) in release mode. It lives in its own crate because it links libjpeg-turbo,
//! which needs cmake and nasm: xtask itself must build before setup has installed them.
//! Every argument is passed on (`cargo xtask corpus --help` shows the generator's help).

use anyhow::Result;

use crate::cmd::{cargo_release, PassOn};
use crate::setup;

/// `args` all go to the generator.
pub(crate) fn run(args: &PassOn) -> Result<()> {
    setup::system()?;
    cargo_release("run", "xtask-corpus")
        .arg("--")
        .args(&args.args)
        .run()
}
