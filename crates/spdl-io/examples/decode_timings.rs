//! Times full vs DCT-scaled vs region JPEG decoding (median of N runs).
//!
//! `cargo run --release -p spdl-io --example decode_timings -- [FILES...]`
//! (default: a few photos from `../shared/data/photos`).

use std::time::Instant;

use spdl_io::decode::{ImageRsDecoder, TurboJpegDecoder};
use spdl_io::{DecodeOptions, Decoder, Region};

fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

fn dct_scaled(bytes: &[u8], num: usize, denom: usize) -> anyhow::Result<()> {
    let mut d = turbojpeg::Decompressor::new()?;
    let factor = turbojpeg::ScalingFactor::new(num, denom);
    d.set_scaling_factor(factor)?;
    let h = d.read_header(bytes)?.scaled(factor);
    let mut img = turbojpeg::Image {
        pixels: vec![0u8; 3 * h.width * h.height],
        width: h.width,
        pitch: 3 * h.width,
        height: h.height,
        format: turbojpeg::PixelFormat::RGB,
    };
    d.decompress(bytes, img.as_deref_mut())?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/photos/");
        files = [
            "opencv_fruits.jpg",
            "skimage_rocket.jpg",
            "plasma_Kite_2560x1600.jpg",
            "plasma_Volna_5120x2880.jpg",
        ]
        .iter()
        .map(|f| format!("{dir}{f}"))
        .collect();
    }
    let opts = DecodeOptions::default();
    let tj = TurboJpegDecoder::new();
    println!(
        "{:<28} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9}",
        "file", "size", "full", "7/8", "6/8", "1/2", "1/4", "ctr87%", "rrc25%", "image-rs"
    );
    for path in files {
        let bytes = std::fs::read(&path)?;
        let info = tj.probe(&bytes)?;
        let (w, h) = (info.width, info.height);
        let runs = if w * h > 4_000_000 { 5 } else { 15 };
        let full = median_ms(runs, || drop(tj.decode(&bytes, &opts)));
        let scaled: Vec<f64> = [(7, 8), (6, 8), (1, 2), (1, 4)]
            .iter()
            .map(|&(n, d)| median_ms(runs, || dct_scaled(&bytes, n, d).unwrap()))
            .collect();
        // ImageNet eval source box (224/256 of the shorter side) and a
        // typical random-resized-crop box (25% of the area).
        let side = w.min(h) * 7 / 8;
        let center = Region {
            x: (w - side) / 2,
            y: (h - side) / 2,
            width: side,
            height: side,
        };
        let quarter = Region {
            x: w / 4,
            y: h / 4,
            width: w / 2,
            height: h / 2,
        };
        let ctr = median_ms(runs, || {
            drop(tj.decode_region(&bytes, &opts, center).unwrap())
        });
        let rrc = median_ms(runs, || {
            drop(tj.decode_region(&bytes, &opts, quarter).unwrap())
        });
        let irs = median_ms(runs, || {
            drop(ImageRsDecoder::new().decode(&bytes, &opts).unwrap())
        });
        let name = std::path::Path::new(&path)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        println!(
            "{:<28} {:>10} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>9.2} {:>9.2}",
            name,
            format!("{w}x{h}"),
            full,
            scaled[0],
            scaled[1],
            scaled[2],
            scaled[3],
            ctr,
            rrc,
            irs
        );
    }
    println!("(milliseconds, median; full/region = spdl-io TurboJpegDecoder to RGB, n/8 = libjpeg-turbo DCT scaling)");
    Ok(())
}
