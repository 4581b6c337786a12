//! The CUDA driver, loaded at run time and initialized behind a guard, and device selection.
//!
//! cudarc dlopens `libcuda.so` on first use and panics when it is missing; every call here
//! first checks that the library can be loaded ([`driver_available`]) and returns
//! [`Error::NoDriver`] otherwise. `SPDL_CUDA_DISABLE=1` forces the no-driver path (to test the
//! CPU fallbacks on a GPU machine).

use std::str::FromStr;

use crate::error::{Error, Result};

/// Environment variable that, set to anything but `""` or `"0"`, makes the driver look absent.
pub const DISABLE_ENV: &str = "SPDL_CUDA_DISABLE";

/// Which GPU to use: a fixed index or the local rank's (PyTorch's `cuda:N` and
/// `torch.cuda.set_device(LOCAL_RANK)` convention under `torchrun`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSelector {
    /// The device whose index is the `LOCAL_RANK` environment variable (0 when unset).
    #[default]
    LocalRank,
    /// A fixed device index.
    Index(usize),
}

impl DeviceSelector {
    /// The device index this selects: the index, or `LOCAL_RANK` (0 when unset).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `LOCAL_RANK` is set but not a non-negative integer.
    pub fn index(self) -> Result<usize> {
        match self {
            DeviceSelector::Index(i) => Ok(i),
            DeviceSelector::LocalRank => local_rank(),
        }
    }
}

impl FromStr for DeviceSelector {
    type Err = Error;

    /// Parses `cuda` (the local rank's device), `cuda:N` or `N`.
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        let idx = match s {
            "cuda" | "gpu" => return Ok(DeviceSelector::LocalRank),
            _ => s
                .strip_prefix("cuda:")
                .or_else(|| s.strip_prefix("gpu:"))
                .unwrap_or(s),
        };
        idx.parse().map(DeviceSelector::Index).map_err(|_| {
            Error::InvalidArgument(format!(
                "device {s:?}: expected `cuda`, `cuda:N` or a device index"
            ))
        })
    }
}

/// `LOCAL_RANK` as set by `torchrun`; 0 when unset or empty.
///
/// # Errors
/// [`Error::InvalidArgument`] when it is set to something other than a non-negative integer.
pub fn local_rank() -> Result<usize> {
    match std::env::var("LOCAL_RANK") {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| Error::InvalidArgument(format!("LOCAL_RANK={v:?} is not a device index"))),
        _ => Ok(0),
    }
}

fn disabled_by_env() -> bool {
    std::env::var(DISABLE_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether the CUDA driver library (`libcuda.so`) can be loaded. Always `false` without the
/// `cuda` feature or with `SPDL_CUDA_DISABLE` set. Does not initialize the driver.
pub fn driver_available() -> bool {
    if disabled_by_env() {
        return false;
    }
    #[cfg(feature = "cuda")]
    {
        // SAFETY: this only tries `dlopen` on the driver's library names and closes what it
        // opened; loading libcuda runs no code that has requirements on the caller.
        unsafe { cudarc::driver::sys::is_culib_present() }
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

/// Initializes the driver once (`cuInit`); later calls return the first outcome.
///
/// # Errors
/// [`Error::Unsupported`] without the `cuda` feature; [`Error::NoDriver`] when the driver
/// library is missing, disabled, or `cuInit` fails (e.g. `CUDA_ERROR_NO_DEVICE`).
pub fn init() -> Result<()> {
    #[cfg(feature = "cuda")]
    {
        use std::sync::OnceLock;
        if disabled_by_env() {
            return Err(Error::NoDriver(format!("{DISABLE_ENV} is set")));
        }
        static INIT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
        INIT.get_or_init(|| {
            if !driver_available() {
                return Err(
                    "libcuda.so could not be loaded (no NVIDIA driver on the library \
                            path)"
                        .to_string(),
                );
            }
            // cudarc panics when a symbol is missing from an old driver: catch it.
            match std::panic::catch_unwind(cudarc::driver::result::init) {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(Error::driver("cuInit", e).to_string()),
                Err(_) => Err("cuInit panicked (driver too old for CUDA 12.8 bindings?)".into()),
            }
        })
        .clone()
        .map_err(Error::NoDriver)
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(Error::unsupported_without("cuda"))
    }
}

/// Number of CUDA devices visible (after `CUDA_VISIBLE_DEVICES`).
///
/// # Errors
/// As [`init`], plus [`Error::Driver`] if `cuDeviceGetCount` fails.
pub fn device_count() -> Result<usize> {
    init()?;
    #[cfg(feature = "cuda")]
    {
        cudarc::driver::CudaContext::device_count()
            .map(|n| n.max(0) as usize)
            .map_err(|e| Error::driver("cuDeviceGetCount", e))
    }
    #[cfg(not(feature = "cuda"))]
    {
        unreachable!("init fails without the cuda feature")
    }
}

/// One GPU: its primary context, shared by everything in this process that uses the device
/// (as the CUDA runtime and PyTorch do). Cheap to clone.
#[derive(Debug, Clone)]
pub struct CudaDevice {
    #[cfg(feature = "cuda")]
    pub(crate) ctx: std::sync::Arc<cudarc::driver::CudaContext>,
    #[cfg(not(feature = "cuda"))]
    pub(crate) never: std::convert::Infallible,
}

impl CudaDevice {
    /// The device with index `index` (`cuda:index`).
    ///
    /// # Errors
    /// [`Error::Unsupported`] without the `cuda` feature, [`Error::NoDriver`] without a
    /// driver, [`Error::InvalidDevice`] for an index outside `0..device_count()`,
    /// [`Error::Driver`] when retaining the primary context fails.
    pub fn new(index: usize) -> Result<Self> {
        let count = device_count()?;
        if index >= count {
            return Err(Error::InvalidDevice { index, count });
        }
        #[cfg(feature = "cuda")]
        {
            match std::panic::catch_unwind(|| cudarc::driver::CudaContext::new(index)) {
                Ok(Ok(ctx)) => Ok(CudaDevice { ctx }),
                Ok(Err(e)) => Err(Error::driver("cuDevicePrimaryCtxRetain", e)),
                Err(_) => Err(Error::NoDriver("creating the CUDA context panicked".into())),
            }
        }
        #[cfg(not(feature = "cuda"))]
        {
            unreachable!("device_count fails without the cuda feature")
        }
    }

    /// The device a [`DeviceSelector`] names.
    ///
    /// # Errors
    /// As [`CudaDevice::new`], plus a bad `LOCAL_RANK` ([`Error::InvalidArgument`]).
    pub fn select(selector: DeviceSelector) -> Result<Self> {
        // Check the driver first, so "no driver" wins over a bad LOCAL_RANK.
        init()?;
        CudaDevice::new(selector.index()?)
    }

    /// The local rank's device (`LOCAL_RANK`, default 0): the default of a training process.
    ///
    /// # Errors
    /// As [`CudaDevice::select`].
    pub fn local() -> Result<Self> {
        CudaDevice::select(DeviceSelector::LocalRank)
    }

    /// The device index (the `N` of `cuda:N`, DLPack's `device_id`).
    pub fn index(&self) -> usize {
        #[cfg(feature = "cuda")]
        {
            self.ctx.ordinal()
        }
        #[cfg(not(feature = "cuda"))]
        {
            match self.never {}
        }
    }

    /// The device's name, e.g. `"NVIDIA H100 80GB HBM3"`.
    ///
    /// # Errors
    /// [`Error::Driver`] if the driver call fails.
    pub fn name(&self) -> Result<String> {
        #[cfg(feature = "cuda")]
        {
            self.ctx
                .name()
                .map_err(|e| Error::driver("cuDeviceGetName", e))
        }
        #[cfg(not(feature = "cuda"))]
        {
            match self.never {}
        }
    }

    /// Total device memory in bytes.
    ///
    /// # Errors
    /// [`Error::Driver`] if the driver call fails.
    pub fn total_memory(&self) -> Result<usize> {
        #[cfg(feature = "cuda")]
        {
            self.ctx
                .total_mem()
                .map_err(|e| Error::driver("cuDeviceTotalMem", e))
        }
        #[cfg(not(feature = "cuda"))]
        {
            match self.never {}
        }
    }

    /// Waits for all work on the device (every stream) to finish.
    ///
    /// # Errors
    /// [`Error::Driver`] with the first error of earlier asynchronous work.
    pub fn synchronize(&self) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            self.ctx
                .synchronize()
                .map_err(|e| Error::driver("cuCtxSynchronize", e))
        }
        #[cfg(not(feature = "cuda"))]
        {
            match self.never {}
        }
    }

    /// The cudarc context, for code that needs driver calls this crate does not wrap.
    #[cfg(feature = "cuda")]
    pub fn context(&self) -> &std::sync::Arc<cudarc::driver::CudaContext> {
        &self.ctx
    }

    /// Makes the device's context current on the calling thread (before raw driver calls).
    #[cfg(feature = "cuda")]
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_selectors() {
        assert_eq!(
            "cuda".parse::<DeviceSelector>().unwrap(),
            DeviceSelector::LocalRank
        );
        assert_eq!(
            "cuda:3".parse::<DeviceSelector>().unwrap(),
            DeviceSelector::Index(3)
        );
        assert_eq!(
            "1".parse::<DeviceSelector>().unwrap(),
            DeviceSelector::Index(1)
        );
        assert!(matches!(
            "cpu".parse::<DeviceSelector>(),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(DeviceSelector::Index(2).index().unwrap(), 2);
    }
}
