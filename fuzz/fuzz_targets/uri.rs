//! The URI parser of spdl-sources. The body is `spdl_fuzz_targets::sources::uri`
//! (crates/spdl-fuzz-targets), which the gate's replay test also runs on every seed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_fuzz_targets::sources;

fuzz_target!(|data: &[u8]| {
    sources::uri(data);
});
