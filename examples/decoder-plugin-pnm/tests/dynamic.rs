//! The plugin loaded from its shared library behaves like the plugin linked in: same pixels,
//! same errors, and it passes the conformance suite across the C boundary.

use std::path::PathBuf;
use std::sync::Arc;

use spdl_decoder_pnm::PnmDecoder;
use spdl_io::{DecodeOptions, Decoder, ErrorKind, ImageInfo, Registry, Result};
use spdl_testkit::{assert_conforms, Sample};

/// `target/debug/libspdl_decoder_pnm.so`: `cargo test` builds only the rlib, so the test
/// builds the shared library itself, with the cargo that runs it.
fn library() -> PathBuf {
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "spdl-decoder-pnm", "--lib"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build -p spdl-decoder-pnm failed");
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    dir.join(format!(
        "{}spdl_decoder_pnm{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

fn data(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
    .unwrap()
}

/// The registered plugin, forwarded so the suite can hold it in an `Arc`.
struct Loaded(&'static dyn Decoder);

impl Decoder for Loaded {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn matches(&self, bytes: &[u8]) -> bool {
        self.0.matches(bytes)
    }
    fn probe(&self, bytes: &[u8]) -> Result<ImageInfo> {
        self.0.probe(bytes)
    }
    fn decode_into(&self, bytes: &[u8], opts: &DecodeOptions, out: &mut [u8]) -> Result<ImageInfo> {
        self.0.decode_into(bytes, opts, out)
    }
}

#[test]
fn loaded_plugin_matches_the_linked_decoder() {
    let path = library();
    assert!(path.is_file(), "{} was not built", path.display());
    // SAFETY: our own plugin, built from this repository.
    let name = unsafe { spdl_io::decode::plugin::load(&path) }.unwrap();
    assert_eq!(name, "pnm");

    let registry: &'static Registry = Box::leak(Box::new(Registry::with_defaults()));
    let ppm = data("orange.ppm");
    let loaded = registry.decoder_for("orange.ppm", &ppm).unwrap();
    assert_eq!(loaded.name(), "pnm");

    let opts = DecodeOptions::default();
    let via_plugin = registry.decode("orange.ppm", &ppm, &opts).unwrap();
    let linked = PnmDecoder.decode(&ppm, &opts).unwrap();
    assert_eq!(via_plugin.as_u8(), linked.as_u8());
    assert_eq!(
        registry.probe("orange.ppm", &ppm).unwrap().format.name(),
        "PNM"
    );

    // Errors keep their kind and message across the boundary, and gain the sample's name.
    let err = registry.decode("cut.ppm", &ppm[..100], &opts).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Truncated);
    assert!(
        err.to_string()
            .starts_with("truncated: cut.ppm: raster has"),
        "{err}"
    );

    let samples = vec![
        Sample::new("orange.ppm", ppm),
        Sample::new("deep.pgm", data("deep.pgm")),
    ];
    assert_conforms(Arc::new(Loaded(loaded)), &samples);

    // A file that is not a library, and a library that is not a plugin, are refused by name.
    let not_a_library = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/orange.ppm");
    // SAFETY: the C library and a data file: nothing of ours runs.
    for path in [not_a_library, PathBuf::from("libc.so.6")] {
        let err = unsafe { spdl_io::decode::plugin::load(&path) }.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    }
}
