//! `spdl shard SRC OUT`: packs a folder into tar shards in the WebDataset layout, readable by
//! `spdl_sources::shards`, WebDataset and GNU tar.
//!
//! - A plain folder (walked recursively, byte order): files with the same path up to the first
//!   dot of their name form one sample (`a/0001.jpg` + `a/0001.json`), member names kept.
//! - `--image-folder`: torchvision's class-folder layout; each image becomes a sample
//!   `CLASS/STEM` with the image (`jpg`, `png`, ... as its extension, lower case) and `cls`
//!   (the class index, as decimal text).
//!
//! Shards are `OUT/PREFIX-000000.tar`, `-000001.tar`, ... with `--samples-per-shard` samples
//! each (the last one may hold fewer), so ranks reading whole shards get equal counts.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use spdl_io::array::tar::TarWriter;
use spdl_sources::{walk_dir, Extensions, ImageFolder};

/// Arguments of `spdl shard`.
#[derive(clap::Args, Debug)]
pub(crate) struct ShardArgs {
    /// The folder to pack.
    pub(crate) src: PathBuf,
    /// Where to write the shards (created if missing).
    pub(crate) out: PathBuf,
    /// Samples per shard.
    #[arg(long, default_value_t = 1000)]
    pub(crate) samples_per_shard: usize,
    /// Shard file name prefix.
    #[arg(long, default_value = "shard")]
    pub(crate) prefix: String,
    /// Read SRC as an ImageFolder (class sub-folders) and add a `cls` field per sample.
    #[arg(long)]
    pub(crate) image_folder: bool,
}

/// One sample: `(member name, file to copy or inline bytes)`.
type Sample = Vec<(String, Member)>;

enum Member {
    File(PathBuf),
    Bytes(Vec<u8>),
}

/// `rel` as a `/`-separated member name; errors for names that are not UTF-8.
fn member_name(rel: &Path) -> Result<String> {
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    match parts {
        Some(p) => Ok(p.join("/")),
        None => bail!("{}: a member name must be UTF-8", rel.display()),
    }
}

/// `(key, rest)`: the name up to the first dot of its file name (see `spdl_sources::shards`).
fn key_of(name: &str) -> &str {
    let base = name.rfind('/').map_or(0, |i| i + 1);
    match name[base..].find('.') {
        Some(dot) if dot > 0 => &name[..base + dot],
        _ => name,
    }
}

fn plain_samples(src: &Path) -> Result<Vec<Sample>> {
    let list =
        walk_dir(src, &Extensions::any()).with_context(|| format!("listing {}", src.display()))?;
    let mut samples: Vec<Sample> = Vec::new();
    let mut last_key = String::new();
    for s in list.iter() {
        let rel = s.path.strip_prefix(src).unwrap_or(&s.path);
        let name = member_name(rel)?;
        let key = key_of(&name).to_owned();
        if key != last_key || samples.is_empty() {
            samples.push(Vec::new());
            last_key = key;
        }
        if let Some(sample) = samples.last_mut() {
            sample.push((name, Member::File(s.path.clone())));
        }
    }
    Ok(samples)
}

fn image_folder_samples(src: &Path) -> Result<Vec<Sample>> {
    let folder = ImageFolder::open(src, &Extensions::images(), false)
        .with_context(|| format!("reading {} as an ImageFolder", src.display()))?;
    folder
        .samples()
        .iter()
        .map(|s| {
            let rel = s.path.strip_prefix(src).unwrap_or(&s.path);
            let dir = member_name(rel.parent().unwrap_or(Path::new("")))?;
            let stem = rel.file_stem().and_then(|x| x.to_str()).unwrap_or("sample");
            let ext = rel
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("bin")
                .to_ascii_lowercase();
            // The key ends at the first dot of the file name: dots of the stem become `_`.
            let stem = stem.replace('.', "_");
            let key = if dir.is_empty() {
                stem
            } else {
                format!("{dir}/{stem}")
            };
            let label = s.label.unwrap_or(-1);
            Ok(vec![
                (format!("{key}.{ext}"), Member::File(s.path.clone())),
                (
                    format!("{key}.cls"),
                    Member::Bytes(label.to_string().into_bytes()),
                ),
            ])
        })
        .collect()
}

pub(crate) fn run(args: ShardArgs) -> Result<ExitCode> {
    if args.samples_per_shard == 0 {
        bail!("--samples-per-shard must be at least 1");
    }
    let samples = if args.image_folder {
        image_folder_samples(&args.src)?
    } else {
        plain_samples(&args.src)?
    };
    if samples.is_empty() {
        bail!("{}: no file to pack", args.src.display());
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut shards = 0usize;
    let mut bytes = 0u64;
    for chunk in samples.chunks(args.samples_per_shard) {
        let path = args.out.join(format!("{}-{shards:06}.tar", args.prefix));
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let mut w = TarWriter::new(std::io::BufWriter::new(file));
        for sample in chunk {
            for (name, member) in sample {
                let data = match member {
                    Member::File(p) => {
                        std::fs::read(p).with_context(|| format!("reading {}", p.display()))?
                    }
                    Member::Bytes(b) => b.clone(),
                };
                w.append(name, &data)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        bytes += w.bytes_written() + 1024;
        w.finish()
            .with_context(|| format!("writing {}", path.display()))?;
        shards += 1;
    }
    crate::emit(&format!(
        "{} samples in {shards} shards ({:.1} MB): {}/{}-{{000000..{:06}}}.tar",
        samples.len(),
        bytes as f64 / 1e6,
        args.out.display(),
        args.prefix,
        shards - 1
    ));
    Ok(ExitCode::SUCCESS)
}
