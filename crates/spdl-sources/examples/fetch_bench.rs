//! A file server on 127.0.0.1 that adds a fixed latency to every request, for measuring the
//! fetch stage against a "remote" corpus (not a timed test).
//!
//! ```text
//! cargo run --release -p spdl-sources --features source-http --example fetch_bench -- DIR [LATENCY_MS] [PORT]
//! ```
//! It serves every file of `DIR` (recursively) under `/files/...`, writes the manifest
//! `/manifest.txt` (one URL per image), prints its URL and serves until killed. Point the
//! main job at it, e.g.
//! `spdl load http://127.0.0.1:PORT/manifest.txt --read-concurrency 32` (spdl-cli built with
//! `--features spdl-sources/source-http`), and compare with `spdl load DIR`.
//!
//! HTTP/1.1 keep-alive, one thread per connection: latency is applied per request, so
//! throughput with `n` requests in flight is at most `n / latency`.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[path = "../tests/common/http_request.rs"]
mod http_request;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: fetch_bench DIR [LATENCY_MS] [PORT]")?,
    );
    let latency = Duration::from_millis(args.next().map_or(Ok(20), |v| v.parse())?);
    let port: u16 = args.next().map_or(Ok(0), |v| v.parse())?;
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    let port = listener.local_addr()?.port();

    let mut files = Vec::new();
    collect(&dir, &dir, &mut files)?;
    files.sort();
    let manifest: String = files
        .iter()
        .filter(|f| {
            let l = f.to_ascii_lowercase();
            [".jpg", ".jpeg", ".png", ".webp"]
                .iter()
                .any(|e| l.ends_with(e))
        })
        .map(|f| format!("http://127.0.0.1:{port}/files/{}\n", encode(f)))
        .collect();
    let manifest = Arc::new(manifest.into_bytes());
    println!("http://127.0.0.1:{port}/manifest.txt");
    println!(
        "serving {} files of {} with {} ms latency",
        files.len(),
        dir.display(),
        latency.as_millis()
    );
    let dir = Arc::new(dir);
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let (dir, manifest) = (dir.clone(), manifest.clone());
        std::thread::spawn(move || {
            let _ = serve(conn, &dir, &manifest, latency);
        });
    }
    Ok(())
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(root) {
            if let Some(rel) = rel.to_str() {
                out.push(rel.to_owned());
            }
        }
    }
    Ok(())
}

/// Percent-encodes everything but unreserved characters and `/`.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

fn serve(
    mut conn: TcpStream,
    dir: &Path,
    manifest: &[u8],
    latency: Duration,
) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let mut reader = BufReader::new(conn.try_clone()?);
    while let Some(path) = http_request::next_target(&mut reader)? {
        let path = path.as_str();
        std::thread::sleep(latency);
        let body = if path == "/manifest.txt" {
            Some(manifest.to_vec())
        } else if let Some(rel) = path.strip_prefix("/files/") {
            let rel = String::from_utf8(decode(rel)).unwrap_or_default();
            if rel.split('/').any(|s| s == "..") {
                None
            } else {
                std::fs::read(dir.join(rel)).ok()
            }
        } else {
            None
        };
        match body {
            Some(body) => {
                write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                )?;
                conn.write_all(&body)?;
            }
            None => conn.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n",
            )?,
        }
        conn.flush()?;
    }
    Ok(())
}
