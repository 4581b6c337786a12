//! The `spdl` command end to end: the bundled photos, broken inputs, flags, JSON and traces.

use std::path::{Path, PathBuf};
use std::process::Command;

fn spdl() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spdl"));
    // Run from the repository root, as a user would.
    cmd.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    cmd
}

fn hard_cases() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../spdl-io/tests/fixtures/hard")
}

/// Runs `cmd` with `--dump` into a temporary file and returns the saved u8 batch: its shape and
/// its samples.
fn dumped(cmd: &mut Command) -> (Vec<u64>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("batch.npy");
    let status = cmd.arg("--dump").arg(&out).status().expect("run spdl");
    assert!(status.success());
    let bytes = std::fs::read(&out).unwrap();
    let npy = npyz::NpyFile::new(bytes.as_slice()).unwrap();
    (npy.shape().to_vec(), npy.into_vec().unwrap())
}

fn json(cmd: &mut Command) -> serde_json::Value {
    let out = cmd.arg("--json").output().expect("run spdl");
    assert!(
        out.status.success(),
        "spdl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("--json prints JSON")
}

#[test]
fn loads_the_bundled_photos_with_zero_failures() {
    let r = json(spdl().args(["load", "--batch-size", "4", "--threads", "2"]));
    assert_eq!(r["listed"], 14);
    assert_eq!(r["images"], 14);
    assert_eq!(r["failed"], 0);
    assert_eq!(r["batches"], 4, "14 images in batches of 4: 4, 4, 4, 2");
    let names: Vec<&str> = r["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["source", "read", "aggregate_2", "decode"]);
}

#[test]
fn the_human_report_has_throughput_accounting_and_stats() {
    let out = spdl()
        .args(["load", "-q", "--epochs", "2", "--transform", "train"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("images/s") && text.contains("MB/s"), "{text}");
    assert!(
        text.contains("delivered 28 + failed 0 = 28 of 28 listed"),
        "{text}"
    );
    assert!(text.contains("p99 ms") && text.contains("decode"), "{text}");
}

#[test]
fn broken_files_are_named_counted_and_the_run_goes_on() {
    let r = json(
        spdl()
            .arg("load")
            .arg(hard_cases())
            .args(["--batch-size", "5"]),
    );
    let listed = r["listed"].as_u64().unwrap();
    let (images, failed) = (r["images"].as_u64().unwrap(), r["failed"].as_u64().unwrap());
    assert_eq!(images + failed, listed);
    assert_eq!(failed, 11, "{:#}", r["failures"]);
    let failures = r["failures"].as_array().unwrap();
    for name in [
        "truncated_60pct.jpg",
        "empty.jpg",
        "html_error_page.jpg",
        "bomb_30000x30000_1bit.png",
    ] {
        let f = failures
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(name))
            .expect(name);
        assert!(!f["reason"].as_str().unwrap().is_empty());
    }
}

#[test]
fn f32_nchw_batches() {
    let r = json(spdl().args([
        "load",
        "--dtype",
        "f32",
        "--size",
        "64",
        "--transform",
        "resize",
    ]));
    assert_eq!(r["layout"], "[N, C, H, W] f32");
    assert_eq!(r["images"], 14);
}

#[test]
fn bad_arguments_are_clear_errors() {
    let out = spdl()
        .args(["load", "--dtype", "u8", "--layout", "nchw"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--dtype u8 with --layout nchw is not supported"),
        "{err}"
    );

    // A huge output size fails each sample with a named limit error; the run goes on.
    let r = json(spdl().args(["load", "--size", "100000", "--limit", "2", "--quiet"]));
    assert_eq!(r["images"], 0);
    assert_eq!(r["failed"], 2);
    let failures = r["failures"].to_string();
    assert!(failures.contains("output of 100000x100000"), "{failures}");

    let out = spdl()
        .args(["load", "/nonexistent/folder"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/folder"));

    let out = spdl().args(["load", "--batch-size", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));

    let out = spdl().args(["load", "--limit", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--limit must be at least 1"), "{err}");

    // Ranges: 0 and values that would exhaust memory or the engine's limits.
    for (flag, value) in [
        ("--threads", "0"),
        ("--threads", "2147483648"),
        ("--read-concurrency", "9223372036854775808"),
        ("--epochs", "9223372036854775808"),
    ] {
        let out = spdl().args(["load", flag, value]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is not in 1..="), "{flag} {value}: {err}");
    }
}

#[test]
fn one_image_file_is_a_dataset_of_one() {
    let r = json(spdl().args(["load", "data/samples/opencv_fruits.jpg", "--quiet"]));
    assert_eq!(r["listed"], 1);
    assert_eq!(r["images"], 1);
    assert_eq!(r["failed"], 0);
}

#[test]
fn a_list_file_and_sharding_by_rank() {
    let dir = tempfile::tempdir().unwrap();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/samples");
    let mut names: Vec<String> = std::fs::read_dir(&samples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .map(|p| p.display().to_string())
        .collect();
    names.sort();
    let list = dir.path().join("list.txt");
    std::fs::write(&list, format!("# bundled photos\n{}\n", names.join("\n"))).unwrap();
    let mut total = 0;
    for rank in 0..3 {
        let r = json(spdl().arg("load").arg(&list).args([
            "--rank",
            &rank.to_string(),
            "--world-size",
            "3",
        ]));
        assert_eq!(r["listed"], 5, "14 over 3 ranks, padded to 15");
        total += r["images"].as_u64().unwrap();
    }
    assert_eq!(total, 15);
}

#[test]
fn writes_a_chrome_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    let out = spdl()
        .args(["load", "-q", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = std::fs::read_to_string(&trace).unwrap();
    let events: serde_json::Value = serde_json::from_str(&text).expect("a JSON trace");
    let events = events.as_array().expect("an array of trace events");
    let decode_spans = events
        .iter()
        .filter(|e| e["name"] == "op" && e["args"]["stage"] == "decode")
        .count();
    // The 14 bundled photos in batches of 32: one decode call for the batch.
    assert!(
        decode_spans >= 1,
        "one span per decoded batch, got {decode_spans}"
    );
}

#[test]
fn limit_decodes_from_memory() {
    let r = json(spdl().args(["limit", "--threads", "2"]));
    assert_eq!(r["images"], 14);
    assert_eq!(r["failed"], 0);
}

#[test]
fn limit_names_each_broken_file_once() {
    let r = json(
        spdl()
            .arg("limit")
            .arg(hard_cases())
            .args(["--epochs", "2"]),
    );
    let failures = r["failures"].as_array().unwrap();
    // Counted every epoch, named once.
    assert_eq!(r["failed"].as_u64().unwrap(), 2 * failures.len() as u64);
    for name in ["truncated_60pct.jpg", "empty.jpg", "html_error_page.jpg"] {
        let hits = failures
            .iter()
            .filter(|f| f.as_str().unwrap().contains(name))
            .count();
        assert_eq!(hits, 1, "{name}: {failures:?}");
    }
}

#[test]
fn a_gpu_without_cuda_is_a_clear_error() {
    let out = spdl()
        .args(["load", "--device", "cuda:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    // Built without the feature: says how to rebuild; built with it on a machine without a GPU:
    // says the driver is missing. Never a panic.
    assert!(
        err.contains("without CUDA support") || err.contains("no CUDA driver"),
        "{err}"
    );
    let out = spdl().args(["load", "--device", "tpu"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected `cpu`, `cuda` or `cuda:N`"));
}

#[cfg(feature = "decode-ffmpeg")]
#[test]
fn loads_video_clips() {
    let media = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spdl-io/tests/fixtures/media");
    let r = json(
        spdl()
            .arg("load")
            .arg("--video")
            .arg(&media)
            .args(["--frames", "4", "--size", "64", "-b", "2"]),
    );
    assert_eq!(r["clip_shape"], serde_json::json!([4, 64, 64, 3]));
    assert_eq!(r["clips"], r["listed"]);
    assert_eq!(r["failed"], 0);
    assert!(r["frames_per_second"].as_f64().unwrap() > 0.0);
}

#[cfg(not(feature = "decode-ffmpeg"))]
#[test]
fn video_without_ffmpeg_is_a_clear_error() {
    let out = spdl().args(["load", "--video", "."]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without FFmpeg"));
}

/// `spdl load s3://bucket/prefix` against a real S3-compatible server (s3s-fs) on loopback.
#[cfg(feature = "source-s3")]
#[test]
fn loads_from_a_local_s3_server() {
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    let bin = std::env::var_os("SPDL_S3S_FS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/spdl-tools/bin/s3s-fs")))
        .filter(|p| p.exists())
        .expect("s3s-fs: cargo install s3s-fs@0.14.1 --features binary --locked --root ~/.cache/spdl-tools");
    let data = tempfile::tempdir().unwrap();
    let prefix = data.path().join("bucket/train");
    std::fs::create_dir_all(&prefix).unwrap();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/samples");
    for entry in std::fs::read_dir(&samples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jpg") {
            std::fs::copy(&path, prefix.join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(
        prefix.join("error page.jpg"),
        b"<html><body>503</body></html>",
    )
    .unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new(bin)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", "test", "--secret-key", "test"])
        .arg(data.path())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // A concurrency the user sets is fixed; by default it adapts, starting at 64 (15 objects
    // are less than one window: it stays there).
    let run = |extra: &[&str]| {
        spdl()
            .args(["load", "s3://bucket/train/", "--json"])
            .args(extra)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
            .env("AWS_REGION", "us-east-1")
            .output()
            .unwrap()
    };
    let outs = [run(&["--fetch-concurrency", "32"]), run(&[])];
    let _ = server.kill();
    let _ = server.wait();
    for (out, fetch) in outs.iter().zip([
        serde_json::Value::Null,
        serde_json::json!({"adaptive": true, "final": 64, "peak": 64, "settled": false}),
    ]) {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["listed"], 15);
        assert_eq!(r["images"], 14);
        assert_eq!(r["failed"], 1);
        assert_eq!(r["fetch_concurrency"], fetch);
        let reason = r["failures"][0]["reason"].as_str().unwrap();
        assert!(
            reason.contains("s3://bucket/train/error page.jpg") && reason.contains("HTML"),
            "{reason}"
        );
    }
}

#[test]
fn dump_saves_the_first_batch_in_listing_order() {
    let (shape, got) = dumped(
        spdl()
            .args([
                "load",
                "--limit",
                "5",
                "--batch-size",
                "5",
                "--threads",
                "2",
            ])
            .args([
                "--size",
                "64",
                "--transform",
                "train",
                "--seed",
                "7",
                "--quiet",
            ]),
    );
    assert_eq!(shape, [5, 64, 64, 3]);

    // The same five samples (listing order, index = position), decoded directly.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/samples");
    let list = spdl_sources::walk_dir(&root, &spdl_sources::Extensions::images()).unwrap();
    let mut loader = spdl_io::ImageLoader::new(spdl_io::Transform::RandomResizedCrop(
        spdl_io::RandomResizedCrop::new(64, 7),
    ));
    // `spdl load` decodes at the finer DCT scales by default.
    loader.fine_scaled_decode = true;
    let mut want = Vec::new();
    for i in 0..5u64 {
        let path = &list.get(i).unwrap().path;
        let ctx = spdl_io::SampleContext {
            key: "",
            index: i,
            epoch: 0,
        };
        let img = loader.load(&std::fs::read(path).unwrap(), &ctx).unwrap();
        match img.data {
            spdl_io::PixelData::U8(v) => want.extend(v),
            spdl_io::PixelData::U16(_) => panic!("8-bit photos"),
        }
    }
    assert!(got == want, "the dump differs from a direct decode");
}

/// A third-party decoder loaded at run time: its files are listed by extension, decoded by
/// content, and counted like any other sample.
#[test]
fn a_decoder_plugin_from_the_command_line() {
    // The example plugin's shared library, built next to the `spdl` binary under test
    // (`cargo test` builds only its rlib).
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "spdl-decoder-pnm", "--lib"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(status.success(), "cargo build -p spdl-decoder-pnm failed");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_spdl"));
    let lib = bin.parent().unwrap().join(format!(
        "{}spdl_decoder_pnm{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let pnm =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/decoder-plugin-pnm/tests/data");
    let dir = tempfile::tempdir().unwrap();
    for f in ["orange.ppm", "deep.pgm"] {
        std::fs::copy(pnm.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::write(dir.path().join("cut.ppm"), b"P6 64 48 255\n\x00\x01").unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/samples/opencv_orange.jpg"),
        dir.path().join("orange.jpg"),
    )
    .unwrap();

    let without = json(spdl().args(["load", "-q"]).arg(dir.path()));
    assert_eq!(
        without["listed"], 1,
        "without the plugin only the JPEG is an image"
    );

    let with = json(
        spdl()
            .args(["load", "-q", "--decoder-plugin"])
            .arg(&lib)
            .arg(dir.path()),
    );
    assert_eq!(with["listed"], 4);
    assert_eq!(with["images"], 3);
    assert_eq!(with["failed"], 1, "cut.ppm is truncated");

    let out = spdl()
        .args(["load", "-q", "--decoder-plugin", "no/such/lib.so"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("decoder plugin no/such/lib.so"), "{err}");
}

#[test]
fn version_is_the_workspace_version() {
    let out = spdl().arg("--version").output().expect("run spdl");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("spdl {}", env!("CARGO_PKG_VERSION"))
    );
}

#[path = "../../spdl-sources/tests/common/listing_cases.rs"]
mod listing_cases;

/// The `[N, S, S, 3]` u8 batch `spdl load DIR --transform resize --size S --dump` saves.
fn dump_batch(dir: &Path, size: usize, batch: usize, extra: &[&str]) -> Vec<[u8; 3]> {
    let (shape, pixels) = dumped(
        spdl()
            .arg("load")
            .arg(dir)
            .args(["--transform", "resize", "--quiet"])
            .args([
                "--size",
                &size.to_string(),
                "--batch-size",
                &batch.to_string(),
            ])
            .args(extra),
    );
    assert_eq!(shape, [batch as u64, size as u64, size as u64, 3]);
    // One colour per image: every image here is a solid colour.
    pixels
        .chunks(size * size * 3)
        .map(|img| {
            assert!(img.chunks(3).all(|p| p == &img[..3]), "not one colour");
            [img[0], img[1], img[2]]
        })
        .collect()
}

#[test]
fn hidden_and_side_files_are_not_listed() {
    let dir = listing_cases::case_33();
    let r = json(
        spdl()
            .arg("load")
            .arg(dir.path())
            .args(["--batch-size", "1"]),
    );
    assert_eq!(
        (&r["listed"], &r["images"], &r["failed"]),
        (&2.into(), &2.into(), &0.into()),
        "{r:#}"
    );
    // cat/img1.jpg red (~254, 0, 0) +-3, then dog/img2.png blue, exact.
    let colours = dump_batch(dir.path(), 12, 2, &[]);
    assert!(
        colours[0][0] >= 251 && colours[0][1] <= 3 && colours[0][2] <= 3,
        "{colours:?}"
    );
    assert_eq!(colours[1], [0, 0, 255]);

    let r = json(spdl().arg("load").arg(dir.path()).arg("--image-folder"));
    assert_eq!(
        (&r["listed"], &r["failed"]),
        (&2.into(), &0.into()),
        "{r:#}"
    );

    // --include-hidden: the AppleDouble files are listed (and fail), the checkpoint decodes.
    let r =
        json(
            spdl()
                .arg("load")
                .arg(dir.path())
                .args(["--batch-size", "1", "--include-hidden"]),
        );
    assert_eq!(
        (&r["listed"], &r["images"], &r["failed"]),
        (&6.into(), &3.into(), &3.into()),
        "{r:#}"
    );
}

#[cfg(unix)]
#[test]
fn links_are_followed_a_loop_is_cut_and_a_broken_link_is_one_failure() {
    let dir = listing_cases::case_34();
    let out = spdl()
        .arg("load")
        .arg(dir.path())
        .args(["--batch-size", "1", "--json"])
        .output()
        .expect("run spdl");
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&r["listed"], &r["images"], &r["failed"]),
        (&5.into(), &4.into(), &1.into()),
        "{r:#}"
    );
    let failure = &r["failures"][0];
    assert!(
        failure["path"]
            .as_str()
            .unwrap()
            .ends_with("broken_link.png"),
        "{failure}"
    );
    let reason = failure["reason"].as_str().unwrap();
    assert!(reason.contains("broken symbolic link"), "{reason}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<_> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("nest/back_to_root"), "{stderr}");

    // Listing order: broken_link.png (fails), folder.jpg/inner.png (green), link_dir/a.png,
    // link_file.png, real/a.png (red), all exact.
    let colours = dump_batch(dir.path(), 8, 4, &[]);
    assert_eq!(
        colours,
        [[0, 255, 0], [255, 0, 0], [255, 0, 0], [255, 0, 0]]
    );
}
