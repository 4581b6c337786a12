//! Audio through FFmpeg: hard case 16 (odd sample rates and channel
//! layouts) against ffmpeg command-line references, per-file resampler state,
//! time windows, bad inputs.
#![cfg(feature = "decode-ffmpeg")]

mod video_util;

use spdl_io::audio::load_audio;
use spdl_io::{AudioOptions, ErrorKind, MediaSource};
use video_util::{fixture, max_diff, media, npy, read};

const CASE: &str = "16-audio-odd-rates-channels";

/// file, rate, channels, samples per channel, 16 kHz mono length, ref tolerance.
const FILES: [(&str, u32, usize, usize, usize, f64); 6] = [
    ("sine440_11025Hz_mono_s16.wav", 11025, 1, 5513, 8001, 1e-4),
    ("sine440_22050Hz_mono.mp3", 22050, 1, 11025, 8000, 0.05),
    ("sine_44100Hz_stereo_LR.flac", 44100, 2, 11025, 4000, 1e-4),
    ("sine_48000Hz_5.1_s16.wav", 48000, 6, 9600, 3200, 1e-4),
    ("sine_8000Hz_mono_f32.wav", 8000, 1, 8000, 16000, 1e-4),
    ("odd_7350Hz_mono_s16.wav", 7350, 1, 2205, 4800, 1e-4),
];

fn peak(x: &[f32]) -> f32 {
    x.iter().fold(0.0, |m, v| m.max(v.abs()))
}

/// Frequency from the count of upward zero crossings.
fn freq(x: &[f32], rate: u32) -> f64 {
    let ups = x.windows(2).filter(|w| w[0] < 0.0 && w[1] >= 0.0).count();
    ups as f64 * f64::from(rate) / x.len() as f64
}

#[test]
fn native_decode_matches_ffmpeg() {
    for (file, rate, ch, samples, _, tol) in FILES {
        let a = load_audio(&media(&format!("{CASE}/{file}")), &AudioOptions::default()).unwrap();
        assert_eq!(a.sample_rate, rate, "{file}");
        assert_eq!(a.channels, ch, "{file}");
        if file.ends_with(".mp3") {
            assert!(a.samples.abs_diff(samples) <= 1152, "{file}: {}", a.samples);
        } else {
            assert_eq!(a.samples, samples, "{file}");
        }
        assert_eq!(a.data.len(), ch * a.samples);
        assert!(a.data.iter().all(|v| (-1.0..=1.0).contains(v)), "{file}");
        let stem = file.rsplit_once('.').unwrap().0;
        let r = media(&format!("{CASE}/ref/{stem}.npy"));
        if r.exists() {
            let r = npy(&r);
            assert_eq!(r.shape[0], ch);
            let n = r.shape[1].min(a.samples);
            for c in 0..ch {
                let got = a.channel(c).unwrap()[..n].iter().map(|&v| f64::from(v));
                let want = r.data[c * r.shape[1]..c * r.shape[1] + n].iter().copied();
                let d = max_diff(got, want);
                assert!(d <= tol, "{file} channel {c}: differs by {d}");
            }
        }
    }
}

#[test]
fn stereo_is_not_swapped_and_surround_keeps_its_layout() {
    let a = load_audio(
        &media(&format!("{CASE}/sine_44100Hz_stereo_LR.flac")),
        &AudioOptions::default(),
    )
    .unwrap();
    let (l, r) = (
        freq(a.channel(0).unwrap(), 44100),
        freq(a.channel(1).unwrap(), 44100),
    );
    assert!((l - 440.0).abs() < 10.0, "left {l} Hz");
    assert!((r - 1000.0).abs() < 10.0, "right {r} Hz");

    let a = load_audio(
        &media(&format!("{CASE}/sine_48000Hz_5.1_s16.wav")),
        &AudioOptions::default(),
    )
    .unwrap();
    let peaks: Vec<f32> = (0..6).map(|c| peak(a.channel(c).unwrap())).collect();
    for (c, want) in [0.125f32, 0.062, 0.0, 0.0, 0.125, 0.125]
        .into_iter()
        .enumerate()
    {
        assert!(
            (peaks[c] - want).abs() < 0.002,
            "channel {c}: peak {}",
            peaks[c]
        );
    }
}

fn to_16k_mono(file: &str) -> spdl_io::Audio {
    let bytes = read(&media(&format!("{CASE}/{file}")));
    load_audio(
        MediaSource::bytes(file, &bytes),
        &AudioOptions {
            sample_rate: Some(16_000),
            channels: Some(1),
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn resampling_carries_no_state_between_files() {
    let forward: Vec<_> = FILES.iter().collect();
    let backward: Vec<_> = FILES.iter().rev().collect();
    for order in [forward, backward] {
        for &&(file, rate, _, samples, want, _) in &order {
            let a = to_16k_mono(file);
            assert_eq!((a.channels, a.sample_rate), (1, 16_000));
            assert!(
                a.samples.abs_diff(want) <= 2,
                "{file}: {} samples, want {want}",
                a.samples
            );
            if !file.ends_with(".mp3") {
                let native = samples as f64 / f64::from(rate);
                assert!(
                    (a.duration() - native).abs() <= 0.001,
                    "{file}: {} s",
                    a.duration()
                );
            }
        }
    }
    // Many files at once on many threads: the same lengths.
    std::thread::scope(|s| {
        let handles: Vec<_> = FILES
            .iter()
            .cycle()
            .take(18)
            .map(|&(file, _, _, _, want, _)| s.spawn(move || (to_16k_mono(file).samples, want)))
            .collect();
        for h in handles {
            let (got, want) = h.join().unwrap();
            assert!(got.abs_diff(want) <= 2);
        }
    });
}

/// The 8 kHz mono f32 sine of case 16, loaded with `opts`.
fn load_sine_8k(opts: AudioOptions) -> Result<spdl_io::Audio, spdl_io::Error> {
    load_audio(&media(&format!("{CASE}/sine_8000Hz_mono_f32.wav")), &opts)
}

#[test]
fn resampled_tone_keeps_its_pitch_and_level() {
    let a = to_16k_mono("sine440_11025Hz_mono_s16.wav");
    let f = freq(a.channel(0).unwrap(), 16_000);
    assert!((f - 440.0).abs() < 10.0, "{f} Hz");
    assert!((peak(a.channel(0).unwrap()) - 0.125).abs() < 0.01);
    // Upmix mono -> stereo: both channels carry the tone.
    let b = load_sine_8k(AudioOptions {
        channels: Some(2),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(b.shape(), [2, 8000]);
    assert!(peak(b.channel(1).unwrap()) > 0.05);
}

#[test]
fn time_window_cuts_at_sample_precision() {
    let full = load_sine_8k(AudioOptions::default()).unwrap();
    let w = load_sine_8k(AudioOptions {
        window: Some((0.25, 0.5)),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(w.samples, 2000);
    assert!((w.start - 0.25).abs() < 1e-9);
    assert_eq!(w.data, full.data[2000..4000]);
    // Open end, resampled.
    let w = load_sine_8k(AudioOptions {
        window: Some((0.5, f64::INFINITY)),
        sample_rate: Some(16_000),
        ..Default::default()
    })
    .unwrap();
    assert!(w.samples.abs_diff(8000) <= 2, "{}", w.samples);
    // Past the end.
    let err = load_sine_8k(AudioOptions {
        window: Some((5.0, 6.0)),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

#[test]
fn audio_track_of_a_video_clip() {
    let a = load_audio(
        &media("clips/bbb_320x180_bframes.mp4"),
        &AudioOptions::default(),
    )
    .unwrap();
    assert_eq!((a.sample_rate, a.channels), (44_100, 2));
    assert!(a.info.codec.starts_with("aac"), "{}", a.info.codec);
    // 3 s of audio, give or take the AAC priming and frame rounding.
    assert!((a.duration() - 3.0).abs() < 0.05, "{} s", a.duration());
}

#[test]
fn bad_inputs_are_named_errors_never_panics() {
    let good = read(&media(&format!("{CASE}/sine440_22050Hz_mono.mp3")));
    for (key, data, kinds) in [
        ("empty.wav", vec![], &[ErrorKind::Empty][..]),
        (
            "page.wav",
            b"<html>404 not found</html>".to_vec(),
            &[ErrorKind::UnknownFormat][..],
        ),
    ] {
        let err = load_audio(MediaSource::bytes(key, &data), &AudioOptions::default()).unwrap_err();
        assert!(kinds.contains(&err.kind()), "{key}: {err}");
        assert_eq!(err.key(), key, "{err}");
    }
    // Video-only file: no audio stream.
    let err = load_audio(
        &media("clips/vtest_384x288_msmpeg4.avi"),
        &AudioOptions::default(),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(err.to_string().contains("vtest_384x288_msmpeg4.avi"));
    // Every truncation point and damaged bytes: never a panic.
    for cut in (0..good.len()).step_by(97) {
        let _ = load_audio(
            MediaSource::bytes("cut.mp3", &good[..cut]),
            &AudioOptions::default(),
        );
    }
    let mut bad = good.clone();
    for i in (400..bad.len()).step_by(13) {
        bad[i] = bad[i].wrapping_mul(31);
    }
    match load_audio(
        MediaSource::bytes("damaged.mp3", &bad),
        &AudioOptions::default(),
    ) {
        Ok(a) => assert!(a.samples < 100_000),
        Err(e) => assert_eq!(e.key(), "damaged.mp3", "{e}"),
    }
    let err = load_sine_8k(AudioOptions {
        sample_rate: Some(0),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

/// Fuzz regression (`ffmpeg` target): a WAV header claiming 268 MHz. Resampling it made
/// swresample refuse the ratio and ffmpeg-next leak its context; it is refused first, by name.
#[test]
fn absurd_sample_rates_are_refused_before_resampling() {
    let path = fixture("fuzz/wav_rate_268mhz.wav");
    let native = load_audio(&path, &AudioOptions::default()).unwrap();
    assert_eq!(native.sample_rate, 268_442_806);
    let err = load_audio(
        &path,
        &AudioOptions {
            sample_rate: Some(8000),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("wav_rate_268mhz.wav") && msg.contains("268442806 Hz"),
        "{msg}"
    );
}
