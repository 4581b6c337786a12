//! FFmpeg filter descriptions (`VideoOptions::filter_desc`): any string through libavfilter
//! on a small real clip is frames or a named error, never a crash or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_io::video::{load_video, FrameSelection, VideoOptions};

/// 320x180 H.264 with B-frames (Big Buck Bunny, CC-BY 3.0; see the fixture's SOURCES.md).
const CLIP: &[u8] =
    include_bytes!("../../crates/spdl-io/tests/fixtures/media/clips/bbb_320x180_bframes.mp4");

fuzz_target!(|data: &[u8]| {
    let Ok(desc) = std::str::from_utf8(data) else {
        return;
    };
    let opts = VideoOptions {
        selection: FrameSelection::Window {
            start: 0.0,
            end: 0.2,
        },
        filter_desc: Some(desc.to_owned()),
        max_output_bytes: 64 << 20,
        ..VideoOptions::default()
    };
    let _ = load_video(CLIP, &opts);
});
