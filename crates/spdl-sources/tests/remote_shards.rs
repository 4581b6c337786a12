//! WebDataset tar shards from a loopback HTTP server (a manifest, brace URLs) and from the
//! s3s-fs S3 server (a prefix, brace URIs): byte-exact samples, one request per shard, resume
//! by a range request, and a server killed mid-shard as one named, counted failure with the
//! epoch going on.

mod common;
#[path = "common/folder_server.rs"]
mod folder_server;
#[path = "common/tar_shards.rs"]
mod tar_shards;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use common::{sha256_hex, S3Server};
use folder_server::{quick_retries, the_read_failure, FolderServer};
use spdl_sources::shards::{
    list_shards_with, EpochSamples, ShardErrorKind, ShardSample, ShardSource, ShardState,
};
use spdl_sources::{DistInfo, FetchOptions, Fetcher, Remainder, SamplerOptions, Uri};
use tar_shards::write_tar_shards;

/// Shard `s` holds samples `s*per .. (s+1)*per`: `k/{i:05}.jpg` (`size` bytes derived from
/// `i`) and `k/{i:05}.cls`. Returns the paths.
fn write_shards(dir: &Path, n: usize, per: usize, size: usize) -> Vec<PathBuf> {
    write_tar_shards(dir, n, per, |i| {
        vec![
            (format!("k/{i:05}.jpg"), payload(i, size)),
            (format!("k/{i:05}.cls"), (i % 7).to_string().into()),
        ]
    })
}

fn payload(i: usize, size: usize) -> Vec<u8> {
    (0..size)
        .map(|j| {
            (j as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(i as u32) as u8
        })
        .collect()
}

/// `(key, sha256 of jpg, cls)` of a sample.
type Digest = (String, String, Vec<u8>);

fn digest(s: &ShardSample) -> Digest {
    (
        s.key.clone(),
        sha256_hex(s.get("jpg").unwrap()),
        s.get("cls").unwrap().to_vec(),
    )
}

/// The digests of `samples`, every one read without error.
fn digests(samples: EpochSamples) -> Vec<Digest> {
    samples.map(|s| digest(&s.unwrap())).collect()
}

/// Epoch `epoch` of `src` with its first `n` samples read (without error).
fn after(src: &ShardSource, epoch: u64, n: usize) -> EpochSamples {
    let mut it = src.epoch(epoch);
    for _ in 0..n {
        it.next().unwrap().unwrap();
    }
    it
}

fn in_order() -> SamplerOptions {
    SamplerOptions {
        shuffle: false,
        seed: 0,
        remainder: Remainder::Drop,
    }
}

/// The samples of `paths` read from local disk, in order.
fn local_digests(paths: &[PathBuf]) -> Vec<Digest> {
    let src = ShardSource::new(
        paths.iter().cloned().map(Uri::Local).collect(),
        DistInfo::single(),
        in_order(),
    )
    .unwrap();
    digests(src.epoch(0))
}

/// A loopback HTTP server for the files of `dir` (see `FolderServer`) with a kill switch:
/// after `die_after` bytes of body in total it stops in the middle of the response and drops
/// every later connection.
fn shard_server(dir: PathBuf, die_after: Option<u64>) -> FolderServer {
    let sent = AtomicU64::new(0);
    FolderServer::start(dir, move |conn, _path, _start, body, stop| {
        let before = sent.fetch_add(body.len() as u64, Ordering::SeqCst);
        match die_after {
            Some(limit) if before + body.len() as u64 > limit => {
                let keep = limit.saturating_sub(before) as usize;
                conn.write_all(&body[..keep])?;
                conn.flush()?;
                stop.store(true, Ordering::SeqCst);
                Ok(false) // the connection closes mid-body
            }
            _ => conn.write_all(body).map(|()| true),
        }
    })
}

#[test]
fn http_shards_from_a_manifest_and_braces_byte_exact_with_resume_by_range() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), 4, 6, 3000);
    std::fs::write(
        dir.path().join("shards.txt"),
        "train-0000.tar\ntrain-0001.tar\ntrain-0002.tar\ntrain-0003.tar\n",
    )
    .unwrap();
    let server = shard_server(dir.path().to_path_buf(), None);
    let fetcher = quick_retries(FetchOptions::default());
    let listed = list_shards_with(&server.url("shards.txt"), &fetcher).unwrap();
    let braces = list_shards_with(&server.url("train-{0000..0003}.tar"), &fetcher).unwrap();
    assert_eq!(listed, braces);
    assert_eq!(
        listed[3],
        Uri::parse(&server.url("train-0003.tar")).unwrap()
    );

    let src = ShardSource::new(listed, DistInfo::single(), in_order())
        .unwrap()
        .with_fetcher(fetcher);
    let all: Vec<ShardSample> = src.epoch(0).map(Result::unwrap).collect();
    let got: Vec<_> = all.iter().map(digest).collect();
    assert_eq!(got, local_digests(&paths));
    // One sequential request per shard, no range.
    for s in 0..4 {
        assert_eq!(server.hits(&format!("train-{s:04}.tar")), (1, 0));
    }

    // Resume after sample 8 (inside shard 1): one ranged request for shard 1, none from 0.
    let state = after(&src, 0, 9).state();
    assert_eq!(state, all[8].state(0));
    let rest = digests(src.resume(&state).unwrap());
    assert_eq!(rest, got[9..]);
    assert_eq!(server.hits("train-0001.tar").1, 1);
    assert_eq!(server.hits("train-0000.tar"), (2, 0));
}

#[test]
fn http_server_killed_mid_shard_fails_its_samples_named_and_the_epoch_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_shards(&dir.path().join("a"), 2, 6, 3000);
    let b = write_shards(&dir.path().join("b"), 2, 6, 3000);
    // Server A dies inside sample 8 (the third of its second shard).
    let shard1 = std::fs::read(&a[1]).unwrap();
    let first = std::fs::metadata(&a[0]).unwrap().len();
    let at = shard1
        .windows(11)
        .position(|w| w == b"k/00008.jpg")
        .unwrap() as u64;
    let server_a = shard_server(dir.path().join("a"), Some(first + at + 1500));
    let server_b = shard_server(dir.path().join("b"), None);
    let shards = vec![
        Uri::parse(&server_a.url("train-0000.tar")).unwrap(),
        Uri::parse(&server_a.url("train-0001.tar")).unwrap(),
        Uri::parse(&server_b.url("train-0000.tar")).unwrap(),
        Uri::parse(&server_b.url("train-0001.tar")).unwrap(),
    ];
    // No read-ahead: the server's byte budget counts bodies in the order they are requested.
    let src = ShardSource::new(shards, DistInfo::single(), in_order())
        .unwrap()
        .with_fetcher(quick_retries(FetchOptions::default()))
        .with_readahead(0);
    let mut it = src.epoch(0);
    let items: Vec<_> = it.by_ref().collect();
    let ok: Vec<String> = items
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|s| s.key.clone()))
        .collect();
    let mut want: Vec<String> = (0..8).map(|i| format!("k/{i:05}")).collect();
    want.extend((0..12).map(|i| format!("k/{i:05}"))); // server B's shards, same keys
    assert_eq!(ok, want);
    the_read_failure(&items, it.failures());
    // The rest of the epoch is byte-exact.
    let b_digests = local_digests(&b);
    let got_b: Vec<_> = items[items.len() - 12..]
        .iter()
        .map(|r| digest(r.as_ref().unwrap()))
        .collect();
    assert_eq!(got_b, b_digests);
}

#[test]
fn s3_shards_from_a_prefix_and_braces_byte_exact_with_a_shuffle_buffer_and_resume() {
    let data = tempfile::tempdir().unwrap();
    let paths = write_shards(&data.path().join("bucket/shards"), 4, 5, 2000);
    std::fs::write(data.path().join("bucket/shards/README.md"), "not a shard").unwrap();
    let server = S3Server::start(data.path());
    let fetcher = quick_retries(FetchOptions {
        s3: server.options(),
        ..FetchOptions::default()
    });
    let listed = list_shards_with("s3://bucket/shards/", &fetcher).unwrap();
    let braces = list_shards_with("s3://bucket/shards/train-{0000..0003}.tar", &fetcher).unwrap();
    assert_eq!(listed, braces);
    assert_eq!(listed.len(), 4);

    let src = ShardSource::new(listed.clone(), DistInfo::single(), in_order())
        .unwrap()
        .with_fetcher(fetcher.clone());
    let got = digests(src.epoch(0));
    assert_eq!(got, local_digests(&paths));

    // Shuffled shards and a buffer of 7: the same samples, in another order; a resume from
    // the state after 9 samples (JSON round trip) gives exactly the rest.
    let shuffled = ShardSource::new(
        listed,
        DistInfo::single(),
        SamplerOptions {
            shuffle: true,
            seed: 5,
            remainder: Remainder::Drop,
        },
    )
    .unwrap()
    .with_fetcher(fetcher)
    .with_shuffle_buffer(7);
    let full = digests(shuffled.epoch(1));
    let (mut a, mut b) = (full.clone(), got.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert_ne!(full, got);
    let state: ShardState =
        serde_json::from_str(&serde_json::to_string(&after(&shuffled, 1, 9).state()).unwrap())
            .unwrap();
    assert_eq!(state.draws, 9);
    assert_eq!(state.buffered.len(), 6); // filled to 7, one drawn
    let rest = digests(shuffled.resume(&state).unwrap());
    assert_eq!(rest, full[9..]);
}

#[test]
fn s3_server_killed_mid_shard_fails_its_samples_named_and_the_epoch_goes_on() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("bucket/big");
    // Shard 0: 40 samples of 1 MiB, more than the loopback socket buffers hold, so killing
    // the server cuts the stream; shard 1: small.
    let big = write_shards(&dir, 1, 40, 1 << 20);
    let small_dir = data.path().join("bucket/small");
    write_shards(&small_dir, 1, 3, 100);
    std::fs::rename(small_dir.join("train-0000.tar"), dir.join("train-0001.tar")).unwrap();
    let mut server = S3Server::start(data.path());
    let fetcher = quick_retries(FetchOptions {
        s3: server.options(),
        ..FetchOptions::default()
    });
    let shards = list_shards_with("s3://bucket/big/", &fetcher).unwrap();
    // No read-ahead: shard 1 is opened after the restart, not raced against the kill.
    let src = ShardSource::new(shards, DistInfo::single(), in_order())
        .unwrap()
        .with_fetcher(fetcher)
        .with_readahead(0);
    let expected = local_digests(&big);
    let mut it = src.epoch(0);
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    for item in it.by_ref() {
        match item {
            Ok(s) => {
                if s.shard == 0 {
                    // Every sample handed on is whole.
                    assert_eq!(digest(&s), expected[ok.len()]);
                }
                ok.push(s.key.clone());
                if ok.len() == 2 {
                    server.kill();
                }
            }
            Err(e) => {
                errors.push(e);
                server.restart(); // the next shard is read from a live server
            }
        }
    }
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(it.failures(), 1);
    let e = &errors[0];
    assert_eq!(e.kind, ShardErrorKind::Read, "{e}");
    assert!(e.shard.ends_with("big/train-0000.tar"), "{e}");
    let lost = e.key.clone().expect("the failure names the sample");
    let first_lost: usize = lost[2..].parse().unwrap();
    assert!((2..40).contains(&first_lost), "{e}");
    assert_eq!(ok.len(), first_lost + 3, "{ok:?}");
    assert_eq!(&ok[first_lost..], ["k/00000", "k/00001", "k/00002"]);
}

/// An item as `(key, fields)`, or the failure's text.
type Plain = Result<(String, Vec<(String, Vec<u8>)>), String>;

fn plain(items: EpochSamples) -> Vec<Plain> {
    items
        .map(|i| i.map(|s| (s.key, s.fields)).map_err(|e| e.kind.to_string()))
        .collect()
}

/// Writes case 38 (`links.tar`) and `far.tar` (a hard link further back than the samples
/// held, read again from the shard's start; a dangling symlink) into `dir`.
fn write_link_shards(dir: &Path) -> [PathBuf; 2] {
    std::fs::create_dir_all(dir).unwrap();
    // Case 38 of the shared hard cases (tests/fixtures/38-tar-links-dirs-empty/README.md).
    let case = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/38-tar-links-dirs-empty/links.tar");
    std::fs::copy(case, dir.join("links.tar")).unwrap();
    let mut w = spdl_tar::TarWriter::new(std::fs::File::create(dir.join("far.tar")).unwrap());
    w.append("t.jpg", b"target").unwrap();
    for i in 0..spdl_sources::shards::REGROUP_WINDOW + 4 {
        w.append(&format!("s{i:02}.jpg"), &payload(i, 700)).unwrap();
    }
    w.append_link("h.jpg", "t.jpg", true).unwrap();
    w.append_link("y.jpg", "missing.jpg", false).unwrap();
    w.finish().unwrap();
    [dir.join("links.tar"), dir.join("far.tar")]
}

/// The remote shards `uris` (of [`write_link_shards`]'s `local` files) give exactly the local
/// items, and so does a resume after each sample of `far.tar`.
fn links_as_local(local: &[PathBuf], uris: Vec<Uri>, fetcher: Fetcher) {
    let local = ShardSource::new(
        local.iter().cloned().map(Uri::Local).collect(),
        DistInfo::single(),
        in_order(),
    )
    .unwrap();
    let remote = ShardSource::new(uris, DistInfo::single(), in_order())
        .unwrap()
        .with_fetcher(fetcher);
    let want = plain(local.epoch(0));
    assert_eq!(
        want.len(),
        6 + 1 + spdl_sources::shards::REGROUP_WINDOW + 4 + 2
    );
    assert_eq!(want.iter().filter(|i| i.is_err()).count(), 1, "{want:?}");
    let h = want.iter().flatten().find(|(k, _)| k == "h").unwrap();
    assert_eq!(h.1, [("jpg".to_owned(), b"target".to_vec())]);
    assert_eq!(plain(remote.epoch(0)), want);
    // Resumed by a range request after each sample of far.tar: the same rest, links resolved.
    for k in 6..want.len() {
        let state = after(&remote, 0, k).state();
        assert_eq!(
            plain(remote.resume(&state).unwrap()),
            want[k..],
            "after {k}"
        );
    }
}

#[test]
fn http_shards_resolve_links_and_account_for_every_sample_as_local_ones() {
    let dir = tempfile::tempdir().unwrap();
    let local = write_link_shards(dir.path());
    let server = shard_server(dir.path().to_path_buf(), None);
    let uris = ["links.tar", "far.tar"]
        .iter()
        .map(|n| Uri::parse(&server.url(n)).unwrap())
        .collect();
    links_as_local(&local, uris, quick_retries(FetchOptions::default()));
}

#[test]
fn s3_shards_resolve_links_and_account_for_every_sample_as_local_ones() {
    let data = tempfile::tempdir().unwrap();
    let local = write_link_shards(&data.path().join("bucket/links"));
    let server = S3Server::start(data.path());
    let fetcher = quick_retries(FetchOptions {
        s3: server.options(),
        ..FetchOptions::default()
    });
    let uris = list_shards_with("s3://bucket/links/{links,far}.tar", &fetcher).unwrap();
    links_as_local(&local, uris, fetcher);
}

/// A missing S3 shard, opened ahead of its turn, is one `Open` failure naming it (the GET is
/// answered when the shard is opened, not at its first read), between the samples of the
/// shards around it; a resume at the very end of a shard (S3 answers 416) reads nothing more
/// of it and goes on with no failure, as over HTTP.
#[test]
fn s3_missing_shard_opened_ahead_is_one_open_failure_and_a_resume_at_the_end_reads_nothing() {
    let data = tempfile::tempdir().unwrap();
    let paths = write_shards(&data.path().join("bucket/gap"), 3, 4, 300);
    std::fs::remove_file(&paths[1]).unwrap();
    let server = S3Server::start(data.path());
    let fetcher = quick_retries(FetchOptions {
        s3: server.options(),
        ..FetchOptions::default()
    });
    let shards = list_shards_with("s3://bucket/gap/train-{0000..0002}.tar", &fetcher).unwrap();
    assert_eq!(shards.len(), 3);
    let src = ShardSource::new(shards, DistInfo::single(), in_order())
        .unwrap()
        .with_fetcher(fetcher)
        .with_readahead(2);
    let mut it = src.epoch(0);
    let items: Vec<_> = it.by_ref().collect();
    assert_eq!(it.failures(), 1);
    assert_eq!(items.len(), 4 + 1 + 4, "{items:?}");
    let e = items[4].as_ref().unwrap_err();
    assert_eq!(e.kind, ShardErrorKind::Open, "{e}");
    assert!(e.shard.ends_with("gap/train-0001.tar"), "{e}");
    assert!(e.reason.contains("404"), "{e}");
    let keys: Vec<_> = items.iter().flatten().map(|s| s.key.clone()).collect();
    assert_eq!(
        keys,
        ["k/00000", "k/00001", "k/00002", "k/00003", "k/00008", "k/00009", "k/00010", "k/00011"]
    );

    let end = std::fs::metadata(&paths[2]).unwrap().len();
    let state = ShardState {
        epoch: 0,
        shard: 2,
        offset: end,
        skip: 0,
        draws: 0,
        buffered: Vec::new(),
        failures: 1,
    };
    let mut rest = src.resume(&state).unwrap();
    assert!(rest.next().is_none());
    assert_eq!(rest.failures(), 1);
}
