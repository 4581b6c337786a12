//! How samples are fetched: [`FetchOptions`] (timeouts, retries, checks) and [`S3Options`]
//! (endpoint, credentials), shared by the [`Fetcher`](crate::Fetcher) and every backend. The
//! defaults are listed in the [`fetch`](crate::fetch) module's docs.

use std::fmt;
use std::time::Duration;

use smart_default::SmartDefault;

use crate::retry::RetryPolicy;

/// A secret (an S3 secret key or session token) that never shows in `Debug` output, logs or
/// error messages.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that signs requests with it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

/// How S3 (and S3-compatible servers: MinIO, Ceph, R2, s3s-fs) are reached.
///
/// With [`load_config`](Self::load_config) on (the default), whatever is not set here comes
/// from the standard AWS sources, through OpenDAL's (reqsign's) loader: `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_PROFILE`, `AWS_CONFIG_FILE`,
/// `AWS_SHARED_CREDENTIALS_FILE` (`~/.aws/config`, `~/.aws/credentials`), web identity / STS,
/// EC2 instance metadata; `AWS_ENDPOINT_URL` for the endpoint; `AWS_REGION` /
/// `AWS_DEFAULT_REGION` for the region (else `us-east-1`).
#[derive(Debug, Clone, PartialEq, Eq, SmartDefault)]
pub struct S3Options {
    /// The endpoint, e.g. `http://127.0.0.1:9000` for a local server. Default: AWS (or
    /// `AWS_ENDPOINT_URL`).
    pub endpoint: Option<String>,
    /// The region. Default: `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`.
    pub region: Option<String>,
    /// Path-style addressing (`endpoint/bucket/key`), which S3-compatible servers need; off
    /// means virtual-host style (`bucket.endpoint/key`). Default on.
    #[default(true)]
    pub path_style: bool,
    /// An access key id, instead of the environment's.
    pub access_key_id: Option<String>,
    /// A secret access key, instead of the environment's.
    pub secret_access_key: Option<Secret>,
    /// A session token for temporary credentials.
    pub session_token: Option<Secret>,
    /// A profile of the AWS config files, instead of `AWS_PROFILE` / `default`.
    pub profile: Option<String>,
    /// Read credentials, region and endpoint from the environment, profile files and instance
    /// metadata. Default on; off uses only what is set here.
    #[default(true)]
    pub load_config: bool,
    /// Send unsigned requests (public buckets). Default off.
    pub anonymous: bool,
}

/// How a [`Fetcher`](crate::Fetcher) fetches: timeouts, retries, checks, S3 settings. See the
/// [`fetch`](crate::fetch) module's docs for the defaults.
#[derive(Debug, Clone, PartialEq, SmartDefault)]
pub struct FetchOptions {
    /// One attempt, from sending the request to the last byte. Default 30 s.
    #[default(Duration::from_secs(30))]
    pub timeout: Duration,
    /// The longest wait for the response headers or for the next chunk of the body. Default
    /// 10 s.
    #[default(Duration::from_secs(10))]
    pub stall_timeout: Duration,
    /// All attempts and backoff waits of one fetch together. Default 120 s.
    #[default(Duration::from_secs(120))]
    pub total_timeout: Duration,
    /// When and how failed attempts are retried.
    pub retry: RetryPolicy,
    /// Treat an HTML page (`Content-Type: text/html`, or a body that starts with `<!DOCTYPE
    /// html` or `<html`) as an error ([`ErrorKind::NotAnImage`](crate::ErrorKind::NotAnImage)). Default on.
    #[default(true)]
    pub reject_html: bool,
    /// S3 settings.
    pub s3: S3Options,
}
