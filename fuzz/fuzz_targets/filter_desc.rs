//! FFmpeg filter descriptions (feature `decode-ffmpeg`). The body is `spdl_fuzz_targets::media::filter_desc`
//! (crates/spdl-fuzz-targets), which the gate's replay test also runs on every seed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_fuzz_targets::media;

fuzz_target!(|data: &[u8]| {
    media::filter_desc(data);
});
