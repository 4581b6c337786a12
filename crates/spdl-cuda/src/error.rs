//! The one error type of spdl-cuda.

/// `Result` with [`Error`] as the error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the GPU side reports. Nothing in this crate panics for a missing driver, device or
/// library: each case is a variant here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The crate was built without the feature this call needs (`cuda`, `decode-nvjpeg`).
    /// The message names the feature.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// No CUDA driver: `libcuda.so` is not on the library path, `cuInit` failed, the machine
    /// has no CUDA device, or `SPDL_CUDA_DISABLE` is set. The message says which.
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    /// A device index outside `0..count` (from `--device cuda:N` or `LOCAL_RANK`).
    #[error("invalid CUDA device: cuda:{index}: {count} device(s) visible")]
    InvalidDevice {
        /// The index asked for.
        index: usize,
        /// Devices the driver sees.
        count: usize,
    },
    /// A CUDA driver call failed (`call` is the API name, `code` the `CUresult` name).
    #[error("CUDA call failed: {call}: {code}")]
    Driver {
        /// The driver API call, e.g. `cuMemHostAlloc`.
        call: &'static str,
        /// The `CUresult` name and description.
        code: String,
    },
    /// libnvjpeg could not be found or loaded (the message lists where it looked).
    #[error("nvJPEG unavailable: {0}")]
    NvjpegUnavailable(String),
    /// libnvcuvid (NVDEC, part of the NVIDIA driver) could not be found or loaded (the message
    /// lists where it looked).
    #[error("NVDEC unavailable: {0}")]
    NvdecUnavailable(String),
    /// An nvJPEG call returned a non-zero `nvjpegStatus_t` (6 = execution failed, e.g. no GPU).
    #[error("nvJPEG call failed: {call}: status {status} ({})", crate::nvjpeg_status_name(*status))]
    Nvjpeg {
        /// The nvJPEG function, e.g. `nvjpegCreateSimple`.
        call: &'static str,
        /// The `nvjpegStatus_t` value.
        status: i32,
    },
    /// A call argument is invalid (shape, dtype, sizes); the message says which.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The buffer pool failed (timeout waiting for a buffer, allocation failure, bounds).
    #[error(transparent)]
    Pool(#[from] spdl_core::Error),
    /// The CPU decoder failed (nvJPEG's fallback decode of a file it does not take).
    #[error(transparent)]
    Decode(#[from] spdl_io::Error),
}

impl Error {
    /// The error every entry point returns when the crate was built without `feature`.
    pub fn unsupported_without(feature: &str) -> Self {
        Error::Unsupported(format!(
            "spdl-cuda was built without the `{feature}` feature"
        ))
    }

    /// The same error again, for an outcome kept and reported on every later call (a
    /// [`crate::DeviceTarget`] that failed to open): the driver, device and argument errors
    /// are reproduced as they were; a pool or decode error (never the outcome of opening a
    /// device) by its message.
    pub(crate) fn replay(&self) -> Self {
        match self {
            Error::Unsupported(m) => Error::Unsupported(m.clone()),
            Error::NoDriver(m) => Error::NoDriver(m.clone()),
            Error::InvalidDevice { index, count } => Error::InvalidDevice {
                index: *index,
                count: *count,
            },
            Error::Driver { call, code } => Error::Driver {
                call,
                code: code.clone(),
            },
            Error::NvjpegUnavailable(m) => Error::NvjpegUnavailable(m.clone()),
            Error::NvdecUnavailable(m) => Error::NvdecUnavailable(m.clone()),
            Error::Nvjpeg { call, status } => Error::Nvjpeg {
                call,
                status: *status,
            },
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Pool(e) => Error::InvalidArgument(e.to_string()),
            Error::Decode(e) => Error::InvalidArgument(e.to_string()),
        }
    }

    /// True for the "nothing to run on" cases ([`Error::Unsupported`], [`Error::NoDriver`],
    /// [`Error::NvjpegUnavailable`], [`Error::NvdecUnavailable`]): callers fall back to the CPU path on these.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Unsupported(_)
                | Error::NoDriver(_)
                | Error::NvjpegUnavailable(_)
                | Error::NvdecUnavailable(_)
        )
    }
}

impl spdl_core::ErrorStatus for Error {
    /// A pool that timed out or a read the decoder reports as temporary; the driver and
    /// argument errors are permanent.
    fn is_temporary(&self) -> bool {
        match self {
            Error::Pool(e) => e.is_temporary(),
            Error::Decode(e) => e.is_temporary(),
            _ => false,
        }
    }
}

#[cfg(feature = "cuda")]
impl Error {
    /// Wraps a cudarc driver error from `call`.
    pub(crate) fn driver(call: &'static str, e: cudarc::driver::DriverError) -> Self {
        let name = e.error_name().map(|s| s.to_string_lossy().into_owned());
        let text = e.error_string().map(|s| s.to_string_lossy().into_owned());
        let code = match (name, text) {
            (Ok(n), Ok(t)) => format!("{n}: {t}"),
            _ => format!("{:?}", e.0),
        };
        Error::Driver { call, code }
    }
}
