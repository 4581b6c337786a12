//! Recursive directory listing with an extension filter and a machine-independent order.

use std::path::{Component, Path};

use crate::error::{Error, ErrorKind, Result};
use crate::list::{Sample, SampleList};

/// The extensions the image listings accept by default (compared case-insensitively).
const IMAGE_EXTENSIONS: [&str; 8] = ["jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff"];

/// Which file extensions a listing accepts, compared ASCII-case-insensitively.
///
/// The extension is what follows the last `.` of the file name (`Path::extension`):
/// `dots.in.name..png` has `png`, `no_extension` has none, `.png` (a hidden file) has none.
/// Mirrors the `extensions` argument of torchvision's `ImageFolder`/`DatasetFolder`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extensions {
    /// Lower-case extensions without the dot; `None` accepts every file.
    accepted: Option<Vec<String>>,
}

impl Extensions {
    /// jpg, jpeg, png, webp, bmp, gif, tif, tiff (any case). Also the [`Default`].
    pub fn images() -> Self {
        Self::new(IMAGE_EXTENSIONS)
    }

    /// Every file, with or without an extension.
    pub fn any() -> Self {
        Self { accepted: None }
    }

    /// The given extensions, with or without a leading dot, in any case (`".JPG"` = `"jpg"`).
    pub fn new<I, S>(extensions: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let accepted = extensions
            .into_iter()
            .map(|e| e.as_ref().trim_start_matches('.').to_ascii_lowercase())
            .collect();
        Self {
            accepted: Some(accepted),
        }
    }

    /// Whether the file name of `path` has an accepted extension.
    pub fn matches(&self, path: &Path) -> bool {
        let Some(accepted) = &self.accepted else {
            return true;
        };
        let Some(ext) = path.extension() else {
            return false;
        };
        let ext = ext.as_encoded_bytes();
        accepted
            .iter()
            .any(|a| a.as_bytes().eq_ignore_ascii_case(ext))
    }

    /// The accepted extensions (lower case, no dot); empty for [`Extensions::any`].
    pub fn names(&self) -> &[String] {
        self.accepted.as_deref().unwrap_or_default()
    }

    /// A readable list for error messages, e.g. `jpg, png`.
    pub(crate) fn describe(&self) -> String {
        match &self.accepted {
            None => "any".to_owned(),
            Some(list) => list.join(", "),
        }
    }
}

impl Default for Extensions {
    fn default() -> Self {
        Self::images()
    }
}

/// Lists every file under `root` (recursively) whose extension `extensions` accepts, sorted by
/// the raw bytes of the relative path (see *Order* below). Samples have no label; the
/// list is named after `root`.
///
/// Each sample's path is `root` joined with the relative path, byte-exact (non-UTF-8 names
/// included). Mirrors torchvision's `make_dataset` for one folder, without classes.
///
/// # Order
/// Files are sorted by the raw bytes of their path relative to the root, components joined with
/// `/` (on Unix the OS bytes themselves; on Windows the WTF-8 bytes, equal to UTF-8 for valid
/// names). No locale, no Unicode normalisation, no case folding: the same tree lists in the same
/// order on every machine, so the sampler's index `i` names the same file everywhere.
/// For valid UTF-8 names this is code point order, the order of Python's `sorted()`.
///
/// # Symbolic links
/// Links are followed, to files and to folders, as torchvision's `make_dataset` does
/// (`os.walk(followlinks=True)`): a dataset assembled from links lists like the real one. A link
/// that leads back to one of its ancestors is an [`ErrorKind::SymlinkLoop`] error, and a broken
/// link is an [`ErrorKind::NotFound`] error naming it, rather than a sample that fails later.
/// Sockets, FIFOs and device files are skipped.
///
/// # Errors
/// [`ErrorKind::NotFound`] when `root` does not exist, [`ErrorKind::NotADirectory`] when it is
/// not a folder, [`ErrorKind::PermissionDenied`] when a folder below cannot be listed,
/// [`ErrorKind::SymlinkLoop`] and [`ErrorKind::NotFound`] for links as described in the module
/// docs, [`ErrorKind::Io`] otherwise. Each names the path concerned; the first error stops the
/// listing, so a dataset is never silently partial.
pub fn walk_dir(root: impl AsRef<Path>, extensions: &Extensions) -> Result<SampleList> {
    let root = root.as_ref();
    let files = sorted_files(root, extensions)?;
    let samples = files.into_iter().map(|p| Sample::new(p, None)).collect();
    Ok(SampleList::named_after(root, samples))
}

/// The accepted files under `root`, sorted by relative-path bytes.
pub(crate) fn sorted_files(
    root: &Path,
    extensions: &Extensions,
) -> Result<Vec<std::path::PathBuf>> {
    let meta = std::fs::metadata(root).map_err(|e| Error::io(e, root))?;
    if !meta.is_dir() {
        return Err(
            Error::new(ErrorKind::NotADirectory, "expected a folder to list").with_path(root),
        );
    }
    let mut keyed = Vec::new();
    for entry in walkdir::WalkDir::new(root).follow_links(true).min_depth(1) {
        let entry = entry.map_err(|e| walk_error(e, root))?;
        if !entry.file_type().is_file() || !extensions.matches(entry.path()) {
            continue;
        }
        let key = sort_key(entry.path().strip_prefix(root).unwrap_or(entry.path()));
        keyed.push((key, entry.into_path()));
    }
    keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(keyed.into_iter().map(|(_, path)| path).collect())
}

/// The relative path's component bytes joined with `/`: the same key on every platform.
fn sort_key(relative: &Path) -> Vec<u8> {
    let mut key = Vec::new();
    for component in relative.components() {
        if let Component::Normal(name) = component {
            if !key.is_empty() {
                key.push(b'/');
            }
            key.extend_from_slice(name.as_encoded_bytes());
        }
    }
    key
}

fn walk_error(err: walkdir::Error, root: &Path) -> Error {
    let path = err.path().unwrap_or(root).to_path_buf();
    if let Some(ancestor) = err.loop_ancestor() {
        return Error::new(
            ErrorKind::SymlinkLoop,
            format!(
                "symbolic link leads back to its ancestor {}",
                crate::error::escape_path(ancestor)
            ),
        )
        .with_path(path);
    }
    match err.into_io_error() {
        Some(io) => {
            let mut e = Error::io(io, &path);
            if e.kind() == ErrorKind::NotFound {
                e = e.with_reason("no such file (a broken symbolic link?)");
            }
            e
        }
        None => Error::new(ErrorKind::Io, "directory walk failed").with_path(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_match_is_case_insensitive_and_dot_tolerant() {
        let ext = Extensions::images();
        assert!(ext.matches(Path::new("a/UPPER.PNG")));
        assert!(ext.matches(Path::new("dots.in.name..png")));
        assert!(ext.matches(Path::new("x.JpEg")));
        assert!(!ext.matches(Path::new("no_extension")));
        assert!(!ext.matches(Path::new(".png")));
        assert!(!ext.matches(Path::new("a.png.txt")));
        let custom = Extensions::new([".NPY"]);
        assert!(custom.matches(Path::new("ref/all.npy")));
        assert!(Extensions::any().matches(Path::new("no_extension")));
    }

    #[test]
    fn sort_key_joins_components_with_slash() {
        assert_eq!(sort_key(Path::new("a/b/c.png")), b"a/b/c.png");
        // '-' (0x2d) sorts before '/' (0x2f): raw path bytes, not per-component order.
        assert!(sort_key(Path::new("a-b/x.png")) < sort_key(Path::new("a/b.png")));
    }
}
