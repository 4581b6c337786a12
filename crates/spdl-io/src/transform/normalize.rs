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
        if out.is_empty() {
            return Ok(()); // an empty image: nothing to write (and no zero-sized planes to split)
        }
        match &img.data {
            // 8-bit samples take one of 256 values per channel: look the result up in a table
            // computed with the same formula (the same f32 values, bit for bit, several times
            // faster than computing each sample).
            PixelData::U8(v) => {
                let tables = self.u8_tables();
                if let [t0, t1, t2] = &tables[..] {
                    // RGB, the common case: one pass over the pixels fills the three planes.
                    let (p0, rest) = out.split_at_mut(plane);
                    let (p1, p2) = rest.split_at_mut(plane);
                    let dst = p0.iter_mut().zip(p1.iter_mut()).zip(p2.iter_mut());
                    for (((r, g), b), px) in dst.zip(v.chunks_exact(3)) {
                        *r = t0[usize::from(px[0])];
                        *g = t1[usize::from(px[1])];
                        *b = t2[usize::from(px[2])];
                    }
                } else {
                    let planes = out.chunks_exact_mut(plane).zip(&tables);
                    for ((dst, table), ch) in planes.zip(0..) {
                        for (d, px) in dst.iter_mut().zip(v.chunks_exact(c)) {
                            *d = table[usize::from(px[ch])];
                        }
                    }
                }
            }
            PixelData::U16(v) => {
                for (dst, ch) in out.chunks_exact_mut(plane).zip(0..) {
                    for (d, px) in dst.iter_mut().zip(v.chunks_exact(c)) {
                        *d = self.value(ch, f32::from(px[ch]), 65535.0);
                    }
                }
            }
        }
        Ok(())
    }

    /// One table per channel: the normalized value of each 8-bit sample, so that normalizing
    /// a sample costs a lookup (the same f32 values as computing it).
    pub(crate) fn u8_tables(&self) -> Vec<[f32; 256]> {
        (0..self.mean.len())
            .map(|ch| std::array::from_fn(|x| self.value(ch, f32::from(x as u8), 255.0)))
            .collect()
    }

    /// One sample of channel `ch`, scaled to `[0, 1]` by `scale`, normalized.
    fn value(&self, ch: usize, sample: f32, scale: f32) -> f32 {
        (sample / scale - self.mean[ch]) / self.std[ch]
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

#[cfg(test)]
mod tests {
    use super::Normalize;
    use crate::decode::{Image, Orientation, PixelData};

    /// `[C, H, W]` of an interleaved image by the definition, one sample at a time.
    fn reference(norm: &Normalize, samples: &[f32], c: usize, scale: f32) -> Vec<f32> {
        let plane = samples.len() / c;
        (0..c * plane)
            .map(|k| {
                let (ch, i) = (k / plane, k % plane);
                (samples[i * c + ch] / scale - norm.mean[ch]) / norm.std[ch]
            })
            .collect()
    }

    fn image(data: PixelData, width: usize, height: usize, channels: usize) -> Image {
        Image {
            data,
            width,
            height,
            channels,
            orientation: Orientation::Normal,
        }
    }

    #[test]
    fn every_sample_value_and_channel_count_matches_the_definition_bit_for_bit() {
        for c in [1, 2, 3, 4] {
            let norm = Normalize {
                mean: (0..c).map(|ch| 0.1 + 0.2 * ch as f32).collect(),
                std: (0..c).map(|ch| 0.3 - 0.05 * ch as f32).collect(),
            };
            // 256 pixels: every 8-bit value in every channel, shifted per channel.
            let u8s: Vec<u8> = (0..256 * c).map(|k| (k / c + 7 * (k % c)) as u8).collect();
            let img = image(PixelData::U8(u8s.clone()), 16, 16, c);
            let want = reference(
                &norm,
                &u8s.iter().map(|&x| f32::from(x)).collect::<Vec<_>>(),
                c,
                255.0,
            );
            let got = norm.to_chw(&img).unwrap();
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "u8, {c} channels"
            );

            let u16s: Vec<u16> = (0..256 * c)
                .map(|k| (k * 257 + 13 * (k % c)) as u16)
                .collect();
            let img = image(PixelData::U16(u16s.clone()), 16, 16, c);
            let want = reference(
                &norm,
                &u16s.iter().map(|&x| f32::from(x)).collect::<Vec<_>>(),
                c,
                65535.0,
            );
            assert_eq!(norm.to_chw(&img).unwrap(), want, "u16, {c} channels");
        }
    }

    #[test]
    fn a_wrong_length_or_a_zero_std_is_an_error() {
        let img = image(PixelData::U8(vec![0; 12]), 2, 2, 3);
        assert!(Normalize::imagenet()
            .write_chw(&img, &mut [0.0; 11])
            .is_err());
        assert!(Normalize::unit(1).write_chw(&img, &mut [0.0; 12]).is_err());
        let zero = Normalize {
            mean: vec![0.0; 3],
            std: vec![1.0, 0.0, 1.0],
        };
        assert!(zero.write_chw(&img, &mut [0.0; 12]).is_err());
    }

    #[test]
    fn an_empty_image_writes_nothing() {
        for (w, h, c) in [(0, 4, 3), (4, 0, 1), (0, 0, 4), (2, 2, 0)] {
            let norm = Normalize::unit(c);
            let img = image(PixelData::U8(vec![]), w, h, c);
            assert_eq!(norm.to_chw(&img).unwrap(), Vec::<f32>::new());
            let img = image(PixelData::U16(vec![]), w, h, c);
            assert_eq!(norm.to_chw(&img).unwrap(), Vec::<f32>::new());
        }
    }
}
