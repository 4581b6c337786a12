//! Local sources against real folders: names that break other loaders, filters, order, the
//! ImageFolder layout, list files and read errors.
#![cfg(feature = "source-local")]

use std::fs;
use std::path::{Path, PathBuf};

use spdl_sources::{
    read_file, read_file_async, read_list_file, walk_dir, walk_dir_with, ErrorKind, Extensions,
    ImageFolder, WalkOptions,
};

#[path = "common/listing_cases.rs"]
mod listing_cases;
#[cfg(unix)]
use listing_cases::case_34;
use listing_cases::{case_33, LISTING};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/17-unicode-and-space-filenames"
);

/// The 12 sample files of the fixture, as `EXPECTED.md` lists them (UTF-8 bytes, byte-exact).
const FIXTURE_NAMES: [&str; 12] = [
    "plain.png",
    "with space.png",
    "  leading and trailing spaces  .png",
    "caf\u{e9}_\u{fc}n\u{ef}c\u{f6}d\u{e9}_NFC.png",
    "cafe\u{301}_u\u{308}ni\u{308}co\u{308}de\u{301}_NFD.png",
    "日本語の画像.png",
    "emoji_🙂.png",
    "hash#percent%25plus+amp&.png",
    "semi;colon,comma=eq.png",
    "UPPER.PNG",
    "dots.in.name..png",
    "no_extension",
];

/// The samples' paths relative to `root`, as text (the names compared here are UTF-8).
fn names(list: &spdl_sources::SampleList, root: &Path) -> Vec<String> {
    list.iter()
        .map(|s| s.path.strip_prefix(root).unwrap().display().to_string())
        .collect()
}

fn touch(path: &Path) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(path, b"x").unwrap();
}

/// A temporary folder with a one-byte file at each of `files` (relative paths).
fn folder_with(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for rel in files {
        touch(&dir.path().join(rel));
    }
    dir
}

#[test]
fn fixture_names_are_listed_byte_exact_in_byte_order() {
    let root = Path::new(FIXTURE);
    let all = walk_dir(root, &Extensions::any()).unwrap();
    let mut expected = FIXTURE_NAMES.to_vec();
    expected.extend(["EXPECTED.md", "make_non_utf8_name.py", "ref/all.npy"]);
    expected.sort(); // `str` orders by bytes
    assert_eq!(names(&all, root), expected);

    // The NFC and NFD names look alike and are two files with their own bytes.
    assert!(FIXTURE_NAMES[3].len() < FIXTURE_NAMES[4].len());
    for name in &FIXTURE_NAMES {
        let bytes = read_file(root.join(name)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}");
    }

    // The image filter keeps the 11 names with an image extension, UPPER.PNG included.
    let images = walk_dir(root, &Extensions::images()).unwrap();
    let image_names = names(&images, root);
    assert_eq!(image_names.len(), 11);
    assert!(image_names.contains(&"UPPER.PNG".into()));
    assert!(!image_names.contains(&"no_extension".into()));
    assert_eq!(images.name(), FIXTURE);
}

#[test]
fn nested_folders_and_extension_filter() {
    let dir = folder_with(&[
        "b/2.JPG",
        "a/z.png",
        "a/b/x.jpeg",
        "a-b/y.webp",
        "a/notes.txt",
        "c/d/e/f.TIFF",
        "top.gif",
        "weird.Png.bak",
    ]);
    let root = dir.path();
    fs::create_dir_all(root.join("empty/dir")).unwrap();
    let list = walk_dir(root, &Extensions::default()).unwrap();
    let expected = [
        "a-b/y.webp",
        "a/b/x.jpeg",
        "a/z.png",
        "b/2.JPG",
        "c/d/e/f.TIFF",
        "top.gif",
    ];
    assert_eq!(names(&list, root), expected);
    assert!(list.iter().all(|s| s.label.is_none()));

    let txt = walk_dir(root, &Extensions::new(["TXT", ".bak"])).unwrap();
    assert_eq!(names(&txt, root), ["a/notes.txt", "weird.Png.bak"]);
}

#[test]
fn walk_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let err = walk_dir(&missing, &Extensions::any()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(err.path(), Some(missing.as_path()));
    assert!(err.to_string().contains("missing"), "{err}");

    let file = dir.path().join("file.png");
    touch(&file);
    let err = walk_dir(&file, &Extensions::any()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotADirectory);
}

#[cfg(unix)]
#[test]
fn non_utf8_names_survive_and_are_escaped_in_errors() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let dir = tempfile::tempdir().unwrap();
    let name = OsStr::from_bytes(b"caf\xe9_latin1.png");
    fs::copy(Path::new(FIXTURE).join("plain.png"), dir.path().join(name)).unwrap();
    touch(&dir.path().join("cafz.png"));
    let list = walk_dir(dir.path(), &Extensions::images()).unwrap();
    assert_eq!(list.len(), 2);
    // Raw bytes: 0xe9 sorts after 'z' (0x7a).
    assert_eq!(list.samples()[1].path.file_name(), Some(name));
    assert!(read_file(&list.samples()[1].path)
        .unwrap()
        .starts_with(b"\x89PNG"));

    let err = read_file(dir.path().join(OsStr::from_bytes(b"gone\xff.png"))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.to_string().contains("gone\\xff.png"), "{err}");

    // A list file with the raw bytes.
    let list_path = dir.path().join("list.txt");
    fs::write(&list_path, b"caf\xe9_latin1.png\n").unwrap();
    let listed = read_list_file(&list_path).unwrap();
    assert_eq!(listed.samples()[0].path, dir.path().join(name));
}

#[cfg(unix)]
#[test]
fn symlinks_are_followed_loops_cut_and_broken_links_listed() {
    use std::os::unix::fs::symlink;

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    touch(&root.join("real/a.png"));
    touch(&dir.path().join("outside/b.png"));
    symlink(dir.path().join("outside"), root.join("linked")).unwrap();
    symlink(root.join("real/a.png"), root.join("alias.png")).unwrap();
    let list = walk_dir(&root, &Extensions::images()).unwrap();
    assert_eq!(
        names(&list, &root),
        ["alias.png", "linked/b.png", "real/a.png"]
    );
    assert!(list.warnings().is_empty());

    // A loop is cut: each file once, one warning naming the link.
    symlink(&root, root.join("real/loop")).unwrap();
    let list = walk_dir(&root, &Extensions::images()).unwrap();
    assert_eq!(
        names(&list, &root),
        ["alias.png", "linked/b.png", "real/a.png"]
    );
    assert_eq!(list.warnings().len(), 1, "{:?}", list.warnings());
    assert!(
        list.warnings()[0].contains("real/loop") && list.warnings()[0].contains("loop"),
        "{:?}",
        list.warnings()
    );

    // A broken link is a sample whose read fails naming it; a link to itself too.
    symlink(dir.path().join("nowhere.png"), root.join("broken.png")).unwrap();
    symlink(root.join("self.png"), root.join("self.png")).unwrap();
    symlink(dir.path().join("nowhere.txt"), root.join("broken.txt")).unwrap();
    let list = walk_dir(&root, &Extensions::images()).unwrap();
    assert_eq!(
        names(&list, &root),
        [
            "alias.png",
            "broken.png",
            "linked/b.png",
            "real/a.png",
            "self.png"
        ]
    );
    let err = read_file(root.join("broken.png")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("broken.png")
            && msg.contains("broken symbolic link")
            && msg.contains("nowhere.png"),
        "{msg}"
    );
    let err = read_file(root.join("self.png")).unwrap_err();
    assert!(err.to_string().contains("self.png"), "{err}");
}

#[test]
fn hidden_and_side_files_are_skipped_unless_included() {
    let dir = case_33();
    let root = dir.path();

    let list = walk_dir(root, &Extensions::images()).unwrap();
    assert_eq!(names(&list, root), ["cat/img1.jpg", "dog/img2.png"]);
    assert!(list.warnings().is_empty());

    let all = walk_dir_with(
        root,
        &Extensions::images(),
        &WalkOptions {
            include_hidden: true,
        },
    )
    .unwrap();
    assert_eq!(
        names(&all, root),
        [
            ".ipynb_checkpoints/img1-checkpoint.jpg",
            "__MACOSX/cat/._img1.jpg",
            "cat/._img1.jpg",
            "cat/img1.jpg",
            "dog/._img2.png",
            "dog/img2.png",
        ]
    );
    // Every file, hidden or not, with `Extensions::any()`.
    let any = walk_dir(root, &Extensions::any()).unwrap();
    assert_eq!(
        names(&any, root),
        [
            "cat/img1.jpg",
            "desktop.ini",
            "dog/Thumbs.db",
            "dog/img2.png"
        ]
    );

    let folder = ImageFolder::open(root, &Extensions::images(), false).unwrap();
    assert_eq!(folder.classes(), ["cat", "dog"]);
    assert_eq!(
        names(folder.samples(), root),
        ["cat/img1.jpg", "dog/img2.png"]
    );
    let folder = ImageFolder::open_with(
        root,
        &Extensions::images(),
        false,
        &WalkOptions {
            include_hidden: true,
        },
    )
    .unwrap();
    assert_eq!(
        folder.classes(),
        [".ipynb_checkpoints", "__MACOSX", "cat", "dog"]
    );
    assert_eq!(folder.samples().len(), 6);

    // The root's own name is never a reason to skip it.
    let hidden_root = dir.path().join(".hidden_root");
    touch(&hidden_root.join("x.png"));
    assert_eq!(
        walk_dir(&hidden_root, &Extensions::images()).unwrap().len(),
        1
    );
}

#[cfg(unix)]
#[test]
fn links_dirs_named_like_images_and_a_loop_back_to_the_root() {
    let dir = case_34();
    let root = dir.path();

    let list = walk_dir(root, &Extensions::images()).unwrap();
    assert_eq!(
        names(&list, root),
        [
            "broken_link.png",
            "folder.jpg/inner.png",
            "link_dir/a.png",
            "link_file.png",
            "real/a.png",
        ]
    );
    assert_eq!(list.warnings().len(), 1, "{:?}", list.warnings());
    assert!(
        list.warnings()[0].contains("nest/back_to_root"),
        "{:?}",
        list.warnings()
    );
    let red = fs::read(Path::new(LISTING).join("red_8x8.png")).unwrap();
    for rel in ["link_dir/a.png", "link_file.png", "real/a.png"] {
        assert_eq!(read_file(root.join(rel)).unwrap(), red, "{rel}");
    }
    let err = read_file(root.join("broken_link.png")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(err.path(), Some(root.join("broken_link.png").as_path()));
    assert!(err.to_string().contains("broken symbolic link"), "{err}");

    // ImageFolder: `folder.jpg`, `link_dir`, `nest` and `real` are classes. `nest/back_to_root`
    // leads to the dataset root (not an ancestor of the class folder `nest`, but of the
    // dataset): cut too, so no class lists the dataset again.
    let folder = ImageFolder::open(root, &Extensions::images(), true).unwrap();
    assert_eq!(folder.classes(), ["folder.jpg", "link_dir", "nest", "real"]);
    let labelled: Vec<_> = folder
        .samples()
        .iter()
        .map(|s| (s.path.strip_prefix(root).unwrap().to_path_buf(), s.label))
        .collect();
    assert_eq!(
        labelled,
        [
            ("folder.jpg/inner.png", 0),
            ("link_dir/a.png", 1),
            ("real/a.png", 3)
        ]
        .map(|(p, l)| (PathBuf::from(p), Some(l)))
    );
    let warnings = folder.samples().warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("nest/back_to_root"), "{warnings:?}");
}

#[test]
fn image_folder_labels_follow_sorted_class_names() {
    let dir = folder_with(&[
        "dog/2.jpg",
        "dog/1.jpg",
        "cat/x.png",
        "Zebra/z.jpeg",
        "cat/sub/y.png",
        "cat/readme.txt",
        "stray.jpg",
    ]);
    let root = dir.path();
    let folder = ImageFolder::open(root, &Extensions::images(), false).unwrap();
    // Byte order: uppercase before lowercase, as Python's sorted().
    assert_eq!(folder.classes(), ["Zebra", "cat", "dog"]);
    assert_eq!(folder.class_index("cat".as_ref()), Some(1));
    assert_eq!(folder.class_index("stray.jpg".as_ref()), None);
    assert_eq!(
        folder.class_to_idx().get(std::ffi::OsStr::new("dog")),
        Some(&2)
    );
    let got: Vec<_> = folder
        .samples()
        .iter()
        .map(|s| (s.path.strip_prefix(root).unwrap().to_path_buf(), s.label))
        .collect();
    let expected = [
        ("Zebra/z.jpeg", 0),
        ("cat/sub/y.png", 1),
        ("cat/x.png", 1),
        ("dog/1.jpg", 2),
        ("dog/2.jpg", 2),
    ];
    assert_eq!(
        got,
        expected
            .iter()
            .map(|(p, l)| (PathBuf::from(p), Some(*l)))
            .collect::<Vec<_>>()
    );
    assert_eq!(folder.root(), root);
}

#[test]
fn image_folder_empty_class_and_no_class() {
    let dir = folder_with(&["a/1.png", "b/only.txt"]);
    let root = dir.path();
    let err = ImageFolder::open(root, &Extensions::images(), false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::EmptyClass);
    let msg = err.to_string();
    assert!(
        msg.contains("classes b") && msg.contains("jpg, jpeg"),
        "{msg}"
    );

    let allowed = ImageFolder::open(root, &Extensions::images(), true).unwrap();
    assert_eq!(allowed.classes().len(), 2);
    assert_eq!(allowed.samples().len(), 1);

    let flat = folder_with(&["x.png"]);
    let err = ImageFolder::open(flat.path(), &Extensions::images(), false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoClasses);
}

#[test]
fn list_file_resolves_relative_paths_and_reports_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let lists = dir.path().join("lists");
    fs::create_dir_all(&lists).unwrap();
    let good = lists.join("train.txt");
    fs::write(
        &good,
        "# ImageNet-style list\n\nimgs/a b.jpg\t3\r\n/abs/x.png\n  leading and trailing spaces  .png\n\n",
    )
    .unwrap();
    let list = read_list_file(&good).unwrap();
    let got: Vec<_> = list.iter().map(|s| (s.path.clone(), s.label)).collect();
    assert_eq!(
        got,
        [
            (lists.join("imgs/a b.jpg"), Some(3)),
            (PathBuf::from("/abs/x.png"), None),
            (lists.join("  leading and trailing spaces  .png"), None),
        ]
    );

    let bad = lists.join("bad.txt");
    fs::write(&bad, "a.jpg\n# fine\nb.jpg\tnot-a-label\n").unwrap();
    let err = read_list_file(&bad).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidListLine);
    assert_eq!(err.line(), Some(3));
    assert_eq!(err.path(), Some(bad.as_path()));
    assert!(err.to_string().contains("bad.txt:3:"), "{err}");

    let err = read_list_file(lists.join("absent.txt")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.to_string().contains("absent.txt"), "{err}");
}

#[test]
fn list_file_lists_the_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let list_path = dir.path().join("fixture.txt");
    let mut text = String::from("# every sample of case 17\n");
    for name in FIXTURE_NAMES {
        text.push_str(&format!("{FIXTURE}/{name}\n"));
    }
    fs::write(&list_path, text).unwrap();
    let list = read_list_file(&list_path).unwrap();
    assert_eq!(list.len(), 12);
    for sample in &list {
        assert!(read_file(&sample.path).unwrap().starts_with(b"\x89PNG"));
    }
}

#[test]
fn read_file_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jpg");
    fs::write(&empty, b"").unwrap();
    assert_eq!(read_file(&empty).unwrap(), b"");

    let err = read_file(dir.path()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::IsADirectory, "{err}");
    assert_eq!(err.path(), Some(dir.path()));

    let missing = dir.path().join("nope.jpg");
    let err = read_file(&missing).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.to_string().contains("nope.jpg"), "{err}");
    assert!(std::error::Error::source(&err).is_some());
}

#[cfg(target_os = "linux")]
#[test]
fn read_file_bounds_what_it_takes_from_a_device_that_never_ends() {
    // /dev/zero has no size and no end: std::fs::read would grow until memory ran out.
    let err = read_file("/dev/zero").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("not a regular file"), "{err}");
    assert_eq!(err.path(), Some(Path::new("/dev/zero")));
    // A device that ends is read whole.
    assert_eq!(read_file("/dev/null").unwrap(), b"");
    // A FIFO with no writer would block the open forever: refused.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.jpg");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let err = read_file(&fifo).unwrap_err();
    assert!(err.to_string().contains("FIFO"), "{err}");
}

#[cfg(unix)]
#[test]
fn read_file_permission_denied() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.jpg");
    fs::write(&secret, b"data").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o000)).unwrap();
    if fs::read(&secret).is_ok() {
        // Running as root: permissions are not enforced (the mapping is unit-tested).
        return;
    }
    let err = read_file(&secret).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("secret.jpg"), "{err}");
}

#[tokio::test(flavor = "current_thread")]
async fn read_file_async_reads_and_reports() {
    let path = Path::new(FIXTURE).join("with space.png");
    let bytes = read_file_async(&path).await.unwrap();
    assert_eq!(bytes, read_file(&path).unwrap());

    let err = read_file_async(Path::new(FIXTURE).join("missing.png"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let err = read_file_async(FIXTURE).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::IsADirectory);
}
