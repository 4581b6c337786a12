//! libjpeg-turbo path: probe, full decode (strict and lenient, every colour mode), region
//! decode (DCT-domain cropping) at a region chosen by the input, and the loader's scaled path
//! (region decode + resize to a random crop). The first 5 bytes choose the options and the
//! region; the rest is the file. Seeds: every JPEG fixture, prefixed.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use spdl_io::decode::{Decoder, Region, TurboJpegDecoder};
use spdl_io::{ImageLoader, RandomResizedCrop, SampleContext, Transform};

fuzz_target!(|data: &[u8]| {
    let Some((params, bytes)) = data.split_first_chunk::<5>() else {
        return;
    };
    let decoder = TurboJpegDecoder::new();
    let opts = common::options(params[0]);
    let Ok(info) = decoder.probe(bytes) else {
        // Whatever probe refuses, decode must refuse too, without panicking.
        let _ = decoder.decode(bytes, &opts);
        return;
    };
    if let Ok(img) = decoder.decode(bytes, &opts) {
        common::check_image(&img);
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
});
