//! `spdl`: load an image dataset through an spdl-rs pipeline and report how fast it went.
//!
//! ```text
//! spdl load [PATH]          # a folder (walked recursively), an ImageFolder, or a list file
//! spdl load                 # the sample photographs bundled in the repository
//! spdl load 's3://bucket/shards/train-{0000..0127}.tar'   # WebDataset shards, streamed
//! spdl shard SRC OUT        # pack a folder into WebDataset tar shards
//! spdl cache SRC OUT        # decode + resize once into a decoded cache file
//! ```

mod cache;
mod device;
mod dump;
mod limit;
mod load;
mod report;
mod shard;
#[cfg(feature = "decode-ffmpeg")]
mod video;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Load datasets through spdl-rs pipelines.
#[derive(Parser, Debug)]
#[command(name = "spdl", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load images: list -> read -> decode + transform -> batch, and report throughput.
    Load(LoadArgs),
    /// The decoder's limit: decode + transform the same files from memory in a bare loop on all
    /// threads (no pipeline), for comparison with `load`. Takes the same flags as `load`.
    Limit(LimitArgs),
    /// Pack a folder (or an ImageFolder) into tar shards in the WebDataset layout.
    Shard(shard::ShardArgs),
    /// Decode and resize a folder, ImageFolder or list file once into a decoded cache file
    /// (served with crop, flip and normalize at read time: `spdl_rs.io.DecodedCache`).
    Cache(cache::CacheArgs),
}

#[derive(clap::Args, Debug)]
pub(crate) struct LimitArgs {
    #[command(flatten)]
    pub(crate) load: LoadArgs,
    /// Decode only, no resize or crop: what the loader decodes for the transform (with
    /// `--no-region-decode --no-scaled-decode`: every image in full, the full-decode ceiling;
    /// with `--no-region-decode`: the whole image at the DCT scale the transform allows).
    #[arg(long)]
    pub(crate) decode_only: bool,
}

/// Which per-image transform to apply (all give square `size x size` images).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransformArg {
    /// Resize the shorter side to size*256/224, center crop (ImageNet evaluation).
    Eval,
    /// Random resized crop (scale 0.08-1, ratio 3/4-4/3) and horizontal flip, seeded.
    Train,
    /// Resize to size x size, ignoring the aspect ratio.
    Resize,
}

/// Element type of the batches.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DtypeArg {
    /// 8-bit pixels, as decoded.
    U8,
    /// 32-bit floats normalized with the ImageNet mean and std.
    F32,
}

/// Memory layout of the batches.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayoutArg {
    /// `[N, H, W, C]` (u8 only).
    Nhwc,
    /// `[N, C, H, W]` (f32 only).
    Nchw,
}

#[derive(clap::Args, Debug)]
pub(crate) struct LoadArgs {
    /// A folder of images (walked recursively), or a text file listing one path per line, or
    /// WebDataset tar shards: a `.tar` path or brace pattern, local, `http(s)://` or `s3://`
    /// (`'s3://bucket/shards/train-{0000..0127}.tar'`), each shard read as one stream and its
    /// first image field decoded (`cls` is the label).
    /// Default: the bundled sample photographs (`data/samples`).
    pub(crate) path: Option<PathBuf>,
    /// Use the ImageFolder layout: one sub-folder per class gives the labels.
    #[arg(long)]
    pub(crate) image_folder: bool,
    /// List hidden entries too: by default files and folders whose name starts with `.`
    /// (`.DS_Store`, AppleDouble `._*`, `.ipynb_checkpoints/`) and `__MACOSX/` are skipped.
    #[arg(long)]
    pub(crate) include_hidden: bool,
    /// Images per batch.
    #[arg(long, short = 'b', default_value_t = 32)]
    pub(crate) batch_size: usize,
    /// Output side in pixels (square images).
    #[arg(long, default_value_t = 224)]
    pub(crate) size: usize,
    /// The per-image transform.
    #[arg(long, value_enum, default_value_t = TransformArg::Eval)]
    pub(crate) transform: TransformArg,
    /// Decode whole JPEGs even when the transform keeps only a region (by default only the
    /// kept region is decoded, with libjpeg-turbo's cropping).
    #[arg(long)]
    pub(crate) no_region_decode: bool,
    /// Decode JPEGs at full resolution even when the transform shrinks them (default:
    /// libjpeg-turbo's DCT scaling, by the rule `--no-fine-scaled-decode` describes).
    #[arg(long)]
    pub(crate) no_scaled_decode: bool,
    /// Pick the DCT scale only among 1/2, 1/4 and 1/8 with twice the output size to spare
    /// (SPDL-API behaviour). Default: the smallest of libjpeg-turbo's M/8 (M = 1..4; 5/8 to
    /// 7/8 decode slower than in full) that keeps the decoded box 1.25x the output size, within
    /// a mean absolute difference of 1.5 levels of the full decode (about 0.5 on photos).
    #[arg(long)]
    pub(crate) no_fine_scaled_decode: bool,
    /// Worker threads for decoding (default: the number of cores; 1 to 4096).
    #[arg(long, short = 't', value_parser = threads_parser())]
    pub(crate) threads: Option<usize>,
    /// Files read concurrently (async I/O stage; 1 to 65536).
    #[arg(long, default_value_t = 16, value_parser = concurrency_parser())]
    pub(crate) read_concurrency: usize,
    /// Requests in flight for remote samples (HTTP, S3), fixed. Default: adaptive, from 64 in
    /// flight grown (1.5x per step, up to 1024) while images/s rises, as the latency asks;
    /// local samples use --read-concurrency.
    #[arg(long, value_parser = concurrency_parser())]
    pub(crate) fetch_concurrency: Option<usize>,
    /// Images decoded concurrently (default: the number of threads).
    #[arg(long, value_parser = concurrency_parser())]
    pub(crate) decode_concurrency: Option<usize>,
    /// Passes over the dataset (1 to 1,000,000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) epochs: u64,
    /// Shuffle each epoch (by seed and epoch).
    #[arg(long)]
    pub(crate) shuffle: bool,
    /// With tar shards: a shuffle buffer of N samples on top of the shard shuffle (seeded by
    /// --seed; 0: none).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(crate) shuffle_buffer: usize,
    /// With remote tar shards: shards opened ahead of the one being read, so each one's
    /// request latency is paid while the one before streams (0: none).
    #[arg(long, default_value_t = spdl_sources::shards::DEFAULT_READAHEAD, value_name = "N")]
    pub(crate) shard_readahead: usize,
    /// Seed for shuffling and random crops.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Batch element type.
    #[arg(long, value_enum, default_value_t = DtypeArg::U8)]
    pub(crate) dtype: DtypeArg,
    /// Batch layout (default: nhwc for u8, nchw for f32).
    #[arg(long, value_enum)]
    pub(crate) layout: Option<LayoutArg>,
    /// Use only the first N samples of the listing.
    #[arg(long)]
    pub(crate) limit: Option<usize>,
    /// This process's rank (default: $RANK, or 0).
    #[arg(long)]
    pub(crate) rank: Option<u64>,
    /// Number of ranks (default: $WORLD_SIZE, or 1).
    #[arg(long)]
    pub(crate) world_size: Option<u64>,
    /// Load videos instead of images: one clip of `--frames` frames at `--size` per file,
    /// batched as `[N, T, H, W, 3]` u8; the report gives frames/s (feature `decode-ffmpeg`).
    #[arg(long)]
    pub(crate) video: bool,
    /// Frames per clip with `--video`, spread evenly over the video.
    #[arg(long, default_value_t = 16)]
    pub(crate) frames: usize,
    /// Where batches end up: `cpu`, or `cuda[:N]` (pinned memory, then an asynchronous copy to
    /// GPU N; plain `cuda` is the `LOCAL_RANK` device). Needs the `cuda` feature.
    #[arg(long, default_value = "cpu")]
    pub(crate) device: String,
    /// Save the first batch to FILE as a NumPy `.npy` array (`[N, H, W, C]` u8, or
    /// `[N, C, H, W]` f32 with `--dtype f32`) and stop. Stages keep input order, so the batch
    /// holds the first `--batch-size` samples of the listing (pair with `--limit`).
    #[arg(long, value_name = "FILE")]
    pub(crate) dump: Option<PathBuf>,
    /// Print the report as JSON on stdout (no progress bar).
    #[arg(long)]
    pub(crate) json: bool,
    /// Write a Chrome/Perfetto trace of every stage to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub(crate) quiet: bool,
    /// Load a decoder plugin (a shared library built with `spdl_io::export_decoder_plugin!`,
    /// e.g. `libspdl_decoder_pnm.so`) before listing: its formats are decoded, picked by
    /// content, and its file extensions are listed. Repeatable.
    #[arg(long, value_name = "LIB")]
    pub(crate) decoder_plugin: Vec<PathBuf>,
}

/// Loads every `--decoder-plugin` library.
fn load_plugins(args: &LoadArgs) -> anyhow::Result<()> {
    if !cfg!(feature = "decoder-plugins") && !args.decoder_plugin.is_empty() {
        anyhow::bail!(
            "--decoder-plugin: this spdl was built without the `decoder-plugins` feature"
        );
    }
    #[cfg(feature = "decoder-plugins")]
    for path in &args.decoder_plugin {
        // SAFETY: the user asked for this library by path, as with `LD_PRELOAD`.
        let name = unsafe { spdl_io::decode::plugin::load(path) }?;
        tracing::debug!(plugin = %path.display(), decoder = %name, "loaded decoder plugin");
    }
    Ok(())
}

/// Writes the report to stdout; a closed pipe (`spdl load | head`) is not an error.
pub(crate) fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| {
        if text.ends_with('\n') {
            Ok(())
        } else {
            out.write_all(b"\n")
        }
    });
    let _ = out.flush();
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Load(args) => load_plugins(&args).and_then(|()| load::run(args)),
        Command::Limit(args) => load_plugins(&args.load).and_then(|()| limit::run(args)),
        Command::Shard(args) => shard::run(args),
        Command::Cache(args) => cache::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// Worker threads: past 4096 a value is a mistake that would exhaust memory.
pub(crate) fn threads_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096)
}

/// Items in flight in one stage: past 65536 the engine's semaphores refuse it.
fn concurrency_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65536)
}
