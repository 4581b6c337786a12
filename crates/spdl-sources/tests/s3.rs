//! The S3 source against s3s-fs 0.14.1 on 127.0.0.1, started here with a temporary data
//! directory and a free port (the binary: `$SPDL_S3S_FS`, `~/.cache/spdl-tools/bin/s3s-fs` or
//! `PATH`; missing, the tests fail with the install command).
//!
//! The bucket is filled the independent way: s3s-fs keeps an object as a file of
//! `DATA/bucket/KEY`, so the payloads are copied there byte-exact, with no S3 client involved.

mod common;

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{sha256_hex, S3Server, SECRET_KEY};
use spdl_core::{Op, PipelineBuilder, StageConfig};
use spdl_sources::{ErrorKind, FetchOptions, Fetcher, RetryPolicy, SampleList, Uri};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/18-s3-special-keys"
);

struct Entry {
    key: String,
    sha256: String,
    bytes: Vec<u8>,
}

fn manifest() -> Vec<Entry> {
    let text = std::fs::read_to_string(Path::new(FIXTURE).join("manifest.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| Entry {
            key: e["key"].as_str().unwrap().to_owned(),
            sha256: e["sha256"].as_str().unwrap().to_owned(),
            bytes: std::fs::read(Path::new(FIXTURE).join(e["payload"].as_str().unwrap())).unwrap(),
        })
        .collect()
}

/// Keys a file-backed server can hold byte-exact: `dir//x` and `./x` are the same file as
/// `dir/x` and `x` on a file system.
fn file_backed(key: &str) -> bool {
    !key.contains("//") && !key.split('/').any(|s| s == "." || s == "..")
}

fn put(data: &Path, bucket: &str, key: &str, bytes: &[u8]) {
    let path = data.join(bucket).join(key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn fetcher(server: &S3Server, retry: RetryPolicy) -> Fetcher {
    Fetcher::new(FetchOptions {
        timeout: Duration::from_secs(10),
        stall_timeout: Duration::from_secs(5),
        total_timeout: Duration::from_secs(30),
        retry,
        s3: server.options(),
        ..FetchOptions::default()
    })
    .unwrap()
}

/// The samples of `uri` as `fetcher` lists them.
async fn list_uri(fetcher: &Fetcher, uri: &str) -> SampleList {
    fetcher.list(&Uri::parse(uri).unwrap()).await.unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn special_keys_round_trip_and_list_byte_exact() {
    let data = tempfile::tempdir().unwrap();
    let entries = manifest();
    assert_eq!(entries.len(), 18);
    for e in entries.iter().filter(|e| file_backed(&e.key)) {
        put(data.path(), "bucket", &e.key, &e.bytes);
    }
    let server = S3Server::start(data.path());
    let fetcher = fetcher(&server, RetryPolicy::default());

    // Listing the prefix gives exactly the stored keys, byte-exact (`a b`, `a+b`, `100%`,
    // `100%25`, unicode, trailing space all distinct and undecoded).
    let list = list_uri(&fetcher, "s3://bucket/corpus/").await;
    let listed: BTreeSet<String> = list
        .iter()
        .map(|s| s.path.to_string_lossy().into_owned())
        .collect();
    let expected: BTreeSet<String> = entries
        .iter()
        .filter(|e| file_backed(&e.key))
        .map(|e| format!("s3://bucket/{}", e.key))
        .collect();
    assert_eq!(listed, expected);
    assert_eq!(list.len(), 16);
    // Without the trailing slash the key is taken as a prefix all the same.
    let again = list_uri(&fetcher, "s3://bucket/corpus").await;
    assert_eq!(again.len(), 16);

    // Every listed sample round-trips with its checksum: no two keys alias.
    for sample in list.iter() {
        let uri = sample.location();
        let Uri::S3 { key, .. } = &uri else {
            panic!("{uri:?}")
        };
        let want = entries.iter().find(|e| &e.key == key).unwrap();
        let got = fetcher.fetch(&uri).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sha256_hex(&got), want.sha256, "{key}");
    }
    // A range of an object.
    let uri = Uri::parse("s3://bucket/corpus/a+b.png").unwrap();
    let part = fetcher.fetch_range(&uri, 1..4).await.unwrap();
    assert_eq!(&part[..], b"PNG");

    // A key OpenDAL would normalise into another key is refused, never aliased.
    let e = fetcher
        .fetch(&Uri::parse("s3://bucket/corpus/dir//double_slash.png").unwrap())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string()
            .contains("s3://bucket/corpus/dir//double_slash.png"),
        "{e}"
    );

    // A missing key: one attempt, an error naming s3://bucket/key, no secret in it.
    let missing = Uri::parse("s3://bucket/corpus/does not exist.png").unwrap();
    let e = fetcher.fetch(&missing).await.unwrap_err();
    let msg = e.to_string();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::NotFound, 1), "{msg}");
    assert!(
        msg.contains("s3://bucket/corpus/does not exist.png"),
        "{msg}"
    );
    assert!(msg.contains("404"), "{msg}");
    assert!(
        !msg.contains(SECRET_KEY) && !format!("{e:?}").contains(SECRET_KEY),
        "{e:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn manifests_and_bad_credentials() {
    let data = tempfile::tempdir().unwrap();
    let entries = manifest();
    for e in &entries[..3] {
        put(data.path(), "bucket", &e.key, &e.bytes);
    }
    // A manifest in the bucket: a relative key, an absolute s3:// URI, a label.
    put(
        data.path(),
        "bucket",
        "lists/train.txt",
        format!(
            "# train\n/{}\t0\ns3://bucket/{}\t1\n",
            entries[1].key, entries[2].key
        )
        .as_bytes(),
    );
    let server = S3Server::start(data.path());
    let fetcher = fetcher(&server, RetryPolicy::default());
    let list = list_uri(&fetcher, "s3://bucket/lists/train.txt").await;
    let got: Vec<_> = list
        .iter()
        .map(|s| (s.location().to_string(), s.label))
        .collect();
    assert_eq!(
        got,
        vec![
            (format!("s3://bucket/{}", entries[1].key), Some(0)),
            (format!("s3://bucket/{}", entries[2].key), Some(1)),
        ]
    );

    // A wrong secret: 403, not retried, and neither secret shows anywhere.
    let wrong = "WRONG-secret-9f8e7d";
    let bad = Fetcher::new(FetchOptions {
        s3: spdl_sources::S3Options {
            secret_access_key: Some(wrong.into()),
            ..server.options()
        },
        ..FetchOptions::default()
    })
    .unwrap();
    let e = bad
        .fetch(&Uri::parse(&format!("s3://bucket/{}", entries[0].key)).unwrap())
        .await
        .unwrap_err();
    let shown = format!("{e} {e:?} {bad:?}");
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    assert_eq!(e.attempts(), 1, "{e}");
    assert!(
        !shown.contains(wrong) && !shown.contains(SECRET_KEY),
        "{shown}"
    );
}

/// The server is killed in the middle of an epoch and started again: samples whose retries
/// outlast the outage are delivered, exactly once each; fetches with a budget shorter than
/// the outage fail with errors that name the object and the connection failure.
#[test]
fn server_killed_mid_epoch_and_restarted() {
    let data = tempfile::tempdir().unwrap();
    let n = 60;
    let mut sums = Vec::new();
    for i in 0..n {
        let bytes = format!("\u{89}PNG sample {i:03} {}", "x".repeat(2000 + i)).into_bytes();
        sums.push(sha256_hex(&bytes));
        put(data.path(), "bucket", &format!("epoch/{i:03}.bin"), &bytes);
    }
    let server = Arc::new(Mutex::new(S3Server::start(data.path())));
    let patient = fetcher(
        &server.lock().unwrap(),
        RetryPolicy {
            max_retries: 12,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(800),
            ..RetryPolicy::default()
        },
    );
    let impatient = fetcher(
        &server.lock().unwrap(),
        RetryPolicy {
            max_retries: 1,
            initial_backoff: Duration::from_millis(50),
            ..RetryPolicy::default()
        },
    );
    // Even samples go through the patient fetcher, odd ones through the impatient one.
    let errors: Arc<Mutex<Vec<spdl_sources::Error>>> = Arc::default();
    let fetch = {
        let errors = errors.clone();
        Op::future(move |i: usize| {
            let f = if i % 2 == 0 {
                patient.clone()
            } else {
                impatient.clone()
            };
            let errors = errors.clone();
            async move {
                // Pace the epoch so that the outage falls in its middle.
                tokio::time::sleep(Duration::from_millis(30)).await;
                let uri = Uri::parse(&format!("s3://bucket/epoch/{i:03}.bin")).unwrap();
                match f.fetch(&uri).await {
                    Ok(b) => Ok(Some((i, b))),
                    Err(e) => {
                        let msg = e.to_string();
                        errors.lock().unwrap().push(e);
                        Err(msg.into())
                    }
                }
            }
        })
    };
    let mut pipeline = PipelineBuilder::source(move |_| 0..n)
        .pipe(fetch, StageConfig::named("fetch").concurrency(4))
        .sink(2)
        .build(2)
        .unwrap();
    let mut delivered = Vec::new();
    let mut outage = None;
    for item in pipeline.iter() {
        let (i, bytes) = item.unwrap();
        assert_eq!(sha256_hex(&bytes), sums[i], "sample {i}");
        delivered.push(i);
        if delivered.len() == 10 {
            server.lock().unwrap().kill();
            let server = server.clone();
            outage = Some(std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(1500));
                server.lock().unwrap().restart();
            }));
        }
    }
    pipeline.stop();
    outage.unwrap().join().unwrap();

    let unique: HashSet<_> = delivered.iter().copied().collect();
    assert_eq!(
        unique.len(),
        delivered.len(),
        "a sample was delivered twice: {delivered:?}"
    );
    let errors = errors.lock().unwrap();
    assert_eq!(
        delivered.len() + errors.len(),
        n,
        "every sample delivered or failed"
    );
    // All patient (even) samples made it through the outage.
    assert!(
        (0..n).step_by(2).all(|i| unique.contains(&i)),
        "{delivered:?}"
    );
    // Some impatient ones failed during the outage, each with a clear error.
    assert!(
        !errors.is_empty(),
        "the outage failed nothing: {delivered:?}"
    );
    for e in errors.iter() {
        let msg = e.to_string();
        assert_eq!(e.kind(), ErrorKind::Network, "{msg}");
        assert_eq!(e.attempts(), 2, "{msg}");
        assert!(msg.contains("s3://bucket/epoch/"), "{msg}");
        assert!(msg.to_lowercase().contains("connect"), "{msg}");
    }
}
