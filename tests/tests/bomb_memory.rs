//! Decompression bombs are rejected before the pixel buffer is allocated: the process's peak
//! resident memory grows by less than 100 MB over the whole folder (the 30000x30000 PNG alone
//! would need 2.7 GB). Alone in its own test binary, so no other test moves the peak.

use spdl_io::Transform;
use spdl_tests::{hard_case, run_folder};

fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn bombs_do_not_allocate() {
    let before = peak_rss_kb();
    let out = run_folder(&hard_case("04-decompression-bomb"), Transform::Identity, 2);
    assert_eq!(out.failed, 3);
    let grown_mb = peak_rss_kb().saturating_sub(before) / 1024;
    assert!(grown_mb < 100, "peak RSS grew by {grown_mb} MB");
    for e in &out.errors {
        assert!(e.contains("exceeds the limit"), "{e}");
    }
}
