//! EXIF orientation (tag 0x0112, values 1..=8): parsing and applying.

/// EXIF orientation: how the stored pixels must be transformed to be shown
/// upright (mirrors Pillow's `ImageOps.exif_transpose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Orientation {
    /// 1: stored upright.
    #[default]
    Normal,
    /// 2: mirror left-right.
    FlipHorizontal,
    /// 3: rotate 180 degrees.
    Rotate180,
    /// 4: mirror top-bottom.
    FlipVertical,
    /// 5: mirror along the main diagonal (swaps axes).
    Transpose,
    /// 6: rotate 90 degrees clockwise (swaps axes).
    Rotate90,
    /// 7: mirror along the anti-diagonal (swaps axes).
    Transverse,
    /// 8: rotate 270 degrees clockwise (swaps axes).
    Rotate270,
}

impl Orientation {
    /// From the EXIF tag value; `None` outside 1..=8.
    pub fn from_exif(value: u16) -> Option<Self> {
        Some(match value {
            1 => Orientation::Normal,
            2 => Orientation::FlipHorizontal,
            3 => Orientation::Rotate180,
            4 => Orientation::FlipVertical,
            5 => Orientation::Transpose,
            6 => Orientation::Rotate90,
            7 => Orientation::Transverse,
            8 => Orientation::Rotate270,
            _ => return None,
        })
    }

    /// The EXIF tag value, 1..=8.
    pub fn exif_value(self) -> u16 {
        match self {
            Orientation::Normal => 1,
            Orientation::FlipHorizontal => 2,
            Orientation::Rotate180 => 3,
            Orientation::FlipVertical => 4,
            Orientation::Transpose => 5,
            Orientation::Rotate90 => 6,
            Orientation::Transverse => 7,
            Orientation::Rotate270 => 8,
        }
    }

    /// True for 5..=8, where the displayed width is the stored height.
    pub fn swaps_axes(self) -> bool {
        self.exif_value() >= 5
    }

    /// The stored pixel `(x, y)` that lands at displayed `(dx, dy)` in an
    /// image stored as `w x h`.
    fn source(self, dx: usize, dy: usize, w: usize, h: usize) -> (usize, usize) {
        match self {
            Orientation::Normal => (dx, dy),
            Orientation::FlipHorizontal => (w - 1 - dx, dy),
            Orientation::Rotate180 => (w - 1 - dx, h - 1 - dy),
            Orientation::FlipVertical => (dx, h - 1 - dy),
            Orientation::Transpose => (dy, dx),
            Orientation::Rotate90 => (dy, h - 1 - dx),
            Orientation::Transverse => (w - 1 - dy, h - 1 - dx),
            Orientation::Rotate270 => (w - 1 - dy, dx),
        }
    }
}

/// Writes `src` (`[h, w, c]`, stored orientation) into `dst` upright:
/// `[w, h, c]` for orientations 5..=8, else `[h, w, c]`.
///
/// Both slices must hold `w * h * c` samples (checked by the callers, which
/// size them from the same header); extra samples are left untouched.
pub(crate) fn apply<T: Copy>(
    o: Orientation,
    src: &[T],
    w: usize,
    h: usize,
    c: usize,
    dst: &mut [T],
) {
    let (dw, dh) = if o.swaps_axes() { (h, w) } else { (w, h) };
    if src.len() < w * h * c || dst.len() < w * h * c {
        return;
    }
    for dy in 0..dh {
        for dx in 0..dw {
            let (sx, sy) = o.source(dx, dy, w, h);
            let s = (sy * w + sx) * c;
            let d = (dy * dw + dx) * c;
            dst[d..d + c].copy_from_slice(&src[s..s + c]);
        }
    }
}

/// Reads the orientation tag from an EXIF block (the TIFF structure that
/// follows `"Exif\0\0"` in a JPEG APP1 segment). `None` when absent or malformed.
pub(crate) fn from_tiff_block(tiff: &[u8]) -> Option<Orientation> {
    // The byte order mark picks how the block's integers read.
    let (u16_from, u32_from): IntReaders = match tiff.get(0..2)? {
        b"II" => (u16::from_le_bytes, u32::from_le_bytes),
        b"MM" => (u16::from_be_bytes, u32::from_be_bytes),
        _ => return None,
    };
    let u16_at = |at: usize| bytes_at(tiff, at).map(u16_from);
    let u32_at = |at: usize| bytes_at(tiff, at).map(u32_from);
    if u16_at(2)? != 42 {
        return None;
    }
    let ifd = usize::try_from(u32_at(4)?).ok()?;
    let count = usize::from(u16_at(ifd)?);
    for i in 0..count {
        let entry = ifd.checked_add(2 + i * 12)?;
        // Tag 0x0112 (Orientation), type 3 (SHORT): the value sits in the entry.
        if u16_at(entry)? == 0x0112 && u16_at(entry + 2)? == 3 {
            return Orientation::from_exif(u16_at(entry + 8)?);
        }
    }
    None
}

/// How a TIFF block's 2- and 4-byte integers read, in its byte order.
type IntReaders = (fn([u8; 2]) -> u16, fn([u8; 4]) -> u32);

/// The `N` bytes at `at` in `block`; `None` past its end.
fn bytes_at<const N: usize>(block: &[u8], at: usize) -> Option<[u8; N]> {
    block.get(at..at.checked_add(N)?)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotate90_puts_bottom_left_at_top_left() {
        // 2x1 image [a b] -> rotated 90 cw is a 1x2 column [a; b].
        let src = [1u8, 2];
        let mut dst = [0u8; 2];
        apply(Orientation::Rotate90, &src, 2, 1, 1, &mut dst);
        assert_eq!(dst, [1, 2]);
        apply(Orientation::Rotate270, &src, 2, 1, 1, &mut dst);
        assert_eq!(dst, [2, 1]);
    }

    #[test]
    fn parses_tiff_block_both_endians() {
        let le = [
            b'I', b'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0,
        ];
        assert_eq!(from_tiff_block(&le), Some(Orientation::Rotate90));
        let be = [
            b'M', b'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 3, 0, 0,
        ];
        assert_eq!(from_tiff_block(&be), Some(Orientation::Rotate180));
        assert_eq!(from_tiff_block(&le[..15]), None);
        assert_eq!(from_tiff_block(b""), None);
    }
}
