//! The awkward inputs of `shared/data/hard` (copied to `tests/fixtures/hard`),
//! each checked against its EXPECTED.md: reference pixels, shapes, error kinds
//! and messages that name the file.
// These compare against libjpeg-turbo references: they need both backends.
#![cfg(all(feature = "decode-turbojpeg", feature = "decode-image"))]

mod common;

use common::*;
use spdl_io::{collate, ColorMode, DecodeOptions, ErrorKind, Limits, Orientation, Registry};

fn rgb() -> DecodeOptions {
    DecodeOptions::default()
}

/// The default options with `change` made.
fn options(change: impl FnOnce(&mut DecodeOptions)) -> DecodeOptions {
    let mut o = DecodeOptions::default();
    change(&mut o);
    o
}

/// `file` of `case` decoded with `opts`, checked to have `shape` and to be within `tolerance`
/// of `ref/{reference}.npy`.
fn decoded_near(
    case: &str,
    file: &str,
    opts: &DecodeOptions,
    shape: [usize; 3],
    reference: &str,
    tolerance: u16,
) -> spdl_io::Image {
    let img = decode(case, file, opts).unwrap();
    assert_eq!(img.shape(), shape, "{file}");
    let off = max_diff(&img, &npy(&hard(case, &format!("ref/{reference}.npy"))));
    assert!(off <= tolerance, "{file}: {off} levels off {reference}");
    img
}

fn with_color(color: ColorMode) -> DecodeOptions {
    options(|o| o.color = color)
}

// ---- 01 CMYK JPEG ---------------------------------------------------------

#[test]
fn cmyk_jpeg_decodes_to_pillow_rgb() {
    let case = "01-cmyk-jpeg";
    let img = decoded_near(
        case,
        "cmyk_pillow.jpg",
        &rgb(),
        [19, 83, 3],
        "cmyk_pillow_rgb",
        6,
    );
    // cyan, magenta, yellow, black, white: not inverted.
    let want = [
        [0, 255, 255],
        [255, 0, 255],
        [255, 255, 0],
        [0, 0, 0],
        [255, 255, 255],
    ];
    for (x, w) in [8, 24, 40, 56, 72].into_iter().zip(want) {
        assert_close(&px(&img, x, 8), &w, 6, &format!("block at x={x}"));
    }

    let (file, reference) = ("cmyk_imagemagick.jpg", "cmyk_imagemagick_rgb");
    let img = decoded_near(case, file, &rgb(), [23, 37, 3], reference, 6);
    assert_close(&px(&img, 0, 0), &[255, 0, 0], 6, "pure red");
}

#[test]
fn cmyk_jpeg_unchanged_keeps_uninverted_cmyk() {
    let case = "01-cmyk-jpeg";
    let unchanged = with_color(ColorMode::Unchanged);
    let img = decoded_near(
        case,
        "cmyk_pillow.jpg",
        &unchanged,
        [19, 83, 4],
        "cmyk_pillow_cmyk",
        6,
    );
    assert!(px(&img, 8, 8)[0] >= 249, "C = 255 in the cyan block");
}

// ---- 02 truncated JPEG / PNG ----------------------------------------------

#[test]
fn good_jpeg_and_png_decode() {
    let case = "02-truncated-jpeg-png";
    decoded_near(case, "good.jpg", &rgb(), [48, 64, 3], "good_rgb", 2);
    let png = decode(case, "good.png", &rgb()).unwrap();
    assert_eq!(png.shape(), [48, 64, 3]);
    assert_eq!(px(&png, 63, 47), [255, 255, 255]);
    assert_eq!(px(&png, 0, 0), [0, 0, 0]);
}

#[test]
fn truncated_files_are_named_errors() {
    let case = "02-truncated-jpeg-png";
    for file in [
        "truncated_60pct.jpg",
        "truncated_half.png",
        "truncated_no_eoi.jpg",
    ] {
        let err = decode(case, file, &rgb()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Truncated, "{err}");
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("truncated: {file}: ")), "{msg}");
    }
    let err = decode(case, "truncated_60pct.jpg", &rgb()).unwrap_err();
    assert!(err.message().contains("premature end"), "{err}");
}

#[test]
fn lenient_accepts_missing_eoi() {
    // Documented choice (b): strict mode rejects a file missing only its EOI;
    // `lenient` turns that into (a), the same pixels as good.jpg.
    let case = "02-truncated-jpeg-png";
    let lenient = options(|o| o.lenient = true);
    let img = decode(case, "truncated_no_eoi.jpg", &lenient).unwrap();
    assert_eq!(
        max_diff(&img, &npy(&hard(case, "ref/truncated_no_eoi_rgb.npy"))),
        0
    );
    let good = decode(case, "good.jpg", &rgb()).unwrap();
    assert_eq!(img, good);
}

#[test]
fn folder_run_counts_failures() {
    let case = "02-truncated-jpeg-png";
    let files = [
        "good.jpg",
        "truncated_60pct.jpg",
        "truncated_no_eoi.jpg",
        "good.png",
        "truncated_half.png",
    ];
    let results: Vec<_> = files.iter().map(|f| decode(case, f, &rgb())).collect();
    let delivered = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!((delivered, files.len() - delivered), (2, 3));
}

// ---- 03 EXIF orientation --------------------------------------------------

#[test]
fn exif_orientation_is_applied() {
    let case = "03-exif-orientation";
    for n in 1..=8 {
        let img = decode(case, &format!("orient_{n}.jpg"), &rgb()).unwrap();
        let reference = npy(&hard(case, &format!("ref/orient_{n}_applied.npy")));
        assert!(max_diff(&img, &reference) <= 8, "orientation {n}");
        assert_eq!(img.orientation, Orientation::Normal);
    }
    let six = decode(case, "orient_6.jpg", &rgb()).unwrap();
    assert_eq!(six.shape(), [48, 32, 3]);
    let exiftool = decode(case, "orient_6_exiftool.jpg", &rgb()).unwrap();
    assert!(max_diff(&exiftool, &npy(&hard(case, "ref/orient_6_applied.npy"))) <= 8);
    // Quadrant centres of orientation 6: TL blue, TR red, BL white, BR green.
    assert_close(&px(&six, 8, 12), &[0, 0, 254], 8, "TL");
    assert_close(&px(&six, 24, 12), &[254, 0, 0], 8, "TR");
    assert_close(&px(&six, 8, 36), &[255, 255, 255], 8, "BL");
    assert_close(&px(&six, 24, 36), &[0, 255, 1], 8, "BR");
}

#[test]
fn raw_mode_keeps_stored_orientation_and_reports_it() {
    let case = "03-exif-orientation";
    let keep = options(|o| o.keep_orientation = true);
    let raw = npy(&hard(case, "ref/raw.npy"));
    for n in 1..=8u16 {
        let file = format!("orient_{n}.jpg");
        let img = decode(case, &file, &keep).unwrap();
        assert!(max_diff(&img, &raw) <= 8, "{file}");
        assert_eq!(img.orientation.exif_value(), n);
        let info = Registry::with_defaults()
            .probe(&file, &read(&hard(case, &file)))
            .unwrap();
        assert_eq!(info.orientation.exif_value(), n);
    }
}

// ---- 04 decompression bombs -----------------------------------------------

#[test]
fn bombs_are_rejected_before_allocating() {
    let case = "04-decompression-bomb";
    for (file, dims) in [
        ("bomb_30000x30000_1bit.png", "30000x30000"),
        ("header_lie_65535x65535_rgba.png", "65535x65535"),
        ("jpeg_sof_65500x65500.jpg", "65500x65500"),
    ] {
        let err = decode(case, file, &rgb()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded, "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("limit exceeded: {file}: ")) && msg.contains(dims),
            "{msg}"
        );
        // The header alone is readable: probing reports the claimed size.
        let info = Registry::with_defaults()
            .probe(file, &read(&hard(case, file)))
            .unwrap();
        assert!(info.width >= 30000 && info.height >= 30000);
    }
}

#[test]
fn liars_fail_cleanly_with_limits_disabled() {
    let case = "04-decompression-bomb";
    let opts = options(|o| o.limits = Limits::none());
    for file in [
        "header_lie_65535x65535_rgba.png",
        "jpeg_sof_65500x65500.jpg",
    ] {
        let err = decode(case, file, &opts).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Truncated | ErrorKind::Corrupt),
            "{err}"
        );
        assert_eq!(err.key(), file, "{err}");
    }
}

/// Allocates 900 MB: run with `cargo test -p spdl-io -- --ignored`.
#[test]
#[ignore]
fn bomb_decodes_with_limits_disabled() {
    let opts = options(|o| {
        o.limits = Limits::none();
        o.color = ColorMode::Gray;
    });
    let img = decode("04-decompression-bomb", "bomb_30000x30000_1bit.png", &opts).unwrap();
    assert_eq!(img.shape(), [30000, 30000, 1]);
    assert!(img.as_u8().unwrap().iter().all(|&v| v == 0));
}

// ---- 05 16-bit PNG --------------------------------------------------------

#[test]
fn png16_unchanged_is_exact_u16() {
    let case = "05-png-16bit";
    let unchanged = with_color(ColorMode::Unchanged);
    let gray = decode(case, "gray16.png", &unchanged).unwrap();
    assert_eq!(gray.shape(), [11, 17, 1]);
    assert!(gray.as_u16().is_some());
    assert_eq!(max_diff(&gray, &npy(&hard(case, "ref/gray16.npy"))), 0);
    assert_eq!(px(&gray, 2, 0), [256]);
    assert_eq!(px(&gray, 16, 10), [65535]);
    assert_eq!(px(&gray, 5, 3), [21267]);
    let rgb16 = decode(case, "rgb16.png", &unchanged).unwrap();
    assert_eq!(max_diff(&rgb16, &npy(&hard(case, "ref/rgb16.npy"))), 0);
    assert_eq!(px(&rgb16, 0, 0), [0, 65535, 0]);
    assert_eq!(px(&rgb16, 16, 10), [65535, 0, 65529]);
}

#[test]
fn png16_to_u8_rounds_v_over_257() {
    let case = "05-png-16bit";
    let gray = decode(case, "gray16.png", &with_color(ColorMode::Gray)).unwrap();
    let reference = npy(&hard(case, "ref/gray16.npy"));
    let want: Vec<u16> = reference
        .data
        .iter()
        .map(|&v| ((f64::from(v) / 257.0).round()) as u16)
        .collect();
    assert_eq!(samples(&gray), want);
    assert_eq!(px(&gray, 16, 10), [255]);
    assert_eq!(px(&gray, 1, 0), [1]);
    let rgb = decode(case, "rgb16.png", &rgb()).unwrap();
    assert!(rgb.as_u8().is_some());
    assert!(max_diff(&rgb, &npy(&hard(case, "ref/rgb16_pillow_8bit.npy"))) <= 1);
}

// ---- 06 gray JPEG in an RGB batch -----------------------------------------

#[test]
fn gray_jpeg_batches_with_rgb_in_rgb_mode() {
    let case = "06-gray-jpeg-in-rgb-batch";
    let gray = decode(case, "gray.jpg", &rgb()).unwrap();
    let color = decode(case, "rgb.jpg", &rgb()).unwrap();
    assert_eq!(gray.shape(), [30, 40, 3]);
    assert!(max_diff(&gray, &npy(&hard(case, "ref/gray_as_rgb.npy"))) <= 2);
    assert!(gray
        .as_u8()
        .unwrap()
        .chunks(3)
        .all(|p| p[0] == p[1] && p[1] == p[2]));
    assert_close(&px(&gray, 10, 5), &[70, 70, 70], 2, "gray (10,5)");
    assert_close(&px(&color, 39, 29), &[255, 254, 255], 3, "rgb (39,29)");
    assert!(max_diff(&color, &npy(&hard(case, "ref/rgb.npy"))) <= 2);
    let batch = collate(vec![gray, color]).unwrap();
    assert_eq!(batch.shape, [2, 30, 40, 3]);
}

#[test]
fn gray_jpeg_unchanged_gives_named_shape_mismatch() {
    let case = "06-gray-jpeg-in-rgb-batch";
    let gray = decode(case, "gray.jpg", &with_color(ColorMode::Unchanged)).unwrap();
    assert_eq!(gray.shape(), [30, 40, 1]);
    assert!(max_diff(&gray, &npy(&hard(case, "ref/gray_L.npy"))) <= 2);
    let color = decode(case, "rgb.jpg", &with_color(ColorMode::Unchanged)).unwrap();
    let items = vec![
        spdl_io::BatchItem {
            key: "rgb.jpg".into(),
            label: Some(1),
            image: color,
        },
        spdl_io::BatchItem {
            key: "gray.jpg".into(),
            label: Some(2),
            image: gray,
        },
    ];
    let err = collate(items).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    let msg = err.to_string();
    assert!(msg.starts_with("shape mismatch: gray.jpg: "), "{msg}");
    assert!(
        msg.contains("[30, 40, 1]") && msg.contains("[30, 40, 3]") && msg.contains("rgb.jpg"),
        "{msg}"
    );
}

// ---- 07 palette / alpha PNG -----------------------------------------------

#[test]
fn palette_and_alpha_pngs_are_exact() {
    let case = "07-png-palette-alpha";
    for stem in [
        "palette_trns",
        "palette_opaque_4bit",
        "gray_alpha_LA",
        "rgba",
    ] {
        let file = format!("{stem}.png");
        let rgba = decode(case, &file, &with_color(ColorMode::Rgba)).unwrap();
        assert_eq!(rgba.shape(), [12, 20, 4]);
        assert_eq!(
            max_diff(&rgba, &npy(&hard(case, &format!("ref/{stem}_rgba.npy")))),
            0,
            "{file} rgba"
        );
        let rgb = decode(case, &file, &rgb()).unwrap();
        assert_eq!(
            max_diff(&rgb, &npy(&hard(case, &format!("ref/{stem}_rgb.npy")))),
            0,
            "{file} rgb"
        );
    }
    let trns = decode(case, "palette_trns.png", &with_color(ColorMode::Rgba)).unwrap();
    let alphas: Vec<u16> = [2, 7, 12, 17].iter().map(|&x| px(&trns, x, 2)[3]).collect();
    assert_eq!(alphas, [255, 128, 0, 255]);
    let rgb = decode(case, "palette_trns.png", &rgb()).unwrap();
    assert_eq!(px(&rgb, 12, 2), [0, 0, 255], "no black where alpha = 0");
}

// ---- 08 mislabeled extensions ---------------------------------------------

#[test]
fn format_is_sniffed_not_taken_from_extension() {
    let case = "08-mislabeled-extension";
    for (file, reference, tol) in [
        ("webp_content.jpg", "webp_content_jpg", 0),
        ("png_content.jpg", "png_content_jpg", 0),
        ("jpeg_content.png", "jpeg_content_png", 8),
        ("gif_content.jpg", "gif_content_jpg", 0),
        ("tiff_content.jpg", "tiff_content_jpg", 0),
    ] {
        let img = decode(case, file, &rgb()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(img.shape(), [16, 16, 3]);
        assert!(
            max_diff(&img, &npy(&hard(case, &format!("ref/{reference}.npy")))) <= tol,
            "{file}"
        );
    }
}

#[test]
fn unsupported_format_names_real_content() {
    // A registry without a WebP decoder: the error says what the content is.
    let mut registry = Registry::new();
    registry.register(std::sync::Arc::new(spdl_io::decode::TurboJpegDecoder::new()));
    let bytes = read(&hard("08-mislabeled-extension", "webp_content.jpg"));
    let err = registry
        .decode("webp_content.jpg", &bytes, &rgb())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(
        err.to_string()
            .starts_with("unsupported: webp_content.jpg: content is WebP, not JPEG"),
        "{err}"
    );
}

// ---- 09 empty and non-image -----------------------------------------------

#[test]
fn empty_and_non_image_files_are_named_errors() {
    let case = "09-empty-and-non-image";
    let expect = [
        ("empty.jpg", ErrorKind::Empty, "empty file (0 bytes)"),
        (
            "html_error_page.jpg",
            ErrorKind::UnknownFormat,
            "not a recognised image format",
        ),
        (
            "text.png",
            ErrorKind::UnknownFormat,
            "not a recognised image format",
        ),
        ("soi_only.jpg", ErrorKind::Truncated, ""),
        ("header_only.jpg", ErrorKind::Truncated, "no scan data"),
    ];
    for (file, kind, reason) in expect {
        let err = decode(case, file, &rgb()).unwrap_err();
        assert_eq!(err.kind(), kind, "{err}");
        assert_eq!(err.key(), file, "{err}");
        assert!(err.message().contains(reason), "{err}");
    }
    let good = decode(case, "good_control.jpg", &rgb()).unwrap();
    assert_eq!(good.shape(), [17, 23, 3]);
    assert!(max_diff(&good, &npy(&hard(case, "ref/good_control_rgb.npy"))) <= 2);
}

// ---- 10 arithmetic JPEG ---------------------------------------------------

#[test]
fn arithmetic_jpegs_decode_with_libjpeg_turbo() {
    let case = "10-arithmetic-jpeg";
    for stem in ["arith", "arith_progressive"] {
        let img = decode(case, &format!("{stem}.jpg"), &rgb()).unwrap();
        assert_eq!(img.shape(), [23, 37, 3]);
        assert!(max_diff(&img, &npy(&hard(case, &format!("ref/{stem}_djpeg.npy")))) <= 1);
        assert_close(&px(&img, 10, 10), &[255, 30, 29], 1, "(10,10)");
        assert_close(&px(&img, 0, 0), &[0, 4, 0], 1, "(0,0)");
        assert_close(&px(&img, 36, 22), &[254, 255, 250], 1, "(36,22)");
    }
}

#[test]
fn arithmetic_jpeg_is_named_unsupported_on_pure_rust_path() {
    use spdl_io::Decoder;
    let bytes = read(&hard("10-arithmetic-jpeg", "arith.jpg"));
    let err = spdl_io::decode::ImageRsDecoder::new()
        .decode(&bytes, &rgb())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(err.message().contains("arithmetic"), "{err}");
}

// ---- 12 progressive JPEG --------------------------------------------------

#[test]
fn progressive_and_restart_jpegs_decode() {
    let case = "12-progressive-jpeg";
    let mut decoded = Vec::new();
    for stem in ["progressive", "progressive_restart", "baseline"] {
        let img = decode(case, &format!("{stem}.jpg"), &rgb()).unwrap();
        assert_eq!(img.shape(), [23, 37, 3]);
        assert!(
            max_diff(&img, &npy(&hard(case, &format!("ref/{stem}.npy")))) <= 2,
            "{stem}"
        );
        assert_close(&px(&img, 10, 10), &[255, 30, 29], 2, stem);
        assert_close(&px(&img, 36, 22), &[254, 255, 250], 2, stem);
        decoded.push(img);
    }
    let (p, b) = (samples(&decoded[0]), samples(&decoded[2]));
    assert!(p.iter().zip(&b).all(|(x, y)| x.abs_diff(*y) <= 10));
}

// ---- 17 unicode and space file names --------------------------------------

#[test]
fn unusual_file_names_decode_from_their_paths() {
    let dir = hard("17-unicode-and-space-filenames", "");
    let reference = npy(&hard("17-unicode-and-space-filenames", "ref/all.npy"));
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() || path.file_name().is_some_and(|f| f == "EXPECTED.md") {
            continue;
        }
        let key = spdl_io::key_from_path(path.file_name().unwrap().as_ref());
        let img = Registry::with_defaults()
            .decode(&key, &read(&path), &rgb())
            .unwrap();
        assert_eq!(max_diff(&img, &reference), 0, "{key}");
        n += 1;
    }
    assert_eq!(n, 12);
}

#[cfg(unix)]
#[test]
fn non_utf8_key_is_escaped() {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9_latin1.png");
    assert_eq!(spdl_io::key_from_path(name.as_ref()), "caf\\xe9_latin1.png");
}
