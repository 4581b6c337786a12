//! Decoding at libjpeg-turbo's DCT scale (1/2, 1/4, 1/8) when the transform shrinks the image
//! that much: the pixels stay close to decoding everything and resizing, on real photos, for
//! the eval and train transforms; the scaled path is taken exactly when the rule says.

#![cfg(feature = "decode-turbojpeg")]

use std::path::PathBuf;

use spdl_io::{
    decode::TurboJpegDecoder, Decoder, ImageLoader, RandomResizedCrop, Region, SampleContext,
    Scaled, Transform,
};

fn photos() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/samples");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Mean and largest absolute difference of two equal-length u8 buffers.
fn diff(a: &[u8], b: &[u8]) -> (f64, u8) {
    assert_eq!(a.len(), b.len());
    let max = a
        .iter()
        .zip(b)
        .map(|(x, y)| x.abs_diff(*y))
        .max()
        .unwrap_or(0);
    let sum: u64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| u64::from(x.abs_diff(*y)))
        .sum();
    (sum as f64 / a.len() as f64, max)
}

/// The largest absolute difference between the region `part` and the window of the whole
/// scaled image `full` at the region's coordinates.
fn worst_in_window(full: &Scaled, part: &Scaled) -> u8 {
    let (w, c) = (full.image.width, full.image.channels);
    let whole_px = full.image.as_u8().unwrap();
    let part_px = part.image.as_u8().unwrap();
    let n = part.image.width * c;
    (0..part.image.height)
        .flat_map(|row| {
            let src = ((part.y + row) * w + part.x) * c;
            let dst = row * n;
            whole_px[src..src + n].iter().zip(&part_px[dst..dst + n])
        })
        .map(|(a, b)| a.abs_diff(*b))
        .max()
        .unwrap_or(0)
}

/// Loads each photo `per_image` times (sample index 0..per_image) with `full` and `other` and
/// returns each mean absolute difference; asserts the shapes agree and no single image differs
/// by more than 3 levels on average (fine texture at a crop's edge may reach that; the stated
/// tolerances are checked by the callers over many images).
fn mean_diffs(
    tname: &str,
    full: &ImageLoader,
    other: &ImageLoader,
    photos: &[(String, Vec<u8>)],
    per_image: u64,
) -> Vec<f64> {
    let mut means = Vec::new();
    for (name, bytes) in photos {
        for index in 0..per_image {
            let ctx = SampleContext {
                key: name,
                index,
                epoch: 0,
            };
            let a = full.load(bytes, &ctx).unwrap();
            let b = other.load(bytes, &ctx).unwrap();
            assert_eq!(a.shape(), b.shape(), "{tname} {name}");
            let (mean, max) = diff(a.as_u8().unwrap(), b.as_u8().unwrap());
            println!("{tname:10} {name:32} #{index}: mean {mean:.2} max {max}");
            // The scaled IDCT is a box-like prefilter; bilinear/antialiased resampling of the
            // full image differs from it mostly on sharp edges.
            assert!(
                mean <= 3.0,
                "{tname} {name} #{index}: mean abs diff {mean:.2}"
            );
            means.push(mean);
        }
    }
    means
}

#[test]
fn scaled_pixels_stay_close_to_the_full_decode() {
    let transforms = [
        ("eval 224", Transform::imagenet_eval()),
        ("eval 64", Transform::eval(64, Default::default())),
        (
            "train 224",
            Transform::RandomResizedCrop(RandomResizedCrop::new(224, 7)),
        ),
    ];
    let mut scaled_runs = 0;
    for (tname, transform) in transforms {
        let mut full = ImageLoader::new(transform);
        full.scaled_decode = false;
        let mut scaled = full.clone();
        scaled.scaled_decode = true;
        let means = mean_diffs(tname, &full, &scaled, &photos(), 3);
        scaled_runs += means.iter().filter(|m| **m > 0.0).count();
    }
    assert!(scaled_runs > 0, "the larger photos take the scaled path");
}

/// JPEGs under `SPDL_FINE_SCALE_DIR` (walked one level of folders deep) when set, else the
/// bundled photos: the measurement `cargo test --release ... -- --nocapture` prints per corpus.
fn fine_scale_photos() -> Vec<(String, Vec<u8>)> {
    let Some(dir) = std::env::var_os("SPDL_FINE_SCALE_DIR") else {
        return photos();
    };
    let limit: usize = std::env::var("SPDL_FINE_SCALE_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut paths = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            paths.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else {
            paths.push(p);
        }
    }
    paths.retain(|p| {
        p.extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("jpg") || e.eq_ignore_ascii_case("jpeg"))
    });
    paths.sort();
    // Every k-th file, so that all classes (sources) are in the sample.
    let step = (paths.len() / limit.max(1)).max(1);
    paths
        .into_iter()
        .step_by(step)
        .take(limit)
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

#[test]
fn fine_scaled_pixels_stay_within_one_and_a_half_levels() {
    let transforms = [
        ("eval 224", Transform::imagenet_eval()),
        (
            "train 224",
            Transform::RandomResizedCrop(RandomResizedCrop::new(224, 7)),
        ),
    ];
    for (tname, transform) in transforms {
        let mut full = ImageLoader::new(transform);
        full.scaled_decode = false;
        let mut fine = full.clone();
        fine.scaled_decode = true;
        fine.fine_scaled_decode = true;
        let means = mean_diffs(tname, &full, &fine, &fine_scale_photos(), 2);
        let n = means.len();
        let worst = means.iter().copied().fold(0.0f64, f64::max);
        // Decoded at another scale than the full decode (the others are equal).
        let scaled: Vec<f64> = means.into_iter().filter(|m| *m > 0.0).collect();
        let (scaled_runs, sum) = (scaled.len(), scaled.iter().sum::<f64>());
        // The mean over the images that took another scale, not diluted by the equal ones.
        let mad = sum / scaled_runs.max(1) as f64;
        println!(
            "{tname}: {n} images, {scaled_runs} scaled, MAD {mad:.3} over those, worst image {worst:.2}"
        );
        assert!(
            mad <= 1.5,
            "{tname}: mean abs diff {mad:.3} over the photos"
        );
        if std::env::var_os("SPDL_FINE_SCALE_DIR").is_none() {
            assert!(scaled_runs > 0, "{tname}: the fine scales are taken");
        }
    }
}

#[test]
fn scaled_region_matches_its_coordinates() {
    let (name, bytes) = photos()
        .into_iter()
        .find(|(n, _)| n == "skimage_retina.jpg")
        .unwrap();
    let d = TurboJpegDecoder::new();
    let info = d.probe(&bytes).unwrap();
    let opts = Default::default();
    let whole = Region {
        x: 0,
        y: 0,
        width: info.width,
        height: info.height,
    };
    for m in 1..8 {
        let full = d.decode_scaled_eighths(&bytes, &opts, whole, m).unwrap();
        assert_eq!(
            (full.image.width, full.image.height),
            ((info.width * m).div_ceil(8), (info.height * m).div_ceil(8)),
            "{name} {m}/8"
        );
        let region = Region {
            x: 333,
            y: 210,
            width: 700,
            height: 500,
        };
        let part = d.decode_scaled_eighths(&bytes, &opts, region, m).unwrap();
        assert_eq!((part.x, part.y), (333 * m / 8, 210 * m / 8), "{name} {m}/8");
        assert_eq!(
            (part.image.width, part.image.height),
            (
                (1033 * m).div_ceil(8) - part.x,
                (710 * m).div_ceil(8) - part.y
            ),
            "{name} {m}/8"
        );
        // Smooth chroma upsampling sees the region's edge; the decoder keeps an iMCU margin.
        let worst = worst_in_window(&full, &part);
        assert!(worst <= 2, "{name} {m}/8: region differs by {worst}");
        // The trait's 1/denom scales are the same decodes.
        if let Some(denom) = [8, 4, 2].into_iter().find(|d| d * m == 8) {
            let same = d.decode_scaled(&bytes, &opts, region, denom).unwrap();
            assert_eq!((same.x, same.y), (part.x, part.y), "{name} 1/{denom}");
            assert_eq!(same.image.as_u8(), part.image.as_u8(), "{name} 1/{denom}");
        }
    }
    assert!(d.decode_scaled_eighths(&bytes, &opts, whole, 9).is_err());
    assert!(d.decode_scaled(&bytes, &opts, whole, 3).is_err());
}
