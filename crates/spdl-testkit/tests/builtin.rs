//! The built-in decoders pass the same conformance suite a plugin author runs.

use std::path::PathBuf;
use std::sync::Arc;

use spdl_io::decode::{ImageRsDecoder, TurboJpegDecoder};
use spdl_io::ColorMode;
use spdl_testkit::{assert_conforms, check_decoder, Reference, Sample};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn hard(case: &str, file: &str) -> PathBuf {
    repo("crates/spdl-io/tests/fixtures/hard")
        .join(case)
        .join(file)
}

fn sample(path: PathBuf) -> Sample {
    Sample::from_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn reference(case: &str, npy: &str, color: ColorMode, tol: u8) -> Reference {
    Reference::from_npy(hard(case, npy), color, tol).unwrap()
}

#[test]
fn turbojpeg_conforms() {
    let samples = vec![
        // Tolerance +-2 against Pillow, as the case's EXPECTED.md states.
        sample(hard("02-truncated-jpeg-png", "good.jpg")).with_reference(reference(
            "02-truncated-jpeg-png",
            "ref/good_rgb.npy",
            ColorMode::Rgb,
            2,
        )),
        sample(repo("data/samples/opencv_orange.jpg")),
        sample(hard("12-progressive-jpeg", "progressive.jpg")),
    ];
    assert_conforms(Arc::new(TurboJpegDecoder::new()), &samples);
}

#[test]
fn image_rs_conforms() {
    let samples = vec![
        sample(hard("02-truncated-jpeg-png", "good.png")),
        sample(hard("07-png-palette-alpha", "rgba.png")).with_reference(reference(
            "07-png-palette-alpha",
            "ref/rgba_rgba.npy",
            ColorMode::Rgba,
            0,
        )),
        sample(hard("07-png-palette-alpha", "palette_trns.png")).with_reference(reference(
            "07-png-palette-alpha",
            "ref/palette_trns_rgba.npy",
            ColorMode::Rgba,
            0,
        )),
        sample(hard("07-png-palette-alpha", "gray_alpha_LA.png")).with_reference(reference(
            "07-png-palette-alpha",
            "ref/gray_alpha_LA_rgb.npy",
            ColorMode::Rgb,
            0,
        )),
    ];
    assert_conforms(Arc::new(ImageRsDecoder::new()), &samples);
}

/// The suite catches what it claims to: a decoder that ignores the limits and one that
/// writes past its output are reported by name.
#[test]
fn the_suite_reports_broken_decoders() {
    struct NoLimits(TurboJpegDecoder);
    impl spdl_io::Decoder for NoLimits {
        fn name(&self) -> &str {
            "no-limits"
        }
        fn matches(&self, bytes: &[u8]) -> bool {
            self.0.matches(bytes)
        }
        fn probe(&self, bytes: &[u8]) -> spdl_io::Result<spdl_io::ImageInfo> {
            self.0.probe(bytes)
        }
        fn decode_into(
            &self,
            bytes: &[u8],
            opts: &spdl_io::DecodeOptions,
            out: &mut [u8],
        ) -> spdl_io::Result<spdl_io::ImageInfo> {
            let unlimited = spdl_io::DecodeOptions {
                limits: spdl_io::Limits::none(),
                ..*opts
            };
            let info = self.0.decode_into(bytes, &unlimited, out)?;
            if let Some(b) = out.last_mut() {
                *b = 0; // one byte past the output when the buffer is larger
            }
            Ok(info)
        }
    }
    let samples = vec![sample(hard("02-truncated-jpeg-png", "good.jpg"))];
    let found = check_decoder(Arc::new(NoLimits(TurboJpegDecoder::new())), &samples);
    let text = found.join("\n");
    assert!(text.contains("good.jpg: limits:"), "{text}");
    assert!(text.contains("wrote past"), "{text}");
}
