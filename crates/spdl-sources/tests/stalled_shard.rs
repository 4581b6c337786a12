//! A remote shard whose server stops sending in the middle of the body (the connection stays
//! open, no byte comes): after the read (stall) timeout and the resumes by range that also
//! stall, it is one named failure, the samples before it are delivered, and the epoch goes on
//! with the next shards.

#[path = "common/tar_shards.rs"]
mod tar_shards;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spdl_sources::shards::{ShardErrorKind, ShardSource};
use spdl_sources::{DistInfo, FetchOptions, Fetcher, Remainder, RetryPolicy, SamplerOptions, Uri};
use tar_shards::write_tar_shards;

/// Requests per path: `(all, ranged)`.
type Hits = Arc<Mutex<HashMap<String, (u32, u32)>>>;

/// A loopback HTTP server for a folder's files that stalls `/stall_name` at byte `stall_at`:
/// every answer for it sends its headers and the body up to that byte, then nothing more
/// (the connection stays open until the server is dropped).
struct StallingServer {
    port: u16,
    hits: Hits,
    stop: Arc<AtomicBool>,
}

impl StallingServer {
    fn start(dir: PathBuf, stall_name: &str, stall_at: u64) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits: Hits = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s, stall) = (hits.clone(), stop.clone(), format!("/{stall_name}"));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (h, s, dir, stall) = (h.clone(), s.clone(), dir.clone(), stall.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, &dir, &h, &s, (&stall, stall_at));
                });
            }
        });
        StallingServer { port, hits, stop }
    }

    fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    fn hits(&self, name: &str) -> (u32, u32) {
        let hits = self.hits.lock().unwrap();
        hits.get(&format!("/{name}")).copied().unwrap_or_default()
    }
}

impl Drop for StallingServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(
    mut conn: TcpStream,
    dir: &Path,
    hits: &Mutex<HashMap<String, (u32, u32)>>,
    stop: &AtomicBool,
    (stall, stall_at): (&str, u64),
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let mut start = 0u64;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 || h == "\r\n" {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("range: bytes=") {
                start = v.trim().trim_end_matches('-').parse().unwrap_or(0);
            }
        }
        {
            let mut hits = hits.lock().unwrap();
            let e = hits.entry(path.clone()).or_default();
            e.0 += 1;
            e.1 += u32::from(start > 0);
        }
        let data = std::fs::read(dir.join(path.trim_start_matches('/')))?;
        let body = &data[(start as usize).min(data.len())..];
        let status = if start > 0 {
            "206 Partial Content"
        } else {
            "200 OK"
        };
        conn.write_all(
            format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/x-tar\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )?;
        if path == stall {
            let keep = stall_at.saturating_sub(start).min(body.len() as u64) as usize;
            conn.write_all(&body[..keep])?;
            conn.flush()?;
            // Stalled: the connection stays open and silent.
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
            return Ok(());
        }
        conn.write_all(body)?;
        conn.flush()?;
    }
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
    let server = StallingServer::start(dir.path().to_path_buf(), "train-0001.tar", at + 1500);
    let shards: Vec<Uri> = (0..4)
        .map(|s| Uri::parse(&server.url(&format!("train-{s:04}.tar"))).unwrap())
        .collect();
    let fetcher = Fetcher::new(FetchOptions {
        timeout: Duration::from_secs(20),
        total_timeout: Duration::from_secs(20),
        stall_timeout: Duration::from_millis(300),
        retry: RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(40),
            ..RetryPolicy::default()
        },
        ..FetchOptions::default()
    })
    .unwrap();
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
    let errors: Vec<_> = items.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(it.failures(), 1);
    let e = errors[0];
    assert_eq!(e.kind, ShardErrorKind::Read, "{e}");
    assert_eq!(e.key.as_deref(), Some("k/00008"));
    assert!(e.shard.ends_with("/train-0001.tar"), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("stall timeout"), "{msg}");
    assert!(msg.contains("sample k/00008"), "{msg}");
    // The first request, then one resume by range per retry, each stalled at the same byte.
    assert_eq!(server.hits("train-0001.tar"), (3, 2));
    for s in [0, 2, 3] {
        assert_eq!(server.hits(&format!("train-{s:04}.tar")), (1, 0));
    }
}
