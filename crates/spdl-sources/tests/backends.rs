//! One behaviour suite, run against every backend (OpenDAL's habit): local files, HTTP on a
//! loopback server and S3 on s3s-fs, each serving the same files. Each backend's `Capability`
//! says what it can do, and the suite checks that it really does it, the same way everywhere.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::{FaultServer, S3Server};
use spdl_sources::{ErrorKind, FetchOptions, Fetcher, RetryPolicy, Uri};

/// The files every backend serves: nested folders, a manifest of relative lines.
fn files() -> Vec<(&'static str, Vec<u8>)> {
    let pattern = |n: usize, seed: u8| (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
    vec![
        ("a.bin", pattern(1000, 1)),
        ("dir/b.bin", pattern(4096, 2)),
        ("dir/sub/c.bin", pattern(17, 3)),
        ("list.txt", b"a.bin\ndir/b.bin\ndir/sub/c.bin\n".to_vec()),
    ]
}

fn write_files(root: &Path) {
    for (name, bytes) in files() {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

/// Runs the suite on one backend: `at(name)` is the URI of a file, `root` of the folder.
fn behaves(fetcher: &Fetcher, at: &dyn Fn(&str) -> Uri, root: &Uri) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cap = fetcher.capability(root).unwrap();
    let shown = root.to_string();
    assert!(cap.read, "{shown}: every backend reads");

    // Whole objects, byte-exact.
    for (name, bytes) in files() {
        let got = rt.block_on(fetcher.fetch(&at(name))).unwrap();
        assert_eq!(got.as_ref(), &bytes[..], "{shown}: {name}");
    }

    // Ranges, one cut at the end; an empty range is refused.
    let a = &files()[0].1;
    if cap.read_range {
        let got = rt
            .block_on(fetcher.fetch_range(&at("a.bin"), 10..20))
            .unwrap();
        assert_eq!(got.as_ref(), &a[10..20], "{shown}: range");
        let got = rt
            .block_on(fetcher.fetch_range(&at("a.bin"), 990..5000))
            .unwrap();
        assert_eq!(got.as_ref(), &a[990..], "{shown}: range past the end");
    }
    let err = rt
        .block_on(fetcher.fetch_range(&at("a.bin"), 5..5))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{shown}: {err}");

    // A missing object: not found, naming it, and not retried (permanent).
    let missing = at("missing.bin");
    let err = rt.block_on(fetcher.fetch(&missing)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{shown}: {err}");
    assert!(err.to_string().contains("missing.bin"), "{shown}: {err}");
    assert!(!err.is_temporary(), "{shown}: {err}");

    // A manifest of relative lines lists the same samples everywhere.
    let listed = rt.block_on(fetcher.list(&at("list.txt"))).unwrap();
    let fetched: Vec<Vec<u8>> = listed
        .iter()
        .map(|s| rt.block_on(fetcher.fetch(&s.location())).unwrap().to_vec())
        .collect();
    let expected: Vec<Vec<u8>> = files().into_iter().take(3).map(|(_, b)| b).collect();
    assert_eq!(fetched, expected, "{shown}: manifest order and contents");

    // A folder or prefix listing, where the backend has one: every file, recursively.
    if cap.list {
        let listed = rt.block_on(fetcher.list(root)).unwrap();
        let names: BTreeSet<String> = listed
            .iter()
            .map(|s| {
                let loc = s.location().to_string();
                let name = files()
                    .iter()
                    .map(|(n, _)| *n)
                    .find(|n| loc.ends_with(&format!("/{n}")));
                name.unwrap_or_else(|| panic!("{shown}: unexpected {loc}"))
                    .to_string()
            })
            .collect();
        let all: BTreeSet<String> = files().iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(names, all, "{shown}: listing");
        assert_eq!(listed.len(), all.len(), "{shown}: each file once");
    }
}

fn fetcher(options: FetchOptions) -> Fetcher {
    Fetcher::new(FetchOptions {
        timeout: Duration::from_secs(10),
        total_timeout: Duration::from_secs(30),
        retry: RetryPolicy::none(),
        ..options
    })
    .unwrap()
}

#[test]
fn local_backend() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path());
    let f = fetcher(FetchOptions::default());
    let cap = f.capability(&Uri::Local(dir.path().into())).unwrap();
    assert!(cap.list && !cap.retry);
    behaves(
        &f,
        &|name| Uri::Local(dir.path().join(name)),
        &Uri::Local(dir.path().into()),
    );
}

#[test]
fn http_backend() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path());
    let server = FaultServer::start(Some(dir.path().into()), Duration::ZERO);
    let f = fetcher(FetchOptions::default());
    let root = Uri::parse(&server.url("/files/")).unwrap();
    let cap = f.capability(&root).unwrap();
    assert!(
        !cap.list && cap.retry,
        "HTTP has no listing: URLs are manifests"
    );
    behaves(
        &f,
        &|name| Uri::parse(&server.url(&format!("/files/{name}"))).unwrap(),
        &root,
    );
}

#[test]
fn s3_backend() {
    let data = tempfile::tempdir().unwrap();
    write_files(&data.path().join("bucket"));
    let server = S3Server::start(data.path());
    let f = fetcher(FetchOptions {
        s3: server.options(),
        ..FetchOptions::default()
    });
    let root = Uri::parse("s3://bucket/").unwrap();
    assert!(f.capability(&root).unwrap().list);
    behaves(
        &f,
        &|name| Uri::parse(&format!("s3://bucket/{name}")).unwrap(),
        &root,
    );
}
