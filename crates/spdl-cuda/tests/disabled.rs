//! `SPDL_CUDA_DISABLE=1` makes the driver look absent, on any machine (its own test binary,
//! so the variable does not leak into other tests).

#[cfg(feature = "cuda")]
#[test]
fn disable_env_forces_no_driver() {
    std::env::set_var(spdl_cuda::driver::DISABLE_ENV, "1");
    assert!(!spdl_cuda::driver_available());
    let e = spdl_cuda::CudaDevice::new(0).unwrap_err();
    assert!(matches!(e, spdl_cuda::Error::NoDriver(_)), "{e:?}");
    assert!(e.to_string().contains("SPDL_CUDA_DISABLE"), "{e}");
}
