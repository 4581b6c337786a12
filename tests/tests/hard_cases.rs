//! Every image case of `shared/data/hard` through a whole pipeline: the right files delivered,
//! the bad ones counted as failed with errors naming them, and `delivered + failed = listed`.

use spdl_io::Transform;
use spdl_tests::{hard_case, run_folder};

fn check(case: &str, delivered: &[&str], failed: &[&str]) {
    for threads in [1, 2, 4] {
        let out = run_folder(&hard_case(case), Transform::Identity, threads);
        let names = out.delivered_names();
        let expected: std::collections::BTreeSet<String> =
            delivered.iter().map(|s| s.to_string()).collect();
        assert_eq!(names, expected, "{case}: delivered with {threads} threads");
        assert_eq!(
            out.failed as usize,
            failed.len(),
            "{case}: failures: {:?}",
            out.errors
        );
        assert_eq!(
            out.delivered.len() + out.failed as usize,
            out.listed,
            "{case}: accounting"
        );
        // The pipeline keeps the last 5 errors; each names its file.
        for name in failed.iter().rev().take(5) {
            assert!(
                out.errors.iter().any(|e| e.contains(name)),
                "{case}: no error names {name}: {:?}",
                out.errors
            );
        }
    }
}

#[test]
fn cmyk_jpegs_decode() {
    check(
        "01-cmyk-jpeg",
        &["cmyk_imagemagick.jpg", "cmyk_pillow.jpg"],
        &[],
    );
}

#[test]
fn truncated_files_fail_and_the_rest_is_delivered() {
    // truncated_no_eoi.jpg: spdl-io's strict default reports the missing EOI (EXPECTED option b).
    check(
        "02-truncated-jpeg-png",
        &["good.jpg", "good.png"],
        &[
            "truncated_60pct.jpg",
            "truncated_half.png",
            "truncated_no_eoi.jpg",
        ],
    );
}

#[test]
fn exif_orientations_decode() {
    let out = run_folder(&hard_case("03-exif-orientation"), Transform::Identity, 2);
    assert_eq!(out.delivered.len(), 9);
    for (name, img) in &out.delivered {
        let rotated = [
            "orient_5.jpg",
            "orient_6.jpg",
            "orient_6_exiftool.jpg",
            "orient_7.jpg",
            "orient_8.jpg",
        ];
        let want = if rotated.contains(&name.as_str()) {
            [48, 32, 3]
        } else {
            [32, 48, 3]
        };
        assert_eq!(img.shape(), want, "{name}");
    }
}

#[test]
fn decompression_bombs_are_rejected() {
    check(
        "04-decompression-bomb",
        &[],
        &[
            "bomb_30000x30000_1bit.png",
            "header_lie_65535x65535_rgba.png",
            "jpeg_sof_65500x65500.jpg",
        ],
    );
}

#[test]
fn sixteen_bit_pngs_decode() {
    check("05-png-16bit", &["gray16.png", "rgb16.png"], &[]);
}

#[test]
fn gray_and_rgb_jpegs_batch_as_rgb() {
    let out = run_folder(
        &hard_case("06-gray-jpeg-in-rgb-batch"),
        Transform::Identity,
        2,
    );
    let images: Vec<_> = out.delivered.into_iter().map(|(_, img)| img).collect();
    let batch = spdl_io::collate(images).expect("both decode to RGB");
    assert_eq!(batch.shape, [2, 30, 40, 3]);
}

#[test]
fn palette_and_alpha_pngs_decode() {
    check(
        "07-png-palette-alpha",
        &[
            "gray_alpha_LA.png",
            "palette_opaque_4bit.png",
            "palette_trns.png",
            "rgba.png",
        ],
        &[],
    );
}

#[test]
fn content_wins_over_extension() {
    check(
        "08-mislabeled-extension",
        &[
            "gif_content.jpg",
            "jpeg_content.png",
            "png_content.jpg",
            "tiff_content.jpg",
            "webp_content.jpg",
        ],
        &[],
    );
}

#[test]
fn empty_and_non_image_files_fail() {
    check(
        "09-empty-and-non-image",
        &["good_control.jpg"],
        &[
            "empty.jpg",
            "header_only.jpg",
            "html_error_page.jpg",
            "soi_only.jpg",
            "text.png",
        ],
    );
}

#[test]
fn arithmetic_and_progressive_jpegs_decode() {
    check(
        "10-arithmetic-jpeg",
        &["arith.jpg", "arith_progressive.jpg"],
        &[],
    );
    check(
        "12-progressive-jpeg",
        &["baseline.jpg", "progressive.jpg", "progressive_restart.jpg"],
        &[],
    );
}

#[test]
fn resized_batches_from_a_mixed_folder() {
    // Every valid image of every case, resized: one shape for all, ready to batch.
    let out = run_folder(
        &hard_case("08-mislabeled-extension"),
        Transform::imagenet_eval(),
        2,
    );
    let images: Vec<_> = out.delivered.into_iter().map(|(_, img)| img).collect();
    let batch = spdl_io::collate(images).unwrap();
    assert_eq!(batch.shape, [5, 224, 224, 3]);
}
