//! torchvision's `ImageFolder` layout: `root/<class>/**/<file>`, one label per class folder.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::walk::{sorted_files, Extensions, WalkOptions};
use crate::error::{escape_path, Error, ErrorKind, Result};
use crate::list::{Sample, SampleList};

/// A dataset in the ImageFolder layout, as torchvision's `datasets.ImageFolder` builds it.
///
/// - The classes are the sub-folders of `root` (links to folders count), sorted by the raw bytes
///   of their names (for UTF-8 names: Python's `sorted()` order); class `i` gets label `i`.
///   Files directly in `root` are ignored.
/// - The samples are, class by class, the accepted files under that class folder (recursively),
///   sorted by relative-path bytes as in [`walk_dir`](super::walk_dir).
///
/// One difference with torchvision: inside a class, files of nested sub-folders are ordered by
/// their full relative path, while torchvision orders by `(folder, file name)`. The two agree for
/// the usual flat class folders.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<OsString>,
    samples: SampleList,
}

impl ImageFolder {
    /// [`Self::open_with`] with the default [`WalkOptions`] (hidden entries skipped).
    ///
    /// # Errors
    /// As [`Self::open_with`].
    pub fn open(
        root: impl AsRef<Path>,
        extensions: &Extensions,
        allow_empty: bool,
    ) -> Result<Self> {
        Self::open_with(root, extensions, allow_empty, &WalkOptions::default())
    }

    /// Lists `root` in the ImageFolder layout, accepting files by `extensions`.
    ///
    /// Hidden folders (`.ipynb_checkpoints`, `__MACOSX`, see [`WalkOptions`]) are no class
    /// unless `options` includes them, and hidden entries inside classes are skipped the same
    /// way; links inside class folders are treated as by [`walk_dir_with`](super::walk_dir_with)
    /// (loops cut with a warning in the samples' [`SampleList::warnings`], broken links listed).
    ///
    /// `allow_empty` is torchvision's argument of the same name: when false, a class folder
    /// without any accepted file is an error; when true, the class keeps its label and has no
    /// sample.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] / [`ErrorKind::NotADirectory`] for a bad `root`,
    /// [`ErrorKind::NoClasses`] when `root` holds no sub-folder, [`ErrorKind::EmptyClass`] (naming
    /// the classes and the accepted extensions) as above, and the errors of
    /// [`walk_dir`](super::walk_dir) for the class folders.
    pub fn open_with(
        root: impl AsRef<Path>,
        extensions: &Extensions,
        allow_empty: bool,
        options: &WalkOptions,
    ) -> Result<Self> {
        let root = root.as_ref();
        let classes = find_classes(root, options)?;
        let mut samples = Vec::new();
        let mut empty = Vec::new();
        let mut warnings = Vec::new();
        for (label, class) in classes.iter().enumerate() {
            let (files, cut) = sorted_files(&root.join(class), root, extensions, options)?;
            warnings.extend(cut);
            if files.is_empty() {
                empty.push(escape_path(Path::new(class)));
            }
            let label = Some(label as i64);
            samples.extend(files.into_iter().map(|p| Sample::new(p, label)));
        }
        if !empty.is_empty() && !allow_empty {
            return Err(Error::new(
                ErrorKind::EmptyClass,
                format!(
                    "found no valid file for the classes {}; supported extensions are: {}",
                    empty.join(", "),
                    extensions.describe()
                ),
            )
            .with_path(root));
        }
        Ok(Self {
            root: root.to_path_buf(),
            classes,
            samples: SampleList::named_after(root, samples).with_warnings(warnings),
        })
    }

    /// The folder the dataset was listed from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The class folder names, sorted; the label of `classes()[i]` is `i` (torchvision `classes`).
    pub fn classes(&self) -> &[OsString] {
        &self.classes
    }

    /// The label of the class folder `name`, if it is one (a lookup in torchvision's
    /// `class_to_idx`).
    pub fn class_index(&self, name: &OsStr) -> Option<i64> {
        self.classes
            .binary_search_by(|c| c.as_encoded_bytes().cmp(name.as_encoded_bytes()))
            .ok()
            .map(|i| i as i64)
    }

    /// Class name to label, as torchvision's `class_to_idx` dict.
    pub fn class_to_idx(&self) -> BTreeMap<OsString, i64> {
        self.classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), i as i64))
            .collect()
    }

    /// The labelled samples, class by class.
    pub fn samples(&self) -> &SampleList {
        &self.samples
    }

    /// Takes the labelled samples out.
    pub fn into_samples(self) -> SampleList {
        self.samples
    }
}

/// The sub-folders of `root`, sorted by name bytes (torchvision `find_classes`), without the
/// hidden ones unless `options` includes them.
fn find_classes(root: &Path, options: &WalkOptions) -> Result<Vec<OsString>> {
    let meta = std::fs::metadata(root).map_err(|e| Error::io(e, root))?;
    if !meta.is_dir() {
        return Err(Error::new(
            ErrorKind::NotADirectory,
            "expected an ImageFolder root folder",
        )
        .with_path(root));
    }
    let mut classes = Vec::new();
    for entry in std::fs::read_dir(root).map_err(|e| Error::io(e, root))? {
        let entry = entry.map_err(|e| Error::io(e, root))?;
        if options.skips(&entry.file_name()) {
            continue;
        }
        // `metadata` follows links, as Python's `DirEntry.is_dir()` does; a broken link is no
        // class folder.
        if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()) {
            classes.push(entry.file_name());
        }
    }
    if classes.is_empty() {
        return Err(Error::new(
            ErrorKind::NoClasses,
            "couldn't find any class folder (expected root/<class>/<file>)",
        )
        .with_path(root));
    }
    classes.sort_unstable_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
    Ok(classes)
}
