//! Recursive directory listing with an extension filter and a machine-independent order.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use crate::error::{escape_path, Error, ErrorKind, Result};
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

    /// [`Extensions::images`] and `more`: e.g. `spdl_io::Registry::with_defaults().extensions()`,
    /// the extensions of the loaded decoder plugins, so a listing finds their files too.
    pub fn images_and<I, S>(more: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut all: Vec<String> = IMAGE_EXTENSIONS.iter().map(|e| e.to_string()).collect();
        all.extend(more.into_iter().map(|e| e.as_ref().to_string()));
        Self::new(all)
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

/// How a directory listing ([`walk_dir_with`], [`ImageFolder::open_with`](super::ImageFolder::open_with))
/// treats hidden entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkOptions {
    /// List hidden entries too. By default (`false`) every file or folder below the root whose
    /// name starts with `.` (`.DS_Store`, AppleDouble `._img.jpg` companions,
    /// `.ipynb_checkpoints/`, `.git/`) or is `__MACOSX` (macOS zip side folder) is skipped,
    /// with everything under it: these are tool side files, never training samples. The root
    /// itself is listed whatever its name.
    pub include_hidden: bool,
}

impl WalkOptions {
    /// Whether an entry called `name` below the root is skipped.
    pub(crate) fn skips(&self, name: &OsStr) -> bool {
        !self.include_hidden && is_hidden(name)
    }
}

/// A name starting with `.`, or the `__MACOSX` folder that macOS zip archives add.
fn is_hidden(name: &OsStr) -> bool {
    let bytes = name.as_encoded_bytes();
    bytes.first() == Some(&b'.') || bytes == b"__MACOSX"
}

/// [`walk_dir_with`] with the default [`WalkOptions`] (hidden entries skipped).
///
/// # Errors
/// As [`walk_dir_with`].
pub fn walk_dir(root: impl AsRef<Path>, extensions: &Extensions) -> Result<SampleList> {
    walk_dir_with(root, extensions, &WalkOptions::default())
}

/// Lists every file under `root` (recursively) whose extension `extensions` accepts, sorted by
/// the raw bytes of the relative path (see *Order* below). Samples have no label; the
/// list is named after `root`. Hidden entries are skipped unless `options` includes them (see
/// [`WalkOptions`]).
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
/// (`os.walk(followlinks=True)`): a dataset assembled from links lists like the real one, and a
/// folder reached through two paths lists under both. One bad entry never stops the listing:
/// - a link that leads back to one of its ancestors or to a folder holding the root (a
///   directory loop) is not followed, so the walk ends and lists each file once per loop-free
///   path; the list carries one warning per such link ([`SampleList::warnings`]) naming it;
/// - a broken link (its target is missing, or it is a loop of links) whose name has an accepted
///   extension is listed as a sample: reading it fails with [`ErrorKind::NotFound`] naming the
///   link and saying it is broken (see [`read_file`](super::read_file)), so a run counts it as
///   one failed sample.
///
/// Sockets, FIFOs and device files are skipped; a folder (even one named `x.jpg`) is walked,
/// never listed.
///
/// # Errors
/// [`ErrorKind::NotFound`] when `root` does not exist, [`ErrorKind::NotADirectory`] when it is
/// not a folder, [`ErrorKind::PermissionDenied`] when a folder below cannot be listed,
/// [`ErrorKind::Io`] otherwise. Each names the path concerned; such an error stops the listing,
/// so a dataset is never silently partial.
pub fn walk_dir_with(
    root: impl AsRef<Path>,
    extensions: &Extensions,
    options: &WalkOptions,
) -> Result<SampleList> {
    let root = root.as_ref();
    let (files, warnings) = sorted_files(root, root, extensions, options)?;
    let samples = files.into_iter().map(|p| Sample::new(p, None)).collect();
    Ok(SampleList::named_after(root, samples).with_warnings(warnings))
}

/// The accepted files under `root`, sorted by relative-path bytes, and the listing's warnings.
///
/// `dataset` is the folder the user gave (`root` itself, or the ImageFolder root above a class
/// folder): a link to it or to one of its ancestors is a loop too, though the walk from `root`
/// would not see it as one.
pub(crate) fn sorted_files(
    root: &Path,
    dataset: &Path,
    extensions: &Extensions,
    options: &WalkOptions,
) -> Result<(Vec<PathBuf>, Vec<String>)> {
    let meta = std::fs::metadata(root).map_err(|e| Error::io(e, root))?;
    if !meta.is_dir() {
        return Err(
            Error::new(ErrorKind::NotADirectory, "expected a folder to list").with_path(root),
        );
    }
    let mut keyed = Vec::new();
    let mut warnings = Vec::new();
    let dataset = std::fs::canonicalize(dataset).map_err(|e| Error::io(e, dataset))?;
    let mut cut = Vec::new();
    let walk = walkdir::WalkDir::new(root)
        .follow_links(true)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| {
            if options.skips(e.file_name()) {
                return false;
            }
            if let Some(warning) = link_above(e, &dataset) {
                cut.push(warning);
                return false;
            }
            true
        });
    for entry in walk {
        let path = match entry {
            Ok(entry) if entry.file_type().is_file() => entry.into_path(),
            Ok(_) => continue,
            Err(err) => match bad_link(err, root, options)? {
                BadLink::Loop(warning) => {
                    warnings.push(warning);
                    continue;
                }
                BadLink::Broken(path) => path,
                BadLink::Skipped => continue,
            },
        };
        if extensions.matches(&path) {
            let key = sort_key(path.strip_prefix(root).unwrap_or(&path));
            keyed.push((key, path));
        }
    }
    warnings.append(&mut cut);
    keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok((keyed.into_iter().map(|(_, path)| path).collect(), warnings))
}

/// The loop warning for a link to a folder that holds the whole `dataset` (canonical), if
/// `entry` is one.
fn link_above(entry: &walkdir::DirEntry, dataset: &Path) -> Option<String> {
    if !entry.path_is_symlink() || !entry.file_type().is_dir() {
        return None;
    }
    let target = std::fs::canonicalize(entry.path()).ok()?;
    dataset
        .starts_with(&target)
        .then(|| loop_warning(entry.path(), &target))
}

fn loop_warning(link: &Path, ancestor: &Path) -> String {
    format!(
        "cut a directory loop: the symbolic link {} leads back to its ancestor {} and was not \
         followed",
        escape_path(link),
        escape_path(ancestor)
    )
}

/// A walk error that does not stop the listing.
enum BadLink {
    /// A link back to an ancestor: cut, with this warning.
    Loop(String),
    /// A link whose target cannot be reached: listed, so reading it fails as one sample.
    Broken(PathBuf),
    /// A hidden broken link: skipped as any hidden entry.
    Skipped,
}

/// Sorts a walk error into a [`BadLink`], or the [`Error`] that stops the listing.
fn bad_link(err: walkdir::Error, root: &Path, options: &WalkOptions) -> Result<BadLink> {
    let path = err.path().unwrap_or(root).to_path_buf();
    if let Some(ancestor) = err.loop_ancestor() {
        return Ok(BadLink::Loop(loop_warning(&path, ancestor)));
    }
    let is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
    if is_link && err.depth() > 0 {
        // The walk saw the link in its folder but could not follow it.
        return Ok(match path.file_name() {
            Some(name) if options.skips(name) => BadLink::Skipped,
            _ => BadLink::Broken(path),
        });
    }
    Err(match err.into_io_error() {
        Some(io) => Error::io(io, &path),
        None => Error::new(ErrorKind::Io, "directory walk failed").with_path(path),
    })
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
    fn hidden_names() {
        for name in [
            ".DS_Store",
            "._img.jpg",
            ".ipynb_checkpoints",
            "__MACOSX",
            ".",
        ] {
            assert!(is_hidden(OsStr::new(name)), "{name}");
        }
        for name in ["img.jpg", "Thumbs.db", "__MACOSX2", "a.hidden", "_MACOSX"] {
            assert!(!is_hidden(OsStr::new(name)), "{name}");
        }
        assert!(!WalkOptions {
            include_hidden: true
        }
        .skips(OsStr::new(".x")));
    }

    #[test]
    fn sort_key_joins_components_with_slash() {
        assert_eq!(sort_key(Path::new("a/b/c.png")), b"a/b/c.png");
        // '-' (0x2d) sorts before '/' (0x2f): raw path bytes, not per-component order.
        assert!(sort_key(Path::new("a-b/x.png")) < sort_key(Path::new("a/b.png")));
    }
}
