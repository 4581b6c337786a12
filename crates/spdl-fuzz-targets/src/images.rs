//! The image targets: the JPEG marker walker, the libjpeg-turbo path, and the image-rs path
//! (all formats by magic bytes, and one target per format it is built with).

use std::borrow::Cow;

use spdl_io::decode::{sniff, Decoder, ImageFormat, ImageRsDecoder, Region, TurboJpegDecoder};
use spdl_io::{ImageLoader, RandomResizedCrop, SampleContext, Transform};

use crate::common;

/// `jpeg_markers`: the marker walker both JPEG backends share (header, size plausibility,
/// completeness); it panics itself when a header it accepts breaks an invariant the decoders
/// rely on. Accepted: the header parsed.
pub fn jpeg_markers(data: &[u8]) -> bool {
    spdl_io::decode::fuzzing::jpeg_markers(data)
}

/// `turbojpeg`: probe, full decode (strict and lenient, every colour mode), region decode
/// (DCT-domain cropping) at a region chosen by the input, and the loader's scaled path (region
/// decode + resize to a random crop). The first 5 bytes choose the options and the region;
/// the rest is the file. Accepted: the full decode succeeded.
pub fn turbojpeg(data: &[u8]) -> bool {
    let Some((params, bytes)) = data.split_first_chunk::<5>() else {
        return false;
    };
    let decoder = TurboJpegDecoder::new();
    let opts = common::options(params[0]);
    let Ok(info) = decoder.probe(bytes) else {
        // Whatever probe refuses, decode must refuse too, without panicking.
        return decoder.decode(bytes, &opts).is_ok();
    };
    let decoded = decoder.decode(bytes, &opts);
    if let Ok(img) = &decoded {
        common::check_image(img);
    }
    let (w, h) = if opts.keep_orientation {
        (info.width, info.height)
    } else {
        info.display_size()
    };
    let pick = |b: u8, n: usize| n.saturating_mul(usize::from(b)) / 256;
    let x = pick(params[1], w);
    let y = pick(params[2], h);
    let region = Region {
        x,
        y,
        width: pick(params[3], w - x).max(1),
        height: pick(params[4], h - y).max(1),
    };
    if let Ok(img) = decoder.decode_region(bytes, &opts, region) {
        common::check_image(&img);
        assert_eq!((img.width, img.height), (region.width, region.height));
    }
    let mut loader = ImageLoader::new(Transform::RandomResizedCrop(RandomResizedCrop::new(
        usize::from(params[1] % 64) + 1,
        u64::from(params[2]),
    )));
    loader.options = opts;
    let ctx = SampleContext {
        key: "fuzz.jpg",
        index: u64::from(params[3]),
        epoch: u64::from(params[4]),
    };
    if let Ok(img) = loader.load(bytes, &ctx) {
        common::check_image(&img);
    }
    decoded.is_ok()
}

/// `image_rs`: the image-rs path (PNG, JPEG, GIF, WebP, BMP, TIFF, picked by magic bytes):
/// probe, decode, and decode into a caller's buffer of the probed size. The first byte
/// chooses the options; the rest is the file. Accepted: the decode succeeded.
pub fn image_rs(data: &[u8]) -> bool {
    let Some((&param, bytes)) = data.split_first() else {
        return false;
    };
    decode_image_rs(param, bytes)
}

/// `image_jpeg`, `image_png`, ... : [`image_rs`] on one format. The format's magic bytes are
/// written over the file's first bytes, so that no mutation is spent leaving the format.
pub fn image_format(format: ImageFormat, data: &[u8]) -> bool {
    let Some((&param, bytes)) = data.split_first() else {
        return false;
    };
    let bytes = with_magic(format, bytes);
    assert_eq!(sniff(&bytes), format);
    decode_image_rs(param, &bytes)
}

/// `bytes` as `format` by its magic bytes: unchanged when it already is, else a copy with the
/// magic written over its start (padded with zeros when shorter).
fn with_magic(format: ImageFormat, bytes: &[u8]) -> Cow<'_, [u8]> {
    if sniff(bytes) == format {
        return Cow::Borrowed(bytes);
    }
    // (offset, bytes) pairs, and the shortest input `sniff` takes as the format.
    let (magic, min_len): (&[(usize, &[u8])], usize) = match format {
        ImageFormat::Jpeg => (&[(0, b"\xFF\xD8")], 2),
        ImageFormat::Png => (&[(0, b"\x89PNG\r\n\x1a\n")], 8),
        ImageFormat::Gif => (&[(0, b"GIF89a")], 6),
        ImageFormat::WebP => (&[(0, b"RIFF"), (8, b"WEBP")], 12),
        ImageFormat::Bmp => (&[(0, b"BM")], 26),
        ImageFormat::Tiff => (&[(0, b"II*\0")], 4),
        _ => (&[], 0),
    };
    let mut owned = bytes.to_vec();
    if owned.len() < min_len {
        owned.resize(min_len, 0);
    }
    for &(at, m) in magic {
        owned[at..at + m.len()].copy_from_slice(m);
    }
    Cow::Owned(owned)
}

/// The image-rs decoder's three doors over `bytes`, with the options byte `param`.
fn decode_image_rs(param: u8, bytes: &[u8]) -> bool {
    let decoder = ImageRsDecoder::new();
    if !decoder.matches(bytes) {
        return false;
    }
    let opts = common::options(param);
    let probed = decoder.probe(bytes);
    let decoded = decoder.decode(bytes, &opts);
    if let Ok(img) = &decoded {
        common::check_image(img);
        assert!(probed.is_ok(), "decode succeeded where probe failed");
    }
    if let Ok(info) = probed {
        if let Ok(shape) = opts.output_shape(&info) {
            if shape.len_bytes() <= 64 << 20 {
                let mut out = vec![0u8; shape.len_bytes()];
                let _ = decoder.decode_into(bytes, &opts, &mut out);
            }
        }
    }
    decoded.is_ok()
}
