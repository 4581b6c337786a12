//! The public types of the media API (audio and video through FFmpeg) can be sent to and
//! shared between threads: checked at compile time, in one list.
#![cfg(feature = "decode-ffmpeg")]

use spdl_io::{AudioOptions, MediaSource, VideoOptions};

#[test]
fn public_types_are_send_and_sync() {
    fn check<T: Send + Sync + 'static>() {}
    check::<spdl_io::Audio>();
    check::<AudioOptions>();
    check::<spdl_io::audio::AudioInfo>();
    check::<spdl_io::Video>();
    check::<VideoOptions>();
    check::<spdl_io::video::VideoClips>();
    check::<spdl_io::video::VideoInfo>();
    fn check_src<'a, T: Send + Sync + 'a>() {}
    check_src::<MediaSource<'_>>();
}
