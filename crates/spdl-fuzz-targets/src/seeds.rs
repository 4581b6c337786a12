//! Every fuzz target, and which fixture files seed it: the repository's test fixtures, bundled
//! samples and `fuzz/seeds/TARGET/`, and `../shared/data/hard` next to the repository when it
//! is there.
//!
//! Only `std` here: `cargo xtask fuzz` compiles this file into xtask (`#[path]`), so that the
//! fuzzer and the replay test (`tests/replay.rs`) start from the same seeds.

use std::fs;
use std::path::{Path, PathBuf};

/// A fuzz target and the fixture files that seed it.
pub struct Target {
    /// The cargo-fuzz target (`fuzz/fuzz_targets/NAME.rs`) and the body's name in `run`.
    pub name: &'static str,
    /// File extensions (lower case) of the fixtures that seed it.
    pub extensions: &'static [&'static str],
    /// Bytes put in front of each seed (the target reads its parameters from there).
    pub prefix: &'static [u8],
    /// Close the target's stderr under libFuzzer (it keeps its own): FFmpeg logs an error line
    /// for nearly every mutated input. A crash input is still saved; rerun it to see the message.
    pub quiet: bool,
    /// libFuzzer `-max_len` (0: its own guess, the largest seed): decoders run far faster on
    /// small inputs under AddressSanitizer, and a cut file is as good a start as a whole one.
    pub max_len: usize,
    /// Needs FFmpeg (the `decode-ffmpeg` feature and its development packages).
    pub ffmpeg: bool,
}

/// The options byte the image-rs targets read first: RGB, strict, orientation applied.
const IMAGE_PREFIX: &[u8] = &[0];

/// One image-rs target per format the backend is built with (`spdl-io`'s `image` features).
const fn image(name: &'static str, extensions: &'static [&'static str]) -> Target {
    Target {
        name,
        extensions,
        prefix: IMAGE_PREFIX,
        quiet: false,
        max_len: 32768,
        ffmpeg: false,
    }
}

/// A target whose seeds are the fixtures with these extensions, as they are.
const fn plain(name: &'static str, extensions: &'static [&'static str]) -> Target {
    Target {
        name,
        extensions,
        prefix: &[],
        quiet: false,
        max_len: 0,
        ffmpeg: false,
    }
}

/// Every target, in the order `cargo xtask fuzz` runs them.
pub const TARGETS: &[Target] = &[
    plain("jpeg_markers", &["jpg", "jpeg"]),
    Target {
        // RGB strict, region from the top-left corner over the whole image.
        prefix: &[0, 0, 0, 255, 255],
        max_len: 32768,
        ..plain("turbojpeg", &["jpg", "jpeg"])
    },
    image(
        "image_rs",
        &["png", "jpg", "jpeg", "gif", "webp", "bmp", "tif", "tiff"],
    ),
    image("image_jpeg", &["jpg", "jpeg"]),
    image("image_png", &["png"]),
    image("image_gif", &["gif"]),
    image("image_webp", &["webp"]),
    image("image_bmp", &["bmp"]),
    image("image_tiff", &["tif", "tiff"]),
    Target {
        max_len: 32768,
        ffmpeg: true,
        ..plain(
            "ffmpeg",
            &[
                "mp4", "mkv", "avi", "mov", "webm", "wav", "mp3", "flac", "ogg",
            ],
        )
    },
    plain("uri", &[]),
    plain("list_file", &["txt"]),
    plain("npy", &["npy"]),
    plain("npz", &["npz"]),
    plain("tar", &["tar"]),
    Target {
        // Window start 1 s, duration 2 s (the target's first two bytes).
        prefix: &[16, 16],
        ..plain("wav", &["wav"])
    },
    Target {
        quiet: true,
        max_len: 512,
        ffmpeg: true,
        ..plain("filter_desc", &[])
    },
];

/// Fixture files larger than this are not seeds (libFuzzer works best on small inputs).
pub const MAX_SEED_BYTES: u64 = 128 << 10;

/// Every file of at most [`MAX_SEED_BYTES`] under the fixture folders of the repository at
/// `root`, sorted.
pub fn fixture_files(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.join("data/samples"), root.join("fuzz/seeds")];
    if let Ok(crates) = fs::read_dir(root.join("crates")) {
        dirs.extend(crates.flatten().map(|c| c.path().join("tests/fixtures")));
    }
    dirs.push(root.join("../shared/data/hard"));
    let mut files = Vec::new();
    let mut stack: Vec<PathBuf> = dirs.into_iter().filter(|d| d.is_dir()).collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // `file_type` does not follow links: fixtures hold link loops on purpose.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() && entry.metadata().is_ok_and(|m| m.len() <= MAX_SEED_BYTES) {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    files
}

/// The seeds of `target` among `fixtures` (from [`fixture_files`]): each file in
/// `fuzz/seeds/NAME/` or with one of its extensions, prefixed, with its path.
pub fn seeds(root: &Path, target: &Target, fixtures: &[PathBuf]) -> Vec<(PathBuf, Vec<u8>)> {
    let own = root.join("fuzz/seeds").join(target.name);
    let mut seeds = Vec::new();
    for path in fixtures {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        let wanted =
            path.starts_with(&own) || ext.is_some_and(|e| target.extensions.contains(&e.as_str()));
        if !wanted {
            continue;
        }
        let Ok(bytes) = fs::read(path) else {
            continue;
        };
        let mut seed = target.prefix.to_vec();
        seed.extend_from_slice(&bytes);
        seeds.push((path.clone(), seed));
    }
    seeds
}
