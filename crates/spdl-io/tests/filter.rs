//! FFmpeg filter graphs (`filter_desc`) on video and audio against the
//! `ffmpeg` command line given the same `-vf` / `-af` string, and bad filter
//! strings as named errors.
#![cfg(feature = "decode-ffmpeg")]

mod video_util;

use spdl_io::audio::load_audio;
use spdl_io::{load_video, AudioOptions, ErrorKind, FrameSelection, VideoOptions};
use video_util::{ffmpeg, ffmpeg_rgb, largest_diff, media};

const BBB: &str = "clips/bbb_320x180_bframes.mp4";
const ROT90: &str = "13-video-rotation-metadata/rot90.mp4";
const AUDIO: &str = "16-audio-odd-rates-channels";

/// `desc` after the display rotation, as the ffmpeg command line runs `-vf`.
fn with_filter(desc: &str) -> VideoOptions {
    VideoOptions {
        filter_desc: Some(desc.to_owned()),
        apply_rotation: true,
        ..Default::default()
    }
}

#[test]
fn video_filter_strings_give_the_ffmpeg_command_line_bytes() {
    let path = media(BBB);
    for desc in [
        // Scale with the command line's bicubic, flip, crop.
        "scale=96:54,hflip,crop=80:40:8:6,format=rgb24",
        // SPDL's get_video_filter_desc(scale_width=64, scale_height=64).
        "scale=w=64:h=64:flags=bicubic:force_original_aspect_ratio=decrease,pad=w=64:h=64:x=-1:y=-1:color=black,format=pix_fmts=rgb24",
        // Frame rate change: fewer frames, new timestamps.
        "fps=5,scale=40:24,format=rgb24",
        // Output left in yuv420p: converted to rgb24 at the graph's end, as
        // `-pix_fmt rgb24` does.
        "scale=64:36",
    ] {
        let v = load_video(&path, &with_filter(desc)).unwrap();
        let want = ffmpeg_rgb(&path, desc);
        assert_eq!(v.indices, None);
        assert_eq!(v.data.len(), want.len(), "{desc}: {:?}", v.shape);
        let diff = largest_diff(&v.data, &want);
        assert_eq!(diff, 0, "{desc}: bytes differ from ffmpeg -vf");
    }
    let v = load_video(&path, &with_filter("fps=5,scale=40:24,format=rgb24")).unwrap();
    assert_eq!(v.shape, [15, 24, 40, 3]);
    assert_eq!(v.pts[1], 0.2);
}

#[test]
fn video_filters_run_after_the_rotation_and_with_windows_and_steps() {
    // The command line turns the frame (autorotate) before -vf.
    let path = media(ROT90);
    let desc = "crop=iw/2:ih:0:0,format=rgb24";
    let v = load_video(&path, &with_filter(desc)).unwrap();
    assert_eq!(v.data, ffmpeg_rgb(&path, desc));
    assert_eq!(v.rotation_applied, v.info.rotation);

    let path = media(BBB);
    let all = load_video(&path, &with_filter("hflip,format=rgb24")).unwrap();
    let window = load_video(
        &path,
        &VideoOptions {
            selection: FrameSelection::Window {
                start: all.pts[30],
                end: all.pts[40],
            },
            ..with_filter("hflip,format=rgb24")
        },
    )
    .unwrap();
    assert_eq!(window.shape[0], 10);
    assert_eq!(
        window.data,
        all.data[30 * all.frame_len()..40 * all.frame_len()]
    );
    let step = load_video(
        &path,
        &VideoOptions {
            selection: FrameSelection::Step(10),
            ..with_filter("hflip,format=rgb24")
        },
    )
    .unwrap();
    assert_eq!(step.shape[0], 8);
    assert_eq!(step.frame(3), all.frame(30));
}

#[test]
fn audio_filter_strings_give_the_ffmpeg_command_line_samples() {
    for (file, desc) in [
        ("sine_44100Hz_stereo_LR.flac", "aresample=16000,volume=0.5"),
        // A downmix of 16-bit samples (normalized, unlike float ones).
        (
            "sine_44100Hz_stereo_LR.flac",
            "aformat=channel_layouts=1c,aresample=16000",
        ),
        ("sine440_22050Hz_mono.mp3", "atempo=1.5"),
        (
            "sine_48000Hz_5.1_s16.wav",
            "pan=stereo|c0=FL|c1=FR,atrim=end_sample=4000",
        ),
        ("sine440_11025Hz_mono_s16.wav", "highpass=f=200"),
    ] {
        let path = media(&format!("{AUDIO}/{file}"));
        let a = load_audio(
            &path,
            &AudioOptions {
                filter_desc: Some(desc.to_owned()),
                ..Default::default()
            },
        )
        .unwrap();
        let raw = ffmpeg(
            &path,
            &[
                "-af",
                &format!("{desc},aformat=sample_fmts=flt"),
                "-f",
                "f32le",
            ],
        );
        let want: Vec<f32> = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        // ffmpeg's output is interleaved [S, C]; ours is [C, S].
        assert_eq!(a.channels * a.samples, want.len(), "{file}: {desc}");
        let mut diff = 0.0f32;
        for s in 0..a.samples {
            for c in 0..a.channels {
                let ours = a.data[c * a.samples + s];
                diff = diff.max((ours - want[s * a.channels + c]).abs());
            }
        }
        assert!(diff <= 1e-4, "{file}: {desc}: differs by {diff}");
    }
}

#[test]
fn audio_filters_see_the_window_cut_at_sample_precision() {
    // Packed s16 (WAV, 6 channels) and planar float (MP3): the window cuts
    // decoded frames in their own format before the graph.
    for file in ["sine_48000Hz_5.1_s16.wav", "sine440_22050Hz_mono.mp3"] {
        let path = media(&format!("{AUDIO}/{file}"));
        let window = Some((0.0123, 0.2345));
        let plain = load_audio(
            &path,
            &AudioOptions {
                window,
                ..Default::default()
            },
        )
        .unwrap();
        let halved = load_audio(
            &path,
            &AudioOptions {
                window,
                filter_desc: Some("aformat=sample_fmts=flt,volume=0.5".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            (halved.channels, halved.samples),
            (plain.channels, plain.samples),
            "{file}"
        );
        assert!(plain.data.iter().any(|v| v.abs() > 0.1), "{file}");
        for (h, p) in halved.data.iter().zip(&plain.data) {
            assert!((h - p * 0.5).abs() <= 1e-6, "{file}: {h} vs {p} / 2");
        }
    }
}

#[test]
fn video_filter_graphs_run_on_the_decoder_threads() {
    // One thread (the default), two, and FFmpeg's pick give the same frames.
    let video = media(BBB);
    let desc = "scale=96:54,hflip";
    let one = load_video(&video, &with_filter(desc)).unwrap();
    assert_eq!(one.shape[1..], [54, 96, 3]);
    for threads in [2, 0] {
        let opts = VideoOptions {
            threads,
            ..with_filter(desc)
        };
        let many = load_video(&video, &opts).unwrap();
        assert_eq!(many.shape, one.shape, "threads={threads}");
        assert!(many.data == one.data, "threads={threads}: other pixels");
    }
}

#[test]
fn bad_filter_strings_are_named_errors() {
    let video = media(BBB);
    let audio = media(&format!("{AUDIO}/sine440_11025Hz_mono_s16.wav"));
    for desc in [
        "notafilter",
        "scale=w=abc",
        "[in]null[",
        "crop=9999:9999",
        "nul\0l",
        // swscale cannot configure this scale (found by the `filter_desc` fuzz target; FFmpeg
        // 5.1 leaks a scaler on it when the graph is threaded, see fixtures/fuzz/README.md).
        "scale=3:6632",
    ] {
        let err = load_video(&video, &with_filter(desc)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{desc:?}: {err}");
        assert!(err.to_string().contains("filter"), "{err}");
        assert!(err.to_string().contains("bbb_320x180"), "{err}");
    }
    // A video filter on audio is a bad description too.
    for (desc, named) in [("notafilter", true), ("hflip", false)] {
        let opts = AudioOptions {
            filter_desc: Some(desc.into()),
            ..Default::default()
        };
        let err = load_audio(&audio, &opts).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        if named {
            assert!(
                err.to_string().contains("invalid filter description"),
                "{err}"
            );
        }
    }
    // Selections a filter cannot follow are refused, not ignored.
    let err = load_video(
        &video,
        &VideoOptions {
            selection: FrameSelection::Indices(vec![1]),
            ..with_filter("null")
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

#[test]
fn ffmpeg_utilities_report_versions_filters_and_log_level() {
    let versions = spdl_io::ffmpeg_library_versions();
    let names: Vec<&str> = versions.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "libavcodec",
            "libavfilter",
            "libavformat",
            "libavutil",
            "libswresample",
            "libswscale"
        ]
    );
    // FFmpeg 4.4 or later (libavcodec 58.134).
    let (major, minor, _) = versions[0].1;
    assert!((major, minor) >= (58, 134), "{versions:?}");
    assert!(spdl_io::ffmpeg_versions().contains(&format!("libavcodec {major}.{minor}.")));

    let filters = spdl_io::ffmpeg_filters();
    for f in [
        "scale",
        "format",
        "fps",
        "aresample",
        "aformat",
        "tpad",
        "buffer",
        "abuffersink",
    ] {
        assert!(
            filters.iter().any(|n| n == f),
            "no {f} in {} filters",
            filters.len()
        );
    }

    assert_eq!(spdl_io::ffmpeg_log_level(), 16);
    spdl_io::set_ffmpeg_log_level(24);
    assert_eq!(spdl_io::ffmpeg_log_level(), 24);
    spdl_io::set_ffmpeg_log_level(16);
}
