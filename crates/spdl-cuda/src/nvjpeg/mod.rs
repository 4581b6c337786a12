//! nvJPEG (feature `decode-nvjpeg`): JPEG decoding on the GPU, loaded at run time.
//!
//! The library is found, in order: `SPDL_NVJPEG_PATH` (a file, or a directory holding
//! `libnvjpeg.so*`); the sonames `libnvjpeg.so.12`, `libnvjpeg.so.13`, `libnvjpeg.so` on the
//! dynamic loader's path (`LD_LIBRARY_PATH`, ldconfig); the `nvidia` pip wheels that PyTorch
//! environments carry (`site-packages/nvidia/nvjpeg/lib/`, `nvidia/cu13/lib/`) under
//! `VIRTUAL_ENV`, `CONDA_PREFIX`, `PYTHONPATH`, `~/.local` and `/usr/local`. Install one with
//! `pip install nvidia-nvjpeg-cu12` (about 5 MB).
//!
//! [`NvjpegDecoder`] decodes a batch into one device buffer `[N, H, W, 3]` u8 RGB
//! ([`NvjpegDecoder::decode_batch`]) or `[N, 3, H, W]` u8 RGB/BGR planes as SPDL's
//! `decode_image_nvjpeg` ([`NvjpegDecoder::decode_batch_planar`]), resized on the
//! GPU to the target size, and falls back to the CPU decoder (libjpeg-turbo) for what nvJPEG
//! rejects (CMYK, arithmetic coding, some progressive files), counting each fallback. This is
//! the role of DALI's `fn.decoders.image(device="mixed")` and torchvision's
//! `decode_jpeg(device="cuda")`.

mod decode;
pub(crate) mod ffi;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use decode::{DecodeReport, Fallback, NvjpegDecoder, NvjpegStats, PixFmt, RESIZE_KERNEL_PTX};

use crate::error::{Error, Result};

/// Environment variable naming the nvJPEG library file, or a directory holding it.
pub const PATH_ENV: &str = "SPDL_NVJPEG_PATH";

/// Sonames tried on the dynamic loader's path, newest ABI first.
const SONAMES: [&str; 3] = ["libnvjpeg.so.12", "libnvjpeg.so.13", "libnvjpeg.so"];

/// A loaded libnvjpeg.
#[derive(Debug)]
pub struct NvjpegLibrary {
    pub(crate) api: ffi::Api,
    path: PathBuf,
    version: (i32, i32, i32),
}

impl NvjpegLibrary {
    /// Where it was loaded from (a path, or a soname the loader resolved).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `(major, minor, patch)` from `nvjpegGetProperty` (e.g. `(12, 4, 0)`).
    pub fn version(&self) -> (i32, i32, i32) {
        self.version
    }

    /// Creates a library handle (`nvjpegCreateSimple`) and destroys it: the check that a GPU
    /// is usable for nvJPEG.
    ///
    /// # Errors
    /// [`Error::Nvjpeg`] with the status, e.g. 6 (`NVJPEG_STATUS_EXECUTION_FAILED`) on a
    /// machine without a GPU.
    pub fn probe_handle(&self) -> Result<()> {
        let h = Handle::create(self)?;
        drop(h);
        Ok(())
    }
}

/// An `nvjpegHandle_t`, destroyed on drop.
pub(crate) struct Handle<'a> {
    lib: &'a NvjpegLibrary,
    pub(crate) raw: ffi::Handle,
}

impl<'a> Handle<'a> {
    pub(crate) fn create(lib: &'a NvjpegLibrary) -> Result<Self> {
        let mut raw: ffi::Handle = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; the function pointer is live while `lib` is.
        let st = unsafe { (lib.api.create_simple)(&mut raw) };
        check("nvjpegCreateSimple", st)?;
        Ok(Handle { lib, raw })
    }
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        // SAFETY: `raw` came from nvjpegCreateSimple and is destroyed once.
        unsafe { (self.lib.api.destroy)(self.raw) };
    }
}

pub(crate) fn check(call: &'static str, status: ffi::Status) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error::Nvjpeg { call, status })
    }
}

/// Where [`load_library`] looks, in order (files and sonames).
pub fn candidate_paths() -> Vec<PathBuf> {
    let mut out = crate::dylib::env_then_sonames(PATH_ENV, &SONAMES);
    for sp in site_packages() {
        for sub in ["nvidia/nvjpeg/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"] {
            for s in SONAMES {
                let f = sp.join(sub).join(s);
                if f.exists() {
                    out.push(f);
                }
            }
        }
    }
    out
}

/// Python `site-packages` / `dist-packages` directories to search for the nvidia wheels.
fn site_packages() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(PathBuf::from(home).join(".local"));
    }
    roots.extend(["/usr/local", "/usr"].map(PathBuf::from));
    let mut out: Vec<PathBuf> = std::env::var_os("PYTHONPATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(root.join("lib")) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("python3") {
                out.push(e.path().join("site-packages"));
                out.push(e.path().join("dist-packages"));
            }
        }
    }
    out
}

/// Loads libnvjpeg once per process (see the module docs for where it looks); later calls
/// return the same library. A failure is not cached (set `SPDL_NVJPEG_PATH` and retry).
///
/// # Errors
/// [`Error::NvjpegUnavailable`] listing every place tried and why each failed.
pub fn load_library() -> Result<Arc<NvjpegLibrary>> {
    static LIB: Mutex<Option<Arc<NvjpegLibrary>>> = Mutex::new(None);
    crate::dylib::load_once(&LIB, candidate_paths(), |path| {
        let api = ffi::Api::load(path)?;
        let prop = |t| {
            let mut v = 0;
            // SAFETY: `v` is a valid out-pointer; the library is loaded.
            let st = unsafe { (api.get_property)(t, &mut v) };
            if st == 0 {
                v
            } else {
                -1
            }
        };
        let version = (
            prop(ffi::MAJOR_VERSION),
            prop(ffi::MINOR_VERSION),
            prop(ffi::PATCH_LEVEL),
        );
        Ok(NvjpegLibrary {
            api,
            path: path.to_path_buf(),
            version,
        })
    })
    .map_err(|tried| {
        Error::NvjpegUnavailable(format!(
            "libnvjpeg not found (pip install nvidia-nvjpeg-cu12, or set {PATH_ENV}); tried: {tried}"
        ))
    })
}
