//! HTTP(S) through OpenDAL's HTTP transport (`opendal::HttpTransporter`, reqwest with rustls).
//!
//! OpenDAL's `http` *service* is not used: it percent-encodes the path again (a URL holding
//! `%20` would be requested as `%2520`), drops query strings (presigned URLs), and hides the
//! status and `Retry-After` behind its error kinds. The transport under it sends the URL as
//! written and hands back status, headers and a streaming body.

use std::ops::Range;

use bytes::{Buf as _, Bytes};
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, RANGE, RETRY_AFTER};
use http::StatusCode;
use opendal::raw::oio::ReadStream as _;
use opendal::{Buffer, HttpTransporter};

use super::{Backend, BoxFuture, Capability, Chunks, Opened};
use crate::error::{Error, ErrorKind, Result};
use crate::list::SampleList;
use crate::options::FetchOptions;
use crate::uri::Uri;

/// HTTP(S): reads and ranges with retries; no listing (a URL is read as a manifest).
pub(crate) struct HttpBackend {
    opts: FetchOptions,
}

impl HttpBackend {
    pub(crate) fn new(opts: &FetchOptions) -> Self {
        Self { opts: opts.clone() }
    }
}

impl Backend for HttpBackend {
    fn capability(&self) -> Capability {
        Capability::remote(false)
    }

    fn read<'a>(&'a self, uri: &'a Uri, range: Option<Range<u64>>) -> BoxFuture<'a, Result<Bytes>> {
        Box::pin(async move {
            let url = http_url(uri)?;
            super::with_retries(&self.opts, uri, || get(&self.opts, url, range.clone())).await
        })
    }

    fn list<'a>(&'a self, uri: &'a Uri) -> BoxFuture<'a, Result<SampleList>> {
        Box::pin(async move {
            Err(Error::new(
                ErrorKind::Unsupported,
                "HTTP has no listing; give a manifest URL",
            )
            .with_uri(super::shown(uri)))
        })
    }

    fn open<'a>(&'a self, uri: &'a Uri, start: u64) -> BoxFuture<'a, Result<Opened>> {
        Box::pin(async move {
            let url = http_url(uri)?;
            super::with_retries(&self.opts, uri, || open(&self.opts, url, start)).await
        })
    }
}

/// Sends a GET of `url` (with `range` as its `Range` header) and waits for the response
/// headers, within the stall timeout.
async fn send(
    opts: &FetchOptions,
    url: &str,
    range: Option<String>,
) -> Result<http::Response<opendal::HttpBody>> {
    let mut req = http::Request::get(url);
    if let Some(range) = range {
        req = req.header(RANGE, range);
    }
    let req = req.body(Buffer::new()).map_err(|e| {
        Error::new(
            ErrorKind::InvalidUri,
            format!("not a valid request URL: {e}"),
        )
    })?;
    let transport = HttpTransporter::default();
    match tokio::time::timeout(opts.stall_timeout, transport.fetch(req)).await {
        Ok(r) => r.map_err(|e| super::from_opendal_transport(&e, "sending the request")),
        Err(_) => Err(Error::new(
            ErrorKind::Stalled,
            format!(
                "no response headers within {} (stall timeout)",
                super::secs(opts.stall_timeout)
            ),
        )),
    }
}

/// The URL of an `http(s)://` URI.
fn http_url(uri: &Uri) -> Result<&str> {
    match uri {
        Uri::Http(url) => Ok(url),
        other => Err(super::unsupported(other)),
    }
}

/// One attempt at a streaming GET of `url` from byte `start` (`Range: bytes=START-` when
/// `start > 0`). A server that ignores the range (200) has its first `start` bytes dropped
/// here; 416 (nothing from `start` on) is an empty body.
async fn open(opts: &FetchOptions, url: &str, start: u64) -> Result<Opened> {
    let range = (start > 0).then(|| format!("bytes={start}-"));
    let resp = send(opts, url, range).await?;
    let status = resp.status();
    let skip = match status {
        StatusCode::OK => start,
        StatusCode::PARTIAL_CONTENT => 0,
        StatusCode::RANGE_NOT_SATISFIABLE if start > 0 => {
            return Ok(Opened {
                body: Box::new(super::EmptyBody),
                len: Some(0),
            })
        }
        _ => return Err(status_error(status)),
    };
    let len = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|n| n.saturating_sub(skip));
    Ok(Opened {
        body: Box::new(Body {
            body: resp.into_body(),
            skip,
        }),
        len,
    })
}

/// A streaming response body, its first `skip` bytes dropped.
struct Body {
    body: opendal::HttpBody,
    skip: u64,
}

impl Chunks for Body {
    fn next_chunk(&mut self) -> BoxFuture<'_, Option<Result<Bytes>>> {
        Box::pin(async move {
            loop {
                let mut buf = match self.body.read().await {
                    Ok(buf) if buf.is_empty() => return None,
                    Ok(buf) => buf,
                    Err(e) => {
                        return Some(Err(super::from_opendal_transport(&e, "reading the body")))
                    }
                };
                if self.skip > 0 {
                    let cut = self.skip.min(buf.len() as u64);
                    self.skip -= cut;
                    buf.advance(cut as usize);
                    if buf.is_empty() {
                        continue;
                    }
                }
                return Some(Ok(buf.to_bytes()));
            }
        })
    }
}

/// One attempt: GET `url` (with a `Range` header for `range`), check status, type and length.
pub(crate) async fn get(
    opts: &FetchOptions,
    url: &str,
    range: Option<Range<u64>>,
) -> Result<Bytes> {
    let header = range
        .as_ref()
        .map(|r| format!("bytes={}-{}", r.start, r.end - 1));
    let resp = send(opts, url, header).await?;
    let status = resp.status();
    let header = |name| {
        resp.headers()
            .get(name)
            .and_then(|v: &http::HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    if !(status == StatusCode::OK || (range.is_some() && status == StatusCode::PARTIAL_CONTENT)) {
        let retry_after = header(RETRY_AFTER).and_then(|v| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            crate::retry::parse_retry_after(&v, now)
        });
        return Err(status_error(status).with_retry_after(retry_after));
    }
    let content_type = header(CONTENT_TYPE);
    let expected = header(CONTENT_LENGTH).and_then(|v| v.trim().parse::<u64>().ok());
    if opts.reject_html {
        // Reject by type before reading the body: an error page may be large or endless.
        super::check_not_html(opts, content_type.as_deref(), b"")?;
    }
    let body = resp.into_body();
    let stream = futures_util::stream::unfold(body, |mut body| async move {
        match body.read().await {
            Ok(buf) if buf.is_empty() => None,
            Ok(buf) => Some((Ok(buf), body)),
            Err(e) => Some((Err(e), body)),
        }
    });
    let bytes = super::read_body(opts, Box::pin(stream), expected).await?;
    super::check_not_html(opts, None, &bytes)?;
    match (range, status) {
        // The server ignored the Range header and sent the whole object: cut it here.
        (Some(r), StatusCode::OK) => {
            let len = bytes.len() as u64;
            let (start, end) = (r.start.min(len) as usize, r.end.min(len) as usize);
            Ok(bytes.slice(start..end))
        }
        _ => Ok(bytes),
    }
}

/// The error for a status that is not a success: 404 is [`ErrorKind::NotFound`], 401 and 403
/// [`ErrorKind::PermissionDenied`], the rest [`ErrorKind::Http`]; the status is kept.
pub(crate) fn status_error(status: StatusCode) -> Error {
    let code = status.as_u16();
    let kind = match code {
        404 | 410 => ErrorKind::NotFound,
        401 | 403 => ErrorKind::PermissionDenied,
        _ => ErrorKind::Http,
    };
    let reason = status.canonical_reason().unwrap_or("");
    let mut e =
        Error::new(kind, format!("HTTP {code} {reason}").trim_end().to_owned()).with_status(code);
    if kind != ErrorKind::Http {
        e = e.with_temporary(false);
    }
    e
}
