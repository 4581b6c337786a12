//! A decoder plugin that misbehaves on purpose, to test what the host does about it. Its
//! "format" is a 4-byte tag, `MISB`, then a word saying how to misbehave:
//!
//! | after `MISB` | what the plugin does |
//! |---|---|
//! | `panic` | `probe` and `decode_into` panic with the message `told to panic` |
//! | `chan0` | `probe` reports a 2x2 image of 0 channels |
//! | `depth3` | `probe` reports a 2x2 RGB image of 3 bits per sample |
//! | `empty` | `probe` reports a 0x0 image |
//! | anything else | a 2x2 gray image of value 7 |
//!
//! `matches` panics on the bytes `MATCHPANIC`, as a careless plugin's might on odd input.

use spdl_io::{
    DecodeOptions, Decoder, Error, ErrorKind, ImageFormat, ImageInfo, Orientation, Result,
};

/// The misbehaving decoder.
#[derive(Debug, Clone, Copy, Default)]
pub struct Misbehaving;

fn header(width: usize, height: usize, channels: usize, bit_depth: u8) -> ImageInfo {
    ImageInfo {
        format: ImageFormat::Other("MISB"),
        width,
        height,
        channels,
        bit_depth,
        orientation: Orientation::Normal,
    }
}

impl Decoder for Misbehaving {
    fn name(&self) -> &str {
        "misbehaving"
    }

    fn matches(&self, bytes: &[u8]) -> bool {
        if bytes == b"MATCHPANIC" {
            panic!("matches was told to panic");
        }
        bytes.starts_with(b"MISB")
    }

    fn probe(&self, bytes: &[u8]) -> Result<ImageInfo> {
        match bytes.get(4..) {
            Some(b"panic") => panic!("told to panic"),
            Some(b"chan0") => Ok(header(2, 2, 0, 8)),
            Some(b"depth3") => Ok(header(2, 2, 3, 3)),
            Some(b"empty") => Ok(header(0, 0, 4, 8)),
            Some(_) => Ok(header(2, 2, 1, 8)),
            None => Err(Error::new(ErrorKind::Truncated, "no tag")),
        }
    }

    fn decode_into(&self, bytes: &[u8], opts: &DecodeOptions, out: &mut [u8]) -> Result<ImageInfo> {
        let info = self.probe(bytes)?;
        let shape = opts.output_shape(&info)?;
        spdl_io::decode::check_out_len(out, &shape)?;
        out[..shape.len_bytes()].fill(7);
        Ok(info)
    }
}

spdl_io::export_decoder_plugin!(Misbehaving, "MISB");
