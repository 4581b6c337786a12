//! Tar archives: spdl-tar's reader and writer, re-exported (see [`spdl_tar`]): the regular
//! files in archive order, over a slice ([`members`], [`TarCursor`]) or a [`std::io::Read`]
//! ([`TarReader`]), and [`TarWriter`]. Their errors are spdl-tar's [`Error`], which converts
//! into this crate's [`crate::Error`] with the same kind, member and message (`?` does it).
//!
//! ```
//! use spdl_io::array::tar;
//!
//! /// The member names, or a named `spdl_io::Error`: `?` converts spdl-tar's error.
//! fn names(archive: &[u8]) -> Result<Vec<String>, spdl_io::Error> {
//!     Ok(tar::members(archive)
//!         .map(|m| m.map(|m| m.name))
//!         .collect::<Result<_, tar::Error>>()?)
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut w = tar::TarWriter::new(Vec::new());
//! w.append("a.txt", b"hi\n")?;
//! let archive = w.finish()?;
//! assert_eq!(names(&archive)?, ["a.txt"]);
//! assert_eq!(names(&[]).unwrap_err().kind(), spdl_io::ErrorKind::Empty);
//! # Ok(())
//! # }
//! ```

pub use spdl_tar::*;

use crate::error::{Error as IoError, ErrorKind as IoKind};

/// A tar error as this crate's: the same kind, member and message; the tar error is the source.
impl From<Error> for IoError {
    fn from(e: Error) -> Self {
        let kind = match e.kind() {
            ErrorKind::UnknownFormat => IoKind::UnknownFormat,
            ErrorKind::Unsupported => IoKind::Unsupported,
            ErrorKind::Truncated => IoKind::Truncated,
            ErrorKind::LimitExceeded => IoKind::LimitExceeded,
            ErrorKind::Empty => IoKind::Empty,
            ErrorKind::InvalidArgument => IoKind::InvalidArgument,
            // `Corrupt`, and any kind a later spdl-tar adds.
            _ => IoKind::Corrupt,
        };
        let (key, message) = (e.key().to_owned(), e.message().to_owned());
        IoError::new(kind, message).with_key(&key).with_source(e)
    }
}
