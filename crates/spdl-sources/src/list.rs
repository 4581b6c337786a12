//! A dataset as a list of samples: a path (or, later, a URI-ready key) and an optional label.
//!
//! This is the in-memory result of every listing (directory walk, list file, ImageFolder): the
//! sampler draws integer indices, and [`SampleList::get`] turns an index back into a sample.

use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

/// One sample of a dataset: where its bytes are, and its class label if the listing gave one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sample {
    /// Where the sample's bytes are, kept byte-exact (no Unicode normalisation, no trimming, no
    /// percent-decoding). Relative to the process's working directory when it is not absolute.
    pub path: PathBuf,
    /// The integer class label (an ImageFolder class index, a list file's label), if any.
    pub label: Option<i64>,
}

impl Sample {
    /// A sample at `path` with an optional label.
    pub fn new(path: impl Into<PathBuf>, label: Option<i64>) -> Self {
        Self {
            path: path.into(),
            label,
        }
    }
}

/// An ordered list of samples with a name that errors use (usually the folder or list file).
///
/// The order is the dataset order: sample `i` is the one the sampler's index `i` designates, as
/// with a map-style PyTorch `Dataset`'s `__getitem__`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleList {
    name: String,
    samples: Vec<Sample>,
}

impl SampleList {
    /// A list named `name` holding `samples` in that order.
    pub fn new(name: impl Into<String>, samples: Vec<Sample>) -> Self {
        Self {
            name: name.into(),
            samples,
        }
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
    fn get_out_of_range_names_the_list() {
        let list = SampleList::new("train.txt", vec![Sample::new("a.jpg", Some(1))]);
        assert_eq!(list.get(0).unwrap().label, Some(1));
        let err = list.get(1).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("train.txt"), "{err}");
        assert!(list.get(u64::MAX).is_err());
    }
}
