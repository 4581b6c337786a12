//! A loopback HTTP/1.1 server for the files of a folder, for the remote-shard tests
//! (`remote_shards.rs`, `stalled_shard.rs`, each through `#[path]`): `Range: bytes=N-` is
//! answered with 206, requests are counted per path (and ranged ones apart), and how each
//! body goes out is the test's: whole, cut short, or stalled. Also the check both tests make
//! of the one failure such a server causes ([`the_read_failure`]), and the fetcher both use
//! ([`quick_retries`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spdl_sources::shards::{ShardError, ShardErrorKind};
use spdl_sources::{FetchOptions, Fetcher, RetryPolicy};

/// Requests per path: `(all, ranged)`.
type Hits = Arc<Mutex<HashMap<String, (u32, u32)>>>;

/// How a body goes out after its headers: `(connection, path, range start, body, stop)`;
/// `Ok(false)` ends the connection. Setting `stop` makes the server answer no later request
/// (it is also set when the server is dropped).
type SendBody =
    dyn Fn(&mut TcpStream, &str, u64, &[u8], &AtomicBool) -> std::io::Result<bool> + Send + Sync;

/// The running server; dropping it stops it.
pub(crate) struct FolderServer {
    port: u16,
    hits: Hits,
    stop: Arc<AtomicBool>,
}

impl FolderServer {
    /// Serves the files of `dir`, each body sent by `send` (see [`SendBody`]).
    pub(crate) fn start(
        dir: PathBuf,
        send: impl Fn(&mut TcpStream, &str, u64, &[u8], &AtomicBool) -> std::io::Result<bool>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        let send: Arc<SendBody> = Arc::new(send);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits: Hits = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (hits.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                if s.load(Ordering::SeqCst) {
                    continue; // stopped: the connection is closed unanswered
                }
                let (h, s, dir, send) = (h.clone(), s.clone(), dir.clone(), send.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, &dir, &h, &s, &*send);
                });
            }
        });
        FolderServer { port, hits, stop }
    }

    /// The URL of `name` in the folder.
    pub(crate) fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    /// `(requests, ranged requests)` for `/name`.
    pub(crate) fn hits(&self, name: &str) -> (u32, u32) {
        let hits = self.hits.lock().unwrap();
        hits.get(&format!("/{name}")).copied().unwrap_or_default()
    }
}

impl Drop for FolderServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(
    mut conn: TcpStream,
    dir: &Path,
    hits: &Mutex<HashMap<String, (u32, u32)>>,
    stop: &AtomicBool,
    send: &SendBody,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || stop.load(Ordering::SeqCst) {
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
        let Ok(data) = std::fs::read(dir.join(path.trim_start_matches('/'))) else {
            conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        };
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
        if !send(&mut conn, &path, start, body, stop)? {
            return Ok(());
        }
        conn.flush()?;
    }
}

/// The one error among `items`, checked: a read failure of sample `k/00008` in
/// `.../train-0001.tar`, named in its message, and `failures` (the epoch's count) is 1.
pub(crate) fn the_read_failure<T: std::fmt::Debug>(
    items: &[Result<T, ShardError>],
    failures: u64,
) -> &ShardError {
    let errors: Vec<_> = items.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(failures, 1);
    let e = errors[0];
    assert_eq!(e.kind, ShardErrorKind::Read, "{e}");
    assert_eq!(e.key.as_deref(), Some("k/00008"));
    assert!(e.shard.ends_with("/train-0001.tar"), "{e}");
    assert!(e.to_string().contains("sample k/00008"), "{e}");
    e
}

/// A fetcher of `options` with quick retries (2, 10 ms then 40 ms at most apart) and 20 s
/// timeouts, for servers on the loopback.
pub(crate) fn quick_retries(options: FetchOptions) -> Fetcher {
    Fetcher::new(FetchOptions {
        timeout: Duration::from_secs(20),
        total_timeout: Duration::from_secs(20),
        retry: RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(40),
            ..RetryPolicy::default()
        },
        ..options
    })
    .unwrap()
}
