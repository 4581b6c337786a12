//! A decoder author's check, in one call: the conformance suite the built-in decoders pass,
//! run on the PNM plugin of `examples/decoder-plugin-pnm` with one of its sample files. In the
//! plugin's own crate this is a `#[test]` (`cargo test -p spdl-decoder-pnm`). Run from the
//! repository's root: `cargo run -p spdl-tests --example conformance`.
use std::sync::Arc;

use spdl_decoder_pnm::PnmDecoder;
use spdl_testkit::{check_decoder, Sample};

fn main() -> std::io::Result<()> {
    let samples = [Sample::from_file(
        "examples/decoder-plugin-pnm/tests/data/orange.ppm",
    )?];
    // Probe before decode, writes only its output, refuses a short buffer and an over-limit
    // header before writing a pixel, never panics on cut or mutated bytes, picked by content.
    // `assert_conforms` is the same for a `#[test]`: it panics listing every violation.
    let violations = check_decoder(Arc::new(PnmDecoder), &samples);
    assert!(violations.is_empty(), "{violations:#?}");
    println!("the PNM decoder conforms on {} sample(s)", samples.len());
    Ok(())
}
