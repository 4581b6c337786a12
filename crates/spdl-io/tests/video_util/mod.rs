//! Helpers for the video and audio tests: fixture paths, a `.npy` reader
//! (`|u1` and `<f4`, C order) and the `ffmpeg` command line as a reference.
// Each test binary uses some of the helpers (and of the shared ones re-exported here).
#![allow(dead_code, unused_imports)]

#[path = "../common/fixtures.rs"]
mod fixtures;

use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) use fixtures::{fixture, largest_diff, read};

pub(crate) fn media(rel: &str) -> PathBuf {
    fixtures::fixture("media").join(rel)
}

/// The packets of `kind` in `window` seconds of `src` (all for `None`), demuxed with the
/// default config and no bitstream filter.
pub(crate) fn demux_window<'a>(
    src: impl Into<spdl_io::MediaSource<'a>>,
    kind: spdl_io::ffmpeg::frames::MediaKind,
    window: Option<(f64, f64)>,
) -> spdl_io::Result<spdl_io::ffmpeg::packets::Packets> {
    spdl_io::ffmpeg::demux::demux(
        src,
        kind,
        window,
        &spdl_io::ffmpeg::DemuxConfig::default(),
        None,
    )
}

/// A reference array: shape and values as f64.
pub(crate) type Npy = fixtures::Npy<f64>;

/// Parses `.npy` with dtype `|u1` or `<f4`.
pub(crate) fn npy(path: &PathBuf) -> Npy {
    fixtures::load(path, "<f4", 4, |c| {
        f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    })
}

/// Runs the `ffmpeg` command line (installed by `cargo xtask setup`) on `input` with `args`
/// and `-` as the output, and returns its stdout.
pub(crate) fn ffmpeg(input: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-threads", "1", "-i"])
        .arg(input)
        .args(args)
        .arg("-")
        .output()
        .expect("the ffmpeg command line (cargo xtask setup installs it)");
    assert!(
        out.status.success(),
        "ffmpeg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `rgb24` frames of `input` through `-vf desc`, as raw bytes.
pub(crate) fn ffmpeg_rgb(input: &Path, desc: &str) -> Vec<u8> {
    ffmpeg(
        input,
        &[
            "-vf",
            desc,
            "-fps_mode",
            "passthrough",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
        ],
    )
}

/// Largest absolute difference.
pub(crate) fn max_diff(a: impl IntoIterator<Item = f64>, b: impl IntoIterator<Item = f64>) -> f64 {
    a.into_iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}
