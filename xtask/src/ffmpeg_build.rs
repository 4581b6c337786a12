//! FFmpeg's shared libraries built from source for the video wheel (`cargo xtask wheel
//! --release`): an LGPL build (no `--enable-gpl`, no nonfree) with `--disable-everything` and
//! then only the decoders, demuxers, parsers, bitstream filters, encoders and muxers the media
//! API and its tests (ours and SPDL's) use, and every filter FFmpeg has without an external
//! library, so that `auditwheel repair` bundles about 12 MB of FFmpeg and two codec libraries
//! (libdav1d for AV1, LAME for MP3 encoding) instead of every library Debian's FFmpeg links.
//!
//! The source is Debian's: the machine's own `deb` entries, turned into `deb-src` in a private
//! apt folder (`target/ffmpeg-src/apt`, nothing written to /etc or /var), give
//! `apt-get source --download-only ffmpeg` the upstream tarball of the suite's FFmpeg
//! (`ffmpeg_5.1.9.orig.tar.xz` on Debian 12; apt checks it against the signed index). The
//! tarball is built as released (Debian's patches are not applied). Everything is cached under
//! `target/`: `target/ffmpeg-<version>/{src,build,prefix}`; a later run with the same
//! configure line returns at once (the first build: about 2 minutes on 2 idle cores).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::cmd::{have_program, repo_root, Cmd};
use crate::setup;

/// Decoders: video (H.264, HEVC, VP8/9, AV1 through libdav1d, MPEG-4 part 2 and the MS
/// variants AVI files carry, MPEG-1/2, Theora, FFV1, raw), images (the formats `load_image`
/// and the image tests open through FFmpeg) and audio (AAC, MP3, Opus, Vorbis, FLAC, PCM).
const DECODERS: &[&str] = &[
    "h264",
    "hevc",
    "vp8",
    "vp9",
    "libdav1d",
    "mpeg4",
    "msmpeg4v1",
    "msmpeg4v2",
    "msmpeg4v3",
    "mpeg1video",
    "mpeg2video",
    "theora",
    "ffv1",
    "rawvideo",
    "mjpeg",
    "png",
    "apng",
    "bmp",
    "tiff",
    "gif",
    "webp",
    "aac",
    "aac_latm",
    "mp3",
    "mp3float",
    "mp2",
    "mp2float",
    "opus",
    "vorbis",
    "flac",
    "pcm_*",
];

/// Encoders of the encode/mux API and its tests: images (`save_image`), lossless video (FFV1),
/// MPEG-4 part 2 (the LGPL video encoder for MP4/AVI; H.264 encoding is x264, GPL, left out),
/// AAC, MP3 (LAME, LGPL), FLAC, PCM.
const ENCODERS: &[&str] = &[
    "png",
    "mjpeg",
    "bmp",
    "tiff",
    "gif",
    "ffv1",
    "rawvideo",
    "mpeg4",
    "aac",
    "libmp3lame",
    "flac",
    "pcm_*",
];

/// Demuxers: MP4/MOV, Matroska/WebM, MPEG-TS/PS, AVI, OGG, elementary streams, audio files,
/// images (one file or piped bytes) and raw video/PCM.
const DEMUXERS: &[&str] = &[
    "mov",
    "matroska",
    "mpegts",
    "mpegps",
    "avi",
    "ogg",
    "h264",
    "hevc",
    "m4v",
    "ivf",
    "wav",
    "mp3",
    "flac",
    "aac",
    "gif",
    "image2",
    "image2pipe",
    "image_*_pipe",
    "rawvideo",
    "yuv4mpegpipe",
    "nut",
    "pcm_*",
];

/// Muxers of the mux API and its tests.
const MUXERS: &[&str] = &[
    "mp4",
    "mov",
    "matroska",
    "webm",
    "avi",
    "mpegts",
    "ogg",
    "wav",
    "flac",
    "mp3",
    "adts",
    "image2",
    "image2pipe",
    "rawvideo",
    "nut",
    "null",
    "pcm_*",
];

/// Parsers of the decoders above (demuxers need them to split elementary streams).
const PARSERS: &[&str] = &[
    "h264",
    "hevc",
    "vp8",
    "vp9",
    "av1",
    "mpeg4video",
    "mpegvideo",
    "mjpeg",
    "png",
    "bmp",
    "gif",
    "webp",
    "aac",
    "aac_latm",
    "mpegaudio",
    "opus",
    "vorbis",
    "flac",
];

/// Bitstream filters: SPDL's `BSF`/`apply_bsf` (Annex B for NVDEC and raw streams) and those
/// the muxers and demuxers above insert themselves.
const BSFS: &[&str] = &[
    "h264_mp4toannexb",
    "hevc_mp4toannexb",
    "extract_extradata",
    "dump_extra",
    "remove_extra",
    "filter_units",
    "null",
    "aac_adtstoasc",
    "vp9_superframe",
    "vp9_superframe_split",
    "av1_frame_split",
    "mpeg4_unpack_bframes",
    "h264_metadata",
    "hevc_metadata",
];

/// Protocols: files by path, and pipes.
const PROTOCOLS: &[&str] = &["file", "pipe"];

/// FFmpeg's install prefix (`lib/`, `include/`), built first if needed; prints the configure
/// line, the version and how long the build took.
pub(crate) fn ensure() -> Result<PathBuf> {
    system_packages()?;
    let tarball = fetch_source()?;
    let version = version_of(&tarball)?;
    let top = repo_root().join("target").join(format!("ffmpeg-{version}"));
    let prefix = top.join("prefix");
    let args = configure_args(&prefix);
    let stamp = prefix.join(".spdl-configure");
    let line = args.join(" ");
    if prefix.join("lib/libavcodec.so").exists()
        && std::fs::read_to_string(&stamp).ok().as_deref() == Some(line.as_str())
    {
        eprintln!(
            "ffmpeg: FFmpeg {version} already built in {}",
            prefix.display()
        );
        return Ok(prefix);
    }
    if !have_program("nasm") {
        // Without nasm FFmpeg's decoders lose their x86 assembly (several times slower).
        bail!("FFmpeg needs nasm to build its assembly: run `cargo xtask setup`");
    }
    let src = top.join("src");
    if !src.join("configure").exists() {
        std::fs::create_dir_all(&src)
            .with_context(|| format!("cannot create {}", src.display()))?;
        Cmd::new("tar")
            .arg("-xf")
            .arg(&tarball)
            .arg("-C")
            .arg(&src)
            .arg("--strip-components=1")
            .run()?;
    }
    let build = top.join("build");
    if build.exists() {
        std::fs::remove_dir_all(&build)
            .with_context(|| format!("cannot remove {}", build.display()))?;
    }
    std::fs::create_dir_all(&build)
        .with_context(|| format!("cannot create {}", build.display()))?;
    let start = Instant::now();
    // Out of tree, so a changed configure line starts from a clean folder.
    let in_build = |program: &Path| Cmd::new(program).current_dir(&build);
    in_build(&src.join("configure")).args(&args).run()?;
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get().min(2));
    in_build(Path::new("make")).arg(format!("-j{jobs}")).run()?;
    in_build(Path::new("make")).arg("install").run()?;
    std::fs::write(&stamp, &line).with_context(|| format!("cannot write {}", stamp.display()))?;
    eprintln!(
        "ffmpeg: FFmpeg {version} built in {:.1} min into {}\nffmpeg: configure {line}",
        start.elapsed().as_secs_f64() / 60.0,
        prefix.display()
    );
    Ok(prefix)
}

/// The licence texts the FFmpeg wheel carries, as `(name in .dist-info/licenses, file)`:
/// FFmpeg's LGPL-2.1 and its LICENSE.md from the source tree next to `prefix`, and the Debian
/// copyright files of the two libraries `auditwheel repair` bundles with it (libdav1d,
/// BSD-2-Clause; LAME, LGPL-2.0+). Fails naming the file that is missing.
pub(crate) fn licenses(prefix: &Path) -> Result<Vec<(String, PathBuf)>> {
    let src = prefix.parent().unwrap_or(prefix).join("src");
    let mut files = vec![
        (
            "FFmpeg-COPYING.LGPLv2.1".to_owned(),
            src.join("COPYING.LGPLv2.1"),
        ),
        ("FFmpeg-LICENSE.md".to_owned(), src.join("LICENSE.md")),
    ];
    for (name, package) in [
        ("dav1d-copyright", "libdav1d"),
        ("lame-copyright", "libmp3lame"),
    ] {
        // The runtime package's doc folder carries its so-version (libdav1d6, libmp3lame0).
        let doc = std::fs::read_dir("/usr/share/doc")
            .context("cannot read /usr/share/doc")?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| {
                let n = p.file_name().unwrap_or_default().to_string_lossy();
                n.starts_with(package)
                    && n[package.len()..].chars().all(|c| c.is_ascii_digit())
                    && n.len() > package.len()
            });
        let Some(doc) = doc else {
            bail!("no /usr/share/doc/{package}N folder: the {package} runtime package is missing");
        };
        files.push((name.to_owned(), doc.join("copyright")));
    }
    if let Some((_, missing)) = files.iter().find(|(_, f)| !f.is_file()) {
        bail!("licence file {} is missing", missing.display());
    }
    Ok(files)
}

/// The configure line: LGPL, shared, `--disable-everything`, the lists above and every filter
/// without an external library; nothing detected from the system (`--disable-autodetect`)
/// but zlib (PNG, TIFF, Matroska's compressed tracks; libz.so.1 is one of the libraries
/// manylinux lets a wheel take from the system), libdav1d (AV1 decoding, BSD-2-Clause) and
/// LAME (MP3 encoding, LGPL-2.0+), both bundled by `auditwheel repair`.
pub(crate) fn configure_args(prefix: &Path) -> Vec<String> {
    let mut args = vec![
        format!("--prefix={}", prefix.display()),
        "--enable-shared".into(),
        "--disable-static".into(),
        "--disable-programs".into(),
        "--disable-doc".into(),
        "--disable-debug".into(),
        "--disable-avdevice".into(),
        "--disable-postproc".into(),
        "--disable-network".into(),
        "--disable-autodetect".into(),
        "--disable-everything".into(),
        "--enable-zlib".into(),
        "--enable-libdav1d".into(),
        "--enable-libmp3lame".into(),
        // Every filter FFmpeg has without an external library (those needing one, or the
        // GPL, stay out): a filter description is the user's free text, as in SPDL, whose
        // `get_ffmpeg_filters` lists well over 100; the filters cost about 1 MB of the wheel.
        "--enable-filters".into(),
    ];
    for (kind, list) in [
        ("decoder", DECODERS),
        ("encoder", ENCODERS),
        ("demuxer", DEMUXERS),
        ("muxer", MUXERS),
        ("parser", PARSERS),
        ("bsf", BSFS),
        ("protocol", PROTOCOLS),
    ] {
        args.push(format!("--enable-{kind}={}", list.join(",")));
    }
    args
}

/// `target/ffmpeg-src`: the private apt folder and the downloaded source.
fn source_dir() -> PathBuf {
    repo_root().join("target").join("ffmpeg-src")
}

/// Downloads FFmpeg's source package of this machine's suite once (the upstream tarball is
/// kept); returns the path of `ffmpeg_<version>.orig.tar.xz`.
fn fetch_source() -> Result<PathBuf> {
    let dir = source_dir();
    let dl = dir.join("dl");
    if let Some(t) = find_tarball(&dl)? {
        return Ok(t);
    }
    if !have_program("apt-get") {
        bail!(
            "no apt-get here to fetch FFmpeg's source: put an FFmpeg release tarball \
             (ffmpeg_<version>.orig.tar.xz, e.g. 5.1.x from ffmpeg.org renamed) into {}",
            dl.display()
        );
    }
    let apt = dir.join("apt");
    for sub in ["lists/partial", "cache/archives/partial", "sources.list.d"] {
        let d = apt.join(sub);
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    std::fs::create_dir_all(&dl).with_context(|| format!("cannot create {}", dl.display()))?;
    let sources = source_entries()?;
    let list = apt.join("sources.list.d").join("deb-src.sources");
    std::fs::write(&list, sources).with_context(|| format!("cannot write {}", list.display()))?;
    // apt with every path of its own state in our folder: no lock, list or cache of the
    // system's is read or written.
    let opts = |c: Cmd| {
        c.arg("-o")
            .arg("Dir::Etc::SourceList=/dev/null")
            .arg("-o")
            .arg(format!(
                "Dir::Etc::SourceParts={}",
                apt.join("sources.list.d").display()
            ))
            .arg("-o")
            .arg(format!("Dir::State::Lists={}", apt.join("lists").display()))
            .arg("-o")
            .arg(format!("Dir::Cache={}", apt.join("cache").display()))
            .args(["-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root"])
            .args(["-q"])
    };
    opts(Cmd::new("apt-get")).arg("update").run()?;
    opts(Cmd::new("apt-get"))
        .args(["source", "--download-only", "ffmpeg"])
        .current_dir(&dl)
        .run()?;
    find_tarball(&dl)?.with_context(|| {
        format!(
            "apt-get source ffmpeg wrote no ffmpeg_*.orig.tar.xz into {}",
            dl.display()
        )
    })
}

/// The machine's `deb` entries (deb822 `.sources` files and one-line `.list` files) as
/// `deb-src` entries: the same mirrors, suites and keys.
fn source_entries() -> Result<String> {
    let mut out = String::new();
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
        more.sort();
        files.extend(more);
    }
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let name = file.to_string_lossy();
        if name.ends_with(".sources") {
            for stanza in text.split("\n\n") {
                let is_deb = stanza.lines().any(|l| {
                    l.strip_prefix("Types:")
                        .is_some_and(|t| t.split_whitespace().any(|t| t == "deb"))
                });
                if !is_deb {
                    continue;
                }
                for l in stanza.lines() {
                    if l.starts_with("Types:") {
                        out.push_str("Types: deb-src\n");
                    } else {
                        out.push_str(l);
                        out.push('\n');
                    }
                }
                out.push('\n');
            }
        } else if name.ends_with(".list") {
            let lines: Vec<String> = text
                .lines()
                .filter_map(|l| l.trim().strip_prefix("deb "))
                .map(|rest| format!("Types: deb-src\n{}\n", one_line_to_deb822(rest)))
                .collect();
            for l in lines {
                out.push_str(&l);
                out.push('\n');
            }
        }
    }
    if out.is_empty() {
        bail!("no deb entries in /etc/apt to derive deb-src entries from");
    }
    Ok(out)
}

/// `[options] URI SUITE COMPONENT...` of a one-line entry as deb822 fields.
fn one_line_to_deb822(rest: &str) -> String {
    let mut rest = rest.trim();
    let mut fields = String::new();
    if let Some(opts) = rest.strip_prefix('[') {
        if let Some(end) = opts.find(']') {
            for opt in opts[..end].split_whitespace() {
                if let Some(key) = opt.strip_prefix("signed-by=") {
                    fields.push_str(&format!("Signed-By: {key}\n"));
                }
            }
            rest = opts[end + 1..].trim();
        }
    }
    let mut words = rest.split_whitespace();
    let uri = words.next().unwrap_or_default();
    let suite = words.next().unwrap_or_default();
    let components: Vec<&str> = words.collect();
    format!(
        "{fields}URIs: {uri}\nSuites: {suite}\nComponents: {}",
        components.join(" ")
    )
}

/// The newest `ffmpeg_*.orig.tar.*` in `dir`, if any.
fn find_tarball(dir: &Path) -> Result<Option<PathBuf>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.starts_with("ffmpeg_") && n.contains(".orig.tar.") && !n.ends_with(".asc")
        })
        .collect();
    found.sort();
    Ok(found.pop())
}

/// `5.1.9` from `ffmpeg_5.1.9.orig.tar.xz`.
fn version_of(tarball: &Path) -> Result<String> {
    let name = tarball.file_name().unwrap_or_default().to_string_lossy();
    name.strip_prefix("ffmpeg_")
        .and_then(|r| r.split(".orig.tar.").next())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .with_context(|| format!("no version in {name}"))
}

/// Installs the headers of the AV1 decoder and MP3 encoder libraries when missing.
fn system_packages() -> Result<()> {
    setup::apt_packages(&["libdav1d-dev", "libmp3lame-dev"])
}
