//! The image-rs path (PNG, JPEG, GIF, WebP, BMP, TIFF, picked by magic bytes): probe, decode in
//! every colour mode, and decode into a caller's buffer of the probed size. The first byte
//! chooses the options; the rest is the file. Seeds: every image fixture, prefixed.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use spdl_io::decode::{Decoder, ImageRsDecoder};

fuzz_target!(|data: &[u8]| {
    let Some((&param, bytes)) = data.split_first() else {
        return;
    };
    let decoder = ImageRsDecoder::new();
    if !decoder.matches(bytes) {
        return;
    }
    let opts = common::options(param);
    let probed = decoder.probe(bytes);
    if let Ok(img) = decoder.decode(bytes, &opts) {
        common::check_image(&img);
        assert!(probed.is_ok(), "decode succeeded where probe failed");
    }
    if let Ok(info) = probed {
        if let Ok(shape) = opts.output_shape(&info) {
            if shape.len_bytes() <= 64 << 20 {
                let mut out = vec![0u8; shape.len_bytes()];
                let _ = decoder.decode_into(bytes, &opts, &mut out);
            }
        }
    }
});
