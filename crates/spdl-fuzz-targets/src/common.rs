//! Shared by the image targets: options small enough that a fuzzer's memory and time limits
//! only catch real bugs, never a legitimate large image.

use spdl_io::decode::{ColorMode, DecodeOptions, Limits};

/// At most 4 Mpx and 64 MiB of output per decode.
pub(crate) const LIMITS: Limits = Limits {
    max_pixels: 4 << 20,
    max_bytes: 64 << 20,
};

/// Decode options chosen by one fuzz byte: colour mode, orientation, strictness.
pub(crate) fn options(byte: u8) -> DecodeOptions {
    let color = match byte & 3 {
        0 => ColorMode::Rgb,
        1 => ColorMode::Gray,
        2 => ColorMode::Rgba,
        _ => ColorMode::Unchanged,
    };
    DecodeOptions {
        color,
        keep_orientation: byte & 4 != 0,
        lenient: byte & 8 != 0,
        limits: LIMITS,
    }
}

/// Checks what every successful decode promises: the pixel buffer holds exactly
/// `height * width * channels` samples, and none of the three is zero.
pub(crate) fn check_image(img: &spdl_io::Image) {
    assert_eq!(
        img.data.len(),
        img.width * img.height * img.channels,
        "{}x{}x{}",
        img.width,
        img.height,
        img.channels
    );
    assert!(img.width > 0 && img.height > 0 && img.channels > 0);
}
