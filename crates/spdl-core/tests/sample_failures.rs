//! Typed per-sample failures for a Rust consumer: each failed sample arrives on
//! `Pipeline::failures()` with its stage, position and error (kind, the op's own error, its
//! causes), and a failure budget's error is caused by the failure that exceeded it.

use std::collections::BTreeSet;
use std::error::Error as _;
use std::fmt;
use std::sync::Arc;

use spdl_core::{Error, ErrorKind, Op, PipelineBuilder, StageConfig};

/// An op's own error, with a cause of its own.
#[derive(Debug)]
struct Unreadable {
    n: u64,
    cause: std::io::Error,
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sample {} is unreadable", self.n)
    }
}

impl std::error::Error for Unreadable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cause)
    }
}

/// What an error reporter (anyhow, eyre) prints: the error, then each cause.
fn chain(e: &dyn std::error::Error) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut next = e.source();
    while let Some(s) = next {
        out.push(s.to_string());
        next = s.source();
    }
    out
}

#[test]
fn each_failed_sample_is_reported_with_its_stage_position_and_error() {
    let mut pipeline = PipelineBuilder::source(|_| 0..10u64)
        .pipe(
            Op::blocking(|n: u64| match n {
                2 | 5 => Err(Box::new(Unreadable {
                    n,
                    cause: std::io::Error::other("bad sector"),
                }) as _),
                7 => panic!("seven"),
                n => Ok(Some(n)),
            }),
            StageConfig::named("read").concurrency(3),
        )
        .build(2)
        .unwrap();
    let items: BTreeSet<u64> = pipeline.iter().map(|r| r.unwrap()).collect();
    assert_eq!(items, BTreeSet::from([0, 1, 3, 4, 6, 8, 9]));

    let mut failures: Vec<_> = pipeline.failures().try_iter().collect();
    failures.sort_by_key(|f| f.position);
    let positions: Vec<_> = failures.iter().map(|f| f.position).collect();
    assert_eq!(positions, [Some(2), Some(5), Some(7)]);
    assert!(failures.iter().all(|f| f.stage == "read"));
    assert_eq!(pipeline.unreported_failures(), 0);

    let two = &failures[0].error;
    assert_eq!(two.kind(), ErrorKind::OpFailed);
    assert_eq!((two.stage(), two.position()), (Some("read"), Some(2)));
    let own = two.get_ref().and_then(|e| e.downcast_ref::<Unreadable>());
    assert_eq!(own.map(|u| u.n), Some(2));
    // Each text once: the op's message is in the error's own, its cause follows.
    assert_eq!(
        chain(two.as_ref()),
        [
            "op failed: stage=read position=2: sample 2 is unreadable",
            "bad sector"
        ]
    );

    let seven = &failures[2].error;
    assert_eq!(seven.kind(), ErrorKind::OpPanicked);
    assert!(seven.to_string().contains("seven"), "{seven}");
}

#[test]
fn a_budget_error_is_caused_by_the_failure_that_exceeded_it() {
    let mut pipeline = PipelineBuilder::source(|_| 0..50u64)
        .pipe(
            Op::blocking(|n: u64| {
                if n % 10 == 3 {
                    Err(format!("no {n}").into())
                } else {
                    Ok(Some(n))
                }
            }),
            StageConfig::named("check").concurrency(1),
        )
        .max_failures(1)
        .build(1)
        .unwrap();
    let err = pipeline
        .iter()
        .find_map(Result::err)
        .expect("the budget stops the epoch");
    assert_eq!(err.kind(), ErrorKind::TooManyFailures);
    let cause = err
        .source()
        .and_then(|s| s.downcast_ref::<Arc<Error>>())
        .expect("the last failure is the cause");
    assert_eq!(cause.kind(), ErrorKind::OpFailed);
    assert_eq!(cause.position(), Some(13));
    assert_eq!(
        cause.to_string(),
        "op failed: stage=check position=13: no 13"
    );
    // Both failures were reported, in order.
    let reported: Vec<_> = pipeline.failures().try_iter().map(|f| f.position).collect();
    assert_eq!(reported, [Some(3), Some(13)]);
}
