//! The plugin passes spdl-rs's decoder conformance suite, with reference pixels from Pillow
//! (`tests/data/make.py` says how each file and reference was made).

use std::path::PathBuf;
use std::sync::Arc;

use spdl_decoder_pnm::PnmDecoder;
use spdl_io::ColorMode;
use spdl_testkit::{assert_conforms, Reference, Sample};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn sample(file: &str, reference: &str, color: ColorMode) -> Sample {
    Sample::from_file(data(file))
        .unwrap()
        .with_reference(Reference::from_npy(data(reference), color, 0).unwrap())
}

#[test]
fn pnm_decoder_conforms() {
    let samples = vec![
        sample("orange.ppm", "orange_rgb.npy", ColorMode::Rgb),
        sample("orange.pgm", "orange_pgm_rgb.npy", ColorMode::Rgb),
        sample("deep.pgm", "deep_gray.npy", ColorMode::Gray),
        sample("maxval1000.pgm", "maxval1000_gray.npy", ColorMode::Gray),
    ];
    assert_conforms(Arc::new(PnmDecoder), &samples);
}
