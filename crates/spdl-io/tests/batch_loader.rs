//! `load_batch`: rows written in place equal `ImageLoader::load` of each sample; failures leave
//! zero rows and are reported by row; normalized and shape-unknown batches too.

#![cfg(feature = "decode-turbojpeg")]

use std::path::PathBuf;

use spdl_io::{
    collate_normalized, load_batch, BatchData, BatchSample, ColorMode, ErrorKind, ImageLoader,
    ImageOptions, Normalize, SampleContext, TransformKind,
};

fn photos() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/samples");
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

fn samples(photos: &[(String, Vec<u8>)]) -> Vec<BatchSample> {
    photos
        .iter()
        .enumerate()
        .map(|(i, (key, _))| BatchSample {
            key: key.clone(),
            label: Some(i as i64),
            index: 100 + i as u64,
            epoch: 3,
        })
        .collect()
}

fn loader(transform: TransformKind, color: ColorMode) -> ImageLoader {
    ImageOptions {
        size: Some(96),
        transform,
        color,
        seed: 5,
        ..ImageOptions::default()
    }
    .loader()
    .unwrap()
}

#[test]
fn rows_equal_single_loads_and_failures_are_zero_rows() {
    let mut photos = photos();
    photos[2].1.truncate(300); // a truncated JPEG
    photos[5].1 = b"<html>not an image</html>".to_vec();
    let samples = samples(&photos);
    for transform in [
        TransformKind::Eval,
        TransformKind::Train,
        TransformKind::Resize,
    ] {
        let loader = loader(transform, ColorMode::Rgb);
        let out = load_batch(&loader, &samples, None, 3, |i| Ok(&photos[i].1[..])).unwrap();
        assert_eq!(out.batch.shape, [photos.len(), 96, 96, 3]);
        assert_eq!(out.batch.labels[4], Some(4));
        let rows: Vec<usize> = out.failed.iter().map(|(r, _)| *r).collect();
        assert_eq!(rows, [2, 5], "{transform:?}");
        assert_eq!(out.failed[0].1.kind(), ErrorKind::Truncated);
        assert_eq!(out.failed[1].1.key(), photos[5].0, "{}", out.failed[1].1);
        let BatchData::U8(data) = &out.batch.data else {
            panic!("u8 batch")
        };
        let per = 96 * 96 * 3;
        for (i, (key, bytes)) in photos.iter().enumerate() {
            let row = &data[i * per..(i + 1) * per];
            if rows.contains(&i) {
                assert!(row.iter().all(|&v| v == 0), "{key}: failed row is zero");
                continue;
            }
            let ctx = SampleContext {
                key,
                index: 100 + i as u64,
                epoch: 3,
            };
            let single = loader.load(bytes, &ctx).unwrap();
            assert_eq!(row, single.as_u8().unwrap(), "{transform:?} {key}");
        }
    }
}

#[test]
fn delivered_batches_drop_the_failed_rows_and_keep_the_others_in_order() {
    let mut photos = photos();
    photos[0].1.truncate(300);
    photos[5].1 = b"<html>not an image</html>".to_vec();
    let samples = samples(&photos);
    let loader = loader(TransformKind::Eval, ColorMode::Rgb);
    let out = load_batch(&loader, &samples, None, 2, |i| Ok(&photos[i].1[..])).unwrap();
    let full = out.batch.clone();
    let (batch, failed) = out.into_delivered();
    assert_eq!(failed.iter().map(|(r, _)| *r).collect::<Vec<_>>(), [0, 5]);
    let kept: Vec<usize> = (0..photos.len()).filter(|i| *i != 0 && *i != 5).collect();
    assert_eq!(batch.shape, [kept.len(), 96, 96, 3]);
    let keys: Vec<&str> = kept.iter().map(|&i| photos[i].0.as_str()).collect();
    assert_eq!(batch.keys, keys);
    assert_eq!(
        batch.labels,
        kept.iter().map(|&i| full.labels[i]).collect::<Vec<_>>()
    );
    let (BatchData::U8(got), BatchData::U8(all)) = (&batch.data, &full.data) else {
        panic!("u8 batches")
    };
    let per = 96 * 96 * 3;
    assert_eq!(got.len(), kept.len() * per);
    for (row, &i) in kept.iter().enumerate() {
        assert_eq!(
            got[row * per..(row + 1) * per],
            all[i * per..(i + 1) * per],
            "row {i}"
        );
    }
}

#[test]
fn normalized_rows_equal_collate_normalized() {
    let photos = photos();
    let samples = samples(&photos);
    let loader = loader(TransformKind::Eval, ColorMode::Rgb);
    let norm = Normalize::imagenet();
    let out = load_batch(&loader, &samples, Some(&norm), 2, |i| Ok(&photos[i].1[..])).unwrap();
    assert!(out.failed.is_empty());
    let images: Vec<_> = photos
        .iter()
        .enumerate()
        .map(|(i, (key, b))| {
            let ctx = SampleContext {
                key,
                index: 100 + i as u64,
                epoch: 3,
            };
            loader.load(b, &ctx).unwrap()
        })
        .collect();
    let reference = collate_normalized(images, &norm).unwrap();
    assert_eq!(out.batch.shape, reference.shape);
    assert_eq!(out.batch.data, reference.data);
}

#[test]
fn unchanged_color_takes_the_first_shape_and_names_the_others() {
    let photos = photos();
    let samples = samples(&photos);
    let loader = loader(TransformKind::Eval, ColorMode::Unchanged);
    assert_eq!(loader.output_shape(), None);
    let out = load_batch(&loader, &samples, None, 2, |i| Ok(&photos[i].1[..])).unwrap();
    assert_eq!(out.batch.shape[1..], [96, 96, 3]);
    for (_, e) in &out.failed {
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
    }
    let all_bad = load_batch(&loader, &samples[..2], None, 1, |_| Ok(&b"xx"[..])).unwrap_err();
    assert_eq!(all_bad.kind(), ErrorKind::InvalidArgument);
    assert!(load_batch(&loader, &[], None, 1, |_| Ok(&b""[..])).is_err());
    let fixed = self::loader(TransformKind::Eval, ColorMode::Rgb);
    let empty = load_batch(&fixed, &[], None, 1, |_| Ok(&b""[..])).unwrap();
    assert_eq!(empty.batch.shape, [0, 96, 96, 3]);
}

#[test]
fn sizes_past_the_output_limit_are_refused_before_the_batch_is_allocated() {
    // Each would ask for tens of GB up front (the process aborted on the allocation).
    let photos = photos();
    let samples = samples(&photos[..3]);
    for (size, normalize) in [(60_000, false), (1 << 20, false), (20_000, true)] {
        let loader = ImageOptions {
            size: Some(size),
            transform: TransformKind::Resize,
            ..ImageOptions::default()
        }
        .loader()
        .unwrap();
        let norm = normalize.then(Normalize::imagenet);
        let e = load_batch(&loader, &samples, norm.as_ref(), 2, |i| {
            Ok(&photos[i].1[..])
        })
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    }
    // Rows within the limit but a batch of too many of them.
    let loader = ImageOptions {
        size: Some(12_000),
        transform: TransformKind::Resize,
        ..ImageOptions::default()
    }
    .loader()
    .unwrap();
    let many: Vec<BatchSample> = (0..30).map(|i| samples[i % 3].clone()).collect();
    let e = load_batch(&loader, &many, None, 2, |i| Ok(&photos[i % 3].1[..])).unwrap_err();
    assert!(e.to_string().contains("a batch of 30"), "{e}");
}
