//! S3 and S3-compatible servers through OpenDAL's `s3` service: one operator per bucket,
//! built on first use and shared by every request.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Mutex;

use bytes::Bytes;
use opendal::Operator;

use super::{Backend, BoxFuture, Capability, Chunks, Opened};
use crate::error::{Error, ErrorKind, Result};
use crate::list::{Sample, SampleList};
use crate::options::{FetchOptions, S3Options};
use crate::uri::Uri;

/// S3 and S3-compatible servers: reads, ranges and prefix listings, with retries. One operator
/// per bucket, built lazily from the options.
pub(crate) struct S3Backend {
    opts: FetchOptions,
    operators: Mutex<HashMap<String, Operator>>,
}

impl S3Backend {
    pub(crate) fn new(opts: &FetchOptions) -> Self {
        Self {
            opts: opts.clone(),
            operators: Mutex::default(),
        }
    }

    /// The operator of an `s3://` URI's bucket, the bucket and the key.
    fn target<'u>(&self, uri: &'u Uri) -> Result<(Operator, &'u str, &'u str)> {
        let Uri::S3 { bucket, key } = uri else {
            return Err(super::unsupported(uri));
        };
        Ok((self.operator(bucket, uri)?, bucket, key))
    }

    /// The operator for `bucket`; `uri` names errors.
    fn operator(&self, bucket: &str, uri: &Uri) -> Result<Operator> {
        let mut ops = self.operators.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(op) = ops.get(bucket) {
            return Ok(op.clone());
        }
        let op = build(&self.opts.s3, bucket).map_err(|e| e.with_uri(uri.to_string()))?;
        ops.insert(bucket.to_owned(), op.clone());
        Ok(op)
    }
}

impl Backend for S3Backend {
    fn capability(&self) -> Capability {
        Capability::remote(true)
    }

    fn read<'a>(&'a self, uri: &'a Uri, range: Option<Range<u64>>) -> BoxFuture<'a, Result<Bytes>> {
        Box::pin(async move {
            let (op, _, key) = self.target(uri)?;
            super::with_retries(&self.opts, uri, || get(&self.opts, &op, key, range.clone())).await
        })
    }

    fn list<'a>(&'a self, uri: &'a Uri) -> BoxFuture<'a, Result<SampleList>> {
        Box::pin(async move {
            let (op, bucket, key) = self.target(uri)?;
            let prefix = if key.is_empty() || key.ends_with('/') {
                key.to_owned()
            } else {
                format!("{key}/")
            };
            super::with_retries(&self.opts, uri, || list(&op, bucket, &prefix)).await
        })
    }

    fn open<'a>(&'a self, uri: &'a Uri, start: u64) -> BoxFuture<'a, Result<Opened>> {
        Box::pin(async move {
            let (op, _, key) = self.target(uri)?;
            super::with_retries(&self.opts, uri, || open(&op, key, start)).await
        })
    }
}

/// One attempt at a streaming GET of the object from byte `start` (one request for the whole
/// rest: OpenDAL's reader without a chunk size), sent and answered before this returns. A
/// resume at the very end (416) is an empty body, as over HTTP.
async fn open(op: &Operator, key: &str, start: u64) -> Result<Opened> {
    check_key(key)?;
    let reader = op.reader(key).await.map_err(|e| super::from_opendal(&e))?;
    let mut stream = reader
        .into_stream(start..)
        .await
        .map_err(|e| super::from_opendal(&e))?;
    // OpenDAL sends the GET on the stream's first poll; asking for the metadata sends it now,
    // so that a shard opened ahead (`ShardSource::with_readahead`) has paid its round trip
    // when its turn comes (without this, S3 read-ahead only built request objects and each
    // shard's first read waited for the server) and a missing object fails here.
    if let Err(e) = stream.metadata().await {
        let err = super::from_opendal(&e);
        if start > 0 && err.status() == Some(416) {
            return Ok(Opened {
                body: Box::new(super::EmptyBody),
                len: Some(0),
            });
        }
        // OpenDAL answers Unsupported when the request went out but the response held no
        // metadata: the body is there to read.
        if e.kind() != opendal::ErrorKind::Unsupported {
            return Err(err);
        }
    }
    Ok(Opened {
        body: Box::new(Body(stream)),
        len: None,
    })
}

/// OpenDAL's body stream.
struct Body(opendal::BufferStream);

impl Chunks for Body {
    fn next_chunk(&mut self) -> BoxFuture<'_, Option<Result<Bytes>>> {
        use futures_util::StreamExt as _;
        Box::pin(async move {
            loop {
                return match self.0.next().await? {
                    Ok(buf) if buf.is_empty() => continue,
                    Ok(buf) => Some(Ok(buf.to_bytes())),
                    Err(e) => Some(Err(super::from_opendal(&e))),
                };
            }
        })
    }
}

fn build(o: &S3Options, bucket: &str) -> Result<Operator> {
    let env = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    let region = o
        .region
        .clone()
        .or_else(|| {
            o.load_config
                .then(|| env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")))
                .flatten()
        })
        .unwrap_or_else(|| "us-east-1".to_owned());
    let mut b = opendal::services::S3::default()
        .bucket(bucket)
        .region(&region);
    if let Some(endpoint) = &o.endpoint {
        b = b.endpoint(endpoint);
    }
    if !o.path_style {
        b = b.enable_virtual_host_style();
    }
    if let Some(id) = &o.access_key_id {
        b = b.access_key_id(id);
    }
    if let Some(secret) = &o.secret_access_key {
        b = b.secret_access_key(secret.expose());
    }
    if let Some(token) = &o.session_token {
        b = b.session_token(token.expose());
    }
    if let Some(profile) = &o.profile {
        b = b.profile(profile);
    }
    if !o.load_config {
        b = b.disable_config_load().disable_ec2_metadata();
    }
    if o.anonymous {
        b = b.skip_signature();
    }
    // The builder's error names settings, never their values; keep only its message.
    Operator::new(b).map_err(|e| {
        Error::new(
            ErrorKind::Config,
            format!("cannot set up S3 for bucket {bucket}: {}", e.message()),
        )
    })
}

/// OpenDAL normalises paths (collapses `//`, trims white space at both ends, drops a leading
/// `/`): such keys would silently name another object, so they are refused.
fn check_key(key: &str) -> Result<()> {
    if key.is_empty() || key.ends_with('/') {
        return Err(Error::new(
            ErrorKind::IsADirectory,
            "the key names a prefix, not an object",
        ));
    }
    if opendal::raw::normalize_path(key) != key {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "OpenDAL 0.59 cannot address this key exactly (an empty segment `//`, a leading `/` \
             or white space at either end would be normalised away, naming another object)",
        ));
    }
    Ok(())
}

/// One attempt: GET the object (or `range` of it).
pub(crate) async fn get(
    opts: &FetchOptions,
    op: &Operator,
    key: &str,
    range: Option<Range<u64>>,
) -> Result<Bytes> {
    check_key(key)?;
    // OpenDAL's reader fails on a range past the end; the fetcher's contract is to cut it
    // there (as HTTP servers and local reads do), so a ranged read asks for the size first.
    let range = match range {
        Some(r) => {
            let len = op
                .stat(key)
                .await
                .map_err(|e| super::from_opendal(&e))?
                .content_length();
            if r.start >= len {
                return Ok(Bytes::new());
            }
            Some(r.start..r.end.min(len))
        }
        None => None,
    };
    let reader = op.reader(key).await.map_err(|e| super::from_opendal(&e))?;
    let r: opendal::BytesRange = match &range {
        Some(r) => (r.start..r.end).into(),
        None => (..).into(),
    };
    let stream = reader
        .into_stream(r)
        .await
        .map_err(|e| super::from_opendal(&e))?;
    let bytes = super::read_body(opts, stream, None).await?;
    super::check_not_html(opts, None, &bytes)?;
    Ok(bytes)
}

/// Every object under `prefix` (recursively), keys byte-exact, in byte order.
pub(crate) async fn list(op: &Operator, bucket: &str, prefix: &str) -> Result<SampleList> {
    let path = if prefix.is_empty() { "/" } else { prefix };
    let entries = op
        .list_with(path)
        .recursive(true)
        .await
        .map_err(|e| super::from_opendal(&e))?;
    let mut keys: Vec<String> = entries
        .into_iter()
        .filter(|e| e.metadata().mode().is_file() && !e.path().ends_with('/'))
        .map(|e| e.path().to_owned())
        .collect();
    keys.sort();
    keys.dedup();
    let samples = keys
        .into_iter()
        .map(|key| {
            Sample::from_uri(
                Uri::S3 {
                    bucket: bucket.to_owned(),
                    key,
                },
                None,
            )
        })
        .collect();
    Ok(SampleList::new(format!("s3://{bucket}/{prefix}"), samples))
}
