//! Decompression-bomb guards, checked on the probed header before allocating.

use smart_default::SmartDefault;

use crate::error::{Error, ErrorKind, Result};

/// Upper bounds a decoder enforces on the *claimed* image size, before it
/// allocates the pixel buffer (mirrors image-rs `Limits` and Pillow's
/// `MAX_IMAGE_PIXELS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, SmartDefault)]
pub struct Limits {
    /// Most pixels (`width * height`) accepted. Default
    /// [`Limits::DEFAULT_MAX_PIXELS`] = 178,956,970 (about 179 Mpx, the size at
    /// which Pillow raises `DecompressionBombError`: twice its warning level).
    #[default(Self::DEFAULT_MAX_PIXELS)]
    pub max_pixels: u64,
    /// Most bytes of decoded output (`width * height * channels * bytes per
    /// sample`). Default [`Limits::DEFAULT_MAX_BYTES`] = 1 GiB.
    #[default(Self::DEFAULT_MAX_BYTES)]
    pub max_bytes: u64,
}

impl Limits {
    /// Default for [`Limits::max_pixels`]: 178,956,970 pixels.
    pub const DEFAULT_MAX_PIXELS: u64 = 178_956_970;
    /// Default for [`Limits::max_bytes`]: 1 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

    /// No limits at all (trusted data only).
    pub fn none() -> Self {
        Limits {
            max_pixels: u64::MAX,
            max_bytes: u64::MAX,
        }
    }

    /// Checks a claimed `width x height` image with `channels` samples of
    /// `bytes_per_sample` bytes each.
    ///
    /// # Errors
    /// [`ErrorKind::LimitExceeded`] naming the claimed dimensions, e.g.
    /// `"image is 30000x30000 (900000000 pixels), exceeds the limit of 178956970 pixels"`.
    pub fn check(
        &self,
        width: usize,
        height: usize,
        channels: usize,
        bytes_per_sample: usize,
    ) -> Result<()> {
        let (pixels, bytes) = sizes(width, height, channels, bytes_per_sample);
        if pixels > self.max_pixels {
            return Err(exceeded(format!(
                "image is {width}x{height} ({pixels} pixels), exceeds the limit of {} pixels \
                 (possible decompression bomb)",
                self.max_pixels
            )));
        }
        if bytes > self.max_bytes {
            return Err(exceeded(format!(
                "image is {width}x{height}x{channels}, {bytes} bytes decoded, exceeds the limit of {} bytes",
                self.max_bytes
            )));
        }
        Ok(())
    }
}

impl Limits {
    /// Checks the output a transform asks for (`width x height x channels`, samples of
    /// `bytes_per_sample` bytes) before it is allocated, so that a huge requested size is a
    /// named error rather than an allocation failure that aborts the process.
    ///
    /// # Errors
    /// [`ErrorKind::LimitExceeded`], e.g. `"output of 100000x100000x3 (30000000000 bytes)
    /// exceeds the limit of 1073741824 bytes"`.
    pub fn check_output(
        &self,
        width: usize,
        height: usize,
        channels: usize,
        bytes_per_sample: usize,
    ) -> Result<()> {
        let (pixels, bytes) = sizes(width, height, channels, bytes_per_sample);
        if pixels > self.max_pixels || bytes > self.max_bytes {
            return Err(exceeded(format!(
                "output of {width}x{height}x{channels} ({bytes} bytes) exceeds the limit of \
                 {} pixels / {} bytes: ask for a smaller size",
                self.max_pixels, self.max_bytes
            )));
        }
        Ok(())
    }
}

/// `(pixels, bytes)` of a `width x height` image of `channels` samples of `bytes_per_sample`
/// bytes, saturating at `u64::MAX`.
fn sizes(width: usize, height: usize, channels: usize, bytes_per_sample: usize) -> (u64, u64) {
    let pixels = (width as u64).saturating_mul(height as u64);
    let bytes = pixels
        .saturating_mul(channels as u64)
        .saturating_mul(bytes_per_sample as u64);
    (pixels, bytes)
}

/// A [`ErrorKind::LimitExceeded`] error.
fn exceeded(message: String) -> Error {
    Error::new(ErrorKind::LimitExceeded, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_claimed_size() {
        let err = Limits::default().check(30000, 30000, 3, 1).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        assert!(err.message().contains("30000x30000"), "{err}");
        assert!(Limits::default().check(4000, 3000, 3, 1).is_ok());
        assert!(Limits::none().check(65535, 65535, 4, 2).is_ok());
    }
}
