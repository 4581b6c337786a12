//! The FFmpeg targets (feature `decode-ffmpeg`): demux and decode over bytes in memory, and
//! filter descriptions.

use spdl_io::audio::{load_audio, AudioOptions};
use spdl_io::video::{load_video, probe_video, FrameSelection, VideoOptions};
use spdl_io::MediaSource;

/// 320x180 H.264 with B-frames (Big Buck Bunny, CC-BY 3.0; see the fixture's SOURCES.md).
const CLIP: &[u8] =
    include_bytes!("../../spdl-io/tests/fixtures/media/clips/bbb_320x180_bframes.mp4");

/// `ffmpeg`: probe, video frames (all, scaled, by index), audio samples (native and
/// resampled). Accepted: the video probe or the audio load succeeded.
pub fn ffmpeg(data: &[u8]) -> bool {
    let src = || MediaSource::bytes("fuzz", data);
    let small = VideoOptions {
        max_output_bytes: 64 << 20,
        ..VideoOptions::default()
    };
    let probed = probe_video(src()).is_ok();
    if probed {
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
    let loaded = load_audio(src(), &audio).is_ok();
    let resampled = AudioOptions {
        sample_rate: Some(8000),
        channels: Some(1),
        ..audio
    };
    let _ = load_audio(src(), &resampled);
    probed || loaded
}

/// `filter_desc`: any UTF-8 string as `VideoOptions::filter_desc` over the first 0.2 s of a
/// small real clip is frames or a named error, never a crash or a hang. Accepted: frames.
pub fn filter_desc(data: &[u8]) -> bool {
    let Ok(desc) = std::str::from_utf8(data) else {
        return false;
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
    load_video(CLIP, &opts).is_ok()
}
