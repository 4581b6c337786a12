//! Batches in pool buffers (`HostBatch`: `collate_into`, `load_batch_pooled`) and the pool's
//! bookkeeping, against a host-memory stand-in for pinned memory behind the same
//! `RawAllocator` trait (spdl-cuda's `PinnedPool` is `Pool<PinnedAllocator>`: the same code).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spdl_core::buffer::{BufferPool, HostAllocator, Pool, PoolConfig, RawAllocator};
use spdl_core::BoxError;
use spdl_io::dlpack::DLDeviceType;
use spdl_io::{
    collate_into, collate_normalized_into, BatchItem, DType, ErrorKind, Image, Normalize,
};

/// Host memory that counts live allocations and calls, standing in for `cuMemHostAlloc`.
#[derive(Default, Clone)]
struct StandIn {
    live: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

// SAFETY: forwards to HostAllocator, which upholds the contract.
unsafe impl RawAllocator for StandIn {
    const ALIGN: usize = 4096;
    fn kind(&self) -> &'static str {
        "stand-in-pinned"
    }
    fn allocate(&self, len: usize) -> Result<NonNull<u8>, BoxError> {
        self.live.fetch_add(1, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        let layout = std::alloc::Layout::from_size_align(len.max(1), Self::ALIGN)?;
        // SAFETY: non-zero size.
        NonNull::new(unsafe { std::alloc::alloc(layout) }).ok_or_else(|| "oom".into())
    }
    unsafe fn deallocate(&self, ptr: NonNull<u8>, len: usize) {
        self.live.fetch_sub(1, Ordering::SeqCst);
        let layout = std::alloc::Layout::from_size_align(len.max(1), Self::ALIGN).unwrap();
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
    }
}

fn item(v: u8, w: usize, h: usize) -> BatchItem {
    BatchItem {
        key: format!("img{v}"),
        label: Some(v as i64),
        image: Image::from_u8(vec![v; w * h * 3], w, h, 3).unwrap(),
    }
}

fn items(n: usize) -> Vec<BatchItem> {
    (0..n).map(|i| item(i as u8, 8, 4)).collect()
}

#[test]
fn steady_state_reuses_buffers() {
    let alloc = StandIn::default();
    let pool = Pool::new(alloc.clone(), PoolConfig::default().max_buffers(3));
    let mut held = std::collections::VecDeque::new();
    for _ in 0..50 {
        let b = collate_into(items(4), &pool).unwrap();
        assert_eq!((b.shape, b.dtype, b.len()), ([4, 4, 8, 3], DType::U8, 4));
        assert_eq!(&b.buffer[..3], &[0, 0, 0]);
        assert_eq!(b.buffer[96 * 3], 3);
        assert_eq!(b.labels[2], Some(2));
        held.push_back(b);
        if held.len() > 2 {
            held.pop_front(); // the consumer keeps two batches
        }
    }
    let s = pool.stats();
    assert_eq!(alloc.calls.load(Ordering::SeqCst), 3, "{s:?}");
    assert_eq!(s.allocations, 3);
    assert_eq!(s.reuses, 47);
    assert_eq!(s.in_use, 2);
    assert!(s.peak_bytes <= 3 * 64 * 1024);
}

#[test]
fn bounds_make_the_batch_stage_wait_then_fail() {
    let pool = Pool::new(
        StandIn::default(),
        PoolConfig::default()
            .max_buffers(1)
            .acquire_timeout(Duration::from_millis(30)),
    );
    let a = collate_into(items(2), &pool).unwrap();
    let e = collate_into(items(2), &pool).unwrap_err();
    // One error type: the pool's timeout is a temporary "no batch buffer", its source kept.
    assert_eq!(e.kind(), ErrorKind::Buffer);
    assert!(e.is_temporary());
    assert!(e.to_string().starts_with("no batch buffer: "), "{e}");
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(std::error::Error::source(&e).is_some());
    drop(a);
    collate_into(items(2), &pool).unwrap();
}

#[test]
fn release_on_drop() {
    let alloc = StandIn::default();
    let pool = Pool::new(alloc.clone(), PoolConfig::default());
    let b = collate_into(items(2), &pool).unwrap();
    let c = collate_into(items(2), &pool).unwrap();
    drop(c);
    assert_eq!(alloc.live.load(Ordering::SeqCst), 2);
    drop(pool);
    assert_eq!(
        alloc.live.load(Ordering::SeqCst),
        1,
        "idle buffer freed with the pool"
    );
    // Exported to DLPack: the capsule's keep-alive holds the buffer.
    let e = b.export();
    assert_eq!(e.device.device_type, DLDeviceType::CPU);
    assert_eq!(e.shape, vec![2, 4, 8, 3]);
    let m = e.into_dlpack();
    assert_eq!(
        alloc.live.load(Ordering::SeqCst),
        1,
        "the capsule keeps the batch alive"
    );
    // SAFETY: fresh pointer from into_dlpack, deleted once.
    unsafe { ((*m).deleter.unwrap())(m) };
    assert_eq!(alloc.live.load(Ordering::SeqCst), 0);
}

#[test]
fn shapes_and_normalized() {
    let pool = Pool::new(HostAllocator, PoolConfig::default());
    let e = collate_into(vec![item(1, 8, 4), item(2, 4, 4)], &pool).unwrap_err();
    assert!(e.to_string().contains("img2"), "{e}");
    assert!(collate_into(Vec::new(), &pool).is_err());
    let norm = Normalize {
        mean: vec![0.0; 3],
        std: vec![1.0; 3],
    };
    let b = collate_normalized_into(vec![item(255, 2, 2)], &norm, &pool).unwrap();
    assert_eq!(
        (b.shape, b.dtype, b.nbytes()),
        ([1, 3, 2, 2], DType::F32, 48)
    );
    assert_eq!(f32::from_ne_bytes(b.buffer[..4].try_into().unwrap()), 1.0);
}

#[test]
fn batches_load_straight_into_pool_buffers_as_load_batch_does() {
    use spdl_io::{load_batch, BatchData, BatchSample, ImageOptions, TransformKind};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/samples");
    let mut photos: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jpg"))
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    photos.sort();
    photos.truncate(4);
    photos[1].1.truncate(200); // a truncated JPEG: its row stays zero and is reported
    let samples: Vec<BatchSample> = photos
        .iter()
        .enumerate()
        .map(|(i, (key, _))| BatchSample {
            key: key.clone(),
            label: Some(i as i64),
            index: i as u64,
            epoch: 0,
        })
        .collect();
    let loader_of = |size, transform| {
        let options = ImageOptions {
            size: Some(size),
            transform,
            ..ImageOptions::default()
        };
        options.loader().unwrap()
    };
    let loader = loader_of(48, TransformKind::Eval);
    let pool = Pool::new(StandIn::default(), PoolConfig::default());
    let bytes = |i: usize| Ok(&photos[i].1[..]);
    for norm in [None, Some(Normalize::imagenet())] {
        let want = load_batch(&loader, &samples, norm.as_ref(), 2, bytes).unwrap();
        let (mut got, failed) =
            spdl_io::load_batch_pooled(&loader, &samples, norm.as_ref(), 2, bytes, &pool).unwrap();
        assert_eq!(got.shape, want.batch.shape);
        assert_eq!(got.labels, want.batch.labels);
        assert_eq!(
            failed.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
            [1],
            "{failed:?}"
        );
        let want_bytes: Vec<u8> = match &want.batch.data {
            BatchData::U8(v) => v.clone(),
            BatchData::F32(v) => v.iter().flat_map(|f| f.to_ne_bytes()).collect(),
            BatchData::U16(_) => unreachable!("8-bit photos"),
        };
        assert_eq!(
            &got.buffer[..],
            &want_bytes[..],
            "normalize: {}",
            norm.is_some()
        );
        assert_eq!(
            got.dtype,
            if norm.is_some() {
                DType::F32
            } else {
                DType::U8
            }
        );
        // Dropping the failed row in place gives what `into_delivered` gives.
        let (delivered, _) = want.into_delivered();
        got.drop_failed_rows(&failed);
        assert_eq!(got.shape, delivered.shape);
        assert_eq!(
            (&got.keys, &got.labels),
            (&delivered.keys, &delivered.labels)
        );
        let kept = want_bytes.len() / 4 * 3;
        assert_eq!(got.buffer.len(), kept);
        let row = want_bytes.len() / 4;
        let expected: Vec<u8> = [0, 2, 3]
            .iter()
            .flat_map(|&r| want_bytes[r * row..(r + 1) * row].iter().copied())
            .collect();
        assert_eq!(&got.buffer[..], &expected[..]);
    }
    // A batch over the loader's limits is refused before anything is allocated.
    let huge = loader_of(100_000, TransformKind::Resize);
    let before = pool.stats().allocations;
    let e = spdl_io::load_batch_pooled(&huge, &samples, None, 1, bytes, &pool).unwrap_err();
    assert!(e.to_string().contains("100000x100000"), "{e}");
    assert_eq!(pool.stats().allocations, before);
    // A loader without a fixed output size cannot write in place.
    let free = ImageOptions::default().loader().unwrap();
    let e = spdl_io::load_batch_pooled(&free, &samples, None, 1, bytes, &pool).unwrap_err();
    assert!(e.to_string().contains("fixed output size"), "{e}");
}
