//! FFmpeg demux and decode over bytes in memory (feature `decode-ffmpeg`): probe, video frames
//! (all, scaled, by index), audio samples (native and resampled). Seeds: every video and audio
//! fixture.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_io::audio::{load_audio, AudioOptions};
use spdl_io::video::{load_video, probe_video, FrameSelection, VideoOptions};
use spdl_io::MediaSource;

fuzz_target!(|data: &[u8]| {
    let src = || MediaSource::bytes("fuzz", data);
    let small = VideoOptions {
        max_output_bytes: 64 << 20,
        ..VideoOptions::default()
    };
    if probe_video(src()).is_ok() {
        if let Ok(video) = load_video(src(), &small) {
            assert_eq!(video.data.len(), video.frame_len() * video.shape[0]);
            assert_eq!(video.pts.len(), video.shape[0]);
        }
        let scaled = VideoOptions {
            width: Some(17),
            height: Some(9),
            selection: FrameSelection::Indices(vec![0, 2, 1]),
            ..small.clone()
        };
        let _ = load_video(src(), &scaled);
    }
    let audio = AudioOptions {
        max_samples: 1 << 22,
        ..AudioOptions::default()
    };
    let _ = load_audio(src(), &audio);
    let resampled = AudioOptions {
        sample_rate: Some(8000),
        channels: Some(1),
        ..audio
    };
    let _ = load_audio(src(), &resampled);
});
