//! NV12 (what NVDEC outputs) to planar RGB/BGR on the host: the reference of SPDL's
//! `nv12_to_rgb` / `nv12_to_bgr`, usable without a GPU.
//!
//! Layout in: `[N, H + H/2, W]` u8 per batch: `H` rows of luma (Y), then `H/2` rows of
//! interleaved chroma (U, V) at half resolution in both directions. Layout out: `[N, 3, H, W]`
//! u8 (planar, SPDL's layout). Limited ("TV") range, as video decoders produce:
//!
//! ```text
//! R = 255/219 (Y-16)                      + 255/224 * 2(1-Kr) (V-128)
//! G = 255/219 (Y-16) - 255/224 * 2(1-Kb)Kb/Kg (U-128) - 255/224 * 2(1-Kr)Kr/Kg (V-128)
//! B = 255/219 (Y-16) + 255/224 * 2(1-Kb) (U-128)
//! ```
//!
//! with `(Kr, Kb)` from the matrix coefficient (H.273 `matrix_coefficients`, SPDL's `coeff`).
//! Chroma is taken from the 2x2 block's sample (nearest), as SPDL's CUDA kernel does. SPDL's
//! kernel scales chroma by 255/219 instead of 255/224 (saturated colours then differ by up to
//! 5 levels); this follows the standards and FFmpeg's swscale.

use crate::error::{Error, Result};

/// `(Kr, Kb)` of an H.273 matrix coefficient, as SPDL maps `coeff`: 1 BT.709, 4 FCC, 5 BT.470BG,
/// 6 BT.601 (SMPTE 170M), 7 SMPTE 240M, 9 and 10 BT.2020; any other value but 8 means BT.709
/// (SPDL maps unknown values to 1).
///
/// # Errors
/// [`Error::InvalidArgument`] for 8 (YCgCo, not a Kr/Kb matrix).
pub fn kr_kb(coeff: i32) -> Result<(f32, f32)> {
    Ok(match coeff {
        4 => (0.30, 0.11),
        5 | 6 => (0.299, 0.114),
        7 => (0.212, 0.087),
        8 => {
            return Err(Error::InvalidArgument(
                "coeff=8 (YCgCo) is not supported by nv12_to_rgb".into(),
            ))
        }
        9 | 10 => (0.2627, 0.0593),
        _ => (0.2126, 0.0722),
    })
}

/// Converts `frames` NV12 images of `width x height` (`data.len() == frames * height * 3 / 2 *
/// width`) into planar `[frames, 3, height, width]`, channel order RGB or, with `bgr`, BGR.
///
/// # Errors
/// [`Error::InvalidArgument`] for odd sizes, a length that does not match, or `coeff == 8`.
pub fn nv12_to_planar(
    data: &[u8],
    frames: usize,
    height: usize,
    width: usize,
    coeff: i32,
    bgr: bool,
) -> Result<Vec<u8>> {
    if height % 2 != 0 || width % 2 != 0 {
        return Err(Error::InvalidArgument(format!(
            "NV12 frames must have an even size, got {width}x{height}"
        )));
    }
    let frame_len = height * width * 3 / 2;
    if data.len() != frames * frame_len {
        return Err(Error::InvalidArgument(format!(
            "{} bytes is not {frames} NV12 frames of {width}x{height} ({frame_len} bytes each)",
            data.len()
        )));
    }
    let (kr, kb) = kr_kb(coeff)?;
    let kg = 1.0 - kr - kb;
    let ys = 255.0 / 219.0;
    let cs = 255.0 / 224.0;
    let rv = cs * 2.0 * (1.0 - kr);
    let gu = cs * 2.0 * (1.0 - kb) * kb / kg;
    let gv = cs * 2.0 * (1.0 - kr) * kr / kg;
    let bu = cs * 2.0 * (1.0 - kb);
    let plane = height * width;
    let (r_at, b_at) = if bgr { (2, 0) } else { (0, 2) };
    let mut out = vec![0u8; frames * 3 * plane];
    let to_u8 = |v: f32| v.round().clamp(0.0, 255.0) as u8;
    for (src, dst) in data
        .chunks_exact(frame_len)
        .zip(out.chunks_exact_mut(3 * plane))
    {
        let (luma, chroma) = src.split_at(plane);
        for y in 0..height {
            let crow = &chroma[(y / 2) * width..(y / 2 + 1) * width];
            for x in 0..width {
                let l = ys * (f32::from(luma[y * width + x]) - 16.0);
                let u = f32::from(crow[x & !1]) - 128.0;
                let v = f32::from(crow[x | 1]) - 128.0;
                let i = y * width + x;
                dst[r_at * plane + i] = to_u8(l + rv * v);
                dst[plane + i] = to_u8(l - gu * u - gv * v);
                dst[b_at * plane + i] = to_u8(l + bu * u);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grey_and_primaries() {
        // 2x2 frame: Y = 16 (black) and 235 (white) with neutral chroma.
        let black_white = [16, 235, 235, 16, 128, 128];
        let out = nv12_to_planar(&black_white, 1, 2, 2, 1, false).unwrap();
        assert_eq!(out, [0, 255, 255, 0, 0, 255, 255, 0, 0, 255, 255, 0]);
        // BT.709 limited-range pure red is Y=63, U=102, V=240.
        let red = [63, 63, 63, 63, 102, 240];
        let rgb = nv12_to_planar(&red, 1, 2, 2, 1, false).unwrap();
        assert!(rgb[0] >= 253 && rgb[4] <= 2 && rgb[8] <= 2, "{rgb:?}");
        let bgr = nv12_to_planar(&red, 1, 2, 2, 1, true).unwrap();
        assert_eq!(bgr[8], rgb[0]);
        assert!(nv12_to_planar(&red, 1, 2, 2, 8, false).is_err());
        assert!(nv12_to_planar(&red[..5], 1, 2, 2, 1, false).is_err());
        assert!(nv12_to_planar(&[0; 9], 1, 3, 2, 1, false).is_err());
    }
}
