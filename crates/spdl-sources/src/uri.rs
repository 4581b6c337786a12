//! Where a sample's bytes are: a local path, an `http(s)://` URL or an `s3://bucket/key`.
//!
//! Parsing never changes the bytes that name an object: a plain path stays byte-exact, an S3
//! key is everything after `s3://bucket/` as written (no percent-decoding: `a+b.png` and
//! `100%25.png` are the keys `a+b.png` and `100%25.png`), and an HTTP URL is kept as written,
//! except that bytes a URL may not hold (space, non-ASCII, `"<>\^`{|}`) are percent-encoded
//! so that `https://host/with space.jpg` works as a browser would send it.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{escape_bytes, escape_path, Error, ErrorKind, Result};

/// A parsed location: where [`crate::Fetcher`] reads a sample from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Uri {
    /// A local path (a plain path, or a `file://` URI percent-decoded), byte-exact.
    Local(PathBuf),
    /// An `http://` or `https://` URL, as sent on the wire (see the module docs).
    Http(String),
    /// An object (or, with an empty key or one ending in `/`, a prefix) of an S3 bucket.
    S3 {
        /// The bucket name.
        bucket: String,
        /// The object key, byte-exact as written after `s3://bucket/`.
        key: String,
    },
}

/// The scheme of a string, when it has one of the schemes this crate knows.
fn known_scheme(s: &[u8]) -> Option<&'static str> {
    for scheme in ["s3://", "http://", "https://", "file://"] {
        if s.len() >= scheme.len() && s[..scheme.len()].eq_ignore_ascii_case(scheme.as_bytes()) {
            return Some(scheme);
        }
    }
    None
}

/// Whether `s` looks like `scheme://...` (letters, digits, `+-.` then `://`).
fn has_any_scheme(s: &[u8]) -> bool {
    let Some(pos) = s.windows(3).position(|w| w == b"://") else {
        return false;
    };
    pos > 0
        && s[0].is_ascii_alphabetic()
        && s[..pos]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

impl Uri {
    /// Parses `input`: `s3://bucket/key`, `http(s)://...`, `file:///path`, or else a plain
    /// local path (kept byte-exact). Schemes are matched case-insensitively.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidUri`], naming `input`, for an S3 URI without a bucket, an HTTP URL
    /// without a host, a `file://` URI with a remote host, or an unknown `scheme://`.
    pub fn parse(input: &str) -> Result<Self> {
        Self::parse_bytes(input.as_bytes())
    }

    /// As [`Uri::parse`], from raw bytes (a line of a list file): a plain path need not be
    /// UTF-8 on Unix; a URI must be.
    ///
    /// # Errors
    /// As [`Uri::parse`]; also [`ErrorKind::InvalidUri`] for a URI that is not UTF-8.
    pub fn parse_bytes(input: &[u8]) -> Result<Self> {
        let bad = |reason: &str| {
            Error::new(
                ErrorKind::InvalidUri,
                format!("\"{}\": {reason}", escape_bytes(input)),
            )
        };
        let Some(scheme) = known_scheme(input) else {
            if has_any_scheme(input) {
                return Err(bad(
                    "unknown scheme: expected a path, file://, http://, https:// or s3://",
                ));
            }
            return path_from_bytes(input).map(Uri::Local).map_err(|e| bad(&e));
        };
        let text = std::str::from_utf8(input).map_err(|_| bad("a URI must be UTF-8"))?;
        let rest = &text[scheme.len()..];
        match scheme {
            "s3://" => {
                let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(bad("no bucket: expected s3://bucket/key"));
                }
                Ok(Uri::S3 {
                    bucket: bucket.to_owned(),
                    key: key.to_owned(),
                })
            }
            "file://" => {
                let path = match rest.strip_prefix("localhost") {
                    Some(p) if p.starts_with('/') => p,
                    _ if rest.starts_with('/') => rest,
                    _ => return Err(bad("a file:// URI must name a local absolute path")),
                };
                let bytes = percent_decode(path.as_bytes());
                path_from_bytes(&bytes).map(Uri::Local).map_err(|e| bad(&e))
            }
            _ => {
                let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
                if host.is_empty() || host.starts_with(':') {
                    return Err(bad("no host: expected http(s)://host/path"));
                }
                // The scheme is written in lower case; the rest as given, with bytes a URL may
                // not hold percent-encoded.
                let scheme = scheme.to_ascii_lowercase();
                Ok(Uri::Http(format!("{scheme}{}", encode_unsafe(rest))))
            }
        }
    }

    /// A local path.
    pub fn local(path: impl Into<PathBuf>) -> Self {
        Uri::Local(path.into())
    }

    /// Whether the bytes are fetched over the network.
    pub fn is_remote(&self) -> bool {
        !matches!(self, Uri::Local(_))
    }

    /// Whether `input` starts with a scheme this crate knows (`s3://`, `http(s)://`,
    /// `file://`): list files use it to tell URIs from relative paths.
    pub fn has_scheme(input: &[u8]) -> bool {
        known_scheme(input).is_some()
    }

    /// Whether [`crate::Fetcher::list`] lists this URI as a prefix rather than reading it as a
    /// manifest: an S3 URI whose key is empty, ends in `/`, or whose last segment does not end
    /// in `.txt`, `.lst` or `.list`.
    pub fn names_prefix(&self) -> bool {
        let Uri::S3 { key, .. } = self else {
            return false;
        };
        let name = key
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        ![".txt", ".lst", ".list"].iter().any(|e| name.ends_with(e))
    }

    /// The local path, for [`Uri::Local`].
    pub fn as_path(&self) -> Option<&Path> {
        match self {
            Uri::Local(p) => Some(p),
            _ => None,
        }
    }

    /// The last segment (file name) of the path, key or URL path, without query.
    pub fn file_name(&self) -> Option<String> {
        match self {
            Uri::Local(p) => p.file_name().map(|n| escape_bytes(n.as_encoded_bytes())),
            Uri::Http(url) => {
                let path = url.split(['?', '#']).next().unwrap_or_default();
                path.rsplit('/').next().map(str::to_owned)
            }
            Uri::S3 { key, .. } => key.rsplit('/').next().map(str::to_owned),
        }
    }

    /// Resolves `reference` (a line of a manifest stored at `self`): a URI with a scheme is
    /// taken as it is; anything else is relative to the folder holding `self` (for HTTP, a
    /// reference starting with `/` is relative to the host; for S3, to the bucket).
    ///
    /// # Errors
    /// As [`Uri::parse_bytes`] for `reference`.
    pub fn join(&self, reference: &[u8]) -> Result<Uri> {
        if has_any_scheme(reference) {
            return Uri::parse_bytes(reference);
        }
        match self {
            Uri::Local(p) => {
                let base = p.parent().unwrap_or(Path::new(""));
                let rel = path_from_bytes(reference).map_err(|e| {
                    Error::new(
                        ErrorKind::InvalidUri,
                        format!("\"{}\": {e}", escape_bytes(reference)),
                    )
                })?;
                Ok(Uri::Local(base.join(rel)))
            }
            Uri::Http(url) => {
                let rel = std::str::from_utf8(reference).map_err(|_| {
                    Error::new(
                        ErrorKind::InvalidUri,
                        format!("\"{}\": a URL must be UTF-8", escape_bytes(reference)),
                    )
                })?;
                let no_query = url.split(['?', '#']).next().unwrap_or_default();
                let joined = if rel.starts_with('/') {
                    let after_scheme = no_query.find("://").map_or(0, |i| i + 3);
                    let origin_end = no_query[after_scheme..]
                        .find('/')
                        .map_or(no_query.len(), |i| after_scheme + i);
                    format!("{}{rel}", &no_query[..origin_end])
                } else {
                    let dir_end = no_query.rfind('/').map_or(no_query.len(), |i| i + 1);
                    format!("{}{rel}", &no_query[..dir_end])
                };
                Uri::parse(&joined)
            }
            Uri::S3 { bucket, key } => {
                let rel = std::str::from_utf8(reference).map_err(|_| {
                    Error::new(
                        ErrorKind::InvalidUri,
                        format!("\"{}\": an S3 key must be UTF-8", escape_bytes(reference)),
                    )
                })?;
                let key = match rel.strip_prefix('/') {
                    Some(abs) => abs.to_owned(),
                    None => {
                        let dir_end = key.rfind('/').map_or(0, |i| i + 1);
                        format!("{}{rel}", &key[..dir_end])
                    }
                };
                Ok(Uri::S3 {
                    bucket: bucket.clone(),
                    key,
                })
            }
        }
    }
}

impl fmt::Display for Uri {
    /// A local path byte-exact (`\xNN` for bytes that are not UTF-8), a URL as sent, an S3 URI
    /// as `s3://bucket/key`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Uri::Local(p) => f.write_str(&escape_path(p)),
            Uri::Http(url) => f.write_str(url),
            Uri::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
        }
    }
}

impl std::str::FromStr for Uri {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Uri::parse(s)
    }
}

impl From<PathBuf> for Uri {
    fn from(path: PathBuf) -> Self {
        Uri::Local(path)
    }
}

impl From<&Path> for Uri {
    fn from(path: &Path) -> Self {
        Uri::Local(path.to_path_buf())
    }
}

/// Percent-encodes the bytes a URL may not hold; keeps everything else, `%XX` included.
fn encode_unsafe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b <= b' '
            || b >= 0x7f
            || matches!(
                b,
                b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
            )
        {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    out
}

/// Decodes `%XX` sequences (a malformed one is kept as it is).
fn percent_decode(s: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' && i + 2 < s.len() {
            if let (Some(h), Some(l)) = (hex(s[i + 1]), hex(s[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

#[cfg(unix)]
fn path_from_bytes(bytes: &[u8]) -> std::result::Result<PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    if bytes.is_empty() {
        return Err("empty path".to_owned());
    }
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
}

#[cfg(not(unix))]
fn path_from_bytes(bytes: &[u8]) -> std::result::Result<PathBuf, String> {
    if bytes.is_empty() {
        return Err("empty path".to_owned());
    }
    std::str::from_utf8(bytes)
        .map(PathBuf::from)
        .map_err(|_| "a path must be valid UTF-8 on this platform".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(bucket: &str, key: &str) -> Uri {
        Uri::S3 {
            bucket: bucket.into(),
            key: key.into(),
        }
    }

    #[test]
    fn parses_every_kind() {
        assert_eq!(Uri::parse("a/b c.jpg").unwrap(), Uri::local("a/b c.jpg"));
        assert_eq!(Uri::parse("/abs/x.png").unwrap(), Uri::local("/abs/x.png"));
        assert_eq!(
            Uri::parse("file:///tmp/a%20b.png").unwrap(),
            Uri::local("/tmp/a b.png")
        );
        assert_eq!(
            Uri::parse("file://localhost/tmp/x").unwrap(),
            Uri::local("/tmp/x")
        );
        assert_eq!(
            Uri::parse("HTTPS://Example.com/a.jpg?sig=1").unwrap(),
            Uri::Http("https://Example.com/a.jpg?sig=1".into())
        );
        assert_eq!(
            Uri::parse("http://h:8080/with space/ü.jpg").unwrap(),
            Uri::Http("http://h:8080/with%20space/%C3%BC.jpg".into())
        );
        assert_eq!(
            Uri::parse("http://h/100%25.png").unwrap(),
            Uri::Http("http://h/100%25.png".into())
        );
        assert_eq!(Uri::parse("s3://b").unwrap(), s3("b", ""));
        assert_eq!(Uri::parse("s3://b/corpus/").unwrap(), s3("b", "corpus/"));
    }

    #[test]
    fn s3_keys_are_byte_exact() {
        for key in [
            "corpus/a b.png",
            "corpus/a+b.png",
            "corpus/100%.png",
            "corpus/100%25.png",
            "corpus/q?.png",
            "corpus/h#.png",
            "corpus/dir//double_slash.png",
            "corpus/./dot_slash.png",
            "corpus/日本.png",
            "corpus/trailing space .png",
            "corpus/back\\slash.png",
        ] {
            let uri = Uri::parse(&format!("s3://bucket/{key}")).unwrap();
            assert_eq!(uri, s3("bucket", key));
            assert_eq!(uri.to_string(), format!("s3://bucket/{key}"));
            assert_eq!(Uri::parse(&uri.to_string()).unwrap(), uri);
        }
    }

    #[test]
    fn errors_name_the_input() {
        for (input, needle) in [
            ("s3:///key", "no bucket"),
            ("http:///x", "no host"),
            ("gs://bucket/x", "unknown scheme"),
            ("file://otherhost/x", "local absolute path"),
            ("", "empty path"),
        ] {
            let err = Uri::parse(input).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidUri);
            let msg = err.to_string();
            assert!(msg.contains(&format!("\"{input}\"")), "{msg}");
            assert!(msg.contains(needle), "{msg}");
        }
    }

    #[test]
    fn joins_relative_references() {
        let http = Uri::parse("https://h/data/list.txt?x=1").unwrap();
        assert_eq!(
            http.join(b"img/a.jpg").unwrap(),
            Uri::Http("https://h/data/img/a.jpg".into())
        );
        assert_eq!(
            http.join(b"/root.jpg").unwrap(),
            Uri::Http("https://h/root.jpg".into())
        );
        assert_eq!(http.join(b"s3://b/k").unwrap(), s3("b", "k"));
        let s3m = s3("b", "lists/train.txt");
        assert_eq!(s3m.join(b"x y.png").unwrap(), s3("b", "lists/x y.png"));
        assert_eq!(s3m.join(b"/top.png").unwrap(), s3("b", "top.png"));
        let local = Uri::local("/data/list.txt");
        assert_eq!(local.join(b"a.jpg").unwrap(), Uri::local("/data/a.jpg"));
        assert_eq!(
            local.join(b"http://h/a.jpg").unwrap(),
            Uri::Http("http://h/a.jpg".into())
        );
    }

    #[test]
    fn file_names() {
        assert_eq!(
            Uri::parse("http://h/a/b.jpg?x=1").unwrap().file_name(),
            Some("b.jpg".into())
        );
        assert_eq!(s3("b", "k/c d.png").file_name(), Some("c d.png".into()));
    }
}
