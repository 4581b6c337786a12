//! The decoder conformance suite of spdl-rs, for third-party decoder plugins and the built-in
//! decoders alike: one call checks that a [`Decoder`] behaves as the pipeline relies on.
//!
//! ```no_run
//! use std::sync::Arc;
//! use spdl_testkit::{assert_conforms, Sample};
//! # struct MyDecoder;
//! # impl spdl_io::Decoder for MyDecoder {
//! #     fn name(&self) -> &str { "mine" }
//! #     fn matches(&self, _: &[u8]) -> bool { false }
//! #     fn probe(&self, _: &[u8]) -> spdl_io::Result<spdl_io::ImageInfo> { unimplemented!() }
//! #     fn decode_into(&self, _: &[u8], _: &spdl_io::DecodeOptions, _: &mut [u8])
//! #         -> spdl_io::Result<spdl_io::ImageInfo> { unimplemented!() }
//! # }
//!
//! #[test]
//! fn my_decoder_conforms() {
//!     let samples = vec![Sample::from_file("tests/data/small.myfmt").unwrap()];
//!     assert_conforms(Arc::new(MyDecoder), &samples);
//! }
//! ```
//!
//! What is checked, per sample (the contract of [`Decoder`], after image-rs's reference,
//! bad-image and truncated-image suites):
//!
//! | check | the decoder must |
//! |---|---|
//! | `matches` | accept the sample's bytes and reject zero bytes |
//! | `probe` | read a non-empty size from the header alone |
//! | `decode_into` | for RGB, gray and RGBA output, write exactly [`OutputShape::len_bytes`] bytes of a caller's buffer (nothing past it), report the probed header, and agree byte for byte with [`Decoder::decode`] |
//! | `small buffer` | refuse a buffer one byte short with [`ErrorKind::InvalidArgument`] |
//! | `limits` | refuse an image one pixel over [`Limits::max_pixels`] with [`ErrorKind::LimitExceeded`] *before* writing any pixel |
//! | `region` | decode a centered region to the region's size, and refuse one outside the image |
//! | `truncated` | never panic on any of about 100 prefixes of the bytes |
//! | `mutated` | never panic on 128 copies with a few bytes changed (the signature kept) |
//! | `reference` | when the sample has [`Reference`] pixels: match them within the stated tolerance |
//! | `registry` | be picked by content once registered after the built-ins |
//!
//! A check that fails is reported with the sample's name and what was expected; nothing stops
//! at the first failure, so one run lists every problem.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use spdl_io::{
    ColorMode, DecodeOptions, Decoder, ErrorKind, Limits, OutputShape, Region, Registry,
};

/// One input of the suite: encoded bytes, a name for messages, optional reference pixels.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Shown in every message about this sample (a file name, usually).
    pub name: String,
    /// The encoded image.
    pub bytes: Vec<u8>,
    /// Pixels a trusted decoder produced for these bytes, if known.
    pub reference: Option<Reference>,
}

impl Sample {
    /// A sample without reference pixels.
    pub fn new(name: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            name: name.into(),
            bytes: bytes.into(),
            reference: None,
        }
    }

    /// Reads a sample from a file, named by its file name.
    ///
    /// # Errors
    /// The I/O error of reading the file.
    pub fn from_file(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref();
        let name = path.file_name().unwrap_or(path.as_os_str());
        Ok(Self::new(name.to_string_lossy(), std::fs::read(path)?))
    }

    /// Adds reference pixels.
    pub fn with_reference(mut self, reference: Reference) -> Self {
        self.reference = Some(reference);
        self
    }
}

/// Expected pixels for a [`Sample`]: `[H, W, C]` u8, row-major, decoded with `color` and
/// the other [`DecodeOptions`] at their defaults (EXIF orientation applied).
#[derive(Debug, Clone)]
pub struct Reference {
    /// `[height, width, channels]`.
    pub shape: [usize; 3],
    /// `height * width * channels` samples.
    pub pixels: Vec<u8>,
    /// The output channels the reference was made with.
    pub color: ColorMode,
    /// Largest accepted absolute difference of one sample (0 = bit-exact).
    pub max_abs_diff: u8,
}

impl Reference {
    /// Reads reference pixels from a NumPy `.npy` file of shape `[H, W, C]` (or `[H, W]`
    /// for one channel), dtype `uint8`, C order: what `np.save(path, np.asarray(pil_image))`
    /// writes.
    ///
    /// # Errors
    /// The I/O error, or `InvalidData` naming what is not `[H, W(, C)]` C-order `uint8`.
    pub fn from_npy(
        path: impl AsRef<Path>,
        color: ColorMode,
        max_abs_diff: u8,
    ) -> std::io::Result<Self> {
        let path = path.as_ref();
        let bad = |why: &str| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {why}", path.display()),
            )
        };
        let data = std::fs::read(path)?;
        if data.len() < 10 || &data[..6] != b"\x93NUMPY" {
            return Err(bad("not a .npy file"));
        }
        // Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4.
        let (len, start) = match data[6] {
            1 => (u16::from_le_bytes([data[8], data[9]]) as usize, 10),
            _ if data.len() >= 12 => (
                u32::from_le_bytes([data[8], data[9], data[10], data[11]]) as usize,
                12,
            ),
            _ => return Err(bad("truncated header")),
        };
        let header = data
            .get(start..start + len)
            .map(String::from_utf8_lossy)
            .ok_or_else(|| bad("truncated header"))?;
        if !header.contains("'|u1'") || header.contains("'fortran_order': True") {
            return Err(bad("dtype must be uint8 in C order"));
        }
        let dims: Vec<usize> = header
            .split_once("'shape': (")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(dims, _)| {
                dims.split(',')
                    .filter_map(|d| d.trim().parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        let shape = match dims[..] {
            [h, w] => [h, w, 1],
            [h, w, c] => [h, w, c],
            _ => return Err(bad("shape must be [H, W] or [H, W, C]")),
        };
        let pixels = data[start + len..].to_vec();
        if pixels.len() != shape.iter().product::<usize>() {
            return Err(bad("data length does not match the shape"));
        }
        Ok(Self {
            shape,
            pixels,
            color,
            max_abs_diff,
        })
    }
}

/// Runs every check on every sample and returns the violations, each naming the sample and
/// the check (an empty list: the decoder conforms). Panics inside the decoder are caught and
/// reported as violations.
pub fn check_decoder(decoder: Arc<dyn Decoder>, samples: &[Sample]) -> Vec<String> {
    let mut out = Vec::new();
    if samples.is_empty() {
        out.push("no samples given: the suite needs at least one valid encoded image".into());
    }
    match guarded(|| decoder.matches(&[])) {
        Ok(false) => {}
        Ok(true) => out.push(format!("{}: matches(&[]) must be false", decoder.name())),
        Err(why) => out.push(format!("{}: matches(&[]) panicked: {why}", decoder.name())),
    }
    for sample in samples {
        let mut report = |check: &str, detail: String| {
            out.push(format!("{}: {check}: {detail}", sample.name));
        };
        check_sample(decoder.as_ref(), sample, &mut report);
        check_registry(&decoder, sample, &mut report);
    }
    out
}

/// [`check_decoder`] for a `#[test]`: panics with every violation listed.
pub fn assert_conforms(decoder: Arc<dyn Decoder>, samples: &[Sample]) {
    let name = decoder.name().to_string();
    let violations = check_decoder(decoder, samples);
    assert!(
        violations.is_empty(),
        "decoder `{name}` breaks {} conformance check(s):\n  {}",
        violations.len(),
        violations.join("\n  ")
    );
}

/// Runs `f`, turning a panic into `Err` with the panic's message.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

const SENTINEL: u8 = 0xA5;

fn check_sample(d: &dyn Decoder, s: &Sample, report: &mut dyn FnMut(&str, String)) {
    let bytes = &s.bytes[..];
    match guarded(|| d.matches(bytes)) {
        Ok(true) => {}
        Ok(false) => return report("matches", "matches() is false for a valid sample".into()),
        Err(why) => return report("matches", format!("panicked: {why}")),
    }
    let info = match guarded(|| d.probe(bytes)) {
        Ok(Ok(info)) if info.width > 0 && info.height > 0 => info,
        Ok(Ok(info)) => {
            return report(
                "probe",
                format!("empty size {}x{}", info.width, info.height),
            )
        }
        Ok(Err(e)) => return report("probe", format!("failed on a valid sample: {e}")),
        Err(why) => return report("probe", format!("panicked: {why}")),
    };

    for color in [ColorMode::Rgb, ColorMode::Gray, ColorMode::Rgba] {
        let opts = DecodeOptions {
            color,
            ..DecodeOptions::default()
        };
        let shape = match opts.output_shape(&info) {
            Ok(shape) => shape,
            Err(e) => return report("decode_into", format!("{color:?}: no output shape: {e}")),
        };
        check_decode_into(d, bytes, &opts, shape, &info, report);
    }

    let opts = DecodeOptions::default();
    if let Ok(shape) = opts.output_shape(&info) {
        check_small_buffer(d, bytes, &opts, shape, report);
        check_region(d, bytes, &opts, shape, report);
    }
    check_limits(d, bytes, &info, report);
    check_never_panics(d, bytes, report);
    if let Some(r) = &s.reference {
        check_reference(d, bytes, r, report);
    }
}

fn check_decode_into(
    d: &dyn Decoder,
    bytes: &[u8],
    opts: &DecodeOptions,
    shape: OutputShape,
    info: &spdl_io::ImageInfo,
    report: &mut dyn FnMut(&str, String),
) {
    let color = opts.color;
    let len = shape.len_bytes();
    let mut buf = vec![SENTINEL; len + 64];
    match guarded(|| d.decode_into(bytes, opts, &mut buf)) {
        Ok(Ok(got)) if got != *info => report(
            "decode_into",
            format!("{color:?}: reported header {got:?}, probe said {info:?}"),
        ),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return report("decode_into", format!("{color:?}: failed: {e}")),
        Err(why) => return report("decode_into", format!("{color:?}: panicked: {why}")),
    }
    if buf[len..].iter().any(|&b| b != SENTINEL) {
        report(
            "decode_into",
            format!("{color:?}: wrote past the {len} bytes of its output shape"),
        );
    }
    match guarded(|| d.decode(bytes, opts)) {
        Ok(Ok(img)) => {
            let same_shape = [img.height, img.width, img.channels]
                == [shape.height, shape.width, shape.channels];
            let same_bytes = img.as_u8().is_some_and(|p| p == &buf[..len]);
            if !same_shape || (shape.bytes_per_sample == 1 && !same_bytes) {
                report(
                    "decode_into",
                    format!("{color:?}: decode() and decode_into() disagree"),
                );
            }
        }
        Ok(Err(e)) => report("decode_into", format!("{color:?}: decode() failed: {e}")),
        Err(why) => report(
            "decode_into",
            format!("{color:?}: decode() panicked: {why}"),
        ),
    }
}

fn check_small_buffer(
    d: &dyn Decoder,
    bytes: &[u8],
    opts: &DecodeOptions,
    shape: OutputShape,
    report: &mut dyn FnMut(&str, String),
) {
    let mut short = vec![SENTINEL; shape.len_bytes() - 1];
    match guarded(|| d.decode_into(bytes, opts, &mut short)) {
        Ok(Err(e)) if e.kind() == ErrorKind::InvalidArgument => {}
        Ok(Err(e)) => report(
            "small buffer",
            format!("expected an invalid-argument error, got: {e}"),
        ),
        Ok(Ok(_)) => report("small buffer", "a short buffer was accepted".into()),
        Err(why) => report("small buffer", format!("panicked: {why}")),
    }
}

fn check_limits(
    d: &dyn Decoder,
    bytes: &[u8],
    info: &spdl_io::ImageInfo,
    report: &mut dyn FnMut(&str, String),
) {
    let pixels = (info.width * info.height) as u64;
    let opts = DecodeOptions {
        limits: Limits {
            max_pixels: pixels - 1,
            max_bytes: Limits::default().max_bytes,
        },
        ..DecodeOptions::default()
    };
    // Big enough for the real output: only the limit may refuse it.
    let mut buf = vec![SENTINEL; info.width * info.height * 4 * 2];
    match guarded(|| d.decode_into(bytes, &opts, &mut buf)) {
        Ok(Err(e)) if e.kind() == ErrorKind::LimitExceeded => {
            if buf.iter().any(|&b| b != SENTINEL) {
                report(
                    "limits",
                    "pixels were written before the limit was checked".into(),
                );
            }
        }
        Ok(Err(e)) => report(
            "limits",
            format!("expected a limit-exceeded error, got: {e}"),
        ),
        Ok(Ok(_)) => report(
            "limits",
            format!("decoded {pixels} pixels with max_pixels = {}", pixels - 1),
        ),
        Err(why) => report("limits", format!("panicked: {why}")),
    }
    match guarded(|| d.decode(bytes, &opts)) {
        Ok(Err(e)) if e.kind() == ErrorKind::LimitExceeded => {}
        Ok(_) => report("limits", "decode() ignored the limit".into()),
        Err(why) => report("limits", format!("decode() panicked: {why}")),
    }
}

fn check_region(
    d: &dyn Decoder,
    bytes: &[u8],
    opts: &DecodeOptions,
    shape: OutputShape,
    report: &mut dyn FnMut(&str, String),
) {
    let region = Region {
        x: shape.width / 4,
        y: shape.height / 4,
        width: (shape.width / 2).max(1),
        height: (shape.height / 2).max(1),
    };
    match guarded(|| d.decode_region(bytes, opts, region)) {
        Ok(Ok(img)) if (img.width, img.height) == (region.width, region.height) => {}
        Ok(Ok(img)) => report(
            "region",
            format!("asked {region:?}, got {}x{}", img.width, img.height),
        ),
        Ok(Err(e)) => report("region", format!("failed: {e}")),
        Err(why) => report("region", format!("panicked: {why}")),
    }
    let outside = Region {
        x: shape.width,
        ..region
    };
    match guarded(|| d.decode_region(bytes, opts, outside)) {
        Ok(Err(e)) if e.kind() == ErrorKind::InvalidArgument => {}
        Ok(_) => report(
            "region",
            format!("{outside:?} outside the image was not refused"),
        ),
        Err(why) => report(
            "region",
            format!("panicked on a region outside the image: {why}"),
        ),
    }
}

/// Prefixes and mutated copies: any result is fine, a panic is not.
fn check_never_panics(d: &dyn Decoder, bytes: &[u8], report: &mut dyn FnMut(&str, String)) {
    let opts = DecodeOptions::default();
    let n = bytes.len();
    let mut lengths: Vec<usize> = (0..n.min(48)).collect();
    lengths.extend((1..64).map(|k| n * k / 64));
    lengths.push(n.saturating_sub(1));
    lengths.sort_unstable();
    lengths.dedup();
    for len in lengths {
        let prefix = &bytes[..len];
        if let Err(why) = guarded(|| d.decode(prefix, &opts).map(drop)) {
            report(
                "truncated",
                format!("panicked on the first {len} of {n} bytes: {why}"),
            );
        }
    }
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ n as u64);
    let keep = n.min(8); // keep the signature so the decoder goes past its magic check
    for round in 0..128 {
        let mut copy = bytes.to_vec();
        if n > keep {
            for _ in 0..1 + round % 8 {
                let at = keep + rng.below(n - keep);
                copy[at] = rng.next() as u8;
            }
        }
        if let Err(why) = guarded(|| d.decode(&copy, &opts).map(drop)) {
            report("mutated", format!("panicked on mutation {round}: {why}"));
        }
    }
}

fn check_reference(
    d: &dyn Decoder,
    bytes: &[u8],
    r: &Reference,
    report: &mut dyn FnMut(&str, String),
) {
    let opts = DecodeOptions {
        color: r.color,
        ..DecodeOptions::default()
    };
    let img = match guarded(|| d.decode(bytes, &opts)) {
        Ok(Ok(img)) => img,
        Ok(Err(e)) => return report("reference", format!("failed: {e}")),
        Err(why) => return report("reference", format!("panicked: {why}")),
    };
    let shape = [img.height, img.width, img.channels];
    if shape != r.shape {
        return report(
            "reference",
            format!("shape {shape:?}, expected {:?}", r.shape),
        );
    }
    let Some(pixels) = img.as_u8() else {
        return report("reference", "16-bit output; references are 8-bit".into());
    };
    let worst = pixels
        .iter()
        .zip(&r.pixels)
        .enumerate()
        .map(|(i, (a, b))| (a.abs_diff(*b), i))
        .max();
    if let Some((diff, i)) = worst.filter(|(diff, _)| *diff > r.max_abs_diff) {
        let c = r.shape[2];
        let (y, x) = (i / c / r.shape[1], i / c % r.shape[1]);
        report(
            "reference",
            format!(
                "sample at (x={x}, y={y}, c={}) differs by {diff} (tolerance {})",
                i % c,
                r.max_abs_diff
            ),
        );
    }
}

fn check_registry(decoder: &Arc<dyn Decoder>, s: &Sample, report: &mut dyn FnMut(&str, String)) {
    let mut registry = Registry::with_defaults();
    registry.register(Arc::clone(decoder));
    // The registry asks every decoder's `matches`: a panic there is a finding, not a crash.
    let picked = guarded(|| {
        registry
            .decoder_for(&s.name, &s.bytes)
            .map(|d| d.name().to_string())
    });
    match picked {
        Ok(Ok(name)) if name == decoder.name() => {}
        Ok(Ok(name)) => report(
            "registry",
            format!("`{name}` was picked instead of `{}`", decoder.name()),
        ),
        Ok(Err(e)) => report("registry", format!("not picked by content: {e}")),
        Err(why) => report(
            "registry",
            format!("panicked while picking a decoder: {why}"),
        ),
    }
}

/// A tiny deterministic generator: the mutations are the same on every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
