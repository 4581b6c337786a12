//! `file-server PORT ROOT [DELAY_MS]`: a static HTTP/1.1 file server on 127.0.0.1 for the remote
//! benchmarks (`bench/shards_cache.py`): `GET` and `HEAD` of the files under `ROOT`, whole
//! (200) or by one `Range: bytes=A-[B]` (206), kept-alive connections, 404 for what is not a
//! file. It also answers as a minimal S3 endpoint (path style, no signature check), so the
//! bench can measure the loader's S3 client beside a server as lean as the HTTP one: an
//! object `GET /BUCKET/KEY` is the file `ROOT/BUCKET/KEY`, and `GET /BUCKET?list-type=2&prefix=P`
//! lists every file under it in one page (ListObjectsV2, no delimiter). One tokio thread and
//! one reusable buffer per connection, so that its CPU (reported by the bench from `/proc`)
//! stays small beside the loader's: a response's header and body (up to 256 KiB) go out in one
//! write, and whole small files (up to 1 MiB: single objects) are kept in memory after their
//! first read (the bench's files do not change while it runs), so that answering them costs a
//! socket write and no file system calls.
//!
//! With `DELAY_MS`, each request is answered that long after it arrived: the round trip of a
//! distant server, as `latency_proxy` adds it, without a second process copying every byte
//! on the cores the loader is measured on.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use std::io::{Read, Seek};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Duration, Instant};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (port, root, delay) = match args.as_slice() {
        [port, root] => (port, root, Duration::ZERO),
        [port, root, delay] => (
            port,
            root,
            Duration::from_secs_f64(delay.parse::<f64>().context("DELAY_MS")? / 1000.0),
        ),
        _ => anyhow::bail!("usage: file-server PORT ROOT [DELAY_MS]"),
    };
    let port: u16 = port.parse().context("PORT")?;
    let root = PathBuf::from(root);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let small = Small::default();
        loop {
            let (conn, _) = listener.accept().await?;
            let (root, small) = (root.clone(), small.clone());
            // Detached on purpose: a connection's task ends when it closes or the process does.
            #[allow(clippy::disallowed_methods)]
            tokio::spawn(async move {
                let _ = conn.set_nodelay(true);
                let _ = serve(conn, &root, delay, &small).await;
            });
        }
    })
}

/// Requests of one connection, answered in turn (each `delay` after it arrived) until the
/// client closes it.
async fn serve(
    conn: TcpStream,
    root: &Path,
    delay: Duration,
    small: &Small,
) -> std::io::Result<()> {
    let (r, mut w) = conn.into_split();
    let mut r = BufReader::new(r);
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let due = Instant::now() + delay;
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
        let (method, target) = (method.to_owned(), target.to_owned());
        let mut range: Option<(u64, Option<u64>)> = None;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).await? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((name, value)) = h.split_once(':') {
                if name.eq_ignore_ascii_case("range") {
                    range = parse_range(value.trim());
                }
            }
        }
        if !delay.is_zero() {
            tokio::time::sleep_until(due).await;
        }
        if let Some(xml) = list_objects(root, &target) {
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/xml\r\ncontent-length: {}\r\n\r\n{xml}",
                xml.len()
            );
            w.write_all(answer.as_bytes()).await?;
            continue;
        }
        let path = local_path(root, &target);
        if let (Some(p), None, "GET") = (&path, range, method.as_str()) {
            if let Some(body) = small_file(small, p) {
                let mut answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\naccept-ranges: bytes\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                answer.extend_from_slice(&body);
                w.write_all(&answer).await?;
                continue;
            }
        }
        let file = match &path {
            // Blocking reads: the files are in the page cache, a thread hop would cost more.
            Some(p) => std::fs::File::open(p).ok(),
            None => None,
        };
        let Some(mut file) = file else {
            w.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await?;
            continue;
        };
        let size = file.metadata()?.len();
        let (status, start, end) = match range {
            Some((a, b)) if a < size => {
                let end = b.map_or(size, |b| (b + 1).min(size));
                ("206 Partial Content", a, end)
            }
            Some(_) => {
                let head = format!(
                    "HTTP/1.1 416 Range Not Satisfiable\r\ncontent-range: bytes */{size}\r\ncontent-length: 0\r\n\r\n"
                );
                w.write_all(head.as_bytes()).await?;
                continue;
            }
            None => ("200 OK", 0, size),
        };
        let mut head = format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\naccept-ranges: bytes\r\n",
            end - start
        );
        if range.is_some() {
            head += &format!("content-range: bytes {start}-{}/{size}\r\n", end - 1);
        }
        head += "\r\n";
        if method == "HEAD" {
            w.write_all(head.as_bytes()).await?;
            continue;
        }
        if start > 0 {
            file.seek(std::io::SeekFrom::Start(start))?;
        }
        // The header leads the first chunk of the body: one write, one segment.
        let mut filled = head.len().min(buf.len());
        buf[..filled].copy_from_slice(&head.as_bytes()[..filled]);
        let mut left = end - start;
        loop {
            let want = (buf.len() - filled).min(left as usize);
            let n = if want > 0 {
                file.read(&mut buf[filled..filled + want])?
            } else {
                0
            };
            if n == 0 && left > 0 {
                w.write_all(&buf[..filled]).await?;
                return Ok(()); // the file shrank: close, the client sees a short body
            }
            left -= n as u64;
            w.write_all(&buf[..filled + n]).await?;
            filled = 0;
            if left == 0 {
                break;
            }
        }
    }
}

/// Whole small files kept in memory, by path.
type Small = Arc<Mutex<HashMap<PathBuf, Arc<Vec<u8>>>>>;

/// The file at `path` from memory, read once; `None` for a file over 1 MiB or none.
fn small_file(small: &Small, path: &Path) -> Option<Arc<Vec<u8>>> {
    let mut map = small.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(body) = map.get(path) {
        return Some(body.clone());
    }
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > 1 << 20 {
        return None;
    }
    let body = Arc::new(std::fs::read(path).ok()?);
    map.insert(path.to_owned(), body.clone());
    Some(body)
}

/// `bytes=A-` or `bytes=A-B` (one range; other forms are served whole).
fn parse_range(v: &str) -> Option<(u64, Option<u64>)> {
    let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
    let a = a.parse().ok()?;
    let b = if b.is_empty() {
        None
    } else {
        Some(b.parse().ok()?)
    };
    Some((a, b))
}

/// The file `target` names under `root`; `None` for a path leaving it.
fn local_path(root: &Path, target: &str) -> Option<PathBuf> {
    let path = percent_decode(target.split('?').next()?);
    let rel = Path::new(path.trim_start_matches('/'));
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    Some(root.join(rel))
}

/// `%XX` escapes decoded (as S3 clients write keys); other bytes kept.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The ListObjectsV2 answer for `GET /BUCKET?list-type=2&prefix=P`: every file of
/// `ROOT/BUCKET` whose key starts with `P`, in key order, one page; `None` for other targets.
fn list_objects(root: &Path, target: &str) -> Option<String> {
    let (path, query) = target.split_once('?')?;
    let bucket = percent_decode(path.trim_matches('/'));
    if bucket.is_empty() || bucket.contains('/') {
        return None;
    }
    let mut prefix = String::new();
    let mut listing = false;
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("list-type", "2")) => listing = true,
            Some(("prefix", p)) => prefix = percent_decode(&p.replace('+', " ")),
            _ => {}
        }
    }
    if !listing {
        return None;
    }
    let base = root.join(&bucket);
    let mut keys = Vec::new();
    let mut dirs = vec![base.clone()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => dirs.push(p),
                Ok(t) if t.is_file() => {
                    let key = p.strip_prefix(&base).ok()?.to_string_lossy().into_owned();
                    if key.starts_with(&prefix) {
                        let size = e.metadata().map_or(0, |m| m.len());
                        keys.push((key, size));
                    }
                }
                _ => {}
            }
        }
    }
    keys.sort();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult><Name>{bucket}</Name>\
         <Prefix>{}</Prefix><KeyCount>{}</KeyCount><MaxKeys>{}</MaxKeys><IsTruncated>false</IsTruncated>",
        escape(&prefix),
        keys.len(),
        keys.len().max(1000)
    );
    for (key, size) in keys {
        xml += &format!(
            "<Contents><Key>{}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>\
             <ETag>\"0\"</ETag><Size>{size}</Size><StorageClass>STANDARD</StorageClass></Contents>",
            escape(&key)
        );
    }
    xml += "</ListBucketResult>";
    Some(xml)
}

/// `s` as XML text.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
