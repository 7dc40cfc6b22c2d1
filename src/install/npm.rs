//! npm recipes: the packages into a private `node_modules` in the staging
//! directory. `npm install --package-lock-only` resolves the tree and writes
//! every tarball's `integrity` from the registry's metadata into the lock;
//! the pinned integrities are compared with the lock's before anything is
//! downloaded; `npm ci` then installs exactly the lock, checking each
//! tarball against it. Install scripts never run (`--ignore-scripts`).

use super::error::InstallError;
use super::marker::InstalledPackage;
use super::recipe::Recipe;
use super::run::{on_path, run, telling_lines, Step};
use super::Report;
use std::path::{Path, PathBuf};

/// The flags every npm call gets: no audit, no funding notes, no scripts,
/// no update check, and bounded retries (a registry that is down is said
/// within seconds, not minutes).
const NPM_FLAGS: &[&str] = &[
    "--no-audit",
    "--no-fund",
    "--ignore-scripts",
    "--no-update-notifier",
    "--fetch-retries=1",
    "--fetch-retry-mintimeout=1000",
    "--fetch-retry-maxtimeout=5000",
];

pub(super) async fn install(
    recipe: &Recipe,
    stage: &Path,
    report: &Report<'_>,
) -> Result<(PathBuf, Vec<InstalledPackage>), InstallError> {
    let server = recipe.server.as_str();
    let npm = on_path("npm").ok_or_else(|| InstallError::MissingTool {
        server: server.to_string(),
        tool: "npm",
        fix: "install Node.js 18 or later with npm (https://nodejs.org, or `apt-get install nodejs npm`)",
    })?;
    let mut dependencies = serde_json::Map::new();
    for p in &recipe.packages {
        let version = p.version.clone().unwrap_or_else(|| "latest".into());
        dependencies.insert(p.name.clone(), serde_json::Value::String(version));
    }
    let manifest = serde_json::json!({
        "name": "acp-lsp-installed-server",
        "private": true,
        "description": format!("{} for acp-lsp", recipe.server),
        "dependencies": dependencies,
    });
    let manifest_path = stage.join("package.json");
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).unwrap_or_default(),
    )
    .map_err(InstallError::io(&manifest_path))?;

    report.step("resolving with the npm registry");
    let resolve = Step::new(&npm, "npm install --package-lock-only", stage)
        .args(["install", "--package-lock-only"])
        .args(NPM_FLAGS.iter().copied());
    let out = run(&resolve, server).await?;
    if !out.success {
        return Err(classify(recipe, &resolve.label, &out.text));
    }
    let lock_path = stage.join("package-lock.json");
    let lock: serde_json::Value = std::fs::read(&lock_path)
        .map_err(InstallError::io(&lock_path))
        .and_then(|bytes| {
            serde_json::from_slice(&bytes).map_err(|e| InstallError::StepFailed {
                server: server.to_string(),
                step: resolve.label.clone(),
                detail: format!("package-lock.json does not parse: {e}"),
            })
        })?;
    let mut installed = Vec::new();
    for p in &recipe.packages {
        let entry = lock
            .pointer(&format!(
                "/packages/node_modules~1{}",
                p.name.replace('~', "~0").replace('/', "~1")
            ))
            .cloned()
            .unwrap_or_default();
        let integrity = entry
            .get("integrity")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        let version = entry
            .get("version")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        if let Some(expected) = &p.integrity {
            if *expected != integrity {
                return Err(InstallError::ChecksumMismatch {
                    server: server.to_string(),
                    file: p.spec(recipe.source),
                    expected: expected.clone(),
                    actual: if integrity.is_empty() {
                        "no integrity".into()
                    } else {
                        integrity
                    },
                });
            }
        }
        installed.push(InstalledPackage {
            name: p.name.clone(),
            version,
            checksums: (!integrity.is_empty())
                .then_some(integrity)
                .into_iter()
                .collect(),
        });
    }

    report.step("downloading and checking (npm ci)");
    let ci = Step::new(&npm, "npm ci", stage)
        .arg("ci")
        .args(NPM_FLAGS.iter().copied());
    let out = run(&ci, server).await?;
    if !out.success {
        return Err(classify(recipe, &ci.label, &out.text));
    }
    Ok((PathBuf::from("node_modules").join(".bin"), installed))
}

/// An npm failure in the user's terms.
fn classify(recipe: &Recipe, step: &str, output: &str) -> InstallError {
    let server = recipe.server.clone();
    let detail = telling_lines(
        output,
        2,
        &[
            "npm error code",
            "npm error errno",
            "npm error notarget No",
            "npm error request to",
            "npm error 404",
            "npm error sha",
        ],
    );
    let unreachable = [
        "ECONNREFUSED",
        "ENOTFOUND",
        "ETIMEDOUT",
        "EAI_AGAIN",
        "ECONNRESET",
        "ENETUNREACH",
        "EHOSTUNREACH",
    ];
    if unreachable.iter().any(|code| output.contains(code)) {
        return InstallError::RegistryUnreachable {
            server,
            source_name: "npm",
            setting: "npm config get registry",
            detail,
        };
    }
    if output.contains("ETARGET")
        || output.contains("E404")
        || output.contains("No matching version")
    {
        return InstallError::NoSuchVersion {
            server,
            package: recipe
                .packages
                .iter()
                .map(|p| p.spec(recipe.source))
                .collect::<Vec<_>>()
                .join(", "),
            source_name: "npm",
            detail,
        };
    }
    if output.contains("EINTEGRITY") {
        return InstallError::ChecksumMismatch {
            server,
            file: recipe.package().spec(recipe.source),
            expected: "the lock's integrity".into(),
            actual: detail,
        };
    }
    InstallError::StepFailed {
        server,
        step: step.to_string(),
        detail,
    }
}
