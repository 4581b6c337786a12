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

fn shard(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_spdl"))
        .arg("shard")
        .args(args)
        .output()
        .expect("run spdl");
    assert!(
        out.status.success(),
        "spdl shard failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
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
    let src = tempfile::tempdir().unwrap();
    write(src.path(), "x/0001.jpg", b"jpeg one");
    write(src.path(), "x/0001.json", b"{\"a\": 1}");
    write(src.path(), "x/0002.jpg", b"jpeg two");
    write(src.path(), "y/0003.txt", b"");
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
    let src = tempfile::tempdir().unwrap();
    write(src.path(), "cat/a.JPG", b"cat a");
    write(src.path(), "dog/b.png", b"dog b");
    write(src.path(), "dog/c.d.jpg", b"dog c");
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
    let out = Command::new(env!("CARGO_BIN_EXE_spdl"))
        .args(["shard", src.path().to_str().unwrap(), "/tmp/unused-shards"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no file to pack"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
