//! `spdl cache SRC OUT`: decodes and resizes every image of a folder, ImageFolder or list file
//! once into a decoded cache (`spdl_io::cache`), for training epochs served with crop, flip
//! and normalization at read time and no decode.
//!
//! Records keep the listing's order (record `i` is sample `i`, its label the class index of an
//! ImageFolder); images that fail to read or decode are reported and left unstored (reading
//! them later is an error naming them).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use spdl_io::{ImageOptions, TransformKind};
use spdl_sources::{read_list_file, walk_dir, Extensions, ImageFolder};

/// Arguments of `spdl cache`.
#[derive(clap::Args, Debug)]
pub(crate) struct CacheArgs {
    /// A folder of images (walked recursively), an ImageFolder (with --image-folder) or a
    /// list file.
    pub(crate) src: PathBuf,
    /// The cache file to write (replaced once complete).
    pub(crate) out: PathBuf,
    /// Stored side in pixels (records are `size x size x 3` u8).
    #[arg(long, default_value_t = 256)]
    pub(crate) size: usize,
    /// `resize`: squash to size x size; `eval`: shorter side to size*256/224, center crop.
    #[arg(long, default_value = "resize", value_parser = ["resize", "eval"])]
    pub(crate) transform: String,
    /// Read SRC as an ImageFolder: labels are the class indices.
    #[arg(long)]
    pub(crate) image_folder: bool,
    /// Decoding threads (default: the number of cores; 1 to 4096).
    #[arg(long, short = 't', value_parser = crate::threads_parser())]
    pub(crate) threads: Option<usize>,
}

pub(crate) fn run(args: CacheArgs) -> Result<ExitCode> {
    if args.size == 0 {
        bail!("--size must be at least 1");
    }
    let shown = args.src.display().to_string();
    let list = if args.image_folder {
        ImageFolder::open(&args.src, &Extensions::images(), true)
            .with_context(|| format!("cannot open ImageFolder {shown}"))?
            .into_samples()
    } else if args.src.is_file() {
        read_list_file(&args.src).with_context(|| format!("cannot read list file {shown}"))?
    } else {
        walk_dir(&args.src, &Extensions::images())
            .with_context(|| format!("cannot list {shown}"))?
    };
    if list.is_empty() {
        bail!("no images found in {shown}");
    }
    let loader = ImageOptions {
        size: Some(args.size),
        transform: if args.transform == "eval" {
            TransformKind::Eval
        } else {
            TransformKind::Resize
        },
        ..ImageOptions::default()
    }
    .loader()?;
    let paths: Vec<PathBuf> = list.iter().map(|s| s.path.clone()).collect();
    let labels: Option<Vec<i64>> = list.iter().map(|s| s.label).collect();
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let start = Instant::now();
    let report =
        spdl_io::cache::build_from_files(&paths, labels.as_deref(), &loader, &args.out, threads)?;
    let seconds = start.elapsed().as_secs_f64();
    for f in report.failures.iter().take(10) {
        eprintln!("failed: {f}");
    }
    let [h, w, c] = report.shape;
    let size = std::fs::metadata(&args.out).map_or(0, |m| m.len());
    crate::emit(&format!(
        "{} records of {h}x{w}x{c} in {} ({:.1} MB) from {:.1} MB of images, {} failed of {} listed, {seconds:.3} s ({:.1} images/s, {threads} threads)",
        report.stored,
        args.out.display(),
        size as f64 / 1e6,
        report.bytes_read as f64 / 1e6,
        report.failures.len(),
        paths.len(),
        paths.len() as f64 / seconds.max(1e-9),
    ));
    Ok(ExitCode::SUCCESS)
}
