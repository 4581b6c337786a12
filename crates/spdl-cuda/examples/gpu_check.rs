//! The GPU check (`cargo xtask gpu-check` runs it): one short run on a GPU machine that
//! measures and checks what CI cannot.
//!
//! ```text
//! cargo run --release -p spdl-cuda --features cuda,decode-nvjpeg --example gpu_check -- [PHOTOS_DIR]
//! ```
//!
//! 1. driver, device, nvJPEG library;
//! 2. transfer round trip (pinned pool -> TransferStage -> device -> host, byte-exact), the
//!    double-buffered iterator, the DLPack export description;
//! 3. H2D GB/s from the pinned pool against pageable memory (and against
//!    `torch.Tensor.pin_memory().cuda(non_blocking=True)` if `torch` imports);
//! 4. nvJPEG against the CPU decoder on every photo (mean absolute difference), and batched
//!    nvJPEG images/s at 224x224 (against `torchvision.io.decode_jpeg(device="cuda")` if
//!    available).
//!
//! Without a driver it runs the CPU-side parts and reports "no CUDA driver" (exit 0).
//! Environment: `SPDL_PYTHON` (default `python3`) for the torch comparisons.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use spdl_core::buffer::{BufferPool, PoolConfig};
use spdl_cuda::nvjpeg::{self, NvjpegDecoder};
use spdl_cuda::{pinned_pool, ConsumerStream, CudaDevice, TransferStage};
use spdl_io::dlpack::DLDeviceType;
use spdl_io::{collate_into, BatchHeader, BatchItem, Image, ImageLoader, SampleContext, Transform};

fn photos_dir() -> Option<PathBuf> {
    if let Some(a) = std::env::args().nth(1) {
        return Some(PathBuf::from(a));
    }
    [
        "shared/data/photos",
        "../shared/data/photos",
        "../../shared/data/photos",
        "/work/shared/data/photos",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_dir())
}

fn jpegs(dir: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("jpg") || e.eq_ignore_ascii_case("jpeg"))
        })
        .collect();
    paths.sort();
    for p in paths {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        out.push((name, std::fs::read(&p)?));
    }
    Ok(out)
}

fn cpu_load(key: &str, bytes: &[u8], t: Transform) -> Result<Image> {
    let ctx = SampleContext {
        key,
        index: 0,
        epoch: 0,
    };
    let mut loader = ImageLoader::new(t);
    // nvJPEG does not apply EXIF orientation: compare like with like.
    loader.options.keep_orientation = true;
    Ok(loader.load(bytes, &ctx)?)
}

fn main() -> Result<()> {
    let t0 = Instant::now();
    println!("== spdl-cuda gpu check");
    let photos = match photos_dir() {
        Some(d) => {
            let j = jpegs(&d)?;
            println!("photos: {} JPEGs in {}", j.len(), d.display());
            j
        }
        None => {
            println!("photos: none found (pass a directory)");
            Vec::new()
        }
    };
    // CPU side: decode every photo (the reference), load libnvjpeg.
    let tc = Instant::now();
    let mut cpu_ok = 0;
    for (k, b) in &photos {
        if cpu_load(k, b, Transform::Identity).is_ok() {
            cpu_ok += 1;
        }
    }
    println!(
        "cpu decode: {cpu_ok}/{} photos in {:.2} s",
        photos.len(),
        tc.elapsed().as_secs_f64()
    );
    match nvjpeg::load_library() {
        Ok(l) => println!("nvjpeg: {} version {:?}", l.path().display(), l.version()),
        Err(e) => println!("nvjpeg: {e}"),
    }
    let dev = match CudaDevice::local() {
        Ok(d) => d,
        Err(e) if e.is_unavailable() => {
            println!("{e}");
            println!(
                "gpu check: skipped the GPU parts ({:.1} s)",
                t0.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    println!(
        "device: cuda:{} {} ({:.1} GiB), {} device(s)",
        dev.index(),
        dev.name()?,
        dev.total_memory()? as f64 / (1u64 << 30) as f64,
        spdl_cuda::device_count()?
    );

    // Transfer round trip, double buffering, DLPack description.
    let pool = pinned_pool(&dev, PoolConfig::default().max_buffers(4))?;
    let stage = TransferStage::new(&dev)?;
    let mk = |v: u8| -> Vec<BatchItem> {
        (0..8)
            .map(|i| BatchItem {
                key: format!("s{i}"),
                label: None,
                image: Image::from_u8(
                    (0..224 * 224 * 3)
                        .map(|j| (j as u8) ^ v ^ i as u8)
                        .collect(),
                    224,
                    224,
                    3,
                )
                .unwrap_or_else(|| unreachable!()),
            })
            .collect()
    };
    let host = collate_into(mk(7), &pool)?;
    assert!(host.is_pinned());
    let expect = host.buffer.to_vec();
    let d = stage.transfer(host)?;
    if d.to_host()? != expect {
        bail!("transfer round trip: bytes differ");
    }
    let batches: Vec<_> = stage
        .iter(
            (0..20u8).map(|v| collate_into(mk(v), &pool).map_err(spdl_cuda::Error::from)),
            2,
        )
        .collect::<Result<_, _>>()?;
    for (v, b) in batches.iter().enumerate().step_by(7) {
        let want = collate_into(
            mk(v as u8),
            &spdl_core::buffer::HostPool::host(PoolConfig::default()),
        )?;
        if b.to_host()? != want.buffer.to_vec() {
            bail!("double-buffered transfer {v}: bytes differ");
        }
    }
    // From pageable memory (spdl_rs.io.transfer_buffer's fallback).
    let pageable = d.to_host()?;
    let header = BatchHeader {
        labels: vec![None; 8],
        ..d.header.clone()
    };
    let p = stage.transfer_slice(&pageable, header.clone())?;
    if p.to_host()? != expect || p.shape != d.shape {
        bail!("pageable transfer_slice: bytes differ");
    }
    if stage.transfer_slice(&pageable[1..], header).is_ok() {
        bail!("transfer_slice accepted a short slice");
    }
    let s = pool.stats();
    println!(
        "transfer: round trip ok; pageable ok; 20 double-buffered batches ok; pinned pool allocations {} reuses {}",
        s.allocations, s.reuses
    );
    // SAFETY: NoSync registers no foreign stream.
    let e = unsafe { d.export(ConsumerStream::NoSync)? };
    assert_eq!(e.device.device_type, DLDeviceType::CUDA);
    let cai = e.cuda_array_interface()?;
    println!(
        "dlpack: device {:?}, shape {:?}, typestr {}, stream {:#x?}",
        e.dlpack_device(),
        cai.shape,
        cai.typestr,
        cai.stream
    );
    let m = e.into_dlpack();
    // SAFETY: fresh pointer, deleted once.
    unsafe { ((*m).deleter.context("deleter")?)(m) };
    drop(batches);

    // H2D GB/s.
    let size = 64 << 20;
    let h2d = spdl_cuda::bench::measure_h2d(&dev, size, 10)?;
    println!(
        "h2d {} MiB: pinned {:.1} GB/s, pageable {:.1} GB/s",
        size >> 20,
        h2d.pinned_gbps,
        h2d.pageable_gbps
    );

    // nvJPEG against the CPU decoder.
    match NvjpegDecoder::new(&dev) {
        Err(e) => println!("nvjpeg decoder: {e}"),
        Ok(dec) => {
            let (mut n, mut sum_mad, mut worst) = (0usize, 0.0f64, (0.0f64, String::new()));
            for (k, b) in &photos {
                let Ok(cpu) = cpu_load(k, b, Transform::Identity) else {
                    continue;
                };
                let gpu = match dec.decode_batch(&[(k.as_str(), b.as_slice())], None) {
                    Ok((batch, rep)) => {
                        if !rep.fallbacks.is_empty() {
                            println!("  {k}: fallback ({})", rep.fallbacks[0].reason);
                            continue;
                        }
                        batch.to_host()?
                    }
                    Err(e) => {
                        println!("  {k}: {e}");
                        continue;
                    }
                };
                let c = cpu.as_u8().unwrap_or_default();
                if c.len() != gpu.len() {
                    println!("  {k}: size differs ({} vs {})", c.len(), gpu.len());
                    continue;
                }
                let mad = c
                    .iter()
                    .zip(&gpu)
                    .map(|(a, b)| (i32::from(*a) - i32::from(*b)).unsigned_abs() as f64)
                    .sum::<f64>()
                    / c.len() as f64;
                sum_mad += mad;
                n += 1;
                if mad > worst.0 {
                    worst = (mad, k.clone());
                }
            }
            println!(
                "nvjpeg vs cpu: {n} photos, mean abs diff {:.3} (worst {:.3} {})",
                sum_mad / n.max(1) as f64,
                worst.0,
                worst.1
            );
            // Resized batch: GPU resize against the CPU resize, and throughput.
            let refs: Vec<(&str, &[u8])> = photos
                .iter()
                .map(|(k, b)| (k.as_str(), b.as_slice()))
                .collect();
            if !refs.is_empty() {
                let (batch, rep) = dec.decode_batch(&refs, Some((224, 224)))?;
                let gpu = batch.to_host()?;
                let mut mad = 0.0;
                for (i, (k, b)) in photos.iter().enumerate() {
                    let cpu = cpu_load(
                        k,
                        b,
                        Transform::Resize {
                            width: 224,
                            height: 224,
                            filter: Default::default(),
                        },
                    )?;
                    let c = cpu.as_u8().unwrap_or_default();
                    let g = &gpu[i * c.len()..(i + 1) * c.len()];
                    mad += c
                        .iter()
                        .zip(g)
                        .map(|(a, b)| (i32::from(*a) - i32::from(*b)).unsigned_abs() as f64)
                        .sum::<f64>()
                        / c.len() as f64;
                }
                println!(
                    "nvjpeg 224x224 batch: gpu {} fallback {} {:?}; mean abs diff vs cpu resize {:.3}",
                    rep.gpu,
                    rep.fallbacks.len(),
                    rep.fallbacks.iter().map(|f| format!("{}: {}", f.key, f.reason)).collect::<Vec<_>>(),
                    mad / photos.len() as f64
                );
                let t = Instant::now();
                let mut imgs = 0;
                while t.elapsed().as_secs_f64() < 5.0 {
                    let (_b, r) = dec.decode_batch(&refs, Some((224, 224)))?;
                    imgs += r.gpu + r.fallbacks.len();
                }
                println!(
                    "nvjpeg decode+resize: {:.0} images/s (batch {}, photos up to 5120x2880)",
                    imgs as f64 / t.elapsed().as_secs_f64(),
                    refs.len()
                );
            }
        }
    }

    // torch comparisons.
    torch_compare(photos_dir().as_deref());
    println!("gpu check: done in {:.1} s", t0.elapsed().as_secs_f64());
    Ok(())
}

const TORCH_SNIPPET: &str = r#"
import sys, time, glob, os
try:
    import torch
except Exception as e:
    print(f"torch: not importable ({e})"); sys.exit(0)
if not torch.cuda.is_available():
    print("torch: no CUDA"); sys.exit(0)
dev = int(os.environ.get("LOCAL_RANK", "0"))
x = torch.ones(64 << 20, dtype=torch.uint8)
best = 1e9
for _ in range(11):
    p = x.pin_memory()
    torch.cuda.synchronize(dev)
    t = time.perf_counter()
    y = p.cuda(dev, non_blocking=True)
    torch.cuda.synchronize(dev)
    best = min(best, time.perf_counter() - t)
print(f"torch h2d 64 MiB pin_memory().cuda(non_blocking=True): {x.numel() / best / 1e9:.1f} GB/s (wall, copy only)")
try:
    import torchvision
    from torchvision.io import decode_jpeg
    from torch.nn.functional import interpolate
except Exception as e:
    print(f"torchvision: not importable ({e})"); sys.exit(0)
files = sorted(glob.glob(os.path.join(sys.argv[1], "*.jpg")) + glob.glob(os.path.join(sys.argv[1], "*.jpeg")))
datas = [torchvision.io.read_file(f) for f in files]
ok = []
for d in datas:
    try:
        decode_jpeg(d, device=f"cuda:{dev}"); ok.append(d)
    except Exception:
        pass
t = time.perf_counter(); n = 0
while time.perf_counter() - t < 5.0:
    out = decode_jpeg(ok, device=f"cuda:{dev}")
    out = [interpolate(o[None].float(), size=(224, 224), mode="bilinear", antialias=True) for o in out]
    torch.cuda.synchronize(dev); n += len(ok)
print(f"torchvision decode_jpeg(device=cuda) + resize 224: {n / (time.perf_counter() - t):.0f} images/s ({len(ok)}/{len(datas)} photos decodable)")
"#;

fn torch_compare(photos: Option<&Path>) {
    let py = std::env::var("SPDL_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = std::env::temp_dir().join(format!("spdl_gpu_check_{}.py", std::process::id()));
    if std::fs::write(&script, TORCH_SNIPPET).is_err() {
        println!("torch: cannot write {}", script.display());
        return;
    }
    let dir = photos.map(|p| p.display().to_string()).unwrap_or_default();
    match std::process::Command::new(&py)
        .arg(&script)
        .arg(dir)
        .output()
    {
        Ok(o) => {
            print!("{}", String::from_utf8_lossy(&o.stdout));
            if !o.status.success() {
                println!(
                    "torch snippet failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
        Err(e) => println!("torch: cannot run {py}: {e}"),
    }
    std::fs::remove_file(&script).ok();
}
