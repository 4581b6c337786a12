//! The optional features that the test gate builds on top of the defaults.
//!
//! They are discovered from `cargo metadata`: every feature of a workspace package whose name
//! starts with one of [`OPTIONAL_PREFIXES`] and that the package does not turn on by default
//! (`decode-ffmpeg`, `source-http`, `source-s3`, `cuda`, ...). A new backend feature is picked
//! up without touching xtask; one that cannot build here goes in [`EXCLUDED`].

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::cmd::{cargo, repo_root};

/// Feature names that mark an opt-in backend (one feature per backend, see STYLE.md).
const OPTIONAL_PREFIXES: &[&str] = &["decode-", "source-", "cuda"];

/// `package/feature` pairs never turned on by the gate (none today).
const EXCLUDED: &[&str] = &[];

/// The optional features as `package/feature`, ready for `cargo --features`.
pub(crate) fn optional() -> Result<Vec<String>> {
    let mut found = Vec::new();
    for package in packages()? {
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

/// Crates whose every feature the gate builds alone. spdl-py is left out: its builds are the
/// wheels' feature sets (built by the wheel steps), and each other set would rebuild PyO3 and
/// the whole extension (minutes each on 2 cores); spdl-core has no features.
const ALONE_CRATES: &[&str] = &["spdl-io", "spdl-sources", "spdl-cuda", "spdl-cli"];

/// Features that exist only to be implied by public ones, never to be asked for alone:
/// spdl-sources' shared plumbing of its remote backends, spdl-io's image-rs core (a format
/// feature picks what it decodes) and its fuzzing doors.
const INTERNAL: &[&str] = &[
    "spdl-sources/fetch",
    "spdl-sources/remote",
    "spdl-io/image-rs",
    "spdl-io/fuzzing",
];

/// Every `(package, feature)` the gate builds alone with no default features (`None`: no
/// feature at all), for [`ALONE_CRATES`], less [`INTERNAL`].
pub(crate) fn each_alone() -> Result<Vec<(String, Option<String>)>> {
    let mut found = Vec::new();
    for package in packages()? {
        let name = package["name"].as_str().unwrap_or_default();
        if !ALONE_CRATES.contains(&name) {
            continue;
        }
        found.push((name.to_string(), None));
        for feature in package["features"]
            .as_object()
            .into_iter()
            .flat_map(|f| f.keys())
        {
            if feature != "default" && !INTERNAL.contains(&format!("{name}/{feature}").as_str()) {
                found.push((name.to_string(), Some(feature.clone())));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The workspace's packages, as `cargo metadata` describes them.
fn packages() -> Result<Vec<Value>> {
    workspace_packages(&repo_root())
}

/// The packages of the workspace at `root`, as `cargo metadata` describes them (`--no-deps`:
/// nothing is resolved or fetched).
pub(crate) fn workspace_packages(root: &Path) -> Result<Vec<Value>> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .stdout()
        .context("cannot run `cargo metadata`")?;
    let mut meta: Value = serde_json::from_str(&out).context("cannot parse `cargo metadata`")?;
    Ok(match meta["packages"].take() {
        Value::Array(packages) => packages,
        _ => Vec::new(),
    })
}
