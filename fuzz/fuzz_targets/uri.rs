//! The URI parser of spdl-sources: `Uri::parse_bytes`, display, re-parse, and `join` of a
//! relative reference. A parsed URI must print as text that parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_sources::Uri;

fuzz_target!(|data: &[u8]| {
    // "uri\0reference": the part after the first NUL is joined to the parsed URI.
    let (input, reference) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b"x/../y.png"[..]),
    };
    let _ = Uri::has_scheme(input);
    let Ok(uri) = Uri::parse_bytes(input) else {
        return;
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
});
