//! `CPUBuffer`: decoded pixels owned by Rust, shared with NumPy and PyTorch without a copy
//! (buffer protocol, `__array_interface__`, DLPack). The memory is an `Arc` that every view
//! holds: the Python object for the buffer protocol and `__array_interface__`, the DLPack
//! capsule's deleter for DLPack, so it lives as long as any view of it.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use spdl_io::dlpack::{DLDevice, TensorExport};
use spdl_io::DType;

use crate::dlpack::DlpackArgs;

/// The owned samples. Never read or resized by Rust after construction: views write through
/// the raw pointer taken once in [`Memory::new`].
enum Storage {
    U8(Box<[u8]>),
    U16(Box<[u16]>),
    F32(Box<[f32]>),
    /// Elements of another `dtype` (e.g. `int16` audio), in 8-byte words so that every
    /// element type is aligned.
    Words(Box<[u64]>, DType),
}

impl Storage {
    fn dtype(&self) -> DType {
        match self {
            Storage::U8(_) => DType::U8,
            Storage::U16(_) => DType::U16,
            Storage::F32(_) => DType::F32,
            Storage::Words(_, d) => *d,
        }
    }

    /// `bytes` (native-endian elements of `dtype`) copied into aligned words.
    fn words(bytes: &[u8], dtype: DType) -> Self {
        let mut words = vec![0u64; bytes.len().div_ceil(8)].into_boxed_slice();
        // SAFETY: `words` has at least `bytes.len()` bytes; u64 has no invalid bit patterns.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                words.as_mut_ptr().cast::<u8>(),
                bytes.len(),
            );
        }
        Storage::Words(words, dtype)
    }
}

/// Who owns the memory: this buffer (decoded samples), or a `CPUStorage` it was copied into.
enum Owner {
    Boxed {
        _samples: Storage,
    },
    External {
        _keep_alive: Arc<dyn std::any::Any + Send + Sync>,
    },
}

struct Memory {
    _owner: Owner,
    ptr: *mut c_void,
}

// SAFETY: the memory is owned here (a boxed slice, or a keep-alive of a `CPUStorage` block) and
// never moved or reallocated; the raw pointer is only handed to Python/DLPack consumers, which
// synchronize their own access.
unsafe impl Send for Memory {}
// SAFETY: as above; Rust never reads or writes the memory after construction.
unsafe impl Sync for Memory {}

impl Memory {
    fn new(mut storage: Storage) -> Self {
        let ptr = match &mut storage {
            Storage::U8(b) => b.as_mut_ptr().cast(),
            Storage::U16(b) => b.as_mut_ptr().cast(),
            Storage::F32(b) => b.as_mut_ptr().cast(),
            Storage::Words(b, _) => b.as_mut_ptr().cast(),
        };
        Memory {
            _owner: Owner::Boxed { _samples: storage },
            ptr,
        }
    }
}

/// A contiguous, row-major array in CPU memory: one decoded image `[H, W, C]` or a batch
/// `[N, H, W, C]` (`uint8`, or `uint16` for 16-bit images) or a normalized batch
/// `[N, C, H, W]` (`float32`).
///
/// Zero-copy: `numpy.asarray(buf)` (buffer protocol / `__array_interface__`),
/// `numpy.from_dlpack(buf)` and `torch.from_dlpack(buf)` all share this memory, which stays
/// alive as long as any of those views does. The views are writable.
///
/// Mirrors SPDL's `spdl.io.CPUBuffer`.
#[pyclass(frozen, module = "spdl_rs.io", name = "CPUBuffer")]
pub(crate) struct CpuBuffer {
    mem: Arc<Memory>,
    dtype: DType,
    shape: Vec<isize>,
    strides: Vec<isize>,
    keys: Vec<String>,
    labels: Vec<Option<i64>>,
}

fn c_strides(shape: &[isize], itemsize: usize) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc = itemsize as isize;
    for (s, d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc *= *d;
    }
    strides
}

impl CpuBuffer {
    fn new(
        storage: Storage,
        shape: Vec<usize>,
        keys: Vec<String>,
        labels: Vec<Option<i64>>,
    ) -> Self {
        let dtype = storage.dtype();
        let mem = Memory::new(storage);
        let shape: Vec<isize> = shape.into_iter().map(|d| d as isize).collect();
        let strides = c_strides(&shape, dtype.size());
        CpuBuffer {
            mem: Arc::new(mem),
            dtype,
            shape,
            strides,
            keys,
            labels,
        }
    }

    /// One image, `[H, W, C]`; the pixel vector is moved, not copied.
    pub(crate) fn from_image(image: spdl_io::Image, key: String, label: Option<i64>) -> Self {
        let shape = image.shape().to_vec();
        let storage = match image.data {
            spdl_io::PixelData::U8(v) => Storage::U8(v.into_boxed_slice()),
            spdl_io::PixelData::U16(v) => Storage::U16(v.into_boxed_slice()),
        };
        CpuBuffer::new(storage, shape, vec![key], vec![label])
    }

    /// A collated batch; the data vector is moved, not copied.
    pub(crate) fn from_batch(b: spdl_io::ImageBatch) -> Self {
        let spdl_io::ImageBatch { data, header } = b;
        let storage = match data {
            spdl_io::BatchData::U8(v) => Storage::U8(v.into_boxed_slice()),
            spdl_io::BatchData::U16(v) => Storage::U16(v.into_boxed_slice()),
            spdl_io::BatchData::F32(v) => Storage::F32(v.into_boxed_slice()),
        };
        CpuBuffer::new(storage, header.shape.to_vec(), header.keys, header.labels)
    }

    /// A batch in a pool buffer, shared without a copy: the buffer goes back to its pool when
    /// this and every view of it are gone.
    pub(crate) fn from_host_batch(b: spdl_io::HostBatch) -> Self {
        let spdl_io::HostBatch { mut buffer, header } = b;
        let ptr = buffer.as_mut_ptr();
        let shape = header.shape.to_vec();
        CpuBuffer::over(
            Arc::new(buffer),
            ptr,
            header.dtype,
            shape,
            header.keys,
            header.labels,
        )
    }

    /// A buffer holding `bytes` (native-endian elements of `dtype`), e.g. a device batch
    /// copied back.
    pub(crate) fn from_bytes(
        dtype: DType,
        shape: Vec<usize>,
        bytes: Vec<u8>,
        keys: Vec<String>,
        labels: Vec<Option<i64>>,
    ) -> Self {
        let storage = match dtype {
            DType::U8 => Storage::U8(bytes.into_boxed_slice()),
            DType::U16 => Storage::U16(
                bytes
                    .chunks_exact(2)
                    .map(|b| u16::from_ne_bytes([b[0], b[1]]))
                    .collect(),
            ),
            DType::F32 => Storage::F32(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
            other => Storage::words(&bytes, other),
        };
        CpuBuffer::new(storage, shape, keys, labels)
    }

    /// A buffer over memory that `owner` keeps alive (a `CPUStorage` block): `ptr` holds the
    /// elements of `shape` in `dtype`, which the caller has written.
    pub(crate) fn over(
        owner: Arc<dyn std::any::Any + Send + Sync>,
        ptr: *mut u8,
        dtype: DType,
        shape: Vec<usize>,
        keys: Vec<String>,
        labels: Vec<Option<i64>>,
    ) -> Self {
        let shape: Vec<isize> = shape.into_iter().map(|d| d as isize).collect();
        CpuBuffer {
            mem: Arc::new(Memory {
                _owner: Owner::External { _keep_alive: owner },
                ptr: ptr.cast(),
            }),
            dtype,
            strides: c_strides(&shape, dtype.size()),
            shape,
            keys,
            labels,
        }
    }

    /// The memory (shared, not copied) and what describes it, for a copy to a device.
    pub(crate) fn host_view(&self) -> HostView {
        HostView {
            mem: self.mem.clone(),
            shape: self.shape.iter().map(|&d| d as usize).collect(),
            dtype: self.dtype,
            keys: self.keys.clone(),
            labels: self.labels.clone(),
        }
    }

    /// One sample of `shape` (`key`, no label) held in `wrap(data)`; the vector is moved, not
    /// copied. `data.len()` must equal the product of `shape`.
    #[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
    fn from_vec<T>(
        data: Vec<T>,
        shape: Vec<usize>,
        key: String,
        wrap: fn(Box<[T]>) -> Storage,
    ) -> Self {
        debug_assert_eq!(data.len(), shape.iter().product::<usize>());
        CpuBuffer::new(wrap(data.into_boxed_slice()), shape, vec![key], vec![None])
    }

    /// `u8` samples of `shape` (e.g. video frames `[T, H, W, C]`); the vector is moved, not
    /// copied. `data.len()` must equal the product of `shape`.
    #[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
    pub(crate) fn from_u8(data: Vec<u8>, shape: Vec<usize>, key: String) -> Self {
        CpuBuffer::from_vec(data, shape, key, Storage::U8)
    }

    /// `f32` samples of `shape` (e.g. a waveform `[C, S]`); the vector is moved, not copied.
    /// `data.len()` must equal the product of `shape`.
    #[cfg_attr(not(feature = "decode-ffmpeg"), allow(dead_code))]
    pub(crate) fn from_f32(data: Vec<f32>, shape: Vec<usize>, key: String) -> Self {
        CpuBuffer::from_vec(data, shape, key, Storage::F32)
    }

    /// Another `CPUBuffer` over the same memory (no copy): the memory lives while either does.
    pub(crate) fn share(&self) -> Self {
        CpuBuffer {
            mem: Arc::clone(&self.mem),
            dtype: self.dtype,
            shape: self.shape.clone(),
            strides: self.strides.clone(),
            keys: self.keys.clone(),
            labels: self.labels.clone(),
        }
    }

    fn nbytes(&self) -> usize {
        self.shape.iter().product::<isize>() as usize * self.dtype.size()
    }
}

/// Host memory to copy to a device: a `CPUBuffer`'s (shared) or a native batch's or image's
/// (moved, not copied), with its shape, dtype, keys and labels.
pub(crate) struct HostView {
    mem: Arc<Memory>,
    pub(crate) shape: Vec<usize>,
    pub(crate) dtype: DType,
    pub(crate) keys: Vec<String>,
    pub(crate) labels: Vec<Option<i64>>,
}

impl HostView {
    /// A collated batch's memory (moved).
    pub(crate) fn from_batch(b: spdl_io::ImageBatch) -> Self {
        CpuBuffer::from_batch(b).into_view()
    }

    /// One image's memory (moved), shape `[H, W, C]`.
    pub(crate) fn from_image(image: spdl_io::Image, key: String, label: Option<i64>) -> Self {
        CpuBuffer::from_image(image, key, label).into_view()
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        let len = self.shape.iter().product::<usize>() * self.dtype.size();
        // SAFETY: `mem` owns `len` initialized bytes at `ptr` (the boxed slice of the buffer
        // this view was taken from) and is kept alive by `self` for the borrow. Python views
        // may write the memory concurrently (as with any shared NumPy buffer); bytes are
        // plain data, so a racing write only changes what is copied.
        unsafe { std::slice::from_raw_parts(self.mem.ptr.cast::<u8>(), len) }
    }

    /// The DLPack export description of the memory (device `kDLCPU`), owning it.
    pub(crate) fn into_export(self) -> TensorExport {
        TensorExport {
            data_ptr: self.mem.ptr as u64,
            device: DLDevice::cpu(),
            shape: self.shape.iter().map(|&d| d as i64).collect(),
            dtype: self.dtype,
            stream: None,
            keep_alive: Arc::new(self.mem),
        }
    }
}

impl CpuBuffer {
    /// What the buffer protocol exposes: the memory as `shape`/`strides` of `dtype` items.
    fn layout(&self) -> BufferLayout<'_> {
        BufferLayout {
            buf: self.mem.ptr,
            len: self.nbytes(),
            itemsize: self.dtype.size(),
            format: self.dtype.format(),
            shape: &self.shape,
            strides: Some(&self.strides),
        }
    }

    fn into_view(self) -> HostView {
        HostView {
            mem: self.mem,
            shape: self.shape.iter().map(|&d| d as usize).collect(),
            dtype: self.dtype,
            keys: self.keys,
            labels: self.labels,
        }
    }
}

/// `#[pymethods] impl $class { ... }`: the end of a [`buffer_pymethods!`] without more.
#[cfg_attr(not(feature = "cuda"), allow(unused_macros))] // CUDABuffer's, with `cuda`
macro_rules! pymethods_block {
    (impl $class:ty { $($body:tt)* }) => {
        #[pymethods]
        impl $class {
            $($body)*
        }
    };
}
#[cfg_attr(not(feature = "cuda"), allow(unused_imports))] // CUDABuffer's, with `cuda`
pub(crate) use pymethods_block;

/// The `#[pymethods]` of a class whose memory Python reads through the buffer protocol
/// (`memoryview(x)`, `numpy.frombuffer`): `__getbuffer__` exposing what `|this| layout` gives
/// (a [`BufferLayout`] of memory the frozen `this` owns), then the class's own methods.
macro_rules! buffer_protocol_pymethods {
    (|$this:ident| $layout:expr; impl $class:ty { $($body:tt)* }) => {
        // PyO3's slot wrapper calls `__getbuffer__` from an `unsafe fn` of its own without an
        // `unsafe` block, which the workspace's `unsafe_op_in_unsafe_fn = "deny"` rejects once
        // the wrapper is written from a local macro (the body below has its own block).
        #[allow(unsafe_op_in_unsafe_fn)]
        const _: () = {
            #[pymethods]
            impl $class {
                /// Buffer protocol: a writable, C-contiguous view of the memory.
                unsafe fn __getbuffer__(
                    slf: Bound<'_, Self>,
                    view: *mut ffi::Py_buffer,
                    flags: c_int,
                ) -> PyResult<()> {
                    let $this = slf.get();
                    let layout: BufferLayout<'_> = $layout;
                    // SAFETY: `view` is the interpreter's; every pointer of `layout` points
                    // into `this`, which the view keeps alive (and unmoved and unchanged: the
                    // class is frozen) until release.
                    unsafe { layout.fill(slf.as_any(), view, flags) }
                }

                unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}

                $($body)*
            }
        };
    };
}
pub(crate) use buffer_protocol_pymethods;

/// The `#[pymethods]` of a batch buffer class (`CPUBuffer`, `CUDABuffer`): the getters both
/// have alike (`shape`, `dtype`, `keys`, `labels`, `len()`), reading what
/// `|b| (shape, dtype, keys, labels)` names, then the class's own methods; made by
/// `$wrap! { $head impl $class { ... } }` ([`pymethods_block!`], or
/// [`buffer_protocol_pymethods!`] for host memory).
macro_rules! buffer_pymethods {
    (
        $wrap:ident! { $($head:tt)* }
        impl $class:ty, |$b:ident| ($shape:expr, $dtype:expr, $keys:expr, $labels:expr)
        { $($own:tt)* }
    ) => {
        $wrap! { $($head)* impl $class {
            /// The shape, e.g. `(N, H, W, C)` for a `uint8` batch or `(N, C, H, W)` for
            /// `float32`.
            #[getter]
            fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                let $b = self;
                PyTuple::new(py, &$shape)
            }

            /// The element type name: `"uint8"`, `"uint16"` or `"float32"`.
            #[getter]
            fn dtype(&self) -> &'static str {
                let $b = self;
                $dtype.name()
            }

            /// Sample keys (file paths) in batch order; one key for a single image.
            #[getter]
            fn keys(&self) -> Vec<String> {
                let $b = self;
                $keys.clone()
            }

            /// Class labels in batch order (`None` where the source had none).
            #[getter]
            fn labels(&self) -> Vec<Option<i64>> {
                let $b = self;
                $labels.clone()
            }

            fn __len__(&self) -> usize {
                let $b = self;
                $shape.first().copied().unwrap_or(0).max(0) as usize
            }

            $($own)*
        } }
    };
}
#[cfg_attr(not(feature = "cuda"), allow(unused_imports))] // CUDABuffer's, with `cuda`
pub(crate) use buffer_pymethods;

/// The `#[pymethods]` of a class read as the `CPUBuffer` that `|o| buffer` names (SPDL's
/// `load_video` / `load_audio` return the buffer itself): NumPy's array interface and DLPack
/// of that buffer, sharing its memory and keeping the object alive; then the class's own
/// methods.
macro_rules! host_array_pymethods {
    (impl $class:ty, |$o:ident| $buffer:expr, { $($own:tt)* }) => {
        #[pymethods]
        impl $class {
            /// NumPy's array interface of the buffer (as `CPUBuffer`'s): `numpy.asarray(x)`
            /// and `spdl_rs.io.to_numpy(x)` share its memory and keep this object alive.
            #[getter]
            fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let $o = self;
                $buffer.__array_interface__(py)
            }

            /// DLPack device of the buffer: `(1, 0)` (`kDLCPU`).
            fn __dlpack_device__(&self) -> (i32, i32) {
                (1, 0)
            }

            /// A DLPack capsule sharing the buffer (as `CPUBuffer.__dlpack__`), so that
            /// `torch.from_dlpack(x)` and `spdl_rs.io.to_torch(x)` work as with SPDL's buffer.
            #[pyo3(
                signature = (**kw),
                text_signature = "($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)"
            )]
            fn __dlpack__(
                &self,
                py: Python<'_>,
                kw: Option<&Bound<'_, PyDict>>,
            ) -> PyResult<Py<PyAny>> {
                let $o = self;
                $buffer.__dlpack__(py, kw)
            }

            $($own)*
        }
    };
}
pub(crate) use host_array_pymethods;

buffer_pymethods! {
buffer_protocol_pymethods! { |this| this.layout(); }
impl CpuBuffer, |b| (b.shape, b.dtype, b.keys, b.labels) {
    /// Address of the first element (to check that views share memory).
    #[getter]
    fn data_ptr(&self) -> usize {
        self.mem.ptr as usize
    }

    /// Size in bytes.
    #[getter(nbytes)]
    fn get_nbytes(&self) -> usize {
        self.nbytes()
    }

    fn __repr__(&self) -> String {
        format!(
            "CPUBuffer(shape={:?}, dtype={})",
            self.shape,
            self.dtype.name()
        )
    }

    /// NumPy's array interface (version 3): the data pointer is shared, not copied; the keys
    /// are those of a NumPy array's own interface (`shape`, `typestr`, `descr`, `data`,
    /// `strides`, `version`).
    #[getter]
    pub(crate) fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", self.dtype.typestr())?;
        // As NumPy's own arrays report it, so that the two dicts compare equal.
        d.set_item("descr", vec![("", self.dtype.typestr())])?;
        d.set_item("data", (self.mem.ptr as usize, false))?;
        d.set_item("strides", py.None())?;
        d.set_item("version", 3)?;
        Ok(d)
    }

    /// DLPack device: `(1, 0)`, i.e. `kDLCPU`, device 0.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0)
    }

    /// A DLPack capsule sharing this memory (`kDLCPU`): `"dltensor_versioned"` (DLPack 1.0)
    /// when `max_version >= (1, 0)`, else `"dltensor"`; the memory is released when the
    /// consumer calls the deleter (or the unused capsule is collected). `stream` is accepted
    /// as the array API requires and has no effect on host memory.
    ///
    /// Raises `BufferError` when a copy or another device is demanded.
    // The standard keywords, parsed by `DlpackArgs` (what `inspect.signature` shows).
    #[pyo3(
        signature = (**kw),
        text_signature = "($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)"
    )]
    pub(crate) fn __dlpack__(
        &self,
        py: Python<'_>,
        kw: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let args = DlpackArgs::parse(kw)?;
        args.check_host_stream()?;
        args.check_device((1, 0), "CPUBuffer")?;
        let versioned = args.versioned()?;
        crate::dlpack::capsule(py, self.host_view().into_export(), versioned)
    }
}
}

/// What a `__getbuffer__` exposes: a writable, C-contiguous block of `len` bytes at `buf`, items
/// of `itemsize` bytes (struct `format`), laid out as `shape` (and `strides`; `None` for a
/// block that the shape alone describes).
pub(crate) struct BufferLayout<'a> {
    pub(crate) buf: *mut c_void,
    pub(crate) len: usize,
    pub(crate) itemsize: usize,
    pub(crate) format: &'static std::ffi::CStr,
    pub(crate) shape: &'a [isize],
    pub(crate) strides: Option<&'a [isize]>,
}

impl BufferLayout<'_> {
    /// Fills the interpreter's `view` for a `__getbuffer__(flags)` request on `owner`, which
    /// the view then holds (a new reference, dropped by `PyBuffer_Release`). The format, shape
    /// and strides are given only when `flags` asks for them. `BufferError` for a null `view`,
    /// or `"<type> is C-contiguous, not Fortran-contiguous"` when a Fortran-contiguous view is
    /// asked of a block with more than one dimension over 1.
    ///
    /// # Safety
    /// `view` is null or the interpreter's `Py_buffer`; `buf`, `shape`, `strides` and their
    /// contents stay valid and unchanged while `owner` lives.
    pub(crate) unsafe fn fill(
        self,
        owner: &Bound<'_, PyAny>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("view is null"));
        }
        let asked = |flag: c_int| (flags & flag) == flag;
        if asked(ffi::PyBUF_F_CONTIGUOUS) && self.shape.iter().filter(|&&d| d > 1).count() > 1 {
            return Err(PyBufferError::new_err(format!(
                "{} is C-contiguous, not Fortran-contiguous",
                owner.get_type().name()?
            )));
        }
        let ptr_if = |flag: c_int, p: *const isize| {
            if asked(flag) {
                p.cast_mut()
            } else {
                std::ptr::null_mut()
            }
        };
        // SAFETY: `view` is a valid Py_buffer (above, and the caller's contract); what it is
        // given points into `owner`, which it keeps alive.
        unsafe {
            (*view).obj = owner.clone().into_ptr();
            (*view).buf = self.buf;
            (*view).len = self.len as isize;
            (*view).readonly = 0;
            (*view).itemsize = self.itemsize as isize;
            (*view).format = if asked(ffi::PyBUF_FORMAT) {
                self.format.as_ptr().cast_mut()
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = self.shape.len() as c_int;
            (*view).shape = ptr_if(ffi::PyBUF_ND, self.shape.as_ptr());
            (*view).strides = match self.strides {
                Some(s) => ptr_if(ffi::PyBUF_STRIDES, s.as_ptr()),
                None => std::ptr::null_mut(),
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }
}
