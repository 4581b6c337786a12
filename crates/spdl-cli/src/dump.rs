//! `spdl load --dump FILE.npy`: the first batch as a NumPy array, so the pixels of the main job
//! can be compared with other loaders (the `bench images` pixel check) or inspected by hand.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use npyz::WriterBuilder;
use spdl_io::{DType, HostBatch};

use crate::report::Failure;

/// Takes the first batch of `pipeline`, writes it to `path` as `.npy` (NumPy format 1.0,
/// C order: `[N, H, W, C]` u8 / u16 or `[N, C, H, W]` f32, as collated) and stops the pipeline.
/// Samples that failed before the batch was complete are named after the line that says what
/// was written (the batch then holds fewer than `--batch-size` images).
pub(crate) fn first_batch(
    mut pipeline: spdl_core::Pipeline<HostBatch>,
    path: &Path,
    failures: &Mutex<Vec<Failure>>,
) -> Result<ExitCode> {
    let batch = match pipeline.iter().next() {
        Some(batch) => batch.context("the pipeline failed before its first batch")?,
        None => bail!("no batch: every sample failed or the listing is empty"),
    };
    pipeline.stop();
    write_npy(&batch, path).with_context(|| format!("cannot write {}", path.display()))?;
    crate::emit(&format!(
        "wrote {} images {:?} ({}) to {}",
        batch.len(),
        batch.shape,
        batch.dtype.name(),
        path.display()
    ));
    for f in failures.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        crate::emit(&format!("  failed: {}: {}", f.path, f.reason));
    }
    Ok(ExitCode::SUCCESS)
}

fn write_npy(batch: &HostBatch, path: &Path) -> Result<()> {
    let mut file = BufWriter::new(File::create(path)?);
    let bytes = &batch.buffer[..];
    match batch.dtype {
        DType::U8 => write_values(&mut file, &batch.shape, bytes.iter().copied()),
        DType::U16 => write_values(
            &mut file,
            &batch.shape,
            bytes
                .chunks_exact(2)
                .map(|b| u16::from_ne_bytes([b[0], b[1]])),
        ),
        DType::F32 => write_values(
            &mut file,
            &batch.shape,
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        ),
        other => bail!("a batch of {} cannot be dumped", other.name()),
    }
}

fn write_values<T: npyz::AutoSerialize>(
    file: &mut BufWriter<File>,
    shape: &[usize; 4],
    values: impl Iterator<Item = T>,
) -> Result<()> {
    let shape = shape.map(|d| d as u64);
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&shape)
        .writer(file)
        .begin_nd()?;
    w.extend(values)?;
    w.finish()?;
    Ok(())
}
