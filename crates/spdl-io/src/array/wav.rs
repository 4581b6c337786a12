//! RIFF/WAVE audio: the header parsed, the samples located in place.
//!
//! Reads `fmt ` and `data` chunks (other chunks are skipped) of PCM (format 1: 8-bit
//! unsigned, 16/24/32-bit signed), IEEE float (format 3: 32/64-bit) and
//! `WAVE_FORMAT_EXTENSIBLE` (0xFFFE) with a PCM or float sub-format, little-endian (`RIFF`).
//! Samples are interleaved: frame `t` holds one sample per channel, so the payload is an
//! array `[frames, channels]`. A `data` chunk that declares more bytes than are present (a
//! file cut short, or a stream that wrote `0xFFFFFFFF`) yields the whole frames present.
//! Spec: Microsoft "Multimedia Programming Interface and Data Specifications 1.0" and
//! `WAVEFORMATEXTENSIBLE`.
//!
//! Mirrors SPDL's `spdl.io.parse_wav` / `load_wav` (SPDL reads 8/16/32/64-bit only; 24-bit
//! is an addition here, see [`WavSamples::to_i32`]).
//!
//! ```
//! use spdl_io::array::wav;
//!
//! # fn main() -> Result<(), spdl_io::Error> {
//! // 16-bit mono, 8 kHz, 3 samples.
//! let mut f = b"RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0\x40\x1f\0\0\x80\x3e\0\0\x02\0\x10\0data\x06\0\0\0".to_vec();
//! f.extend([1, 0, 2, 0, 0xff, 0xff]);
//! let h = wav::parse_wav(&f)?;
//! assert_eq!((h.sample_rate, h.num_channels, h.bits_per_sample), (8000, 1, 16));
//! let s = wav::load_wav(&f, None, None)?;
//! assert_eq!((s.frames, s.bytes), (3, &[1, 0, 2, 0, 0xff, 0xff][..]));
//! # Ok(())
//! # }
//! ```

use super::{corrupt, le_u16, le_u32, truncated, unsupported};
use crate::error::{Error, ErrorKind, Result};

/// Element type of the samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleFormat {
    /// 8-bit unsigned PCM (silence is 128).
    U8,
    /// 16-bit signed PCM.
    I16,
    /// 24-bit signed PCM, packed in 3 bytes (no NumPy type: see [`WavSamples::to_i32`]).
    I24,
    /// 32-bit signed PCM.
    I32,
    /// 32-bit IEEE float.
    F32,
    /// 64-bit IEEE float.
    F64,
}

impl SampleFormat {
    /// Bytes per sample.
    pub fn size(self) -> usize {
        match self {
            SampleFormat::U8 => 1,
            SampleFormat::I16 => 2,
            SampleFormat::I24 => 3,
            SampleFormat::I32 | SampleFormat::F32 => 4,
            SampleFormat::F64 => 8,
        }
    }

    /// NumPy's type string (`"|u1"`, `"<i2"`, `"<i4"`, `"<f4"`, `"<f8"`); `None` for 24-bit.
    pub fn typestr(self) -> Option<&'static str> {
        match self {
            SampleFormat::U8 => Some("|u1"),
            SampleFormat::I16 => Some("<i2"),
            SampleFormat::I24 => None,
            SampleFormat::I32 => Some("<i4"),
            SampleFormat::F32 => Some("<f4"),
            SampleFormat::F64 => Some("<f8"),
        }
    }
}

/// What a WAV header says (the fields of SPDL's `WAVHeader`, plus where the samples are).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WavHeader {
    /// Format code as stored: 1 (PCM), 3 (IEEE float) or 0xFFFE (extensible).
    pub audio_format: u16,
    /// Channels per frame.
    pub num_channels: u16,
    /// Frames per second (Hz).
    pub sample_rate: u32,
    /// Bytes per second as stored (`sample_rate * block_align`).
    pub byte_rate: u32,
    /// Bytes per frame (`num_channels * bits_per_sample / 8`).
    pub block_align: u16,
    /// Bits per sample (container size).
    pub bits_per_sample: u16,
    /// Size of the `data` chunk as declared, in bytes.
    pub data_size: u32,
    /// The element type the format code and bit depth resolve to.
    pub sample_format: SampleFormat,
    /// Offset of the first sample from the start of the file.
    pub data_offset: usize,
    /// Bytes of whole frames present (`data_size`, or less if the file is cut short).
    pub available_bytes: usize,
}

/// Samples in place: `frames` frames of `header.num_channels` samples, borrowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WavSamples<'a> {
    /// The parsed header.
    pub header: WavHeader,
    /// Number of frames in the window.
    pub frames: usize,
    /// Offset of the window's first byte from the start of the file.
    pub offset: usize,
    /// The window's bytes, `frames * block_align` of them, interleaved little-endian samples.
    pub bytes: &'a [u8],
}

impl WavSamples<'_> {
    /// The samples as `i32`, `[frames, channels]` row-major, for 24-bit PCM: each value is
    /// shifted to the top 24 bits (full scale is that of `i32`, as `scipy.io.wavfile` and
    /// `soundfile` return 24-bit data). `None` for other formats (use `bytes`).
    pub fn to_i32(&self) -> Option<Vec<i32>> {
        (self.header.sample_format == SampleFormat::I24).then(|| {
            self.bytes
                .chunks_exact(3)
                .map(|b| i32::from_le_bytes([0, b[0], b[1], b[2]]))
                .collect()
        })
    }
}

const SUBFORMAT_TAIL: [u8; 14] = [
    0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71,
];

/// Parses the header of WAV `data`: the `fmt ` chunk and the position of the `data` chunk.
///
/// Errors: `Empty`; `UnknownFormat` (not `RIFF....WAVE`); `Unsupported` (big-endian `RIFX`,
/// `RF64`, compressed formats such as ADPCM or mu-law, other bit depths); `Truncated` (the
/// data ends before the `data` chunk); `Corrupt` (a `fmt ` chunk that is too small or
/// inconsistent: zero channels or rate, `block_align` != `channels * bits / 8`; `data`
/// before `fmt `).
pub fn parse_wav(data: &[u8]) -> Result<WavHeader> {
    if data.is_empty() {
        return Err(Error::new(ErrorKind::Empty, "no WAV data (0 bytes)"));
    }
    if data.len() < 12 {
        return Err(if b"RIFF".starts_with(&data[..data.len().min(4)]) {
            truncated("the WAV data ends inside the RIFF header")
        } else {
            Error::new(ErrorKind::UnknownFormat, "not a WAV file (no RIFF header)")
        });
    }
    match (&data[..4], &data[8..12]) {
        (b"RIFF", b"WAVE") => {}
        (b"RIFX" | b"RF64", b"WAVE") => {
            return Err(unsupported(format!(
                "{} WAV files are not supported (little-endian RIFF only)",
                String::from_utf8_lossy(&data[..4])
            )))
        }
        _ => {
            return Err(Error::new(
                ErrorKind::UnknownFormat,
                "not a WAV file (no RIFF....WAVE header)",
            ))
        }
    }
    let mut fmt: Option<(u16, u16, u32, u32, u16, u16, SampleFormat)> = None;
    let mut at = 12usize;
    loop {
        if at + 8 > data.len() {
            return Err(truncated(if fmt.is_none() {
                "the WAV data ends before its fmt chunk"
            } else {
                "the WAV data ends before its data chunk"
            }));
        }
        let id = &data[at..at + 4];
        let size = le_u32(data, at + 4);
        let body = at + 8;
        match id {
            b"fmt " => {
                let chunk = data
                    .get(body..body + size as usize)
                    .ok_or_else(|| truncated("the WAV fmt chunk is cut short"))?;
                fmt = Some(parse_fmt(chunk)?);
            }
            b"data" => {
                let Some((
                    audio_format,
                    num_channels,
                    sample_rate,
                    byte_rate,
                    block_align,
                    bits,
                    sample_format,
                )) = fmt
                else {
                    return Err(corrupt("the WAV data chunk comes before the fmt chunk"));
                };
                let present = (data.len() - body).min(size as usize);
                return Ok(WavHeader {
                    audio_format,
                    num_channels,
                    sample_rate,
                    byte_rate,
                    block_align,
                    bits_per_sample: bits,
                    data_size: size,
                    sample_format,
                    data_offset: body,
                    available_bytes: present - present % block_align as usize,
                });
            }
            _ => {}
        }
        // Chunks are padded to an even size.
        at = body
            .checked_add(size as usize + (size as usize & 1))
            .ok_or_else(|| truncated("a WAV chunk extends past the end of the data"))?;
    }
}

/// `(format, channels, rate, byte rate, block align, bits, sample format)` of a `fmt ` chunk.
fn parse_fmt(c: &[u8]) -> Result<(u16, u16, u32, u32, u16, u16, SampleFormat)> {
    if c.len() < 16 {
        return Err(corrupt(format!(
            "the WAV fmt chunk has {} bytes, at least 16 expected",
            c.len()
        )));
    }
    let audio_format = le_u16(c, 0);
    let channels = le_u16(c, 2);
    let rate = le_u32(c, 4);
    let byte_rate = le_u32(c, 8);
    let block_align = le_u16(c, 12);
    let bits = le_u16(c, 14);
    let code = if audio_format == 0xFFFE {
        if c.len() < 40 || c[26..40] != SUBFORMAT_TAIL {
            return Err(corrupt(
                "WAVE_FORMAT_EXTENSIBLE without a valid sub-format GUID",
            ));
        }
        le_u16(c, 24)
    } else {
        audio_format
    };
    let sample_format = match (code, bits) {
        (1, 8) => SampleFormat::U8,
        (1, 16) => SampleFormat::I16,
        (1, 24) => SampleFormat::I24,
        (1, 32) => SampleFormat::I32,
        (3, 32) => SampleFormat::F32,
        (3, 64) => SampleFormat::F64,
        (1 | 3, _) => {
            return Err(unsupported(format!(
                "{bits}-bit {} WAV samples",
                if code == 1 { "PCM" } else { "float" }
            )))
        }
        _ => {
            return Err(unsupported(format!(
                "WAV format code {code:#x} (PCM and IEEE float are supported)"
            )))
        }
    };
    if channels == 0 || rate == 0 {
        return Err(corrupt(format!(
            "WAV header with {channels} channels at {rate} Hz"
        )));
    }
    if block_align as usize != channels as usize * sample_format.size() {
        return Err(corrupt(format!(
            "WAV block_align {block_align} != {channels} channels x {} bytes",
            sample_format.size()
        )));
    }
    Ok((
        audio_format,
        channels,
        rate,
        byte_rate,
        block_align,
        bits,
        sample_format,
    ))
}

/// The samples of WAV `data` in the window `[time_offset_seconds, + duration_seconds)` (from
/// the start / to the end when `None`), as whole frames borrowed from `data`. The start frame
/// is `floor(offset * rate)`, the frame count `floor(duration * rate)`, clipped to the end.
///
/// Errors: those of [`parse_wav`]; `InvalidArgument` for a negative or non-finite offset or
/// duration, or an offset at or past the end of the audio.
///
/// Mirrors SPDL's `spdl.io.load_wav`.
pub fn load_wav(
    data: &[u8],
    time_offset_seconds: Option<f64>,
    duration_seconds: Option<f64>,
) -> Result<WavSamples<'_>> {
    let header = parse_wav(data)?;
    let align = header.block_align as usize;
    let total = header.available_bytes / align;
    let (start, frames) = if time_offset_seconds.is_none() && duration_seconds.is_none() {
        (0, total)
    } else {
        let offset = time_offset_seconds.unwrap_or(0.0);
        let invalid = |m: String| Error::new(ErrorKind::InvalidArgument, m);
        if !offset.is_finite() || offset < 0.0 {
            return Err(invalid(format!(
                "time_offset_seconds must be finite and non-negative, got {offset}"
            )));
        }
        // `as` saturates: a huge offset is simply past the end.
        let start = (offset * header.sample_rate as f64) as u64;
        if start >= total as u64 {
            return Err(invalid(format!(
                "time_offset_seconds {offset} is at or past the end of the audio ({total} frames at {} Hz)",
                header.sample_rate
            )));
        }
        let start = start as usize;
        let frames = match duration_seconds {
            None => total - start,
            Some(d) if d.is_finite() && d >= 0.0 => {
                ((d * header.sample_rate as f64) as u64).min((total - start) as u64) as usize
            }
            Some(d) => {
                return Err(invalid(format!(
                    "duration_seconds must be finite and non-negative, got {d}"
                )))
            }
        };
        (start, frames)
    };
    let offset = header.data_offset + start * align;
    Ok(WavSamples {
        frames,
        offset,
        bytes: &data[offset..offset + frames * align],
        header,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(format: u16, channels: u16, bits: u16, payload: &[u8], extra_chunk: bool) -> Vec<u8> {
        let align = channels * bits / 8;
        let mut f = b"RIFF\0\0\0\0WAVE".to_vec();
        if extra_chunk {
            f.extend(b"LIST\x03\0\0\0abc\0");
        }
        f.extend(b"fmt \x10\0\0\0");
        f.extend(format.to_le_bytes());
        f.extend(channels.to_le_bytes());
        f.extend(100u32.to_le_bytes());
        f.extend((100 * align as u32).to_le_bytes());
        f.extend(align.to_le_bytes());
        f.extend(bits.to_le_bytes());
        f.extend(b"data");
        f.extend((payload.len() as u32).to_le_bytes());
        f.extend(payload);
        f
    }

    #[test]
    fn windows_in_frames() {
        let payload: Vec<u8> = (0..200u16).flat_map(|v| v.to_le_bytes()).collect();
        let f = wav(1, 2, 16, &payload, true);
        let s = load_wav(&f, Some(0.5), Some(0.2)).unwrap();
        assert_eq!(s.frames, 20);
        // Frame 50, channel 0 is sample 100.
        assert_eq!(&s.bytes[..2], 100u16.to_le_bytes());
        assert_eq!(load_wav(&f, Some(0.99), None).unwrap().frames, 1);
        assert_eq!(load_wav(&f, None, Some(100.0)).unwrap().frames, 100);
        for (o, d) in [
            (Some(1.0), None),
            (Some(-0.1), None),
            (None, Some(f64::NAN)),
        ] {
            assert_eq!(
                load_wav(&f, o, d).unwrap_err().kind(),
                ErrorKind::InvalidArgument
            );
        }
        // Cut mid-frame: whole frames only.
        let cut = load_wav(&f[..f.len() - 3], None, None).unwrap();
        assert_eq!(cut.frames, 99);
    }

    #[test]
    fn twenty_four_bit_is_left_justified() {
        let f = wav(1, 1, 24, &[0xff, 0xff, 0x7f, 0x00, 0x00, 0x80], false);
        let s = load_wav(&f, None, None).unwrap();
        assert_eq!(s.to_i32().unwrap(), [0x7fff_ff00, i32::MIN]);
    }

    #[test]
    fn bad_headers() {
        let ok = wav(1, 1, 16, &[0, 0], false);
        let cases: Vec<(Vec<u8>, ErrorKind)> = vec![
            (vec![], ErrorKind::Empty),
            (b"RIFF\0\0".to_vec(), ErrorKind::Truncated),
            (b"OggS............".to_vec(), ErrorKind::UnknownFormat),
            (ok[..30].to_vec(), ErrorKind::Truncated),
            (ok[..40].to_vec(), ErrorKind::Truncated),
            (wav(2, 1, 4, &[0], false), ErrorKind::Unsupported),
            (wav(1, 1, 12, &[0, 0], false), ErrorKind::Unsupported),
            (wav(3, 1, 16, &[0, 0], false), ErrorKind::Unsupported),
            (wav(1, 0, 16, &[0, 0], false), ErrorKind::Corrupt),
            ([b"RIFX", &ok[4..]].concat(), ErrorKind::Unsupported),
        ];
        for (bytes, kind) in cases {
            assert_eq!(parse_wav(&bytes).unwrap_err().kind(), kind, "{bytes:?}");
        }
        let mut misaligned = ok.clone();
        misaligned[32] = 3; // block_align
        assert_eq!(
            parse_wav(&misaligned).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
    }
}
