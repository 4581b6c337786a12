//! Hard cases 33 (hidden and side files) and 34 (links, loops, a folder named like an image),
//! built in a temporary folder at run time from the images in `fixtures/listing` (links and
//! hidden files do not survive every copy of a repository). Shared by the spdl-sources and
//! spdl-cli tests (`#[path]`).
#![allow(dead_code)]

use std::fs;
use std::path::Path;

use tempfile::TempDir;

/// The real images of hard cases 33 and 34 (see `fixtures/listing/README.md`).
pub(crate) const LISTING: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../spdl-sources/tests/fixtures/listing"
);

/// Builds hard case 33 (`../shared/data/hard/33-hidden-and-sidecar-files`) in a new temporary
/// folder.
pub(crate) fn case_33() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixture = |name: &str| fs::read(Path::new(LISTING).join(name)).unwrap();
    let mut apple_double = vec![0u8; 4096];
    apple_double[..4].copy_from_slice(&[0x00, 0x05, 0x16, 0x07]);
    let mut ds_store = vec![0u8; 6148];
    ds_store[..8].copy_from_slice(b"\0\0\0\x01Bud1");
    let files: [(&str, Vec<u8>); 10] = [
        ("cat/img1.jpg", fixture("red_12x20.jpg")),
        ("dog/img2.png", fixture("blue_12x20.png")),
        ("cat/._img1.jpg", apple_double.clone()),
        ("dog/._img2.png", apple_double.clone()),
        ("__MACOSX/cat/._img1.jpg", apple_double),
        (".DS_Store", ds_store.clone()),
        ("cat/.DS_Store", ds_store),
        (
            "dog/Thumbs.db",
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1".to_vec(),
        ),
        ("desktop.ini", b"[.ShellClassInfo]\r\n".to_vec()),
        (
            ".ipynb_checkpoints/img1-checkpoint.jpg",
            fixture("green_12x20.jpg"),
        ),
    ];
    for (rel, bytes) in files {
        let path = dir.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
    dir
}

/// Builds hard case 34 (`../shared/data/hard/34-listing-symlinks-and-dirs`) in a new temporary
/// folder.
#[cfg(unix)]
pub(crate) fn case_34() -> TempDir {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("real")).unwrap();
    fs::create_dir_all(root.join("folder.jpg")).unwrap();
    fs::create_dir_all(root.join("nest")).unwrap();
    fs::copy(
        Path::new(LISTING).join("red_8x8.png"),
        root.join("real/a.png"),
    )
    .unwrap();
    fs::copy(
        Path::new(LISTING).join("green_8x8.png"),
        root.join("folder.jpg/inner.png"),
    )
    .unwrap();
    symlink("real/a.png", root.join("link_file.png")).unwrap();
    symlink("real", root.join("link_dir")).unwrap();
    symlink("missing.png", root.join("broken_link.png")).unwrap();
    symlink("..", root.join("nest/back_to_root")).unwrap();
    dir
}
