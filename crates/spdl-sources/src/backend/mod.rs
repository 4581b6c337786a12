//! One small module per backend, each behind its feature, all behind one [`Backend`] trait with
//! a [`Capability`] (OpenDAL's shape), and what they share: the retry loop, the body reader with
//! its stall timeout and length check, the HTML check, redaction.

pub(crate) mod local;

#[cfg(feature = "source-http")]
pub(crate) mod http;
#[cfg(feature = "source-s3")]
pub(crate) mod s3;

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;

use bytes::Bytes;

use crate::error::{Error, ErrorKind, Result};
use crate::list::SampleList;
use crate::options::FetchOptions;
use crate::uri::Uri;

/// What a backend can do, as plain flags (after OpenDAL's `Capability`): the [`Fetcher`]
/// reads them instead of knowing backends by name, and the behaviour tests check each flag
/// against what the backend really does.
///
/// [`Fetcher`]: crate::Fetcher
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capability {
    /// Whole objects.
    pub read: bool,
    /// Byte ranges of an object (HTTP `Range`, S3 ranged `GetObject`, a seek).
    pub read_range: bool,
    /// Every object under a prefix or folder, recursively (HTTP has no listing: an `http(s)://`
    /// URI is read as a manifest instead).
    pub list: bool,
    /// Temporary failures (timeouts, throttling, 5xx) are retried by [`FetchOptions::retry`];
    /// local reads are not (a local error does not go away by waiting).
    pub retry: bool,
}

impl Capability {
    /// A remote backend's: reads, ranges and retries, and a listing when `list`.
    #[cfg(any(feature = "source-http", feature = "source-s3"))]
    pub(crate) const fn remote(list: bool) -> Self {
        Self {
            read: true,
            read_range: true,
            list,
            retry: true,
        }
    }
}

/// A boxed future: [`Backend`] is used as a trait object.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One storage backend. Each is a small module with a struct implementing this, behind its
/// feature; [`Backends`] picks one by the URI's scheme. A backend that needs the
/// [`FetchOptions`] (timeouts, retries, the HTML check, S3 settings) keeps its own copy from
/// [`Backends::new`].
pub(crate) trait Backend: Send + Sync {
    /// What this backend can do.
    fn capability(&self) -> Capability;

    /// The object at `uri`, or `range` of it (cut at the end), with the backend's retries.
    fn read<'a>(&'a self, uri: &'a Uri, range: Option<Range<u64>>) -> BoxFuture<'a, Result<Bytes>>;

    /// The samples under `uri` (called only when [`Capability::list`] is set).
    fn list<'a>(&'a self, uri: &'a Uri) -> BoxFuture<'a, Result<SampleList>>;

    /// The object at `uri` from byte `start` to its end as one sequential stream (one request;
    /// a `Range` only when `start > 0`), with the backend's retries for opening it. Local files
    /// are read with `std::fs` by their callers instead: the default refuses. Only the shard
    /// reader streams, and it comes with `source-local` (it parses tar with spdl-tar).
    #[cfg_attr(not(feature = "source-local"), allow(dead_code))]
    fn open<'a>(&'a self, uri: &'a Uri, start: u64) -> BoxFuture<'a, Result<Opened>> {
        let _ = start;
        Box::pin(async move {
            Err(Error::new(
                ErrorKind::Unsupported,
                "this backend has no streaming read (read local files directly)",
            )
            .with_uri(shown(uri)))
        })
    }
}

/// A response body read chunk by chunk.
#[cfg_attr(not(feature = "source-local"), allow(dead_code))]
pub(crate) trait Chunks: Send {
    /// The next chunk (never empty), `None` at the end of the body.
    fn next_chunk(&mut self) -> BoxFuture<'_, Option<Result<Bytes>>>;
}

/// A stream opened by [`Backend::open`]: its body, and how many bytes it should hold when
/// the server said so (a body that ends before is cut short).
#[cfg_attr(not(feature = "source-local"), allow(dead_code))]
pub(crate) struct Opened {
    pub(crate) body: Box<dyn Chunks>,
    pub(crate) len: Option<u64>,
}

/// The body of a 416 answer to a resume at the very end (HTTP and S3).
#[cfg(any(feature = "source-http", feature = "source-s3"))]
pub(crate) struct EmptyBody;

#[cfg(any(feature = "source-http", feature = "source-s3"))]
impl Chunks for EmptyBody {
    fn next_chunk(&mut self) -> BoxFuture<'_, Option<Result<Bytes>>> {
        Box::pin(async { None })
    }
}

/// The backends of this build, one per scheme.
pub(crate) struct Backends {
    local: local::LocalBackend,
    #[cfg(feature = "source-http")]
    http: http::HttpBackend,
    #[cfg(feature = "source-s3")]
    s3: s3::S3Backend,
}

impl Backends {
    pub(crate) fn new(options: &FetchOptions) -> Self {
        let _ = options; // unused in a build without remote backends
        Self {
            local: local::LocalBackend,
            #[cfg(feature = "source-http")]
            http: http::HttpBackend::new(options),
            #[cfg(feature = "source-s3")]
            s3: s3::S3Backend::new(options),
        }
    }

    /// The backend for `uri`'s scheme.
    ///
    /// # Errors
    /// [`ErrorKind::Unsupported`] naming the feature this build lacks.
    pub(crate) fn for_uri(&self, uri: &Uri) -> Result<&dyn Backend> {
        match uri {
            Uri::Local(_) => Ok(&self.local),
            #[cfg(feature = "source-http")]
            Uri::Http(_) => Ok(&self.http),
            #[cfg(feature = "source-s3")]
            Uri::S3 { .. } => Ok(&self.s3),
            #[allow(unreachable_patterns)]
            _ => Err(unsupported(uri)),
        }
    }
}

/// The URI as errors show it: credentials in a URL (user info, signature or token query
/// values) replaced by `REDACTED`.
pub(crate) fn shown(uri: &Uri) -> String {
    match uri {
        Uri::Http(url) => redact_url(url),
        other => other.to_string(),
    }
}

/// Query names whose values are credentials (presigned URLs, tokens).
fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "signature",
        "credential",
        "token",
        "secret",
        "password",
        "sig",
        "key",
        "auth",
    ]
    .iter()
    .any(|s| n.contains(s))
}

/// Redacts user info and credential-looking query values of a URL.
pub(crate) fn redact_url(url: &str) -> String {
    let (before_frag, frag) = match url.split_once('#') {
        Some((a, b)) => (a, Some(b)),
        None => (url, None),
    };
    let (base, query) = match before_frag.split_once('?') {
        Some((a, q)) => (a, Some(q)),
        None => (before_frag, None),
    };
    let mut out = String::with_capacity(url.len());
    // user:password@host
    match base.find("://") {
        Some(i) => {
            let auth_end = base[i + 3..].find('/').map_or(base.len(), |j| i + 3 + j);
            let authority = &base[i + 3..auth_end];
            out.push_str(&base[..i + 3]);
            match authority.rfind('@') {
                Some(at) => {
                    out.push_str("REDACTED@");
                    out.push_str(&authority[at + 1..]);
                }
                None => out.push_str(authority),
            }
            out.push_str(&base[auth_end..]);
        }
        None => out.push_str(base),
    }
    if let Some(query) = query {
        out.push('?');
        let parts: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if is_secret_name(name) => format!("{name}=REDACTED"),
                _ => pair.to_owned(),
            })
            .collect();
        out.push_str(&parts.join("&"));
    }
    if let Some(frag) = frag {
        out.push('#');
        out.push_str(frag);
    }
    out
}

/// The error for a URI whose backend this build lacks.
pub(crate) fn unsupported(uri: &Uri) -> Error {
    let feature = match uri {
        Uri::Http(_) => "source-http",
        Uri::S3 { .. } => "source-s3",
        Uri::Local(_) => "source-local",
    };
    Error::new(
        ErrorKind::Unsupported,
        format!("spdl-sources was built without feature `{feature}`"),
    )
    .with_uri(shown(uri))
}

/// Runs `attempt` until it succeeds, fails permanently, runs out of retries or passes
/// [`FetchOptions::total_timeout`]; each attempt is bounded by [`FetchOptions::timeout`].
/// The final error names `uri` and the number of attempts.
#[cfg(feature = "remote")]
pub(crate) async fn with_retries<T, F, Fut>(
    opts: &FetchOptions,
    uri: &Uri,
    mut attempt: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    use rand::Rng as _;
    use tokio::time::Instant;

    let start = Instant::now();
    let deadline = start + opts.total_timeout;
    let mut n = 0u32;
    loop {
        n += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let limit = opts.timeout.min(left);
        let result = match tokio::time::timeout(limit, attempt()).await {
            Ok(r) => r,
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!("no complete response within {}", secs(limit)),
            )),
        };
        let err = match result {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let unit: f64 = rand::rng().random();
        let done = |e: Error| Err(e.with_uri(shown(uri)).with_attempts(n));
        match opts.retry.decide(n, &err, unit) {
            Some(wait) if Instant::now() + wait < deadline => tokio::time::sleep(wait).await,
            Some(wait) => {
                let reason = format!(
                    "{}; gave up: the next try (in {}) would pass the total timeout of {}",
                    err.reason(),
                    secs(wait),
                    secs(opts.total_timeout)
                );
                return done(err.with_reason(reason));
            }
            None => return done(err),
        }
    }
}

/// `1.5 s`, `250 ms`.
pub(crate) fn secs(d: std::time::Duration) -> String {
    if d < std::time::Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// Whether `body` starts (after white space and a BOM) like an HTML page.
#[cfg(feature = "remote")]
pub(crate) fn looks_like_html(body: &[u8]) -> bool {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(body.len());
    let head: Vec<u8> = body[start..body.len().min(start + 15)].to_ascii_lowercase();
    head.starts_with(b"<!doctype html")
        || head.starts_with(b"<html")
        || head.starts_with(b"<head")
        || head.starts_with(b"<body")
}

/// The HTML check shared by the remote backends.
#[cfg(feature = "remote")]
pub(crate) fn check_not_html(
    opts: &FetchOptions,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<()> {
    if !opts.reject_html {
        return Ok(());
    }
    let ct = content_type.map(|c| c.trim().to_ascii_lowercase());
    if let Some(ct) = ct.as_deref() {
        if ct.starts_with("text/html") || ct.starts_with("application/xhtml") {
            return Err(Error::new(
                ErrorKind::NotAnImage,
                format!("content is {ct}, not an image ({} bytes)", body.len()),
            ));
        }
    }
    if looks_like_html(body) {
        return Err(Error::new(
            ErrorKind::NotAnImage,
            format!(
                "content is an HTML page, not an image ({} bytes)",
                body.len()
            ),
        ));
    }
    Ok(())
}

/// Reads a body stream chunk by chunk into one buffer: each chunk must come within the stall
/// timeout; fewer bytes than `expected` is a [`ErrorKind::ShortBody`].
///
/// The chunks are kept as they come (reference-counted slices of the client's buffers) and
/// joined once at the end: a body that came in one chunk is handed on without a copy, a longer
/// one is copied once into a buffer of its exact size (no regrowth copies when the length is
/// not announced, as with S3 through OpenDAL).
#[cfg(feature = "remote")]
pub(crate) async fn read_body<S>(
    opts: &FetchOptions,
    mut stream: S,
    expected: Option<u64>,
) -> Result<Bytes>
where
    S: futures_util::Stream<Item = opendal::Result<opendal::Buffer>> + Unpin,
{
    use futures_util::StreamExt as _;

    let mut parts: Vec<Bytes> = Vec::new();
    let mut got: u64 = 0;
    loop {
        let next = match tokio::time::timeout(opts.stall_timeout, stream.next()).await {
            Ok(next) => next,
            Err(_) => {
                let of = expected.map(|e| format!(" of {e}")).unwrap_or_default();
                return Err(Error::new(
                    ErrorKind::Stalled,
                    format!(
                        "no data for {} (stall timeout) after {got}{of} bytes",
                        secs(opts.stall_timeout),
                    ),
                ));
            }
        };
        match next {
            None => break,
            Some(Ok(chunk)) => {
                for part in chunk {
                    if !part.is_empty() {
                        got += part.len() as u64;
                        parts.push(part);
                    }
                }
            }
            Some(Err(e)) => {
                if let Some(expected) = expected.filter(|&e| got < e) {
                    return Err(short(got, expected));
                }
                if let Some((got, of)) = parse_too_little(e.message()) {
                    return Err(short(got, of));
                }
                return Err(from_opendal(&e));
            }
        }
    }
    if let Some(expected) = expected {
        if got < expected {
            return Err(short(got, expected));
        }
    }
    Ok(join(parts, got))
}

/// `parts` (of `len` bytes in all) as one contiguous buffer: the part itself when there is one.
#[cfg(feature = "remote")]
fn join(mut parts: Vec<Bytes>, len: u64) -> Bytes {
    if parts.len() <= 1 {
        return parts.pop().unwrap_or_default();
    }
    let mut buf = Vec::with_capacity(len as usize);
    for p in &parts {
        buf.extend_from_slice(p);
    }
    Bytes::from(buf)
}

#[cfg(feature = "remote")]
fn short(got: u64, expected: u64) -> Error {
    Error::new(
        ErrorKind::ShortBody,
        format!("incomplete body: got {got} of {expected} bytes"),
    )
}

/// OpenDAL's length check: `http response got too little data, expect: N, actual: M`.
#[cfg(feature = "remote")]
fn parse_too_little(msg: &str) -> Option<(u64, u64)> {
    let rest = msg.split("too little data, expect: ").nth(1)?;
    let (expect, rest) = rest.split_once(", actual: ")?;
    let actual: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((actual.parse().ok()?, expect.trim().parse().ok()?))
}

/// Maps any OpenDAL error: NotFound (404), PermissionDenied (403), RateLimited (throttling,
/// temporary), a status found in the error's response context ([`ErrorKind::Http`]), else a
/// transport failure. The S3 error code (`NoSuchKey`, `SlowDown`) is kept in the reason.
#[cfg(feature = "remote")]
pub(crate) fn from_opendal(e: &opendal::Error) -> Error {
    let full = e.to_string();
    let status = find_after(&full, "status: ").and_then(|s| s.parse::<u16>().ok());
    let code = find_quoted_after(e.message(), "code: ");
    let retry_after = find_quoted_after(&full, "\"retry-after\": ")
        .and_then(|v| crate::retry::parse_retry_after(&v, 0).filter(|d| d.as_secs() < 86_400));
    let with_code = |base: String| match &code {
        Some(c) if !c.is_empty() => format!("{base} ({c})"),
        _ => base,
    };
    let (kind, default_status) = match e.kind() {
        opendal::ErrorKind::NotFound => (ErrorKind::NotFound, 404),
        opendal::ErrorKind::PermissionDenied => (ErrorKind::PermissionDenied, 403),
        opendal::ErrorKind::RateLimited => (ErrorKind::Http, 503),
        opendal::ErrorKind::ConfigInvalid => {
            return Error::new(ErrorKind::Config, e.message().to_owned()).with_temporary(false)
        }
        _ => match status {
            Some(s) => (ErrorKind::Http, s),
            None => return from_opendal_transport(e, "request failed"),
        },
    };
    let status = status.unwrap_or(default_status);
    let reason = ::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let temporary = e.is_temporary() || e.kind() == opendal::ErrorKind::RateLimited;
    Error::new(
        kind,
        with_code(format!("HTTP {status} {reason}").trim_end().to_owned()),
    )
    .with_status(status)
    .with_temporary(temporary && kind == ErrorKind::Http)
    .with_retry_after(retry_after)
}

/// The digits after `pat` in `s`.
#[cfg(feature = "remote")]
fn find_after(s: &str, pat: &str) -> Option<String> {
    let rest = &s[s.find(pat)? + pat.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (!digits.is_empty()).then_some(digits)
}

/// The `"quoted"` value after `pat` in `s`.
#[cfg(feature = "remote")]
fn find_quoted_after(s: &str, pat: &str) -> Option<String> {
    let rest = s[s.find(pat)? + pat.len()..].strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_owned())
}

/// Maps an OpenDAL error from the transport (no HTTP status: connecting, sending, reading)
/// to [`ErrorKind::Network`] with a short reason built from its causes. OpenDAL's own context
/// (request URL, response headers) is left out of the message.
#[cfg(feature = "remote")]
pub(crate) fn from_opendal_transport(e: &opendal::Error, doing: &str) -> Error {
    use std::error::Error as _;

    if let Some((got, of)) = parse_too_little(e.message()) {
        return short(got, of);
    }
    let mut causes = Vec::new();
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !causes.contains(&text) {
            causes.push(text);
        }
        src = s.source();
    }
    let reason = if causes.is_empty() {
        format!("{doing}: {}", e.message())
    } else {
        format!("{doing}: {}", causes.join(": "))
    };
    let timed_out = causes.iter().any(|c| c.contains("timed out"));
    Error::new(
        if timed_out {
            ErrorKind::Timeout
        } else {
            ErrorKind::Network
        },
        reason,
    )
    .with_temporary(e.is_temporary() || timed_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body in one chunk is handed on as is; several are joined once, in order.
    #[cfg(feature = "remote")]
    #[tokio::test(flavor = "current_thread")]
    async fn bodies_are_joined_without_extra_copies() {
        let opts = FetchOptions::default();
        let one = Bytes::from(vec![7u8; 1000]);
        let stream = futures_util::stream::iter([Ok(opendal::Buffer::from(one.clone()))]);
        let got = read_body(&opts, stream, Some(1000)).await.unwrap();
        assert_eq!(got.as_ptr(), one.as_ptr(), "copied");

        let parts = [&b"ab"[..], b"", b"cde"].map(|p| Ok(opendal::Buffer::from(p.to_vec())));
        let two = opendal::Buffer::from(vec![Bytes::from_static(b"f"), Bytes::from_static(b"gh")]);
        let stream = futures_util::stream::iter(parts.into_iter().chain([Ok(two)]));
        assert_eq!(
            &read_body(&opts, stream, None).await.unwrap()[..],
            b"abcdefgh"
        );

        let stream = futures_util::stream::iter([Ok(opendal::Buffer::from(b"abc".to_vec()))]);
        let err = read_body(&opts, stream, Some(5)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ShortBody);
        assert!(err.to_string().contains("got 3 of 5 bytes"), "{err}");
    }

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redact_url("https://u:pw@h/a.jpg?X-Amz-Signature=abc&size=3&X-Amz-Security-Token=t#f"),
            "https://REDACTED@h/a.jpg?X-Amz-Signature=REDACTED&size=3&X-Amz-Security-Token=REDACTED#f"
        );
        assert_eq!(redact_url("http://h:80/p/q.jpg"), "http://h:80/p/q.jpg");
    }

    #[cfg(feature = "remote")]
    #[test]
    fn html_is_recognised() {
        assert!(looks_like_html(b"  \n<!DOCTYPE html><html>"));
        assert!(looks_like_html(b"<HTML><body>"));
        assert!(!looks_like_html(b"\xff\xd8\xff\xe0"));
        assert!(!looks_like_html(b""));
        assert_eq!(
            parse_too_little("http response got too little data, expect: 1258, actual: 758"),
            Some((758, 1258))
        );
    }
}
