//! The transfer stage: a host batch (ideally in pinned memory) becomes a [`DeviceBatch`] by an
//! asynchronous host-to-device copy on the device's dedicated copy stream, completed by a CUDA
//! event. This is SPDL's `transfer` step (and what `pin_memory=True` plus
//! `.cuda(non_blocking=True)` does in a PyTorch loop), without a Python thread.
//!
//! Double buffering: [`TransferStage::iter`] (or the stage as a pipeline op followed by a sink
//! of 2) submits the copy of batch N+1 before the consumer gets batch N, so the copy overlaps
//! the consumer's work. The host buffer goes back to its pool only once its copy has completed.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use spdl_core::buffer::PooledBuffer;
use spdl_core::OpResult;

use crate::driver::CudaDevice;
use crate::error::{Error, Result};
use crate::stream::{ConsumerStream, CopyStream, Event};
use spdl_io::dlpack::{DLDevice, TensorExport};
use spdl_io::{BatchHeader, HostBatch};

/// Device memory allocated stream-ordered on a copy stream, freed when the last
/// [`DeviceBuffer`] / [`DeviceBatch`] view is dropped, after the work of every consumer stream
/// registered with [`DeviceBuffer::record_stream`] (PyTorch's `Tensor.record_stream`).
#[derive(derive_more::Debug)]
pub struct DeviceMemory {
    #[debug("{ptr:#x}")]
    ptr: u64,
    len: usize,
    #[debug(skip)]
    stream: Arc<CopyStream>,
    #[debug(skip)]
    consumers: Mutex<Vec<usize>>,
    /// Where the memory came from a caller's allocator ([`DeviceAllocator`]), it goes back
    /// there instead of to the driver.
    #[debug(skip)]
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    external: Option<Arc<dyn DeviceAllocator>>,
}

/// A caller's device allocator (SPDL's `cuda_config(allocator=(alloc, free))`, e.g. PyTorch's
/// caching allocator): device memory for transfers comes from [`DeviceAllocator::allocate`]
/// and goes back through [`DeviceAllocator::release`] when the last view of it is dropped.
pub trait DeviceAllocator: Send + Sync {
    /// `len` bytes (at least 1) of device memory on device `device_index`, for use on the
    /// stream `stream` (a `CUstream` value, as the caller configured it): the `CUdeviceptr`.
    ///
    /// # Errors
    /// Whatever the allocator reports (as [`Error::Driver`] or [`Error::InvalidArgument`]).
    fn allocate(&self, len: usize, device_index: usize, stream: usize) -> Result<u64>;

    /// Gives back memory [`DeviceAllocator::allocate`] returned. Called once per allocation,
    /// after the work queued on the copy stream (and on every recorded consumer stream) is
    /// complete; errors are the allocator's to report (they cannot propagate from a drop).
    fn release(&self, ptr: u64);
}

impl DeviceMemory {
    /// `len` bytes (uninitialized) on `stream`'s device, ordered after the work queued on it.
    pub(crate) fn alloc(stream: &Arc<CopyStream>, len: usize) -> Result<DeviceMemory> {
        #[cfg(feature = "cuda")]
        {
            use cudarc::driver::result;
            let dev = stream.device();
            dev.bind()?;
            let n = len.max(1);
            // SAFETY: the context is current and the stream belongs to it; the memory is
            // uninitialized until the copy (or decode) that follows writes it.
            let ptr = unsafe {
                if dev.ctx.has_async_alloc() {
                    result::malloc_async(stream.stream.cu_stream(), n)
                } else {
                    result::malloc_sync(n)
                }
            }
            .map_err(|e| Error::driver("cuMemAllocAsync", e))?;
            Ok(DeviceMemory {
                ptr,
                len,
                stream: Arc::clone(stream),
                consumers: Mutex::new(Vec::new()),
                external: None,
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = len;
            match stream.device().never {}
        }
    }

    /// `len` bytes from `allocator` for `stream`'s device (the caller's stream value
    /// `user_stream` is handed to it), given back to it when dropped.
    pub(crate) fn alloc_external(
        stream: &Arc<CopyStream>,
        len: usize,
        allocator: &Arc<dyn DeviceAllocator>,
        user_stream: usize,
    ) -> Result<DeviceMemory> {
        let index = stream.device().index();
        let ptr = allocator.allocate(len.max(1), index, user_stream)?;
        if ptr == 0 {
            return Err(Error::InvalidArgument(format!(
                "the device allocator returned a null pointer for {len} bytes on device {index}"
            )));
        }
        Ok(DeviceMemory {
            ptr,
            len,
            stream: Arc::clone(stream),
            consumers: Mutex::new(Vec::new()),
            external: Some(Arc::clone(allocator)),
        })
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        #[cfg(feature = "cuda")]
        {
            use cudarc::driver::{result, sys};
            let dev = self.stream.device();
            if dev.bind().is_err() {
                return;
            }
            let copy = self.stream.stream.cu_stream();
            let consumers =
                std::mem::take(self.consumers.get_mut().unwrap_or_else(|e| e.into_inner()));
            for raw in consumers {
                // Order the free after the consumer's queued work: record an event on its
                // stream and make the copy stream wait for it.
                let Ok(ev) = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
                else {
                    // Cannot order: fall back to waiting for the whole device.
                    let _ = dev.synchronize();
                    continue;
                };
                // SAFETY: `ev` is a fresh event of this context; `raw` was registered through
                // the unsafe `record_stream`, whose caller vouched it is a live stream.
                unsafe {
                    if result::event::record(ev, raw as sys::CUstream).is_err()
                        || sys::cuStreamWaitEvent(copy, ev, 0).result().is_err()
                    {
                        let _ = dev.synchronize();
                    }
                    let _ = result::event::destroy(ev);
                }
            }
            if let Some(allocator) = self.external.take() {
                // The caller's allocator knows nothing of our copy stream: wait for it (and
                // the consumers it now waits for) before handing the memory back.
                if self.stream.synchronize().is_err() {
                    let _ = dev.synchronize();
                }
                allocator.release(self.ptr);
                return;
            }
            // SAFETY: `ptr` came from malloc_async/malloc_sync in `alloc` and no view exists
            // (this is the last owner); the free is ordered after the copy stream's work,
            // which now includes every registered consumer's.
            let r = unsafe {
                if dev.ctx.has_async_alloc() {
                    result::free_async(self.ptr, copy)
                } else {
                    result::free_sync(self.ptr)
                }
            };
            if let Err(e) = r {
                tracing::warn!(error = ?e, "freeing device memory failed");
            }
        }
    }
}

/// A shared handle to device memory: the device pointer, size, device and the keep-alive.
/// Clones are views of the same memory; the memory is freed after the last one is dropped.
#[derive(Debug, Clone)]
pub struct DeviceBuffer {
    mem: Arc<DeviceMemory>,
}

impl DeviceBuffer {
    /// `len` bytes of uninitialized device memory, allocated on `stream` (stream-ordered
    /// `cuMemAllocAsync` where the device supports memory pools: no real allocation in
    /// steady state).
    ///
    /// # Errors
    /// [`Error::Driver`] when the allocation fails (out of memory).
    pub fn alloc(stream: &Arc<CopyStream>, len: usize) -> Result<DeviceBuffer> {
        Ok(DeviceBuffer {
            mem: Arc::new(DeviceMemory::alloc(stream, len)?),
        })
    }

    /// `len` bytes of uninitialized device memory from `allocator` (which gets the device
    /// index and `user_stream`), given back to it after the last view is dropped.
    ///
    /// # Errors
    /// What the allocator reports; [`Error::InvalidArgument`] for a null pointer.
    pub fn alloc_with(
        stream: &Arc<CopyStream>,
        len: usize,
        allocator: &Arc<dyn DeviceAllocator>,
        user_stream: usize,
    ) -> Result<DeviceBuffer> {
        Ok(DeviceBuffer {
            mem: Arc::new(DeviceMemory::alloc_external(
                stream,
                len,
                allocator,
                user_stream,
            )?),
        })
    }

    /// The device pointer (`CUdeviceptr`).
    pub fn device_ptr(&self) -> u64 {
        self.mem.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.mem.len
    }

    /// True for zero bytes.
    pub fn is_empty(&self) -> bool {
        self.mem.len == 0
    }

    /// The device index.
    pub fn device_index(&self) -> usize {
        self.mem.stream.device().index()
    }

    /// The copy stream the memory is allocated (and filled) on.
    pub fn stream(&self) -> &Arc<CopyStream> {
        &self.mem.stream
    }

    /// An owner of the memory, for DLPack's `manager_ctx` / a Python object's base.
    pub fn keep_alive(&self) -> Arc<DeviceMemory> {
        Arc::clone(&self.mem)
    }

    /// Registers a stream that uses the memory: when the last view is dropped, the free waits
    /// for the work queued on that stream by then (PyTorch's `Tensor.record_stream`).
    ///
    /// # Safety
    /// `stream` is 1, 2, or a `CUstream` of this device's context that stays alive until this
    /// memory is freed.
    pub unsafe fn record_stream(&self, stream: ConsumerStream) {
        if let ConsumerStream::Raw(raw) = stream {
            let mut c = self.mem.consumers.lock().unwrap_or_else(|e| e.into_inner());
            if !c.contains(&raw) {
                c.push(raw);
            }
        }
    }

    /// Copies the memory back to a `Vec` (synchronously, on the copy stream); for checks.
    ///
    /// # Errors
    /// [`Error::Driver`] when the copy fails.
    pub fn to_host(&self) -> Result<Vec<u8>> {
        #[cfg(feature = "cuda")]
        {
            use cudarc::driver::result;
            let s = &self.mem.stream;
            s.device().bind()?;
            let mut out = vec![0u8; self.mem.len];
            // SAFETY: `out` has `len` bytes, the device memory too; the copy is synchronized
            // before `out` is returned.
            unsafe { result::memcpy_dtoh_async(&mut out, self.mem.ptr, s.stream.cu_stream()) }
                .map_err(|e| Error::driver("cuMemcpyDtoHAsync", e))?;
            s.synchronize()?;
            Ok(out)
        }
        #[cfg(not(feature = "cuda"))]
        {
            match self.mem.stream.device().never {}
        }
    }
}

/// A batch in device memory: `[N, H, W, C]` (u8/u16) or `[N, C, H, W]` (f32), contiguous, on
/// device [`DeviceBatch::device_index`], with the same [`BatchHeader`] as a host batch
/// (`batch.shape`, `batch.keys`, `batch.nbytes()`, ... read through it). Ready once its event
/// completes: wait on the host ([`DeviceBatch::synchronize`]) or on a stream
/// ([`DeviceBatch::export`] does it for DLPack). Clones are views; the memory stays valid until
/// every view (and every exported tensor) is dropped.
#[derive(Debug, Clone)]
pub struct DeviceBatch {
    /// The memory.
    pub buffer: DeviceBuffer,
    /// Shape, element type, keys and labels.
    pub header: BatchHeader,
    ready: Arc<Event>,
}

impl std::ops::Deref for DeviceBatch {
    type Target = BatchHeader;

    fn deref(&self) -> &BatchHeader {
        &self.header
    }
}

impl DeviceBatch {
    pub(crate) fn new(buffer: DeviceBuffer, header: BatchHeader, ready: Event) -> DeviceBatch {
        DeviceBatch {
            buffer,
            header,
            ready: Arc::new(ready),
        }
    }

    /// The device pointer of the first element.
    pub fn data_ptr(&self) -> u64 {
        self.buffer.device_ptr()
    }

    /// The device index (`cuda:N`).
    pub fn device_index(&self) -> usize {
        self.buffer.device_index()
    }

    /// The raw copy stream the data is produced on.
    pub fn stream(&self) -> usize {
        self.buffer.stream().raw()
    }

    /// The completion event of the copy (or decode) that fills the batch.
    pub fn ready_event(&self) -> &Event {
        &self.ready
    }

    /// Blocks until the data is on the device.
    ///
    /// # Errors
    /// [`Error::Driver`] with an error of the copy.
    pub fn synchronize(&self) -> Result<()> {
        self.ready.synchronize()
    }

    /// The zero-copy export for `__dlpack__(stream=...)`: makes `consumer` wait (on the GPU)
    /// for the data, registers it so the memory is freed only after its work, and describes
    /// the tensor (`kDLCUDA`, this device). For `__cuda_array_interface__`, pass
    /// [`ConsumerStream::NoSync`]: the export's `stream` then names the copy stream for the
    /// consumer to wait on.
    ///
    /// # Errors
    /// [`Error::Driver`] when the stream wait fails.
    ///
    /// # Safety
    /// A [`ConsumerStream::Raw`] handle is 1, 2 or a live `CUstream` of this device's context
    /// that outlives the exported tensor.
    pub unsafe fn export(&self, consumer: ConsumerStream) -> Result<TensorExport> {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.ready.wait_on(consumer)?;
            self.buffer.record_stream(consumer);
        }
        Ok(TensorExport {
            data_ptr: self.data_ptr(),
            device: DLDevice::cuda(self.device_index()),
            shape: self.header.shape.iter().map(|&d| d as i64).collect(),
            dtype: self.header.dtype,
            stream: match consumer {
                ConsumerStream::NoSync => Some(self.stream()),
                ConsumerStream::Raw(_) => None,
            },
            keep_alive: Arc::new(self.clone()),
        })
    }

    /// Copies the batch back to host memory (synchronously); for checks and tests.
    ///
    /// # Errors
    /// [`Error::Driver`] when a copy fails.
    pub fn to_host(&self) -> Result<Vec<u8>> {
        self.synchronize()?;
        self.buffer.to_host()
    }
}

/// Counters of a [`TransferStage`]. `copy_seconds` is GPU time between the events around the
/// copies (not host wall time).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TransferStats {
    /// Batches copied.
    pub batches: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// GPU seconds spent copying (sum over batches).
    pub copy_seconds: f64,
    /// Batches whose host memory was not pinned (slower, host-blocking copies).
    pub pageable_batches: u64,
}

impl TransferStats {
    /// Host-to-device throughput in GB/s (10^9 bytes per second of copy time); 0 before the
    /// first batch.
    pub fn gbps(&self) -> f64 {
        if self.copy_seconds > 0.0 {
            self.bytes as f64 / self.copy_seconds / 1e9
        } else {
            0.0
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    batches: AtomicU64,
    bytes: AtomicU64,
    copy_ns: AtomicU64,
    pageable: AtomicU64,
}

/// Host batches to device batches on one device's copy stream. Cheap to clone (shared
/// stream and counters); usable from any thread.
#[derive(Debug, Clone)]
pub struct TransferStage {
    stream: Arc<CopyStream>,
    counters: Arc<Counters>,
}

/// A submitted copy: the device batch (not yet ready) and the host buffer it reads, which is
/// held until the copy completes (returning it earlier would let the next batch overwrite
/// bytes still being read). Dropping it waits for the copy.
#[derive(Debug)]
pub struct PendingTransfer {
    batch: Option<DeviceBatch>,
    host: Option<PooledBuffer>,
    start: Option<Event>,
    counters: Arc<Counters>,
}

impl PendingTransfer {
    /// Whether the copy has completed, without waiting.
    ///
    /// # Errors
    /// [`Error::Driver`] for an error of the copy.
    pub fn is_complete(&self) -> Result<bool> {
        match &self.batch {
            Some(b) => b.ready.is_complete(),
            None => Ok(true),
        }
    }

    /// Waits for the copy, returns the host buffer to its pool and yields the device batch.
    ///
    /// # Errors
    /// [`Error::Driver`] with an error of the copy.
    pub fn wait(mut self) -> Result<DeviceBatch> {
        let batch = self
            .batch
            .take()
            .ok_or_else(|| Error::InvalidArgument("transfer already taken".into()))?;
        batch.ready.synchronize()?;
        if let Some(start) = self.start.take() {
            let ms = start.elapsed_ms(&batch.ready)?;
            self.counters
                .copy_ns
                .fetch_add((f64::from(ms) * 1e6) as u64, Ordering::Relaxed);
        }
        self.host = None;
        Ok(batch)
    }
}

impl Drop for PendingTransfer {
    fn drop(&mut self) {
        if let (Some(b), Some(_)) = (&self.batch, &self.host) {
            // Never hand the host buffer back while the DMA may still read it.
            if let Err(e) = b.ready.synchronize() {
                tracing::warn!(error = %e, "waiting for an abandoned transfer failed");
            }
        }
    }
}

impl TransferStage {
    /// A stage copying to `device` on its dedicated copy stream.
    ///
    /// # Errors
    /// [`Error::Driver`] when the stream cannot be created.
    pub fn new(device: &CudaDevice) -> Result<Self> {
        Ok(TransferStage {
            stream: CopyStream::for_device(device)?,
            counters: Arc::default(),
        })
    }

    /// The device copied to.
    pub fn device(&self) -> &CudaDevice {
        self.stream.device()
    }

    /// The copy stream.
    pub fn stream(&self) -> &Arc<CopyStream> {
        &self.stream
    }

    /// Counters so far (GB/s with [`TransferStats::gbps`]).
    pub fn stats(&self) -> TransferStats {
        let c = &self.counters;
        TransferStats {
            batches: c.batches.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            copy_seconds: c.copy_ns.load(Ordering::Relaxed) as f64 / 1e9,
            pageable_batches: c.pageable.load(Ordering::Relaxed),
        }
    }

    /// Enqueues the copy of `host` (device allocation, `cuMemcpyHtoDAsync`, completion event)
    /// and returns at once for pinned memory (pageable memory makes the driver stage the copy
    /// and the call blocks until the data is read).
    ///
    /// # Errors
    /// [`Error::Driver`] when allocation or the copy fails to enqueue.
    pub fn submit(&self, host: HostBatch) -> Result<PendingTransfer> {
        let pinned = host.is_pinned();
        let HostBatch { buffer, header } = host;
        let dev = DeviceBuffer::alloc(&self.stream, buffer.len())?;
        let start = self.stream.record(true)?;
        self.copy_to(&buffer, &dev)?;
        let ready = self.stream.record(true)?;
        let c = &self.counters;
        c.batches.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(buffer.len() as u64, Ordering::Relaxed);
        if !pinned {
            c.pageable.fetch_add(1, Ordering::Relaxed);
        }
        Ok(PendingTransfer {
            batch: Some(DeviceBatch::new(dev, header, ready)),
            host: Some(buffer),
            start: Some(start),
            counters: Arc::clone(&self.counters),
        })
    }

    fn copy_to(&self, src: &[u8], dst: &DeviceBuffer) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            self.stream.device().bind()?;
            // SAFETY: `dst` has at least `src.len()` bytes (allocated for it); `src` is kept
            // alive (held by the PendingTransfer, or synchronized by the caller) until the
            // completion event recorded after this copy has fired.
            unsafe {
                cudarc::driver::result::memcpy_htod_async(
                    dst.device_ptr(),
                    src,
                    self.stream.stream.cu_stream(),
                )
            }
            .map_err(|e| Error::driver("cuMemcpyHtoDAsync", e))
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (src, dst);
            match self.stream.device().never {}
        }
    }

    /// Copies host memory of any kind (`bytes`, `header.nbytes()` of them)
    /// into a new [`DeviceBatch`] and waits for the copy (the caller keeps `bytes`, so the
    /// copy must be over before returning). For batches that are not in a pool buffer (a
    /// one-off copy, or when the pinned pool is exhausted); pageable memory makes the driver
    /// stage the copy, which is slower than from pinned memory ([`TransferStats`] counts it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `bytes` does not match the header's shape and dtype;
    /// [`Error::Driver`] when allocation or the copy fails.
    pub fn transfer_slice(&self, bytes: &[u8], header: BatchHeader) -> Result<DeviceBatch> {
        self.transfer_slice_into(bytes, header, None)
    }

    /// [`TransferStage::transfer_slice`], into memory from `allocator` when one is given
    /// (SPDL's `cuda_config(allocator=...)`): it is called with the byte count, the device
    /// index and the `usize` user stream paired with it, and gets the memory back after the
    /// last view is dropped.
    pub(crate) fn transfer_slice_into(
        &self,
        bytes: &[u8],
        header: BatchHeader,
        allocator: Option<(&Arc<dyn DeviceAllocator>, usize)>,
    ) -> Result<DeviceBatch> {
        let want = header.nbytes();
        if bytes.len() != want {
            return Err(Error::InvalidArgument(format!(
                "{} bytes for a {:?} {:?} batch of {want} bytes",
                bytes.len(),
                header.shape,
                header.dtype
            )));
        }
        let dev = match allocator {
            None => DeviceBuffer::alloc(&self.stream, bytes.len())?,
            Some((a, user_stream)) => {
                DeviceBuffer::alloc_with(&self.stream, bytes.len(), a, user_stream)?
            }
        };
        let start = self.stream.record(true)?;
        self.copy_to(bytes, &dev)?;
        let ready = self.stream.record(true)?;
        ready.synchronize()?;
        let ms = start.elapsed_ms(&ready)?;
        let c = &self.counters;
        c.batches.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        c.pageable.fetch_add(1, Ordering::Relaxed);
        c.copy_ns
            .fetch_add((f64::from(ms) * 1e6) as u64, Ordering::Relaxed);
        Ok(DeviceBatch::new(dev, header, ready))
    }

    /// Copies `bytes` (any host memory) to a new device buffer and waits; returns the buffer
    /// and the GPU copy time in seconds. For benchmarks (pageable against pinned).
    ///
    /// # Errors
    /// [`Error::Driver`] when a driver call fails.
    pub fn copy_bytes(&self, bytes: &[u8]) -> Result<(DeviceBuffer, f64)> {
        let dev = DeviceBuffer::alloc(&self.stream, bytes.len())?;
        let start = self.stream.record(true)?;
        self.copy_to(bytes, &dev)?;
        let end = self.stream.record(true)?;
        end.synchronize()?;
        Ok((dev, f64::from(start.elapsed_ms(&end)?) / 1e3))
    }

    /// Submits and waits: one batch in, one ready device batch out. As a pipeline op
    /// (`Op::blocking`, concurrency 1, then a sink of 2), the next batch is copied while the
    /// consumer uses this one.
    ///
    /// # Errors
    /// As [`TransferStage::submit`] and [`PendingTransfer::wait`].
    pub fn transfer(&self, host: HostBatch) -> Result<DeviceBatch> {
        self.submit(host)?.wait()
    }

    /// The stage as a function for spdl-core's `Op::blocking`:
    /// `.pipe(Op::blocking(stage.op()), StageConfig::named("transfer"))`.
    pub fn op(&self) -> impl Fn(HostBatch) -> OpResult<DeviceBatch> + Send + Sync + 'static {
        let stage = self.clone();
        move |b| Ok(Some(stage.transfer(b)?))
    }

    /// Double-buffered iteration: keeps up to `depth` (at least 1; 2 = double buffering)
    /// copies in flight, so batch N+1 is copying while the caller holds batch N.
    pub fn iter<I>(&self, batches: I, depth: usize) -> TransferIter<I::IntoIter>
    where
        I: IntoIterator<Item = Result<HostBatch>>,
    {
        TransferIter {
            stage: self.clone(),
            source: batches.into_iter(),
            pending: VecDeque::new(),
            depth: depth.max(1),
            done: false,
        }
    }
}

/// The iterator of [`TransferStage::iter`]: yields ready device batches in input order.
#[derive(Debug)]
pub struct TransferIter<I> {
    stage: TransferStage,
    source: I,
    pending: VecDeque<Result<PendingTransfer>>,
    depth: usize,
    done: bool,
}

impl<I: Iterator<Item = Result<HostBatch>>> Iterator for TransferIter<I> {
    type Item = Result<DeviceBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done && self.pending.len() < self.depth {
            match self.source.next() {
                Some(b) => self.pending.push_back(b.and_then(|b| self.stage.submit(b))),
                None => self.done = true,
            }
        }
        Some(self.pending.pop_front()?.and_then(PendingTransfer::wait))
    }
}
