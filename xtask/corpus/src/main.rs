//! The corpus generator behind `cargo xtask corpus`: a deterministic ImageNet-like set of
//! JPEGs, cut from the real photographs in `shared/data/photos`, for benchmarks and
//! end-to-end tests. It is written outside the repository (by default
//! `~/.cache/spdl-corpus/imagenet-like-2000`) and not rebuilt when its manifest shows it is
//! complete. Same photos, seed and count: same bytes.
//!
//! `--large`: large photos instead (long side 1,600 to 4,000 px, 300 by default, in
//! `~/.cache/spdl-corpus/large-COUNT`), for the decode-less-on-large-photos benchmarks.

mod manifest;
mod plan;
mod render;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;

use manifest::Entry;

/// Bump when the plan or the rendering changes, so that old corpora are rebuilt.
const GENERATOR_VERSION: u32 = 1;

/// Build the deterministic ImageNet-like JPEG corpus (ImageFolder layout)
#[derive(Parser)]
#[command(name = "cargo xtask corpus", bin_name = "cargo xtask corpus")]
struct Args {
    /// Output folder [default: ~/.cache/spdl-corpus/imagenet-like-COUNT].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Number of images [default: 2000; 300 with --large].
    #[arg(long)]
    count: Option<usize>,
    /// Large photos: long side 1,600 to 4,000 px (see `plan::plan_large`).
    #[arg(long)]
    large: bool,
    /// Number of classes (class folders).
    #[arg(long, default_value_t = 10)]
    classes: usize,
    /// Source photographs [default: ../shared/data/photos next to the repository, else
    /// /work/shared/data/photos].
    #[arg(long)]
    photos: Option<PathBuf>,
    /// Seed of the random crops, sizes and encodings.
    #[arg(long, default_value_t = 2024)]
    seed: u64,
    /// Worker threads [default: the number of CPUs].
    #[arg(long)]
    threads: Option<usize>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let count = args.count.unwrap_or(if args.large { 300 } else { 2000 });
    if count == 0 || args.classes == 0 {
        bail!("--count and --classes must be at least 1");
    }
    let photos = list_photos(&photos_dir(args.photos.as_deref())?)?;
    let out = match &args.out {
        Some(out) => out.clone(),
        None => default_out(count, args.large)?,
    };
    let params = format!(
        "generator={GENERATOR_VERSION} seed={} count={} classes={} photos={}{}",
        args.seed,
        count,
        args.classes,
        identity(&photos)?,
        if args.large { " large" } else { "" }
    );

    let started = Instant::now();
    let entries = match manifest::complete(&out, &params, count) {
        Some(entries) => {
            println!("corpus: already complete in {}", out.display());
            entries
        }
        None => {
            let specs = if args.large {
                plan::plan_large(args.seed, count, args.classes, photos.len())
            } else {
                plan::plan(args.seed, count, args.classes, photos.len())
            };
            // Large images are cut from the photos at full resolution; ~500 px ones from
            // photos decoded at up to 1/4 scale.
            let min_long = if args.large {
                render::FULL_RESOLUTION
            } else {
                render::MIN_DECODED_LONG_SIDE
            };
            let threads = args
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
            let entries = generate(
                &out,
                &params,
                &photos,
                &specs,
                args.classes,
                threads,
                min_long,
            )?;
            println!(
                "corpus: wrote {} in {:.1} s",
                out.display(),
                started.elapsed().as_secs_f64()
            );
            entries
        }
    };
    summarize(&entries);
    Ok(())
}

/// `--photos`, else `../shared/data/photos` beside the repository, else `/work/shared/...`.
fn photos_dir(flag: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = [
        repo.join("../shared/data/photos"),
        PathBuf::from("/work/shared/data/photos"),
    ];
    match candidates.iter().find(|d| d.is_dir()) {
        Some(d) => Ok(d.canonicalize().unwrap_or_else(|_| d.clone())),
        None => bail!("no photos found in {candidates:?}; pass --photos DIR"),
    }
}

/// The JPEG files of `dir`, sorted by name (the order the plan refers to).
fn list_photos(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut photos: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| x.eq_ignore_ascii_case("jpg") || x.eq_ignore_ascii_case("jpeg"))
        })
        .collect();
    photos.sort();
    if photos.is_empty() {
        bail!("no JPEG photos in {}", dir.display());
    }
    Ok(photos)
}

fn default_out(count: usize, large: bool) -> Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set; pass --out DIR")?;
    let kind = if large { "large" } else { "imagenet-like" };
    Ok(PathBuf::from(home)
        .join(".cache/spdl-corpus")
        .join(format!("{kind}-{count}")))
}

/// A short hash of the photos' names and contents: other photos make another corpus.
fn identity(photos: &[PathBuf]) -> Result<String> {
    let mut all = Vec::new();
    for p in photos {
        all.extend_from_slice(p.file_name().unwrap_or_default().as_encoded_bytes());
        let data = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
        all.extend_from_slice(manifest::sha256(&data).as_bytes());
    }
    Ok(manifest::sha256(&all)[..16].to_string())
}

/// Renders every image into `OUT.partial`, writes the manifest, then moves it to `out`.
fn generate(
    out: &Path,
    params: &str,
    photos: &[PathBuf],
    specs: &[plan::Spec],
    classes: usize,
    threads: usize,
    min_long: usize,
) -> Result<Vec<Entry>> {
    let partial = PathBuf::from(format!("{}.partial", out.display()));
    if partial.exists() {
        std::fs::remove_dir_all(&partial)
            .with_context(|| format!("cannot remove {}", partial.display()))?;
    }
    for class in 0..classes {
        let dir = partial.join(format!("class_{class:02}"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }

    // Work goes by photo, so each photo is decoded once; the bytes do not depend on who
    // renders what, since every image's parameters are in its spec.
    let mut by_photo: Vec<Vec<&plan::Spec>> = vec![Vec::new(); photos.len()];
    for s in specs {
        by_photo[s.photo].push(s);
    }
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let entries = Mutex::new(Vec::with_capacity(specs.len()));
    let worker = || -> Result<()> {
        let mut resizer = render::portable_resizer();
        loop {
            let p = next.fetch_add(1, Ordering::Relaxed);
            let Some(todo) = by_photo.get(p) else {
                return Ok(());
            };
            if todo.is_empty() {
                continue;
            }
            let path = &photos[p];
            let data =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let photo = render::decode(&data, min_long)
                .with_context(|| format!("cannot decode {}", path.display()))?;
            for spec in todo {
                let jpeg = render::render(&photo, spec, &mut resizer)?;
                let file = partial.join(&spec.path);
                std::fs::write(&file, &jpeg)
                    .with_context(|| format!("cannot write {}", file.display()))?;
                entries
                    .lock()
                    .expect("no panics while locked")
                    .push(Entry::new(spec, &jpeg));
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_multiple_of(250) {
                    eprintln!("corpus: {n}/{}", specs.len());
                }
            }
        }
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1)).map(|_| s.spawn(worker)).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("corpus worker panicked"))
            .collect::<Result<Vec<()>>>()
    })?;
    let mut entries = entries.into_inner().expect("no panics while locked");
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    manifest::write(&partial, params, &entries)?;

    // Replace `out` only if it is an older corpus (it has a manifest) or an empty folder.
    if out.exists() {
        let empty = std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_none());
        if !out.join(manifest::FILE).exists() && !empty {
            bail!(
                "{} exists and is not a corpus; not overwriting it (the new one is in {})",
                out.display(),
                partial.display()
            );
        }
        std::fs::remove_dir_all(out).with_context(|| format!("cannot remove {}", out.display()))?;
    }
    std::fs::rename(&partial, out)
        .with_context(|| format!("cannot move {} to {}", partial.display(), out.display()))?;
    Ok(entries)
}

fn summarize(entries: &[Entry]) {
    let n = entries.len().max(1) as f64;
    let bytes: u64 = entries.iter().map(|e| e.bytes).sum();
    let mean = |f: fn(&Entry) -> u32| entries.iter().map(|e| f64::from(f(e))).sum::<f64>() / n;
    let count = |f: &dyn Fn(&Entry) -> bool| entries.iter().filter(|e| f(e)).count();
    println!(
        "corpus: {} JPEGs, {:.1} MB, mean {:.0}x{:.0} px, quality {:.1} on average",
        entries.len(),
        bytes as f64 / 1e6,
        mean(|e| e.width),
        mean(|e| e.height),
        entries.iter().map(|e| f64::from(e.quality)).sum::<f64>() / n,
    );
    println!(
        "corpus: 4:2:0 {}, 4:4:4 {}, 4:2:2 {}, gray {}; progressive {}",
        count(&|e| e.sampling == "4:2:0"),
        count(&|e| e.sampling == "4:4:4"),
        count(&|e| e.sampling == "4:2:2"),
        count(&|e| e.sampling == "gray"),
        count(&|e| e.progressive),
    );
}
