//! libnvjpeg from the PyPI wheel (`pip install nvidia-nvjpeg-cu12`): loading works without a
//! GPU, creating a handle fails cleanly. Point `SPDL_NVJPEG_PATH` (or `VIRTUAL_ENV`) at it;
//! without the wheel the test says SKIPPED.
#![cfg(feature = "decode-nvjpeg")]

use spdl_cuda::nvjpeg;
use spdl_cuda::Error;

#[test]
fn load_from_wheel_and_fail_cleanly_without_gpu() {
    let lib = match nvjpeg::load_library() {
        Ok(l) => l,
        Err(e) => {
            assert!(matches!(e, Error::NvjpegUnavailable(_)), "{e:?}");
            eprintln!(
                "SKIPPED: libnvjpeg not found ({e}); pip install nvidia-nvjpeg-cu12 and set {}",
                nvjpeg::PATH_ENV
            );
            return;
        }
    };
    eprintln!(
        "loaded {} version {:?}",
        lib.path().display(),
        lib.version()
    );
    assert!(lib.version().0 >= 12, "{:?}", lib.version());
    let probe = lib.probe_handle();
    if spdl_cuda::driver_available() {
        eprintln!("driver present: nvjpegCreateSimple -> {probe:?}");
        return;
    }
    let e = probe.unwrap_err();
    assert!(
        matches!(e, Error::Nvjpeg { call: "nvjpegCreateSimple", status } if status != 0),
        "{e:?}"
    );
    eprintln!("without a GPU: {e}");
    // A decoder needs a device first: the error is "no driver", not a panic.
    assert!(spdl_cuda::CudaDevice::new(0).unwrap_err().is_unavailable());
}

#[test]
fn resize_kernel_assembles_when_ptxas_is_given() {
    let Some(ptxas) = std::env::var_os("SPDL_PTXAS") else {
        eprintln!("SKIPPED: set SPDL_PTXAS to a ptxas binary (pip install nvidia-cuda-nvcc-cu12)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("spdl-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptx = dir.join("resize.ptx");
    std::fs::write(&ptx, nvjpeg::RESIZE_KERNEL_PTX).unwrap();
    for arch in ["sm_50", "sm_80", "sm_90"] {
        let out = std::process::Command::new(&ptxas)
            .args(["-arch", arch, "-o"])
            .arg(dir.join(format!("{arch}.cubin")))
            .arg(&ptx)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{arch}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
