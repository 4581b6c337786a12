//! Batched nvJPEG decode into device memory, GPU resize, CPU fallback.

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{result, sys};
use spdl_io::{ImageLoader, SampleContext, Transform};

use super::ffi;
use super::{check, load_library, NvjpegLibrary};
use crate::driver::CudaDevice;
use crate::error::{Error, Result};
use crate::stream::CopyStream;
use crate::transfer::{DeviceBatch, DeviceBuffer};
use spdl_io::{BatchHeader, DType};

/// Antialiased triangle-filter resize of interleaved RGB u8 (Pillow's `BILINEAR`, as the CPU
/// path uses): one thread per output pixel, weights `max(0, 1 - |d| / support)` with
/// `support = max(scale, 1)`; and the interleaved-to-planar kernel. Hand-written PTX in
/// `kernels.ptx`, JIT-compiled by the driver: no NVRTC needed.
const RESIZE_PTX: &str = include_str!("kernels.ptx");

/// The parameter array of a kernel launch (`cuLaunchKernel`'s `kernelParams`): a pointer to
/// each local named, in the kernel's parameter order; the locals must outlive the launch.
macro_rules! kernel_params {
    ($($arg:ident),+) => {
        [$(std::ptr::addr_of_mut!($arg).cast::<c_void>()),+]
    };
}

/// The PTX source of the resize kernel (and of the interleaved-to-planar kernel that
/// [`NvjpegDecoder::decode_batch_planar`] uses), for tests that check it with `ptxas`.
pub const RESIZE_KERNEL_PTX: &str = RESIZE_PTX;

/// Channel order of a planar nvJPEG output: SPDL's `pix_fmt` (`"rgb"` or `"bgr"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PixFmt {
    /// Planes R, G, B.
    #[default]
    Rgb,
    /// Planes B, G, R (OpenCV's order).
    Bgr,
}

impl PixFmt {
    /// Parses SPDL's `pix_fmt` value, case-insensitively (SPDL documents `"RGB"`/`"BGR"` and
    /// defaults to `"rgb"`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the value for anything else.
    pub fn parse(s: &str) -> Result<PixFmt> {
        match s.to_ascii_lowercase().as_str() {
            "rgb" => Ok(PixFmt::Rgb),
            "bgr" => Ok(PixFmt::Bgr),
            _ => Err(Error::InvalidArgument(format!(
                "pix_fmt must be \"rgb\" or \"bgr\", got {s:?}"
            ))),
        }
    }
}

/// Why an image went to the CPU decoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// Position in the batch.
    pub index: usize,
    /// Sample key.
    pub key: String,
    /// What nvJPEG said (status name or the unsupported property).
    pub reason: String,
}

/// What happened to one batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodeReport {
    /// Images decoded by nvJPEG.
    pub gpu: usize,
    /// Images nvJPEG rejected and the CPU decoded, with the reason.
    pub fallbacks: Vec<Fallback>,
    /// Wall seconds for the batch (host and GPU, until the batch is ready).
    pub seconds: f64,
}

/// Cumulative counters of an [`NvjpegDecoder`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NvjpegStats {
    /// Batches decoded.
    pub batches: u64,
    /// Images decoded on the GPU.
    pub gpu_images: u64,
    /// Images decoded by the CPU fallback.
    pub cpu_fallbacks: u64,
    /// Wall seconds spent in `decode_batch`.
    pub seconds: f64,
}

impl NvjpegStats {
    /// Images per second (GPU and fallback together); 0 before the first batch.
    pub fn images_per_sec(&self) -> f64 {
        if self.seconds > 0.0 {
            (self.gpu_images + self.cpu_fallbacks) as f64 / self.seconds
        } else {
            0.0
        }
    }
}

#[derive(Default)]
struct Counters {
    batches: AtomicU64,
    gpu: AtomicU64,
    cpu: AtomicU64,
    nanos: AtomicU64,
}

struct Native {
    handle: ffi::Handle,
    state: ffi::State,
    batched_for: Option<usize>,
}

// SAFETY: the nvJPEG handle and state are only used under the decoder's mutex.
unsafe impl Send for Native {}

struct Kernel {
    module: sys::CUmodule,
    func: sys::CUfunction,
    planar: sys::CUfunction,
}

// SAFETY: module and function handles are context-wide and usable from any thread once the
// context is current.
unsafe impl Send for Kernel {}
// SAFETY: as above; launching does not mutate the handles.
unsafe impl Sync for Kernel {}

/// A JPEG batch decoder on one device: nvJPEG (hybrid backend, batched API) into one device
/// buffer `[N, H, W, 3]` u8, GPU resize to the target size, libjpeg-turbo fallback.
/// Thread safe (one decode at a time per decoder; make one per thread for more).
pub struct NvjpegDecoder {
    lib: Arc<NvjpegLibrary>,
    native: Mutex<Native>,
    kernel: Kernel,
    stream: Arc<CopyStream>,
    counters: Counters,
    limits: spdl_io::Limits,
}

impl std::fmt::Debug for NvjpegDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvjpegDecoder")
            .field("library", &self.lib.path())
            .field("device", &self.stream.device().index())
            .finish_non_exhaustive()
    }
}

impl NvjpegDecoder {
    /// A decoder on `device`, decoding on the device's copy stream.
    ///
    /// # Errors
    /// [`Error::NvjpegUnavailable`] when libnvjpeg is not found; [`Error::Nvjpeg`] when the
    /// handle or state cannot be created; [`Error::Driver`] when the resize kernel does not
    /// load.
    pub fn new(device: &CudaDevice) -> Result<Self> {
        let lib = load_library()?;
        let stream = CopyStream::for_device(device)?;
        device.bind()?;
        let kernel = load_kernel()?;
        let mut handle: ffi::Handle = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the library is loaded.
        check("nvjpegCreateSimple", unsafe {
            (lib.api.create_simple)(&mut handle)
        })?;
        let mut state: ffi::State = std::ptr::null_mut();
        // SAFETY: `handle` is live; valid out-pointer.
        let st = unsafe { (lib.api.state_create)(handle, &mut state) };
        if let Err(e) = check("nvjpegJpegStateCreate", st) {
            // SAFETY: created above, destroyed once.
            unsafe { (lib.api.destroy)(handle) };
            return Err(e);
        }
        Ok(NvjpegDecoder {
            lib,
            native: Mutex::new(Native {
                handle,
                state,
                batched_for: None,
            }),
            kernel,
            stream,
            counters: Counters::default(),
            limits: spdl_io::Limits::default(),
        })
    }

    /// Sets the size limits checked on every header (and on the target size) before any
    /// device memory is allocated; default [`spdl_io::Limits::default`]. A file over the
    /// limit is not decoded on the GPU: it goes to the CPU path, which refuses it with a
    /// limit-exceeded error naming the file.
    pub fn with_limits(mut self, limits: spdl_io::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Counters so far.
    pub fn stats(&self) -> NvjpegStats {
        let c = &self.counters;
        NvjpegStats {
            batches: c.batches.load(Ordering::Relaxed),
            gpu_images: c.gpu.load(Ordering::Relaxed),
            cpu_fallbacks: c.cpu.load(Ordering::Relaxed),
            seconds: c.nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }

    /// What nvJPEG's own header parse says of a file the scan accepted: `None` when it
    /// takes it, else the reason.
    fn nvjpeg_reject(&self, native: &Native, bytes: &[u8]) -> Option<String> {
        let (mut n, mut css) = (0 as c_int, 0 as c_int);
        let (mut w, mut h) = ([0 as c_int; 4], [0 as c_int; 4]);
        // SAFETY: `bytes` is a live slice; every out-pointer is valid (4-entry arrays).
        let st = unsafe {
            (self.lib.api.get_image_info)(
                native.handle,
                bytes.as_ptr(),
                bytes.len(),
                &mut n,
                &mut css,
                w.as_mut_ptr(),
                h.as_mut_ptr(),
            )
        };
        if st != 0 {
            Some(crate::nvjpeg_status_name(st).to_string())
        } else if n != 1 && n != 3 {
            Some(format!("{n} components (CMYK/YCCK)"))
        } else if css == ffi::CSS_UNKNOWN {
            Some("unknown chroma subsampling".to_string())
        } else if let Err(e) = self
            .limits
            .check(w[0].max(0) as usize, h[0].max(0) as usize, 3, 1)
        {
            // Checked before any device allocation: a header may claim 65535x65535.
            Some(e.message().to_string())
        } else {
            None
        }
    }

    /// Decodes `jpegs` (`(key, bytes)`) into one ready device batch `[N, H, W, 3]` u8, each
    /// image resized to `size = (width, height)`; with `size = None` every image must have
    /// the first one's size. EXIF orientation is not applied on the GPU path.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty batch or (with `size = None`) differing sizes;
    /// [`Error::Decode`] when the CPU fallback fails too (a broken file); [`Error::Driver`] /
    /// [`Error::Nvjpeg`] for device failures.
    pub fn decode_batch(
        &self,
        jpegs: &[(&str, &[u8])],
        size: Option<(usize, usize)>,
    ) -> Result<(DeviceBatch, DecodeReport)> {
        let t0 = Instant::now();
        if jpegs.is_empty() {
            return Err(Error::InvalidArgument(
                "cannot decode an empty batch".into(),
            ));
        }
        let dev = self.stream.device();
        dev.bind()?;
        let api = &self.lib.api;
        let mut native = self.native.lock().unwrap_or_else(|e| e.into_inner());
        let mut report = DecodeReport::default();
        // 1. Headers: size and whether nvJPEG takes the file.
        let mut infos: Vec<Option<(usize, usize)>> = Vec::with_capacity(jpegs.len());
        for (i, (key, bytes)) in jpegs.iter().enumerate() {
            // The header scan first (pure Rust): formats nvJPEG's batched decode does not
            // take, corrupt files and sizes over the limits go to the CPU decoder without
            // nvJPEG ever parsing them.
            let (reject, dims) = match crate::jpeg_probe::classify(bytes, &self.limits) {
                Err(reason) => (Some(reason.to_string()), (0, 0)),
                Ok(f) => (self.nvjpeg_reject(&native, bytes), (f.width, f.height)),
            };
            match reject {
                Some(reason) => {
                    report.fallbacks.push(Fallback {
                        index: i,
                        key: key.to_string(),
                        reason,
                    });
                    infos.push(None);
                }
                None => infos.push(Some(dims)),
            }
        }
        let (tw, th) = match size {
            Some(s) => s,
            None => {
                let first = match infos[0] {
                    Some(s) => s,
                    None => {
                        let img = cpu_decode(jpegs[0].0, jpegs[0].1, None)?;
                        (img.width, img.height)
                    }
                };
                if let Some((i, s)) = infos
                    .iter()
                    .enumerate()
                    .find_map(|(i, s)| s.filter(|&s| s != first).map(|s| (i, s)))
                {
                    return Err(Error::InvalidArgument(format!(
                        "{} is {}x{} but the first image is {}x{}: pass a target size",
                        jpegs[i].0, s.0, s.1, first.0, first.1
                    )));
                }
                first
            }
        };
        if tw == 0 || th == 0 {
            return Err(Error::InvalidArgument("target size is zero".into()));
        }
        if let Err(e) = self.limits.check(tw, th, 3, 1) {
            return Err(Error::InvalidArgument(format!(
                "target size: {}",
                e.message()
            )));
        }
        let slot = tw * th * 3;
        let out = DeviceBuffer::alloc(&self.stream, slot * jpegs.len())?;
        let raw_stream = self.stream.stream.cu_stream();
        // 2. Destinations: straight into the slot at the target size, else a scratch buffer.
        let gpu: Vec<usize> = (0..jpegs.len()).filter(|&i| infos[i].is_some()).collect();
        let mut scratch: Vec<Option<DeviceBuffer>> = Vec::with_capacity(gpu.len());
        let mut dests: Vec<ffi::Image> = Vec::with_capacity(gpu.len());
        for &i in &gpu {
            let (w, h) = infos[i].unwrap_or_default();
            let mut img = ffi::Image::default();
            if (w, h) == (tw, th) {
                img.channel[0] = (out.device_ptr() + (i * slot) as u64) as *mut u8;
                scratch.push(None);
            } else {
                let s = DeviceBuffer::alloc(&self.stream, w * h * 3)?;
                img.channel[0] = s.device_ptr() as *mut u8;
                scratch.push(Some(s));
            }
            img.pitch[0] = infos[i].map_or(0, |(w, _)| w * 3);
            dests.push(img);
        }
        // 3. Decode: batched, then image by image if the batch call fails.
        let mut failed: Vec<(usize, String)> = Vec::new();
        if !gpu.is_empty() {
            let batched_ok = self.decode_batched(&mut native, jpegs, &gpu, &mut dests, raw_stream);
            if let Err(e) = batched_ok {
                tracing::debug!(error = %e, "nvjpegDecodeBatched failed; decoding one by one");
                for (k, &i) in gpu.iter().enumerate() {
                    let bytes = jpegs[i].1;
                    // SAFETY: live handle/state, live input slice, destination device memory
                    // of `pitch * height` bytes, our stream.
                    let st = unsafe {
                        (api.decode)(
                            native.handle,
                            native.state,
                            bytes.as_ptr(),
                            bytes.len(),
                            ffi::OUTPUT_RGBI,
                            &mut dests[k],
                            raw_stream as *mut c_void,
                        )
                    };
                    if st != 0 {
                        failed.push((k, crate::nvjpeg_status_name(st).to_string()));
                    }
                }
                native.batched_for = None;
            }
        }
        // 4. Resize what was decoded at its own size.
        for (k, &i) in gpu.iter().enumerate() {
            if failed.iter().any(|(f, _)| *f == k) {
                continue;
            }
            if let (Some(src), Some((w, h))) = (&scratch[k], infos[i]) {
                self.resize(
                    src.device_ptr(),
                    w,
                    h,
                    out.device_ptr() + (i * slot) as u64,
                    tw,
                    th,
                )?;
            }
        }
        for (k, reason) in failed {
            let i = gpu[k];
            report.fallbacks.push(Fallback {
                index: i,
                key: jpegs[i].0.to_string(),
                reason,
            });
        }
        report.gpu = jpegs.len() - report.fallbacks.len();
        // 5. CPU fallback: decode + resize on the host, copy into the slot.
        let mut hold: Vec<Vec<u8>> = Vec::new();
        for f in &report.fallbacks {
            let (key, bytes) = jpegs[f.index];
            let img = cpu_decode(key, bytes, Some((tw, th)))?;
            let data = img.as_u8().unwrap_or_default().to_vec();
            if data.len() != slot {
                return Err(Error::InvalidArgument(format!(
                    "{key}: CPU fallback produced {} bytes, expected {slot}",
                    data.len()
                )));
            }
            // SAFETY: the slot has `slot` bytes; `data` is kept in `hold` until the stream is
            // synchronized below.
            unsafe {
                result::memcpy_htod_async(
                    out.device_ptr() + (f.index * slot) as u64,
                    &data,
                    raw_stream,
                )
            }
            .map_err(|e| Error::driver("cuMemcpyHtoDAsync", e))?;
            hold.push(data);
        }
        let ready = self.stream.record(false)?;
        ready.synchronize()?;
        drop(hold);
        drop(scratch);
        report.fallbacks.sort_by_key(|f| f.index);
        report.seconds = t0.elapsed().as_secs_f64();
        let c = &self.counters;
        c.batches.fetch_add(1, Ordering::Relaxed);
        c.gpu.fetch_add(report.gpu as u64, Ordering::Relaxed);
        c.cpu
            .fetch_add(report.fallbacks.len() as u64, Ordering::Relaxed);
        c.nanos
            .fetch_add((report.seconds * 1e9) as u64, Ordering::Relaxed);
        let header = BatchHeader {
            shape: [jpegs.len(), th, tw, 3],
            dtype: DType::U8,
            keys: jpegs.iter().map(|(k, _)| k.to_string()).collect(),
            labels: vec![None; jpegs.len()],
        };
        let batch = DeviceBatch::new(out, header, ready);
        Ok((batch, report))
    }

    /// As [`NvjpegDecoder::decode_batch`], but planar: one ready device batch `[N, 3, H, W]`
    /// u8 with the planes in `pix_fmt` order, the layout of SPDL's `decode_image_nvjpeg` /
    /// `load_image_batch_nvjpeg` (`[C==3, H, W]` per image). The interleaved decode is
    /// converted on the GPU, on the decoder's stream.
    ///
    /// # Errors
    /// As [`NvjpegDecoder::decode_batch`]; [`Error::InvalidArgument`] when the batch has 2^32
    /// pixels or more (the conversion kernel's index range).
    pub fn decode_batch_planar(
        &self,
        jpegs: &[(&str, &[u8])],
        size: Option<(usize, usize)>,
        pix_fmt: PixFmt,
    ) -> Result<(DeviceBatch, DecodeReport)> {
        let (hwc, report) = self.decode_batch(jpegs, size)?;
        let [n, h, w, c] = hwc.shape;
        let hw = h * w;
        let total = u32::try_from(n * hw).map_err(|_| {
            Error::InvalidArgument(format!("a batch of {n} images of {w}x{h} is too large"))
        })?;
        let out = DeviceBuffer::alloc(&self.stream, n * hw * c)?;
        let (mut src, mut dst) = (hwc.buffer.device_ptr(), out.device_ptr());
        let (mut hw32, mut total32) = (hw as u32, total);
        let mut swap = u32::from(pix_fmt == PixFmt::Bgr);
        let mut params = kernel_params!(src, dst, hw32, total32, swap);
        self.stream.device().bind()?;
        // SAFETY: the kernel's parameters are (u64, u64, u32, u32, u32) as passed; `src` holds
        // `total * 3` bytes (ready: `decode_batch` synchronized its stream) and `dst` as many;
        // both stay alive until the stream is synchronized below.
        unsafe {
            result::launch_kernel(
                self.kernel.planar,
                (total.div_ceil(256), 1, 1),
                (256, 1, 1),
                0,
                self.stream.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(|e| Error::driver("cuLaunchKernel", e))?;
        let ready = self.stream.record(false)?;
        ready.synchronize()?;
        let DeviceBatch { buffer, header, .. } = hwc;
        drop(buffer);
        let header = BatchHeader {
            shape: [n, c, h, w],
            ..header
        };
        let batch = DeviceBatch::new(out, header, ready);
        Ok((batch, report))
    }

    fn decode_batched(
        &self,
        native: &mut Native,
        jpegs: &[(&str, &[u8])],
        gpu: &[usize],
        dests: &mut [ffi::Image],
        stream: sys::CUstream,
    ) -> Result<()> {
        let api = &self.lib.api;
        if native.batched_for != Some(gpu.len()) {
            // SAFETY: live handle and state.
            let st = unsafe {
                (api.decode_batched_initialize)(
                    native.handle,
                    native.state,
                    gpu.len() as c_int,
                    1,
                    ffi::OUTPUT_RGBI,
                )
            };
            check("nvjpegDecodeBatchedInitialize", st)?;
            native.batched_for = Some(gpu.len());
        }
        let ptrs: Vec<*const u8> = gpu.iter().map(|&i| jpegs[i].1.as_ptr()).collect();
        let lens: Vec<usize> = gpu.iter().map(|&i| jpegs[i].1.len()).collect();
        // SAFETY: `ptrs`/`lens`/`dests` have `gpu.len()` entries (the initialized batch
        // size); inputs are live slices; destinations are device buffers of pitch * height.
        let st = unsafe {
            (api.decode_batched)(
                native.handle,
                native.state,
                ptrs.as_ptr(),
                lens.as_ptr(),
                dests.as_mut_ptr(),
                stream as *mut c_void,
            )
        };
        check("nvjpegDecodeBatched", st)
    }

    fn resize(&self, src: u64, sw: usize, sh: usize, dst: u64, dw: usize, dh: usize) -> Result<()> {
        let (mut src, mut spitch, mut sw32, mut sh32) =
            (src, (sw * 3) as u32, sw as u32, sh as u32);
        let (mut dst, mut dw32, mut dh32) = (dst, dw as u32, dh as u32);
        let mut params = kernel_params!(src, spitch, sw32, sh32, dst, dw32, dh32);
        let grid = (dw.div_ceil(16) as u32, dh.div_ceil(16) as u32, 1);
        // SAFETY: the kernel's parameters are (u64, u32, u32, u32, u64, u32, u32) as passed;
        // `src` holds `sh` rows of `3 * sw` bytes and `dst` `dh * dw * 3` bytes, both device
        // memory alive until the stream is synchronized in `decode_batch`.
        unsafe {
            result::launch_kernel(
                self.kernel.func,
                grid,
                (16, 16, 1),
                0,
                self.stream.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(|e| Error::driver("cuLaunchKernel", e))
    }
}

impl Drop for NvjpegDecoder {
    fn drop(&mut self) {
        let native = self.native.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = self.stream.synchronize();
        // SAFETY: state and handle were created in `new` and are destroyed once, after the
        // stream's work that used them finished.
        unsafe {
            (self.lib.api.state_destroy)(native.state);
            (self.lib.api.destroy)(native.handle);
        }
        if self.stream.device().bind().is_ok() {
            // SAFETY: the module was loaded in `new` and is unloaded once.
            let _ = unsafe { result::module::unload(self.kernel.module) };
        }
    }
}

fn load_kernel() -> Result<Kernel> {
    let src = CString::new(RESIZE_PTX).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    // SAFETY: a NUL-terminated PTX image; a context is current (bound by the caller).
    let module = unsafe { result::module::load_data(src.as_ptr().cast()) }
        .map_err(|e| Error::driver("cuModuleLoadData", e))?;
    let name = CString::new("spdl_resize_triangle_u8c3").unwrap_or_default();
    // SAFETY: `module` was just loaded.
    let func = unsafe { result::module::get_function(module, name) }
        .map_err(|e| Error::driver("cuModuleGetFunction", e))?;
    let name = CString::new("spdl_hwc_to_chw_u8c3").unwrap_or_default();
    // SAFETY: as above.
    let planar = unsafe { result::module::get_function(module, name) }
        .map_err(|e| Error::driver("cuModuleGetFunction", e))?;
    Ok(Kernel {
        module,
        func,
        planar,
    })
}

/// The CPU path: libjpeg-turbo decode to RGB, resize with the same triangle filter.
fn cpu_decode(key: &str, bytes: &[u8], size: Option<(usize, usize)>) -> Result<spdl_io::Image> {
    let transform = match size {
        Some((width, height)) => Transform::Resize {
            width,
            height,
            filter: Default::default(),
        },
        None => Transform::Identity,
    };
    let loader = ImageLoader::new(transform);
    let ctx = SampleContext {
        key,
        index: 0,
        epoch: 0,
    };
    Ok(loader.load(bytes, &ctx)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pix_fmt_parses_spdl_values_and_names_the_rest() {
        assert_eq!(PixFmt::parse("rgb").unwrap(), PixFmt::Rgb);
        assert_eq!(PixFmt::parse("BGR").unwrap(), PixFmt::Bgr);
        let e = PixFmt::parse("yuv420p").unwrap_err().to_string();
        assert!(e.contains("\"yuv420p\"") && e.contains("\"bgr\""), "{e}");
    }

    #[test]
    fn the_ptx_module_has_both_kernels() {
        assert!(RESIZE_KERNEL_PTX.contains(".entry spdl_resize_triangle_u8c3("));
        assert!(RESIZE_KERNEL_PTX.contains(".entry spdl_hwc_to_chw_u8c3("));
    }
}
