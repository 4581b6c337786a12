//! Property tests: no input, however broken, makes decoding (or the array, archive and WAV
//! parsers) panic.
#![cfg(feature = "decode-image")]

mod common;

use common::*;
use proptest::prelude::*;
use spdl_io::{ColorMode, DecodeOptions, Decoder, ImageLoader, Registry, SampleContext, Transform};

/// The four property tests of one parser, in a module `$name`: random bytes (up to `bytes`
/// long), random bytes (up to `tail`) after one of the `magics`, the first `n` of the real
/// files from `seeds` truncated, and the same files with a few bytes changed.
macro_rules! never_panics {
    ($name:ident: $check:ident on $n:literal $seeds:ident(), cases $cases:literal, bytes $bytes:literal, tail $tail:literal, magics $magics:expr) => {
        mod $name {
            use super::*;

            proptest! {
                #![proptest_config(ProptestConfig { cases: $cases, ..ProptestConfig::default() })]

                #[test]
                fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..$bytes)) {
                    $check(&bytes);
                }

                #[test]
                fn random_bytes_with_magic(which in 0usize..4, tail in proptest::collection::vec(any::<u8>(), 0..$tail)) {
                    let magics: [&[u8]; 4] = $magics;
                    $check(&[magics[which], &tail].concat());
                }

                #[test]
                fn truncated_real_files(which in 0usize..$n, cut in 0.0f64..1.0) {
                    let file = &$seeds()[which];
                    $check(&file[..(file.len() as f64 * cut) as usize]);
                }

                #[test]
                fn mutated_real_files(which in 0usize..$n, edits in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 1..8)) {
                    let mut file = $seeds()[which].clone();
                    for (at, value) in edits {
                        let i = ((file.len() as f64 * at) as usize).min(file.len() - 1);
                        file[i] = value;
                    }
                    $check(&file);
                }
            }
        }
    };
}

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

never_panics!(images: decode_all on 7 seeds(), cases 200, bytes 512, tail 256, magics [
    &b"\xFF\xD8\xFF"[..],
    b"\x89PNG\r\n\x1a\n",
    b"GIF89a",
    b"II*\0",
]);

/// Real NPY, NPZ, tar and WAV files (written by NumPy, tarfile, GNU tar, wave, ffmpeg).
fn array_seeds() -> Vec<Vec<u8>> {
    let dir = fixture("arrays");
    [
        "npy/le_f8.npy",
        "npy/le_i4_fortran.npy",
        "npz/stored.npz",
        "npz/deflated.npz",
        "tar/python_pax.tar",
        "tar/gnutar_gnu.tar",
        "wav/pcm24.wav",
        "wav/s16_6ch_extensible.wav",
    ]
    .iter()
    .map(|f| read(&dir.join(f)))
    .collect()
}

/// Runs every array/archive/WAV parser on `bytes`; checks that what they accept is in
/// bounds.
fn parse_arrays(bytes: &[u8]) {
    use spdl_io::array::{npy, npz, tar, wav};
    let len = bytes.len() as u64;
    if let Ok(a) = npy::load_npy(bytes) {
        assert_eq!(a.data.len(), a.header.nbytes);
    }
    // A small limit: mutated sizes must not make the fuzzer allocate gigabytes.
    if let Ok(z) = npz::NpzArchive::parse(bytes, 1 << 20) {
        for e in z.entries() {
            assert!(e.offset + e.compressed_size <= len);
            if let Ok(m) = z.member(bytes, e) {
                assert_eq!(m.bytes.len() as u64, e.uncompressed_size);
            }
        }
    }
    for m in tar::members(bytes).flatten() {
        assert!(m.offset + m.size <= len);
    }
    for (_, data) in tar::TarReader::new(bytes).flatten() {
        assert!(data.len() as u64 <= len);
    }
    if let Ok(s) = wav::load_wav(bytes, None, None) {
        assert_eq!(s.bytes.len(), s.frames * s.header.block_align as usize);
    }
    let _ = wav::load_wav(bytes, Some(0.001), Some(0.5));
}

never_panics!(arrays: parse_arrays on 8 array_seeds(), cases 1000, bytes 1200, tail 1200, magics [
    &b"\x93NUMPY\x01\x00"[..],
    b"PK\x03\x04",
    b"RIFF\x00\x00\x00\x00WAVEfmt ",
    b"PK\x05\x06",
]);

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
    let dir = fixture("fuzz");
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
    let path = fixture("fuzz/png_plte_not_multiple_of_3.png");
    let err = spdl_io::decode::ImageRsDecoder::new()
        .decode(&read(&path), &DecodeOptions::default())
        .unwrap_err();
    assert_eq!(err.kind(), spdl_io::ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("PLTE"), "{err}");
}

/// Fuzz regression (`image_gif` target): a GIF whose logical screen is 0 pixels wide decoded
/// into an image without pixels; the decoder refuses it, naming the size.
#[test]
fn gif_without_width_is_corrupt() {
    let path = fixture("fuzz/gif_zero_width.gif");
    let bytes = read(&path);
    for decoded in [
        spdl_io::decode::ImageRsDecoder::new().decode(&bytes, &DecodeOptions::default()),
        Registry::with_defaults().decode("zero.gif", &bytes, &DecodeOptions::default()),
    ] {
        let err = decoded.unwrap_err();
        assert_eq!(err.kind(), spdl_io::ErrorKind::Corrupt, "{err}");
        assert!(err.to_string().contains("0x7 pixels"), "{err}");
    }
    let err = spdl_io::decode::ImageRsDecoder::new()
        .probe(&bytes)
        .unwrap_err();
    assert_eq!(err.kind(), spdl_io::ErrorKind::Corrupt, "{err}");
}
