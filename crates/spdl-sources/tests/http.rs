//! The HTTP source against a fault-injecting server on 127.0.0.1 (hard case 19): retries with
//! `Retry-After`, slow, stalled, short and HTML bodies, 404, and a stalled request that does
//! not hold up the other samples of a pipeline.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{FaultServer, PAYLOAD};
use spdl_core::{Op, PipelineBuilder, StageConfig};
use spdl_sources::{ErrorKind, FetchOptions, Fetcher, RetryPolicy, Uri};

/// The configuration EXPECTED.md was written for: 3 retries, 2 s read (stall) timeout, 10 s
/// total.
fn options() -> FetchOptions {
    FetchOptions {
        timeout: Duration::from_secs(10),
        stall_timeout: Duration::from_secs(2),
        total_timeout: Duration::from_secs(10),
        retry: RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            ..RetryPolicy::default()
        },
        ..FetchOptions::default()
    }
}

const PATHS: [&str; 8] = [
    "/ok.jpg",
    "/flaky.jpg",
    "/always503.jpg",
    "/slow.jpg",
    "/stall.jpg",
    "/short.jpg",
    "/404.jpg",
    "/html.jpg",
];

#[tokio::test(flavor = "current_thread")]
async fn every_fault_has_its_outcome() {
    let server = FaultServer::start(None, Duration::ZERO);
    let fetcher = Fetcher::new(options()).unwrap();
    let start = Instant::now();
    let results = futures_util::future::join_all(PATHS.iter().map(|p| {
        let fetcher = fetcher.clone();
        let uri = Uri::parse(&server.url(p)).unwrap();
        async move {
            let r = fetcher.fetch(&uri).await;
            (r, start.elapsed())
        }
    }))
    .await;
    let total = start.elapsed();
    let by_path: std::collections::HashMap<_, _> = PATHS.iter().copied().zip(results).collect();

    for ok in ["/ok.jpg", "/flaky.jpg", "/slow.jpg"] {
        let (r, _) = &by_path[ok];
        assert_eq!(r.as_ref().map(|b| &b[..]).unwrap(), PAYLOAD, "{ok}");
    }
    // flaky: 503 + Retry-After: 1 twice, then 200; the waits honour Retry-After.
    assert_eq!(server.hits("/flaky.jpg"), 3);
    assert!(
        by_path["/flaky.jpg"].1 >= Duration::from_secs(2),
        "{:?}",
        by_path["/flaky.jpg"].1
    );
    assert_eq!(server.hits("/ok.jpg"), 1);
    assert_eq!(server.hits("/slow.jpg"), 1);

    let err = |p: &str| {
        let e = by_path[p].0.as_ref().unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(&server.url(p)), "{p}: {msg}");
        (e, msg)
    };
    let (e, msg) = err("/always503.jpg");
    assert_eq!(
        (e.kind(), e.status(), e.attempts()),
        (ErrorKind::Http, Some(503), 4)
    );
    assert!(msg.contains("503") && msg.contains("4 attempts"), "{msg}");
    assert_eq!(server.hits("/always503.jpg"), 4);

    let (e, msg) = err("/stall.jpg");
    assert_eq!(e.kind(), ErrorKind::Stalled, "{msg}");
    assert!(msg.contains("after 100 of 758 bytes"), "{msg}");
    assert!(
        by_path["/stall.jpg"].1 < Duration::from_secs(11),
        "{:?}",
        by_path["/stall.jpg"].1
    );
    assert!(
        (2..=4).contains(&server.hits("/stall.jpg")),
        "{}",
        server.hits("/stall.jpg")
    );

    let (e, msg) = err("/short.jpg");
    assert_eq!(e.kind(), ErrorKind::ShortBody, "{msg}");
    assert!(
        msg.contains("incomplete body: got 758 of 1258 bytes"),
        "{msg}"
    );
    assert!(server.hits("/short.jpg") >= 1);

    let (e, msg) = err("/404.jpg");
    assert_eq!(
        (e.kind(), e.status(), e.attempts()),
        (ErrorKind::NotFound, Some(404), 1)
    );
    assert!(msg.contains("404"), "{msg}");
    assert_eq!(server.hits("/404.jpg"), 1, "a 404 is not retried");

    let (e, msg) = err("/html.jpg");
    assert_eq!(e.kind(), ErrorKind::NotAnImage, "{msg}");
    assert!(msg.contains("text/html"), "{msg}");
    assert_eq!(server.hits("/html.jpg"), 1);

    assert!(total < Duration::from_secs(12), "{total:?}");
}

/// EXPECTED.md's whole run through a pipeline: fetch concurrency 8, delivered = 3, failures
/// = 5; the ok samples come out at once while /stall.jpg waits out its timeouts.
#[test]
fn pipeline_goes_on_and_a_stall_holds_nothing_up() {
    let server = FaultServer::start(None, Duration::ZERO);
    let fetcher = Fetcher::new(options()).unwrap();
    let mut urls: Vec<String> = PATHS.iter().map(|p| server.url(p)).collect();
    // 20 more good samples queued behind the bad ones.
    urls.extend((0..20).map(|i| server.url(&format!("/ok.jpg?i={i}"))));
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let fetch = {
        let failures = failures.clone();
        Op::future(move |url: String| {
            let (fetcher, failures) = (fetcher.clone(), failures.clone());
            async move {
                let uri = Uri::parse(&url)?;
                match fetcher.fetch(&uri).await {
                    Ok(bytes) => Ok(Some((url, bytes))),
                    Err(e) => {
                        failures.lock().unwrap().push(e.to_string());
                        Err(e.into())
                    }
                }
            }
        })
    };
    let mut pipeline = PipelineBuilder::source(move |_| urls.clone().into_iter())
        .pipe(fetch, StageConfig::named("fetch").concurrency(8))
        .sink(4)
        .build(2)
        .unwrap();
    let start = Instant::now();
    let mut delivered = Vec::new();
    for item in pipeline.iter() {
        let (url, bytes) = item.unwrap();
        assert_eq!(&bytes[..], PAYLOAD, "{url}");
        delivered.push((url, start.elapsed()));
    }
    let total = start.elapsed();
    pipeline.stop();
    assert_eq!(delivered.len(), 3 + 20, "{delivered:?}");
    let failures = failures.lock().unwrap();
    assert_eq!(failures.len(), 5, "{failures:?}");
    // The 20 extra samples were fetched while /stall.jpg and /always503.jpg were still being
    // retried: well before the slowest failure.
    let last_ok = delivered
        .iter()
        .filter(|(u, _)| u.contains("?i="))
        .map(|(_, t)| *t)
        .max()
        .unwrap();
    assert!(last_ok < Duration::from_secs(4), "{last_ok:?}");
    assert!(total < Duration::from_secs(12), "{total:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn ranges_and_special_urls() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a b+c%.jpg"), PAYLOAD).unwrap();
    let server = FaultServer::start(Some(dir.path().to_path_buf()), Duration::ZERO);
    let fetcher = Fetcher::new(options()).unwrap();
    // A space is encoded on the wire; `%25` is sent as written and decoded by nobody here,
    // so the file name on the server side is taken literally from the request path.
    let uri = Uri::parse(&server.url("/files/a%20b+c%.jpg")).unwrap();
    let e = fetcher.fetch(&uri).await.unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::NotFound,
        "the test server does not percent-decode: {e}"
    );
    std::fs::write(dir.path().join("plain.jpg"), PAYLOAD).unwrap();
    let uri = Uri::parse(&server.url("/files/plain.jpg")).unwrap();
    // The test server ignores Range: the fetcher cuts the answer itself.
    let part = fetcher.fetch_range(&uri, 10..20).await.unwrap();
    assert_eq!(&part[..], &PAYLOAD[10..20]);
    let past_end = fetcher.fetch_range(&uri, 700..10_000).await.unwrap();
    assert_eq!(&past_end[..], &PAYLOAD[700..]);
}

#[tokio::test(flavor = "current_thread")]
async fn connection_refused_is_retried_then_named() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let fetcher = Fetcher::new(FetchOptions {
        retry: RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(10),
            ..RetryPolicy::default()
        },
        ..options()
    })
    .unwrap();
    let url = format!("http://127.0.0.1:{port}/x.jpg?X-Amz-Signature=topsecret");
    let e = fetcher.fetch(&Uri::parse(&url).unwrap()).await.unwrap_err();
    let msg = e.to_string();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::Network, 3), "{msg}");
    assert!(
        msg.contains(&format!(
            "http://127.0.0.1:{port}/x.jpg?X-Amz-Signature=REDACTED"
        )),
        "{msg}"
    );
    assert!(!msg.contains("topsecret"), "{msg}");
    assert!(msg.to_lowercase().contains("connect"), "{msg}");
}

/// Adaptive fetch concurrency end to end: a pipeline's fetch stage admits its requests through
/// a `FetchLimiter` against the loopback server. Every object arrives once and whole, and the
/// requests in flight never pass the most the limiter allowed (nor its bound); a fixed limit
/// never moves.
#[test]
fn fetch_limiter_admits_a_pipeline_s_requests() {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use spdl_sources::concurrency::{AdaptiveConcurrency, FetchLimiter};

    let server = FaultServer::start(None, Duration::ZERO);
    let adaptive = AdaptiveConcurrency {
        start: 4,
        max: 24,
        ..AdaptiveConcurrency::default()
    };
    for limiter in [
        FetchLimiter::adaptive(adaptive).unwrap(),
        FetchLimiter::fixed(3),
    ] {
        let fetcher = Fetcher::new(options()).unwrap();
        let urls: Vec<String> = (0..300)
            .map(|i| server.url(&format!("/ok.jpg?i={i}")))
            .collect();
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let fetch = {
            let (limiter, now, most) = (limiter.clone(), now.clone(), most.clone());
            Op::future(move |url: String| {
                let (fetcher, limiter) = (fetcher.clone(), limiter.clone());
                let (now, most) = (now.clone(), most.clone());
                async move {
                    let _slot = limiter.acquire().await;
                    most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    let bytes = fetcher.fetch(&Uri::parse(&url)?).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    Ok(Some((url, bytes?)))
                }
            })
        };
        let source = urls.clone();
        let mut pipeline = PipelineBuilder::source(move |_| source.clone().into_iter())
            .pipe(
                fetch,
                StageConfig::named("fetch").concurrency(limiter.max()),
            )
            .sink(4)
            .build(2)
            .unwrap();
        let mut got = BTreeSet::new();
        for item in pipeline.iter() {
            let (url, bytes) = item.unwrap();
            assert_eq!(&bytes[..], PAYLOAD, "{url}");
            assert!(got.insert(url.clone()), "{url} twice");
        }
        pipeline.stop();
        assert_eq!(got, urls.into_iter().collect::<BTreeSet<_>>());
        let (limit, peak, most) = (limiter.limit(), limiter.peak(), most.load(Ordering::SeqCst));
        if limiter.is_adaptive() {
            assert!((4..=24).contains(&limit), "limit {limit}");
            assert!((limit..=24).contains(&peak), "limit {limit} peak {peak}");
            assert!(most <= peak, "{most} in flight, peak {peak}");
        } else {
            assert_eq!((limit, peak), (3, 3));
            assert!(most <= 3, "{most} in flight");
        }
    }
}
