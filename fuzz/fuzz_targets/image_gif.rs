//! The image-rs path on GIF. The body is `spdl_fuzz_targets::images::image_format`
//! (crates/spdl-fuzz-targets), which the gate's replay test also runs on every seed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_fuzz_targets::images;
use spdl_io::decode::ImageFormat;

fuzz_target!(|data: &[u8]| {
    images::image_format(ImageFormat::Gif, data);
});
