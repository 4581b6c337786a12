//! Streams and events: the dedicated copy stream of each device, and completion events.
//!
//! Host-to-device copies run on one non-blocking stream per device, separate from the
//! consumer's compute stream (as SPDL's transfer and PyTorch's `non_blocking=True` copies on
//! a side stream), so copying batch N+1 overlaps the model's work on batch N. A copy's
//! completion is a CUDA event: the host waits on it ([`Event::synchronize`]), or a consumer
//! stream waits on it on the GPU ([`Event::wait_on`]) without blocking the host.

use std::sync::Arc;

use crate::driver::CudaDevice;
// `Error` is named by the docs in every build, used by code only with `cuda`.
#[cfg_attr(not(feature = "cuda"), allow(unused_imports))]
use crate::error::{Error, Result};

/// The consumer's stream of `__dlpack__(stream=...)`: spdl-io's, where the DLPack types are.
pub use spdl_io::dlpack::ConsumerStream;

/// The dedicated host-to-device copy stream of one device (a non-blocking stream: it does not
/// synchronize with the legacy default stream). One per device per process: every
/// [`crate::TransferStage`] on a device shares it, so copies to a device are serialized on one
/// DMA queue in submission order.
#[derive(Debug)]
pub struct CopyStream {
    device: CudaDevice,
    #[cfg(feature = "cuda")]
    pub(crate) stream: Arc<cudarc::driver::CudaStream>,
}

impl CopyStream {
    /// The copy stream of `device`, created on first use and shared while anyone holds it.
    ///
    /// # Errors
    /// [`Error::Driver`] when creating the stream fails.
    pub fn for_device(device: &CudaDevice) -> Result<Arc<CopyStream>> {
        #[cfg(feature = "cuda")]
        {
            use std::collections::HashMap;
            use std::sync::{Mutex, Weak};
            static STREAMS: Mutex<Option<HashMap<usize, Weak<CopyStream>>>> = Mutex::new(None);
            let mut map = STREAMS.lock().unwrap_or_else(|e| e.into_inner());
            let map = map.get_or_insert_with(HashMap::new);
            if let Some(s) = map.get(&device.index()).and_then(Weak::upgrade) {
                return Ok(s);
            }
            let stream = device
                .ctx
                .new_stream()
                .map_err(|e| Error::driver("cuStreamCreate", e))?;
            let s = Arc::new(CopyStream {
                device: device.clone(),
                stream,
            });
            map.insert(device.index(), Arc::downgrade(&s));
            Ok(s)
        }
        #[cfg(not(feature = "cuda"))]
        {
            match device.never {}
        }
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }

    /// The raw `CUstream` handle as an integer (the `stream` of `__cuda_array_interface__`).
    pub fn raw(&self) -> usize {
        #[cfg(feature = "cuda")]
        {
            self.stream.cu_stream() as usize
        }
        #[cfg(not(feature = "cuda"))]
        {
            match self.device.never {}
        }
    }

    /// Waits for everything queued on the stream.
    ///
    /// # Errors
    /// [`Error::Driver`] with the first error of the queued work.
    pub fn synchronize(&self) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            self.stream
                .synchronize()
                .map_err(|e| Error::driver("cuStreamSynchronize", e))
        }
        #[cfg(not(feature = "cuda"))]
        {
            match self.device.never {}
        }
    }

    /// Records a new event on the stream: it completes when the work queued so far does.
    /// `timing` events can measure elapsed time ([`Event::elapsed_ms`]).
    ///
    /// # Errors
    /// [`Error::Driver`] when creating or recording the event fails.
    pub fn record(&self, timing: bool) -> Result<Event> {
        #[cfg(feature = "cuda")]
        {
            use cudarc::driver::sys::CUevent_flags;
            let flags = if timing {
                CUevent_flags::CU_EVENT_DEFAULT
            } else {
                CUevent_flags::CU_EVENT_DISABLE_TIMING
            };
            let event = self
                .device
                .ctx
                .new_event(Some(flags))
                .map_err(|e| Error::driver("cuEventCreate", e))?;
            event
                .record(&self.stream)
                .map_err(|e| Error::driver("cuEventRecord", e))?;
            Ok(Event { event })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = timing;
            match self.device.never {}
        }
    }
}

/// A recorded CUDA event: the completion of the work queued before it on a stream.
#[derive(Debug)]
pub struct Event {
    #[cfg(feature = "cuda")]
    pub(crate) event: cudarc::driver::CudaEvent,
    #[cfg(not(feature = "cuda"))]
    never: std::convert::Infallible,
}

impl Event {
    /// Blocks the calling thread until the work before the event is done.
    ///
    /// # Errors
    /// [`Error::Driver`] with the first error of that work.
    pub fn synchronize(&self) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            self.event
                .synchronize()
                .map_err(|e| Error::driver("cuEventSynchronize", e))
        }
        #[cfg(not(feature = "cuda"))]
        {
            match self.never {}
        }
    }

    /// Whether the work before the event is done, without waiting.
    ///
    /// # Errors
    /// [`Error::Driver`] for an error of that work.
    pub fn is_complete(&self) -> Result<bool> {
        #[cfg(feature = "cuda")]
        {
            // Callers may be threads with no current context (a Python thread reading
            // `__cuda_array_interface__`).
            self.event
                .context()
                .bind_to_thread()
                .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
            self.event
                .try_is_complete()
                .map_err(|e| Error::driver("cuEventQuery", e))
        }
        #[cfg(not(feature = "cuda"))]
        {
            match self.never {}
        }
    }

    /// Milliseconds between `self` and the later event `end` (both recorded with
    /// `timing = true`); waits for both.
    ///
    /// # Errors
    /// [`Error::Driver`], e.g. for events recorded without timing.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        #[cfg(feature = "cuda")]
        {
            self.event
                .elapsed_ms(&end.event)
                .map_err(|e| Error::driver("cuEventElapsedTime", e))
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = end;
            match self.never {}
        }
    }

    /// Makes `stream` wait on the GPU for this event before running work queued on it later
    /// (`cuStreamWaitEvent`); the host does not block. [`ConsumerStream::NoSync`] does nothing.
    ///
    /// # Errors
    /// [`Error::Driver`] when the handle is not a valid stream of this device's context.
    ///
    /// # Safety
    /// A [`ConsumerStream::Raw`] handle must be 1, 2 or a live `CUstream` of this event's
    /// context (as `__dlpack__` callers pass).
    pub unsafe fn wait_on(&self, stream: ConsumerStream) -> Result<()> {
        let ConsumerStream::Raw(raw) = stream else {
            return Ok(());
        };
        #[cfg(feature = "cuda")]
        {
            use cudarc::driver::sys;
            self.event
                .context()
                .bind_to_thread()
                .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
            // SAFETY: the event is alive (owned by self) and the caller guarantees `raw` is a
            // valid stream handle of this context; waiting enqueues no access to memory.
            unsafe { sys::cuStreamWaitEvent(raw as sys::CUstream, self.event.cu_event(), 0) }
                .result()
                .map_err(|e| Error::driver("cuStreamWaitEvent", e))
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = raw;
            match self.never {}
        }
    }
}
