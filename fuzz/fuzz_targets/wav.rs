//! The WAV parser. The body is `spdl_fuzz_targets::arrays::wav`
//! (crates/spdl-fuzz-targets), which the gate's replay test also runs on every seed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_fuzz_targets::arrays;

fuzz_target!(|data: &[u8]| {
    arrays::wav(data);
});
