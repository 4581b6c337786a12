//! The optional features that the test gate builds on top of the defaults.
//!
//! They are discovered from `cargo metadata`: every feature of a workspace package whose name
//! starts with one of [`OPTIONAL_PREFIXES`] and that the package does not turn on by default
//! (`decode-ffmpeg`, `source-http`, `source-s3`, `cuda`, ...). A new backend feature is picked
//! up without touching xtask; one that cannot build here goes in [`EXCLUDED`].

use anyhow::{Context, Result};
use serde_json::Value;

use crate::cmd::cargo;

/// Feature names that mark an opt-in backend (one feature per backend, see STYLE.md).
const OPTIONAL_PREFIXES: &[&str] = &["decode-", "source-", "cuda"];

/// `package/feature` pairs never turned on by the gate (none today).
const EXCLUDED: &[&str] = &[];

/// The optional features as `package/feature`, ready for `cargo --features`.
pub(crate) fn optional() -> Result<Vec<String>> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .stdout()
        .context("cannot run `cargo metadata`")?;
    let meta: Value = serde_json::from_str(&out).context("cannot parse `cargo metadata`")?;
    let mut found = Vec::new();
    for package in meta["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        let Some(features) = package["features"].as_object() else {
            continue;
        };
        let defaults: Vec<&str> = features
            .get("default")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for feature in features.keys() {
            let qualified = format!("{name}/{feature}");
            if OPTIONAL_PREFIXES.iter().any(|p| feature.starts_with(p))
                && !defaults.contains(&feature.as_str())
                && !EXCLUDED.contains(&qualified.as_str())
            {
                found.push(qualified);
            }
        }
    }
    found.sort();
    Ok(found)
}
