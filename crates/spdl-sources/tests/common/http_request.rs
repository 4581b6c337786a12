//! Reading the next request of a keep-alive HTTP/1.1 connection, for the loopback servers of
//! the remote-source tests (`common/mod.rs`) and of `examples/fetch_bench.rs` (`#[path]`).

use std::io::{self, BufRead};

/// The target (path and query) of the next request on `reader`, its headers read and dropped;
/// `None` when the client has closed the connection.
pub(crate) fn next_target(reader: &mut impl BufRead) -> io::Result<Option<String>> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line)? == 0 {
        return Ok(None);
    }
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let target = request_line.split_whitespace().nth(1).unwrap_or("/");
    Ok(Some(target.to_owned()))
}
