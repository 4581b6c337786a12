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
//! `NvdecDecoder::decode` runs one session (with `decode-nvdec`; `NvdecDecoder::session`
//! keeps one alive across calls for streaming): NVDEC's parser
//! (`cuvidCreateVideoParser`, `cuvidParseVideoData`), a decoder made in the sequence callback
//! once the real sizes are known and checked against the limits (`cuvidCreateDecoder` with the
//! crop as `display_area` and the scale as `ulTargetWidth`/`ulTargetHeight`),
//! `cuvidDecodePicture`, and each displayed frame mapped (`cuvidMapVideoFrame64`) and copied
//! into our own device memory as NV12. H.264/HEVC packets from MP4/MKV go through [`AnnexB`]
//! first. The structures are in `ffi.rs`. Untested on a GPU so far (none was available when
//! it was written): the no-driver paths and the pure-Rust parts are tested. The host-side
//! NV12 conversion is [`crate::nv12`].

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};

mod annexb;
#[cfg(feature = "decode-nvdec")]
mod ffi;
#[cfg(feature = "decode-nvdec")]
mod session;

pub use annexb::AnnexB;
#[cfg(feature = "decode-nvdec")]
pub use session::{NvdecFrames, NvdecSession};

/// Environment variable naming `libnvcuvid`, or a directory holding it.
pub const PATH_ENV: &str = "SPDL_NVCUVID_PATH";

/// Sonames tried on the dynamic loader's path.
const SONAMES: [&str; 2] = ["libnvcuvid.so.1", "libnvcuvid.so"];

/// A loaded `libnvcuvid` with every entry point the decoder needs (a library missing one of
/// them is refused).
#[derive(Debug)]
pub struct NvcuvidLibrary {
    #[cfg(feature = "decode-nvdec")]
    pub(crate) api: ffi::Api,
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
    crate::dylib::env_then_sonames(PATH_ENV, &SONAMES)
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
    crate::dylib::load_once(&LIB, candidate_paths(), |path| {
        let api = ffi::Api::load(path)?;
        Ok(NvcuvidLibrary {
            api,
            path: path.to_path_buf(),
        })
    })
    .map_err(|tried| {
        Error::NvdecUnavailable(format!(
            "libnvcuvid.so.1 not found (it comes with the NVIDIA driver; or set {PATH_ENV}); tried: {tried}"
        ))
    })
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

/// An NVDEC decoder on one device: SPDL's `NvDecDecoder`. Each `NvdecDecoder::decode` call
/// is one parser/decoder session over the packets given, flushed at the end;
/// `NvdecDecoder::session` gives a session that lives across calls, for streaming.
#[derive(Debug)]
pub struct NvdecDecoder {
    #[cfg_attr(not(feature = "decode-nvdec"), allow(dead_code))]
    lib: Arc<NvcuvidLibrary>,
    #[cfg(feature = "decode-nvdec")]
    stream: Arc<crate::CopyStream>,
    #[cfg(not(feature = "decode-nvdec"))]
    _device: crate::CudaDevice,
    config: NvdecConfig,
    #[cfg_attr(not(feature = "decode-nvdec"), allow(dead_code))]
    limits: spdl_io::Limits,
}

impl NvdecDecoder {
    /// Checks `config` against `limits`, loads `libnvcuvid`, opens device `device_index`.
    /// Nothing is allocated on the device until `NvdecDecoder::decode` has read the
    /// stream's sequence header, whose sizes are checked against `limits` again.
    ///
    /// # Errors
    /// In this order: [`Error::InvalidArgument`] from [`NvdecConfig::check`];
    /// [`Error::Unsupported`] without the `decode-nvdec` feature; [`Error::NvdecUnavailable`];
    /// [`Error::NoDriver`] / [`Error::InvalidDevice`]; [`Error::Driver`] when the copy stream
    /// cannot be made.
    pub fn new(device_index: usize, config: NvdecConfig, limits: &spdl_io::Limits) -> Result<Self> {
        config.check(limits)?;
        let lib = load_library()?;
        let device = crate::CudaDevice::new(device_index)?;
        Ok(NvdecDecoder {
            lib,
            #[cfg(feature = "decode-nvdec")]
            stream: crate::CopyStream::for_device(&device)?,
            #[cfg(not(feature = "decode-nvdec"))]
            _device: device,
            config,
            limits: *limits,
        })
    }

    /// What the decoder was asked to produce.
    pub fn config(&self) -> &NvdecConfig {
        &self.config
    }

    /// Decodes `packets` (`(bytes, timestamp)` in decode order: Annex-B for H.264/HEVC, see
    /// [`AnnexB`]) into NV12 frames `[N, H + H/2, W]` u8 in device memory, in display order,
    /// cropped and scaled as configured. The timestamps are passed through to
    /// [`NvdecFrames::timestamps`]. The frames come in batches of `frames_per_batch`
    /// (`usize::MAX`: one batch), the last one shorter.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the stream's real sizes are over the limits, the
    /// crop leaves nothing, the decoded frames would exceed `limits.max_bytes`, or no frame
    /// comes out; [`Error::Unsupported`] for a stream this GPU's NVDEC does not take (codec,
    /// size, bit depth other than 8, chroma other than 4:2:0, a size change mid-stream);
    /// [`Error::Driver`] naming the failed `cuvid*` / CUDA call.
    #[cfg(feature = "decode-nvdec")]
    pub fn decode(
        &self,
        packets: &[(&[u8], i64)],
        frames_per_batch: usize,
    ) -> Result<Vec<NvdecFrames>> {
        session::decode(self.session()?, packets, frames_per_batch)
    }

    /// A new streaming session on this decoder's device (SPDL's `init_buffer` /
    /// `streaming_decode_packets` / `flush`): feed it packets chunk by chunk and take the
    /// frames as they come, so that only the frames not yet taken are held on the device.
    ///
    /// # Errors
    /// [`Error::NoDriver`] when the context cannot be bound; [`Error::Driver`] when
    /// `cuvidCreateVideoParser` fails.
    #[cfg(feature = "decode-nvdec")]
    pub fn session(&self) -> Result<NvdecSession> {
        NvdecSession::new(
            Arc::clone(&self.lib),
            Arc::clone(&self.stream),
            self.config.clone(),
            self.limits,
        )
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
        let e = match NvdecDecoder::new(0, cfg("h264", 1920, 1080), &spdl_io::Limits::default()) {
            // With libnvcuvid and a GPU the decoder opens (decoding is tested on a GPU).
            Ok(_) => return assert!(crate::driver_available()),
            Err(e) => e,
        };
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
