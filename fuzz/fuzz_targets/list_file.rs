//! The list-file parser (`parse_list`) and the manifest parser (`parse_manifest`) of
//! spdl-sources: never a panic, and every accepted line gives one sample.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use spdl_sources::{parse_list, parse_manifest, Uri};

fuzz_target!(|data: &[u8]| {
    if let Ok(list) = parse_list(data, Path::new("/data"), Path::new("/data/list.txt")) {
        let lines = data.split(|&b| b == b'\n').count();
        assert!(list.len() <= lines);
    }
    let at = Uri::parse("s3://bucket/lists/train.txt").expect("a valid URI");
    let _ = parse_manifest(data, &at);
    let local = Uri::local("/data/list.txt");
    let _ = parse_manifest(data, &local);
});
