//! `spdl load --dump FILE.npy`: the first batch as a NumPy array, so the pixels of the main job
//! can be compared with other loaders (the `bench images` pixel check) or inspected by hand.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use npyz::WriterBuilder;
use spdl_io::{BatchData, ImageBatch};

use crate::report::Failure;

/// Takes the first batch of `pipeline`, writes it to `path` as `.npy` (NumPy format 1.0,
/// C order: `[N, H, W, C]` u8 / u16 or `[N, C, H, W]` f32, as collated) and stops the pipeline.
/// Samples that failed before the batch was complete are named after the line that says what
/// was written (the batch then holds fewer than `--batch-size` images).
pub(crate) fn first_batch(
    mut pipeline: spdl_core::Pipeline<ImageBatch>,
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
        match batch.data {
            BatchData::U8(_) => "u8",
            BatchData::U16(_) => "u16",
            BatchData::F32(_) => "f32",
        },
        path.display()
    ));
    for f in failures.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        crate::emit(&format!("  failed: {}: {}", f.path, f.reason));
    }
    Ok(ExitCode::SUCCESS)
}

fn write_npy(batch: &ImageBatch, path: &Path) -> Result<()> {
    let mut file = BufWriter::new(File::create(path)?);
    match &batch.data {
        BatchData::U8(v) => write_values(&mut file, &batch.shape, v),
        BatchData::U16(v) => write_values(&mut file, &batch.shape, v),
        BatchData::F32(v) => write_values(&mut file, &batch.shape, v),
    }
}

fn write_values<T: npyz::AutoSerialize + Copy>(
    file: &mut BufWriter<File>,
    shape: &[usize; 4],
    values: &[T],
) -> Result<()> {
    let shape = shape.map(|d| d as u64);
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&shape)
        .writer(file)
        .begin_nd()?;
    w.extend(values.iter().copied())?;
    w.finish()?;
    Ok(())
}
