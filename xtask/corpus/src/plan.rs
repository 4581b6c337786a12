//! What each image of the corpus will be, drawn from one seeded RNG before any pixel is read,
//! so the plan (and so the corpus) does not depend on threads or on the order of work.

/// SplitMix64: tiny, and its sequence is fixed by its definition, unlike `rand`'s `StdRng`,
/// which may change between versions. Same seed, same corpus, forever.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in [lo, hi].
    fn between(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.below((hi - lo + 1) as usize) as u32
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// Chroma subsampling of an output JPEG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sampling {
    S420,
    S422,
    S444,
    Gray,
}

impl Sampling {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Sampling::S420 => "4:2:0",
            Sampling::S422 => "4:2:2",
            Sampling::S444 => "4:4:4",
            Sampling::Gray => "gray",
        }
    }
}

/// One output image: where it comes from and how it is encoded.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    /// Relative path in the ImageFolder layout: `class_03/img_000123.JPEG`.
    pub(crate) path: String,
    /// Index into the sorted list of source photos.
    pub(crate) photo: usize,
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// Linear size of the crop relative to the largest crop of this aspect (0.35..1).
    pub(crate) crop_scale: f64,
    /// Where the crop sits in the free room, 0..1 on each axis.
    pub(crate) crop_x: f64,
    pub(crate) crop_y: f64,
    pub(crate) mirror: bool,
    pub(crate) quality: i32,
    pub(crate) sampling: Sampling,
    pub(crate) progressive: bool,
}

/// What a plan draws for each image, in this order after its class and photo: the long side,
/// the aspect, the sampling, then the crop (scale, position, mirror), the quality and whether
/// it is progressive.
struct Mix {
    /// The long side, px.
    long: fn(&mut Rng) -> u32,
    /// The third aspect (10%) as the short side's share `(num, den)` of the long one; the
    /// others are 4:3 (60%), 3:4 (20%) and 16:9 (10%).
    third_aspect: (u32, u32),
    sampling: fn(&mut Rng) -> Sampling,
    /// The smallest crop, relative to the largest of its aspect (the scale is uniform up to 1).
    crop_min: f64,
    /// The JPEG quality range, both ends included.
    quality: (u32, u32),
    /// The share of progressive images; `None`: none is progressive (and nothing is drawn).
    progressive: Option<f64>,
}

/// The plan for `count` images over `classes` classes from `photos` photos.
///
/// Image `i` is in class `i % classes` and is cut from one of the class's photos (photo `p`
/// belongs to class `p % classes`), so classes are balanced and a class looks like its photos.
/// Sizes follow ImageNet: mostly 500 px on the long side, 4:3 most often (500x375), then
/// 3:4, 1:1 and 16:9. Encoding: quality 75..=95; 3% grayscale, otherwise 4:2:0 (75%),
/// 4:4:4 (15%) or 4:2:2 (10%); 10% progressive.
pub(crate) fn plan(seed: u64, count: usize, classes: usize, photos: usize) -> Vec<Spec> {
    const MIX: Mix = Mix {
        long: |rng| {
            if rng.chance(0.8) {
                500
            } else {
                rng.between(333, 640)
            }
        },
        third_aspect: (1, 1),
        sampling: |rng| {
            if rng.chance(0.03) {
                Sampling::Gray
            } else {
                match rng.below(20) {
                    0..=14 => Sampling::S420,
                    15..=17 => Sampling::S444,
                    _ => Sampling::S422,
                }
            }
        },
        crop_min: 0.35,
        quality: (75, 95),
        progressive: Some(0.1),
    };
    draw(&MIX, seed, count, classes, photos)
}

/// The plan of the large-photo corpus (`--large`): like [`plan`], but the long side is uniform
/// in 1,600..=4,000 px (photo-camera sizes), crops keep at least 60% of the largest one (less
/// upscaling of the smaller source photos), quality 85..=95, and no image is progressive.
pub(crate) fn plan_large(seed: u64, count: usize, classes: usize, photos: usize) -> Vec<Spec> {
    const MIX: Mix = Mix {
        long: |rng| rng.between(1600, 4000),
        third_aspect: (2, 3),
        sampling: |rng| match rng.below(20) {
            0..=15 => Sampling::S420,
            16..=18 => Sampling::S422,
            _ => Sampling::S444,
        },
        crop_min: 0.6,
        quality: (85, 95),
        progressive: None,
    };
    draw(&MIX, seed, count, classes, photos)
}

/// `count` images after `mix`, all drawn from one RNG seeded with `seed`.
fn draw(mix: &Mix, seed: u64, count: usize, classes: usize, photos: usize) -> Vec<Spec> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| {
            let (class, photo) = class_and_photo(&mut rng, i, classes, photos);
            let long = (mix.long)(&mut rng);
            let short = |(num, den): (u32, u32)| (long * num + den / 2) / den;
            let (width, height) = match rng.below(20) {
                0..=11 => (long, short((3, 4))),            // 4:3, 60%
                12..=15 => (short((3, 4)), long),           // 3:4, 20%
                16..=17 => (long, short(mix.third_aspect)), // 10%
                _ => (long, short((9, 16))),                // 16:9, 10%
            };
            let sampling = (mix.sampling)(&mut rng);
            Spec {
                path: format!("class_{class:02}/img_{i:06}.JPEG"),
                photo,
                width,
                height,
                crop_scale: mix.crop_min + (1.0 - mix.crop_min) * rng.unit(),
                crop_x: rng.unit(),
                crop_y: rng.unit(),
                mirror: rng.chance(0.5),
                quality: rng.between(mix.quality.0, mix.quality.1) as i32,
                sampling,
                progressive: mix.progressive.is_some_and(|p| rng.chance(p)),
            }
        })
        .collect()
}

/// Image `i`'s class (`i % classes`) and the photo it is cut from: one of the class's own
/// photos (photo `p` belongs to class `p % classes`), drawn from `rng`.
fn class_and_photo(rng: &mut Rng, i: usize, classes: usize, photos: usize) -> (usize, usize) {
    let class = i % classes;
    let own: Vec<usize> = (0..photos).filter(|p| p % classes == class).collect();
    let photo = if own.is_empty() {
        class % photos
    } else {
        own[rng.below(own.len())]
    };
    (class, photo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether two plans are the same, spec for spec.
    fn same(a: &[Spec], b: &[Spec]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| format!("{x:?}") == format!("{y:?}"))
    }

    #[test]
    fn same_seed_same_plan() {
        assert!(same(&plan(7, 500, 10, 39), &plan(7, 500, 10, 39)));
    }

    #[test]
    fn large_plan_stays_in_its_size_range() {
        let p = plan_large(3, 300, 10, 39);
        assert_eq!(p.len(), 300);
        for s in &p {
            let long = s.width.max(s.height);
            assert!((1600..=4000).contains(&long), "{s:?}");
            assert!(s.width.min(s.height) >= 900, "{s:?}");
            assert!((85..=95).contains(&s.quality));
        }
        let longs: Vec<u32> = p.iter().map(|s| s.width.max(s.height)).collect();
        assert!(longs.iter().any(|&l| l < 2000) && longs.iter().any(|&l| l > 3600));
        assert!(same(&p, &plan_large(3, 300, 10, 39)));
    }

    #[test]
    fn plan_has_the_advertised_mix() {
        let p = plan(0, 2000, 10, 39);
        let share = |f: &dyn Fn(&Spec) -> bool| p.iter().filter(|s| f(s)).count() as f64 / 2000.0;
        assert!((0.07..0.13).contains(&share(&|s| s.progressive)));
        assert!((0.015..0.05).contains(&share(&|s| s.sampling == Sampling::Gray)));
        assert!(share(&|s| s.sampling == Sampling::S444) > 0.1);
        assert!(share(&|s| s.sampling == Sampling::S422) > 0.05);
        assert!(share(&|s| s.width == 500 && s.height == 375) > 0.4);
        assert!(p.iter().all(|s| (75..=95).contains(&s.quality)));
        // Every class is used equally and only from its own photos.
        for s in &p {
            let class: usize = s.path[6..8].parse().unwrap();
            assert_eq!(s.photo % 10, class);
        }
    }
}
