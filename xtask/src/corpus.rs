//! `cargo xtask corpus`: system setup, then the corpus generator `xtask/corpus` (package
//! `xtask-corpus`) in release mode. It lives in its own crate because it links libjpeg-turbo,
//! which needs cmake and nasm: xtask itself must build before setup has installed them.
//! Every argument is passed on (`cargo xtask corpus --help` shows the generator's help).

use anyhow::Result;

use crate::cmd::cargo_release;
use crate::setup;

/// Arguments of `cargo xtask corpus`, all for the generator.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// --out DIR, --count N, --large, --photos DIR, --seed N, --classes N, --help.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    setup::system()?;
    cargo_release("run", "xtask-corpus")
        .arg("--")
        .args(&args.args)
        .run()
}
