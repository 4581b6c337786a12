//! The spdl-sources targets: the URI parser and the list-file and manifest parsers.

use std::path::Path;

use spdl_sources::{parse_list, parse_manifest, Uri};

/// `uri`: `Uri::parse_bytes`, display, re-parse, and `join` of a relative reference (the part
/// of the input after its first NUL, else `x/../y.png`). A parsed remote URI must print as
/// text that parses back to itself. Accepted: the URI parsed.
pub fn uri(data: &[u8]) -> bool {
    let (input, reference) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b"x/../y.png"[..]),
    };
    let _ = Uri::has_scheme(input);
    let Ok(uri) = Uri::parse_bytes(input) else {
        return false;
    };
    let _ = (
        uri.is_remote(),
        uri.names_prefix(),
        uri.file_name(),
        uri.as_path(),
    );
    let text = uri.to_string();
    if uri.is_remote() {
        let again = Uri::parse(&text).expect("a parsed URI's text parses again");
        assert_eq!(again, uri, "{text}");
    }
    if let Ok(joined) = uri.join(reference) {
        let _ = joined.to_string();
    }
    true
}

/// `list_file`: `parse_list` (every accepted line gives at most one sample) and
/// `parse_manifest` at a remote and a local address. Accepted: the list parsed.
pub fn list_file(data: &[u8]) -> bool {
    let listed = parse_list(data, Path::new("/data"), Path::new("/data/list.txt"));
    if let Ok(list) = &listed {
        let lines = data.split(|&b| b == b'\n').count();
        assert!(list.len() <= lines);
    }
    let at = Uri::parse("s3://bucket/lists/train.txt").expect("a valid URI");
    let _ = parse_manifest(data, &at);
    let local = Uri::local("/data/list.txt");
    let _ = parse_manifest(data, &local);
    listed.is_ok()
}
