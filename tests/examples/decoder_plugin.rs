//! A decoder for farbfeld (https://tools.suckless.org/farbfeld/): the magic `farbfeld`, width and
//! height as big-endian u32, then `[H, W, 4]` RGBA samples as big-endian u16. Registered, it is
//! picked by the file's leading bytes, like the built-in decoders.
use std::sync::Arc;

use spdl_io::decode::{check_out_len, color, Registry};
use spdl_io::{ColorMode, DecodeOptions, Decoder, Error, ErrorKind, ImageFormat, ImageInfo};
use spdl_io::{Orientation, Result};

struct Farbfeld;

impl Decoder for Farbfeld {
    fn name(&self) -> &str {
        "farbfeld"
    }

    fn extensions(&self) -> Vec<String> {
        vec!["ff".into()]
    }

    fn matches(&self, bytes: &[u8]) -> bool {
        bytes.starts_with(b"farbfeld")
    }

    // The header only: the size limits are checked before any pixel memory is taken.
    fn probe(&self, bytes: &[u8]) -> Result<ImageInfo> {
        let field = |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
        let (Some(width), Some(height)) = (field(8), field(12)) else {
            return Err(Error::new(
                ErrorKind::Truncated,
                "header shorter than 16 bytes",
            ));
        };
        if width == 0 || height == 0 {
            let message = format!("empty image {width}x{height}");
            return Err(Error::new(ErrorKind::Corrupt, message));
        }
        Ok(ImageInfo {
            format: ImageFormat::Other("farbfeld"),
            width: width as usize,
            height: height as usize,
            channels: 4,
            bit_depth: 16,
            orientation: Orientation::Normal,
        })
    }

    // Writes `opts.output_shape(&info)` as `[H, W, C]`: 16-bit native-endian samples for
    // `ColorMode::Unchanged`, else 8-bit samples in the channels asked for.
    fn decode_into(&self, bytes: &[u8], opts: &DecodeOptions, out: &mut [u8]) -> Result<ImageInfo> {
        let info = self.probe(bytes)?;
        let shape = opts.output_shape(&info)?; // the limits, before sizes are multiplied
        check_out_len(out, &shape)?;
        let raster = bytes
            .get(16..16 + info.width * info.height * 8)
            .ok_or_else(|| Error::new(ErrorKind::Truncated, "raster cut short"))?;
        let samples = raster
            .chunks_exact(2)
            .map(|s| u16::from_be_bytes([s[0], s[1]]));
        if shape.bytes_per_sample == 2 {
            for (o, v) in out.chunks_exact_mut(2).zip(samples) {
                o.copy_from_slice(&v.to_ne_bytes());
            }
        } else {
            let rgba: Vec<u8> = samples.map(color::u16_to_u8).collect();
            color::convert_u8(&rgba, 4, &mut out[..shape.len_bytes()], shape.channels);
        }
        Ok(info)
    }
}

fn main() -> Result<()> {
    let mut registry = Registry::with_defaults();
    // Tried before the decoders registered earlier.
    registry.register(Arc::new(Farbfeld));
    // A 2x1 image: opaque red, then white at half opacity.
    let mut file = b"farbfeld".to_vec();
    for v in [2u32, 1] {
        file.extend_from_slice(&v.to_be_bytes());
    }
    for v in [65535u16, 0, 0, 65535, 65535, 65535, 65535, 32768] {
        file.extend_from_slice(&v.to_be_bytes());
    }
    let rgb = DecodeOptions {
        color: ColorMode::Rgb,
        ..DecodeOptions::default()
    };
    let image = registry.decode("two.ff", &file, &rgb)?;
    assert_eq!(image.shape(), [1, 2, 3]);
    assert_eq!(image.as_u8(), Some(&[255, 0, 0, 255, 255, 255][..]));
    // A file cut short is an error naming the sample, never a panic or a partial image.
    let error = registry.decode("cut.ff", &file[..20], &rgb).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Truncated);
    println!("{image:?}\n{error}");
    Ok(())
}
