//! The documented defaults of the option structs (derived with `SmartDefault` beside their
//! fields) and the `Debug` of decoded media, which summarizes the samples instead of listing them.

use spdl_io::{ImageOptions, Limits, TransformKind};

#[test]
fn image_defaults() {
    let o = ImageOptions::default();
    assert_eq!((o.width, o.height, o.size), (None, None, None));
    assert_eq!(o.transform, TransformKind::Resize);
    assert!(!o.lenient && o.region_decode && o.scaled_decode);
    assert_eq!(
        (Limits::default().max_pixels, Limits::default().max_bytes),
        (178_956_970, 1 << 30)
    );
}

#[cfg(feature = "decode-ffmpeg")]
mod media {
    use spdl_io::audio::AudioInfo;
    use spdl_io::ffmpeg::encode::RateControl;
    use spdl_io::ffmpeg::{DecodeConfig, DemuxConfig};
    use spdl_io::video::{PixelFormat, ScaleFilter, VideoInfo};
    use spdl_io::{Audio, AudioOptions, FrameSelection, Video, VideoOptions};

    #[test]
    fn video_and_audio_defaults() {
        let v = VideoOptions::default();
        assert_eq!(v.selection, FrameSelection::All);
        assert_eq!((v.width, v.height), (None, None));
        assert_eq!(v.pixel_format, PixelFormat::Rgb24);
        assert_eq!(v.filter, ScaleFilter::Bicubic);
        assert_eq!((v.threads, v.apply_rotation), (1, false));
        assert_eq!(v.max_output_bytes, 4 << 30);
        assert_eq!(v.filter_desc, None);
        assert_eq!(
            (v.demux.clone(), v.decode.clone()),
            (DemuxConfig::default(), DecodeConfig::default())
        );

        let a = AudioOptions::default();
        assert_eq!((a.sample_rate, a.channels, a.window), (None, None, None));
        assert_eq!(a.max_samples, 1 << 31);

        let d = DemuxConfig::default();
        assert_eq!(
            (d.format, d.format_options.len(), d.buffer_size),
            (None, 0, 32 * 1024)
        );
        let r = RateControl::default();
        assert_eq!((r.bit_rate, r.compression_level, r.qscale), (-1, -1, -1));
    }

    #[test]
    fn debug_summarizes_samples() {
        let video = Video {
            data: vec![7; 2 * 2 * 3],
            shape: [1, 2, 2, 3],
            pts: vec![0.5],
            indices: Some(vec![0]),
            rotation_applied: 0,
            frames_decoded: None,
            info: VideoInfo {
                codec: "h264".into(),
                coded_width: 2,
                coded_height: 2,
                rotation: 0,
                time_base: (1, 25),
                frames_estimate: None,
                duration_estimate: None,
                avg_frame_rate: None,
            },
        };
        let text = format!("{video:?}");
        assert!(
            text.starts_with("Video { data: [12 bytes], shape: [1, 2, 2, 3], pts: [0.5]"),
            "{text}"
        );
        assert!(text.contains("codec: \"h264\""), "{text}");

        let audio = Audio {
            data: vec![0.25; 6],
            channels: 2,
            samples: 3,
            sample_rate: 8000,
            start: 0.0,
            info: AudioInfo {
                codec: "pcm_s16le".into(),
                sample_rate: 8000,
                channels: 2,
                sample_format: "s16".into(),
            },
        };
        let text = format!("{audio:?}");
        assert!(
            text.starts_with("Audio { data: [6 samples], channels: 2, samples: 3"),
            "{text}"
        );
        assert!(!text.contains("0.25"), "{text}");
    }
}
