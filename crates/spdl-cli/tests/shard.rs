//! `spdl shard`: folders and ImageFolders packed into WebDataset tar shards, read back
//! byte-exact by `spdl_sources::shards` (and listed by GNU tar).

use std::path::Path;
use std::process::Command;

use spdl_sources::shards::{list_shards, ShardSource};
use spdl_sources::{DistInfo, Remainder, SamplerOptions};

fn write(root: &Path, rel: &str, data: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
}

/// A temporary folder holding `files` (path relative to it, contents).
fn folder(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, data) in files {
        write(dir.path(), rel, data);
    }
    dir
}

/// `spdl shard ARGS`, which must succeed; its stdout.
fn shard(args: &[&str]) -> String {
    let (ok, stdout, stderr) = spdl(&[&["shard"], args].concat());
    assert!(ok, "spdl shard failed: {stderr}");
    stdout
}

/// A sample read back: `(key, [(field, bytes)])`.
type Sample = (String, Vec<(String, Vec<u8>)>);

/// Every sample of the shards in `out`, in order.
fn read_back(out: &Path) -> Vec<Sample> {
    let shards = list_shards(out.to_str().unwrap()).unwrap();
    let unshuffled = SamplerOptions {
        shuffle: false,
        seed: 0,
        remainder: Remainder::Drop,
    };
    ShardSource::new(shards, DistInfo::single(), unshuffled)
        .unwrap()
        .epoch(0)
        .map(|s| {
            let s = s.unwrap();
            (s.key, s.fields)
        })
        .collect()
}

#[test]
fn a_folder_becomes_samples_grouped_by_key() {
    let src = folder(&[
        ("x/0001.jpg", b"jpeg one"),
        ("x/0001.json", b"{\"a\": 1}"),
        ("x/0002.jpg", b"jpeg two"),
        ("y/0003.txt", b""),
    ]);
    let out = tempfile::tempdir().unwrap();
    let report = shard(&[
        src.path().to_str().unwrap(),
        out.path().to_str().unwrap(),
        "--samples-per-shard",
        "2",
        "--prefix",
        "train",
    ]);
    assert!(report.starts_with("3 samples in 2 shards"), "{report}");
    assert!(report.contains("train-{000000..000001}.tar"), "{report}");
    let got = read_back(out.path());
    let f = |n: &str, d: &[u8]| (n.to_owned(), d.to_vec());
    assert_eq!(
        got,
        [
            (
                "x/0001".to_owned(),
                vec![f("jpg", b"jpeg one"), f("json", b"{\"a\": 1}")]
            ),
            ("x/0002".to_owned(), vec![f("jpg", b"jpeg two")]),
            ("y/0003".to_owned(), vec![f("txt", b"")]),
        ]
    );
    // GNU tar reads the shards too.
    if let Ok(list) = Command::new("tar")
        .arg("-tf")
        .arg(out.path().join("train-000000.tar"))
        .output()
    {
        assert_eq!(
            String::from_utf8_lossy(&list.stdout),
            "x/0001.jpg\nx/0001.json\nx/0002.jpg\n"
        );
    }
}

#[test]
fn an_image_folder_gets_a_cls_field() {
    let src = folder(&[
        ("cat/a.JPG", b"cat a"),
        ("dog/b.png", b"dog b"),
        ("dog/c.d.jpg", b"dog c"),
    ]);
    let out = tempfile::tempdir().unwrap();
    shard(&[
        src.path().to_str().unwrap(),
        out.path().to_str().unwrap(),
        "--image-folder",
    ]);
    let got = read_back(out.path());
    let keys: Vec<(&str, Vec<&str>, &[u8])> = got
        .iter()
        .map(|(k, fields)| {
            let names = fields.iter().map(|(n, _)| n.as_str()).collect();
            let cls = &fields.iter().find(|(n, _)| n == "cls").unwrap().1;
            (k.as_str(), names, cls.as_slice())
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("cat/a", vec!["jpg", "cls"], &b"0"[..]),
            ("dog/b", vec!["png", "cls"], &b"1"[..]),
            ("dog/c_d", vec!["jpg", "cls"], &b"1"[..]),
        ]
    );
    assert_eq!(got[0].1[0].1, b"cat a");
}

#[test]
fn bad_arguments_are_errors() {
    let src = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = spdl(&["shard", src.path().to_str().unwrap(), "/tmp/unused-shards"]);
    assert!(!ok);
    assert!(stderr.contains("no file to pack"), "{stderr}");
}

/// `spdl ARGS`: whether it succeeded, its stdout and its stderr.
fn spdl(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_spdl"))
        .args(args)
        .output()
        .expect("run spdl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn spdl_load_reads_shards_by_brace_pattern_with_a_shuffle_buffer() {
    // Six photographs in an ImageFolder of two classes, packed into three shards.
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/samples");
    let mut photos: Vec<_> = std::fs::read_dir(&samples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jpg"))
        .collect();
    photos.sort();
    let src = tempfile::tempdir().unwrap();
    for (i, p) in photos.iter().take(6).enumerate() {
        let class = if i % 2 == 0 { "even" } else { "odd" };
        write(
            src.path(),
            &format!("{class}/{i}.jpg"),
            &std::fs::read(p).unwrap(),
        );
    }
    let out = tempfile::tempdir().unwrap();
    shard(&[
        src.path().to_str().unwrap(),
        out.path().to_str().unwrap(),
        "--image-folder",
        "--samples-per-shard",
        "2",
    ]);
    let pattern = format!("{}/shard-{{000000..000002}}.tar", out.path().display());
    let (ok, stdout, stderr) = spdl(&[
        "load",
        &pattern,
        "--json",
        "--size",
        "32",
        "-b",
        "4",
        "--epochs",
        "2",
        "--shuffle",
        "--shuffle-buffer",
        "3",
        "-t",
        "2",
    ]);
    assert!(ok, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["images"], 12, "{stdout}");
    assert_eq!(report["failed"], 0, "{stdout}");
    // A missing shard of the pattern is named before anything runs.
    let missing = format!("{}/shard-{{000000..000003}}.tar", out.path().display());
    let (ok, _, stderr) = spdl(&["load", &missing, "-q"]);
    assert!(!ok && stderr.contains("shard-000003.tar"), "{stderr}");
    // --shuffle-buffer on a folder is refused.
    let (ok, _, stderr) = spdl(&[
        "load",
        src.path().to_str().unwrap(),
        "--shuffle-buffer",
        "4",
    ]);
    assert!(!ok && stderr.contains("tar shards only"), "{stderr}");
}

#[test]
fn spdl_cache_writes_a_cache_of_every_image() {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/samples");
    let out = tempfile::tempdir().unwrap();
    let cache = out.path().join("samples.spdlcache");
    let (ok, stdout, stderr) = spdl(&[
        "cache",
        samples.to_str().unwrap(),
        cache.to_str().unwrap(),
        "--size",
        "48",
        "-t",
        "2",
    ]);
    assert!(ok, "{stderr}");
    let n = spdl_sources::walk_dir(&samples, &spdl_sources::Extensions::images())
        .unwrap()
        .len();
    assert!(
        stdout.starts_with(&format!("{n} records of 48x48x3")),
        "{stdout}"
    );
    let c = spdl_io::cache::DecodedCache::open(&cache, true).unwrap();
    assert_eq!((c.len(), c.shape()), (n, [48, 48, 3]));
    for i in 0..n {
        c.record(i).unwrap();
    }
    assert!(
        stdout.contains(&format!("0 failed of {n} listed")),
        "{stdout}"
    );

    // One file that is no image: every listed file is a record or one named failure, and
    // reading its record is an error naming the record.
    let src = tempfile::tempdir().unwrap();
    let photo = std::fs::read(samples.join("opencv_aero1.jpg")).unwrap();
    std::fs::write(src.path().join("a.jpg"), &photo).unwrap();
    std::fs::write(src.path().join("b.jpg"), b"not a jpeg").unwrap();
    let (ok, stdout, stderr) = spdl(&[
        "cache",
        src.path().to_str().unwrap(),
        cache.to_str().unwrap(),
        "--size",
        "16",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("1 records of 16x16x3"), "{stdout}");
    assert!(stdout.contains("1 failed of 2 listed"), "{stdout}");
    assert!(stderr.contains("b.jpg"), "{stderr}");
    let c = spdl_io::cache::DecodedCache::open(&cache, true).unwrap();
    assert_eq!(c.len(), 2);
    c.record(0).unwrap();
    let e = c.record(1).unwrap_err().to_string();
    assert!(e.contains("samples.spdlcache#1: not stored"), "{e}");
}

/// `spdl load PATH --json` on a tar shard: the report.
fn load_report(path: &Path) -> serde_json::Value {
    let (ok, stdout, stderr) = spdl(&[
        "load",
        path.to_str().unwrap(),
        "--json",
        "--size",
        "32",
        "-b",
        "2",
        "-t",
        "2",
    ]);
    assert!(ok, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// [`load_report`] of `path`, checked to count `[listed, images, failed]` samples, and its
/// [`failures`].
fn load_counted(path: &Path, counts: [u64; 3]) -> (serde_json::Value, Vec<(String, String)>) {
    let report = load_report(path);
    let got = ["listed", "images", "failed"].map(|k| report[k].as_u64());
    assert_eq!(got, counts.map(Some), "{report}");
    let failed = failures(&report);
    (report, failed)
}

/// `(sample, reason)` of each failure in a report, sorted.
fn failures(report: &serde_json::Value) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = report["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap();
            let sample = path.rsplit_once('#').map_or(path, |(_, s)| s);
            (sample.to_owned(), f["reason"].as_str().unwrap().to_owned())
        })
        .collect();
    all.sort();
    all
}

#[test]
fn spdl_load_accounts_for_every_sample_of_a_shard_with_links_and_empty_members() {
    // Case 38 of the shared hard cases (crates/spdl-sources/tests/fixtures/38-*/README.md):
    // a directory, a hard link and a symlink to 0001.png, a 0-byte 0005.png, a FIFO.
    let case = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../spdl-sources/tests/fixtures/38-tar-links-dirs-empty/links.tar");
    let (_, failed) = load_counted(&case, [6, 5, 1]);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, "data/0005.png");
    assert!(failed[0].1.contains("empty file (0 bytes)"), "{failed:?}");
}

#[test]
fn spdl_load_names_samples_missing_their_image_and_reads_a_shard_without_end_marker() {
    let photo = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/samples/opencv_aero1.jpg"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.tar");
    let mut w = spdl_io::array::tar::TarWriter::new(Vec::new());
    w.append("a.jpg", &photo).unwrap();
    w.append("a.cls", b"0").unwrap();
    // Labels only: one named failure naming the shard, the key and the missing field.
    w.append("b.cls", b"1").unwrap();
    w.append("b.json", b"{}").unwrap();
    w.append_link("c.jpg", "a.jpg", true).unwrap();
    w.append("d.jpg", &photo).unwrap();
    // No end-of-archive marker after the last member, as a killed writer leaves it.
    let bytes = w.finish().unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 1024]).unwrap();
    let (report, failed) = load_counted(&path, [4, 3, 1]);
    assert_eq!(failed[0].0, "b", "{failed:?}");
    assert!(
        failed[0].1.contains(
            "missing field: sample b: no image field (jpg, png, ...); its fields: cls, json"
        ),
        "{failed:?}"
    );
    assert!(report["failures"][0]["path"]
        .as_str()
        .unwrap()
        .contains("s.tar#b"));
}
