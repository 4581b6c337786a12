//! What the host does about a plugin that misbehaves: a panic is one sample's error carrying
//! the panic's message, an impossible header is refused before anything is allocated, a plugin
//! built with `panic = "abort"` is refused at load, and the conformance kit reports each of
//! these as a finding instead of panicking itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use spdl_io::decode::plugin::load;
use spdl_io::{ColorMode, DecodeOptions, ErrorKind, Registry};
use spdl_test_plugin::Misbehaving;
use spdl_testkit::{check_decoder, Sample};

/// Runs cargo (the one running this test) in this crate's folder.
fn cargo(args: &[&str]) {
    let status = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo");
    assert!(status.success(), "cargo {args:?} failed");
}

/// `target/debug/`, where cargo puts the shared library.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/debug/deps/..")
        .to_path_buf()
}

fn library_name() -> String {
    let (prefix, suffix) = (std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    format!("{prefix}spdl_test_plugin{suffix}")
}

/// The plugin built as a third party would: first with `panic = "abort"` (copied aside),
/// then as usual. `cargo test` builds only the rlib, so the test builds both itself.
fn libraries() -> (PathBuf, PathBuf) {
    let built = target_dir().join(library_name());
    let common = [
        "--quiet",
        "-p",
        "spdl-test-plugin",
        "--lib",
        "--crate-type",
        "cdylib",
    ];
    cargo(&[&["rustc"][..], &common, &["--", "-C", "panic=abort"]].concat());
    let abort = target_dir().join(format!("abort-{}", library_name()));
    std::fs::copy(&built, &abort).expect("copy the abort build aside");
    cargo(&[&["rustc"][..], &common].concat());
    (built, abort)
}

#[test]
fn host_guards_against_a_misbehaving_plugin() {
    let (plugin, abort) = libraries();

    // SAFETY: our own test plugin; the abort build is refused before any of its code runs.
    let err = unsafe { load(&abort) }.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let text = err.to_string();
    assert!(
        text.contains("panic = \"abort\"") && text.contains("abort-"),
        "{text}"
    );

    // SAFETY: as above.
    assert_eq!(unsafe { load(&plugin) }.unwrap(), "misbehaving");
    let registry = Registry::with_defaults();
    let unchanged = DecodeOptions {
        color: ColorMode::Unchanged,
        ..DecodeOptions::default()
    };

    // A well-behaved file decodes through the C boundary.
    let ok = registry.decode("ok.misb", b"MISBfine", &unchanged).unwrap();
    assert_eq!((ok.shape(), ok.as_u8()), ([2, 2, 1], Some(&[7u8; 4][..])));

    // A panic is that sample's error, with the panic's message and the sample's name.
    for err in [
        registry.probe("p.misb", b"MISBpanic").unwrap_err(),
        registry
            .decode("p.misb", b"MISBpanic", &unchanged)
            .unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        let text = err.to_string();
        assert!(
            text.contains("p.misb") && text.contains("panicked: told to panic"),
            "{text}"
        );
    }

    // Impossible headers are refused, naming the plugin and the field, before a decode.
    for (bytes, why) in [
        (&b"MISBchan0"[..], "0 channels (an image has 1 to 4)"),
        (b"MISBdepth3", "a bit depth of 3 (8 or 16 are decoded)"),
        (b"MISBempty", "an empty image (0x0)"),
    ] {
        for err in [
            registry.probe("h.misb", bytes).unwrap_err(),
            registry.decode("h.misb", bytes, &unchanged).unwrap_err(),
        ] {
            assert_eq!(err.kind(), ErrorKind::Corrupt);
            let text = err.to_string();
            assert!(text.contains("misbehaving") && text.contains(why), "{text}");
        }
    }

    // A panic in `matches` reads as "not this format" (the host cannot trust the answer).
    let err = registry.probe("m.misb", b"MATCHPANIC").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnknownFormat);
}

#[test]
fn linked_decoder_headers_are_checked_too() {
    // The same checks hold for a decoder linked in, not loaded: they sit in `output_shape`.
    let mut registry = Registry::with_defaults();
    registry.register(Arc::new(Misbehaving));
    for bytes in [&b"MISBchan0"[..], b"MISBdepth3", b"MISBempty"] {
        let err = registry
            .decode("h.misb", bytes, &DecodeOptions::default())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    }
}

#[test]
fn conformance_kit_reports_panics_as_findings() {
    let findings = check_decoder(
        Arc::new(Misbehaving),
        &[
            Sample::new("panics.misb", b"MISBpanic".to_vec()),
            Sample::new("zero.misb", b"MISBempty".to_vec()),
            Sample::new("odd.misb", b"MATCHPANIC".to_vec()),
        ],
    );
    let joined = findings.join("\n");
    for wanted in [
        "panics.misb: probe: panicked: told to panic",
        "zero.misb: probe: empty size 0x0",
        "odd.misb: matches: panicked: matches was told to panic",
    ] {
        assert!(joined.contains(wanted), "{wanted:?} not in:\n{joined}");
    }
}
