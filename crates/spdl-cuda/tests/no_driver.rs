//! The no-driver paths: on a machine without libcuda (CI) every entry point returns a named
//! error, never a panic. On a machine with a driver these checks are skipped (visibly).

use spdl_cuda::{CudaDevice, DeviceSelector, Error};

/// Whether a CUDA driver is present, which skips the test (visibly); the driver paths are
/// tested by disabled.rs and the GPU checks.
#[cfg(feature = "cuda")]
fn skipped_with_a_driver() -> bool {
    let present = spdl_cuda::driver_available();
    if present {
        eprintln!("SKIPPED: a CUDA driver is present");
    }
    present
}

#[cfg(feature = "cuda")]
#[test]
fn no_driver_is_a_clean_error() {
    if skipped_with_a_driver() {
        return;
    }
    for r in [
        CudaDevice::new(0).map(|_| ()),
        CudaDevice::local().map(|_| ()),
        CudaDevice::select(DeviceSelector::Index(3)).map(|_| ()),
        spdl_cuda::device_count().map(|_| ()),
        spdl_cuda::driver::init(),
    ] {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::NoDriver(_)), "{e:?}");
        assert!(e.is_unavailable());
        assert!(e.to_string().starts_with("no CUDA driver: "), "{e}");
    }
}

#[cfg(not(feature = "cuda"))]
#[test]
fn without_the_feature_everything_is_unsupported() {
    assert!(!spdl_cuda::driver_available());
    for r in [
        CudaDevice::new(0).map(|_| ()),
        CudaDevice::local().map(|_| ()),
        CudaDevice::select(DeviceSelector::Index(0)).map(|_| ()),
        spdl_cuda::device_count().map(|_| ()),
    ] {
        let e = r.unwrap_err();
        assert_eq!(
            e.to_string(),
            "unsupported: spdl-cuda was built without the `cuda` feature"
        );
        assert!(matches!(e, Error::Unsupported(_)));
    }
}

#[cfg(feature = "cuda")]
#[test]
fn a_device_target_reports_the_missing_driver_on_every_use() {
    use spdl_core::buffer::PoolConfig;
    use spdl_cuda::DeviceTarget;
    if skipped_with_a_driver() {
        return;
    }
    // Made without opening anything (a pipeline is built before fork()).
    let target = DeviceTarget::new(DeviceSelector::Index(2), PoolConfig::default()).unwrap();
    assert_eq!((target.index(), target.name()), (2, "cuda:2".to_string()));
    assert!(target.try_pinned(64).is_none());
    assert_eq!(target.stats().batches, 0);
    // Opening fails once; the same error comes back on each later use.
    for _ in 0..2 {
        let e = target.pinned_pool().map(|_| ()).unwrap_err();
        assert!(matches!(e, Error::NoDriver(_)), "{e:?}");
        assert!(e.is_unavailable());
    }
    let e = target.stage().map(|_| ()).unwrap_err();
    assert!(e.to_string().starts_with("no CUDA driver: "), "{e}");
    let e = DeviceTarget::open(DeviceSelector::Index(0), PoolConfig::default()).unwrap_err();
    assert!(matches!(e, Error::NoDriver(_)), "{e:?}");
}

#[cfg(not(feature = "cuda"))]
#[test]
fn without_the_feature_no_device_target_is_made() {
    let e = spdl_cuda::DeviceTarget::new(
        DeviceSelector::Index(0),
        spdl_core::buffer::PoolConfig::default(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
}
