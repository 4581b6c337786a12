//! A dataset as a list of samples: a path or URI and an optional label.
//!
//! This is the in-memory result of every listing (directory walk, list file, ImageFolder, S3
//! prefix, URI manifest): the sampler draws integer indices, and [`SampleList::get`] turns an
//! index back into a sample.

use std::path::{Path, PathBuf};

use crate::error::{escape_bytes, Error, ErrorKind, Result};
use crate::uri::Uri;

/// One sample of a dataset: where its bytes are, and its class label if the listing gave one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sample {
    /// Where the sample's bytes are, kept byte-exact (no Unicode normalisation, no trimming, no
    /// percent-decoding). Relative to the process's working directory when it is not absolute.
    /// For a remote sample, the URI's text (`s3://bucket/key`), so that code that shows or
    /// keys samples by path keeps working; fetch through [`Sample::location`].
    pub path: PathBuf,
    /// The integer class label (an ImageFolder class index, a list file's label), if any.
    pub label: Option<i64>,
    /// The URI, for samples listed from a remote source or a manifest line with a scheme;
    /// `None` for a local path (then [`Sample::path`] is where the bytes are).
    pub uri: Option<Uri>,
}

impl Sample {
    /// A sample at `path` with an optional label.
    pub fn new(path: impl Into<PathBuf>, label: Option<i64>) -> Self {
        Self {
            path: path.into(),
            label,
            uri: None,
        }
    }

    /// A sample at `uri`; a [`Uri::Local`] gives the same sample as [`Sample::new`].
    pub fn from_uri(uri: Uri, label: Option<i64>) -> Self {
        match uri {
            Uri::Local(path) => Self::new(path, label),
            uri => Self {
                path: PathBuf::from(uri.to_string()),
                label,
                uri: Some(uri),
            },
        }
    }

    /// Where to fetch the sample from (for [`crate::Fetcher::fetch`]).
    pub fn location(&self) -> Uri {
        match &self.uri {
            Some(uri) => uri.clone(),
            None => Uri::Local(self.path.clone()),
        }
    }
}

/// Parses a manifest fetched from `at`: the list-file format (see [`crate::parse_list`]: one
/// location per line, optionally a TAB and a label, `#` comments), each line a path or URI,
/// relative ones resolved against `at` (see [`Uri::join`]). The list is named after `at`.
///
/// # Errors
/// [`ErrorKind::InvalidListLine`] naming `at` and the 1-based line.
pub fn parse_manifest(contents: &[u8], at: &Uri) -> Result<SampleList> {
    let name = at.to_string();
    let mut samples = Vec::new();
    for (line_no, line) in list_lines(contents) {
        let bad = |reason: String| {
            let e = Error::new(ErrorKind::InvalidListLine, reason).with_line(line_no);
            match at {
                Uri::Local(p) => e.with_path(p),
                _ => e.with_uri(name.clone()),
            }
        };
        let (location, label) = split_label(line).map_err(bad)?;
        let uri = at.join(location).map_err(|e| bad(e.reason().to_owned()))?;
        samples.push(Sample::from_uri(uri, label));
    }
    Ok(SampleList::new(name, samples))
}

/// The lines of a list file that name a sample, with their 1-based numbers: a UTF-8 byte order
/// mark, `\r` line ends, blank lines and `#` comments are skipped.
pub(crate) fn list_lines(contents: &[u8]) -> impl Iterator<Item = (u64, &[u8])> {
    let contents = contents.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(contents);
    contents
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| (i as u64 + 1, line.strip_suffix(b"\r").unwrap_or(line)))
        .filter(|(_, line)| !(line.iter().all(|&b| b == b' ' || b == b'\t') || line[0] == b'#'))
}

/// Splits `path[\tlabel]`, checking both parts.
pub(crate) fn split_label(line: &[u8]) -> std::result::Result<(&[u8], Option<i64>), String> {
    let mut parts = line.splitn(2, |&b| b == b'\t');
    let path = parts.next().unwrap_or_default();
    let label = match parts.next() {
        None => None,
        Some(raw) => {
            let text = std::str::from_utf8(raw)
                .ok()
                .map(|t| t.trim_matches(' '))
                .unwrap_or_default();
            if raw.contains(&b'\t') {
                return Err(format!(
                    "expected `path<TAB>label`, found more than one TAB in \"{}\"",
                    escape_bytes(line)
                ));
            }
            match text.parse::<i64>() {
                Ok(label) => Some(label),
                Err(_) => {
                    return Err(format!(
                        "label \"{}\" after the TAB is not an integer",
                        escape_bytes(raw)
                    ))
                }
            }
        }
    };
    if path.is_empty() {
        return Err("empty path before the TAB".to_owned());
    }
    if path.contains(&0) {
        return Err(format!(
            "path \"{}\" contains a NUL byte",
            escape_bytes(path)
        ));
    }
    Ok((path, label))
}

/// An ordered list of samples with a name that errors use (usually the folder or list file).
///
/// The order is the dataset order: sample `i` is the one the sampler's index `i` designates, as
/// with a map-style PyTorch `Dataset`'s `__getitem__`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleList {
    name: String,
    samples: Vec<Sample>,
    warnings: Vec<String>,
}

impl SampleList {
    /// A list named `name` holding `samples` in that order.
    pub fn new(name: impl Into<String>, samples: Vec<Sample>) -> Self {
        Self {
            name: name.into(),
            samples,
            warnings: Vec::new(),
        }
    }

    /// The list with `warnings` attached: what the listing cut that a user should be told
    /// about (a directory loop that was not followed), one sentence each, naming the path.
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings = warnings;
        self
    }

    /// The listing's warnings (see [`Self::with_warnings`]); empty for most lists. Callers show
    /// them (the CLI on stderr, Python as `RuntimeWarning`s).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    #[cfg_attr(not(feature = "source-local"), allow(dead_code))]
    /// A list named after `path` (escaped byte-exact, see [`Error`]).
    pub(crate) fn named_after(path: &Path, samples: Vec<Sample>) -> Self {
        Self::new(crate::error::escape_path(path), samples)
    }

    /// The name errors use for this list.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the list holds no sample.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The number of samples as `u64`, the length a [`crate::Sampler`] takes.
    pub fn len_u64(&self) -> u64 {
        self.samples.len() as u64
    }

    /// The sample at `index` (as drawn by a sampler).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when `index` is not below [`Self::len`]; the message names
    /// the list.
    pub fn get(&self, index: u64) -> Result<&Sample> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.samples.get(i))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "index {index} is out of range for list {} of {} samples",
                        self.name,
                        self.samples.len()
                    ),
                )
            })
    }

    /// All samples, in order.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// Iterates over the samples in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Sample> {
        self.samples.iter()
    }

    /// Takes the samples out.
    pub fn into_samples(self) -> Vec<Sample> {
        self.samples
    }
}

impl<'a> IntoIterator for &'a SampleList {
    type Item = &'a Sample;
    type IntoIter = std::slice::Iter<'a, Sample>;

    fn into_iter(self) -> Self::IntoIter {
        self.samples.iter()
    }
}

impl IntoIterator for SampleList {
    type Item = Sample;
    type IntoIter = std::vec::IntoIter<Sample>;

    fn into_iter(self) -> Self::IntoIter {
        self.samples.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_resolve_relative_lines() {
        let at = Uri::parse("s3://b/lists/train.txt").unwrap();
        let list = parse_manifest(
            b"# header\nimg/a b.png\t1\n/top.png\nhttps://h/x.jpg\n\n",
            &at,
        )
        .unwrap();
        let got: Vec<_> = list.iter().map(|s| (s.location(), s.label)).collect();
        assert_eq!(
            got,
            vec![
                (Uri::parse("s3://b/lists/img/a b.png").unwrap(), Some(1)),
                (Uri::parse("s3://b/top.png").unwrap(), None),
                (Uri::parse("https://h/x.jpg").unwrap(), None),
            ]
        );
        assert_eq!(list.name(), "s3://b/lists/train.txt");
        assert_eq!(
            list.samples()[0].path,
            PathBuf::from("s3://b/lists/img/a b.png")
        );
        let err = parse_manifest(b"ok.png\nx.png\tcat\n", &at).unwrap_err();
        assert_eq!(err.line(), Some(2));
        assert!(
            err.to_string().contains("s3://b/lists/train.txt:2"),
            "{err}"
        );
    }

    #[test]
    fn get_out_of_range_names_the_list() {
        let list = SampleList::new("train.txt", vec![Sample::new("a.jpg", Some(1))]);
        assert_eq!(list.get(0).unwrap().label, Some(1));
        let err = list.get(1).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("train.txt"), "{err}");
        assert!(list.get(u64::MAX).is_err());
    }
}
