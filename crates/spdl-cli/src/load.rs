//! `spdl load`: the main job. Builds source -> read -> batch -> decode + transform straight into
//! a pooled batch buffer (-> copy to the GPU), consumes it, and prints a report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use spdl_core::{Op, Order, PipelineBuilder, StageConfig};
use spdl_io::{
    load_batch_pooled, BatchSample, ErrorKind, ImageLoader, ImageOptions, Normalize, TransformKind,
};
use spdl_sources::concurrency::{AdaptiveConcurrency, FetchLimiter, FetchPermit};
use spdl_sources::shards::{list_shards_with, ShardSource};
use spdl_sources::{
    read_list_file, walk_dir_with, Bytes, DistInfo, Extensions, FetchOptions, Fetcher, ImageFolder,
    SampleList, Sampler, SamplerOptions, Uri, WalkOptions,
};
use tracing_subscriber::prelude::*;

use crate::device::{self, Counted};
use crate::report::{Failure, Report};
use crate::{DtypeArg, LayoutArg, LoadArgs, TransformArg};

/// One sample on its way through the pipeline.
struct Job {
    index: u64,
    path: PathBuf,
    location: Uri,
    label: Option<i64>,
    epoch: u64,
    /// The bytes when the source already read them (a tar shard's member).
    bytes: Option<Bytes>,
}

/// Whether `path` names tar shards (`train-{0000..0127}.tar`, `s3://b/s-{0..9}.tar`, one
/// `.tar`): they are read as WebDataset shards, each as one sequential stream.
fn is_shard_pattern(path: &Path) -> bool {
    let text = path.to_string_lossy();
    text.ends_with(".tar") || (text.contains('{') && text.contains(".tar"))
}

/// A sample with no field the loader can read: named by shard and key, counted as failed.
#[derive(Debug)]
struct MissingField {
    key: String,
    fields: Vec<String>,
}

impl std::fmt::Display for MissingField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "missing field: sample {}: no image field (jpg, png, ...); its fields: {}",
            self.key,
            if self.fields.is_empty() {
                "none".to_owned()
            } else {
                self.fields.join(", ")
            }
        )
    }
}

impl std::error::Error for MissingField {}

/// A WebDataset sample as a job: its first image field (by extension: `jpg`, `png`, ...)
/// and its `cls` as the label; a [`MissingField`] failure when it has no image field.
fn shard_job(
    mut sample: spdl_sources::shards::ShardSample,
    images: &Extensions,
    shard: &Uri,
    index: u64,
    epoch: u64,
) -> std::result::Result<Job, MissingField> {
    let label = sample
        .get("cls")
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| t.trim().parse().ok());
    let Some(at) = sample
        .fields
        .iter()
        .position(|(f, _)| images.matches(Path::new(&format!("x.{f}"))))
    else {
        return Err(MissingField {
            key: sample.key,
            fields: sample.fields.into_iter().map(|(f, _)| f).collect(),
        });
    };
    // The member's bytes move on as they are: no copy.
    let (field, bytes) = sample.fields.swap_remove(at);
    let path = PathBuf::from(format!("{shard}#{}.{field}", sample.key));
    Ok(Job {
        index,
        path,
        location: shard.clone(),
        label,
        epoch,
        bytes: Some(Bytes::from(bytes)),
    })
}

/// The shard source of a shard pattern (local, `http(s)://` or `s3://`; see
/// `spdl_sources::shards::list_shards_with`).
fn shard_source(args: &LoadArgs, path: &Path, dist: DistInfo) -> Result<ShardSource> {
    let pattern = path.to_string_lossy();
    let fetcher = Fetcher::new(FetchOptions::default())?;
    let shards = list_shards_with(&pattern, &fetcher)
        .with_context(|| format!("cannot list shards {pattern}"))?;
    fetcher.capability(&shards[0])?;
    let options = SamplerOptions {
        shuffle: args.shuffle,
        seed: args.seed,
        ..Default::default()
    };
    Ok(ShardSource::new(shards, dist, options)?
        .with_fetcher(fetcher)
        .with_shuffle_buffer(args.shuffle_buffer)
        .with_readahead(args.shard_readahead))
}

/// Requests in flight in the read stage: `--fetch-concurrency N` as given; else, for remote
/// samples, adaptive (from 64, grown while the rate rises, see
/// `spdl_sources::concurrency`); else `--read-concurrency`.
fn fetch_limiter(args: &LoadArgs, remote_samples: bool) -> Result<FetchLimiter> {
    Ok(match args.fetch_concurrency {
        Some(n) => FetchLimiter::fixed(n),
        None if remote_samples => FetchLimiter::adaptive(AdaptiveConcurrency::default())?,
        None => FetchLimiter::fixed(args.read_concurrency),
    })
}

/// A sample whose bytes were read.
struct Fetched {
    job: Job,
    bytes: Bytes,
    /// With the adaptive fetch concurrency: the request's slot, given back once the sample
    /// has left the read stage (see `run`).
    slot: Option<FetchPermit>,
}

/// The sample photographs bundled in the repository.
fn bundled_samples() -> PathBuf {
    let here = Path::new("data/samples");
    if here.is_dir() {
        return here.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/samples")
}

/// The extensions a listing accepts: the built-in image formats and those of every loaded
/// decoder plugin (`--decoder-plugin`).
fn image_extensions() -> Extensions {
    Extensions::images_and(spdl_io::Registry::with_defaults().extensions())
}

pub(crate) fn list_dataset(args: &LoadArgs) -> Result<(SampleList, String)> {
    let path = args.path.clone().unwrap_or_else(bundled_samples);
    let shown = path.display().to_string();
    let remote = Uri::has_scheme(path.as_os_str().as_encoded_bytes());
    let walk = WalkOptions {
        include_hidden: args.include_hidden,
    };
    let mut list = if remote {
        // s3://bucket/prefix (listed), or an http(s):// / s3:// manifest of paths and URIs.
        let uri = Uri::parse_bytes(path.as_os_str().as_encoded_bytes())?;
        let list = Fetcher::new(FetchOptions::default())?
            .list_blocking(&uri)
            .with_context(|| format!("cannot list {shown}"))?;
        let images = image_extensions();
        let name = list.name().to_string();
        let samples = list.into_samples().into_iter();
        let samples = samples.filter(|s| !uri.names_prefix() || images.matches(&s.path));
        SampleList::new(name, samples.collect())
    } else if args.image_folder {
        ImageFolder::open_with(&path, &image_extensions(), true, &walk)
            .with_context(|| format!("cannot open ImageFolder {shown}"))?
            .into_samples()
    } else if path.is_file() && image_extensions().matches(&path) {
        // One image (by its extension): a dataset of one sample, not a list file.
        SampleList::new(
            shown.clone(),
            vec![spdl_sources::Sample::new(path.clone(), None)],
        )
    } else if path.is_file() {
        read_list_file(&path).with_context(|| format!("cannot read list file {shown}"))?
    } else {
        walk_dir_with(&path, &image_extensions(), &walk)
            .with_context(|| format!("cannot list {shown}"))?
    };
    crate::report::print_warnings(&list);
    if args.limit == Some(0) {
        bail!("--limit must be at least 1");
    }
    if let Some(n) = args.limit {
        let name = list.name().to_string();
        let samples: Vec<_> = list.into_samples().into_iter().take(n).collect();
        list = SampleList::new(name, samples);
    }
    if list.is_empty() {
        bail!("no images found in {shown}");
    }
    Ok((list, shown))
}

/// The image loader of `--transform`, `--size`, `--seed`, `--no-region-decode`,
/// `--no-scaled-decode` and `--no-fine-scaled-decode`, through spdl-io's one options model.
pub(crate) fn image_loader(args: &LoadArgs) -> Result<ImageLoader> {
    if args.size == 0 {
        bail!("--size must be at least 1");
    }
    let options = ImageOptions {
        size: Some(args.size),
        transform: match args.transform {
            TransformArg::Eval => TransformKind::Eval,
            TransformArg::Train => TransformKind::Train,
            TransformArg::Resize => TransformKind::Resize,
        },
        seed: args.seed,
        region_decode: !args.no_region_decode,
        scaled_decode: !args.no_scaled_decode,
        fine_scaled_decode: !args.no_fine_scaled_decode,
        ..ImageOptions::default()
    };
    Ok(options.loader()?)
}

fn dist(args: &LoadArgs) -> Result<DistInfo> {
    Ok(match (args.rank, args.world_size) {
        (None, None) => DistInfo::from_env()?,
        (rank, world) => DistInfo::new(rank.unwrap_or(0), world.unwrap_or(1))?,
    })
}

/// Keeps the trace file open until the run ends.
struct TraceGuard(#[allow(dead_code)] Option<tracing_chrome::FlushGuard>);

fn init_tracing(trace: Option<&Path>) -> Result<TraceGuard> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let (chrome, guard) = match trace {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot create trace file {}", path.display()))?;
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                .writer(file)
                .include_args(true)
                .build();
            (Some(layer), Some(guard))
        }
        None => (None, None),
    };
    tracing_subscriber::registry().with(fmt).with(chrome).init();
    Ok(TraceGuard(guard))
}

pub(crate) fn run(args: LoadArgs) -> Result<ExitCode> {
    let _trace = init_tracing(args.trace.as_deref())?;
    if args.video {
        #[cfg(feature = "decode-ffmpeg")]
        return crate::video::run(&args);
        #[cfg(not(feature = "decode-ffmpeg"))]
        bail!("--video: this spdl was built without FFmpeg; rebuild with `cargo build --release -p spdl-cli --features decode-ffmpeg`");
    }
    let dist = dist(&args)?;
    let shard_path = args.path.clone().filter(|p| is_shard_pattern(p));
    if shard_path.is_none() && args.shuffle_buffer > 0 {
        bail!("--shuffle-buffer works on tar shards only (a `.tar` path or brace pattern)");
    }
    let (dtype, layout) = match (args.dtype, args.layout) {
        (DtypeArg::U8, None | Some(LayoutArg::Nhwc)) => (DtypeArg::U8, LayoutArg::Nhwc),
        (DtypeArg::F32, None | Some(LayoutArg::Nchw)) => (DtypeArg::F32, LayoutArg::Nchw),
        (d, Some(l)) => bail!(
            "--dtype {} with --layout {} is not supported: use u8 with nhwc, or f32 with nchw",
            d.to_possible_value()
                .map_or_else(String::new, |v| v.get_name().to_owned()),
            l.to_possible_value()
                .map_or_else(String::new, |v| v.get_name().to_owned())
        ),
    };
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    for (flag, value) in [
        ("--threads", args.threads),
        ("--decode-concurrency", args.decode_concurrency),
        ("--read-concurrency", Some(args.read_concurrency)),
        ("--fetch-concurrency", args.fetch_concurrency),
    ] {
        if value == Some(0) {
            bail!("{flag} must be at least 1");
        }
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let decode_concurrency = args.decode_concurrency.unwrap_or(threads).max(1);

    let loader = Arc::new(image_loader(&args)?);
    let sampler_options = SamplerOptions {
        shuffle: args.shuffle,
        seed: args.seed,
        ..Default::default()
    };
    let failures: Arc<Mutex<Vec<Failure>>> = Arc::default();
    let bytes_read = Arc::new(AtomicU64::new(0));

    // Each epoch's jobs: the sampler's share of a listing, or this rank's shards streamed.
    type Jobs = Box<dyn Iterator<Item = Job> + Send>;
    // Whether any sample is fetched over the network (S3, HTTP): those get the adaptive
    // fetch concurrency.
    let mut remote_samples = false;
    let (shown, per_epoch, source): (String, u64, Box<dyn FnMut(u64) -> Jobs + Send>) =
        match &shard_path {
            Some(path) => {
                let shards = shard_source(&args, path, dist)?;
                let (failures, bytes_read) = (failures.clone(), bytes_read.clone());
                let limit = args.limit.unwrap_or(usize::MAX);
                let source = move |epoch: u64| -> Jobs {
                    let (failures, bytes_read) = (failures.clone(), bytes_read.clone());
                    let uris: Vec<Uri> = shards.shards().to_vec();
                    // Built once: a registry per sample would cost more than the tar read.
                    let images = image_extensions();
                    let mut index = 0u64;
                    Box::new(
                        shards
                            .epoch(epoch)
                            .filter_map(move |item| match item {
                                Ok(s) => {
                                    let size: usize = s.fields.iter().map(|(_, d)| d.len()).sum();
                                    bytes_read.fetch_add(size as u64, Ordering::Relaxed);
                                    index += 1;
                                    let shard = &uris[s.shard];
                                    let at = PathBuf::from(format!("{shard}#{}", s.key));
                                    // Every sample read is delivered or one named failure.
                                    shard_job(s, &images, shard, index - 1, epoch)
                                        .map_err(|e| Failure::record(&failures, &at, e))
                                        .ok()
                                }
                                Err(e) => {
                                    let key = e.key.clone().unwrap_or_default();
                                    let at = PathBuf::from(format!("{}#{key}", e.shard));
                                    let _ = Failure::record(&failures, &at, e);
                                    None
                                }
                            })
                            .take(limit),
                    )
                };
                let shown = path.display().to_string();
                (shown, 0, Box::new(source))
            }
            None => {
                let (dataset, shown) = list_dataset(&args)?;
                remote_samples = dataset.iter().any(|s| s.uri.is_some());
                let mut sampler = Sampler::new(dataset.len_u64(), dist, sampler_options)?;
                let per_epoch = sampler.num_samples();
                let dataset = Arc::new(dataset);
                let failures = failures.clone();
                let source = move |epoch: u64| -> Jobs {
                    sampler.set_epoch(epoch);
                    let dataset = dataset.clone();
                    let items: Vec<_> = sampler.iter().collect();
                    let failures = failures.clone();
                    Box::new(items.into_iter().filter_map(move |s| {
                        // Never silently: a sample the listing cannot give is a failure.
                        let sample = match dataset.get(s.index) {
                            Ok(sample) => sample,
                            Err(e) => {
                                let at = PathBuf::from(format!("{}#{}", dataset.name(), s.index));
                                Failure::record(&failures, &at, e);
                                return None;
                            }
                        };
                        Some(Job {
                            index: s.index,
                            path: sample.path.clone(),
                            location: sample.location(),
                            label: sample.label,
                            epoch,
                            bytes: None,
                        })
                    }))
                };
                (shown, per_epoch, Box::new(source))
            }
        };
    // One fetch path for local files, HTTP(S) and S3: retries, timeouts, checks.
    let fetcher = Fetcher::new(FetchOptions::default())?;
    let limiter = fetch_limiter(&args, remote_samples)?;
    let read = {
        let (failures, bytes_read) = (failures.clone(), bytes_read.clone());
        let limiter = limiter.clone();
        Op::future(move |mut job: Job| {
            let (failures, bytes_read) = (failures.clone(), bytes_read.clone());
            let (fetcher, limiter) = (fetcher.clone(), limiter.clone());
            async move {
                if let Some(bytes) = job.bytes.take() {
                    let slot = None;
                    return Ok(Some(Fetched { job, bytes, slot }));
                }
                // A fixed limit counts requests in flight: the slot is back once the bytes are
                // in. An adaptive one keeps it until the sample has left the read stage (the
                // `fetched` stage), so that the rate it climbs on is the one the decoders take
                // samples at (bytes waiting for them do not speed anything up), and fetched
                // bytes waiting in the read stage stay within the limit (it admits up to 1024).
                let slot = limiter.acquire().await;
                match fetcher.fetch(&job.location).await {
                    Ok(bytes) => {
                        bytes_read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                        let slot = limiter.is_adaptive().then_some(slot);
                        Ok(Some(Fetched { job, bytes, slot }))
                    }
                    Err(e) => Err(Failure::record(&failures, &job.path, e)),
                }
            }
        })
    };
    // Completion order keeps the workers busy; a dump must show the listing's first samples.
    let order = if args.dump.is_some() {
        Order::Input
    } else {
        Order::Completion
    };
    let fetched = PipelineBuilder::source(source).pipe(
        read,
        StageConfig::named("read")
            // Room for the limiter's largest limit; the limiter admits the requests.
            .concurrency(limiter.max())
            .order(order),
    );
    // Passed on: the adaptive limiter counts the sample done and lets one more request go.
    let fetched = if limiter.is_adaptive() {
        let release = Op::future(|mut f: Fetched| async move {
            f.slot = None;
            Ok(Some(f))
        });
        fetched.pipe(release, StageConfig::named("fetched").order(order))
    } else {
        fetched
    };
    let fetched = fetched
        // Epoch e + 1's first batches load while epoch e's tail is consumed (no bubble at the
        // boundary); nothing past the last epoch.
        .prefetch_epochs_of(args.epochs);

    let mut report = Report::new(&shown, &args, threads, per_epoch, layout, dtype);
    report.fetch = limiter.is_adaptive().then_some(limiter);
    let gpu = if device::is_gpu(&args.device)? {
        if args.dump.is_some() {
            bail!("--dump saves a host batch: use it with --device cpu");
        }
        Some(device::Gpu::open(&args.device, decode_concurrency)?)
    } else {
        None
    };
    let pool = match &gpu {
        Some(gpu) => gpu.pool()?,
        None => device::host_pool(decode_concurrency),
    };
    // A batch's samples decode straight into their rows of one pool buffer (pinned memory
    // before a copy to the GPU): no copy after decoding; a sample that fails is recorded and
    // its row dropped. Each batch decodes on a few threads of its own (`ThreadSplit`), so
    // that no core stays idle while a batch finishes its largest images.
    let split = ThreadSplit::new(
        threads,
        decode_concurrency,
        per_epoch.div_ceil(args.batch_size as u64) * args.epochs,
    );
    let decode_batch = {
        let (loader, failures) = (loader.clone(), failures.clone());
        let normalize = (dtype == DtypeArg::F32).then(Normalize::imagenet);
        Op::blocking(move |fetched: Vec<Fetched>| {
            let samples: Vec<BatchSample> = fetched
                .iter()
                .map(|f| BatchSample {
                    key: spdl_io::key_from_path(&f.job.path),
                    label: f.job.label,
                    index: f.job.index,
                    epoch: f.job.epoch,
                })
                .collect();
            let bytes = |i: usize| Ok(&fetched[i].bytes[..]);
            let threads = split.next_batch();
            let (mut batch, failed) = match load_batch_pooled(
                &loader,
                &samples,
                normalize.as_ref(),
                threads,
                bytes,
                &*pool,
            ) {
                Ok(loaded) => loaded,
                // No batch buffer (the pool timed out or the memory ran out).
                Err(e) if e.kind() == ErrorKind::Buffer => return Err(Box::new(e)),
                Err(e) => {
                    // The batch as a whole is refused (its size is over the limits before
                    // any decoding): each of its samples failed for that reason.
                    for (f, s) in fetched.iter().zip(&samples) {
                        let each = spdl_io::Error::new(e.kind(), e.message()).with_key(&s.key);
                        Failure::record(&failures, &f.job.path, each);
                    }
                    return Ok(None);
                }
            };
            batch.drop_failed_rows(&failed);
            for (row, e) in failed {
                Failure::record(&failures, &fetched[row].job.path, e);
            }
            Ok((!batch.is_empty()).then_some(batch))
        })
    };
    let batches = fetched.aggregate(args.batch_size, false).pipe(
        decode_batch,
        StageConfig::named("decode")
            .concurrency(decode_concurrency)
            .order(order),
    );
    let run = match gpu {
        Some(gpu) => {
            let (pipeline, transfer) = gpu.transfer(batches, threads)?;
            let run = consume(pipeline, &args, per_epoch, &failures);
            report.transfer = Some(transfer());
            run
        }
        None => {
            let pipeline = batches.sink(device::HOST_SINK).build(threads)?;
            if let Some(path) = &args.dump {
                return crate::dump::first_batch(pipeline, path, &failures);
            }
            consume(pipeline, &args, per_epoch, &failures)
        }
    };
    report.images = run.images;
    report.batches = run.batches;
    let (elapsed, first_batch, pipeline_error) = (run.elapsed, run.first_batch, run.error);
    let stats = run.stats;

    report.seconds = elapsed.as_secs_f64();
    report.first_batch_seconds = first_batch.map(|d| d.as_secs_f64());
    report.bytes_read = bytes_read.load(Ordering::Relaxed);
    report.failures = std::mem::take(&mut *failures.lock().unwrap_or_else(|e| e.into_inner()));
    report.error = pipeline_error.map(|e| e.to_string());
    if shard_path.is_some() {
        // Shards are counted as they are read: what was read is what was listed.
        report.listed_per_epoch =
            (report.images + report.failures.len() as u64).div_ceil(args.epochs.max(1));
    }
    report.stats = Some(stats);
    if args.json {
        crate::emit(&serde_json::to_string_pretty(&report.to_json())?);
    } else {
        crate::emit(&report.to_string());
    }
    Ok(if report.error.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// What consuming the pipeline gave.
struct Run {
    images: u64,
    batches: u64,
    elapsed: Duration,
    first_batch: Option<Duration>,
    error: Option<spdl_core::Error>,
    stats: spdl_core::PipelineStats,
}

/// The training loop's side: takes every batch of every epoch, with a progress bar.
fn consume<B: Counted>(
    mut pipeline: spdl_core::Pipeline<B>,
    args: &LoadArgs,
    per_epoch: u64,
    failures: &Mutex<Vec<Failure>>,
) -> Run {
    let bar = progress_bar(per_epoch * args.epochs, args.json || args.quiet);
    let start = Instant::now();
    let (mut images, mut batches) = (0u64, 0u64);
    let mut first_batch = None;
    let mut error = None;
    'epochs: for _ in 0..args.epochs {
        for batch in pipeline.iter() {
            match batch {
                Ok(batch) => {
                    first_batch.get_or_insert_with(|| start.elapsed());
                    images += batch.images() as u64;
                    batches += 1;
                    bar.inc(batch.images() as u64);
                }
                Err(e) => {
                    error = Some(e);
                    break 'epochs;
                }
            }
        }
        let failed = failures.lock().map(|f| f.len()).unwrap_or(0);
        bar.set_message(format!("{failed} failed"));
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    let stats = pipeline.stats();
    pipeline.stop();
    Run {
        images,
        batches,
        elapsed,
        first_batch,
        error,
        stats,
    }
}

fn progress_bar(total: u64, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    if total == 0 {
        // Shards: the sample count is known only once they are read.
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {pos} images  {per_sec}  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        return bar;
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:32} {pos}/{len} images  {per_sec}  eta {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// How many threads each batch of `spdl load` decodes on. Each batch takes
/// `2 x threads / decode concurrency` (at least one, at most `threads`): the batches in flight
/// hold twice as many decode threads as there are cores, so that when a batch's last, largest
/// images keep one of its threads busy, the other threads' cores go to the other batches
/// (large-300, 2 threads, 2 epochs, alternating, 4 rounds: 1.04-1.12x images/s, median 1.05x,
/// against one thread a batch). Once fewer batches are left in the run than threads (a small listing, the run's
/// last batches), the batches left share all the threads.
struct ThreadSplit {
    threads: u64,
    /// Threads of a batch while many are left.
    per_batch: u64,
    /// Batches in the whole run (0: not known before reading, as with tar shards).
    batches: u64,
    started: AtomicU64,
}

impl ThreadSplit {
    fn new(threads: usize, concurrency: usize, batches: u64) -> Self {
        let threads = threads.max(1) as u64;
        ThreadSplit {
            threads,
            per_batch: (2 * threads)
                .div_ceil(concurrency.max(1) as u64)
                .min(threads),
            batches,
            started: AtomicU64::new(0),
        }
    }

    /// The threads for the batch starting now.
    fn next_batch(&self) -> usize {
        let started = self.started.fetch_add(1, Ordering::Relaxed);
        let left = self.batches.saturating_sub(started);
        let share = match left {
            0 => 1, // not known, or more batches than counted
            left => self.threads.div_ceil(left),
        };
        share.max(self.per_batch).min(self.threads) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::ThreadSplit;

    #[test]
    fn the_last_batches_of_a_run_share_the_threads() {
        let take = |split: &ThreadSplit, n| (0..n).map(|_| split.next_batch()).collect::<Vec<_>>();
        // 5 batches on 2 threads, two at a time: two threads each.
        assert_eq!(take(&ThreadSplit::new(2, 2, 5), 6), [2, 2, 2, 2, 2, 2]);
        // 16 threads, 16 batches at a time: two threads each until fewer than 16 are left.
        let split = take(&ThreadSplit::new(16, 16, 40), 40);
        assert_eq!(split[..33], [2; 33]);
        assert_eq!(split[33..], [3, 3, 4, 4, 6, 8, 16]);
        // 2 batches on 4 threads (a small listing): two each, then the last one all four.
        assert_eq!(take(&ThreadSplit::new(4, 4, 2), 2), [2, 4]);
        // 3 batches on 8 threads.
        assert_eq!(take(&ThreadSplit::new(8, 8, 3), 3), [3, 4, 8]);
        // One batch at a time: each on every thread.
        assert_eq!(take(&ThreadSplit::new(4, 1, 3), 3), [4, 4, 4]);
        // Unknown count (tar shards): two threads a batch.
        assert_eq!(take(&ThreadSplit::new(4, 4, 0), 2), [2, 2]);
    }
}
