//! SPDL's packet/frame-level media API in Rust: `FilterGraph`, `Demuxer`
//! (+ `streaming_demux`), packets (+ serialization, bit-stream filters),
//! `Decoder` (streaming + flush), frame objects and their conversion to
//! arrays. Checked against the `ffmpeg` command line for the same filter
//! string, against one-shot decodes, and on the hard cases 13, 14 and 16.
#![cfg(feature = "decode-ffmpeg")]

mod video_util;

use std::path::Path;
use std::sync::Arc;

use spdl_io::ffmpeg::bsf::{apply_bsf, Bsf};
use spdl_io::ffmpeg::decoder::{decode_packets, Decoder};
use spdl_io::ffmpeg::demux::{demux, Demuxer};
use spdl_io::ffmpeg::encode::{AudioEncodeConfig, EncodeConfig, Encoder, Muxer, VideoEncodeConfig};
use spdl_io::ffmpeg::frames::{FrameMemory, Frames, MediaKind};
use spdl_io::ffmpeg::graph::FilterGraph;
use spdl_io::ffmpeg::packets::Packets;
use spdl_io::ffmpeg::{DecodeConfig, DemuxConfig};
use spdl_io::DType;
use spdl_io::{ErrorKind, MediaSource};
use video_util::{demux_window, ffmpeg, ffmpeg_rgb, largest_diff, max_diff, media, npy, read};

const BBB: &str = "clips/bbb_320x180_bframes.mp4";
/// Mono at 22050 Hz, with an encoder delay.
const MONO_MP3: &str = "16-audio-odd-rates-channels/sine440_22050Hz_mono.mp3";
const RGB: Option<&str> = Some("format=pix_fmts=rgb24");

/// The first three frames of `path` as raw `rgb24` at 32x18: bytes that no probe recognizes.
fn raw_rgb_frames(path: &Path) -> Vec<u8> {
    ffmpeg(
        path,
        &[
            "-frames:v",
            "3",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-s",
            "32x18",
        ],
    )
}

/// What demuxes [`raw_rgb_frames`]: the format forced, with its options.
fn raw_rgb_demux() -> DemuxConfig {
    DemuxConfig {
        format: Some("rawvideo".into()),
        format_options: vec![
            ("video_size".into(), "32x18".into()),
            ("pixel_format".into(), "rgb24".into()),
        ],
        buffer_size: 8096,
    }
}

fn video(path: &Path) -> Packets {
    demux_window(path, MediaKind::Video, None).unwrap()
}

fn audio(path: &Path) -> Packets {
    demux_window(path, MediaKind::Audio, None).unwrap()
}

fn decode_all(p: &Packets, desc: Option<&str>) -> Frames {
    decode_packets(p, desc, &DecodeConfig::default(), None).unwrap()
}

/// The first `n` frames of `p`, through the filter `desc`.
fn decode_first(p: &Packets, desc: &str, n: usize) -> Frames {
    decode_packets(p, Some(desc), &DecodeConfig::default(), Some(n)).unwrap()
}

/// Adds to `mux` a stream that `encoder` writes from two channels of `sample_fmt` samples at
/// `sample_rate` Hz.
fn add_stereo_stream(
    mux: &mut Muxer,
    encoder: &str,
    sample_fmt: &str,
    sample_rate: u32,
) -> Encoder {
    let cfg = AudioEncodeConfig {
        sample_fmt: Some(sample_fmt.into()),
        sample_rate: Some(sample_rate),
        ..AudioEncodeConfig::new(2)
    };
    mux.add_encode_stream(&EncodeConfig::Audio(cfg), Some(encoder), &[])
        .unwrap()
}

#[test]
fn decode_packets_with_a_filter_string_gives_the_ffmpeg_command_line_bytes() {
    let path = media(BBB);
    let packets = video(&path);
    assert_eq!(packets.len(), 75);
    let codec = packets.codec();
    assert_eq!(codec.name(), "h264");
    assert_eq!((codec.width(), codec.height()), (320, 180));
    assert_eq!(codec.format_name(), "yuv420p");
    for desc in [
        "scale=96:54,hflip,format=rgb24",
        "fps=5,scale=40:24,format=rgb24",
    ] {
        let frames = decode_all(&packets, Some(desc));
        let a = frames.to_array().unwrap();
        assert_eq!(a.dtype, DType::U8);
        assert_eq!(a.shape[1..], [frames.height(), frames.width(), 3]);
        assert!(
            a.data == ffmpeg_rgb(&path, desc),
            "{desc}: bytes differ from ffmpeg -vf"
        );
    }
    // fps=5 over 3 s: 15 frames, pts in 1/5 s.
    let f = decode_all(&packets, Some("fps=5,scale=40:24,format=rgb24"));
    assert_eq!(f.len(), 15);
    assert_eq!(f.time_base(), (1, 5));
    assert_eq!(f.pts()[..3], [0, 1, 2]);
    assert_eq!(f.timestamps()[1], 0.2);
    // No filter: the decoder's own yuv420p frames, laid out as SPDL does.
    let raw = decode_all(&packets, None);
    assert_eq!(raw.format_name(), "yuv420p");
    assert_eq!(raw.num_planes(), 3);
    let a = raw.to_array().unwrap();
    assert_eq!(a.shape, [75, 1, 270, 320]);
    let want = ffmpeg(&path, &["-f", "rawvideo", "-pix_fmt", "yuv420p"]);
    // Y, U, V planes one after another, as ffmpeg writes them (and SPDL's
    // `convert_frames`, through `av_image_copy_to_buffer`).
    assert!(a.data == want, "yuv420p bytes differ from the command line");
}

#[test]
fn streaming_demux_and_decode_in_pieces_equal_one_shot() {
    let path = media(BBB);
    let one_shot = decode_all(&video(&path), RGB).to_array().unwrap();
    let src = MediaSource::shared("bbb", Arc::from(read(&path)));
    let mut d = Demuxer::open(&src, &DemuxConfig::default()).unwrap();
    assert!(d.has_audio());
    let vi = d.stream_index(MediaKind::Video).unwrap();
    let codec = d.codec(MediaKind::Video).unwrap();
    let mut dec = Decoder::new(&codec, RGB, &DecodeConfig::default()).unwrap();
    let mut stream = d.streaming_demux(&[vi], None, Some(7)).unwrap();
    let mut pieces: Vec<u8> = Vec::new();
    let mut n = 0;
    let mut chunks = 0;
    while let Some(chunk) = stream.next_chunk(&mut d) {
        let chunk = chunk.unwrap();
        assert_eq!(chunk.keys().copied().collect::<Vec<_>>(), [vi]);
        assert!(chunk[&vi].len() <= 7);
        chunks += 1;
        let f = dec.decode(&chunk[&vi]).unwrap();
        // Constant memory: each chunk gives back about its own frames (plus the few the
        // decoder held for reordering), never an accumulation of the stream.
        assert!(f.len() <= 7 + 4, "{} frames from a 7-packet chunk", f.len());
        if !f.is_empty() {
            n += f.len();
            pieces.extend(f.to_array().unwrap().data);
        }
    }
    let f = dec.flush().unwrap();
    n += f.len();
    pieces.extend(f.to_array().unwrap().data);
    assert_eq!(chunks, 11); // 75 packets in chunks of 7
    assert_eq!(n, 75);
    assert!(
        pieces == one_shot.data,
        "pieces differ from the one-shot decode"
    );
    // A flushed decoder says so.
    let e = dec.decode(&video(&path)).unwrap_err();
    assert!(e.to_string().contains("flushed"), "{e}");

    // Audio and video together, by duration; the same Demuxer again.
    let ai = d.stream_index(MediaKind::Audio).unwrap();
    let mut stream = d.streaming_demux(&[vi, ai], Some(1.0), None).unwrap();
    let (mut nv, mut na) = (0, 0);
    while let Some(chunk) = stream.next_chunk(&mut d) {
        let chunk = chunk.unwrap();
        nv += chunk.get(&vi).map_or(0, Packets::len);
        na += chunk.get(&ai).map_or(0, Packets::len);
    }
    assert_eq!(nv, 75);
    assert_eq!(na, 131);
    // Demuxing again after reading to the end starts from the beginning.
    let audio = d.demux(MediaKind::Audio, None, None).unwrap();
    assert_eq!(audio.len(), 131);
    assert_eq!(d.demux(MediaKind::Video, None, None).unwrap().len(), 75);

    // Windows: the frames equal the one-shot decode's frames in the window.
    let all = decode_all(&video(&path), RGB);
    let ts = all.timestamps();
    let part = d
        .demux(MediaKind::Video, Some((ts[30], ts[55])), None)
        .unwrap();
    assert!(part.len() < 75);
    let f = decode_all(&part, RGB);
    assert_eq!(f.timestamps(), ts[30..55]);
    let per = one_shot.data.len() / 75;
    assert!(f.to_array().unwrap().data == one_shot.data[30 * per..55 * per]);

    // Bad limits are named errors.
    let e = d.streaming_demux(&[vi], None, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = d.streaming_demux(&[99], Some(1.0), None).unwrap_err();
    assert!(e.to_string().contains("no stream 99"), "{e}");
}

#[test]
fn audio_packets_decode_like_the_ffmpeg_command_line_and_in_windows() {
    for (file, rate, ch) in [
        (
            "16-audio-odd-rates-channels/sine_44100Hz_stereo_LR.flac",
            44100,
            2,
        ),
        (
            "16-audio-odd-rates-channels/sine_48000Hz_5.1_s16.wav",
            48000,
            6,
        ),
        (
            "16-audio-odd-rates-channels/odd_7350Hz_mono_s16.wav",
            7350,
            1,
        ),
    ] {
        let path = media(file);
        let p = audio(&path);
        assert_eq!(p.codec().sample_rate(), rate);
        assert_eq!(p.codec().num_channels(), ch);
        let f = decode_all(&p, Some("aformat=sample_fmts=fltp"));
        assert_eq!(
            (f.sample_rate(), f.num_channels(), f.format_name().as_str()),
            (rate, ch, "fltp")
        );
        let a = f.to_array().unwrap();
        assert_eq!(a.dtype, DType::F32);
        let refp = media(
            &file
                .replace(".flac", ".npy")
                .replace(".wav", ".npy")
                .replace(
                    "16-audio-odd-rates-channels/",
                    "16-audio-odd-rates-channels/ref/",
                ),
        );
        assert_eq!(a.shape[0], ch);
        // (The 5.1 reference is not among the bundled fixtures.)
        if refp.exists() {
            let want = npy(&refp);
            assert_eq!(a.shape, want.shape, "{file}");
            let got = a
                .data
                .chunks_exact(4)
                .map(|c| f64::from(f32::from_ne_bytes([c[0], c[1], c[2], c[3]])));
            assert!(max_diff(got, want.data.iter().copied()) < 1e-4, "{file}");
        }
        // Packed s16 as decoded: [S, C] int16, equal to ffmpeg's s16le bytes.
        if file.ends_with("s16.wav") {
            let raw = decode_all(&p, None);
            assert_eq!(raw.format_name(), "s16");
            let a = raw.to_array().unwrap();
            assert_eq!((a.dtype, a.shape[1]), (DType::I16, ch));
            assert!(a.data == ffmpeg(&path, &["-f", "s16le"]), "{file}");
        }
    }
    // A window is cut at sample precision (0.1 s of 44100 Hz = 4410).
    let path = media("16-audio-odd-rates-channels/sine_44100Hz_stereo_LR.flac");
    let whole = decode_all(&audio(&path), Some("aformat=sample_fmts=fltp"))
        .to_array()
        .unwrap();
    let p = demux_window(&path, MediaKind::Audio, Some((0.05, 0.15))).unwrap();
    let a = decode_all(&p, Some("aformat=sample_fmts=fltp"))
        .to_array()
        .unwrap();
    assert_eq!(a.shape, [2, 4410]);
    let total = whole.shape[1];
    let start = 2205 * 4;
    assert!(a.data[..4410 * 4] == whole.data[start..start + 4410 * 4]);
    assert!(a.data[4410 * 4..] == whole.data[(total + 2205) * 4..(total + 2205 + 4410) * 4]);
}

/// Memory that counts its drops, to see when frames let it go.
struct Counted(Vec<u8>, Arc<std::sync::atomic::AtomicUsize>);

// SAFETY: the Vec is never changed while the frames hold it.
unsafe impl FrameMemory for Counted {
    fn as_ptr_len(&self) -> (*const u8, usize) {
        (self.0.as_ptr(), self.0.len())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn reference_frames_point_into_the_memory_and_release_it_with_the_last_frame() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // (pix_fmt, shape): packed, planar, gray, and both 4:2:0 layouts.
    for (fmt, shape) in [
        ("rgb24", vec![2, 6, 8, 3]),
        ("yuv444p", vec![2, 3, 6, 8]),
        ("gray", vec![2, 6, 8, 1]),
        ("yuv420p", vec![2, 1, 9, 8]),
        ("nv12", vec![2, 1, 9, 8]),
    ] {
        let len: usize = shape.iter().product();
        let data: Vec<u8> = (0..len).map(|v| (v * 7 % 251) as u8).collect();
        let dropped = Arc::new(AtomicUsize::new(0));
        let memory = Box::new(Counted(data.clone(), Arc::clone(&dropped)));
        let frames = Frames::reference_video_array(memory, &shape, fmt, (25, 1), 3).unwrap();
        assert_eq!(frames.pts(), [3, 4], "{fmt}");
        // The same bytes as the copying constructor gives, read in place.
        assert_eq!(frames.to_array().unwrap().data, data, "{fmt}");
        let copied = Frames::from_video_array(&data, &shape, fmt, (25, 1), 3).unwrap();
        assert_eq!(copied.to_array().unwrap().data, data, "{fmt}");
        // Through a filter graph that writes (hflip makes new frames).
        let (w, h) = (8, 6);
        let mut g = FilterGraph::new(&format!(
            "buffer=video_size={w}x{h}:pix_fmt={fmt}:time_base=1/25:pixel_aspect=1/1,hflip,hflip,buffersink"
        ))
        .unwrap();
        g.add_frames(&frames, None).unwrap();
        g.flush().unwrap();
        assert_eq!(
            g.get_frames(None)
                .unwrap()
                .unwrap()
                .to_array()
                .unwrap()
                .data,
            data,
            "{fmt}"
        );
        drop(g);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            0,
            "{fmt}: frames still hold it"
        );
        drop(frames);
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "{fmt}: released once");
    }
    // Audio, planar and packed; 12 planar channels are more planes than an
    // AVFrame holds inline (copied, through extended_data).
    for (fmt, shape) in [
        ("fltp", [2usize, 16usize]),
        ("flt", [16, 2]),
        ("fltp", [12, 16]),
    ] {
        let data: Vec<u8> = (0..shape[0] as u32 * shape[1] as u32)
            .flat_map(|v| (v as f32 / 32.0).to_ne_bytes())
            .collect();
        let dropped = Arc::new(AtomicUsize::new(0));
        let memory = Box::new(Counted(data.clone(), Arc::clone(&dropped)));
        let f = Frames::reference_audio_array(memory, shape, fmt, 8000, 0).unwrap();
        let a = f.to_array().unwrap();
        assert_eq!(
            (a.shape.as_slice(), a.data == data),
            (&shape[..], true),
            "{fmt}"
        );
        drop(f);
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "{fmt}");
    }
    // A shape that does not fit: an error, and the memory is released.
    let dropped = Arc::new(AtomicUsize::new(0));
    let memory = Box::new(Counted(vec![0; 10], Arc::clone(&dropped)));
    let e = Frames::reference_video_array(memory, &[1, 2, 5, 1], "rgb24", (25, 1), 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    // Audio without samples, and pictures without pixels, are refused by both
    // constructors (not silently zero frames).
    let e = Frames::from_audio_array(&[], [2, 0], "fltp", 8000, 0).unwrap_err();
    assert!(e.to_string().contains("no samples"), "{e}");
    for shape in [[2, 0, 8, 3], [2, 6, 0, 3]] {
        let e = Frames::from_video_array(&[], &shape, "rgb24", (25, 1), 0).unwrap_err();
        assert!(e.to_string().contains("without pixels"), "{e}");
        let memory = Box::new(Vec::<u8>::new());
        let e = Frames::reference_video_array(memory, &shape, "rgb24", (25, 1), 0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}

#[test]
fn filter_graph_runs_user_described_graphs_with_named_inputs_and_outputs() {
    // 2 frames of 4x3 rgb24 with distinct values.
    let data: Vec<u8> = (0..2 * 3 * 4 * 3).map(|v| v as u8).collect();
    let frames = Frames::from_video_array(&data, &[2, 3, 4, 3], "rgb24", (25, 1), 10).unwrap();
    assert_eq!(frames.pts(), [10, 11]);
    assert_eq!(frames.time_base(), (1, 25));
    assert_eq!(frames.to_array().unwrap().data, data);
    let buffer = "buffer=video_size=4x3:pix_fmt=rgb24:time_base=1/25:pixel_aspect=1/1";
    let mut g = FilterGraph::new(&format!("{buffer},hflip,buffersink")).unwrap();
    assert!(g.dump().contains("hflip"));
    g.add_frames(&frames, None).unwrap();
    g.flush().unwrap();
    let out = g.get_frames(None).unwrap().unwrap();
    assert_eq!(out.pts(), [10, 11]);
    let a = out.to_array().unwrap();
    assert_eq!(a.shape, [2, 3, 4, 3]);
    for t in 0..2 {
        for y in 0..3 {
            for x in 0..4 {
                let src = &data[((t * 3 + y) * 4 + (3 - x)) * 3..][..3];
                let got = &a.data[((t * 3 + y) * 4 + x) * 3..][..3];
                assert_eq!(got, src, "pixel ({x}, {y}) of frame {t}");
            }
        }
    }
    assert!(
        g.get_frames(None).unwrap().is_none(),
        "all frames were taken"
    );

    // Two inputs stacked, two outputs split.
    let src = "video_size=4x3:pix_fmt=rgb24:time_base=1/25:pixel_aspect=1/1";
    let desc = format!(
        "buffer@in0={src} [a];buffer@in1={src} [b];[a][b] vstack,split [o0][o1];\
         [o0] buffersink@out0;[o1] vflip,buffersink@out1"
    );
    let mut g = FilterGraph::new(&desc).unwrap_or_else(|e| panic!("{desc}: {e}"));
    assert_eq!(g.input_names(), ["buffer@in0", "buffer@in1"]);
    assert_eq!(g.output_names(), ["buffersink@out0", "buffersink@out1"]);
    let e = g.add_frames(&frames, None).unwrap_err();
    assert!(e.to_string().contains("give key="), "{e}");
    g.add_frames(&frames, Some("buffer@in0")).unwrap();
    g.add_frames(&frames, Some("buffer@in1")).unwrap();
    g.flush().unwrap();
    let top = g
        .get_frames(Some("buffersink@out0"))
        .unwrap()
        .unwrap()
        .to_array()
        .unwrap();
    assert_eq!(top.shape, [2, 6, 4, 3]);
    assert_eq!(top.data[..36], data[..36]);
    assert_eq!(top.data[36..72], data[..36]);
    let e = g.get_frames(Some("nope")).unwrap_err();
    assert!(e.to_string().contains("no output named \"nope\""), "{e}");

    // Audio: abuffer -> volume -> abuffersink, exact for a x0.5 gain on floats.
    let samples: Vec<f32> = (0..16).map(|i| i as f32 / 16.0).collect();
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_ne_bytes()).collect();
    let af = Frames::from_audio_array(&bytes, [2, 8], "fltp", 8000, 0).unwrap();
    assert_eq!(
        (af.num_channels(), af.sample_rate(), af.num_samples()),
        (2, 8000, 8)
    );
    let mut g = FilterGraph::new(
        "abuffer=time_base=1/8000:sample_rate=8000:sample_fmt=fltp:channel_layout=stereo,volume=0.5:precision=float,abuffersink",
    )
    .unwrap();
    g.add_frames(&af, None).unwrap();
    g.flush().unwrap();
    let out = g.get_frames(None).unwrap().unwrap().to_array().unwrap();
    let got: Vec<f32> = out
        .data
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(got, samples.iter().map(|s| s * 0.5).collect::<Vec<_>>());
    // Video frames into an audio source: named error.
    let e = g.add_frames(&frames, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn bad_graphs_containers_filters_and_options_are_named_errors() {
    for (desc, needle) in [
        (
            "buffer=video_size=4x3:pix_fmt=rgb24:time_base=1/25,notafilter,buffersink",
            "notafilter",
        ),
        (
            "buffer=video_size=4x3:pix_fmt=rgb24:time_base=1/25,hflip",
            "unconnected",
        ),
        ("nullsrc,buffersink", "no buffer"),
    ] {
        let e = FilterGraph::new(desc).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{desc}");
        assert!(e.to_string().contains("invalid filter graph"), "{e}");
        let _ = needle;
    }
    let e = Demuxer::open(
        &MediaSource::bytes("page.html", b"<html>503</html>"),
        &DemuxConfig::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnknownFormat);
    assert_eq!(e.key(), "page.html", "{e}");
    let cfg = DemuxConfig {
        format: Some("nosuchformat".into()),
        ..Default::default()
    };
    let e = Demuxer::open(&MediaSource::file(&media(BBB)), &cfg).unwrap_err();
    assert!(e.to_string().contains("unknown container format"), "{e}");
    let cfg = DemuxConfig {
        format_options: vec![("nosuchoption".into(), "1".into())],
        ..Default::default()
    };
    let e = Demuxer::open(&MediaSource::file(&media(BBB)), &cfg).unwrap_err();
    assert!(e.to_string().contains("nosuchoption"), "{e}");
    let p = video(&media(BBB));
    let e = decode_packets(&p, Some("notafilter"), &DecodeConfig::default(), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("bbb_320x180_bframes.mp4"), "{e}");
    let cfg = DecodeConfig {
        decoder: Some("nosuchdecoder".into()),
        ..Default::default()
    };
    assert_eq!(
        Decoder::new(p.codec(), None, &cfg).unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    let cfg = DecodeConfig {
        decoder_options: vec![("nosuchoption".into(), "1".into())],
        ..Default::default()
    };
    let e = Decoder::new(p.codec(), None, &cfg).unwrap_err();
    assert!(e.to_string().contains("nosuchoption"), "{e}");
    let e = apply_bsf(&p, "nosuchbsf").unwrap_err();
    assert!(e.to_string().contains("nosuchbsf"), "{e}");
    let e = Frames::from_video_array(&[0; 10], &[1, 2, 5, 1], "rgb24", (25, 1), 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn serialized_packets_keep_their_side_data() {
    // The MP3's first packet carries a skip-samples record (the encoder
    // delay, 1105 samples as ffprobe shows); without it the decode back
    // would start with 1105 samples of priming.
    let path = media(MONO_MP3);
    let p = audio(&path);
    let want = decode_all(&p, None).to_array().unwrap();
    let back = Packets::deserialize(&p.serialize()).unwrap();
    let got = decode_all(&back, None).to_array().unwrap();
    assert_eq!(got.shape, want.shape);
    assert!(got.data == want.data);
    // As many samples as the ffmpeg command line gives (it applies the
    // record), with the same values.
    let cli = ffmpeg(&path, &["-f", "f32le"]);
    assert_eq!(want.dtype, DType::F32);
    assert_eq!(want.data.len(), cli.len());
    let f32s = |b: &[u8]| -> Vec<f64> {
        b.chunks_exact(4)
            .map(|c| f64::from(f32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
            .collect()
    };
    assert!(max_diff(f32s(&want.data), f32s(&cli)) < 1e-6);
}

#[test]
fn configs_bsf_and_serialized_packets() {
    let path = media(BBB);
    let p = video(&path);
    let want = decode_all(&p, RGB).to_array().unwrap();
    // Decoder chosen by name, with options.
    let cfg = DecodeConfig {
        decoder: Some("h264".into()),
        decoder_options: vec![("threads".into(), "2".into())],
    };
    let f = decode_packets(&p, RGB, &cfg, Some(10)).unwrap();
    assert_eq!(f.len(), 10);
    assert!(f.to_array().unwrap().data == want.data[..want.data.len() / 75 * 10]);
    // Annex B through a bit-stream filter decodes to the same frames.
    let annexb = apply_bsf(&p, "h264_mp4toannexb").unwrap();
    assert_eq!(annexb.len(), 75);
    assert_eq!(&annexb.packet_data(0)[..4], [0, 0, 0, 1]);
    assert!(decode_all(&annexb, RGB).to_array().unwrap().data == want.data);
    let mut bsf = Bsf::new(p.codec(), "null").unwrap();
    let out = bsf.filter(&p.slice(0..10), false).unwrap();
    assert_eq!(out.len(), 10);
    assert!(bsf.flush().unwrap().is_empty());
    // Serialized and read back: the same frames; damaged bytes are an error.
    let bytes = p.serialize();
    let back = Packets::deserialize(&bytes).unwrap();
    assert_eq!((back.len(), back.key()), (75, p.key()));
    assert_eq!(back.timestamps(true), p.timestamps(true));
    assert!(decode_all(&back, RGB).to_array().unwrap().data == want.data);
    // What a hardware decoder reads: the avcC record (configuration version 1), kept by
    // serialization, and every packet's pts by index.
    let extra = p.codec().extradata();
    assert_eq!(extra[0], 1);
    assert_eq!(back.codec().extradata(), extra);
    let (num, den) = p.codec().time_base();
    let pts: Vec<f64> = (0..p.len())
        .map(|i| {
            p.packet_pts(i).expect("every MP4 packet has a pts") as f64 * f64::from(num)
                / f64::from(den)
        })
        .collect();
    assert_eq!(pts, p.timestamps(true));
    assert_eq!(p.packet_pts(p.len()), None);
    let mut bad = bytes.clone();
    bad[bytes.len() / 2] ^= 1;
    assert_eq!(
        Packets::deserialize(&bad).unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    assert_eq!(
        Packets::deserialize(&bytes[..100]).unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    // A forced format with options: raw video the demuxer cannot probe.
    let raw = raw_rgb_frames(&path);
    let cfg = raw_rgb_demux();
    let src = MediaSource::bytes("raw", &raw);
    let p = Demuxer::open(&src, &cfg)
        .unwrap()
        .demux(MediaKind::Video, None, None)
        .unwrap();
    let f = decode_all(&p, None);
    assert_eq!(f.format_name(), "rgb24");
    assert!(f.to_array().unwrap().data == raw);
}

#[test]
fn images_demux_and_decode_as_one_frame() {
    let path = media("clips/bbb_320x180_bframes.mp4");
    // The first frame at 40x24, written as `output` says.
    let first_frame = |output: &[&str]| {
        ffmpeg(
            &path,
            &[&["-frames:v", "1", "-vf", "scale=40:24"], output].concat(),
        )
    };
    let png = first_frame(&["-f", "image2pipe", "-c:v", "png"]);
    let p = demux_window(png.as_slice(), MediaKind::Image, None).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p.codec().name(), "png");
    let f = decode_all(&p, RGB);
    assert_eq!(f.kind(), MediaKind::Image);
    let a = f.to_array().unwrap();
    assert_eq!(a.shape, [24, 40, 3]);
    let want = first_frame(&["-f", "rawvideo", "-pix_fmt", "rgb24"]);
    assert!(a.data == want, "PNG round trip is lossless");
    let e = demux_window(png.as_slice(), MediaKind::Image, Some((0.0, 1.0))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn hard_cases_13_14_16_through_the_packet_api() {
    // 13: raw frames are coded 64x32; the ffmpeg autorotate filters give the
    // displayed picture (ref +-12).
    for (name, rot, filt) in [
        ("rot0", 0, ""),
        ("rot90", 90, "transpose=cclock,"),
        ("rot180", 180, "hflip,vflip,"),
        ("rot270", 270, "transpose=clock,"),
    ] {
        let path = media(&format!("13-video-rotation-metadata/{name}.mp4"));
        let p = video(&path);
        assert_eq!(p.codec().rotation(), rot, "{name}");
        let raw = decode_all(&p, RGB).to_array().unwrap();
        assert_eq!(raw.shape, [10, 32, 64, 3]);
        let f = decode_all(&p, Some(&format!("{filt}format=pix_fmts=rgb24")))
            .to_array()
            .unwrap();
        let want = npy(&media(&format!(
            "13-video-rotation-metadata/ref/{name}_frame0_autorotated.npy"
        )));
        assert_eq!(f.shape[1..], want.shape[..], "{name}");
        let per = f.data.len() / 10;
        let d = max_diff(
            f.data[..per].iter().map(|&v| f64::from(v)),
            want.data.iter().copied(),
        );
        assert!(d <= 12.0, "{name}: {d}");
    }
    // 14: 12 VFR frames with their own pts.
    let p = video(&media("14-video-vfr-frame-count/vfr_12frames.mp4"));
    let f = decode_all(&p, RGB);
    assert_eq!(f.len(), 12);
    let want = [
        0.0, 0.033, 0.067, 0.267, 0.3, 0.8, 0.833, 0.933, 0.967, 1.0, 1.3, 1.333,
    ];
    for (t, w) in f.timestamps().iter().zip(want) {
        assert!((t - w).abs() < 1e-3, "{t} vs {w}");
    }
    let a = f.to_array().unwrap();
    let refs = npy(&media("14-video-vfr-frame-count/ref/frames_rgb.npy"));
    assert_eq!(a.shape, refs.shape);
    assert!(
        max_diff(
            a.data.iter().map(|&v| f64::from(v)),
            refs.data.iter().copied()
        ) <= 3.0
    );
    // 16: MP3 with its encoder delay trimmed, mono at 22050 Hz.
    let path = media(MONO_MP3);
    let p = audio(&path);
    let f = decode_all(&p, Some("aformat=sample_fmts=fltp"));
    assert_eq!((f.sample_rate(), f.num_channels()), (22050, 1));
    let n = f.num_samples() as i64;
    assert!((n - 11025).abs() <= 1152, "{n}");
    // Resampled to 16 kHz mono by a filter string: ffmpeg's length.
    let f = decode_all(
        &p,
        Some("aresample=16000,aformat=sample_fmts=fltp:channel_layouts=mono"),
    );
    assert!(
        (f.num_samples() as i64 - 8000).abs() <= 2,
        "{}",
        f.num_samples()
    );
}

mod encoding {
    use super::*;
    use spdl_io::ffmpeg::encode::encode_image;

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("spdl-media-api-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn pattern(n: usize, h: usize, w: usize) -> Vec<u8> {
        (0..n * h * w * 3)
            .map(|i| ((i * 7919) % 251) as u8)
            .collect()
    }

    #[test]
    fn encode_image_png_is_lossless_and_jpeg_is_close() {
        let data = pattern(1, 24, 40);
        let png = tmp("img.png");
        encode_image(&png, &data, &[24, 40, 3], "rgb24", None).unwrap();
        let got = ffmpeg(&png, &["-f", "rawvideo", "-pix_fmt", "rgb24"]);
        assert!(got == data, "PNG round trip differs");
        // JPEG (yuvj420p) of a smooth gradient: close, not exact.
        let smooth: Vec<u8> = (0..24 * 40 * 3).map(|i| ((i / 3) % 40 * 6) as u8).collect();
        let jpg = tmp("img.jpg");
        let mut cfg = VideoEncodeConfig::new(40, 24);
        cfg.rate.qscale = 2;
        encode_image(&jpg, &smooth, &[24, 40, 3], "rgb24", Some(&cfg)).unwrap();
        let got = ffmpeg(&jpg, &["-f", "rawvideo", "-pix_fmt", "rgb24"]);
        let d = largest_diff(&got, &smooth);
        assert!(d <= 24, "JPEG differs by {d}");
        let e =
            encode_image(&tmp("img.nosuchext"), &data, &[24, 40, 3], "rgb24", None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = encode_image(
            &png,
            &data,
            &[24, 40, 3],
            "rgb24",
            Some(&VideoEncodeConfig::new(8, 8)),
        )
        .unwrap_err();
        assert!(e.to_string().contains("8x8"), "{e}");
    }

    #[test]
    fn muxer_writes_lossless_video_and_audio_that_decode_back_exactly() {
        let (n, h, w) = (6usize, 16usize, 24usize);
        let data = pattern(n, h, w);
        let frames = Frames::from_video_array(&data, &[n, h, w, 3], "rgb24", (10, 1), 0).unwrap();
        let samples: Vec<i16> = (0..2 * 800)
            .map(|i| ((i * 37) % 2000) as i16 - 1000)
            .collect();
        let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_ne_bytes()).collect();
        let audio_frames = Frames::from_audio_array(&bytes, [800, 2], "s16", 8000, 0).unwrap();

        let path = tmp("out.mkv");
        let mut mux = Muxer::new(&path, None).unwrap();
        let mut vcfg = VideoEncodeConfig::new(w as u32, h as u32);
        vcfg.frame_rate = Some((10, 1));
        vcfg.pix_fmt = Some("bgr0".into());
        let mut venc = mux
            .add_encode_stream(&EncodeConfig::Video(vcfg), Some("ffv1"), &[])
            .unwrap();
        let mut aenc = add_stereo_stream(&mut mux, "pcm_s16le", "s16", 8000);
        mux.open(&[]).unwrap();
        let p = venc.encode(&frames).unwrap();
        mux.write(0, &p).unwrap();
        mux.write(0, &venc.flush().unwrap()).unwrap();
        mux.write(1, &aenc.encode(&audio_frames).unwrap()).unwrap();
        mux.write(1, &aenc.flush().unwrap()).unwrap();
        mux.flush().unwrap();
        mux.close().unwrap();

        let v = decode_all(&video(&path), RGB);
        assert_eq!(v.len(), n);
        assert_eq!(v.timestamps(), [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]);
        assert!(
            v.to_array().unwrap().data == data,
            "FFV1 round trip differs"
        );
        let a = decode_all(&audio(&path), None).to_array().unwrap();
        assert_eq!(
            (a.dtype, a.shape.as_slice()),
            (DType::I16, &[800usize, 2][..])
        );
        assert!(a.data == bytes, "PCM round trip differs");

        // Remux: the packets written as they are decode to the same frames.
        let src = video(&media(BBB));
        let out = tmp("remux.mkv");
        let mut mux = Muxer::new(&out, None).unwrap();
        mux.add_remux_stream(src.codec()).unwrap();
        mux.open(&[]).unwrap();
        mux.write(0, &src).unwrap();
        mux.close().unwrap();
        let back = video(&out);
        assert_eq!(back.len(), 75);
        assert!(
            decode_all(&back, RGB).to_array().unwrap().data
                == decode_all(&src, RGB).to_array().unwrap().data
        );

        // Named errors.
        let mut mux = Muxer::new(&tmp("x.mkv"), None).unwrap();
        let e = mux
            .add_encode_stream(
                &EncodeConfig::Video(VideoEncodeConfig::new(8, 8)),
                Some("nosuchenc"),
                &[],
            )
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        let e = mux
            .add_encode_stream(
                &EncodeConfig::Video(VideoEncodeConfig::new(8, 8)),
                Some("ffv1"),
                &[("nosuchoption".into(), "1".into())],
            )
            .unwrap_err();
        assert!(e.to_string().contains("nosuchoption"), "{e}");
        assert!(mux.write(0, &src).is_err());
        assert!(Muxer::new(&tmp("x.nosuchext"), None).is_err());
    }
}

#[test]
fn image_filter_strings_on_decoded_images_match_the_ffmpeg_command_line() {
    use spdl_io::ffmpeg::image_filter::filter_image;
    let path = media(BBB);
    let png = ffmpeg(
        &path,
        &[
            "-frames:v",
            "1",
            "-s",
            "64x36",
            "-f",
            "image2pipe",
            "-c:v",
            "png",
        ],
    );
    let img = spdl_io::Registry::with_defaults()
        .decode("frame.png", &png, &spdl_io::DecodeOptions::default())
        .unwrap();
    assert_eq!((img.width, img.height, img.channels), (64, 36, 3));
    let desc = "scale=w=32:h=32:flags=bicubic:force_original_aspect_ratio=decrease,pad=w=32:h=32:x=-1:y=-1:color=black,hflip";
    let out = filter_image(&img, desc).unwrap();
    assert_eq!((out.width, out.height, out.channels), (32, 32, 3));
    let tmp = std::env::temp_dir().join(format!("spdl-imgfilter-{}.png", std::process::id()));
    std::fs::write(&tmp, &png).unwrap();
    let want = ffmpeg(&tmp, &["-vf", desc, "-f", "rawvideo", "-pix_fmt", "rgb24"]);
    let spdl_io::PixelData::U8(got) = &out.data else {
        panic!("u8")
    };
    assert!(*got == want, "bytes differ from ffmpeg -vf");
    let e = filter_image(&img, "notafilter").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("notafilter"), "{e}");
}

#[test]
fn load_video_and_load_audio_honour_demux_and_decode_configs() {
    use spdl_io::audio::load_audio;
    use spdl_io::video::load_video;
    use spdl_io::{AudioOptions, VideoOptions};
    let path = media(BBB);
    // A forced format with options: raw frames no probe recognizes, returned unchanged.
    let raw = raw_rgb_frames(&path);
    let opts = VideoOptions {
        demux: raw_rgb_demux(),
        ..Default::default()
    };
    let v = load_video(MediaSource::bytes("raw", &raw), &opts).unwrap();
    assert_eq!(v.shape, [3, 18, 32, 3]);
    assert!(v.data == raw);
    // A decoder chosen by name, with options: the same frames as the default decoder.
    let want = load_video(&*path, &VideoOptions::default()).unwrap();
    let opts = VideoOptions {
        decode: DecodeConfig {
            decoder: Some("h264".into()),
            decoder_options: vec![("threads".into(), "2".into())],
        },
        ..Default::default()
    };
    let got = load_video(&*path, &opts).unwrap();
    assert_eq!((got.shape, &got.pts), (want.shape, &want.pts));
    assert!(got.data == want.data);
    // Bad settings are named errors that name the setting.
    let no_decoder = DecodeConfig {
        decoder: Some("nosuchdecoder".into()),
        ..Default::default()
    };
    let no_option = DecodeConfig {
        decoder_options: vec![("nosuchoption".into(), "1".into())],
        ..Default::default()
    };
    let no_format = DemuxConfig {
        format: Some("nosuchformat".into()),
        ..Default::default()
    };
    for (demux, decode, kind, name) in [
        (
            DemuxConfig::default(),
            no_decoder.clone(),
            ErrorKind::Unsupported,
            "nosuchdecoder",
        ),
        (
            DemuxConfig::default(),
            no_option,
            ErrorKind::InvalidArgument,
            "nosuchoption",
        ),
        (
            no_format,
            DecodeConfig::default(),
            ErrorKind::InvalidArgument,
            "nosuchformat",
        ),
    ] {
        let opts = VideoOptions {
            demux,
            decode,
            ..Default::default()
        };
        let e = load_video(&*path, &opts).unwrap_err();
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.to_string().contains(name), "{e}");
    }
    // Audio: raw s16le samples read through a forced format are the samples / 32768.
    let pcm = ffmpeg(&path, &["-vn", "-ac", "2", "-ar", "8000", "-f", "s16le"]);
    let opts = AudioOptions {
        demux: DemuxConfig {
            format: Some("s16le".into()),
            format_options: vec![
                ("sample_rate".into(), "8000".into()),
                ("ch_layout".into(), "stereo".into()),
            ],
            ..Default::default()
        },
        decode: DecodeConfig {
            decoder: Some("pcm_s16le".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let a = load_audio(MediaSource::bytes("pcm", &pcm), &opts).unwrap();
    assert_eq!((a.sample_rate, a.channels), (8000, 2));
    let ints: Vec<i16> = pcm
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(a.samples, ints.len() / 2);
    for c in 0..2 {
        let want = ints
            .iter()
            .skip(c)
            .step_by(2)
            .map(|&s| f32::from(s) / 32768.0);
        assert!(
            a.channel(c).unwrap().iter().copied().eq(want),
            "channel {c}"
        );
    }
    let opts = AudioOptions {
        decode: no_decoder,
        ..Default::default()
    };
    let e = load_audio(&*path, &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
}

#[test]
fn window_decodes_skip_unreferenced_lead_in_frames_and_keep_the_same_pixels() {
    // The lead-in from the key frame to a window's start skips frames nothing refers to
    // (B-frames here); the frames in the window must still equal a decode from the start.
    for clip in [BBB, "14-video-vfr-frame-count/vfr_12frames.mp4"] {
        let path = media(clip);
        let all = decode_all(&video(&path), RGB);
        let ts = all.timestamps();
        let full = all.to_array().unwrap();
        let per = full.data.len() / ts.len();
        let d = Demuxer::open(&MediaSource::file(&path), &DemuxConfig::default()).unwrap();
        let mut d = d;
        for start in (1..ts.len() - 2).step_by(3) {
            let end = start + 2;
            let part = d
                .demux(MediaKind::Video, Some((ts[start], ts[end])), None)
                .unwrap();
            let f = decode_all(&part, RGB);
            assert_eq!(
                f.timestamps(),
                ts[start..end],
                "{clip} window at frame {start}"
            );
            assert!(
                f.to_array().unwrap().data == full.data[start * per..end * per],
                "{clip} window at frame {start}: pixels differ"
            );
        }
    }
}

#[test]
fn sixteen_bit_pixel_formats_convert_to_u16_arrays_like_the_ffmpeg_command_line() {
    let path = media(BBB);
    let p = video(&path);
    for (fmt, shape_of) in [
        ("gray16le", [1usize, 180, 320]),
        ("rgb48le", [180, 320, 3]),
        ("yuv444p16le", [3, 180, 320]),
        ("yuv420p10le", [1, 270, 320]),
    ] {
        let desc = format!("format=pix_fmts={fmt}");
        let f = decode_first(&p, &desc, 3);
        let a = f.to_array().unwrap();
        assert_eq!(a.dtype, DType::U16, "{fmt}");
        assert_eq!(a.shape[1..], shape_of, "{fmt}");
        let want = ffmpeg(
            &path,
            &[
                "-frames:v",
                "3",
                "-vf",
                &desc,
                "-f",
                "rawvideo",
                "-pix_fmt",
                fmt,
            ],
        );
        // Planes one after another (`yuv420p10le` too), as the command line.
        assert!(a.data == want, "{fmt}: bytes differ from the command line");
    }
}

/// Inputs found by breaking the media API on purpose (session 5): each was a
/// panic, a crash or a silently wrong result; each is a named error or the
/// right result now.
mod bad_inputs {
    use super::*;
    use spdl_io::video::{load_video, load_video_clips, ClipSampling, VideoOptions};

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("spdl-bad-inputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn nul_bytes_in_names_and_options_are_invalid_arguments() {
        let p = video(&media(BBB));
        for cfg in [
            DecodeConfig {
                decoder: Some("h264\0".into()),
                ..Default::default()
            },
            DecodeConfig {
                decoder_options: vec![("threads".into(), "1\0".into())],
                ..Default::default()
            },
        ] {
            let e = decode_packets(&p, None, &cfg, Some(1)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(e.to_string().contains("NUL"), "{e}");
        }
        let demux_cfg = DemuxConfig {
            format_options: vec![("a\0".into(), "b".into())],
            ..Default::default()
        };
        let e = demux(&media(BBB), MediaKind::Video, None, &demux_cfg, None).unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
        let e = Muxer::new(&tmp("x\0.mp4"), None).unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
        let e = Muxer::new(&tmp("x.mp4"), Some("mp4\0")).unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
        let mut mux = Muxer::new(&tmp("y.mkv"), None).unwrap();
        let cfg = EncodeConfig::Video(VideoEncodeConfig::new(8, 8));
        let e = mux
            .add_encode_stream(&cfg, Some("ffv1\0"), &[])
            .unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
        let opts = [("a\0".to_string(), "b".to_string())];
        let e = mux
            .add_encode_stream(&cfg, Some("ffv1"), &opts)
            .unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
    }

    #[test]
    fn output_sizes_ffmpeg_refuses_and_absurd_clip_counts_are_errors() {
        let opts = VideoOptions {
            width: Some(16384),
            height: Some(16384),
            ..Default::default()
        };
        let e = load_video(&*media(BBB), &opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        let opts = VideoOptions {
            threads: spdl_io::video::MAX_THREADS + 1,
            ..Default::default()
        };
        let e = load_video(&*media(BBB), &opts).unwrap_err();
        assert!(e.to_string().contains("decoder threads"), "{e}");
        for (n, t) in [(1 << 31, 1), (1, 1 << 31), (1_000_000, 1_000_000)] {
            let sampling = ClipSampling {
                num_clips: n,
                frames_per_clip: t,
                stride: 1,
            };
            let e =
                load_video_clips(&*media(BBB), &sampling, &VideoOptions::default()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
        }
    }

    #[test]
    fn encoders_refuse_frames_of_another_shape_or_rate() {
        let mono = decode_all(&audio(&media(MONO_MP3)), None);
        let mut mux = Muxer::new(&tmp("a.mkv"), None).unwrap();
        let mut enc = add_stereo_stream(&mut mux, "pcm_f32le", "flt", 22050);
        let e = enc.encode(&mono).unwrap_err();
        assert!(e.to_string().contains("1 channel(s) at 22050 Hz"), "{e}");
        // 30 fps frames into a 25 fps encoder would share timestamps.
        let data = vec![0u8; 5 * 8 * 8 * 3];
        let frames = Frames::from_video_array(&data, &[5, 8, 8, 3], "rgb24", (30, 1), 0).unwrap();
        let mut mux = Muxer::new(&tmp("v.mkv"), None).unwrap();
        let mut venc = mux
            .add_encode_stream(
                &EncodeConfig::Video(VideoEncodeConfig::new(8, 8)),
                Some("ffv1"),
                &[],
            )
            .unwrap();
        let e = venc.encode(&frames).unwrap_err();
        assert!(e.to_string().contains("one timestamp"), "{e}");
        let small =
            Frames::from_video_array(&data[..4 * 4 * 3], &[1, 4, 4, 3], "rgb24", (25, 1), 0)
                .unwrap();
        let e = venc.encode(&small).unwrap_err();
        assert!(e.to_string().contains("4x4"), "{e}");
    }

    #[test]
    fn an_mp4_keeps_its_last_frame() {
        // Without a duration on the last packet, MP4's edit list ends at its
        // start and readers drop it (a one-frame file then has no frame).
        let src = video(&media(BBB));
        let frames = decode_first(&src, "format=pix_fmts=yuv420p", 5);
        let path = tmp("five.mp4");
        let mut mux = Muxer::new(&path, None).unwrap();
        let mut cfg = VideoEncodeConfig::new(320, 180);
        cfg.frame_rate = Some((25, 1));
        let mut enc = mux
            .add_encode_stream(&EncodeConfig::Video(cfg), None, &[])
            .unwrap();
        mux.open(&[]).unwrap();
        mux.write(0, &enc.encode(&frames).unwrap()).unwrap();
        mux.write(0, &enc.flush().unwrap()).unwrap();
        mux.close().unwrap();
        assert_eq!(decode_all(&video(&path), RGB).len(), 5);
    }

    #[test]
    fn made_frames_have_their_rate_and_stay_in_order() {
        // tpad makes frames after the last; the buffer source needs the rate.
        let p = demux_window(&media(BBB), MediaKind::Video, Some((0.0, 0.2))).unwrap();
        let f = decode_all(&p, Some("tpad=stop=5,format=pix_fmts=rgb24"));
        let ts = f.timestamps();
        assert_eq!(ts.len(), 10, "{ts:?}");
        assert!(
            ts.windows(2).all(|w| (w[1] - w[0] - 0.04).abs() < 1e-6),
            "{ts:?}"
        );
    }

    #[test]
    fn mismatches_are_named_instead_of_mixed() {
        // A bit-stream filter made for H.264 given MP3 packets.
        let v = video(&media(BBB));
        let a = audio(&media(MONO_MP3));
        let mut bsf = Bsf::new(v.codec(), "null").unwrap();
        let e = bsf.filter(&a, false).unwrap_err();
        assert!(e.to_string().contains("made for h264"), "{e}");
        // rgb24 and bgr24 frames are not stacked into one array.
        let data = vec![1u8; 4 * 4 * 3];
        let rgb = Frames::from_video_array(&data, &[1, 4, 4, 3], "rgb24", (25, 1), 0).unwrap();
        let bgr = Frames::from_video_array(&data, &[1, 4, 4, 3], "bgr24", (25, 1), 0).unwrap();
        let e = spdl_io::ffmpeg::frames::stack_arrays(&[&rgb, &bgr]).unwrap_err();
        assert!(e.to_string().contains("rgb24 and bgr24"), "{e}");
        // Odd-sized yuv420p does not fit the [1, H*3/2, W] layout.
        let odd = decode_first(&v, "scale=3:3,format=pix_fmts=yuv420p", 1);
        assert_eq!(odd.to_array().unwrap_err().kind(), ErrorKind::Unsupported);
        // Timestamps and rates that do not fit.
        let e =
            Frames::from_video_array(&data, &[1, 4, 4, 3], "rgb24", (25, 1), i64::MAX).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let pcm = vec![0u8; 8];
        let e = Frames::from_audio_array(&pcm, [4, 1], "s16", 1 << 31, 0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn an_audio_window_from_minus_infinity_decodes() {
        let path = media("16-audio-odd-rates-channels/sine_44100Hz_stereo_LR.flac");
        let whole = decode_all(&audio(&path), None);
        let p = demux_window(&path, MediaKind::Audio, Some((f64::NEG_INFINITY, 1.0))).unwrap();
        let f = decode_all(&p, None);
        assert_eq!(f.num_samples(), 44100.min(whole.num_samples()));
        let far = demux_window(&path, MediaKind::Audio, Some((-1e18, 1e18))).unwrap();
        assert_eq!(decode_all(&far, None).num_samples(), whole.num_samples());
    }
}
