//! The JPEG marker walker both JPEG backends share. The body is `spdl_fuzz_targets::images::jpeg_markers`
//! (crates/spdl-fuzz-targets), which the gate's replay test also runs on every seed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_fuzz_targets::images;

fuzz_target!(|data: &[u8]| {
    images::jpeg_markers(data);
});
