//! Running processes: every command is echoed before it runs, so a log shows what to rerun.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// The repository root (the workspace holding `xtask/`).
pub(crate) fn repo_root() -> PathBuf {
    // `cargo run` sets CARGO_MANIFEST_DIR for the process too: prefer it, so a binary built in
    // another checkout that shares this target directory still works on this one.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir
        .parent()
        .expect("xtask/ lives in the repository root")
        .to_path_buf()
}

/// Every file under `dir`, in sub-folders too, sorted.
pub(crate) fn files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The `cargo` that runs us (`$CARGO`), else the one on `PATH`.
pub(crate) fn cargo() -> Cmd {
    Cmd::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// `cargo VERB --quiet --release -p PACKAGE` (`VERB`: `run`, `build`); add `--example NAME`,
/// `--bin NAME`, features, then `--` and the program's arguments.
pub(crate) fn cargo_release(verb: &str, package: &str) -> Cmd {
    cargo().args([verb, "--quiet", "--release", "-p", package])
}

/// `$HOME` (`.` when unset).
pub(crate) fn home() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// The benchmarks' corpus folder: `given`, or the default corpus (2,000 ImageNet-like JPEGs,
/// built once by `cargo xtask corpus`, `~/.cache/spdl-corpus/imagenet-like-2000`). Errors when
/// the folder does not exist.
pub(crate) fn corpus(given: Option<&PathBuf>) -> Result<PathBuf> {
    let corpus = match given {
        Some(c) => c.clone(),
        None => {
            cargo_release("run", "xtask-corpus").run()?;
            home().join(".cache/spdl-corpus/imagenet-like-2000")
        }
    };
    if !corpus.is_dir() {
        anyhow::bail!("corpus {} does not exist", corpus.display());
    }
    Ok(corpus)
}

/// Arguments that a command passes on, as given, to the program it runs (`demo`, `corpus`:
/// each command's help names them).
#[derive(clap::Args)]
pub(crate) struct PassOn {
    /// Passed on as given.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
}

/// A process to run from the repository root, echoed as `$ program args`.
pub(crate) struct Cmd {
    inner: Command,
}

impl Cmd {
    pub(crate) fn new(program: impl AsRef<OsStr>) -> Self {
        let mut inner = Command::new(program);
        inner.current_dir(repo_root());
        Cmd { inner }
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.inner.arg(arg);
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.inner.args(args);
        self
    }

    pub(crate) fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.inner.env(key, value);
        self
    }

    /// Runs the process in `dir` instead of the repository root.
    pub(crate) fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.inner.current_dir(dir);
        self
    }

    /// Starts the process without the environment variable `key`.
    pub(crate) fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.inner.env_remove(key);
        self
    }

    /// The command line, for logs and error messages.
    pub(crate) fn display(&self) -> String {
        let mut s = String::new();
        for (k, v) in self.inner.get_envs() {
            let Some(v) = v else { continue };
            let v = v.to_string_lossy();
            if k == "PATH" {
                // Only what we put in front of it: PATH=/added/dir:$PATH.
                let first = v.split(':').next().unwrap_or_default();
                let _ = write!(s, "PATH={first}:$PATH ");
            } else {
                let _ = write!(s, "{}={v} ", k.to_string_lossy());
            }
        }
        s.push_str(&self.inner.get_program().to_string_lossy());
        for a in self.inner.get_args() {
            let a = a.to_string_lossy();
            let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c);
            if a.is_empty() || !a.chars().all(plain) {
                let _ = write!(s, " '{a}'");
            } else {
                let _ = write!(s, " {a}");
            }
        }
        s
    }

    /// Runs with inherited stdio; fails if it cannot start or exits non-zero.
    pub(crate) fn run(mut self) -> Result<()> {
        let line = self.display();
        eprintln!("$ {line}");
        let status = self
            .inner
            .status()
            .with_context(|| format!("cannot start `{line}`"))?;
        if !status.success() {
            bail!("`{line}` failed ({status})");
        }
        Ok(())
    }

    /// Runs (echoed, stderr shown) and returns its stdout; fails if it cannot start or exits
    /// non-zero.
    pub(crate) fn output(mut self) -> Result<String> {
        let line = self.display();
        eprintln!("$ {line}");
        let out = self
            .inner
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("cannot start `{line}`"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            bail!("`{line}` failed ({}); its output:\n{stdout}", out.status);
        }
        Ok(stdout)
    }

    /// Runs quietly and tells whether it exited 0 (false if it cannot start).
    pub(crate) fn succeeds(mut self) -> bool {
        self.inner
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Runs quietly and returns its stdout, whatever the exit status (None if it cannot start).
    pub(crate) fn stdout(mut self) -> Option<String> {
        let out = self
            .inner
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Whether `name` is a program on `PATH`.
pub(crate) fn have_program(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let p = dir.join(name);
            p.is_file() && is_executable(&p)
        })
    })
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(_: &Path) -> bool {
    true
}

/// `PATH` with `dir` in front, for child processes.
pub(crate) fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut dirs = vec![dir.to_path_buf()];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).unwrap_or_default()
}
