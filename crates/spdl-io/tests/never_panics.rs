//! Property tests: no input, however broken, makes decoding panic.
#![cfg(feature = "decode-image")]

mod common;

use common::*;
use proptest::prelude::*;
use spdl_io::{ColorMode, DecodeOptions, Decoder, ImageLoader, Registry, SampleContext, Transform};

fn seeds() -> Vec<Vec<u8>> {
    [
        ("02-truncated-jpeg-png", "good.jpg"),
        ("02-truncated-jpeg-png", "good.png"),
        ("03-exif-orientation", "orient_6.jpg"),
        ("07-png-palette-alpha", "palette_trns.png"),
        ("12-progressive-jpeg", "progressive_restart.jpg"),
        ("08-mislabeled-extension", "gif_content.jpg"),
        ("08-mislabeled-extension", "webp_content.jpg"),
    ]
    .iter()
    .map(|(c, f)| read(&hard(c, f)))
    .collect()
}

/// Decodes with every backend, mode and strictness; only checks for panics
/// (and that successes have consistent shapes).
fn decode_all(bytes: &[u8]) {
    let registry = Registry::with_defaults();
    for color in [ColorMode::Rgb, ColorMode::Unchanged] {
        for lenient in [false, true] {
            let opts = DecodeOptions {
                color,
                lenient,
                ..Default::default()
            };
            if let Ok(img) = registry.decode("fuzz", bytes, &opts) {
                assert_eq!(img.data.len(), img.width * img.height * img.channels);
            }
            let _ = spdl_io::decode::ImageRsDecoder::new().decode(bytes, &opts);
        }
    }
    let loader = ImageLoader::new(Transform::RandomResizedCrop(
        spdl_io::RandomResizedCrop::new(8, 1),
    ));
    let _ = loader.load(
        bytes,
        &SampleContext {
            key: "fuzz",
            index: 0,
            epoch: 0,
        },
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        decode_all(&bytes);
    }

    #[test]
    fn random_bytes_with_magic(which in 0usize..4, tail in proptest::collection::vec(any::<u8>(), 0..256)) {
        let magic: &[u8] = [&b"\xFF\xD8\xFF"[..], b"\x89PNG\r\n\x1a\n", b"GIF89a", b"II*\0"][which];
        decode_all(&[magic, &tail].concat());
    }

    #[test]
    fn truncated_real_files(which in 0usize..7, cut in 0.0f64..1.0) {
        let file = &seeds()[which];
        decode_all(&file[..(file.len() as f64 * cut) as usize]);
    }

    #[test]
    fn mutated_real_files(which in 0usize..7, edits in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 1..8)) {
        let mut file = seeds()[which].clone();
        for (at, value) in edits {
            let i = ((file.len() as f64 * at) as usize).min(file.len() - 1);
            file[i] = value;
        }
        decode_all(&file);
    }
}

/// A requested output larger than the limits is a named error before anything is allocated
/// (a 100000x100000 resize would otherwise abort the process on allocation failure).
#[test]
fn huge_output_sizes_are_limit_errors() {
    let bytes = read(&hard("02-truncated-jpeg-png", "good.jpg"));
    let ctx = SampleContext {
        key: "good.jpg",
        index: 0,
        epoch: 0,
    };
    for transform in [
        Transform::Resize {
            width: 100_000,
            height: 100_000,
            filter: spdl_io::Filter::Bilinear,
        },
        Transform::eval(100_000, spdl_io::Filter::Bilinear),
        Transform::RandomResizedCrop(spdl_io::RandomResizedCrop::new(100_000, 0)),
    ] {
        let err = ImageLoader::new(transform).load(&bytes, &ctx).unwrap_err();
        assert_eq!(err.kind(), spdl_io::ErrorKind::LimitExceeded, "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("good.jpg") && msg.contains("output of 100000x100000"),
            "{msg}"
        );
    }
}

/// Every input a fuzz target once crashed on (`tests/fixtures/fuzz/`, see its README): decoded
/// by every backend without a panic, and refused with an error (each is a broken file).
#[test]
fn fuzz_findings_are_clear_errors() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let bytes = read(&path);
        decode_all(&bytes);
        let err = Registry::with_defaults()
            .decode("fuzz", &bytes, &DecodeOptions::default())
            .unwrap_err();
        assert!(!err.to_string().is_empty(), "{}", path.display());
        n += 1;
    }
    assert!(n >= 1, "no fuzz findings in {}", dir.display());
}

/// Fuzz regression (`image_rs` target): png 0.18.1 panics on a palette that is not a whole
/// number of RGB entries; the decoder refuses it first, naming the chunk.
#[test]
fn png_with_a_ragged_palette_is_corrupt() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz/png_plte_not_multiple_of_3.png");
    let err = spdl_io::decode::ImageRsDecoder::new()
        .decode(&read(&path), &DecodeOptions::default())
        .unwrap_err();
    assert_eq!(err.kind(), spdl_io::ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("PLTE"), "{err}");
}
