//! The libjpeg-turbo path: probe, full, region and scaled decodes. The body is `spdl_fuzz_targets::images::turbojpeg`
//! (crates/spdl-fuzz-targets), which the gate's replay test also runs on every seed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_fuzz_targets::images;

fuzz_target!(|data: &[u8]| {
    images::turbojpeg(data);
});
