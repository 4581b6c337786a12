//! MP4/MKV H.264 and HEVC packets (length-prefixed NAL units, parameter sets in the
//! `avcC` / `hvcC` extradata) to the Annex-B byte stream (start codes, parameter sets in
//! band) that NVDEC's parser reads: the job of FFmpeg's `h264_mp4toannexb` /
//! `hevc_mp4toannexb` bitstream filters, which SPDL applies before NVDEC. Formats:
//! ISO/IEC 14496-15 (`AVCDecoderConfigurationRecord` 5.3.3.1, `HEVCDecoderConfigurationRecord`
//! 8.3.3.1). Pure Rust: needs no GPU.

use crate::error::{Error, Result};

const START_CODE: [u8; 4] = [0, 0, 0, 1];

/// A converter for one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnexB {
    /// Bytes of each NAL unit's length prefix (1, 2 or 4).
    length_size: usize,
    /// The parameter sets (SPS, PPS; VPS for HEVC), each after a start code.
    header: Vec<u8>,
    sent_header: bool,
}

impl AnnexB {
    /// The converter for `codec` (FFmpeg's name) with the stream's `extradata`; `Ok(None)`
    /// when the packets need no conversion (another codec, no extradata, or extradata
    /// already in Annex-B form as from MPEG-TS).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming what is wrong in a truncated or malformed `avcC` /
    /// `hvcC` record.
    pub fn new(codec: &str, extradata: &[u8]) -> Result<Option<AnnexB>> {
        let is_annexb = extradata.starts_with(&[0, 0, 1]) || extradata.starts_with(&[0, 0, 0, 1]);
        if extradata.is_empty() || is_annexb {
            return Ok(None);
        }
        match codec {
            "h264" => Self::from_avcc(extradata).map(Some),
            "hevc" => Self::from_hvcc(extradata).map(Some),
            _ => Ok(None),
        }
    }

    /// The fixed part of a decoder configuration record `x` (`record`, stored as `box_name`):
    /// checks version 1 and at least `min_len` bytes, and reads the NAL length size from the
    /// low 2 bits of byte `fixed - 1`. Returns it and a reader at `fixed`, where the
    /// parameter sets begin.
    fn record_start<'a>(
        x: &'a [u8],
        box_name: &str,
        record: &str,
        min_len: usize,
        fixed: usize,
    ) -> Result<(usize, Reader<'a>)> {
        if x.len() < min_len || x[0] != 1 {
            return Err(Error::InvalidArgument(format!(
                "{box_name} extradata: not an {record} (version 1, >= {min_len} bytes)"
            )));
        }
        let length_size = usize::from(x[fixed - 1] & 3) + 1;
        Ok((length_size, Reader { buf: x, pos: fixed }))
    }

    fn from_avcc(x: &[u8]) -> Result<AnnexB> {
        let bad = |what: &str| Error::InvalidArgument(format!("avcC extradata: {what}"));
        let (length_size, mut r) =
            Self::record_start(x, "avcC", "AVCDecoderConfigurationRecord", 7, 5)?;
        let mut header = Vec::new();
        let sps = r.u8().ok_or_else(|| bad("truncated"))? & 0x1f;
        for _ in 0..sps {
            r.nal_into(&mut header)
                .ok_or_else(|| bad("truncated SPS"))?;
        }
        let pps = r.u8().ok_or_else(|| bad("truncated"))?;
        for _ in 0..pps {
            r.nal_into(&mut header)
                .ok_or_else(|| bad("truncated PPS"))?;
        }
        Self::checked(length_size, header)
    }

    fn from_hvcc(x: &[u8]) -> Result<AnnexB> {
        let bad = |what: &str| Error::InvalidArgument(format!("hvcC extradata: {what}"));
        let (length_size, mut r) =
            Self::record_start(x, "hvcC", "HEVCDecoderConfigurationRecord", 23, 22)?;
        let mut header = Vec::new();
        let arrays = r.u8().ok_or_else(|| bad("truncated"))?;
        for _ in 0..arrays {
            r.u8().ok_or_else(|| bad("truncated array"))?; // NAL unit type
            let n = r.u16().ok_or_else(|| bad("truncated array"))?;
            for _ in 0..n {
                r.nal_into(&mut header)
                    .ok_or_else(|| bad("truncated parameter set"))?;
            }
        }
        Self::checked(length_size, header)
    }

    fn checked(length_size: usize, header: Vec<u8>) -> Result<AnnexB> {
        if length_size == 3 {
            return Err(Error::InvalidArgument(
                "NAL length size 3 is not allowed (ISO/IEC 14496-15)".into(),
            ));
        }
        Ok(AnnexB {
            length_size,
            header,
            sent_header: false,
        })
    }

    /// Bytes of each NAL unit's length prefix, from the extradata.
    pub fn length_size(&self) -> usize {
        self.length_size
    }

    /// One packet in Annex-B form; the first packet converted gets the parameter sets in
    /// front (as the bitstream filters do before the first key frame).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when a NAL unit's length runs past the packet's end.
    pub fn convert(&mut self, packet: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(packet.len() + self.header.len() + 16);
        if !self.sent_header {
            out.extend_from_slice(&self.header);
            self.sent_header = true;
        }
        let mut pos = 0;
        while pos < packet.len() {
            let Some(len_bytes) = packet.get(pos..pos + self.length_size) else {
                return Err(Error::InvalidArgument(format!(
                    "packet of {} bytes: truncated NAL length at byte {pos}",
                    packet.len()
                )));
            };
            let len = len_bytes
                .iter()
                .fold(0usize, |a, &b| (a << 8) | usize::from(b));
            pos += self.length_size;
            let Some(nal) = packet.get(pos..pos.saturating_add(len)) else {
                return Err(Error::InvalidArgument(format!(
                    "packet of {} bytes: NAL unit of {len} bytes at byte {pos} runs past the end",
                    packet.len()
                )));
            };
            out.extend_from_slice(&START_CODE);
            out.extend_from_slice(nal);
            pos += len;
        }
        Ok(out)
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from(self.u8()?) << 8 | u16::from(self.u8()?))
    }

    /// A 16-bit length and that many bytes, appended after a start code.
    fn nal_into(&mut self, out: &mut Vec<u8>) -> Option<()> {
        let n = usize::from(self.u16()?);
        let nal = self.buf.get(self.pos..self.pos + n)?;
        self.pos += n;
        out.extend_from_slice(&START_CODE);
        out.extend_from_slice(nal);
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // avcC: version 1, profile 100, compat 0, level 31, 4-byte lengths, 1 SPS, 1 PPS.
    const AVCC: [u8; 18] = [
        1, 100, 0, 31, 0xff, 0xe1, 0, 3, 0x67, 0xaa, 0xbb, 1, 0, 3, 0x68, 0xcc, 0xdd, 0,
    ];

    #[test]
    fn avcc_packets_become_annexb_with_parameter_sets_first() {
        let mut c = AnnexB::new("h264", &AVCC[..17]).unwrap().unwrap();
        assert_eq!(c.length_size(), 4);
        // Two NAL units: an IDR slice (3 bytes) and an SEI (1 byte).
        let pkt = [0, 0, 0, 3, 0x65, 1, 2, 0, 0, 0, 1, 0x06];
        assert_eq!(
            c.convert(&pkt).unwrap(),
            [
                0, 0, 0, 1, 0x67, 0xaa, 0xbb, 0, 0, 0, 1, 0x68, 0xcc, 0xdd, 0, 0, 0, 1, 0x65, 1, 2,
                0, 0, 0, 1, 0x06
            ]
        );
        // Later packets: no parameter sets.
        assert_eq!(
            c.convert(&[0, 0, 0, 2, 0x41, 9]).unwrap(),
            [0, 0, 0, 1, 0x41, 9]
        );
        let e = c.convert(&[0, 0, 0, 9, 0x41]).unwrap_err().to_string();
        assert!(e.contains("runs past the end"), "{e}");
        let e = c.convert(&[0, 0]).unwrap_err().to_string();
        assert!(e.contains("truncated NAL length"), "{e}");
    }

    #[test]
    fn hvcc_arrays_are_read() {
        let mut x = vec![1u8; 21];
        x.push(0xf3); // 4-byte lengths
        x.push(2); // two arrays
        x.extend_from_slice(&[32, 0, 1, 0, 2, 0x40, 0x01]); // VPS
        x.extend_from_slice(&[33, 0, 1, 0, 2, 0x42, 0x01]); // SPS
        let mut c = AnnexB::new("hevc", &x).unwrap().unwrap();
        assert_eq!(
            c.convert(&[0, 0, 0, 1, 0x26]).unwrap(),
            [0, 0, 0, 1, 0x40, 1, 0, 0, 0, 1, 0x42, 1, 0, 0, 0, 1, 0x26]
        );
        x.truncate(x.len() - 1);
        assert!(AnnexB::new("hevc", &x)
            .unwrap_err()
            .to_string()
            .contains("truncated parameter set"));
    }

    #[test]
    fn other_streams_pass_through_and_bad_records_are_named() {
        assert_eq!(AnnexB::new("vp9", &[1, 2, 3]).unwrap(), None);
        assert_eq!(AnnexB::new("h264", &[]).unwrap(), None);
        assert_eq!(AnnexB::new("h264", &[0, 0, 0, 1, 0x67]).unwrap(), None);
        assert!(AnnexB::new("h264", &[2, 0, 0, 0, 0, 0, 0])
            .unwrap_err()
            .to_string()
            .contains("avcC extradata"));
        assert!(AnnexB::new("h264", &AVCC[..9])
            .unwrap_err()
            .to_string()
            .contains("truncated SPS"));
    }
}
