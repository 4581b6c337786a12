//! SPDL 0.8.0's packet selection through the Rust API: which packets a time
//! window takes (decode order from the key frame before `start` to the first
//! packet shown at `end`, video with a 0.3 s margin; bounds compared as
//! fractions), what `timestamps` / `num_in_window` count, sample decoding by
//! key-frame runs, and zero-copy deserialization. The expected values are
//! SPDL 0.8.0's on the same clip.
#![cfg(feature = "decode-ffmpeg")]

mod video_util;

use spdl_io::ffmpeg::decoder::{decode_packets, sample_decode_video};
use spdl_io::ffmpeg::frames::{Frames, MediaKind};
use spdl_io::ffmpeg::packets::Packets;
use spdl_io::ffmpeg::DecodeConfig;
use video_util::{demux_window, media};

/// 75 frames at 25 fps with B-frames (decode order differs from display order).
const BBB: &str = "clips/bbb_320x180_bframes.mp4";
const RGB: Option<&str> = Some("format=pix_fmts=rgb24");

fn window(w: Option<(f64, f64)>) -> Packets {
    demux_window(&media(BBB), MediaKind::Video, w).unwrap()
}

fn pixels(f: &Frames) -> Vec<u8> {
    f.to_array().unwrap().data
}

fn rounded(ts: Vec<f64>) -> Vec<f64> {
    ts.into_iter()
        .map(|t| (t * 100.0).round() / 100.0)
        .collect()
}

#[test]
fn a_window_takes_spdls_packets_and_decodes_to_its_frames() {
    let p = window(Some((0.3, 1.1)));
    // From the key frame at 0 (references), up to the packet shown at exactly
    // 1.1 + 0.3 = 1.4, which ends the selection (SPDL compares fractions).
    let raw = rounded(p.timestamps(true));
    assert_eq!(raw.len(), 32);
    assert_eq!((raw[0], raw[30], raw[31]), (0.0, 1.24, 1.2));
    let inside = rounded(p.timestamps(false));
    assert_eq!(inside.len(), 20);
    assert_eq!((inside[0], inside[19]), (0.32, 1.08));
    assert_eq!(p.num_in_window(), 20);
    let cfg = DecodeConfig::default();
    let part = decode_packets(&p, RGB, &cfg, None).unwrap();
    let full = decode_packets(&window(None), RGB, &cfg, None).unwrap();
    let frame = full.to_array().unwrap().data.len() / 75;
    assert_eq!(pixels(&part), pixels(&full)[8 * frame..28 * frame]);
}

#[test]
fn an_empty_window_is_valid_and_a_reversed_one_is_not() {
    let p = window(Some((1.2, 1.2)));
    assert_eq!((p.num_in_window(), p.timestamps(true).len()), (0, 11));
    assert_eq!(
        decode_packets(&p, RGB, &DecodeConfig::default(), None)
            .unwrap()
            .len(),
        0
    );
    let e = demux_window(&media(BBB), MediaKind::Video, Some((1.0, 0.5))).unwrap_err();
    assert!(e.to_string().contains("reversed"), "{e}");
}

#[test]
fn sample_decoding_picks_the_frames_of_the_window() {
    let cfg = DecodeConfig::default();
    let full = decode_packets(&window(None), RGB, &cfg, None).unwrap();
    let frame = full.to_array().unwrap().data.len() / 75;
    let all = pixels(&full);
    let p = window(Some((0.3, 1.1)));
    let picked = sample_decode_video(&p, &[19, 0, 7, 0], RGB, &cfg).unwrap();
    for (f, i) in picked.iter().zip([19usize, 0, 7, 0]) {
        assert_eq!(
            pixels(f),
            all[(8 + i) * frame..(9 + i) * frame],
            "index {i}"
        );
    }
    assert!(sample_decode_video(&p, &[20], RGB, &cfg).is_err());
}

#[test]
fn view_packets_decode_like_the_originals() {
    let p = window(Some((0.3, 1.1)));
    let bytes = p.serialize();
    let view = Packets::deserialize_view(Box::new(bytes)).unwrap();
    assert_eq!(view.timestamps(true), p.timestamps(true));
    assert_eq!(view.timestamp(), Some((0.3, 1.1)));
    let cfg = DecodeConfig::default();
    let want = pixels(&decode_packets(&p, RGB, &cfg, None).unwrap());
    assert_eq!(
        pixels(&decode_packets(&view, RGB, &cfg, None).unwrap()),
        want
    );
    // A clone owns its data.
    let copy = view.clone();
    drop(view);
    assert_eq!(
        pixels(&decode_packets(&copy, RGB, &cfg, None).unwrap()),
        want
    );
}
