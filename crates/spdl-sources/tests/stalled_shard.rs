//! A remote shard whose server stops sending in the middle of the body (the connection stays
//! open, no byte comes): after the read (stall) timeout and the resumes by range that also
//! stall, it is one named failure, the samples before it are delivered, and the epoch goes on
//! with the next shards.

#[path = "common/folder_server.rs"]
mod folder_server;
#[path = "common/tar_shards.rs"]
mod tar_shards;

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use folder_server::{quick_retries, the_read_failure, FolderServer};
use spdl_sources::shards::ShardSource;
use spdl_sources::{DistInfo, FetchOptions, Remainder, SamplerOptions, Uri};
use tar_shards::write_tar_shards;

/// A loopback HTTP server for the files of `dir` (see `FolderServer`) that stalls
/// `/stall_name` at byte `stall_at`: every answer for it sends its headers and the body up to
/// that byte, then nothing more (the connection stays open until the server is dropped).
fn stalling_server(dir: PathBuf, stall_name: &str, stall_at: u64) -> FolderServer {
    let stall = format!("/{stall_name}");
    FolderServer::start(dir, move |conn, path, start, body, stop| {
        if path != stall {
            return conn.write_all(body).map(|()| true);
        }
        let keep = stall_at.saturating_sub(start).min(body.len() as u64) as usize;
        conn.write_all(&body[..keep])?;
        conn.flush()?;
        // Stalled: the connection stays open and silent.
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(false)
    })
}

#[test]
fn a_stalled_remote_shard_is_one_named_failure_after_the_read_timeout_and_the_epoch_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    // 4 shards of 6 samples (`k/00000` ..): a `jpg` of 3,000 bytes and a `cls` each.
    let paths = write_tar_shards(dir.path(), 4, 6, |i| {
        vec![
            (format!("k/{i:05}.jpg"), vec![i as u8; 3000]),
            (format!("k/{i:05}.cls"), (i % 7).to_string().into()),
        ]
    });
    // Shard 1 stalls 1,500 bytes into sample 8's jpg (its third sample).
    let shard1 = std::fs::read(&paths[1]).unwrap();
    let at = shard1
        .windows(11)
        .position(|w| w == b"k/00008.jpg")
        .unwrap() as u64;
    let server = stalling_server(dir.path().to_path_buf(), "train-0001.tar", at + 1500);
    let shards: Vec<Uri> = (0..4)
        .map(|s| Uri::parse(&server.url(&format!("train-{s:04}.tar"))).unwrap())
        .collect();
    let fetcher = quick_retries(FetchOptions {
        stall_timeout: Duration::from_millis(300),
        ..FetchOptions::default()
    });
    let options = SamplerOptions {
        shuffle: false,
        seed: 0,
        remainder: Remainder::Drop,
    };
    // The default read-ahead: the shards after the stalled one are opened while it stalls.
    let src = ShardSource::new(shards, DistInfo::single(), options)
        .unwrap()
        .with_fetcher(fetcher);
    let mut it = src.epoch(0);
    let items: Vec<_> = it.by_ref().collect();

    let ok: Vec<(String, Vec<u8>)> = items
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|s| (s.key.clone(), s.get("jpg").unwrap().to_vec()))
        .collect();
    let want: Vec<usize> = (0..8).chain(12..24).collect();
    assert_eq!(
        ok.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        want.iter().map(|i| format!("k/{i:05}")).collect::<Vec<_>>()
    );
    for ((_, jpg), i) in ok.iter().zip(&want) {
        assert_eq!(jpg, &vec![*i as u8; 3000]);
    }
    let msg = the_read_failure(&items, it.failures()).to_string();
    assert!(msg.contains("stall timeout"), "{msg}");
    // The first request, then one resume by range per retry, each stalled at the same byte.
    assert_eq!(server.hits("train-0001.tar"), (3, 2));
    for s in [0, 2, 3] {
        assert_eq!(server.hits(&format!("train-{s:04}.tar")), (1, 0));
    }
}
