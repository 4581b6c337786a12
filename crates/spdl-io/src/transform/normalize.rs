//! Conversion to normalized `f32` `[C, H, W]`.

use crate::decode::{Image, PixelData};
use crate::error::{Error, ErrorKind, Result};

/// Per-channel `(x - mean) / std` on samples scaled to `[0, 1]`
/// (8-bit: `v / 255`; 16-bit: `v / 65535`), like torchvision's
/// `ToTensor` + `Normalize`.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalize {
    /// Mean per channel, in `[0, 1]` units.
    pub mean: Vec<f32>,
    /// Standard deviation per channel, in `[0, 1]` units.
    pub std: Vec<f32>,
}

impl Normalize {
    /// ImageNet statistics: mean (0.485, 0.456, 0.406), std (0.229, 0.224, 0.225).
    pub fn imagenet() -> Self {
        Normalize {
            mean: vec![0.485, 0.456, 0.406],
            std: vec![0.229, 0.224, 0.225],
        }
    }

    /// Only scaling to `[0, 1]` (mean 0, std 1) for `channels` channels.
    pub fn unit(channels: usize) -> Self {
        Normalize {
            mean: vec![0.0; channels],
            std: vec![1.0; channels],
        }
    }

    /// Writes `img` as `[C, H, W]` into `out` (`C * H * W` long).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when mean/std do not have one entry per
    /// channel, a std is zero, or `out` has the wrong length.
    pub fn write_chw(&self, img: &Image, out: &mut [f32]) -> Result<()> {
        let c = img.channels;
        let invalid = |m: String| Err(Error::new(ErrorKind::InvalidArgument, m));
        if self.mean.len() != c || self.std.len() != c {
            return invalid(format!(
                "normalize has {} means / {} stds for a {c}-channel image",
                self.mean.len(),
                self.std.len()
            ));
        }
        if self.std.contains(&0.0) {
            return invalid("normalize std must be non-zero".into());
        }
        let plane = img.width * img.height;
        if out.len() != plane * c || img.data.len() != plane * c {
            return invalid(format!("expected {} values, got {}", plane * c, out.len()));
        }
        let (scale, samples): (f32, Vec<f32>) = match &img.data {
            PixelData::U8(v) => (255.0, v.iter().map(|&x| f32::from(x)).collect()),
            PixelData::U16(v) => (65535.0, v.iter().map(|&x| f32::from(x)).collect()),
        };
        for ch in 0..c {
            let (m, s) = (self.mean[ch], self.std[ch]);
            let dst = &mut out[ch * plane..(ch + 1) * plane];
            for (d, px) in dst.iter_mut().zip(samples.chunks_exact(c)) {
                *d = (px[ch] / scale - m) / s;
            }
        }
        Ok(())
    }

    /// `img` as a new `[C, H, W]` vector.
    ///
    /// # Errors
    /// As [`Normalize::write_chw`].
    pub fn to_chw(&self, img: &Image) -> Result<Vec<f32>> {
        let mut out = vec![0.0; img.channels * img.width * img.height];
        self.write_chw(img, &mut out)?;
        Ok(out)
    }
}
