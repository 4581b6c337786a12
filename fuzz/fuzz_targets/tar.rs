//! The tar readers. The body is `spdl_fuzz_targets::arrays::tar`
//! (crates/spdl-fuzz-targets), which the gate's replay test also runs on every seed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_fuzz_targets::arrays;

fuzz_target!(|data: &[u8]| {
    arrays::tar(data);
});
