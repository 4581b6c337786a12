//! Seeded randomness: one stream per (seed, epoch, sample index), so a
//! sample's augmentation does not depend on thread count or scheduling.

/// SplitMix64 (Steele et al.): tiny, fast, good enough for augmentation.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    /// The stream for one sample in one epoch.
    pub(crate) fn for_sample(seed: u64, epoch: u64, index: u64) -> Self {
        let mut s = SplitMix64(seed);
        let a = s.next_u64() ^ epoch.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mut s = SplitMix64(a);
        let b = s.next_u64() ^ index.wrapping_mul(0x8CB9_2BA7_2F3D_8DD7);
        SplitMix64(b)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)`.
    pub(crate) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }

    /// Uniform integer in `0..=max`.
    pub(crate) fn below_inclusive(&mut self, max: usize) -> usize {
        ((self.next_f64() * (max as f64 + 1.0)) as usize).min(max)
    }
}
