//! `cargo xtask wheel`: the Python wheels of `crates/spdl-py` (module `spdl_rs`), built with
//! maturin from the test venv. `cargo xtask test` reuses [`build`], [`install`] and
//! [`check_fresh_venv`].
//!
//! Two distributions, one Python package (install one of them):
//! - `spdl-rs` (`crates/spdl-py/pyproject.toml`): feature `cuda` (CUDA is loaded at run time, so
//!   it builds and installs anywhere); abi3 (one wheel for CPython 3.11 and later, see the pyo3
//!   dependency in `crates/spdl-py/Cargo.toml`); libjpeg-turbo linked statically. Installs with
//!   no Rust toolchain and no system package. `--release` links it with zig against glibc 2.28
//!   (`manylinux_2_28`); the test gate builds it natively (`manylinux_2_34` on Debian 12: the
//!   same code, without the gate paying for a second toolchain's full build) and installs that
//!   into a fresh venv.
//! - `spdl-rs-ffmpeg` (the same project built with the features `cuda`, `decode-ffmpeg`,
//!   `source-http` and `source-s3`, then renamed): video and audio, and tar shards read from
//!   HTTP(S) and S3 (`sources.TarShards`). Two builds of it:
//!   - `--release` ([`Variant::FfmpegBundled`]): against FFmpeg built from Debian's source
//!     (LGPL, only the components the media API uses; ffmpeg_build.rs), then `auditwheel
//!     repair` copies those libraries (and libdav1d) into the wheel, which gets a manylinux
//!     tag (`manylinux_2_35` when built on Debian 12: FFmpeg is compiled against this
//!     machine's glibc) and needs no FFmpeg on the system. [`check_video_wheel`] installs
//!     it into a fresh venv and checks that it decodes video and audio with FFmpeg only from
//!     the wheel, frames equal to the system build's.
//!   - for the tests ([`Variant::Ffmpeg`], into `target/wheels`): linked to the system's FFmpeg
//!     (5.1 on Debian 12: libavcodec59, ...), so it gets this machine's `linux` tag and needs
//!     those libraries where it runs. The test gate installs this one for pytest.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cmd::{repo_root, Cmd};
use crate::setup;

const MANIFEST: &str = "crates/spdl-py/Cargo.toml";

/// Arguments of `cargo xtask wheel`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Build both distributable wheels (`spdl-rs`, manylinux abi3; `spdl-rs-ffmpeg`, manylinux
    /// abi3 with FFmpeg built from source and bundled) into `target/wheels/release`, check them
    /// with `auditwheel show`, install each into a fresh venv with no Rust toolchain on PATH
    /// and run the README's example, and decode video and audio with the second. Without it:
    /// only the FFmpeg wheel the tests use (system FFmpeg), into `target/wheels`.
    #[arg(long)]
    release: bool,
    /// With `--release`: link `spdl-rs` against this machine's glibc (a newer manylinux tag)
    /// instead of glibc 2.28 through zig (`pip install ziglang`, done here when missing).
    #[arg(long, requires = "release")]
    native: bool,
    /// With `--release`: only build FFmpeg for the video wheel (`target/ffmpeg-<version>`,
    /// see ffmpeg_build.rs), no wheel.
    #[arg(long, requires = "release")]
    only_ffmpeg: bool,
}

/// Which distribution to build (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Variant {
    /// `spdl-rs`: portable, no FFmpeg, linked against this machine's glibc (a manylinux tag of
    /// its version: `manylinux_2_34` on Debian 12).
    Base,
    /// `spdl-rs` linked by zig against glibc 2.28 (`manylinux_2_28`: also RHEL 8, Ubuntu 20.04),
    /// in its own target folder (`target/zig`: other compilers, so nothing is shared with the
    /// native builds; about 12 minutes the first time on 2 cores).
    BaseZig,
    /// `spdl-rs-ffmpeg`: with video and audio (linked to the system FFmpeg) and remote tar shards.
    Ffmpeg,
    /// `spdl-rs-ffmpeg` for distribution: the same features built against FFmpeg built from
    /// source (ffmpeg_build.rs), in its own target folder (`target/ffmpeg-wheel`, so the two
    /// FFmpeg bindings do not rebuild each other; about 4 minutes cold on 2 cores), then
    /// `auditwheel repair` copies FFmpeg's libraries (and libdav1d) into the wheel: a
    /// manylinux tag.
    FfmpegBundled,
}

impl Variant {
    /// maturin's arguments beyond the pyproject's (which builds `spdl-rs`: features `cuda`,
    /// `decode-nvjpeg`, `decode-nvdec`, all loaded at run time).
    fn maturin_args(self) -> &'static [&'static str] {
        match self {
            Variant::Base => &[],
            Variant::BaseZig => &["--zig", "--compatibility", "manylinux_2_28"],
            Variant::Ffmpeg | Variant::FfmpegBundled => &[
                "--features",
                "cuda,decode-nvjpeg,decode-nvdec,decode-ffmpeg,source-http,source-s3",
                "--compatibility",
                "linux",
            ],
        }
    }
}

pub(crate) fn run(args: &Args) -> Result<()> {
    setup::system()?;
    setup::venv()?;
    if !args.release {
        let wheel = build_test()?;
        println!("{}", wheel.display());
        return Ok(());
    }
    if args.only_ffmpeg {
        let prefix = crate::ffmpeg_build::ensure()?;
        println!("{}", prefix.display());
        return Ok(());
    }
    let out = wheels_dir().join("release");
    let mut built = Vec::new();
    let base = if args.native {
        Variant::Base
    } else {
        ensure_zig()?;
        Variant::BaseZig
    };
    for variant in [base, Variant::FfmpegBundled] {
        let wheel = build(variant, &out)?;
        audit(&wheel)?;
        built.push(wheel);
    }
    check_fresh_venv(&built[0])?;
    // The reference for the video wheel's frames: the test build (system FFmpeg; cached when
    // the gate has run) in the test venv, as the gate installs it.
    let reference = build_test()?;
    install(&reference)?;
    check_video_wheel(&built[1], true)?;
    println!("\nwheels:");
    for wheel in &built {
        let size = std::fs::metadata(wheel).map(|m| m.len()).unwrap_or(0);
        println!("  {:>6.1} MB  {}", size as f64 / 1e6, wheel.display());
    }
    Ok(())
}

/// `target/wheels`.
pub(crate) fn wheels_dir() -> PathBuf {
    repo_root().join("target").join("wheels")
}

/// The wheel the tests use (`spdl-rs-ffmpeg`, into `target/wheels`); returns its path.
pub(crate) fn build_test() -> Result<PathBuf> {
    build(Variant::Ffmpeg, &wheels_dir())
}

/// The newest video wheel (`spdl_rs_ffmpeg-*-manylinux_*.whl`, FFmpeg bundled) in
/// `target/wheels/release`, if `cargo xtask wheel --release` has built one.
pub(crate) fn video_wheel() -> Option<PathBuf> {
    let dir = wheels_dir().join("release");
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("spdl_rs_ffmpeg-") && n.contains("manylinux") && n.ends_with(".whl")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
}

/// Builds the release wheel of `variant` into `out`; returns its path.
///
/// maturin builds from `crates/spdl-py/pyproject.toml` into a folder of its own (emptied first,
/// so the one wheel there is this build's); the FFmpeg wheel is then renamed `spdl-rs-ffmpeg`
/// by `xtask/py/rename_wheel.py` (maturin takes the Python package only from the folder of its
/// pyproject.toml, so a second pyproject.toml cannot share it).
pub(crate) fn build(variant: Variant, out: &Path) -> Result<PathBuf> {
    let root = repo_root();
    if !root.join("crates/spdl-py/pyproject.toml").exists() {
        bail!("crates/spdl-py/pyproject.toml does not exist yet: no wheel to build");
    }
    let staging = root.join("target").join("wheels-staging");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("cannot remove {}", staging.display()))?;
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut maturin = Cmd::new(setup::venv_bin("maturin"));
    let mut ffmpeg_prefix = None;
    if let Variant::FfmpegBundled = variant {
        let prefix = crate::ffmpeg_build::ensure()?;
        maturin = maturin
            .env("FFMPEG_DIR", &prefix)
            .env("CARGO_TARGET_DIR", root.join("target").join("ffmpeg-wheel"));
        ffmpeg_prefix = Some(prefix);
    }
    if let Variant::BaseZig = variant {
        // maturin runs `python3 -m ziglang` from PATH: the venv's.
        let bin = setup::venv_dir().join("bin");
        maturin = maturin
            .env("PATH", crate::cmd::path_with(&bin))
            .env("CARGO_TARGET_DIR", root.join("target").join("zig"));
    }
    maturin
        .args(["build", "--release", "-m", MANIFEST])
        .args(variant.maturin_args())
        .arg("-i")
        .arg(setup::venv_bin("python"))
        .arg("-o")
        .arg(&staging)
        .run()?;
    let built: Vec<PathBuf> = std::fs::read_dir(&staging)
        .with_context(|| format!("cannot read {}", staging.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    let [wheel] = built.as_slice() else {
        bail!(
            "maturin wrote {} wheels to {}, not one",
            built.len(),
            staging.display()
        );
    };
    let path = match variant {
        Variant::Base | Variant::BaseZig => {
            let dest = out.join(wheel.file_name().unwrap_or_default());
            std::fs::rename(wheel, &dest).with_context(|| {
                format!("cannot move {} to {}", wheel.display(), dest.display())
            })?;
            dest
        }
        Variant::Ffmpeg => rename(wheel, out, &[])?,
        Variant::FfmpegBundled => {
            let licenses =
                crate::ffmpeg_build::licenses(&ffmpeg_prefix.clone().unwrap_or_default())?;
            let renamed = rename(wheel, &staging, &licenses)?;
            let lib = ffmpeg_prefix.unwrap_or_default().join("lib");
            repair(&renamed, &lib, out)?
        }
    };
    std::fs::remove_dir_all(&staging).ok();
    Ok(path)
}

/// `xtask/py/rename_wheel.py`: `wheel` as `spdl-rs-ffmpeg` in `out`, with the licence texts
/// `(name, file)` of what it bundles in `.dist-info/licenses/`; returns its path.
fn rename(wheel: &Path, out: &Path, licenses: &[(String, PathBuf)]) -> Result<PathBuf> {
    let mut cmd = Cmd::new(setup::venv_bin("python"))
        .arg(repo_root().join("xtask/py/rename_wheel.py"))
        .arg(wheel)
        .arg("spdl-rs-ffmpeg")
        .arg(out);
    for (name, file) in licenses {
        let mut spec = std::ffi::OsString::from(format!("{name}="));
        spec.push(file);
        cmd = cmd.arg(spec);
    }
    let renamed = cmd.output()?;
    Ok(PathBuf::from(renamed.trim()))
}

/// `auditwheel repair` of `wheel` into `out`, finding FFmpeg's libraries in `ffmpeg_lib`:
/// they and what they need outside the manylinux set (libdav1d; zlib's libz.so.1 is in that
/// set) are copied into the wheel's `spdl_rs_ffmpeg.libs` under hashed names, the RPATHs point
/// there, and the wheel gets the most compatible manylinux tag its binaries allow
/// (`manylinux_2_35` from Debian 12: FFmpeg uses `hypot@GLIBC_2.35`). Returns its path.
fn repair(wheel: &Path, ffmpeg_lib: &Path, out: &Path) -> Result<PathBuf> {
    ensure_patchelf()?;
    let name = wheel.file_name().unwrap_or_default().to_string_lossy();
    let stem = name.split("-linux_").next().unwrap_or_default().to_owned();
    // The previous repair of this version, whatever its tag, is replaced.
    for entry in std::fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))? {
        let p = entry?.path();
        let n = p.file_name().unwrap_or_default().to_string_lossy();
        if n.starts_with(&stem) && n.contains("manylinux") && n.ends_with(".whl") {
            std::fs::remove_file(&p).with_context(|| format!("cannot remove {}", p.display()))?;
        }
    }
    let mut search = ffmpeg_lib.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        search.push(":");
        search.push(old);
    }
    // The venv's bin folder on PATH: auditwheel runs `patchelf` from there.
    Cmd::new(setup::venv_bin("python"))
        .env("LD_LIBRARY_PATH", search)
        .env(
            "PATH",
            crate::cmd::path_with(&setup::venv_dir().join("bin")),
        )
        .args(["-m", "auditwheel", "repair", "-w"])
        .arg(out)
        .arg(wheel)
        .run()?;
    let repaired: Vec<PathBuf> = std::fs::read_dir(out)
        .with_context(|| format!("cannot read {}", out.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.starts_with(&stem) && n.contains("manylinux") && n.ends_with(".whl")
        })
        .collect();
    match repaired.as_slice() {
        [one] => Ok(one.clone()),
        _ => bail!(
            "auditwheel repair wrote no one manylinux wheel {stem}-*.whl into {}",
            out.display()
        ),
    }
}

/// patchelf (PyPI's wheel, about 1 MB) in the test venv for `auditwheel repair`, unless it is
/// there.
fn ensure_patchelf() -> Result<()> {
    if setup::venv_bin("patchelf").exists() {
        return Ok(());
    }
    Cmd::new(setup::venv_bin("python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg("patchelf")
        .run()
}

/// The zig toolchain from PyPI (`ziglang`, about 45 MB) in the test venv, unless it is there.
fn ensure_zig() -> Result<()> {
    let python = setup::venv_bin("python");
    if Cmd::new(&python)
        .args(["-m", "ziglang", "version"])
        .succeeds()
    {
        return Ok(());
    }
    // 0.13: the zig release maturin 1.x is tested with.
    Cmd::new(&python)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg("ziglang>=0.13,<0.14")
        .run()
}

/// Installs `wheel` into the test venv in place of any previous build of either distribution
/// (they hold the same `spdl_rs` package); its Python dependencies are installed only if
/// missing.
pub(crate) fn install(wheel: &Path) -> Result<()> {
    let pip =
        || Cmd::new(setup::venv_bin("python")).args(["-m", "pip", "--disable-pip-version-check"]);
    pip()
        .args(["uninstall", "-y", "-q", "spdl-rs", "spdl-rs-ffmpeg"])
        .run()?;
    pip().args(["install", "-q"]).arg(wheel).run()
}

/// `auditwheel show`: which platform tag the wheel's binaries allow, and the libraries they
/// need from the system.
pub(crate) fn audit(wheel: &Path) -> Result<()> {
    Cmd::new(setup::venv_bin("python"))
        .args(["-m", "auditwheel", "show"])
        .arg(wheel)
        .run()
}

/// Installs `wheel` into a new venv (`target/wheel-check-venv`) from a process that cannot see
/// cargo or rustc (their folders left out of `PATH`, their environment variables removed, pip
/// told to take binaries only), then runs the first Python example of
/// `crates/spdl-py/README.md` there, from the repository root, as `test_readme.py` does, and
/// checks its output and that `spdl_rs.__version__` is the wheel's version.
pub(crate) fn check_fresh_venv(wheel: &Path) -> Result<()> {
    let root = repo_root();
    let python = fresh_venv(wheel, "wheel-check-venv")?;
    let clean = |program: &Path| without_rust(Cmd::new(program));
    let readme = root.join("crates/spdl-py/README.md");
    let text = std::fs::read_to_string(&readme)
        .with_context(|| format!("cannot read {}", readme.display()))?;
    let code = first_python_block(&text)
        .with_context(|| format!("no ```python block in {}", readme.display()))?;
    let out = clean(&python)
        .args(["-c", code])
        .output()
        .context("the README example")?;
    print!("{out}");
    if !out.contains("(8, 224, 224, 3) uint8") {
        bail!("the README example ran but did not print a (8, 224, 224, 3) uint8 batch");
    }

    let file = wheel.file_name().unwrap_or_default().to_string_lossy();
    let version = file.split('-').nth(1).unwrap_or_default();
    let got = clean(&python)
        .args(["-c", "import spdl_rs; print(spdl_rs.__version__)"])
        .output()?;
    if got.trim() != version {
        bail!(
            "spdl_rs.__version__ is {:?}, the wheel's version {version:?}",
            got.trim()
        );
    }
    eprintln!("wheel check: {file} installed and ran the README example without a Rust toolchain");
    Ok(())
}

/// `cmd` with `PATH` left without cargo, rustc and rustup, and without the environment
/// variables that point at a Rust toolchain, FFmpeg or other libraries.
fn without_rust(cmd: Cmd) -> Cmd {
    [
        "CARGO",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "RUSTC",
        "PYO3_PYTHON",
        "FFMPEG_DIR",
        "LD_LIBRARY_PATH",
    ]
    .iter()
    .fold(cmd, |c, k| c.env_remove(k))
    .env("PATH", path_without_rust())
}

/// A new venv `target/<name>` (removed first if there) holding `wheel` and numpy, made and
/// filled by processes that cannot see a Rust toolchain (see [`without_rust`]); returns its
/// Python. Fails if cargo is still on its `PATH`.
fn fresh_venv(wheel: &Path, name: &str) -> Result<PathBuf> {
    let venv = repo_root().join("target").join(name);
    if venv.exists() {
        std::fs::remove_dir_all(&venv)
            .with_context(|| format!("cannot remove {}", venv.display()))?;
    }
    let path = path_without_rust();
    // The echoed commands below show only PATH's first entry: this is all of it.
    eprintln!("wheel check: PATH without cargo, rustc, rustup: {path:?}");
    let clean = |program: &Path| without_rust(Cmd::new(program));
    // The test venv's interpreter makes the new venv: it exists wherever the gate runs.
    clean(&setup::venv_bin("python"))
        .args(["-m", "venv"])
        .arg(&venv)
        .run()?;
    let python = venv.join("bin").join("python");
    if clean(&python)
        .args([
            "-c",
            "import shutil, sys; sys.exit(shutil.which('cargo') is None)",
        ])
        .succeeds()
    {
        bail!("cargo is still on PATH for the fresh venv: {path:?}");
    }
    clean(&python)
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "numpy",
        ])
        .arg(wheel)
        .run()?;
    Ok(python)
}

/// The video wheel (`spdl-rs-ffmpeg`, FFmpeg bundled) in a fresh venv without a Rust
/// toolchain (`target/video-wheel-check-venv`): `load_video` and `load_audio` decode the clips
/// of [`clips`] there (H.264, HEVC, VP9, AV1, MPEG-4 video; WAV, MP3, FLAC, Vorbis, Opus, AAC
/// audio), every FFmpeg library in the process comes from the wheel (/proc/self/maps; none
/// from the system), and the frames and samples equal those of the test venv's build, linked
/// to the system's FFmpeg (`xtask/py/video_wheel_check.py`). Without that reference build
/// (no `spdl_rs` with video in the test venv) the comparison is skipped with a note, unless
/// `need_reference`.
pub(crate) fn check_video_wheel(wheel: &Path, need_reference: bool) -> Result<()> {
    let root = repo_root();
    let clips = clips()?;
    let script = root.join("xtask/py/video_wheel_check.py");
    let reference = root.join("target").join("video-wheel-reference.json");
    std::fs::remove_file(&reference).ok();
    let with_system = Cmd::new(setup::venv_bin("python"))
        .arg(&script)
        .arg(&clips)
        .arg("--out")
        .arg(&reference)
        .output();
    if let Err(e) = &with_system {
        if need_reference {
            bail!("the test venv's build (system FFmpeg) could not decode the clips: {e:#}");
        }
        eprintln!(
            "wheel check: no reference (the test venv has no spdl_rs with video;              `cargo xtask wheel` installs one): frames not compared"
        );
    }
    let python = fresh_venv(wheel, "video-wheel-check-venv")?;
    let mut check = without_rust(Cmd::new(&python))
        .arg(&script)
        .arg(&clips)
        .arg("--bundled");
    if with_system.is_ok() {
        check = check.arg("--reference").arg(&reference);
    }
    // Outside the repository, so that Python cannot import the source tree's `spdl_rs`.
    print!("{}", check.current_dir(&clips).output()?);
    let file = wheel.file_name().unwrap_or_default().to_string_lossy();
    eprintln!(
        "wheel check: {file} decoded video and audio in a fresh venv with FFmpeg from the wheel"
    );
    Ok(())
}

/// Short clips and audio files made once by the system's `ffmpeg` command into
/// `target/video-wheel-clips` (1 s each: the codecs a user's files most often hold); returns
/// the folder.
fn clips() -> Result<PathBuf> {
    let dir = repo_root().join("target").join("video-wheel-clips");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let video = "testsrc2=size=96x64:rate=10:duration=1";
    let audio = "sine=frequency=440:sample_rate=16000:duration=1";
    let made: &[(&str, &str, &[&str])] = &[
        (
            "h264_aac.mp4",
            "va",
            &["-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac"],
        ),
        (
            "hevc.mkv",
            "v",
            &[
                "-c:v",
                "libx265",
                "-pix_fmt",
                "yuv420p",
                "-x265-params",
                "log-level=error",
            ],
        ),
        (
            "vp9_opus.webm",
            "va",
            &["-c:v", "libvpx-vp9", "-c:a", "libopus"],
        ),
        ("av1.mkv", "v", &["-c:v", "libaom-av1", "-cpu-used", "8"]),
        ("mpeg4.avi", "v", &["-c:v", "mpeg4"]),
        ("pcm.wav", "a", &["-c:a", "pcm_s16le"]),
        ("mp3.mp3", "a", &["-c:a", "libmp3lame"]),
        ("flac.flac", "a", &["-c:a", "flac"]),
        ("vorbis.ogg", "a", &["-c:a", "libvorbis"]),
        ("opus.opus", "a", &["-c:a", "libopus"]),
        ("aac.m4a", "a", &["-c:a", "aac"]),
    ];
    for (name, inputs, codec) in made {
        let path = dir.join(name);
        if path.exists() {
            continue;
        }
        let mut ffmpeg = Cmd::new("ffmpeg").args(["-hide_banner", "-loglevel", "error", "-y"]);
        if inputs.contains('v') {
            ffmpeg = ffmpeg.args(["-f", "lavfi", "-i", video]);
        }
        if inputs.contains('a') {
            ffmpeg = ffmpeg.args(["-f", "lavfi", "-i", audio]);
        }
        // Written beside, then renamed: a failed run leaves no half clip behind.
        let part = dir.join(format!("part.{name}"));
        ffmpeg.args(*codec).arg(&part).run().with_context(|| {
            format!("cannot make {name} with the system's ffmpeg (cargo xtask setup installs it)")
        })?;
        std::fs::rename(&part, &path)
            .with_context(|| format!("cannot rename {}", part.display()))?;
    }
    Ok(dir)
}

/// `PATH` without the folders that hold `cargo`, `rustc` or `rustup`.
fn path_without_rust() -> std::ffi::OsString {
    let dirs = std::env::var_os("PATH").unwrap_or_default();
    let kept = std::env::split_paths(&dirs).filter(|d| {
        !["cargo", "rustc", "rustup"]
            .iter()
            .any(|p| d.join(p).exists())
    });
    std::env::join_paths(kept).unwrap_or_default()
}

/// The body of the first fenced ```python block of a Markdown text.
fn first_python_block(markdown: &str) -> Option<&str> {
    let start = markdown.find("```python\n")? + "```python\n".len();
    let len = markdown[start..].find("```")?;
    Some(&markdown[start..start + len])
}
