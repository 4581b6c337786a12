//! Channel conversions shared by the decoders, built-in and third-party (Pillow's conventions:
//! ITU-R 601-2 luma, alpha dropped without compositing, 16 -> 8 bit as round(v / 257)). A
//! plugin that uses them produces the same pixels as the built-in decoders for the same
//! [`ColorMode`].

use super::ColorMode;

/// Output channels for `mode` given the source's channels.
pub fn out_channels(mode: ColorMode, src_channels: usize) -> usize {
    match mode {
        ColorMode::Gray => 1,
        ColorMode::Rgb => 3,
        ColorMode::Rgba => 4,
        ColorMode::Unchanged => src_channels,
    }
}

/// Pillow's `L = R * 299/1000 + G * 587/1000 + B * 114/1000`, in fixed point.
fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((u32::from(r) * 19595 + u32::from(g) * 38470 + u32::from(b) * 7471 + 0x8000) >> 16) as u8
}

/// 16-bit to 8-bit as round(v / 257), so 65535 -> 255 and 257 -> 1.
pub fn u16_to_u8(v: u16) -> u8 {
    ((u32::from(v) * 2 + 257) / 514) as u8
}

/// Converts interleaved 8-bit pixels with `src_c` channels (1 gray, 2 gray+alpha,
/// 3 RGB, 4 RGBA) to `dst_c` channels (1, 3 or 4; or `src_c` to copy).
/// Stops at the shorter of the two buffers.
pub fn convert_u8(src: &[u8], src_c: usize, dst: &mut [u8], dst_c: usize) {
    if src_c == dst_c {
        let n = src.len().min(dst.len());
        dst[..n].copy_from_slice(&src[..n]);
        return;
    }
    if src_c == 0 || dst_c == 0 {
        return;
    }
    for (s, d) in src.chunks_exact(src_c).zip(dst.chunks_exact_mut(dst_c)) {
        let (rgb, alpha) = match *s {
            [l] => ([l, l, l], 255),
            [l, a] => ([l, l, l], a),
            [r, g, b] => ([r, g, b], 255),
            [r, g, b, a, ..] => ([r, g, b], a),
            [] => return,
        };
        match d {
            [l] => {
                *l = if src_c <= 2 {
                    rgb[0]
                } else {
                    luma(rgb[0], rgb[1], rgb[2])
                }
            }
            [r, g, b] => [*r, *g, *b] = rgb,
            [r, g, b, a] => [*r, *g, *b, *a] = [rgb[0], rgb[1], rgb[2], alpha],
            _ => return,
        }
    }
}
