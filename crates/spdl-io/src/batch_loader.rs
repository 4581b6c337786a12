//! One call loads a whole batch: each sample is decoded and transformed straight into its row
//! of one batch buffer, on scoped threads; a sample that fails leaves a zero row and is
//! reported with its row, so a batch always has one row per input (Ray Data's `map_batches`
//! and SPDL's `load_image_batch` semantics build on this).

use crate::batch::{
    acquire, as_f32_mut, drop_failed_rows, BatchData, BatchHeader, HostBatch, ImageBatch,
};
use crate::decode::{Image, PixelData};
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::loader::ImageLoader;
use crate::transform::{Normalize, SampleContext};
use spdl_core::buffer::BufferPool;

/// One sample of [`load_batch`]: its name (in errors and in [`BatchHeader::keys`]), its
/// label, and the position that seeds random transforms (`index` in the dataset, `epoch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSample {
    /// Sample name: a path, URL or `"<bytes #i>"`.
    pub key: String,
    /// Class label, if any.
    pub label: Option<i64>,
    /// Index in the dataset (seeds `transform="train"`).
    pub index: u64,
    /// Epoch (seeds `transform="train"`).
    pub epoch: u64,
}

impl BatchSample {
    /// The sample's context for [`ImageLoader`] (key in errors, seed of random transforms).
    pub fn context(&self) -> SampleContext<'_> {
        SampleContext {
            key: &self.key,
            index: self.index,
            epoch: self.epoch,
        }
    }
}

/// What [`load_batch`] returns: every input has its row; `failed` names the rows left zero.
#[derive(Debug)]
pub struct LoadedBatch {
    /// `[N, H, W, C]` u8, or `[N, C, H, W]` f32 when normalized; rows in input order.
    pub batch: ImageBatch,
    /// `(row, error)` for each sample that could not be read or decoded, in row order.
    pub failed: Vec<(usize, Error)>,
}

impl LoadedBatch {
    /// The batch of `samples` (their keys and labels, in row order) over `data`.
    fn new(
        samples: &[BatchSample],
        data: BatchData,
        shape: [usize; 4],
        failed: Vec<(usize, Error)>,
    ) -> Self {
        let header = header_of(shape, data.dtype(), samples);
        LoadedBatch {
            batch: ImageBatch { data, header },
            failed,
        }
    }
}

impl LoadedBatch {
    /// The batch without its failed rows (the rows after a failure move up, in place; nothing
    /// is copied when none failed), and the failures: `[N - failed, ...]` with the keys and
    /// labels of the rows kept. For a loader that drops bad samples rather than zero them.
    pub fn into_delivered(self) -> (ImageBatch, Vec<(usize, Error)>) {
        let LoadedBatch { mut batch, failed } = self;
        let per = batch.shape[1..].iter().product::<usize>();
        let (keys, labels) = (&mut batch.header.keys, &mut batch.header.labels);
        fn compact<T: Copy>(
            data: &mut Vec<T>,
            per: usize,
            keys: &mut Vec<String>,
            labels: &mut Vec<Option<i64>>,
            failed: &[(usize, Error)],
        ) -> usize {
            let kept = drop_failed_rows(data, per, keys, labels, failed);
            data.truncate(kept * per);
            kept
        }
        batch.header.shape[0] = match &mut batch.data {
            BatchData::U8(d) => compact(d, per, keys, labels, &failed),
            BatchData::U16(d) => compact(d, per, keys, labels, &failed),
            BatchData::F32(d) => compact(d, per, keys, labels, &failed),
        };
        (batch, failed)
    }
}

/// Threads for a batch of `n` samples: `requested`, else the CPUs (at most 8), within `1..=n`.
pub fn batch_threads(requested: Option<usize>, n: usize) -> usize {
    requested
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(8)
        })
        .clamp(1, n.max(1))
}

/// Loads `samples` into one batch with `loader`, on `threads` threads; `bytes(i)` gives the
/// encoded bytes of sample `i` (a file read, a slice of a request) and runs on those threads
/// too. With a fixed output shape ([`ImageLoader::output_shape`]) each image is written
/// straight into its row ([`ImageLoader::load_into`]); `normalize` gives `[N, C, H, W]` f32.
/// Without one (`ColorMode::Unchanged`), the first image that loads fixes the shape and a
/// sample of another shape is a failure of its row.
///
/// No samples give an empty batch (`N = 0`) of the fixed shape.
///
/// # Errors
/// [`ErrorKind::Empty`] for no samples and no fixed shape; [`ErrorKind::InvalidArgument`] when the shape is not
/// fixed and no sample loaded (the first sample's error is quoted);
/// [`ErrorKind::LimitExceeded`] before any allocation when a row exceeds the loader's output
/// limit or the batch [`MAX_BATCH_BYTES_PER_LIMIT`] times it. Failures of single
/// samples are not errors: they are in [`LoadedBatch::failed`].
pub fn load_batch<B: AsRef<[u8]>>(
    loader: &ImageLoader,
    samples: &[BatchSample],
    normalize: Option<&Normalize>,
    threads: usize,
    bytes: impl Fn(usize) -> Result<B> + Sync,
) -> Result<LoadedBatch> {
    let n = samples.len();
    if n == 0 && loader.output_shape().is_none() {
        return Err(Error::new(
            ErrorKind::Empty,
            "cannot load an empty batch whose shape is not fixed",
        ));
    }
    if loader.output_shape().is_none() {
        return load_unfixed(loader, samples, normalize, threads, &bytes);
    }
    let layout = batch_layout(loader, n, normalize.is_some())?;
    let (data, failed) = match normalize {
        None => {
            let mut data = vec![0u8; layout.bytes];
            let rows = BatchRows::U8(&mut data);
            let failed = load_batch_into(loader, samples, None, threads, &bytes, rows)?;
            (BatchData::U8(data), failed)
        }
        Some(norm) => {
            let mut data = vec![0f32; layout.bytes / 4];
            let rows = BatchRows::F32(&mut data);
            let failed = load_batch_into(loader, samples, Some(norm), threads, &bytes, rows)?;
            (BatchData::F32(data), failed)
        }
    };
    Ok(LoadedBatch::new(samples, data, layout.shape, failed))
}

/// The rows [`load_batch_into`] writes: `[N, H, W, C]` u8, or `[N, C, H, W]` f32 normalized.
pub enum BatchRows<'a> {
    /// 8-bit pixels, for a loader without normalization.
    U8(&'a mut [u8]),
    /// Normalized floats, for a loader with a [`Normalize`].
    F32(&'a mut [f32]),
}

/// [`load_batch`] into a buffer the caller owns (pooled or pinned memory): each sample is
/// decoded and transformed straight into its row of `rows`; a sample that fails leaves its
/// row zero and is returned with its row, in row order.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] when the loader's output shape is not fixed
/// ([`ImageLoader::output_shape`]), when `rows` is not `N * H * W * C` values, or when its
/// element type does not match `normalize` (u8 without, f32 with).
pub fn load_batch_into<B: AsRef<[u8]>>(
    loader: &ImageLoader,
    samples: &[BatchSample],
    normalize: Option<&Normalize>,
    threads: usize,
    bytes: impl Fn(usize) -> Result<B> + Sync,
    rows: BatchRows<'_>,
) -> Result<Vec<(usize, Error)>> {
    let invalid = |m: String| Error::new(ErrorKind::InvalidArgument, m);
    let Some([h, w, c]) = loader.output_shape() else {
        return Err(not_fixed());
    };
    let (n, per) = (samples.len(), h * w * c);
    let len = match &rows {
        BatchRows::U8(r) => r.len(),
        BatchRows::F32(r) => r.len(),
    };
    if len != n * per {
        return Err(invalid(format!(
            "the batch buffer holds {len} values, {n} rows of {h}x{w}x{c} need {}",
            n * per
        )));
    }
    let ctx = |i: usize| samples[i].context();
    match (rows, normalize) {
        (BatchRows::U8(data), None) => Ok(for_each_row(data, per, threads, |i, row| {
            loader.load_into(bytes(i)?.as_ref(), &ctx(i), row)
        })),
        (BatchRows::F32(data), Some(norm)) => Ok(for_each_row(data, per, threads, |i, row| {
            let img = loader.load(bytes(i)?.as_ref(), &ctx(i))?;
            norm.write_chw(&img, row)
                .map_err(|e| e.with_key(ctx(i).key))
        })),
        _ => Err(invalid(
            "u8 rows are written without normalize, f32 rows with it".into(),
        )),
    }
}

/// The shape and size of a batch written in place (see [`batch_layout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLayout {
    /// `[N, H, W, C]` for u8 rows, `[N, C, H, W]` for normalized f32 rows.
    pub shape: [usize; 4],
    /// Size of the batch buffer in bytes.
    pub bytes: usize,
}

/// The layout of a batch of `n` samples written in place by `loader` (`[N, H, W, C]` u8, or
/// `[N, C, H, W]` f32 when `normalized`), for the caller to allocate its buffer.
///
/// A batch's buffer is allocated before any sample is decoded: each row must pass the
/// loader's output limit (as one image would), and the whole batch at most
/// [`MAX_BATCH_BYTES_PER_LIMIT`] times that limit, so that an absurd size is a named error
/// rather than an allocation failure that aborts the process.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] when the loader's output shape is not fixed;
/// [`ErrorKind::LimitExceeded`] when a row or the batch is over the limits.
pub fn batch_layout(loader: &ImageLoader, n: usize, normalized: bool) -> Result<BatchLayout> {
    let Some([h, w, c]) = loader.output_shape() else {
        return Err(not_fixed());
    };
    let elem = if normalized { 4 } else { 1 };
    let limits = &loader.options.limits;
    limits.check_output(w, h, c, elem)?;
    let total = (n as u64)
        .saturating_mul(h as u64)
        .saturating_mul(w as u64)
        .saturating_mul(c as u64)
        .saturating_mul(elem as u64);
    let most = limits.max_bytes.saturating_mul(MAX_BATCH_BYTES_PER_LIMIT);
    if total > most {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            format!("a batch of {n} x {h}x{w}x{c} ({total} bytes) exceeds {most} bytes"),
        ));
    }
    // At most `most`, a `u64` from the limits; `usize` on every target this crate builds for.
    let bytes = usize::try_from(total).map_err(|_| {
        Error::new(
            ErrorKind::LimitExceeded,
            format!("a batch of {total} bytes does not fit in memory"),
        )
    })?;
    let shape = if normalized {
        [n, c, h, w]
    } else {
        [n, h, w, c]
    };
    Ok(BatchLayout { shape, bytes })
}

fn not_fixed() -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        "a batch written in place needs a fixed output size (width and height, or size)",
    )
}

/// How many images' worth of the output limit one batch may hold (8 GiB by default).
pub const MAX_BATCH_BYTES_PER_LIMIT: u64 = 8;

/// Runs `f(i, row_i)` for the rows of `data` (`per` values each) on `threads` threads; a row
/// whose `f` fails is zeroed and reported.
fn for_each_row<T: Copy + Default + Send>(
    data: &mut [T],
    per: usize,
    threads: usize,
    f: impl Fn(usize, &mut [T]) -> Result<()> + Sync,
) -> Vec<(usize, Error)> {
    let mut rows: Vec<&mut [T]> = data.chunks_mut(per.max(1)).collect();
    for_each_parallel(&mut rows, threads, |i, row| {
        f(i, row).inspect_err(|_| row.fill(T::default()))
    })
}

/// Runs `f(i, &mut items[i])` for every item on `threads` scoped threads; returns the
/// failures, in order. Each thread takes the next item when it is done with one (not a fixed
/// share), so a few large images in a batch do not leave the other threads idle.
fn for_each_parallel<I: Send>(
    items: &mut [I],
    threads: usize,
    f: impl Fn(usize, &mut I) -> Result<()> + Sync,
) -> Vec<(usize, Error)> {
    let threads = threads.clamp(1, items.len().max(1));
    let queue = std::sync::Mutex::new(items.iter_mut().enumerate());
    let run = || {
        let mut failed = Vec::new();
        // The lock is held only to take the next item.
        let next = || queue.lock().unwrap_or_else(|e| e.into_inner()).next();
        while let Some((i, item)) = next() {
            if let Err(e) = f(i, item) {
                failed.push((i, e));
            }
        }
        failed
    };
    let mut failed: Vec<(usize, Error)> = if threads == 1 {
        run()
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|_| s.spawn(run)).collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    };
    failed.sort_by_key(|(i, _)| *i);
    failed
}

/// The path for a loader whose output shape is known only after decoding.
fn load_unfixed<B: AsRef<[u8]>>(
    loader: &ImageLoader,
    samples: &[BatchSample],
    normalize: Option<&Normalize>,
    threads: usize,
    bytes: &(impl Fn(usize) -> Result<B> + Sync),
) -> Result<LoadedBatch> {
    let n = samples.len();
    let ctx = |i: usize| samples[i].context();
    let mut images: Vec<Option<Image>> = vec![None; n];
    let mut failed = for_each_parallel(&mut images, threads, |i, slot| {
        *slot = Some(loader.load(bytes(i)?.as_ref(), &ctx(i))?);
        Ok(())
    });
    let Some(first) = images.iter().flatten().next() else {
        let first = failed.first().map_or(String::new(), |(_, e)| e.to_string());
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "all {n} samples failed and the output shape is not fixed; first error: {first}"
            ),
        ));
    };
    let (shape, depth) = (first.shape(), first.data.bytes_per_sample());
    for (i, slot) in images.iter_mut().enumerate() {
        if let Some(img) =
            slot.take_if(|img| img.shape() != shape || img.data.bytes_per_sample() != depth)
        {
            failed.push((
                i,
                Error::new(
                    ErrorKind::ShapeMismatch,
                    format!("shape {:?} differs from the batch's {shape:?}", img.shape()),
                )
                .with_key(&samples[i].key),
            ));
        }
    }
    failed.sort_by_key(|(i, _)| *i);
    let [h, w, c] = shape;
    let per = h * w * c;
    let (data, shape) = match normalize {
        Some(norm) => {
            let mut out = vec![0f32; n * per];
            for (i, img) in images.iter().enumerate() {
                if let Some(img) = img {
                    norm.write_chw(img, &mut out[i * per..(i + 1) * per])?;
                }
            }
            (BatchData::F32(out), [n, c, h, w])
        }
        None if depth == 2 => {
            let mut out = vec![0u16; n * per];
            for (i, img) in images.iter().enumerate() {
                if let Some(PixelData::U16(v)) = img.as_ref().map(|img| &img.data) {
                    out[i * per..(i + 1) * per].copy_from_slice(v);
                }
            }
            (BatchData::U16(out), [n, h, w, c])
        }
        None => {
            let mut out = vec![0u8; n * per];
            for (i, img) in images.iter().enumerate() {
                if let Some(PixelData::U8(v)) = img.as_ref().map(|img| &img.data) {
                    out[i * per..(i + 1) * per].copy_from_slice(v);
                }
            }
            (BatchData::U8(out), [n, h, w, c])
        }
    };
    Ok(LoadedBatch::new(samples, data, shape, failed))
}

/// The header of a batch of `samples` (their keys and labels, in row order).
fn header_of(shape: [usize; 4], dtype: DType, samples: &[BatchSample]) -> BatchHeader {
    BatchHeader {
        shape,
        dtype,
        keys: samples.iter().map(|s| s.key.clone()).collect(),
        labels: samples.iter().map(|s| s.label).collect(),
    }
}

/// Loads `samples` straight into one buffer from `pool` (plain host memory, or pinned memory
/// before a device copy): each sample is decoded and transformed into its row
/// ([`load_batch_into`]), no copy after decoding. `[N, H, W, C]` u8, or `[N, C, H, W]` f32
/// with `normalize`. A sample that fails leaves its row zero and is returned with its row, in
/// row order.
///
/// # Errors
/// When the loader's output shape is not fixed or the batch is over the loader's limits
/// ([`batch_layout`], checked before anything is allocated: the batch as a whole is refused);
/// [`ErrorKind::Buffer`] when the pool times out or cannot allocate.
pub fn load_batch_pooled<B: AsRef<[u8]>>(
    loader: &ImageLoader,
    samples: &[BatchSample],
    normalize: Option<&Normalize>,
    threads: usize,
    bytes: impl Fn(usize) -> Result<B> + Sync,
    pool: &dyn BufferPool,
) -> Result<(HostBatch, Vec<(usize, Error)>)> {
    // Checked against the loader's limits before anything is allocated.
    let layout = batch_layout(loader, samples.len(), normalize.is_some())?;
    let mut buffer = acquire(pool, layout.bytes)?;
    let (failed, dtype) = match normalize {
        None => {
            let rows = BatchRows::U8(&mut buffer[..]);
            let failed = load_batch_into(loader, samples, None, threads, bytes, rows)?;
            (failed, DType::U8)
        }
        Some(norm) => {
            let rows = BatchRows::F32(as_f32_mut(&mut buffer)?);
            let failed = load_batch_into(loader, samples, Some(norm), threads, bytes, rows)?;
            (failed, DType::F32)
        }
    };
    let header = header_of(layout.shape, dtype, samples);
    Ok((HostBatch { buffer, header }, failed))
}
