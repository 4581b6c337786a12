//! Shard lists from what users type: WebDataset brace ranges (local, `http(s)://`, `s3://`),
//! a local folder, an HTTP or S3 manifest, an S3 prefix.

use std::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::fetch::Fetcher;
use crate::uri::Uri;

/// Expands WebDataset brace patterns: `{0000..0127}` (inclusive, zero padding kept from the
/// first bound) and `{a,b,c}`, several per pattern. Errors (`InvalidArgument`) for an
/// unclosed brace, a descending or non-numeric range, or more than a million names.
pub fn expand_braces(pattern: &str) -> Result<Vec<String>> {
    const MAX: usize = 1_000_000;
    let Some(open) = pattern.find('{') else {
        return Ok(vec![pattern.to_owned()]);
    };
    let invalid = |why: &str| Error::new(ErrorKind::InvalidArgument, format!("{pattern:?}: {why}"));
    let close = pattern[open..]
        .find('}')
        .map(|i| open + i)
        .ok_or_else(|| invalid("unclosed '{'"))?;
    let (head, body, tail) = (
        &pattern[..open],
        &pattern[open + 1..close],
        &pattern[close + 1..],
    );
    let choices: Vec<String> = if let Some((a, b)) = body.split_once("..") {
        let (lo, hi): (u64, u64) = match (a.parse(), b.parse()) {
            (Ok(lo), Ok(hi)) if lo <= hi => (lo, hi),
            _ => return Err(invalid("a range must be {LOW..HIGH} with LOW <= HIGH")),
        };
        if hi - lo >= MAX as u64 {
            return Err(invalid("the range names more than a million shards"));
        }
        (lo..=hi)
            .map(|i| format!("{i:0width$}", width = a.len()))
            .collect()
    } else {
        body.split(',').map(str::to_owned).collect()
    };
    // The first brace varies slowest, as in WebDataset.
    let rests = expand_braces(tail)?;
    let mut out = Vec::new();
    for c in &choices {
        for rest in &rests {
            out.push(format!("{head}{c}{rest}"));
            if out.len() > MAX {
                return Err(invalid("the pattern names more than a million shards"));
            }
        }
    }
    Ok(out)
}

/// The shards of a local `pattern`: a folder (its `*.tar` files, sorted by name) or a brace
/// pattern (see [`expand_braces`]) whose every name must be an existing file. For remote
/// patterns see [`list_shards_with`].
///
/// Errors: `NotFound` naming the first missing shard, `InvalidArgument` for a bad pattern or
/// a folder with no `.tar` file, I/O errors listing the folder.
pub fn list_shards(pattern: &str) -> Result<Vec<Uri>> {
    let as_path = Path::new(pattern);
    if as_path.is_dir() {
        let mut shards = Vec::new();
        let entries = std::fs::read_dir(as_path).map_err(|e| Error::io(e, as_path))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(e, as_path))?;
            let path = entry.path();
            if path.extension().is_some_and(|x| x == "tar") && path.is_file() {
                shards.push(path);
            }
        }
        shards.sort();
        if shards.is_empty() {
            return Err(
                Error::new(ErrorKind::InvalidArgument, "no .tar shard in the folder")
                    .with_path(as_path),
            );
        }
        return Ok(shards.into_iter().map(Uri::Local).collect());
    }
    let shards: Vec<Uri> = expand_braces(pattern)?
        .into_iter()
        .map(Uri::local)
        .collect();
    check_local(&shards)?;
    Ok(shards)
}

/// Every local shard of `shards` must be a file.
fn check_local(shards: &[Uri]) -> Result<()> {
    for s in shards {
        if let Some(p) = s.as_path() {
            if !p.is_file() {
                return Err(Error::new(ErrorKind::NotFound, "no such shard file").with_path(p));
            }
        }
    }
    Ok(())
}

/// The shards of any `pattern`, local or remote:
/// - a brace pattern (`s3://bucket/train-{0000..0127}.tar`, `https://host/s-{0..9}.tar`,
///   `data/train-{0000..0127}.tar`): the names it expands to, in order; local ones must exist,
///   remote ones are not asked for (a missing one fails when read, named);
/// - a single `.tar` URI: that shard;
/// - an `s3://bucket/prefix/` (see [`Fetcher::list`]): its `.tar` objects, in byte order;
/// - an `http(s)://` or `s3://` manifest (`.txt`, `.lst`, `.list`; any HTTP URL not ending in
///   `.tar`): one shard URI per line, relative lines against the manifest's location;
/// - a local folder or brace pattern: as [`list_shards`].
///
/// Errors: those of [`list_shards`] and [`Fetcher::list`] (each naming the pattern or URI);
/// `InvalidArgument` when a prefix holds no `.tar` object or a manifest no line.
pub fn list_shards_with(pattern: &str, fetcher: &Fetcher) -> Result<Vec<Uri>> {
    if !Uri::has_scheme(pattern.as_bytes()) || pattern.starts_with("file://") {
        let local = match Uri::parse(pattern)? {
            Uri::Local(p) => p,
            _ => return list_shards(pattern),
        };
        return list_shards(&local.to_string_lossy());
    }
    if pattern.contains('{') {
        let shards = expand_braces(pattern)?
            .iter()
            .map(|s| Uri::parse(s))
            .collect::<Result<Vec<_>>>()?;
        return Ok(shards);
    }
    let uri = Uri::parse(pattern)?;
    if pattern.ends_with(".tar") {
        return Ok(vec![uri]);
    }
    let prefix_listing = matches!(uri, Uri::S3 { .. }) && uri.names_prefix();
    let list = fetcher.list_blocking(&uri)?;
    let shards: Vec<Uri> = list
        .iter()
        .map(|s| s.location())
        .filter(|u| !prefix_listing || u.to_string().ends_with(".tar"))
        .collect();
    if shards.is_empty() {
        return Err(
            Error::new(ErrorKind::InvalidArgument, "no .tar shard there").with_uri(pattern),
        );
    }
    Ok(shards)
}
