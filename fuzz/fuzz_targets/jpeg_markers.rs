//! The JPEG marker walker both JPEG backends share (`decode/jpeg_markers.rs`): header, size
//! plausibility, completeness. Seeds: every JPEG fixture.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    spdl_io::decode::fuzzing::jpeg_markers(data);
});
