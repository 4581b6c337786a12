//! A decoded cache for many-epoch training (what FFCV's `.beton` and TurboLoader's TBL-RAW
//! do): images decoded and resized once to one stored `[H, W, C]` u8 shape, written into one
//! memory-mappable file with a checksummed index ([`CacheWriter`]), then served every later
//! epoch with the random crop, flip and normalization applied at read time
//! ([`DecodedCache::load_batch`]): no epoch after the first decodes a JPEG.
//!
//! Records are addressed by their index in the source listing, so spdl-sources' `Sampler`
//! (shuffle, ranks, resumable state) drives a cache like any other listing.
//!
//! A file that is not a cache, of another version, cut short, or whose header or index fails
//! its checksum is a named error at [`DecodedCache::open`]; a record whose checksum fails (when
//! [`DecodedCache::open`] was asked to verify) or that was never stored is a named error for
//! that sample: never garbage pixels.

mod build;
mod format;
mod write;

use std::fs::File;
use std::path::Path;

pub use build::{build_from_files, BuildReport};
pub use write::CacheWriter;

use crate::batch::{BatchData, ImageBatch};
use crate::error::{Error, ErrorKind, Result};
use crate::transform::Normalize;
use format::{Entry, Header, ENTRY, HEADER, NO_LABEL, STORED};

/// An open decoded cache (memory-mapped). Cheap to share between threads (`&self` methods).
#[derive(Debug)]
pub struct DecodedCache {
    map: memmap2::Mmap,
    header: Header,
    index: Vec<Entry>,
    name: String,
    verify: bool,
}

/// How [`DecodedCache::load_batch`] turns stored records into a training batch. `Default`: the
/// whole record, no flip, u8.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServeOptions {
    /// Side of the square crop taken from each record (`None`: the whole record).
    pub crop: Option<usize>,
    /// Crop at a random position (seeded per sample) instead of the center.
    pub random_crop: bool,
    /// Flip horizontally with probability 1/2 (seeded per sample).
    pub flip: bool,
    /// Normalize into `[N, C, H, W]` f32; `None` gives `[N, H, W, C]` u8.
    pub normalize: Option<Normalize>,
    /// Seed of the random crop and flip (with the epoch and the sample index).
    pub seed: u64,
}

/// SplitMix64's finalizer.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl DecodedCache {
    /// Opens and checks the cache at `path`: header (magic, version, checksum, sizes against
    /// the file's length) and index (checksum). With `verify`, every record read is checked
    /// against its CRC-32 too (about 10 GB/s; off trusts the pixels once the index is good).
    ///
    /// # Errors
    /// Each naming the file: `Read` (cannot open or map it), `UnknownFormat` (not a cache),
    /// `Unsupported` (another version), `Corrupt` (a checksum or an impossible layout),
    /// `Truncated` (shorter than its header says).
    pub fn open(path: impl AsRef<Path>, verify: bool) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let io = |e: std::io::Error| {
            Error::new(ErrorKind::Read, format!("decoded cache: {e}"))
                .with_key(&name)
                .with_source(e)
        };
        let file = File::open(path).map_err(io)?;
        // SAFETY: the map is read-only; a file changed under it by another process is
        // outside this API's contract (as for every memory-mapped dataset format).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        let header = Header::parse(&map[..map.len().min(HEADER)], map.len() as u64, &name)?;
        let start = header.index_offset as usize;
        let index_bytes = &map[start..start + header.count as usize * ENTRY];
        if crc32fast::hash(index_bytes) != header.index_crc {
            return Err(
                Error::new(ErrorKind::Corrupt, "decoded cache: index checksum mismatch")
                    .with_key(&name),
            );
        }
        let index = index_bytes.chunks_exact(ENTRY).map(Entry::parse).collect();
        Ok(DecodedCache {
            map,
            header,
            index,
            name,
            verify,
        })
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True for a cache of no record.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The stored `[H, W, C]` of every record.
    pub fn shape(&self) -> [usize; 3] {
        self.header.shape
    }

    /// The label of record `index` (`None` when it has none or is out of range).
    pub fn label(&self, index: usize) -> Option<i64> {
        self.index
            .get(index)
            .map(|e| e.label)
            .filter(|&l| l != NO_LABEL)
    }

    /// Record `index` as `[H, W, C]` u8, a view into the mapped file.
    ///
    /// # Errors
    /// `InvalidArgument` for an index out of range; `Read` for a record that was not stored
    /// (its decode failed when the cache was built); `Corrupt` when verifying and its
    /// checksum fails. Each names the cache and the record.
    pub fn record(&self, index: usize) -> Result<&[u8]> {
        let key = || format!("{}#{index}", self.name);
        let Some(entry) = self.index.get(index) else {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("record {index} of {} (out of range)", self.index.len()),
            )
            .with_key(&self.name));
        };
        if entry.flags & STORED == 0 {
            return Err(Error::new(
                ErrorKind::Read,
                "not stored: its decode failed when the cache was built",
            )
            .with_key(&key()));
        }
        let size = self.header.record_size() as usize;
        let at = self.header.data_offset as usize + index * size;
        let data = &self.map[at..at + size];
        if self.verify && crc32fast::hash(data) != entry.crc {
            return Err(
                Error::new(ErrorKind::Corrupt, "decoded cache record checksum mismatch")
                    .with_key(&key()),
            );
        }
        Ok(data)
    }

    /// The output `[H, W, C]` of one sample under `opts`.
    fn out_shape(&self, opts: &ServeOptions) -> Result<[usize; 3]> {
        let [h, w, c] = self.header.shape;
        match opts.crop {
            None => Ok([h, w, c]),
            Some(s) if s > 0 && s <= h && s <= w => Ok([s, s, c]),
            Some(s) => Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("crop {s} does not fit the stored {h}x{w} records"),
            )
            .with_key(&self.name)),
        }
    }

    /// A batch of records `indices` for `epoch`: each cropped (at random or centered), maybe
    /// flipped, and written as `[N, H, W, C]` u8 or normalized `[N, C, H, W]` f32 into one
    /// buffer. Crop position and flip depend only on `opts.seed`, `epoch` and the index.
    ///
    /// # Errors
    /// Those of [`DecodedCache::record`] (the first failing record), `InvalidArgument` for a
    /// crop larger than the records, an empty `indices`, or a normalization that does not
    /// match the channels.
    pub fn load_batch(
        &self,
        indices: &[u64],
        epoch: u64,
        opts: &ServeOptions,
    ) -> Result<ImageBatch> {
        if indices.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "an empty batch"));
        }
        let [oh, ow, c] = self.out_shape(opts)?;
        let [h, w, _] = self.header.shape;
        let n = indices.len();
        let per = oh * ow * c;
        let luts = match &opts.normalize {
            Some(norm) => {
                if norm.mean.len() != c || norm.std.len() != c || norm.std.contains(&0.0) {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!("normalize needs {c} means and {c} non-zero stds"),
                    ));
                }
                Some(norm.u8_tables())
            }
            None => None,
        };
        let mut u8_out = if luts.is_none() {
            vec![0u8; n * per]
        } else {
            Vec::new()
        };
        let mut f32_out = if luts.is_some() {
            vec![0f32; n * per]
        } else {
            Vec::new()
        };
        let mut labels = Vec::with_capacity(n);
        let mut keys = Vec::with_capacity(n);
        for (k, &index) in indices.iter().enumerate() {
            let i = usize::try_from(index).unwrap_or(usize::MAX);
            let src = self.record(i)?;
            let r = mix(opts.seed ^ mix(epoch ^ mix(index)));
            let (y0, x0) = if opts.random_crop {
                (
                    (r % (h - oh + 1) as u64) as usize,
                    ((r >> 21) % (w - ow + 1) as u64) as usize,
                )
            } else {
                ((h - oh) / 2, (w - ow) / 2)
            };
            let flip = opts.flip && (r >> 63) == 1;
            match &luts {
                None => {
                    let dst = &mut u8_out[k * per..(k + 1) * per];
                    for y in 0..oh {
                        let row = &src[((y0 + y) * w + x0) * c..((y0 + y) * w + x0 + ow) * c];
                        let out = &mut dst[y * ow * c..(y + 1) * ow * c];
                        if flip {
                            for (o, p) in out.chunks_exact_mut(c).zip(row.chunks_exact(c).rev()) {
                                o.copy_from_slice(p);
                            }
                        } else {
                            out.copy_from_slice(row);
                        }
                    }
                }
                Some(luts) => {
                    let dst = &mut f32_out[k * per..(k + 1) * per];
                    let plane = oh * ow;
                    for y in 0..oh {
                        let row = &src[((y0 + y) * w + x0) * c..((y0 + y) * w + x0 + ow) * c];
                        for (ch, lut) in luts.iter().enumerate() {
                            let out = &mut dst[ch * plane + y * ow..ch * plane + (y + 1) * ow];
                            for (x, o) in out.iter_mut().enumerate() {
                                let sx = if flip { ow - 1 - x } else { x };
                                *o = lut[row[sx * c + ch] as usize];
                            }
                        }
                    }
                }
            }
            labels.push(self.label(i));
            keys.push(format!("{}#{index}", self.name));
        }
        let (data, shape) = match luts {
            None => (BatchData::U8(u8_out), [n, oh, ow, c]),
            Some(_) => (BatchData::F32(f32_out), [n, c, oh, ow]),
        };
        Ok(ImageBatch::new(data, shape, keys, labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Record `i` of a 4x6x3 cache: pixel `(y, x)` channel `ch` is `i*50 + y*10 + x + ch`.
    fn pixels(i: u64) -> Vec<u8> {
        let mut v = Vec::new();
        for y in 0..4u64 {
            for x in 0..6u64 {
                for ch in 0..3u64 {
                    v.push((i * 50 + y * 10 + x + ch) as u8);
                }
            }
        }
        v
    }

    fn write(dir: &Path, n: u64) -> std::path::PathBuf {
        let path = dir.join("c.spdlcache");
        let w = CacheWriter::create(&path, [4, 6, 3], n).unwrap();
        for i in (0..n).rev().filter(|&i| i != 2) {
            w.put(i, &pixels(i), Some(i as i64 * 3)).unwrap();
        }
        assert_eq!(w.finish().unwrap(), u64::from(n > 2));
        path
    }

    #[test]
    fn only_a_regular_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link.spdlcache");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let e = CacheWriter::create(&link, [4, 6, 3], 1).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn records_round_trip_and_crops_and_flips_are_exact() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), 4);
        let cache = DecodedCache::open(&path, true).unwrap();
        assert_eq!((cache.len(), cache.shape()), (4, [4, 6, 3]));
        assert_eq!(cache.record(3).unwrap(), &pixels(3)[..]);
        assert_eq!(cache.label(1), Some(3));
        let e = cache.record(2).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Read);
        assert!(e.to_string().contains("c.spdlcache#2"), "{e}");

        // Center crop 2x2 of record 1: rows 1..3, columns 2..4.
        let opts = ServeOptions {
            crop: Some(2),
            ..ServeOptions::default()
        };
        let b = cache.load_batch(&[1], 0, &opts).unwrap();
        assert_eq!(b.shape, [1, 2, 2, 3]);
        let BatchData::U8(v) = &b.data else { panic!() };
        let at = |y: u8, x: u8, ch: u8| 50 + y * 10 + x + ch;
        assert_eq!(
            v[..6],
            [
                at(1, 2, 0),
                at(1, 2, 1),
                at(1, 2, 2),
                at(1, 3, 0),
                at(1, 3, 1),
                at(1, 3, 2)
            ]
        );

        // Random crops and flips: every output pixel row is a (maybe reversed) run of a
        // stored row, and both flips occur over many epochs.
        let opts = ServeOptions {
            crop: Some(3),
            random_crop: true,
            flip: true,
            normalize: Some(Normalize::unit(3)),
            seed: 9,
        };
        let mut flips = [0; 2];
        for epoch in 0..40 {
            let b = cache.load_batch(&[0], epoch, &opts).unwrap();
            assert_eq!(b.shape, [1, 3, 3, 3]);
            let BatchData::F32(v) = &b.data else { panic!() };
            let px = |ch: usize, y: usize, x: usize| (v[ch * 9 + y * 3 + x] * 255.0).round() as i32;
            let (y0, x_first) = (px(0, 0, 0) / 10, px(0, 0, 0) % 10);
            let step = px(0, 0, 1) - px(0, 0, 0);
            assert!(step == 1 || step == -1);
            flips[usize::from(step == -1)] += 1;
            for y in 0..3 {
                for x in 0..3 {
                    let want = (y0 + y as i32) * 10 + x_first + step * x as i32;
                    for ch in 0..3 {
                        assert_eq!(px(ch, y, x), want + ch as i32);
                    }
                }
            }
            // Seeded: the same epoch gives the same batch.
            assert_eq!(cache.load_batch(&[0], epoch, &opts).unwrap(), b);
        }
        assert!(flips[0] > 0 && flips[1] > 0, "{flips:?}");
    }

    #[test]
    fn an_empty_cache_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty");
        CacheWriter::create(&path, [2, 2, 3], 0)
            .unwrap()
            .finish()
            .unwrap();
        let c = DecodedCache::open(&path, true).unwrap();
        assert!(c.is_empty());
        let e = c.load_batch(&[0], 0, &ServeOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn corrupt_and_short_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), 3);
        let good = std::fs::read(&path).unwrap();
        let bad = dir.path().join("bad");
        let check = |bytes: &[u8], kind: ErrorKind| {
            std::fs::write(&bad, bytes).unwrap();
            let e = DecodedCache::open(&bad, true).unwrap_err();
            assert_eq!(e.kind(), kind, "{e}");
            assert!(e.to_string().contains("bad"), "{e}");
        };
        check(&good[..good.len() - 1], ErrorKind::Truncated);
        check(&good[..100], ErrorKind::Truncated);
        check(b"GIF89a not a cache at all, but long enough to hold a header........................................................", ErrorKind::UnknownFormat);
        let mut flipped = good.clone();
        flipped[30] ^= 1;
        check(&flipped, ErrorKind::Corrupt);
        let mut index = good.clone();
        let n = index.len();
        index[n - 5] ^= 1;
        check(&index, ErrorKind::Corrupt);
        // A flipped pixel: the file opens, the record fails by name when verifying.
        let mut pixel = good.clone();
        pixel[4096 + 72 + 5] ^= 1;
        std::fs::write(&bad, &pixel).unwrap();
        let cache = DecodedCache::open(&bad, true).unwrap();
        let e = cache.record(1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert!(e.to_string().contains("bad#1"), "{e}");
        assert!(cache.record(0).is_ok());
    }
}
