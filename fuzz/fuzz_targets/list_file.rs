//! The list-file and manifest parsers of spdl-sources. The body is `spdl_fuzz_targets::sources::list_file`
//! (crates/spdl-fuzz-targets), which the gate's replay test also runs on every seed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_fuzz_targets::sources;

fuzz_target!(|data: &[u8]| {
    sources::list_file(data);
});
