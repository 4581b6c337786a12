//! List files: one sample per line, read as raw bytes.

use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};
use crate::list::{list_lines, split_label, Sample, SampleList};
use crate::uri::Uri;

/// Reads the list file at `path` (format below); the resulting list
/// is named after `path`.
///
/// # Format
/// ```text
/// # comment lines start with '#'; blank lines are skipped
/// train/cat/001.jpg
/// /abs/path/with space.png
/// train/dog/002.jpg<TAB>1
/// ```
/// - A line is a path, optionally followed by a TAB and an integer label (`i64`, decimal,
///   surrounding spaces allowed). A path may therefore hold anything but TAB, LF and NUL.
/// - Relative paths are resolved against the folder that holds the list file; absolute paths are
///   kept.
/// - The path is taken byte-exact: no trimming of spaces, no Unicode normalisation, no
///   percent-decoding. Only the line ending (`\n` or `\r\n`) and a UTF-8 byte-order mark at the
///   start of the file are removed.
/// - A line whose first byte is `#` is a comment (write `./#name.jpg` for a file whose name
///   starts with `#`); a `#` later in the line is part of the path. A line of only spaces and
///   tabs is blank.
/// - On Unix the bytes need not be UTF-8 (`caf\xe9.png` survives); elsewhere a path must be UTF-8.
/// - A line starting with `s3://`, `http://`, `https://` or `file://` (any case) is a URI (see
///   [`Uri::parse`]), kept as it is; such samples carry [`Sample::uri`].
///
/// # Errors
/// [`ErrorKind::NotFound`], [`ErrorKind::PermissionDenied`], [`ErrorKind::IsADirectory`] or
/// [`ErrorKind::Io`] when the list file cannot be read, naming it;
/// [`ErrorKind::InvalidListLine`] as for [`parse_list`], naming the list file and the line.
/// The files listed are not checked for existence here: a missing one fails when it is read.
pub fn read_list_file(path: impl AsRef<Path>) -> Result<SampleList> {
    let path = path.as_ref();
    let contents = std::fs::read(path).map_err(|e| Error::io(e, path))?;
    let base = path.parent().unwrap_or(Path::new(""));
    parse_list(&contents, base, path)
}

/// Parses list-file `contents`, resolving relative paths against `base_dir`; `list_path` names
/// the list in errors and in the returned list.
///
/// # Errors
/// [`ErrorKind::InvalidListLine`] with `list_path` and the 1-based line number when a line has
/// an empty path, a NUL byte, a label that is not an `i64`, more than one TAB, or (on non-Unix
/// platforms) a path that is not UTF-8.
pub fn parse_list(contents: &[u8], base_dir: &Path, list_path: &Path) -> Result<SampleList> {
    let mut samples = Vec::new();
    for (line_no, line) in list_lines(contents) {
        let bad = |reason: String| {
            Error::new(ErrorKind::InvalidListLine, reason)
                .with_path(list_path)
                .with_line(line_no)
        };
        let (path, label) = split_label(line).map_err(bad)?;
        if Uri::has_scheme(path) {
            let uri = Uri::parse_bytes(path).map_err(|e| bad(e.reason().to_owned()))?;
            samples.push(Sample::from_uri(uri, label));
            continue;
        }
        let relative = path_from_bytes(path).map_err(bad)?;
        samples.push(Sample::new(base_dir.join(relative), label));
    }
    Ok(SampleList::named_after(list_path, samples))
}

#[cfg(unix)]
fn path_from_bytes(bytes: &[u8]) -> std::result::Result<PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
}

#[cfg(not(unix))]
fn path_from_bytes(bytes: &[u8]) -> std::result::Result<PathBuf, String> {
    std::str::from_utf8(bytes)
        .map(PathBuf::from)
        .map_err(|_| format!("path \"{}\" is not valid UTF-8", escape_bytes(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &[u8]) -> Result<SampleList> {
        parse_list(text, Path::new("/data"), Path::new("/data/list.txt"))
    }

    #[test]
    fn comments_blank_lines_labels_and_crlf() {
        let list = parse(
            b"\xEF\xBB\xBF# header\n\na.jpg\r\n  \n sub/with space.png \t 3 \n/abs/x#y.png\n",
        )
        .unwrap();
        let got: Vec<_> = list.iter().map(|s| (s.path.clone(), s.label)).collect();
        assert_eq!(
            got,
            vec![
                (PathBuf::from("/data/a.jpg"), None),
                (PathBuf::from("/data/ sub/with space.png "), Some(3)),
                (PathBuf::from("/abs/x#y.png"), None),
            ]
        );
        assert_eq!(list.name(), "/data/list.txt");
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        for (text, line, needle) in [
            (&b"a.jpg\nb.jpg\tcat\n"[..], 2, "not an integer"),
            (&b"\n\n\t4\n"[..], 3, "empty path"),
            (&b"a\0b.jpg\n"[..], 1, "NUL"),
            (&b"a.jpg\t1\t2\n"[..], 1, "more than one TAB"),
            (&b"a.jpg\t99999999999999999999\n"[..], 1, "not an integer"),
            (&b"ok.jpg\ns3:///nobucket\n"[..], 2, "no bucket"),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidListLine);
            assert_eq!(err.line(), Some(line));
            let msg = err.to_string();
            assert!(msg.contains(&format!("/data/list.txt:{line}:")), "{msg}");
            assert!(msg.contains(needle), "{msg}");
        }
    }

    #[test]
    fn uri_lines_are_kept_as_uris() {
        let list = parse(b"a.jpg\ns3://b/k/x y.png\t2\nHTTPS://h/p.jpg?s=1\n").unwrap();
        let got: Vec<_> = list.iter().map(|s| (s.location(), s.label)).collect();
        assert_eq!(
            got,
            vec![
                (Uri::local("/data/a.jpg"), None),
                (Uri::parse("s3://b/k/x y.png").unwrap(), Some(2)),
                (Uri::Http("https://h/p.jpg?s=1".into()), None),
            ]
        );
        assert_eq!(list.samples()[1].path, PathBuf::from("s3://b/k/x y.png"));
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_bytes_survive() {
        use std::os::unix::ffi::OsStrExt;
        let list = parse(b"caf\xe9.png\n").unwrap();
        assert_eq!(
            list.samples()[0].path.as_os_str().as_bytes(),
            b"/data/caf\xe9.png"
        );
    }
}
