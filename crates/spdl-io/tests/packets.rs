//! Demux then decode in two steps (`demux_video` / `decode_packets`) equals
//! the one-shot `load_video`, whole or for a time window, on another thread,
//! with a filter graph; bad inputs are named errors.
#![cfg(feature = "decode-ffmpeg")]

mod video_util;

use spdl_io::video::{decode_packets, demux_video};
use spdl_io::{load_video, ErrorKind, FrameSelection, MediaSource, VideoOptions};
use video_util::{media, read};

const BBB: &str = "clips/bbb_320x180_bframes.mp4";
const ROT90: &str = "13-video-rotation-metadata/rot90.mp4";

#[test]
fn demux_then_decode_equals_load_video() {
    let path = media(BBB);
    let all = load_video(&path, &VideoOptions::default()).unwrap();
    let packets = demux_video(&path, None).unwrap();
    assert_eq!(packets.len(), 75);
    assert_eq!(packets.timestamp(), None);
    let mut ts = packets.timestamps();
    ts.sort_by(f64::total_cmp);
    assert_eq!(ts, all.pts);
    let v = decode_packets(&packets, &VideoOptions::default(), None).unwrap();
    assert_eq!(v.shape, all.shape);
    assert_eq!(v.pts, all.pts);
    assert!(v.data == all.data, "frames differ from load_video");

    // The first frames only.
    let first = decode_packets(&packets, &VideoOptions::default(), Some(5)).unwrap();
    assert_eq!(first.shape[0], 5);
    assert!(first.data[..] == all.data[..5 * all.frame_len()]);

    // A window: only the packets it needs, the same frames as load_video's.
    let window = (all.pts[30], all.pts[55]);
    let part = demux_video(&path, Some(window)).unwrap();
    assert!(part.len() < 75 && part.len() >= 25, "{}", part.len());
    assert_eq!(part.timestamp(), Some(window));
    let v = decode_packets(&part, &VideoOptions::default(), None).unwrap();
    assert_eq!(v.pts, all.pts[30..55]);
    assert!(v.data[..] == all.data[30 * all.frame_len()..55 * all.frame_len()]);

    // Packets go to other threads and decode there, as often as needed.
    let shared = &packets;
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|t| {
                s.spawn(move || {
                    let copy = shared.clone();
                    let opts = VideoOptions {
                        threads: t,
                        ..Default::default()
                    };
                    decode_packets(&copy, &opts, None).unwrap()
                })
            })
            .collect();
        for h in hs {
            assert!(h.join().unwrap().data == all.data);
        }
    });
}

#[test]
fn decode_packets_applies_size_rotation_and_filters_as_load_video() {
    for (clip, opts) in [
        (
            ROT90,
            VideoOptions {
                width: Some(16),
                ..Default::default()
            },
        ),
        (
            BBB,
            VideoOptions {
                filter_desc: Some("fps=5,scale=64:36,hflip".into()),
                ..Default::default()
            },
        ),
        (
            ROT90,
            VideoOptions {
                filter_desc: Some("crop=iw/2:ih:0:0".into()),
                ..Default::default()
            },
        ),
    ] {
        let bytes = read(&media(clip));
        let src = || MediaSource::bytes(clip, &bytes);
        let want = load_video(src(), &opts).unwrap();
        let got = decode_packets(&demux_video(src(), None).unwrap(), &opts, None).unwrap();
        assert_eq!(got.shape, want.shape, "{clip}");
        assert_eq!(got.pts, want.pts, "{clip}");
        assert!(got.data == want.data, "{clip}: frames differ");
        assert_eq!(got.rotation_applied, want.rotation_applied);
    }
}

#[test]
fn bad_inputs_and_arguments_are_named_errors() {
    let err = demux_video(MediaSource::bytes("junk.mp4", b"not a video at all"), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnknownFormat, "{err}");
    assert!(err.to_string().contains("junk.mp4"), "{err}");
    let path = media(BBB);
    let err = demux_video(&path, Some((2.0, 1.0))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let packets = demux_video(&path, None).unwrap();
    let err = decode_packets(
        &packets,
        &VideoOptions {
            selection: FrameSelection::Step(2),
            ..Default::default()
        },
        None,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("bbb_320x180"), "{err}");
    let err = decode_packets(
        &packets,
        &VideoOptions {
            filter_desc: Some("nope".into()),
            ..Default::default()
        },
        None,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

#[test]
fn decode_packets_uses_the_decode_config() {
    let packets = demux_video(&media(BBB), None).unwrap();
    let named = |decoder: &str| VideoOptions {
        decode: spdl_io::ffmpeg::DecodeConfig {
            decoder: Some(decoder.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    // The stream's own decoder by name gives the default decoder's frames.
    let by_name = decode_packets(&packets, &named("h264"), Some(3)).unwrap();
    let default = decode_packets(&packets, &VideoOptions::default(), Some(3)).unwrap();
    assert!(by_name.data == default.data);
    let e = decode_packets(&packets, &named("no_such_decoder"), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string()
            .contains("no decoder named \"no_such_decoder\""),
        "{e}"
    );
}
