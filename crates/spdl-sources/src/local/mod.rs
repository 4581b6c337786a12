//! Local file system sources (feature `source-local`, on by default).
//!
//! - [`walk_dir`] / [`walk_dir_with`]: every file under a folder with an accepted extension, in a
//!   byte order that is the same on every machine; hidden side files skipped ([`WalkOptions`]).
//! - [`read_list_file`] / [`parse_list`]: a text file with one path (and optionally a label) per
//!   line.
//! - [`ImageFolder`]: torchvision's `root/class_x/xxx.png` layout, class folders giving labels.
//! - [`read_file`] / [`read_file_async`]: a file's bytes, with errors that name the path.

mod image_folder;
mod list_file;
mod read;
mod walk;

pub use image_folder::ImageFolder;
pub use list_file::{parse_list, read_list_file};
pub use read::{read_file, read_file_async, MAX_STREAM_BYTES};
pub use walk::{walk_dir, walk_dir_with, Extensions, WalkOptions};
