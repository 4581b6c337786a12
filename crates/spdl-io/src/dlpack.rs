//! DLPack and `__cuda_array_interface__`: the C layouts of `dlpack.h` (v1.0, with the legacy
//! unversioned `DLManagedTensor`), and [`TensorExport`], the Rust-side description the Python
//! bindings turn into a capsule or a dict. Beside [`DType`]: a host batch
//! ([`crate::batch::HostBatch::export`]) and a device batch (spdl-cuda's `DeviceBatch`) are
//! exported the same way; only the device differs.
//!
//! A hand-off to NumPy, PyTorch, CuPy or JAX is zero-copy: the tensor points at our memory, and
//! the memory stays valid until the consumer calls the deleter (which drops the keep-alive).

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::DType;

/// `DLDeviceType`: where the memory lives.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDeviceType(pub i32);

impl DLDeviceType {
    /// `kDLCPU`: ordinary host memory.
    pub const CPU: DLDeviceType = DLDeviceType(1);
    /// `kDLCUDA`: CUDA device memory.
    pub const CUDA: DLDeviceType = DLDeviceType(2);
    /// `kDLCUDAHost`: page-locked host memory (`cudaMallocHost`).
    pub const CUDA_HOST: DLDeviceType = DLDeviceType(3);
}

/// `DLDevice`: a device type and index.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    /// The kind of memory.
    pub device_type: DLDeviceType,
    /// The device index (0 for host memory).
    pub device_id: i32,
}

impl DLDevice {
    /// Host memory.
    pub fn cpu() -> Self {
        DLDevice {
            device_type: DLDeviceType::CPU,
            device_id: 0,
        }
    }

    /// Pinned host memory.
    pub fn cuda_host() -> Self {
        DLDevice {
            device_type: DLDeviceType::CUDA_HOST,
            device_id: 0,
        }
    }

    /// Memory of CUDA device `index`.
    pub fn cuda(index: usize) -> Self {
        DLDevice {
            device_type: DLDeviceType::CUDA,
            device_id: index as i32,
        }
    }
}

/// `DLDataType`: type code (0 int, 1 uint, 2 float), bits, lanes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDataType {
    /// `kDLInt` = 0, `kDLUInt` = 1, `kDLFloat` = 2.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes (1 for scalars).
    pub lanes: u16,
}

impl From<DType> for DLDataType {
    fn from(d: DType) -> Self {
        let (code, bits) = match d {
            DType::U8 => (1, 8),
            DType::U16 => (1, 16),
            DType::F32 => (2, 32),
            DType::I16 => (0, 16),
            DType::I32 => (0, 32),
            DType::I64 => (0, 64),
            DType::F64 => (2, 64),
        };
        DLDataType {
            code,
            bits,
            lanes: 1,
        }
    }
}

/// `DLTensor`: a borrowed view of an n-d array.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The data pointer (a device pointer for CUDA memory).
    pub data: *mut c_void,
    /// Where the memory lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` dimensions, in elements.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for row-major contiguous.
    pub strides: *mut i64,
    /// Offset of the first element from `data`, in bytes.
    pub byte_offset: u64,
}

/// `DLManagedTensor` (DLPack < 1.0, what `__dlpack__()` returns without `max_version`): the
/// tensor plus its owner and deleter; capsule name `"dltensor"`.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The view.
    pub dl_tensor: DLTensor,
    /// The producer's owner of the memory.
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when it no longer needs the memory.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version (1).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLManagedTensorVersioned` (DLPack >= 1.0, `__dlpack__(max_version=(1, x))`); capsule
/// name `"dltensor_versioned"`.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version of this struct (1.0).
    pub version: DLPackVersion,
    /// The producer's owner of the memory.
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when it no longer needs the memory.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// Bit 0: read-only; bit 1: is a copy.
    pub flags: u64,
    /// The view.
    pub dl_tensor: DLTensor,
}

/// A consumer's CUDA stream, as the Python protocols name it (spdl-cuda makes it wait for a
/// device batch and orders frees after its work).
///
/// DLPack's `__dlpack__(stream=...)`: `None` means the legacy default stream, `-1` means
/// "do not synchronize", `1` the legacy default stream, `2` the per-thread default stream,
/// any other value a `cudaStream_t` / `CUstream` handle (e.g. `torch.cuda.current_stream()
/// .cuda_stream`). `0` is ambiguous and rejected, as the DLPack spec says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerStream {
    /// Do not synchronize (the consumer takes care of it).
    NoSync,
    /// A raw stream handle (1 = legacy default, 2 = per-thread default).
    Raw(usize),
}

impl ConsumerStream {
    /// The legacy default stream (`CU_STREAM_LEGACY`).
    pub const LEGACY: ConsumerStream = ConsumerStream::Raw(1);

    /// Interprets the `stream` argument of `__dlpack__`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for `0` or a negative value other than `-1`.
    pub fn from_dlpack_arg(stream: Option<i64>) -> Result<Self> {
        match stream {
            None => Ok(ConsumerStream::LEGACY),
            Some(-1) => Ok(ConsumerStream::NoSync),
            Some(s) if s > 0 => Ok(ConsumerStream::Raw(s as usize)),
            Some(s) => Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "stream={s} is not valid for a CUDA tensor (use None, -1, 1, 2 or a stream handle)"
                ),
            )),
        }
    }
}

/// The `__cuda_array_interface__` (version 3) of a device tensor, as plain values; the
/// bindings build the dict `{"shape", "typestr", "data": (ptr, False), "version": 3,
/// "strides": None, "stream": stream}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaArrayInterface {
    /// Dimensions, in elements.
    pub shape: Vec<usize>,
    /// NumPy type string (`"|u1"`, `"<f4"`).
    pub typestr: &'static str,
    /// Device pointer and read-only flag (always writable: `false`).
    pub data: (u64, bool),
    /// Protocol version (3).
    pub version: u32,
    /// The stream the data is produced on (the copy stream); consumers make their stream
    /// wait on it. `None` when already synchronized.
    pub stream: Option<usize>,
}

/// Everything needed to hand a buffer to Python zero-copy, as the bindings need it: data
/// pointer, device, shape, dtype, the producing stream, and a keep-alive handle that owns the
/// memory. Contiguous row-major (no strides).
#[derive(Clone)]
pub struct TensorExport {
    /// Address of the first element (a device pointer for [`DLDeviceType::CUDA`]).
    pub data_ptr: u64,
    /// Where the memory lives and which device.
    pub device: DLDevice,
    /// Dimensions, in elements.
    pub shape: Vec<i64>,
    /// Element type.
    pub dtype: DType,
    /// The stream the data is (or was) produced on, for `__cuda_array_interface__`; `None`
    /// when the consumer needs no synchronization (host memory, or already synchronized).
    pub stream: Option<usize>,
    /// Owns the memory: hold a clone for as long as any view exists.
    pub keep_alive: Arc<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for TensorExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorExport")
            .field("data_ptr", &format_args!("{:#x}", self.data_ptr))
            .field("device", &self.device)
            .field("shape", &self.shape)
            .field("dtype", &self.dtype)
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

/// What a managed tensor's `manager_ctx` owns: the shape array and the keep-alive.
struct Holder {
    shape: Vec<i64>,
    _keep_alive: Arc<dyn Any + Send + Sync>,
}

impl TensorExport {
    /// `(device_type, device_id)` as `__dlpack_device__()` returns it.
    pub fn dlpack_device(&self) -> (i32, i32) {
        (self.device.device_type.0, self.device.device_id)
    }

    /// Size of the data in bytes.
    pub fn nbytes(&self) -> usize {
        self.shape.iter().product::<i64>().max(0) as usize * self.dtype.size()
    }

    fn into_parts(self) -> (DLTensor, *mut c_void) {
        let holder = Box::new(Holder {
            shape: self.shape,
            _keep_alive: self.keep_alive,
        });
        let ndim = holder.shape.len() as i32;
        let holder = Box::into_raw(holder);
        // SAFETY: `holder` was just leaked from a Box and is only freed by the deleter; the
        // shape Vec's buffer does not move while the Holder lives.
        let shape = unsafe { (*holder).shape.as_mut_ptr() };
        let tensor = DLTensor {
            data: self.data_ptr as *mut c_void,
            device: self.device,
            ndim,
            dtype: self.dtype.into(),
            shape,
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        (tensor, holder.cast())
    }

    /// A heap `DLManagedTensor` owning the keep-alive, for a `"dltensor"` capsule. The
    /// consumer calls its deleter exactly once; if the capsule is never consumed, the capsule
    /// destructor must call it.
    pub fn into_dlpack(self) -> *mut DLManagedTensor {
        let (dl_tensor, manager_ctx) = self.into_parts();
        Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor,
            manager_ctx,
            deleter: Some(delete_managed),
        }))
    }

    /// A heap `DLManagedTensorVersioned` (DLPack 1.0) owning the keep-alive, for a
    /// `"dltensor_versioned"` capsule; same ownership rules as [`TensorExport::into_dlpack`].
    pub fn into_dlpack_versioned(self) -> *mut DLManagedTensorVersioned {
        let (dl_tensor, manager_ctx) = self.into_parts();
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 0 },
            manager_ctx,
            deleter: Some(delete_managed),
            flags: 0,
            dl_tensor,
        }))
    }

    /// The `__cuda_array_interface__` description.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for memory that is not on a CUDA device.
    pub fn cuda_array_interface(&self) -> Result<CudaArrayInterface> {
        if self.device.device_type != DLDeviceType::CUDA {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "__cuda_array_interface__ is only for CUDA device memory",
            ));
        }
        Ok(CudaArrayInterface {
            shape: self.shape.iter().map(|&d| d.max(0) as usize).collect(),
            typestr: self.dtype.typestr(),
            data: (self.data_ptr, false),
            version: 3,
            stream: self.stream,
        })
    }
}

/// The two managed-tensor structs, to one deleter: where each keeps its `manager_ctx`.
trait Managed {
    fn manager_ctx(&self) -> *mut c_void;
}

impl Managed for DLManagedTensor {
    fn manager_ctx(&self) -> *mut c_void {
        self.manager_ctx
    }
}

impl Managed for DLManagedTensorVersioned {
    fn manager_ctx(&self) -> *mut c_void {
        self.manager_ctx
    }
}

/// The deleter of [`TensorExport::into_dlpack`] (`M` = [`DLManagedTensor`]) and
/// [`TensorExport::into_dlpack_versioned`] (`M` = [`DLManagedTensorVersioned`]).
///
/// # Safety
/// `p` is null or a pointer from the matching `into_dlpack*`, not yet deleted.
unsafe extern "C" fn delete_managed<M: Managed>(p: *mut M) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` came from `Box::into_raw` in `into_dlpack*` and is deleted once (caller's
    // contract); its `manager_ctx` came from `Box::into_raw` of a `Holder`.
    unsafe {
        let m = Box::from_raw(p);
        drop(Box::from_raw(m.manager_ctx().cast::<Holder>()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_dlpack_h() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<DLDevice>(), 8);
        assert_eq!(size_of::<DLDataType>(), 4);
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(offset_of!(DLTensor, shape), 24);
        assert_eq!(offset_of!(DLTensor, byte_offset), 40);
        assert_eq!(size_of::<DLManagedTensor>(), 64);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
    }

    #[test]
    fn deleter_releases_the_keep_alive() {
        let owner: Arc<dyn Any + Send + Sync> = Arc::new(vec![1u8, 2, 3, 4, 5, 6]);
        let e = TensorExport {
            data_ptr: 0x1000,
            device: DLDevice::cuda(1),
            shape: vec![1, 2, 3],
            dtype: DType::U8,
            stream: Some(0x77),
            keep_alive: owner.clone(),
        };
        assert_eq!(e.dlpack_device(), (2, 1));
        assert_eq!(e.nbytes(), 6);
        let cai = e.cuda_array_interface().unwrap();
        assert_eq!(
            (cai.shape.as_slice(), cai.typestr, cai.data, cai.stream),
            (&[1usize, 2, 3][..], "|u1", (0x1000, false), Some(0x77))
        );
        let m = e.clone().into_dlpack();
        let v = e.into_dlpack_versioned();
        assert_eq!(Arc::strong_count(&owner), 3);
        // SAFETY: fresh pointers from into_dlpack*, read then deleted once.
        unsafe {
            let t = &(*m).dl_tensor;
            assert_eq!((t.ndim, *t.shape.add(2), t.dtype.bits), (3, 3, 8));
            assert_eq!((*v).version, DLPackVersion { major: 1, minor: 0 });
            ((*m).deleter.unwrap())(m);
            ((*v).deleter.unwrap())(v);
        }
        assert_eq!(Arc::strong_count(&owner), 1);
    }

    #[test]
    fn dlpack_stream_argument() {
        assert_eq!(
            ConsumerStream::from_dlpack_arg(None).unwrap(),
            ConsumerStream::LEGACY
        );
        assert_eq!(
            ConsumerStream::from_dlpack_arg(Some(-1)).unwrap(),
            ConsumerStream::NoSync
        );
        assert_eq!(
            ConsumerStream::from_dlpack_arg(Some(0x55aa)).unwrap(),
            ConsumerStream::Raw(0x55aa)
        );
        assert!(ConsumerStream::from_dlpack_arg(Some(0)).is_err());
        assert!(ConsumerStream::from_dlpack_arg(Some(-2)).is_err());
    }
}
