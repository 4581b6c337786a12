//! Servers for the remote-source tests, all on 127.0.0.1: a fault-injecting HTTP server
//! (std::net, one thread per connection) and the s3s-fs S3-compatible server (a child process).

#![allow(dead_code, unreachable_pub)]

pub mod http_request;

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The 758-byte JPEG of hard case 19 (17x23 RGB).
pub const PAYLOAD: &[u8] = include_bytes!("../fixtures/19-http-503-slow-server/payload.jpg");

/// A loopback HTTP server that misbehaves on purpose, as `serve_flaky.py` of hard case 19:
/// `/ok.jpg`, `/flaky.jpg` (503 + `Retry-After: 1` twice), `/always503.jpg`, `/slow.jpg` (10
/// chunks 0.45 s apart), `/stall.jpg` (100 bytes then silence), `/short.jpg` (500 bytes fewer
/// than its Content-Length), `/404.jpg`, `/html.jpg`; `/files/NAME` serves `files_dir/NAME`
/// after `latency`. Hits are counted per path.
pub struct FaultServer {
    pub port: u16,
    hits: Arc<Mutex<HashMap<String, u32>>>,
    stop: Arc<AtomicBool>,
}

impl FaultServer {
    pub fn start(files_dir: Option<PathBuf>, latency: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (hits.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (h, s, dir) = (h.clone(), s.clone(), files_dir.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, &h, &s, dir.as_deref(), latency);
                });
            }
        });
        Self { port, hits, stop }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn hits(&self, path: &str) -> u32 {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(
    mut conn: TcpStream,
    hits: &Mutex<HashMap<String, u32>>,
    stop: &AtomicBool,
    files: Option<&Path>,
    latency: Duration,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    while let Some(target) = http_request::next_target(&mut reader)? {
        let path = target.split('?').next().unwrap_or("/").to_owned();
        let n = {
            let mut hits = hits.lock().unwrap();
            let n = hits.entry(path.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let head = |status: &str, ctype: &str, len: usize, extra: &str| {
            format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len}\r\n{extra}\r\n"
            )
        };
        match path.as_str() {
            "/ok.jpg" => {
                conn.write_all(head("200 OK", "image/jpeg", PAYLOAD.len(), "").as_bytes())?;
                conn.write_all(PAYLOAD)?;
            }
            "/flaky.jpg" if n <= 2 => {
                conn.write_all(
                    head(
                        "503 Service Unavailable",
                        "text/plain",
                        0,
                        "Retry-After: 1\r\n",
                    )
                    .as_bytes(),
                )?;
            }
            "/flaky.jpg" => {
                conn.write_all(head("200 OK", "image/jpeg", PAYLOAD.len(), "").as_bytes())?;
                conn.write_all(PAYLOAD)?;
            }
            "/always503.jpg" => {
                conn.write_all(head("503 Service Unavailable", "text/plain", 0, "").as_bytes())?;
            }
            "/slow.jpg" => {
                conn.write_all(head("200 OK", "image/jpeg", PAYLOAD.len(), "").as_bytes())?;
                for chunk in PAYLOAD.chunks(PAYLOAD.len().div_ceil(10)) {
                    conn.write_all(chunk)?;
                    conn.flush()?;
                    std::thread::sleep(Duration::from_millis(450));
                }
            }
            "/stall.jpg" => {
                conn.write_all(head("200 OK", "image/jpeg", PAYLOAD.len(), "").as_bytes())?;
                conn.write_all(&PAYLOAD[..100])?;
                conn.flush()?;
                let until = Instant::now() + Duration::from_secs(60);
                while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                }
                return Ok(());
            }
            "/short.jpg" => {
                conn.write_all(head("200 OK", "image/jpeg", PAYLOAD.len() + 500, "").as_bytes())?;
                conn.write_all(PAYLOAD)?;
                conn.flush()?;
                return Ok(()); // close early
            }
            "/html.jpg" => {
                let page = b"<html><body>Service temporarily unavailable</body></html>";
                conn.write_all(head("200 OK", "text/html", page.len(), "").as_bytes())?;
                conn.write_all(page)?;
            }
            p if p.starts_with("/files/") && files.is_some() => {
                std::thread::sleep(latency);
                match std::fs::read(files.unwrap().join(&p["/files/".len()..])) {
                    Ok(data) => {
                        conn.write_all(head("200 OK", "image/jpeg", data.len(), "").as_bytes())?;
                        conn.write_all(&data)?;
                    }
                    Err(_) => {
                        conn.write_all(head("404 Not Found", "text/plain", 0, "").as_bytes())?
                    }
                }
            }
            _ => conn
                .write_all(head("404 Not Found", "text/plain", 9, "").as_bytes())
                .and_then(|_| conn.write_all(b"not found"))?,
        }
        conn.flush()?;
    }
    Ok(())
}

/// The exact command that installs the S3 server these tests start.
pub const S3S_INSTALL: &str =
    "cargo install s3s-fs@0.14.1 --features binary --locked --root \"$HOME/.cache/spdl-tools\"";

/// The s3s-fs binary: `$SPDL_S3S_FS`, `$HOME/.cache/spdl-tools/bin/s3s-fs`, or `s3s-fs` on
/// `PATH`. Panics with the install command when none is there.
pub fn s3s_fs_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("SPDL_S3S_FS").map(PathBuf::from) {
        if p.is_file() {
            return p;
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        let p = PathBuf::from(home).join(".cache/spdl-tools/bin/s3s-fs");
        if p.is_file() {
            return p;
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("s3s-fs");
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "the S3 tests need the local S3 server s3s-fs 0.14.1, which is not installed. \
         Install it once (about 4 minutes) with:\n    {S3S_INSTALL}\n\
         or run the tests through `cargo xtask test`, which installs it."
    );
}

pub const ACCESS_KEY: &str = "spdl-test-access";
pub const SECRET_KEY: &str = "spdl-test-secret-Zq8uX3";

/// A running s3s-fs on 127.0.0.1 serving `data_dir` (a bucket is a folder of it).
pub struct S3Server {
    pub port: u16,
    pub data_dir: PathBuf,
    child: Option<Child>,
}

impl S3Server {
    /// Starts s3s-fs on a free port and waits until it accepts connections.
    pub fn start(data_dir: &Path) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut s = Self {
            port,
            data_dir: data_dir.to_path_buf(),
            child: None,
        };
        s.restart();
        s
    }

    /// Starts (again) on the same port and data directory.
    pub fn restart(&mut self) {
        let child = Command::new(s3s_fs_binary())
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(&self.data_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start s3s-fs");
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < until,
                "s3s-fs did not start on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// S3 options for this server: fixed test credentials, nothing from the environment.
    pub fn options(&self) -> spdl_sources::S3Options {
        spdl_sources::S3Options {
            endpoint: Some(self.endpoint()),
            region: Some("us-east-1".into()),
            path_style: true,
            access_key_id: Some(ACCESS_KEY.into()),
            secret_access_key: Some(SECRET_KEY.into()),
            load_config: false,
            ..Default::default()
        }
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
