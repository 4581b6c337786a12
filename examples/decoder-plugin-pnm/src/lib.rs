//! An example third-party decoder plugin for spdl-rs: binary Netpbm images, PGM (`P5`, gray)
//! and PPM (`P6`, RGB), 8 or 16 bits per sample, as specified by netpbm's `pgm(5)` and
//! `ppm(5)` manual pages. The built-in decoders do not read them.
//!
//! A plugin is a type that implements [`spdl_io::Decoder`]: recognise the format from its
//! first bytes ([`Decoder::matches`]), read the header alone ([`Decoder::probe`]), then decode
//! into a buffer the caller gives ([`Decoder::decode_into`]), after checking the caller's
//! [`Limits`](spdl_io::Limits). Register it after the built-ins and it is picked by content:
//!
//! ```ignore
//! // (run as `tests/registry.rs`: a doctest of a cdylib crate would see two builds of spdl-io)
//! use std::sync::Arc;
//! use spdl_io::{DecodeOptions, Registry};
//!
//! let mut registry = Registry::with_defaults();
//! registry.register(Arc::new(spdl_decoder_pnm::PnmDecoder));
//! let img = registry.decode("tiny.pgm", b"P5 2 1 255 \x00\xff", &DecodeOptions::default())?;
//! assert_eq!((img.width, img.height, img.channels), (2, 1, 3)); // gray replicated to RGB
//! assert_eq!(img.as_u8().unwrap(), &[0, 0, 0, 255, 255, 255]);
//! # Ok::<(), spdl_io::Error>(())
//! ```
//!
//! Its conformance test (`tests/conformance.rs`) is one call to `spdl_testkit::assert_conforms`.
//!
//! Built as a `cdylib` (`cargo build --release -p spdl-decoder-pnm` gives
//! `target/release/libspdl_decoder_pnm.so`), the same decoder loads at run time, with no
//! rebuild of the host: `spdl load --decoder-plugin target/release/libspdl_decoder_pnm.so DIR`,
//! or `spdl_rs.io.load_decoder_plugin(path)` in Python. The last line of this file exports it.

use spdl_io::decode::color;
use spdl_io::{
    DecodeOptions, Decoder, Error, ErrorKind, ImageFormat, ImageInfo, Orientation, Result,
};

/// Decodes binary PGM (`P5`) and PPM (`P6`); plain (ASCII) Netpbm and PAM are not read.
///
/// Output follows [`DecodeOptions::color`] like the built-in decoders: gray is replicated to
/// RGB, RGB becomes gray by ITU-R 601-2 luma, RGBA gets alpha 255; samples with a maxval
/// other than 255 (or 65535) are rescaled to the full 8-bit range;
/// [`ColorMode::Unchanged`](spdl_io::ColorMode::Unchanged) keeps the source's channels and, for 16-bit files, 16-bit
/// native-endian samples.
#[derive(Debug, Clone, Copy, Default)]
pub struct PnmDecoder;

/// What the header says: where the raster starts and how it is laid out.
#[derive(Debug, Clone, Copy)]
struct Header {
    width: usize,
    height: usize,
    channels: usize,
    maxval: u32,
    raster_start: usize,
}

impl Header {
    fn bytes_per_sample(&self) -> usize {
        if self.maxval > 255 {
            2
        } else {
            1
        }
    }

    fn info(&self) -> ImageInfo {
        ImageInfo {
            format: ImageFormat::Other("PNM"),
            width: self.width,
            height: self.height,
            channels: self.channels,
            bit_depth: if self.maxval > 255 { 16 } else { 8 },
            orientation: Orientation::Normal,
        }
    }
}

fn corrupt(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Corrupt, message)
}

fn truncated(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Truncated, message)
}

/// Reads the header: magic, then width, height and maxval as decimal numbers separated by
/// whitespace and `#` comments, then exactly one whitespace byte.
fn parse_header(bytes: &[u8]) -> Result<Header> {
    let channels = match bytes.get(..2) {
        Some(b"P5") => 1,
        Some(b"P6") => 3,
        _ => return Err(corrupt("not a binary PGM/PPM file (no P5/P6 signature)")),
    };
    let mut at = 2;
    let mut fields = [0u32; 3];
    for (field, name) in fields.iter_mut().zip(["width", "height", "maxval"]) {
        // Whitespace and comments before each number.
        loop {
            match bytes.get(at) {
                Some(b) if b.is_ascii_whitespace() => at += 1,
                Some(b'#') => {
                    while bytes.get(at).is_some_and(|&b| b != b'\n' && b != b'\r') {
                        at += 1;
                    }
                }
                Some(_) => break,
                None => return Err(truncated(format!("header ends before the {name}"))),
            }
        }
        let digits = bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return Err(corrupt(format!("the {name} is not a number")));
        }
        *field = std::str::from_utf8(&bytes[at..at + digits])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| corrupt(format!("the {name} is too large")))?;
        at += digits;
    }
    let [width, height, maxval] = fields;
    if width == 0 || height == 0 {
        return Err(corrupt(format!("empty image {width}x{height}")));
    }
    if !(1..=65535).contains(&maxval) {
        return Err(corrupt(format!("maxval {maxval} is outside 1..=65535")));
    }
    match bytes.get(at) {
        Some(b) if b.is_ascii_whitespace() => {}
        Some(_) => return Err(corrupt("no whitespace after the maxval")),
        None => return Err(truncated("header ends after the maxval")),
    }
    Ok(Header {
        width: width as usize,
        height: height as usize,
        channels,
        maxval,
        raster_start: at + 1,
    })
}

impl Decoder for PnmDecoder {
    fn name(&self) -> &str {
        "pnm"
    }

    fn extensions(&self) -> Vec<String> {
        ["pgm", "ppm", "pnm"].map(String::from).to_vec()
    }

    fn matches(&self, bytes: &[u8]) -> bool {
        matches!(bytes, [b'P', b'5' | b'6', next, ..] if next.is_ascii_whitespace())
    }

    fn probe(&self, bytes: &[u8]) -> Result<ImageInfo> {
        parse_header(bytes).map(|h| h.info())
    }

    fn decode_into(&self, bytes: &[u8], opts: &DecodeOptions, out: &mut [u8]) -> Result<ImageInfo> {
        let header = parse_header(bytes)?;
        let info = header.info();
        // Limits first: nothing is read or written for an image that is too big.
        let shape = opts.output_shape(&info)?;
        spdl_io::decode::check_out_len(out, &shape)?;
        let samples = header.width * header.height * header.channels;
        let raster_len = samples * header.bytes_per_sample();
        let raster = bytes
            .get(header.raster_start..header.raster_start + raster_len)
            .ok_or_else(|| {
                truncated(format!(
                    "raster has {} of {raster_len} bytes",
                    bytes.len().saturating_sub(header.raster_start)
                ))
            })?;
        let out = &mut out[..shape.len_bytes()];
        if shape.bytes_per_sample == 2 {
            // Unchanged 16-bit: big-endian in the file, native-endian out.
            for (o, s) in out.chunks_exact_mut(2).zip(raster.chunks_exact(2)) {
                o.copy_from_slice(&u16::from_be_bytes([s[0], s[1]]).to_ne_bytes());
            }
            return Ok(info);
        }
        // One row at a time: scale to 8 bits, then convert channels.
        let mut row = vec![0u8; header.width * header.channels];
        let in_row = row.len() * header.bytes_per_sample();
        let out_row = header.width * shape.channels;
        for (src, dst) in raster
            .chunks_exact(in_row)
            .zip(out.chunks_exact_mut(out_row))
        {
            scale_to_u8(src, header.maxval, &mut row);
            color::convert_u8(&row, header.channels, dst, shape.channels);
        }
        Ok(info)
    }
}

/// Samples of `0..=maxval` (1 or 2 bytes, big-endian) to `0..=255`, rounded.
fn scale_to_u8(src: &[u8], maxval: u32, dst: &mut [u8]) {
    let scale = |v: u32| ((v.min(maxval) * 255 * 2 + maxval) / (maxval * 2)) as u8;
    match maxval {
        255 => dst.copy_from_slice(src),
        65535 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = color::u16_to_u8(u16::from_be_bytes([s[0], s[1]]));
            }
        }
        m if m > 255 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = scale(u32::from(u16::from_be_bytes([s[0], s[1]])));
            }
        }
        _ => {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = scale(u32::from(s));
            }
        }
    }
}

spdl_io::export_decoder_plugin!(PnmDecoder, "PNM");

#[cfg(test)]
mod tests {
    use spdl_io::ColorMode;

    use super::*;

    #[test]
    fn header_with_comments() {
        let h = parse_header(b"P6\n# made by hand\n3 # width\n2\n255\n").unwrap();
        assert_eq!((h.width, h.height, h.channels, h.maxval), (3, 2, 3, 255));
        assert_eq!(h.raster_start, 34);
    }

    #[test]
    fn bad_headers_are_named_errors() {
        let kind = |b: &[u8]| parse_header(b).unwrap_err().kind();
        assert_eq!(kind(b"P4 1 1\n"), ErrorKind::Corrupt);
        assert_eq!(kind(b"P5 1"), ErrorKind::Truncated);
        assert_eq!(kind(b"P5 0 1 255 "), ErrorKind::Corrupt);
        assert_eq!(kind(b"P5 1 1 70000 "), ErrorKind::Corrupt);
        assert_eq!(kind(b"P5 99999999999 1 255 "), ErrorKind::Corrupt);
    }

    #[test]
    fn low_maxval_is_rescaled() {
        let img = PnmDecoder
            .decode(
                b"P5 3 1 3 \x00\x01\x03",
                &DecodeOptions {
                    color: ColorMode::Gray,
                    ..DecodeOptions::default()
                },
            )
            .unwrap();
        assert_eq!(img.as_u8().unwrap(), &[0, 85, 255]);
    }
}
