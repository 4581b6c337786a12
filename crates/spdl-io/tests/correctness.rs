//! Decoding real photos, resizing, seeded random crops, region decoding and
//! batching, checked against simple references.
// These compare against libjpeg-turbo references: they need both backends.
#![cfg(all(feature = "decode-turbojpeg", feature = "decode-image"))]

mod common;

use std::path::PathBuf;

use common::*;
use spdl_io::decode::{ImageRsDecoder, TurboJpegDecoder};
use spdl_io::{
    collate, collate_normalized, crop, BatchData, BatchItem, DecodeOptions, Decoder, Filter, Image,
    ImageLoader, Normalize, RandomResizedCrop, Region, SampleContext, Transform,
};

/// `shared/data/photos`: `$SPDL_SHARED/data/photos`, else the `shared/` beside the checkout.
fn photos() -> Option<PathBuf> {
    let shared = std::env::var_os("SPDL_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let dir = shared.join("data/photos");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: {} not found (set SPDL_SHARED)", dir.display());
        None
    }
}

const PHOTOS: [&str; 5] = [
    "opencv_baboon.jpg",
    "opencv_fruits.jpg",
    "plasma_Kite_thumb_400x250.jpg",
    "plasma_ColdRipple_thumb_400x250_gray.jpg",
    "skimage_rocket.jpg",
];

#[test]
fn turbojpeg_and_image_rs_agree_on_photos() {
    let Some(dir) = photos() else { return };
    let opts = DecodeOptions::default();
    for name in PHOTOS {
        let bytes = read(&dir.join(name));
        let a = TurboJpegDecoder::new().decode(&bytes, &opts).unwrap();
        let b = ImageRsDecoder::new().decode(&bytes, &opts).unwrap();
        assert_eq!(a.shape(), b.shape(), "{name}");
        let (sa, sb) = (samples(&a), samples(&b));
        let max = largest_diff(&sa, &sb);
        let mean = sa
            .iter()
            .zip(&sb)
            .map(|(x, y)| f64::from(x.abs_diff(*y)))
            .sum::<f64>()
            / sa.len() as f64;
        eprintln!("{name}: {:?} max diff {max}, mean {mean:.3}", a.shape());
        // Both implement the same IDCT + smooth upsampling; measured here:
        // max 3, mean <= 0.2 (4:2:0 files), max 2 / mean 0.01 otherwise.
        assert!(mean < 0.3, "{name}: mean diff {mean}");
        assert!(max <= 4, "{name}: max diff {max}");
    }
}

#[test]
fn region_decode_matches_full_decode_then_crop() {
    let Some(dir) = photos() else { return };
    let opts = DecodeOptions::default();
    let dec = TurboJpegDecoder::new();
    for name in PHOTOS {
        let bytes = read(&dir.join(name));
        let full = dec.decode(&bytes, &opts).unwrap();
        for region in [
            Region {
                x: 37,
                y: 21,
                width: 101,
                height: 77,
            },
            Region {
                x: 0,
                y: 0,
                width: full.width,
                height: full.height,
            },
            Region {
                x: full.width - 17,
                y: full.height - 9,
                width: 17,
                height: 9,
            },
            // Top band, the full width: no left or top margin to trim, only rows below.
            Region {
                x: 0,
                y: 0,
                width: full.width,
                height: full.height / 2,
            },
        ] {
            let part = dec.decode_region(&bytes, &opts, region).unwrap();
            let want = crop(&full, region).unwrap();
            assert_eq!(part.shape(), want.shape());
            let max = largest_diff(&samples(&part), &samples(&want));
            assert!(max <= 2, "{name} {region:?}: max diff {max}");
        }
    }
}

#[test]
fn region_outside_image_is_an_error() {
    let bytes = read(&hard("02-truncated-jpeg-png", "good.jpg"));
    let err = TurboJpegDecoder::new()
        .decode_region(
            &bytes,
            &DecodeOptions::default(),
            Region {
                x: 60,
                y: 0,
                width: 10,
                height: 10,
            },
        )
        .unwrap_err();
    assert_eq!(err.kind(), spdl_io::ErrorKind::InvalidArgument);
}

fn gradient(w: usize, h: usize) -> Image {
    let data = (0..h)
        .flat_map(|y| (0..w).map(move |x| ((x * 7 + y * 13) % 256) as u8))
        .collect();
    Image::from_u8(data, w, h, 1).unwrap()
}

/// Bilinear (triangle) 2x downscale: taps [1, 3, 3, 1] / 8, renormalized at edges.
fn reference_half(img: &Image) -> Vec<u8> {
    let (w, h) = (img.width, img.height);
    let src = img.as_u8().unwrap();
    let weights = |i: usize, n: usize| -> Vec<(usize, f64)> {
        let taps: Vec<(usize, f64)> = [(-1i64, 1.0), (0, 3.0), (1, 3.0), (2, 1.0)]
            .iter()
            .filter_map(|&(o, wgt)| {
                let j = 2 * i as i64 + o;
                (j >= 0 && (j as usize) < n).then_some((j as usize, wgt))
            })
            .collect();
        let sum: f64 = taps.iter().map(|t| t.1).sum();
        taps.into_iter().map(|(j, wgt)| (j, wgt / sum)).collect()
    };
    let mut out = Vec::new();
    for oy in 0..h / 2 {
        for ox in 0..w / 2 {
            let mut acc = 0.0;
            for (sy, wy) in weights(oy, h) {
                for (sx, wx) in weights(ox, w) {
                    acc += wy * wx * f64::from(src[sy * w + sx]);
                }
            }
            out.push(acc.round() as u8);
        }
    }
    out
}

#[test]
fn bilinear_downscale_matches_triangle_filter_reference() {
    let img = gradient(64, 48);
    let out = spdl_io::transform::resize(&img, 32, 24, Filter::Bilinear).unwrap();
    let want = reference_half(&img);
    let max = largest_diff(out.as_u8().unwrap(), &want);
    assert!(max <= 1, "max diff {max}");
}

#[test]
fn resize_keeps_constant_images_constant_for_every_filter() {
    let img = Image::from_u8(vec![77; 50 * 30 * 3], 50, 30, 3).unwrap();
    for f in [
        Filter::Nearest,
        Filter::Bilinear,
        Filter::Bicubic,
        Filter::Lanczos3,
    ] {
        for (w, h) in [(17, 11), (224, 224)] {
            let out = spdl_io::transform::resize(&img, w, h, f).unwrap();
            assert_eq!(out.shape(), [h, w, 3]);
            assert!(out.as_u8().unwrap().iter().all(|&v| v == 77), "{f:?}");
        }
    }
}

fn ctx(index: u64, epoch: u64) -> SampleContext<'static> {
    SampleContext {
        key: "sample",
        index,
        epoch,
    }
}

#[test]
fn random_resized_crop_is_deterministic_per_seed_epoch_index() {
    let rrc = RandomResizedCrop::new(224, 42);
    let (w, h) = (500, 375);
    let mut differs = 0;
    for index in 0..50 {
        let a = rrc.plan(w, h, &ctx(index, 3));
        assert_eq!(a, rrc.plan(w, h, &ctx(index, 3)));
        if a != rrc.plan(w, h, &ctx(index, 4)) {
            differs += 1;
        }
        let s = a.src;
        assert!(
            s.left >= 0.0
                && s.top >= 0.0
                && s.left + s.width <= w as f64
                && s.top + s.height <= h as f64
        );
        let frac = s.width * s.height / (w * h) as f64;
        assert!((0.07..=1.0).contains(&frac), "area fraction {frac}");
        let ratio = s.width / s.height;
        assert!((0.7..=1.4).contains(&ratio), "ratio {ratio}");
        assert_eq!((a.width, a.height), (224, 224));
    }
    assert!(
        differs >= 49,
        "epochs should reshuffle crops ({differs}/50 differ)"
    );
    let flips = (0..200)
        .filter(|&i| rrc.plan(w, h, &ctx(i, 0)).hflip)
        .count();
    assert!((60..140).contains(&flips), "flip rate {flips}/200");
    // A different seed gives different crops.
    assert_ne!(
        RandomResizedCrop::new(224, 43).plan(w, h, &ctx(0, 0)),
        rrc.plan(w, h, &ctx(0, 0))
    );
}

#[test]
fn loader_output_does_not_depend_on_threads() {
    let bytes = read(&hard("12-progressive-jpeg", "baseline.jpg"));
    let loader = ImageLoader::new(Transform::RandomResizedCrop(RandomResizedCrop::new(16, 7)));
    let sequential: Vec<Image> = (0..8)
        .map(|i| loader.load(&bytes, &ctx(i, 1)).unwrap())
        .collect();
    let parallel: Vec<Image> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .rev()
            .map(|i| {
                s.spawn({
                    let (loader, bytes) = (&loader, &bytes);
                    move || (i, loader.load(bytes, &ctx(i, 1)).unwrap())
                })
            })
            .collect();
        let mut out: Vec<(u64, Image)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        out.sort_by_key(|(i, _)| *i);
        out.into_iter().map(|(_, img)| img).collect()
    });
    assert_eq!(sequential, parallel);
    assert!(sequential.iter().all(|img| img.shape() == [16, 16, 3]));
}

#[test]
fn region_and_full_decode_loaders_agree() {
    let Some(dir) = photos() else { return };
    let bytes = read(&dir.join("opencv_fruits.jpg"));
    for transform in [
        Transform::imagenet_eval(),
        Transform::RandomResizedCrop(RandomResizedCrop::new(224, 1)),
    ] {
        let region = ImageLoader::new(transform);
        let full = ImageLoader {
            region_decode: false,
            ..region.clone()
        };
        for i in 0..4 {
            let (a, b) = (
                region.load(&bytes, &ctx(i, 0)).unwrap(),
                full.load(&bytes, &ctx(i, 0)).unwrap(),
            );
            assert_eq!(a.shape(), [224, 224, 3]);
            let max = largest_diff(&samples(&a), &samples(&b));
            assert!(max <= 3, "{transform:?} sample {i}: max diff {max}");
        }
    }
}

#[test]
fn imagenet_eval_center_crop_of_constant_image() {
    let img = Image::from_u8(vec![200; 300 * 400 * 3], 400, 300, 3).unwrap();
    let out = Transform::imagenet_eval().apply(img, &ctx(0, 0)).unwrap();
    assert_eq!(out.shape(), [224, 224, 3]);
    assert!(out.as_u8().unwrap().iter().all(|&v| v == 200));
}

#[test]
fn collate_shapes_labels_and_normalization() {
    let a = Image::from_u8(vec![0; 4 * 5 * 3], 5, 4, 3).unwrap();
    let b = Image::from_u8(vec![255; 4 * 5 * 3], 5, 4, 3).unwrap();
    let items = |labels: [Option<i64>; 2]| {
        vec![
            BatchItem {
                key: "a".into(),
                label: labels[0],
                image: a.clone(),
            },
            BatchItem {
                key: "b".into(),
                label: labels[1],
                image: b.clone(),
            },
        ]
    };
    let batch = collate(items([Some(3), None])).unwrap();
    assert_eq!(batch.shape, [2, 4, 5, 3]);
    assert_eq!(
        (batch.keys.clone(), batch.labels.clone()),
        (vec!["a".to_string(), "b".into()], vec![Some(3), None])
    );
    let BatchData::U8(data) = &batch.data else {
        panic!("u8 expected")
    };
    assert_eq!(data.len(), 2 * 4 * 5 * 3);
    assert_eq!((data[0], data[60]), (0, 255));

    let norm = Normalize::imagenet();
    let batch = collate_normalized(items([Some(1), Some(2)]), &norm).unwrap();
    assert_eq!(batch.shape, [2, 3, 4, 5]);
    let BatchData::F32(data) = &batch.data else {
        panic!("f32 expected")
    };
    let plane = 20;
    for c in 0..3 {
        let first = data[c * plane];
        assert!((first - (0.0 - norm.mean[c]) / norm.std[c]).abs() < 1e-6);
        let second = data[60 + c * plane + 7];
        assert!((second - (1.0 - norm.mean[c]) / norm.std[c]).abs() < 1e-6);
    }
    assert_eq!(
        collate(Vec::<Image>::new()).unwrap_err().kind(),
        spdl_io::ErrorKind::Empty
    );
    let gray = Image::from_u8(vec![0; 20], 5, 4, 1).unwrap();
    let err = collate_normalized(vec![gray], &norm).unwrap_err();
    assert_eq!(err.kind(), spdl_io::ErrorKind::InvalidArgument);
}

#[test]
fn collate_u16_and_normalize_as_v_over_65535() {
    let opts = DecodeOptions {
        color: spdl_io::ColorMode::Unchanged,
        ..Default::default()
    };
    let img = decode("05-png-16bit", "gray16.png", &opts).unwrap();
    let batch = collate(vec![img.clone()]).unwrap();
    assert!(matches!(batch.data, BatchData::U16(_)));
    let f = Normalize::unit(1).to_chw(&img).unwrap();
    assert_eq!(f[16 + 10 * 17], 1.0);
    assert!((f[1] - 255.0 / 65535.0).abs() < 1e-7);
}
