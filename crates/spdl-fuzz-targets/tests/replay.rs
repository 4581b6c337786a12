//! The smoke pass of the fuzz targets on stable Rust (run by `cargo xtask test`): every seed of
//! every target, the regression inputs in `spdl-io/tests/fixtures/fuzz/` among them (picked by
//! extension), through the target's body. None may panic, and each target must accept at least
//! one of its seeds (else its fuzzing would start from nothing useful).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use spdl_fuzz_targets::seeds::{fixture_files, seeds, TARGETS};

#[test]
fn every_seed_runs_through_every_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let fixtures = fixture_files(&root);
    let mut problems = Vec::new();
    let mut ran = 0;
    for target in TARGETS {
        if spdl_fuzz_targets::run(target.name, &[]).is_none() {
            assert!(target.ffmpeg, "no body for target {}", target.name);
            eprintln!("{}: not in this build (feature decode-ffmpeg)", target.name);
            continue;
        }
        let seeds = seeds(&root, target, &fixtures);
        let mut accepted = 0;
        for (path, seed) in &seeds {
            match catch_unwind(AssertUnwindSafe(|| {
                spdl_fuzz_targets::run(target.name, seed)
            })) {
                Ok(Some(true)) => accepted += 1,
                Ok(_) => {}
                Err(_) => problems.push(format!("{}: panicked on {}", target.name, path.display())),
            }
        }
        eprintln!(
            "{}: {} seeds, {accepted} accepted",
            target.name,
            seeds.len()
        );
        if accepted == 0 {
            problems.push(format!(
                "{}: none of its {} seeds was accepted",
                target.name,
                seeds.len()
            ));
        }
        ran += 1;
    }
    assert!(ran >= TARGETS.iter().filter(|t| !t.ffmpeg).count());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn image_targets_cover_every_format_of_the_backend() {
    use spdl_io::decode::ImageFormat;
    // The formats `spdl-io` builds image-rs with (its Cargo.toml), each with its own target.
    for (format, name) in [
        (ImageFormat::Jpeg, "image_jpeg"),
        (ImageFormat::Png, "image_png"),
        (ImageFormat::Gif, "image_gif"),
        (ImageFormat::WebP, "image_webp"),
        (ImageFormat::Bmp, "image_bmp"),
        (ImageFormat::Tiff, "image_tiff"),
    ] {
        assert!(
            TARGETS.iter().any(|t| t.name == name),
            "{format} has no target {name}"
        );
        // An input of another format is turned into this one by its magic bytes.
        assert_eq!(spdl_fuzz_targets::run(name, b"\0not an image"), Some(false));
    }
}
