//! A small, bounds-checked JPEG marker walker shared by both JPEG backends:
//! frame size, EXIF orientation, Adobe APP14, coding type, and the
//! "does the file really end" check that libjpeg-turbo only warns about.

use super::orientation::{self, Orientation};
use crate::error::{Error, ErrorKind, Result};

/// What the markers before the first scan say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JpegHeader {
    pub(crate) width: usize,
    pub(crate) height: usize,
    pub(crate) components: usize,
    pub(crate) precision: u8,
    pub(crate) arithmetic: bool,
    pub(crate) progressive: bool,
    /// Adobe APP14 present (its CMYK is stored inverted, as Photoshop writes it).
    pub(crate) adobe: bool,
    pub(crate) orientation: Orientation,
    /// Offset of the first SOS marker.
    pub(crate) first_scan: usize,
}

fn truncated(msg: &str) -> Error {
    Error::new(ErrorKind::Truncated, msg)
}

fn be16(bytes: &[u8], at: usize) -> Option<usize> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(usize::from(u16::from_be_bytes([b[0], b[1]])))
}

/// Markers without a length field: TEM, RST0..7, SOI, EOI.
fn standalone(marker: u8) -> bool {
    marker == 0x01 || (0xD0..=0xD9).contains(&marker)
}

/// Reads the header up to the first scan (SOS).
///
/// # Errors
/// [`ErrorKind::Truncated`] when the data ends before a frame header or scan
/// ("no scan data"); [`ErrorKind::Corrupt`] for a malformed segment or a zero size.
pub(crate) fn parse_header(bytes: &[u8]) -> Result<JpegHeader> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return Err(Error::new(ErrorKind::Corrupt, "not a JPEG (no SOI marker)"));
    }
    let mut frame: Option<(usize, usize, usize, u8, u8)> = None;
    let mut adobe = false;
    let mut orientation = None;
    let mut pos = 2;
    loop {
        // Markers are 0xFF followed by a code; extra 0xFF are fill bytes.
        while bytes.get(pos) == Some(&0xFF) && bytes.get(pos + 1) == Some(&0xFF) {
            pos += 1;
        }
        let (Some(&0xFF), Some(&marker)) = (bytes.get(pos), bytes.get(pos + 1)) else {
            return Err(match (bytes.get(pos), frame) {
                (None, None) => truncated("data ends before the frame header (no SOF)"),
                (None, Some(_)) => truncated("no scan data (file ends before SOS)"),
                _ => Error::new(
                    ErrorKind::Corrupt,
                    format!("expected a marker at byte {pos}"),
                ),
            });
        };
        if standalone(marker) {
            if marker == 0xD9 {
                return Err(truncated("no scan data (EOI before SOS)"));
            }
            pos += 2;
            continue;
        }
        let Some(len) = be16(bytes, pos + 2) else {
            return Err(truncated("data ends inside a marker segment"));
        };
        let body = pos + 4;
        let end = pos + 2 + len;
        if len < 2 || end > bytes.len() {
            return Err(truncated("data ends inside a marker segment"));
        }
        let payload = &bytes[body..end];
        match marker {
            // SOF0..15 except DHT (C4), JPG (C8) and DAC (CC).
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                let (Some(&precision), Some(h), Some(w), Some(&n)) = (
                    payload.first(),
                    be16(payload, 1),
                    be16(payload, 3),
                    payload.get(5),
                ) else {
                    return Err(Error::new(ErrorKind::Corrupt, "short frame header (SOF)"));
                };
                frame = Some((w, h, usize::from(n), precision, marker));
            }
            0xE1 if orientation.is_none() => {
                if let Some(tiff) = payload.strip_prefix(b"Exif\0\0") {
                    orientation = orientation::from_tiff_block(tiff);
                }
            }
            0xEE if payload.starts_with(b"Adobe") => adobe = true,
            0xDA => {
                let Some((width, height, components, precision, sof)) = frame else {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        "scan (SOS) before frame header (SOF)",
                    ));
                };
                if width == 0 || height == 0 {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        format!("frame header claims a {width}x{height} image"),
                    ));
                }
                // ITU T.81 B.2.2: Nf is 1..=255 (found by the jpeg_markers fuzz target).
                if components == 0 {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        "frame header (SOF) has no image component",
                    ));
                }
                return Ok(JpegHeader {
                    width,
                    height,
                    components,
                    precision,
                    arithmetic: sof >= 0xC9,
                    progressive: matches!(sof, 0xC2 | 0xC6 | 0xCA | 0xCE),
                    adobe,
                    orientation: orientation.unwrap_or_default(),
                    first_scan: pos,
                });
            }
            _ => {}
        }
        pos = end;
    }
}

/// Rejects a header that claims far more pixels than the data can hold: a
/// baseline Huffman scan spends at least 2 bits (DC code + EOB) on every
/// 8x8 luma block. Guards the allocation when [`crate::Limits`] are raised.
/// (Progressive and arithmetic scans can be smaller; they are not checked.)
///
/// # Errors
/// [`ErrorKind::Truncated`] naming the claimed size.
pub(crate) fn check_plausible_size(bytes: &[u8], h: &JpegHeader) -> Result<()> {
    if h.progressive || h.arithmetic {
        return Ok(());
    }
    let blocks = (h.width as u64).div_ceil(8) * (h.height as u64).div_ceil(8);
    let scan_bytes = bytes.len().saturating_sub(h.first_scan) as u64;
    if scan_bytes.saturating_mul(4) < blocks {
        return Err(truncated(&format!(
            "header claims {}x{} but only {scan_bytes} bytes of scan data follow (at least {} needed)",
            h.width,
            h.height,
            blocks.div_ceil(4)
        )));
    }
    Ok(())
}

/// Checks that the entropy-coded data after `first_scan` reaches an EOI
/// marker (bytes after EOI are allowed).
///
/// # Errors
/// [`ErrorKind::Truncated`], "premature end of JPEG file", when the data
/// stops before EOI: what libjpeg-turbo reports only as a warning before
/// filling the rest with gray.
pub(crate) fn check_complete(bytes: &[u8], first_scan: usize) -> Result<()> {
    let premature = || truncated("premature end of JPEG file (no EOI marker)");
    let mut pos = first_scan;
    loop {
        let Some(&marker) = bytes.get(pos + 1) else {
            return Err(premature());
        };
        match marker {
            0xD9 => return Ok(()),
            0xFF => pos += 1,
            m if standalone(m) => pos += 2,
            _ => {
                let Some(len) = be16(bytes, pos + 2) else {
                    return Err(premature());
                };
                pos += 2 + len;
                if marker == 0xDA {
                    // Entropy-coded data: skip to the next 0xFF that is not
                    // a stuffed 0x00 or a restart marker.
                    loop {
                        // memchr: SIMD, this scan covers the whole file (a byte-by-byte
                        // search here was 4% of a large-photo run's CPU).
                        let Some(off) = bytes.get(pos..).and_then(|s| memchr::memchr(0xFF, s))
                        else {
                            return Err(premature());
                        };
                        pos += off;
                        match bytes.get(pos + 1) {
                            None => return Err(premature()),
                            Some(0x00 | 0xD0..=0xD7) => pos += 2,
                            Some(_) => break,
                        }
                    }
                }
            }
        }
        if bytes.get(pos) != Some(&0xFF) {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!("expected a marker at byte {pos}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_short_inputs_without_panic() {
        for len in 0..8 {
            let bytes = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F'];
            let _ = parse_header(&bytes[..len]);
        }
        assert_eq!(
            parse_header(&[0xFF, 0xD8]).unwrap_err().kind(),
            ErrorKind::Truncated
        );
    }

    /// Fuzz regression (`fuzz/` target `jpeg_markers`): a frame header with zero components
    /// was accepted and passed on to the decoders.
    #[test]
    fn rejects_a_frame_without_components() {
        let bytes = include_bytes!("../../tests/fixtures/fuzz/jpeg_sof_zero_components.jpg");
        let err = parse_header(bytes).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(err.to_string().contains("no image component"), "{err}");
    }
}
