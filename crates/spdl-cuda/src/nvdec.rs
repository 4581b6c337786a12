//! NVDEC: NVIDIA's video decoder engine, loaded at run time from the
//! driver's `libnvcuvid.so.1`, so that nothing CUDA is needed to build.
//!
//! The loader needs the feature `decode-nvdec` (without it [`load_library`] returns
//! [`Error::Unsupported`]); the request checks are always built. The library is found, in order: `SPDL_NVCUVID_PATH` (a file, or a directory holding
//! `libnvcuvid.so.1`), then the sonames `libnvcuvid.so.1` and `libnvcuvid.so` on the dynamic
//! loader's path. The NVIDIA driver installs it next to `libcuda.so.1`.
//!
//! [`NvdecDecoder::new`] checks, in this order, so that the checks that need no GPU run (and
//! are tested) everywhere: the request ([`NvdecConfig::check`]: codec, crop, and the coded and
//! output sizes against [`spdl_io::Limits`], before any device allocation), the library
//! ([`Error::NvdecUnavailable`]), the driver and device ([`Error::NoDriver`]).
//!
//! Status: the decode session itself (cuvid parser callbacks, `cuvidDecodePicture`, NV12
//! frame mapping) is not implemented yet; where library and driver are present
//! [`NvdecDecoder::new`] returns [`Error::Unsupported`] saying so. The host-side NV12
//! conversion is [`crate::nv12`].

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};

/// Environment variable naming `libnvcuvid`, or a directory holding it.
pub const PATH_ENV: &str = "SPDL_NVCUVID_PATH";

/// Sonames tried on the dynamic loader's path.
const SONAMES: [&str; 2] = ["libnvcuvid.so.1", "libnvcuvid.so"];

/// Entry points the decoder needs; a library missing one of them is refused.
#[cfg(feature = "decode-nvdec")]
const SYMBOLS: [&str; 6] = [
    "cuvidGetDecoderCaps",
    "cuvidCreateDecoder",
    "cuvidDestroyDecoder",
    "cuvidCreateVideoParser",
    "cuvidParseVideoData",
    "cuvidMapVideoFrame64",
];

/// A loaded `libnvcuvid`.
#[derive(Debug)]
pub struct NvcuvidLibrary {
    #[cfg(feature = "decode-nvdec")]
    _lib: libloading::Library,
    path: PathBuf,
}

impl NvcuvidLibrary {
    /// Where it was loaded from (a path, or the soname the loader resolved).
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

/// Where [`load_library`] looks, in order.
pub fn candidate_paths() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os(PATH_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_dir() {
            out.extend(SONAMES.iter().map(|s| p.join(s)));
        } else {
            out.push(p);
        }
    }
    out.extend(SONAMES.iter().map(PathBuf::from));
    out
}

/// Loads `libnvcuvid` once per process; later calls return the same library. A failure is
/// not cached.
///
/// # Errors
/// [`Error::Unsupported`] without the `decode-nvdec` feature; [`Error::NvdecUnavailable`] naming every place tried and why each failed, e.g.
/// `NVDEC unavailable: libnvcuvid.so.1 not found (it comes with the NVIDIA driver; or set
/// SPDL_NVCUVID_PATH); tried: ...`.
pub fn load_library() -> Result<Arc<NvcuvidLibrary>> {
    #[cfg(feature = "decode-nvdec")]
    {
        load_library_impl()
    }
    #[cfg(not(feature = "decode-nvdec"))]
    {
        Err(Error::unsupported_without("decode-nvdec"))
    }
}

#[cfg(feature = "decode-nvdec")]
fn load_library_impl() -> Result<Arc<NvcuvidLibrary>> {
    static LIB: std::sync::Mutex<Option<Arc<NvcuvidLibrary>>> = std::sync::Mutex::new(None);
    let mut slot = LIB.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = slot.as_ref() {
        return Ok(Arc::clone(l));
    }
    let mut tried = Vec::new();
    for path in candidate_paths() {
        // SAFETY: loading runs the library's initializers; libnvcuvid is the driver's own
        // library, whose initializers have no preconditions.
        match unsafe { libloading::Library::new(&path) } {
            Ok(lib) => {
                // SAFETY: only the presence of the symbols is checked; nothing is called.
                let missing: Vec<&str> = SYMBOLS
                    .iter()
                    .filter(|s| unsafe { lib.get::<*const ()>(s.as_bytes()) }.is_err())
                    .copied()
                    .collect();
                if missing.is_empty() {
                    let lib = Arc::new(NvcuvidLibrary { _lib: lib, path });
                    *slot = Some(Arc::clone(&lib));
                    return Ok(lib);
                }
                tried.push(format!(
                    "{}: missing {}",
                    path.display(),
                    missing.join(", ")
                ));
            }
            Err(e) => tried.push(format!("{}: {e}", path.display())),
        }
    }
    Err(Error::NvdecUnavailable(format!(
        "libnvcuvid.so.1 not found (it comes with the NVIDIA driver; or set {PATH_ENV}); tried: {}",
        tried.join("; ")
    )))
}

/// The `cudaVideoCodec` value of an FFmpeg codec name, for the codecs NVDEC decodes.
pub fn cuda_video_codec(name: &str) -> Option<i32> {
    Some(match name {
        "mpeg1video" => 0,
        "mpeg2video" => 1,
        "mpeg4" => 2,
        "vc1" => 3,
        "h264" => 4,
        "mjpeg" => 5,
        "hevc" => 8,
        "vp8" => 9,
        "vp9" => 10,
        "av1" => 11,
        _ => return None,
    })
}

/// What an NVDEC decoder is asked to produce: SPDL's `nvdec_decoder(cuda_config, codec,
/// crop_*=, scale_*=)` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvdecConfig {
    /// FFmpeg codec name (`"h264"`, `"hevc"`, `"vp9"`, `"av1"`, ...).
    pub codec: String,
    /// Coded width in pixels, from the stream header.
    pub width: usize,
    /// Coded height in pixels.
    pub height: usize,
    /// Pixels cropped from the left, top, right and bottom edges (before scaling).
    pub crop: [usize; 4],
    /// Output size `(width, height)` after cropping; `None` keeps the cropped size.
    pub scale: Option<(usize, usize)>,
}

impl NvdecConfig {
    /// The frame size this produces: `(width, height)` after crop and scale.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the crop leaves nothing or the scale is zero.
    pub fn output_size(&self) -> Result<(usize, usize)> {
        let [l, t, r, b] = self.crop;
        let (w, h) = (
            self.width.checked_sub(l.saturating_add(r)),
            self.height.checked_sub(t.saturating_add(b)),
        );
        let (Some(w @ 1..), Some(h @ 1..)) = (w, h) else {
            return Err(Error::InvalidArgument(format!(
                "crop (left {l}, top {t}, right {r}, bottom {b}) leaves nothing of a {}x{} frame",
                self.width, self.height
            )));
        };
        match self.scale {
            Some((0, _)) | Some((_, 0)) => Err(Error::InvalidArgument(
                "scale_width and scale_height must be positive (or -1 to keep the size)".into(),
            )),
            Some(s) => Ok(s),
            None => Ok((w, h)),
        }
    }

    /// The checks that need no GPU, done before any device allocation: the codec is one NVDEC
    /// decodes, the coded frame (NV12 surfaces) and the output frame (3 bytes per pixel) are
    /// within `limits`, the crop leaves something.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the codec, the size over the limit, or the crop.
    pub fn check(&self, limits: &spdl_io::Limits) -> Result<()> {
        if cuda_video_codec(&self.codec).is_none() {
            return Err(Error::InvalidArgument(format!(
                "codec {:?} is not decodable by NVDEC (h264, hevc, vp8, vp9, av1, mpeg1video, \
                 mpeg2video, mpeg4, vc1, mjpeg)",
                self.codec
            )));
        }
        if self.width == 0 || self.height == 0 {
            return Err(Error::InvalidArgument(format!(
                "the stream claims a {}x{} frame",
                self.width, self.height
            )));
        }
        let limit = |e: spdl_io::Error| Error::InvalidArgument(e.message().to_string());
        limits.check(self.width, self.height, 3, 1).map_err(limit)?;
        let (w, h) = self.output_size()?;
        limits.check_output(w, h, 3, 1).map_err(limit)
    }
}

/// An NVDEC decoder on one device (see the module docs for what is implemented).
#[derive(Debug)]
pub struct NvdecDecoder {
    _lib: Arc<NvcuvidLibrary>,
    _device: crate::CudaDevice,
    config: NvdecConfig,
}

impl NvdecDecoder {
    /// Checks `config` against `limits`, loads `libnvcuvid`, opens device `device_index`.
    ///
    /// # Errors
    /// In this order: [`Error::InvalidArgument`] from [`NvdecConfig::check`];
    /// [`Error::NvdecUnavailable`]; [`Error::NoDriver`] / [`Error::InvalidDevice`];
    /// then [`Error::Unsupported`]: the decode session is not implemented yet.
    pub fn new(device_index: usize, config: NvdecConfig, limits: &spdl_io::Limits) -> Result<Self> {
        config.check(limits)?;
        let lib = load_library()?;
        let device = crate::CudaDevice::new(device_index)?;
        let _ = (lib, device, config);
        Err(Error::Unsupported(
            "the NVDEC decode session is not implemented in spdl-rs yet (libnvcuvid and the \
             driver were found); decode on the CPU with load_video / decode_packets"
                .into(),
        ))
    }

    /// What the decoder was asked to produce.
    pub fn config(&self) -> &NvdecConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(codec: &str, w: usize, h: usize) -> NvdecConfig {
        NvdecConfig {
            codec: codec.into(),
            width: w,
            height: h,
            crop: [0; 4],
            scale: None,
        }
    }

    #[test]
    fn limits_and_crop_are_checked_before_the_library() {
        let limits = spdl_io::Limits::default();
        // A crafted header claiming 65535x65535: refused by the limits, whether or not a
        // driver is present (the check runs first).
        let e = NvdecDecoder::new(0, cfg("h264", 65535, 65535), &limits).unwrap_err();
        assert!(
            e.to_string().contains("65535x65535") && e.to_string().contains("exceeds"),
            "{e}"
        );
        let e = NvdecDecoder::new(0, cfg("prores", 64, 64), &limits).unwrap_err();
        assert!(e.to_string().contains("\"prores\""), "{e}");
        let mut c = cfg("h264", 64, 48);
        c.crop = [40, 0, 30, 0];
        assert!(NvdecDecoder::new(0, c.clone(), &limits)
            .unwrap_err()
            .to_string()
            .contains("leaves nothing"));
        c.crop = [8, 4, 8, 4];
        assert_eq!(c.output_size().unwrap(), (48, 40));
        c.scale = Some((100_000, 100_000));
        assert!(c
            .check(&limits)
            .unwrap_err()
            .to_string()
            .contains("100000x100000"));
    }

    #[test]
    fn a_valid_request_reaches_the_library_or_driver_check() {
        let e =
            NvdecDecoder::new(0, cfg("h264", 1920, 1080), &spdl_io::Limits::default()).unwrap_err();
        // On a machine without the NVIDIA driver: the named library error.
        if crate::driver_available() {
            assert!(!matches!(e, Error::InvalidArgument(_)), "{e}");
        } else {
            assert!(
                matches!(
                    e,
                    Error::NvdecUnavailable(_) | Error::NoDriver(_) | Error::Unsupported(_)
                ),
                "{e}"
            );
            if cfg!(feature = "decode-nvdec") {
                assert!(
                    e.to_string()
                        .starts_with("NVDEC unavailable: libnvcuvid.so.1 not found"),
                    "{e}"
                );
            }
        }
    }
}
