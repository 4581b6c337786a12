//! Decoded frame -> output frame: scale and pixel-format conversion in one
//! swscale pass (from the decoder's frame, so no full-size RGB copy exists),
//! then the display rotation while copying the small result into its slot.

use ffmpeg_next::{self as ff, ffi, format::Pixel, software::scaling};

use super::{PixelFormat, ScaleFilter};
use crate::{Error, ErrorKind, Result};

/// What the scaler was built for; rebuilt when a frame differs.
#[derive(Clone, Copy, PartialEq, Eq)]
struct InputKey {
    format: Pixel,
    width: u32,
    height: u32,
    color_space: ff::util::color::Space,
    color_range: ff::util::color::Range,
}

/// Converts decoded frames to `[H, W, C]` output slots.
pub(crate) struct Converter {
    /// Output width and height (after rotation).
    pub(crate) width: usize,
    pub(crate) height: usize,
    pub(crate) channels: usize,
    /// Counterclockwise degrees (0/90/180/270) turned while copying.
    rotation: i32,
    /// The scaler's output size (before rotation).
    scale_w: u32,
    scale_h: u32,
    format: Pixel,
    flags: scaling::Flags,
    scaler: Option<(InputKey, scaling::Context)>,
    scratch: ff::frame::Video,
}

impl Converter {
    /// A converter to `width` x `height` (after turning by `rotation`
    /// degrees counterclockwise).
    pub(crate) fn new(
        width: usize,
        height: usize,
        rotation: i32,
        format: PixelFormat,
        filter: ScaleFilter,
    ) -> Self {
        let (scale_w, scale_h) = if rotation % 180 == 0 {
            (width, height)
        } else {
            (height, width)
        };
        Converter {
            width,
            height,
            channels: format.channels(),
            rotation,
            scale_w: scale_w as u32,
            scale_h: scale_h as u32,
            format: format.to_ffmpeg(),
            flags: filter.to_flags(),
            scaler: None,
            scratch: ff::frame::Video::empty(),
        }
    }

    /// Bytes of one output frame.
    pub(crate) fn frame_len(&self) -> usize {
        self.width * self.height * self.channels
    }

    /// Converts `frame` into `dst` (`frame_len()` bytes, `[H, W, C]`).
    pub(crate) fn convert(&mut self, frame: &ff::frame::Video, dst: &mut [u8]) -> Result<()> {
        let key = InputKey {
            format: frame.format(),
            width: frame.width(),
            height: frame.height(),
            color_space: frame.color_space(),
            color_range: frame.color_range(),
        };
        if key.width == 0 || key.height == 0 || key.format == Pixel::None {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "decoder returned an empty frame",
            ));
        }
        if self.scaler.as_ref().map(|(k, _)| *k) != Some(key) {
            let mut ctx = scaling::Context::get(
                key.format,
                key.width,
                key.height,
                self.format,
                self.scale_w,
                self.scale_h,
                self.flags,
            )
            .map_err(|e| {
                crate::ffmpeg::ff_err(
                    ErrorKind::Unsupported,
                    &format!(
                        "no conversion from {:?} {}x{} to {:?} {}x{}",
                        key.format, key.width, key.height, self.format, self.scale_w, self.scale_h
                    ),
                    e,
                )
            })?;
            set_colorspace(&mut ctx, key);
            self.scaler = Some((key, ctx));
        }
        let Some((_, scaler)) = self.scaler.as_mut() else {
            return Err(Error::new(ErrorKind::Corrupt, "no scaler"));
        };
        scaler
            .run(frame, &mut self.scratch)
            .map_err(|e| crate::ffmpeg::ff_err(ErrorKind::Corrupt, "converting frame", e))?;
        let stride = self.scratch.stride(0);
        let src = self.scratch.data(0);
        copy_rotated(
            src,
            stride,
            self.scale_w as usize,
            self.scale_h as usize,
            self.channels,
            self.rotation,
            dst,
        );
        Ok(())
    }
}

/// Uses the frame's own YUV matrix and range (as the `scale` filter of the
/// ffmpeg command line does with `in_color_matrix=auto`), so BT.709 clips
/// convert with BT.709 coefficients.
fn set_colorspace(ctx: &mut scaling::Context, key: InputKey) {
    let space: ffi::AVColorSpace = key.color_space.into();
    let full = c_int_from(key.color_range == ff::util::color::Range::JPEG);
    // SAFETY: `ctx` is a live SwsContext; sws_getCoefficients returns a
    // pointer to a static table (it maps unknown values to the default);
    // sws_setColorspaceDetails only reads the tables.
    unsafe {
        let coeffs = ffi::sws_getCoefficients(space as std::ffi::c_int);
        let dst = ffi::sws_getCoefficients(ffi::SWS_CS_DEFAULT as std::ffi::c_int);
        ffi::sws_setColorspaceDetails(ctx.as_mut_ptr(), coeffs, full, dst, 1, 0, 1 << 16, 1 << 16);
    }
}

fn c_int_from(b: bool) -> std::ffi::c_int {
    std::ffi::c_int::from(b)
}

/// Copies a `[h, w, c]` image with row stride `stride` into `dst`, turned
/// `rotation` degrees counterclockwise.
fn copy_rotated(
    src: &[u8],
    stride: usize,
    w: usize,
    h: usize,
    c: usize,
    rotation: i32,
    dst: &mut [u8],
) {
    let row = w * c;
    match rotation {
        90 => {
            // Output is h wide, w tall: out(x, y) = src(w - 1 - y, x).
            for (y, out_row) in dst.chunks_exact_mut(h * c).take(w).enumerate() {
                let sx = w - 1 - y;
                for (x, px) in out_row.chunks_exact_mut(c).enumerate() {
                    let s = x * stride + sx * c;
                    px.copy_from_slice(&src[s..s + c]);
                }
            }
        }
        180 => {
            for (y, out_row) in dst.chunks_exact_mut(row).take(h).enumerate() {
                let sy = h - 1 - y;
                for (x, px) in out_row.chunks_exact_mut(c).enumerate() {
                    let s = sy * stride + (w - 1 - x) * c;
                    px.copy_from_slice(&src[s..s + c]);
                }
            }
        }
        270 => {
            // Output is h wide, w tall: out(x, y) = src(y, h - 1 - x).
            for (y, out_row) in dst.chunks_exact_mut(h * c).take(w).enumerate() {
                for (x, px) in out_row.chunks_exact_mut(c).enumerate() {
                    let s = (h - 1 - x) * stride + y * c;
                    px.copy_from_slice(&src[s..s + c]);
                }
            }
        }
        _ => {
            for (y, out_row) in dst.chunks_exact_mut(row).take(h).enumerate() {
                out_row.copy_from_slice(&src[y * stride..y * stride + row]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::copy_rotated;

    /// 3x2 single-channel image: 0 1 2 / 3 4 5.
    const SRC: [u8; 6] = [0, 1, 2, 3, 4, 5];

    fn rot(r: i32) -> Vec<u8> {
        let mut out = vec![0; 6];
        copy_rotated(&SRC, 3, 3, 2, 1, r, &mut out);
        out
    }

    #[test]
    fn rotations_turn_counterclockwise() {
        assert_eq!(rot(0), SRC);
        // Turned 90 CCW: the right column becomes the top row.
        assert_eq!(rot(90), [2, 5, 1, 4, 0, 3]);
        assert_eq!(rot(180), [5, 4, 3, 2, 1, 0]);
        // Turned 90 CW: the left column becomes the top row, bottom first.
        assert_eq!(rot(270), [3, 0, 4, 1, 5, 2]);
    }
}
