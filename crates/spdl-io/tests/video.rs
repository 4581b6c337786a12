//! Video through FFmpeg: hard cases 13 (rotation) and 14 (variable frame
//! rate), real clips against ffmpeg command-line references, frame-accurate
//! random access on B-frame clips, clip sampling, bad inputs, threads.
#![cfg(feature = "decode-ffmpeg")]

mod video_util;

use std::time::{Duration, Instant};

use spdl_io::video::{
    frame_timestamps, load_video_clips, probe_video, ClipSampling, PixelFormat, ScaleFilter,
};
use spdl_io::{load_video, load_video_clip, ErrorKind, FrameSelection, MediaSource, VideoOptions};
use video_util::{max_diff, media, npy, read};

const ROT: &str = "13-video-rotation-metadata";
const VFR: &str = "14-video-vfr-frame-count";
const BBB: &str = "clips/bbb_320x180_bframes.mp4";
const VTEST: &str = "clips/vtest_384x288_msmpeg4.avi";

fn opts(selection: FrameSelection) -> VideoOptions {
    VideoOptions {
        selection,
        ..Default::default()
    }
}

/// `selection` decoded on `threads` threads.
fn threaded(selection: FrameSelection, threads: usize) -> VideoOptions {
    VideoOptions {
        threads,
        ..opts(selection)
    }
}

fn pixel(v: &spdl_io::Video, t: usize, x: usize, y: usize) -> [u8; 3] {
    let [_, _, w, c] = v.shape;
    let f = v.frame(t).unwrap();
    let i = (y * w + x) * c;
    [f[i], f[i + 1], f[i + 2]]
}

fn close(a: [u8; 3], b: [u8; 3], tol: i32) -> bool {
    a.iter()
        .zip(b)
        .all(|(&x, y)| (i32::from(x) - i32::from(y)).abs() <= tol)
}

// ---------------------------------------------------------------- case 13

#[test]
fn rotation_is_reported_always_and_applied_when_asked() {
    const R: [u8; 3] = [253, 0, 0];
    const G: [u8; 3] = [0, 255, 0];
    const B: [u8; 3] = [0, 0, 254];
    const W: [u8; 3] = [255, 255, 255];
    // file, rotation, [H, W], TL TR BL BR centres (EXPECTED.md).
    let cases = [
        ("rot0", 0, [32, 64], [R, G, B, W]),
        ("rot90", 90, [64, 32], [G, W, R, B]),
        ("rot180", 180, [32, 64], [W, B, G, R]),
        ("rot270", 270, [64, 32], [B, R, W, G]),
    ];
    for (name, rotation, [h, w], quads) in cases {
        let path = media(&format!("{ROT}/{name}.mp4"));
        let info = probe_video(&path).unwrap();
        assert_eq!(info.rotation, rotation, "{name}");
        assert_eq!((info.coded_width, info.coded_height), (64, 32), "{name}");

        let turned = VideoOptions {
            apply_rotation: true,
            ..Default::default()
        };
        let v = load_video(&path, &turned).unwrap();
        assert_eq!(v.shape, [10, h, w, 3], "{name}");
        assert_eq!(v.rotation_applied, rotation, "{name}");
        assert_eq!(v.frames_decoded, Some(10), "{name}");
        let centres = [
            (w / 4, h / 4),
            (3 * w / 4, h / 4),
            (w / 4, 3 * h / 4),
            (3 * w / 4, 3 * h / 4),
        ];
        for (q, (x, y)) in centres.into_iter().enumerate() {
            let got = pixel(&v, 0, x, y);
            assert!(
                close(got, quads[q], 12),
                "{name} quadrant {q}: {got:?} vs {:?}",
                quads[q]
            );
        }
        let r = npy(&media(&format!("{ROT}/ref/{name}_frame0_autorotated.npy")));
        assert_eq!(r.shape, vec![h, w, 3]);
        let d = max_diff(v.frame(0).unwrap().iter().map(|&b| f64::from(b)), r.data);
        assert!(
            d <= 12.0,
            "{name}: frame 0 differs from the reference by {d}"
        );

        // Not applied (the default, as SPDL 0.8): raw frames, rotation
        // still reported (case 13's other accepted outcome).
        let raw = load_video(&path, &VideoOptions::default()).unwrap();
        assert_eq!(raw.shape, [10, 32, 64, 3], "{name}");
        assert_eq!(raw.rotation_applied, 0);
        assert_eq!(raw.info.rotation, rotation);
        assert!(close(pixel(&raw, 0, 16, 8), R, 12), "{name} raw TL");
    }
}

#[test]
fn rotation_with_resize_targets_the_displayed_size() {
    let v = load_video(
        &media(&format!("{ROT}/rot90.mp4")),
        &VideoOptions {
            width: Some(16),
            height: Some(40),
            selection: FrameSelection::Indices(vec![0]),
            filter: ScaleFilter::Bilinear,
            apply_rotation: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(v.shape, [1, 40, 16, 3]);
    // TL of the displayed picture is green (TR of the coded one).
    assert!(close(pixel(&v, 0, 4, 8), [0, 255, 0], 16));
    // One side given: the other follows the displayed aspect (32x64 -> 16x32).
    let v = load_video(
        &media(&format!("{ROT}/rot90.mp4")),
        &VideoOptions {
            width: Some(16),
            selection: FrameSelection::Indices(vec![0]),
            apply_rotation: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(v.shape, [1, 32, 16, 3]);
}

// ---------------------------------------------------------------- case 14

const VFR_PTS: [f64; 12] = [
    0.0, 0.033, 0.067, 0.267, 0.300, 0.800, 0.833, 0.933, 0.967, 1.000, 1.300, 1.333,
];
const VFR_MEANS: [f64; 12] = [
    19.0, 38.0, 55.0, 74.0, 91.0, 109.0, 128.0, 145.0, 164.0, 181.0, 200.0, 217.0,
];

fn mean(frame: &[u8]) -> f64 {
    frame.iter().map(|&b| f64::from(b)).sum::<f64>() / frame.len() as f64
}

#[test]
fn vfr_decodes_exactly_its_twelve_frames_with_exact_timestamps() {
    let path = media(&format!("{VFR}/vfr_12frames.mp4"));
    let v = load_video(&path, &VideoOptions::default()).unwrap();
    assert_eq!(v.shape, [12, 24, 32, 3]);
    assert_eq!(v.frames_decoded, Some(12));
    assert_eq!(v.indices.as_deref(), Some(&(0..12).collect::<Vec<_>>()[..]));
    for t in 0..12 {
        let m = mean(v.frame(t).unwrap());
        assert!((m - VFR_MEANS[t]).abs() <= 3.0, "frame {t} mean {m}");
        assert!(
            (v.pts[t] - VFR_PTS[t]).abs() <= 0.001,
            "frame {t} pts {}",
            v.pts[t]
        );
    }
    let r = npy(&media(&format!("{VFR}/ref/frames_rgb.npy")));
    assert_eq!(r.shape, vec![12, 24, 32, 3]);
    let d = max_diff(v.data.iter().map(|&b| f64::from(b)), r.data);
    assert!(d <= 3.0, "frames differ from the reference by {d}");
    // The header's estimates are labelled as such.
    assert_eq!(v.info.frames_estimate, Some(12));
    assert_eq!(frame_timestamps(&path, 1).unwrap().len(), 12);
}

#[test]
fn vfr_index_past_the_end_is_an_error_at_once() {
    let path = media(&format!("{VFR}/vfr_12frames.mp4"));
    for bad in [vec![12], vec![3, 12, 0], vec![1000]] {
        let t = Instant::now();
        let err = load_video(&path, &opts(FrameSelection::Indices(bad.clone()))).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(2));
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        let msg = err.to_string();
        assert!(msg.contains("vfr_12frames.mp4"), "{msg}");
        assert!(
            msg.contains("out of range") && msg.contains("12 frames"),
            "{msg}"
        );
    }
}

#[test]
fn vfr_time_selection_and_any_order_indices() {
    let path = media(&format!("{VFR}/vfr_12frames.mp4"));
    // The frame on screen at 0.50 s is frame 4 (pts 0.300, next 0.800).
    let v = load_video(&path, &opts(FrameSelection::PlayedAt(vec![0.5]))).unwrap();
    assert_eq!(v.shape[0], 1);
    assert!((mean(v.frame(0).unwrap()) - 91.0).abs() <= 3.0);
    assert_eq!(v.indices, Some(vec![4]));
    // Several times, unsorted; exact pts hits; the last frame until its end.
    let v = load_video(
        &path,
        &opts(FrameSelection::PlayedAt(vec![1.34, 0.0, 0.299, 0.3, 0.5])),
    )
    .unwrap();
    assert_eq!(v.indices, Some(vec![11, 0, 3, 4, 4]));
    let err = load_video(&path, &opts(FrameSelection::PlayedAt(vec![5.0]))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);

    // Indices in any order, repeated.
    let v = load_video(&path, &opts(FrameSelection::Indices(vec![5, 0, 5, 11, 2]))).unwrap();
    assert_eq!(v.shape, [5, 24, 32, 3]);
    for (slot, idx) in [5usize, 0, 5, 11, 2].into_iter().enumerate() {
        assert!((mean(v.frame(slot).unwrap()) - VFR_MEANS[idx]).abs() <= 3.0);
        assert!((v.pts[slot] - VFR_PTS[idx]).abs() <= 0.001);
    }
    assert_eq!(v.frame(0), v.frame(2));

    // Every 3rd frame.
    let v = load_video(&path, &opts(FrameSelection::Step(3))).unwrap();
    assert_eq!(v.indices, Some(vec![0, 3, 6, 9]));

    // Window [0.25, 0.9): pts 0.267, 0.300, 0.800, 0.833.
    let v = load_video(
        &path,
        &opts(FrameSelection::Window {
            start: 0.25,
            end: 0.9,
        }),
    )
    .unwrap();
    assert_eq!(v.shape[0], 4);
    for (got, want) in v.pts.iter().zip([0.267, 0.300, 0.800, 0.833]) {
        assert!((got - want).abs() <= 0.001, "{:?}", v.pts);
    }
}

// ---------------------------------------------------------------- real clips

/// ffmpeg's reference: per frame, pts and 4x4 grid means of R, G, B.
fn grid_ref(rel: &str) -> Vec<(f64, Vec<f64>)> {
    let text = String::from_utf8(read(&media(rel))).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let v: Vec<f64> = l.split_whitespace().map(|s| s.parse().unwrap()).collect();
            (v[0], v[1..].to_vec())
        })
        .collect()
}

fn grid_means(v: &spdl_io::Video, t: usize) -> Vec<f64> {
    let [_, h, w, _] = v.shape;
    let f = v.frame(t).unwrap();
    let mut out = Vec::new();
    for gy in 0..4 {
        for gx in 0..4 {
            let mut s = [0f64; 3];
            let mut n = 0f64;
            for y in gy * h / 4..(gy + 1) * h / 4 {
                for x in gx * w / 4..(gx + 1) * w / 4 {
                    for (c, sc) in s.iter_mut().enumerate() {
                        *sc += f64::from(f[(y * w + x) * 3 + c]);
                    }
                    n += 1.0;
                }
            }
            out.extend(s.iter().map(|v| v / n));
        }
    }
    out
}

#[test]
fn real_clips_match_the_ffmpeg_command_line() {
    for (clip, frames, (w, h), codec) in [
        (BBB, 75, (320, 180), "h264"),
        (VTEST, 20, (384, 288), "msmpeg4"),
    ] {
        let reference = grid_ref(&format!("{clip}.ref.txt"));
        assert_eq!(reference.len(), frames);
        let v = load_video(&media(clip), &VideoOptions::default()).unwrap();
        assert!(v.info.codec.starts_with(codec), "{}", v.info.codec);
        assert_eq!(v.shape, [frames, h, w, 3], "{clip}");
        for (t, (pts, grid)) in reference.iter().enumerate() {
            assert!(
                (v.pts[t] - pts).abs() < 1e-6,
                "{clip} frame {t}: pts {} vs {pts}",
                v.pts[t]
            );
            let d = max_diff(grid_means(&v, t), grid.iter().copied());
            assert!(d <= 1.0, "{clip} frame {t}: grid means differ by {d}");
        }
    }
}

#[test]
fn random_access_on_b_frames_equals_sequential_decode_every_run() {
    let bytes = read(&media(BBB));
    let src = || MediaSource::bytes("bbb.mp4", &bytes);
    let all = load_video(src(), &VideoOptions::default()).unwrap();
    assert_eq!(all.shape[0], 75);
    // Out of order, repeated, across GOP boundaries (key frames at 0, 25, 50)
    // and B-frames (the 3rd..5th frames are B).
    let picks = vec![74, 2, 26, 3, 49, 50, 2, 0, 61, 25, 24];
    for threads in [1, 2, 0] {
        for _run in 0..3 {
            let v = load_video(
                src(),
                &threaded(FrameSelection::Indices(picks.clone()), threads),
            )
            .unwrap();
            for (slot, &i) in picks.iter().enumerate() {
                assert_eq!(v.frame(slot), all.frame(i), "threads {threads}, frame {i}");
                assert_eq!(v.pts[slot], all.pts[i]);
            }
        }
    }
    // A window that needs a seek past the first GOP returns the same frames.
    let (start, end) = (all.pts[30], all.pts[55]);
    for threads in [1, 2] {
        let w = load_video(
            src(),
            &threaded(FrameSelection::Window { start, end }, threads),
        )
        .unwrap();
        assert_eq!(w.shape[0], 25);
        assert_eq!(w.indices, None);
        for k in 0..25 {
            assert_eq!(w.pts[k], all.pts[30 + k]);
            assert_eq!(w.frame(k), all.frame(30 + k), "window frame {k}");
        }
    }
}

/// Makes a `seconds`-long 25 fps 160x90 H.264 clip with B-frames and a key
/// frame every `gop` frames with the `ffmpeg` command line (installed by
/// `cargo xtask setup`), in `dir` as `name`; `extra` goes before the output.
fn make_long_clip(
    dir: &std::path::Path,
    name: &str,
    seconds: u32,
    gop: u32,
    extra: &[&str],
) -> std::path::PathBuf {
    let out = dir.join(name);
    let src = format!("testsrc2=size=160x90:rate=25:duration={seconds}");
    let gop = gop.to_string();
    let status = std::process::Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", &src])
        .args(["-c:v", "libx264", "-preset", "veryfast", "-bf", "2"])
        .args(["-g", &gop, "-keyint_min", &gop, "-pix_fmt", "yuv420p"])
        .args(extra)
        .arg(&out)
        .status()
        .expect("the ffmpeg command line (cargo xtask setup installs it)");
    assert!(status.success(), "ffmpeg failed making {name}");
    out
}

#[test]
fn far_indices_and_steps_seek_and_equal_sequential_decode() {
    let dir = tempfile::tempdir().unwrap();
    // 1500 frames; MP4 (seeks by dts), Matroska (by pts) and an open-GOP
    // stream (leading B-frames reference the previous GOP).
    let clips = [
        make_long_clip(dir.path(), "long.mp4", 60, 50, &[]),
        make_long_clip(dir.path(), "long.mkv", 60, 50, &[]),
        make_long_clip(
            dir.path(),
            "open_gop.mp4",
            60,
            50,
            &["-x264-params", "open-gop=1:scenecut=0"],
        ),
    ];
    for path in &clips {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = read(path);
        let src = || MediaSource::bytes(&name, &bytes);
        let all = load_video(src(), &VideoOptions::default()).unwrap();
        assert_eq!(all.shape[0], 1500, "{name}");
        // Near the end, around key frames (every 50), out of order, repeated,
        // then back near the start.
        let far = vec![1499, 1450, 1449, 1451, 1000, 3, 1499, 50, 49, 748, 0, 1200];
        // Near the start only: the packets are listed no further than needed.
        let near = vec![51, 3, 0, 49, 50, 2];
        for (threads, picks) in [(1, &far), (2, &far), (1, &near), (2, &near)] {
            let v = load_video(
                src(),
                &threaded(FrameSelection::Indices(picks.clone()), threads),
            )
            .unwrap();
            assert_eq!(v.shape[0], picks.len());
            assert_eq!(v.indices.as_deref(), Some(&picks[..]));
            let picks = picks.clone();
            for (slot, &i) in picks.iter().enumerate() {
                assert!(
                    v.frame(slot) == all.frame(i),
                    "{name}: threads {threads}, frame {i} differs from the sequential decode"
                );
                assert_eq!(v.pts[slot], all.pts[i], "{name}: frame {i}");
            }
            // One frame at the very end alone.
            let last = load_video(
                src(),
                &threaded(FrameSelection::Indices(vec![1499]), threads),
            )
            .unwrap();
            assert!(last.frame(0) == all.frame(1499), "{name}: last frame");
        }
        // Steps longer than a GOP seek between the wanted frames; shorter
        // ones decode through.
        for k in [3usize, 49, 50, 51, 333] {
            let v = load_video(src(), &opts(FrameSelection::Step(k))).unwrap();
            let want: Vec<usize> = (0..1500).step_by(k).collect();
            assert_eq!(v.indices.as_deref(), Some(&want[..]), "{name}: step {k}");
            for (slot, &i) in want.iter().enumerate() {
                assert!(v.frame(slot) == all.frame(i), "{name}: step {k}, frame {i}");
                assert_eq!(v.pts[slot], all.pts[i]);
            }
        }
        // Past the end is still the counted error.
        let err = load_video(src(), &opts(FrameSelection::Indices(vec![5, 1500]))).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("1500 frames"), "{err}");
    }
}

#[test]
fn resize_and_pixel_formats_happen_in_the_decode() {
    let path = media(BBB);
    let sel = FrameSelection::Indices(vec![10, 40]);
    let rgb = load_video(
        &path,
        &VideoOptions {
            selection: sel.clone(),
            width: Some(224),
            height: Some(224),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(rgb.shape, [2, 224, 224, 3]);
    let bgr = load_video(
        &path,
        &VideoOptions {
            selection: sel.clone(),
            width: Some(224),
            height: Some(224),
            pixel_format: PixelFormat::Bgr24,
            ..Default::default()
        },
    )
    .unwrap();
    // Same picture with R and B swapped. swscale takes different paths for
    // the two layouts: the ffmpeg command line's own rgb24 and bgr24 outputs
    // of this frame differ by 1.56 in the mean of R.
    let chan_mean = |d: &[u8], c: usize| {
        d.iter()
            .skip(c)
            .step_by(3)
            .map(|&v| f64::from(v))
            .sum::<f64>()
            / (d.len() / 3) as f64
    };
    for c in 0..3 {
        let (a, b) = (chan_mean(&rgb.data, c), chan_mean(&bgr.data, 2 - c));
        assert!((a - b).abs() < 2.0, "channel {c}: {a} vs {b}");
    }
    let gray = load_video(
        &path,
        &VideoOptions {
            selection: sel,
            height: Some(90),
            pixel_format: PixelFormat::Gray8,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(gray.shape, [2, 90, 160, 1]);
    // The resized picture keeps the content: compare quadrant means with a
    // full-size decode.
    let full = load_video(&path, &opts(FrameSelection::Indices(vec![10]))).unwrap();
    let (a, b) = (grid_means(&full, 0), grid_means(&rgb, 0));
    assert!(max_diff(a, b) < 8.0);
}

#[test]
fn clip_sampling_spreads_clips_over_the_decoded_frames() {
    let s = ClipSampling {
        num_clips: 3,
        frames_per_clip: 4,
        stride: 2,
    };
    assert_eq!(
        s.indices(75),
        vec![vec![0, 2, 4, 6], vec![34, 36, 38, 40], vec![68, 70, 72, 74]]
    );
    // Shorter than one clip: the last frame repeats.
    assert_eq!(s.indices(5)[0], vec![0, 2, 4, 4]);

    let path = media(BBB);
    let all = load_video(&path, &VideoOptions::default()).unwrap();
    let clips = load_video_clips(
        &path,
        &s,
        &VideoOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(clips.shape, [3, 4, 180, 320, 3]);
    for (k, &i) in s.indices(75).concat().iter().enumerate() {
        assert_eq!(clips.video.frame(k), all.frame(i));
    }

    let clip = load_video_clip(&path, 8, 112, 112, 1).unwrap();
    assert_eq!(clip.shape, [8, 112, 112, 3]);
    assert_eq!(clip.indices, Some(vec![0, 11, 21, 32, 42, 53, 63, 74]));
    // 10 frames asked of a 10-frame video, and 16 (repeats).
    let short = load_video_clip(&media(&format!("{ROT}/rot0.mp4")), 16, 8, 8, 1).unwrap();
    assert_eq!(short.shape, [16, 8, 8, 3]);
}

#[test]
fn file_and_memory_sources_agree_and_threads_share_nothing() {
    let path = media(BBB);
    let bytes = read(&path);
    let a = load_video(&path, &opts(FrameSelection::Step(7))).unwrap();
    let b = load_video(
        MediaSource::bytes("x", &bytes),
        &opts(FrameSelection::Step(7)),
    )
    .unwrap();
    assert_eq!(a, b);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let bytes = &bytes;
                s.spawn(move || {
                    let o = VideoOptions {
                        selection: FrameSelection::Step(7),
                        threads: i % 3,
                        ..Default::default()
                    };
                    load_video(MediaSource::bytes("x", bytes), &o).unwrap()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), a);
        }
    });
}

// ---------------------------------------------------------------- bad input

#[test]
fn bad_inputs_are_named_errors_never_panics() {
    let good = read(&media(BBB));
    let cases: Vec<(&str, Vec<u8>, &[ErrorKind])> = vec![
        ("empty.mp4", vec![], &[ErrorKind::Empty]),
        (
            "page.mp4",
            b"<html><body>503 Service Unavailable</body></html>".to_vec(),
            &[ErrorKind::UnknownFormat],
        ),
        (
            "noise.mp4",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect(),
            &[ErrorKind::UnknownFormat, ErrorKind::Corrupt],
        ),
        (
            "head_only.mp4",
            good[..2000].to_vec(),
            &[ErrorKind::Truncated, ErrorKind::Corrupt],
        ),
        (
            "half.mp4",
            good[..good.len() / 2].to_vec(),
            &[ErrorKind::Truncated],
        ),
        (
            "no_moov.mp4",
            read(&media(&format!("{ROT}/rot0.mp4")))[..900].to_vec(),
            &[ErrorKind::Truncated, ErrorKind::Corrupt],
        ),
    ];
    for (key, data, kinds) in cases {
        let err = load_video(MediaSource::bytes(key, &data), &VideoOptions::default()).unwrap_err();
        assert!(kinds.contains(&err.kind()), "{key}: {err}");
        assert_eq!(err.key(), key, "{err}");
    }
    // The file source names the path.
    let missing = media("clips/missing.mp4");
    let err = load_video(&missing, &VideoOptions::default()).unwrap_err();
    assert!(err.to_string().contains("missing.mp4"), "{err}");

    // Damaged bytes inside the stream: an error or frames, never a panic.
    for seed in 0..8u32 {
        let mut bad = good.clone();
        for k in 0..64u32 {
            let at = 4000
                + ((k.wrapping_mul(7919) ^ seed.wrapping_mul(104729)) as usize * 31)
                    % (bad.len() - 4000);
            bad[at] ^= 0x5a;
        }
        match load_video(
            MediaSource::bytes("damaged.mp4", &bad),
            &VideoOptions::default(),
        ) {
            Ok(v) => assert!(v.shape[0] <= 75),
            Err(e) => assert_eq!(e.key(), "damaged.mp4", "{e}"),
        }
    }
    // Every truncation point: never a panic, never a hang.
    for cut in (0..good.len()).step_by(good.len() / 40) {
        let _ = load_video(
            MediaSource::bytes("cut.mp4", &good[..cut]),
            &opts(FrameSelection::Indices(vec![0, 74])),
        );
    }
}

#[test]
fn invalid_arguments_are_rejected() {
    let path = media(&format!("{VFR}/vfr_12frames.mp4"));
    for sel in [
        FrameSelection::Step(0),
        FrameSelection::Window {
            start: 1.0,
            end: 1.0,
        },
        FrameSelection::PlayedAt(vec![f64::NAN]),
        FrameSelection::Indices(vec![]),
    ] {
        let err = load_video(&path, &opts(sel)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    }
    let err = load_video(
        &path,
        &VideoOptions {
            max_output_bytes: 1000,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    // An audio-only file has no video stream.
    let wav = media("16-audio-odd-rates-channels/sine_8000Hz_mono_f32.wav");
    assert_eq!(
        load_video(&wav, &VideoOptions::default())
            .unwrap_err()
            .kind(),
        ErrorKind::Unsupported
    );
}
