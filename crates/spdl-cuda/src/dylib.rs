//! Finding and loading a library at run time, once per process: what nvJPEG and NVDEC share.

use std::path::PathBuf;
#[cfg(any(feature = "decode-nvjpeg", feature = "decode-nvdec"))]
use std::sync::{Arc, Mutex};

/// The places to try, in order: the value of the environment variable `env` (a file, or a
/// directory holding one of `sonames`), then `sonames` on the dynamic loader's path.
pub(crate) fn env_then_sonames(env: &str, sonames: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_dir() {
            out.extend(sonames.iter().map(|s| p.join(s)));
        } else {
            out.push(p);
        }
    }
    out.extend(sonames.iter().map(PathBuf::from));
    out
}

/// The library in `slot` if one is loaded; otherwise the first of `candidates` that `load`
/// accepts, kept in `slot` for later calls. A failure is not kept: the error lists every
/// place tried and why each failed (`"<path>: <why>; ..."`).
#[cfg(any(feature = "decode-nvjpeg", feature = "decode-nvdec"))]
pub(crate) fn load_once<T>(
    slot: &Mutex<Option<Arc<T>>>,
    candidates: Vec<PathBuf>,
    mut load: impl FnMut(&std::path::Path) -> Result<T, String>,
) -> Result<Arc<T>, String> {
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = slot.as_ref() {
        return Ok(Arc::clone(l));
    }
    let mut tried = Vec::new();
    for path in candidates {
        match load(&path) {
            Ok(lib) => {
                let lib = Arc::new(lib);
                *slot = Some(Arc::clone(&lib));
                return Ok(lib);
            }
            Err(e) => tried.push(format!("{}: {e}", path.display())),
        }
    }
    Err(tried.join("; "))
}
