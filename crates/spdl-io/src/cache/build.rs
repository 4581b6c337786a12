//! Building a decoded cache from image files on several threads.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::CacheWriter;
use crate::error::{Error, ErrorKind, Result};
use crate::{ImageLoader, SampleContext};

/// What [`build_from_files`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildReport {
    /// Records stored.
    pub stored: u64,
    /// `"path: reason"` for every image that could not be read or decoded (not stored).
    pub failures: Vec<String>,
    /// Bytes of image files read.
    pub bytes_read: u64,
    /// The stored `[H, W, C]`.
    pub shape: [usize; 3],
}

/// Decodes `paths` with `loader` (whose transform must fix the output shape, e.g. a resize
/// or eval transform with a size) on `threads` threads into a cache at `out`: record `i` is
/// `paths[i]`, labelled `labels[i]` when given. Failed images are reported, not stored.
///
/// # Errors
/// `InvalidArgument` when the loader's output shape is not fixed or `labels` has another
/// length; `LimitExceeded` when a record would exceed the loader's output limit; the errors
/// of [`CacheWriter`].
pub fn build_from_files(
    paths: &[PathBuf],
    labels: Option<&[i64]>,
    loader: &ImageLoader,
    out: &Path,
    threads: usize,
) -> Result<BuildReport> {
    let shape = loader.output_shape().ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidArgument,
            "the cache needs a transform with a fixed output shape (a size)",
        )
    })?;
    if labels.is_some_and(|l| l.len() != paths.len()) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "labels must have one entry per path",
        ));
    }
    // Each record must pass the loader's output limit, as one loaded image would: checked
    // before the file (records x size) is made.
    let [h, w, c] = shape;
    loader.options.limits.check_output(w, h, c, 1)?;
    let writer = CacheWriter::create(out, shape, paths.len() as u64)?;
    let next = AtomicUsize::new(0);
    let bytes_read = AtomicU64::new(0);
    let failures: Mutex<Vec<(usize, String)>> = Mutex::default();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = paths.get(i) else { break };
                let key = crate::key_from_path(path);
                let ctx = SampleContext {
                    key: &key,
                    index: i as u64,
                    epoch: 0,
                };
                let stored = std::fs::read(path)
                    .map_err(|e| e.to_string())
                    .and_then(|bytes| {
                        bytes_read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                        loader.load(&bytes, &ctx).map_err(|e| e.to_string())
                    })
                    .and_then(|img| {
                        let px = img.as_u8().ok_or("a 16-bit image is not cached")?;
                        let label = labels.map(|l| l[i]);
                        writer.put(i as u64, px, label).map_err(|e| e.to_string())
                    });
                if let Err(e) = stored {
                    failures
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((i, format!("{key}: {e}")));
                }
            });
        }
    });
    let missing = writer.finish()?;
    let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    failures.sort();
    Ok(BuildReport {
        stored: paths.len() as u64 - missing,
        failures: failures.into_iter().map(|(_, f)| f).collect(),
        bytes_read: bytes_read.into_inner(),
        shape,
    })
}
