//! The fetch step: a sample's bytes from a local path, an HTTP(S) URL or an S3 object, with
//! retries, timeouts and checks, for an async pipeline stage.
//!
//! One [`Fetcher`] serves every kind of [`Uri`]; it is cheap to clone (an `Arc`) and is meant to
//! be shared by every in-flight request of a fetch stage (`Op::future` with its own
//! concurrency, independent of the decode threads).
//!
//! # Defaults ([`FetchOptions::default`])
//! | setting | default | meaning |
//! |---|---|---|
//! | [`timeout`](FetchOptions::timeout) | 30 s | one attempt, from sending the request to the last byte |
//! | [`stall_timeout`](FetchOptions::stall_timeout) | 10 s | no byte of the body (or no response) for this long |
//! | [`total_timeout`](FetchOptions::total_timeout) | 120 s | all attempts and waits of one fetch together |
//! | [`retry`](FetchOptions::retry) | 3 retries, 200 ms doubling to 10 s, equal jitter, `Retry-After` up to 60 s | see [`RetryPolicy`](crate::RetryPolicy) |
//! | [`reject_html`](FetchOptions::reject_html) | on | an HTML page (by `Content-Type` or content) is [`ErrorKind::NotAnImage`] |
//! | [`S3Options`] | credentials and region from the environment and profile files, path-style addressing | see [`S3Options`] |
//!
//! Every error names the URI (query values that look like credentials redacted), says why,
//! and, when retried, how many attempts were made. Local files are read with `tokio::fs` (not
//! OpenDAL's `fs` service, whose paths are UTF-8 strings: byte-exact non-UTF-8 names would be
//! lost) and are not timed out.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::backend::Backends;
pub use crate::backend::Capability;
use crate::error::{Error, ErrorKind, Result};
use crate::list::SampleList;
pub use crate::options::{FetchOptions, S3Options, Secret};
use crate::uri::Uri;

/// Reads samples' bytes from any [`Uri`], retrying temporary failures. Clones share one
/// connection pool and one set of S3 clients.
///
/// ```
/// # #[cfg(feature = "source-local")] {
/// use spdl_sources::{FetchOptions, Fetcher, Uri};
///
/// let fetcher = Fetcher::new(FetchOptions::default())?;
/// let uri = Uri::parse(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/17-unicode-and-space-filenames/plain.png"))?;
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// let bytes = rt.block_on(fetcher.fetch(&uri))?;
/// assert!(bytes.starts_with(b"\x89PNG"));
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Fetcher {
    inner: Arc<Inner>,
}

struct Inner {
    options: FetchOptions,
    backends: Backends,
}

impl fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fetcher")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A fetcher with `options`. Nothing is contacted until the first fetch.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] when an option is out of range (a zero timeout).
    pub fn new(options: FetchOptions) -> Result<Self> {
        for (name, d) in [
            ("timeout", options.timeout),
            ("stall_timeout", options.stall_timeout),
            ("total_timeout", options.total_timeout),
        ] {
            if d.is_zero() {
                return Err(Error::new(
                    ErrorKind::Config,
                    format!("{name} must be longer than zero"),
                ));
            }
        }
        #[cfg(feature = "remote")]
        opendal::install_default();
        Ok(Self {
            inner: Arc::new(Inner {
                backends: Backends::new(&options),
                options,
            }),
        })
    }

    /// The options this fetcher was built with.
    pub fn options(&self) -> &FetchOptions {
        &self.inner.options
    }

    /// What the backend for `uri`'s scheme can do in this build.
    ///
    /// # Errors
    /// [`ErrorKind::Unsupported`] naming the feature when this build has no such backend.
    pub fn capability(&self, uri: &Uri) -> Result<Capability> {
        Ok(self.inner.backends.for_uri(uri)?.capability())
    }

    /// The whole object at `uri`, retried as [`FetchOptions::retry`] says.
    ///
    /// Must be awaited inside a Tokio runtime with the time driver (spdl-core's pipelines run
    /// one). The bytes are one contiguous buffer handed on without another copy.
    ///
    /// # Errors
    /// Each error names `uri`: [`ErrorKind::NotFound`] (404, no such key or file),
    /// [`ErrorKind::PermissionDenied`] (403), [`ErrorKind::Http`] (another status),
    /// [`ErrorKind::Timeout`], [`ErrorKind::Stalled`], [`ErrorKind::ShortBody`],
    /// [`ErrorKind::NotAnImage`], [`ErrorKind::Network`], [`ErrorKind::Unsupported`] (a backend
    /// this build lacks), and the local kinds of [`crate::read_file`].
    pub async fn fetch(&self, uri: &Uri) -> Result<Bytes> {
        self.fetch_inner(uri, None).await
    }

    /// The bytes `range` of the object at `uri` (HTTP `Range`, S3 ranged `GetObject`, a seek on
    /// local files). A range past the end is cut at the end.
    ///
    /// # Errors
    /// As [`Fetcher::fetch`]; [`ErrorKind::InvalidArgument`] for an empty range.
    pub async fn fetch_range(&self, uri: &Uri, range: Range<u64>) -> Result<Bytes> {
        if range.start >= range.end {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("empty range {}..{}", range.start, range.end),
            )
            .with_uri(crate::backend::shown(uri)));
        }
        self.fetch_inner(uri, Some(range)).await
    }

    /// The object at `uri` from byte `start` on, as one sequential stream (see
    /// [`crate::backend::Backend::open`]).
    #[cfg(feature = "source-local")]
    pub(crate) async fn open(&self, uri: &Uri, start: u64) -> Result<crate::backend::Opened> {
        let backend = self.inner.backends.for_uri(uri)?;
        backend.open(uri, start).await
    }

    async fn fetch_inner(&self, uri: &Uri, range: Option<Range<u64>>) -> Result<Bytes> {
        let backend = self.inner.backends.for_uri(uri)?;
        backend.read(uri, range).await
    }

    /// The samples at `uri`:
    /// - a local folder: every file under it (as [`crate::walk_dir`] with
    ///   [`crate::Extensions::any`]); a local file: a list file (see [`crate::parse_list`]);
    /// - `s3://bucket/prefix/` (an empty key, or one ending in `/`, or any key whose last
    ///   segment does not end in `.txt`, `.lst` or `.list`, taken as `key/`): every object under
    ///   the prefix, recursively, byte-exact, in byte order;
    /// - an `http(s)://` URL or an `s3://` key ending in `.txt`, `.lst` or `.list`: a manifest
    ///   in the list-file format, whose lines may be paths, `file://`, `http(s)://` or `s3://`
    ///   URIs (relative lines are resolved against the manifest's location, see [`Uri::join`]).
    ///
    /// The manifest itself is fetched with retries like any sample.
    ///
    /// # Errors
    /// The errors of [`Fetcher::fetch`] and of listing, naming `uri`;
    /// [`ErrorKind::InvalidListLine`] naming the manifest and line.
    pub async fn list(&self, uri: &Uri) -> Result<SampleList> {
        let backend = self.inner.backends.for_uri(uri)?;
        // A local path is a folder or a list file; an S3 key names a prefix or a manifest; a
        // URL is always a manifest.
        let listing = match uri {
            Uri::Local(_) => true,
            _ => uri.names_prefix(),
        };
        if listing && backend.capability().list {
            return backend.list(uri).await;
        }
        let bytes = self.fetch_manifest(uri).await?;
        crate::list::parse_manifest(&bytes, uri)
    }

    async fn fetch_manifest(&self, uri: &Uri) -> Result<Bytes> {
        // A manifest is text: the HTML check would reject nothing useful, but an HTML error
        // page must still not be parsed as a list of URIs.
        self.fetch(uri).await
    }

    /// [`Fetcher::list`] on a runtime of its own, for callers that are not async (a CLI, before
    /// the pipeline starts).
    ///
    /// # Errors
    /// As [`Fetcher::list`]; [`ErrorKind::Io`] if the runtime cannot start.
    pub fn list_blocking(&self, uri: &Uri) -> Result<SampleList> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start a runtime: {e}")))?;
        rt.block_on(self.list(uri))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn debug_redacts_secrets() {
        let opts = FetchOptions {
            s3: S3Options {
                access_key_id: Some("AKIDEXAMPLE".into()),
                secret_access_key: Some("wJalrXUtnFEMI/K7MDENG".into()),
                session_token: Some("FwoGZXIvYXdzEJr".into()),
                ..S3Options::default()
            },
            ..FetchOptions::default()
        };
        let shown = format!("{opts:?} {:?}", Fetcher::new(opts.clone()).unwrap());
        assert!(!shown.contains("wJalrXUtnFEMI"), "{shown}");
        assert!(!shown.contains("FwoGZXIvYXdzEJr"), "{shown}");
        assert!(shown.contains("Secret(***)"), "{shown}");
    }

    #[test]
    fn zero_timeouts_are_rejected() {
        let err = Fetcher::new(FetchOptions {
            stall_timeout: Duration::ZERO,
            ..FetchOptions::default()
        })
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(err.to_string().contains("stall_timeout"), "{err}");
    }

    #[test]
    fn manifest_names() {
        let prefix = |s: &str| Uri::parse(s).unwrap().names_prefix();
        assert!(!prefix("s3://b/lists/train.txt"));
        assert!(!prefix("s3://b/a.LST"));
        assert!(prefix("s3://b/corpus"));
        assert!(prefix("s3://b/corpus/"));
        assert!(prefix("s3://b/txt/"));
        assert!(prefix("s3://b"));
        assert!(!prefix("https://h/corpus/"));
    }
}
