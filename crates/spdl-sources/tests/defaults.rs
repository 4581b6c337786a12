//! The documented defaults of the option structs (derived with `SmartDefault` beside their
//! fields).

use std::time::Duration;

use spdl_sources::{Remainder, RetryPolicy, SamplerOptions};

#[test]
fn retry_and_sampler_defaults() {
    let r = RetryPolicy::default();
    assert_eq!(r.max_retries, 3);
    assert_eq!(
        (r.initial_backoff, r.max_backoff, r.max_retry_after),
        (
            Duration::from_millis(200),
            Duration::from_secs(10),
            Duration::from_secs(60)
        )
    );
    let s = SamplerOptions::default();
    assert_eq!((s.shuffle, s.seed, s.remainder), (true, 0, Remainder::Pad));
}

#[cfg(feature = "fetch")]
#[test]
fn fetch_defaults() {
    let f = spdl_sources::FetchOptions::default();
    assert_eq!(
        (f.timeout, f.stall_timeout, f.total_timeout),
        (
            Duration::from_secs(30),
            Duration::from_secs(10),
            Duration::from_secs(120)
        )
    );
    assert!(f.reject_html);
    assert_eq!(f.retry, RetryPolicy::default());
    let s3 = f.s3;
    assert!(s3.path_style && s3.load_config && !s3.anonymous);
    assert_eq!((s3.endpoint, s3.region, s3.profile), (None, None, None));
}
