//! Reusable batch buffers: a bounded pool of byte buffers, generic over where the memory
//! comes from.
//!
//! The batch stage asks a [`BufferPool`] for a buffer of `len` bytes, writes the batch into
//! it and passes it on; when the last owner drops the [`PooledBuffer`], the memory goes back
//! to the pool and the next batch reuses it. In steady state no batch allocates.
//!
//! The bookkeeping ([`Pool`]) is separate from the memory ([`RawAllocator`]): [`HostAllocator`]
//! hands out plain host memory (here, usable anywhere and in tests), and other crates plug in
//! their own (spdl-cuda's page-locked `cuMemHostAlloc` memory, as PyTorch's `pin_memory()` and
//! its caching host allocator use). spdl-core itself knows nothing about CUDA.
//!
//! ```
//! use spdl_core::buffer::{BufferPool, HostPool, PoolConfig};
//!
//! let pool = HostPool::host(PoolConfig::default().max_buffers(2));
//! let mut a = pool.acquire(1024)?;
//! a.copy_from_slice(&[7u8; 1024]);
//! let ptr = a.as_ptr();
//! drop(a); // back to the pool
//! let b = pool.acquire(1000)?; // reuses the same memory
//! assert_eq!(b.as_ptr(), ptr);
//! assert_eq!(b.len(), 1000);
//! assert_eq!(pool.stats().allocations, 1);
//! assert_eq!(pool.stats().reuses, 1);
//! # Ok::<(), spdl_core::Error>(())
//! ```

use std::alloc::Layout;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use smart_default::SmartDefault;

use crate::error::{BoxError, Error, ErrorKind, Result};

/// Where a pool's memory comes from.
///
/// # Safety
/// Implementors guarantee that a successful [`RawAllocator::allocate`]`(len)` returns a pointer
/// to `len` bytes (at least 1), aligned to [`RawAllocator::ALIGN`] bytes, readable and writable
/// from any thread, not aliased by anything else, and valid until it is passed back to
/// [`RawAllocator::deallocate`] with the same `len`.
pub unsafe trait RawAllocator: Send + Sync + 'static {
    /// The alignment every allocation has, in bytes (64: a cache line; page-locked CUDA
    /// memory is page aligned).
    const ALIGN: usize = 64;

    /// A short name of the memory kind, for reports (`"host"`, `"cuda-pinned"`).
    fn kind(&self) -> &'static str;

    /// Allocates `len` bytes (`len >= 1`). The contents may be uninitialized.
    ///
    /// # Errors
    /// Whatever the memory source reports (out of memory, no driver).
    fn allocate(&self, len: usize) -> std::result::Result<NonNull<u8>, BoxError>;

    /// Frees memory from [`RawAllocator::allocate`].
    ///
    /// # Safety
    /// `ptr` came from `self.allocate(len)` with this `len` and is not used afterwards.
    unsafe fn deallocate(&self, ptr: NonNull<u8>, len: usize);
}

/// Plain host memory from the global allocator, 64-byte aligned. The stand-in for page-locked
/// memory in tests, and the memory of [`HostPool`].
#[derive(Debug, Clone, Copy, Default)]
pub struct HostAllocator;

// SAFETY: `allocate` returns a fresh allocation of `len.max(1)` bytes with alignment 64 from
// the global allocator, and `deallocate` frees it with the same layout.
unsafe impl RawAllocator for HostAllocator {
    fn kind(&self) -> &'static str {
        "host"
    }

    fn allocate(&self, len: usize) -> std::result::Result<NonNull<u8>, BoxError> {
        let layout = Layout::from_size_align(len.max(1), Self::ALIGN)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        NonNull::new(ptr).ok_or_else(|| format!("host allocation of {len} bytes failed").into())
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, len: usize) {
        // The layout was valid when the memory was allocated, so it is valid now.
        if let Ok(layout) = Layout::from_size_align(len.max(1), Self::ALIGN) {
            // SAFETY: the caller passes a pointer from `allocate(len)`, allocated with this
            // layout, and does not use it afterwards.
            unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
        }
    }
}

/// Bounds and behaviour of a [`Pool`], with builder-style setters.
#[derive(Debug, Clone, PartialEq, SmartDefault)]
pub struct PoolConfig {
    /// Most buffers alive at once, in use or idle (default 4: two batches in flight, one with
    /// the consumer, one spare). Must exceed the number of batches the pipeline holds at once
    /// (sink size + batches in transfer + batches the consumer keeps), or acquiring waits.
    #[default(4)]
    pub max_buffers: usize,
    /// Most bytes allocated at once, in use or idle (default: no limit).
    pub max_bytes: Option<usize>,
    /// How long [`BufferPool::acquire`] waits for a buffer to come back before failing with
    /// [`ErrorKind::Timeout`] (default 60 s). A pool that stays full that long means the
    /// consumer holds more batches than `max_buffers` allows.
    #[default(Duration::from_secs(60))]
    pub acquire_timeout: Duration,
    /// Capacities are rounded up to a multiple of this many bytes (default 64 KiB), so
    /// batches of slightly different sizes share buffers.
    #[default(64 << 10)]
    pub granularity: usize,
}

impl PoolConfig {
    /// Sets [`PoolConfig::max_buffers`] (at least 1).
    pub fn max_buffers(mut self, n: usize) -> Self {
        self.max_buffers = n.max(1);
        self
    }

    /// Sets [`PoolConfig::max_bytes`].
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = Some(bytes);
        self
    }

    /// Sets [`PoolConfig::acquire_timeout`].
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// Sets [`PoolConfig::granularity`] (at least 1 byte).
    pub fn granularity(mut self, bytes: usize) -> Self {
        self.granularity = bytes.max(1);
        self
    }

    fn capacity_for(&self, len: usize) -> usize {
        let g = self.granularity.max(1);
        len.max(1).div_ceil(g).saturating_mul(g)
    }
}

/// Counters of a pool. Sizes are in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers allocated from the memory source (cumulative).
    pub allocations: u64,
    /// Acquisitions served by an idle buffer (cumulative).
    pub reuses: u64,
    /// Buffers freed back to the memory source (cumulative; idle buffers too small for a
    /// request are freed to make room, and everything is freed when the pool goes away).
    pub frees: u64,
    /// Acquisitions that had to wait for a buffer to come back (cumulative).
    pub waits: u64,
    /// Buffers handed out and not yet returned.
    pub in_use: usize,
    /// Buffers in the pool, ready for reuse.
    pub idle: usize,
    /// Bytes allocated now (in use + idle).
    pub bytes: usize,
    /// Most bytes allocated at once.
    pub peak_bytes: usize,
}

/// A pool of reusable byte buffers, as the batch stage sees it (object safe: share it as
/// `Arc<dyn BufferPool>`).
pub trait BufferPool: Send + Sync {
    /// The memory kind (`"host"`, `"cuda-pinned"`).
    fn kind(&self) -> &'static str;

    /// A buffer of `len` bytes, reusing an idle one when one is big enough; waits up to
    /// [`PoolConfig::acquire_timeout`] when the pool is at its bounds and all buffers are in
    /// use. A reused buffer holds the bytes of its last use; a new one is zeroed.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when `len` alone exceeds [`PoolConfig::max_bytes`];
    /// [`ErrorKind::Timeout`] (temporary) when no buffer came back in time;
    /// [`ErrorKind::OpFailed`] when the memory source fails.
    fn acquire(&self, len: usize) -> Result<PooledBuffer>;

    /// As [`BufferPool::acquire`], but `Ok(None)` instead of waiting.
    ///
    /// # Errors
    /// As [`BufferPool::acquire`], except for the timeout.
    fn try_acquire(&self, len: usize) -> Result<Option<PooledBuffer>>;

    /// The pool's counters now.
    fn stats(&self) -> PoolStats;

    /// Frees every idle buffer; returns how many bytes were freed.
    fn trim(&self) -> usize;
}

struct Idle {
    ptr: NonNull<u8>,
    capacity: usize,
}

// SAFETY: the pointer is owned memory from a `RawAllocator`, which is usable from any thread.
unsafe impl Send for Idle {}

struct State {
    idle: Vec<Idle>,
    stats: PoolStats,
    /// Pool handles alive; at 0 the pool is closed: idle buffers are freed and buffers that
    /// come back later are freed at once.
    handles: usize,
}

struct Shared<A: RawAllocator> {
    alloc: A,
    config: PoolConfig,
    state: Mutex<State>,
    returned: Condvar,
}

/// The part of a pool a buffer needs to go back to it.
trait Release: Send + Sync {
    fn release(&self, ptr: NonNull<u8>, capacity: usize);
    fn kind(&self) -> &'static str;
}

impl<A: RawAllocator> Shared<A> {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent counters: recover the guard.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<A: RawAllocator> Release for Shared<A> {
    fn release(&self, ptr: NonNull<u8>, capacity: usize) {
        let mut st = self.lock();
        st.stats.in_use -= 1;
        if st.handles == 0 {
            st.stats.bytes -= capacity;
            st.stats.frees += 1;
            drop(st);
            // SAFETY: the buffer came from `alloc.allocate(capacity)` and its owner is gone.
            unsafe { self.alloc.deallocate(ptr, capacity) };
            return;
        }
        st.stats.idle += 1;
        st.idle.push(Idle { ptr, capacity });
        drop(st);
        self.returned.notify_all();
    }

    fn kind(&self) -> &'static str {
        self.alloc.kind()
    }
}

impl<A: RawAllocator> Drop for Shared<A> {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for b in st.idle.drain(..) {
            // SAFETY: idle buffers came from `alloc.allocate(capacity)` and nothing uses them:
            // every `PooledBuffer` holds an `Arc` of this, so none is alive.
            unsafe { self.alloc.deallocate(b.ptr, b.capacity) };
        }
    }
}

/// The bookkeeping of a bounded buffer pool over a [`RawAllocator`]: best-fit reuse of idle
/// buffers, bounds on count and bytes, waiting when full, and release on drop (dropping the
/// last handle frees the idle buffers; buffers still in use are freed when they are dropped).
///
/// Cheap to clone (a handle to shared state).
pub struct Pool<A: RawAllocator> {
    shared: Arc<Shared<A>>,
}

impl<A: RawAllocator> Clone for Pool<A> {
    fn clone(&self) -> Self {
        self.shared.lock().handles += 1;
        Pool {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<A: RawAllocator> Drop for Pool<A> {
    /// The last handle frees the idle buffers; buffers still in use are freed when dropped.
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.handles -= 1;
        let last = st.handles == 0;
        drop(st);
        if last {
            self.trim();
        }
    }
}

impl<A: RawAllocator> fmt::Debug for Pool<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("kind", &self.shared.alloc.kind())
            .field("config", &self.shared.config)
            .field("stats", &self.stats())
            .finish()
    }
}

/// A pool of plain host memory.
pub type HostPool = Pool<HostAllocator>;

impl HostPool {
    /// A pool of host memory with `config`.
    pub fn host(config: PoolConfig) -> Self {
        Pool::new(HostAllocator, config)
    }
}

enum Step {
    Reuse(Idle),
    Allocate { capacity: usize, evict: Vec<Idle> },
    Wait,
}

impl<A: RawAllocator> Pool<A> {
    /// A pool taking memory from `alloc`. Allocates nothing until the first acquisition.
    pub fn new(alloc: A, config: PoolConfig) -> Self {
        Pool {
            shared: Arc::new(Shared {
                alloc,
                config,
                state: Mutex::new(State {
                    idle: Vec::new(),
                    stats: PoolStats::default(),
                    handles: 1,
                }),
                returned: Condvar::new(),
            }),
        }
    }

    /// The pool's configuration.
    pub fn config(&self) -> &PoolConfig {
        &self.shared.config
    }

    /// The memory source.
    pub fn allocator(&self) -> &A {
        &self.shared.alloc
    }

    /// Decides what to do for a request of `capacity` bytes, under the lock.
    fn plan(&self, st: &mut State, capacity: usize) -> Step {
        let cfg = &self.shared.config;
        // Best fit: the smallest idle buffer that is big enough.
        let best = st
            .idle
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity >= capacity)
            .min_by_key(|(_, b)| b.capacity)
            .map(|(i, _)| i);
        if let Some(i) = best {
            return Step::Reuse(st.idle.swap_remove(i));
        }
        // Make room by freeing idle buffers (all too small), smallest first.
        st.idle.sort_by_key(|b| std::cmp::Reverse(b.capacity));
        let mut evict = Vec::new();
        let fits = |count: usize, bytes: usize| {
            count < cfg.max_buffers && cfg.max_bytes.is_none_or(|m| bytes + capacity <= m)
        };
        let (mut count, mut bytes) = (st.stats.in_use + st.stats.idle, st.stats.bytes);
        while !fits(count, bytes) {
            match st.idle.pop() {
                Some(b) => {
                    count -= 1;
                    bytes -= b.capacity;
                    evict.push(b);
                }
                None => break,
            }
        }
        if fits(count, bytes) {
            Step::Allocate { capacity, evict }
        } else {
            st.idle.extend(evict);
            Step::Wait
        }
    }

    fn acquire_inner(&self, len: usize, wait: bool) -> Result<Option<PooledBuffer>> {
        let shared = &self.shared;
        let capacity = shared.config.capacity_for(len);
        if let Some(max) = shared.config.max_bytes {
            if capacity > max {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "a {len}-byte buffer ({capacity} bytes rounded up) exceeds the pool's \
                         max_bytes of {max}"
                    ),
                ));
            }
        }
        let deadline = Instant::now() + shared.config.acquire_timeout;
        let mut st = shared.lock();
        let mut waited = false;
        loop {
            match self.plan(&mut st, capacity) {
                Step::Reuse(b) => {
                    st.stats.reuses += 1;
                    st.stats.idle -= 1;
                    st.stats.in_use += 1;
                    return Ok(Some(self.wrap(b.ptr, b.capacity, len)));
                }
                Step::Allocate { capacity, evict } => {
                    for b in evict {
                        st.stats.idle -= 1;
                        st.stats.bytes -= b.capacity;
                        st.stats.frees += 1;
                        // SAFETY: an idle buffer came from `allocate(capacity)` and no
                        // `PooledBuffer` refers to it any more.
                        unsafe { shared.alloc.deallocate(b.ptr, b.capacity) };
                    }
                    // Reserve the slot before allocating outside the lock.
                    st.stats.in_use += 1;
                    st.stats.bytes += capacity;
                    st.stats.peak_bytes = st.stats.peak_bytes.max(st.stats.bytes);
                    drop(st);
                    return match shared.alloc.allocate(capacity) {
                        Ok(ptr) => {
                            // SAFETY: `allocate` returned `capacity` writable bytes.
                            unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, capacity) };
                            let mut st = shared.lock();
                            st.stats.allocations += 1;
                            drop(st);
                            Ok(Some(self.wrap(ptr, capacity, len)))
                        }
                        Err(e) => {
                            let mut st = shared.lock();
                            st.stats.in_use -= 1;
                            st.stats.bytes -= capacity;
                            drop(st);
                            shared.returned.notify_all();
                            Err(Error::from_op(
                                ErrorKind::OpFailed,
                                format!(
                                    "allocating a {capacity}-byte {} buffer failed: {e}",
                                    shared.alloc.kind()
                                )
                                .into(),
                            ))
                        }
                    };
                }
                Step::Wait => {
                    if !wait {
                        return Ok(None);
                    }
                    if !waited {
                        waited = true;
                        st.stats.waits += 1;
                    }
                    let now = Instant::now();
                    if now >= deadline {
                        let s = st.stats;
                        return Err(Error::new(
                            ErrorKind::Timeout,
                            format!(
                                "no {} buffer came back within {:?} ({} in use, {} bytes; \
                                 max_buffers {}): the consumer holds more batches than the \
                                 pool allows",
                                shared.alloc.kind(),
                                shared.config.acquire_timeout,
                                s.in_use,
                                s.bytes,
                                shared.config.max_buffers
                            ),
                        )
                        .set_temporary());
                    }
                    st = shared
                        .returned
                        .wait_timeout(st, deadline - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }

    fn wrap(&self, ptr: NonNull<u8>, capacity: usize, len: usize) -> PooledBuffer {
        PooledBuffer {
            ptr,
            len,
            capacity,
            pool: Arc::clone(&self.shared) as Arc<dyn Release>,
        }
    }
}

impl<A: RawAllocator> BufferPool for Pool<A> {
    fn kind(&self) -> &'static str {
        self.shared.alloc.kind()
    }

    fn acquire(&self, len: usize) -> Result<PooledBuffer> {
        self.acquire_inner(len, true)?.ok_or_else(|| {
            Error::new(
                ErrorKind::Timeout,
                "buffer pool: no buffer (unreachable: waiting acquisition)",
            )
        })
    }

    fn try_acquire(&self, len: usize) -> Result<Option<PooledBuffer>> {
        self.acquire_inner(len, false)
    }

    fn stats(&self) -> PoolStats {
        self.shared.lock().stats
    }

    fn trim(&self) -> usize {
        let mut st = self.shared.lock();
        let idle = std::mem::take(&mut st.idle);
        let freed: usize = idle.iter().map(|b| b.capacity).sum();
        st.stats.idle = 0;
        st.stats.bytes -= freed;
        st.stats.frees += idle.len() as u64;
        drop(st);
        for b in idle {
            // SAFETY: idle buffers came from `allocate(capacity)` and nothing refers to them.
            unsafe { self.shared.alloc.deallocate(b.ptr, b.capacity) };
        }
        self.shared.returned.notify_all();
        freed
    }
}

/// A buffer from a pool: `len` bytes usable as `&[u8]` / `&mut [u8]`, going back to its pool
/// on drop. The memory stays valid (and the pool alive) while this value exists; share it
/// with an `Arc` to keep it alive from several views (zero-copy hand-off).
pub struct PooledBuffer {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
    pool: Arc<dyn Release>,
}

// SAFETY: the buffer exclusively owns its memory, which the allocator contract makes usable
// from any thread; `&PooledBuffer` only gives `&[u8]`.
unsafe impl Send for PooledBuffer {}
// SAFETY: as above; shared references only read.
unsafe impl Sync for PooledBuffer {}

impl PooledBuffer {
    /// Bytes in use.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when `len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated (at least `len`, rounded up to the pool's granularity).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The memory kind of the pool it came from (`"host"`, `"cuda-pinned"`).
    pub fn kind(&self) -> &'static str {
        self.pool.kind()
    }

    /// Sets the length to `len` bytes within the capacity.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when `len > capacity()`.
    pub fn set_len(&mut self, len: usize) -> Result<()> {
        if len > self.capacity {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "length {len} exceeds the buffer's capacity {}",
                    self.capacity
                ),
            ));
        }
        self.len = len;
        Ok(())
    }

    /// The start of the memory (for FFI: DMA copies, DLPack export).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The start of the memory, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Deref for PooledBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `capacity >= len` initialized bytes (zeroed on allocation)
        // owned by this buffer.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for PooledBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        self.pool.release(self.ptr, self.capacity);
    }
}

impl fmt::Debug for PooledBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledBuffer")
            .field("kind", &self.kind())
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn pool_config_defaults() {
        let c = PoolConfig::default();
        assert_eq!((c.max_buffers, c.max_bytes), (4, None));
        assert_eq!(c.acquire_timeout, Duration::from_secs(60));
        assert_eq!(c.granularity, 64 << 10);
    }

    #[derive(Default)]
    struct Counting {
        live: Arc<AtomicUsize>,
    }

    // SAFETY: delegates to `HostAllocator`.
    unsafe impl RawAllocator for Counting {
        fn kind(&self) -> &'static str {
            "counting"
        }
        fn allocate(&self, len: usize) -> std::result::Result<NonNull<u8>, BoxError> {
            self.live.fetch_add(1, Ordering::SeqCst);
            HostAllocator.allocate(len)
        }
        unsafe fn deallocate(&self, ptr: NonNull<u8>, len: usize) {
            self.live.fetch_sub(1, Ordering::SeqCst);
            // SAFETY: forwarded from the caller.
            unsafe { HostAllocator.deallocate(ptr, len) }
        }
    }

    fn cfg() -> PoolConfig {
        PoolConfig::default()
            .granularity(1)
            .acquire_timeout(Duration::from_millis(50))
    }

    #[test]
    fn reuses_and_frees_on_drop() {
        let live = Arc::new(AtomicUsize::new(0));
        let pool = Pool::new(Counting { live: live.clone() }, cfg().max_buffers(2));
        for _ in 0..10 {
            let a = pool.acquire(100).unwrap();
            let b = pool.acquire(100).unwrap();
            assert_eq!(a.len(), 100);
            drop((a, b));
        }
        let s = pool.stats();
        assert_eq!((s.allocations, s.reuses, s.idle, s.in_use), (2, 18, 2, 0));
        assert_eq!(live.load(Ordering::SeqCst), 2);
        let buf = pool.acquire(10).unwrap();
        drop(pool);
        assert_eq!(
            live.load(Ordering::SeqCst),
            1,
            "idle buffers freed with the pool"
        );
        assert_eq!(buf.len(), 10);
        drop(buf);
        assert_eq!(live.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn bounds_wait_and_time_out() {
        let pool = HostPool::host(cfg().max_buffers(1));
        let a = pool.acquire(8).unwrap();
        assert!(pool.try_acquire(8).unwrap().is_none());
        let e = pool.acquire(8).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout);
        assert!(e.is_temporary());
        let p2 = pool.clone();
        let t = std::thread::spawn(move || p2.acquire(8).map(|b| b.len()));
        std::thread::sleep(Duration::from_millis(10));
        drop(a);
        assert_eq!(t.join().unwrap().unwrap(), 8);
        assert_eq!(pool.stats().waits, 2);
    }

    #[test]
    fn grows_by_evicting_small_idle_buffers() {
        let pool = HostPool::host(cfg().max_buffers(1).max_bytes(1000));
        drop(pool.acquire(100).unwrap());
        let b = pool.acquire(900).unwrap();
        let s = pool.stats();
        assert_eq!(
            (s.allocations, s.frees, s.bytes, s.peak_bytes),
            (2, 1, 900, 900)
        );
        drop(b);
        let e = pool.acquire(2000).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(pool.trim(), 900);
        assert_eq!(pool.stats().bytes, 0);
    }
}
