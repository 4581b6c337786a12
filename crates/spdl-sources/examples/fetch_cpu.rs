//! The fetch stage's own CPU per object, by source: fetches every URI of each list file with
//! `CONC` requests in flight through one [`Fetcher`] (one runtime thread, as a fetch stage
//! runs beside the decode threads), and prints the process's CPU time (user + system,
//! `getrusage`) per object and the wall time of each pass. The lists take turns within each
//! round (`ROUNDS` of them), so that a shared machine's drift falls on all of them alike; the
//! last line gives each list's median. Not a timed test.
//!
//! ```text
//! cargo run --release -p spdl-sources --features source-http,source-s3 --example fetch_cpu -- CONC ROUNDS LIST...
//! ```
//! A list holds one URI a line (`s3://bucket/key`, `http://…`, a local path); a list named
//! `anonymous:PATH` is fetched with unsigned S3 requests ([`S3Options::anonymous`]), which
//! shows what signing costs against a server that does not check signatures. For S3 set
//! `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_REGION`, e.g.
//! against the bench's `file_server PORT ROOT` (benches/src/bin/file_server.rs), which serves
//! `ROOT/BUCKET/KEY` both as `http://127.0.0.1:PORT/BUCKET/KEY` and as the S3 object
//! `s3://BUCKET/KEY` (path style).

use std::time::Instant;

use futures_util::StreamExt as _;
use spdl_sources::{FetchOptions, Fetcher, S3Options, Uri};

/// User + system CPU seconds of this process so far (every thread, living or ended).
fn cpu_seconds() -> f64 {
    // SAFETY: `rusage` is plain integers, for which all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given, which lives past the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [conc, rounds, lists @ ..] = args.as_slice() else {
        return Err("usage: fetch_cpu CONC ROUNDS LIST...".into());
    };
    let (conc, rounds): (usize, usize) = (conc.parse()?, rounds.parse()?);
    let mut sets = Vec::new();
    for list in lists {
        let path = list.strip_prefix("anonymous:").unwrap_or(list);
        let uris = std::fs::read_to_string(path)?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(Uri::parse)
            .collect::<Result<Vec<_>, _>>()?;
        sets.push((list.clone(), uris));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let signed = Fetcher::new(FetchOptions::default())?;
    let anonymous = Fetcher::new(FetchOptions {
        s3: S3Options {
            anonymous: true,
            ..S3Options::default()
        },
        ..FetchOptions::default()
    })?;
    let mut per_object: Vec<Vec<f64>> = vec![Vec::new(); sets.len()];
    rt.block_on(async {
        // One pass of each list first, not counted: connections, credentials, page cache.
        for round in 0..=rounds {
            for (i, (name, uris)) in sets.iter().enumerate() {
                let fetcher = if name.starts_with("anonymous:") {
                    &anonymous
                } else {
                    &signed
                };
                let (c0, t0) = (cpu_seconds(), Instant::now());
                let bytes: usize = futures_util::stream::iter(uris)
                    .map(|u| {
                        let f = fetcher.clone();
                        async move { f.fetch(u).await.map(|b| b.len()) }
                    })
                    .buffer_unordered(conc)
                    .fold(Ok(0), |acc: spdl_sources::Result<usize>, r| async move {
                        Ok(acc? + r?)
                    })
                    .await?;
                let us = (cpu_seconds() - c0) * 1e6 / uris.len() as f64;
                println!(
                    "round {round} {name}: {} objects, {bytes} bytes, {:.3} s, {us:.1} us CPU/object{}",
                    uris.len(),
                    t0.elapsed().as_secs_f64(),
                    if round == 0 { " (warm-up)" } else { "" }
                );
                if round > 0 {
                    per_object[i].push(us);
                }
            }
        }
        Ok::<_, spdl_sources::Error>(())
    })?;
    for ((name, _), mut v) in sets.iter().zip(per_object) {
        v.sort_by(f64::total_cmp);
        if let Some(m) = v.get(v.len() / 2) {
            println!(
                "median {name}: {m:.1} us CPU/object over {} rounds",
                v.len()
            );
        }
    }
    Ok(())
}
