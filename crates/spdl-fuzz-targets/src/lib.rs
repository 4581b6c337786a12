//! The bodies of spdl-rs's fuzz targets, one plain function of the input bytes each.
//!
//! `fuzz/` (cargo-fuzz, nightly, sanitizers) wraps each in `fuzz_target!`; `tests/replay.rs`
//! runs every seed and every regression input through them on stable Rust, so `cargo xtask
//! test` smoke-tests all targets in seconds without cargo-fuzz. [`seeds`] says which fixture
//! files seed which target, for both.
//!
//! Each body returns whether the input got through the parser or decoder it aims at (parsed,
//! decoded): a target whose seeds are all refused fuzzes nothing. A body never panics on any
//! input; a panic is a bug found.

mod common;

pub mod arrays;
pub mod images;
#[cfg(feature = "decode-ffmpeg")]
pub mod media;
pub mod seeds;
pub mod sources;

/// Runs the target named `name` (see [`seeds::TARGETS`]) over `data`: `Some(accepted)`, or
/// `None` when there is no such target in this build (the FFmpeg ones need `decode-ffmpeg`).
pub fn run(name: &str, data: &[u8]) -> Option<bool> {
    use spdl_io::decode::ImageFormat;
    let accepted = match name {
        "jpeg_markers" => images::jpeg_markers(data),
        "turbojpeg" => images::turbojpeg(data),
        "image_rs" => images::image_rs(data),
        "image_jpeg" => images::image_format(ImageFormat::Jpeg, data),
        "image_png" => images::image_format(ImageFormat::Png, data),
        "image_gif" => images::image_format(ImageFormat::Gif, data),
        "image_webp" => images::image_format(ImageFormat::WebP, data),
        "image_bmp" => images::image_format(ImageFormat::Bmp, data),
        "image_tiff" => images::image_format(ImageFormat::Tiff, data),
        #[cfg(feature = "decode-ffmpeg")]
        "ffmpeg" => media::ffmpeg(data),
        #[cfg(feature = "decode-ffmpeg")]
        "filter_desc" => media::filter_desc(data),
        "uri" => sources::uri(data),
        "list_file" => sources::list_file(data),
        "npy" => arrays::npy(data),
        "npz" => arrays::npz(data),
        "tar" => arrays::tar(data),
        "wav" => arrays::wav(data),
        _ => return None,
    };
    Some(accepted)
}
