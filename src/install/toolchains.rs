//! Recipes whose tool installs from its own registry with its own checks:
//! rustup components (the active toolchain's, in the user's rustup home:
//! rustup is already per-user), `go install` (the Go checksum database
//! applies) and `cargo install --locked` (the registry's checksums in the
//! package's lock file apply), both into a private `bin` in the staging
//! directory.

use super::error::InstallError;
use super::marker::InstalledPackage;
use super::recipe::Recipe;
use super::run::{last_lines, on_path, run, Step};
use super::Report;
use std::path::{Path, PathBuf};

/// What a toolchain recipe left: where the commands are, what was
/// installed, and whether a rustup component was added.
pub(super) struct Done {
    pub bin_dir: PathBuf,
    pub packages: Vec<InstalledPackage>,
    pub component_added: bool,
}

pub(super) async fn rustup(
    recipe: &Recipe,
    stage: &Path,
    command: &str,
    report: &Report<'_>,
) -> Result<Done, InstallError> {
    let server = recipe.server.as_str();
    let rustup = on_path("rustup").ok_or_else(|| InstallError::MissingTool {
        server: server.to_string(),
        tool: "rustup",
        fix: "install Rust with rustup (https://rustup.rs)",
    })?;
    let component = recipe.package().name.as_str();
    let listed = Step::new(&rustup, "rustup component list --installed", stage).args([
        "component",
        "list",
        "--installed",
    ]);
    let out = run(&listed, server).await?;
    let already = out.success
        && out
            .stdout
            .lines()
            .any(|l| l.trim() == component || l.trim().starts_with(&format!("{component}-")));
    if !already {
        report.step(&format!("rustup component add {component}"));
        let add = Step::new(&rustup, format!("rustup component add {component}"), stage).args([
            "component",
            "add",
            component,
        ]);
        let out = run(&add, server).await?;
        if !out.success {
            let detail = last_lines(&out.text, 3);
            if detail.contains("could not download") || detail.contains("error sending request") {
                return Err(InstallError::RegistryUnreachable {
                    server: server.to_string(),
                    source_name: "rustup",
                    setting: "RUSTUP_DIST_SERVER",
                    detail,
                });
            }
            return Err(InstallError::StepFailed {
                server: server.to_string(),
                step: add.label,
                detail,
            });
        }
    }
    let which =
        Step::new(&rustup, format!("rustup which {command}"), stage).args(["which", command]);
    let out = run(&which, server).await?;
    let program = PathBuf::from(out.stdout.trim());
    if !out.success || !program.is_absolute() {
        return Err(InstallError::StepFailed {
            server: server.to_string(),
            step: which.label,
            detail: last_lines(&out.text, 2),
        });
    }
    let version = Step::new(&program, format!("{command} --version"), stage).arg("--version");
    let out = run(&version, server).await?;
    let version = out
        .stdout
        .split_whitespace()
        .nth(1)
        .unwrap_or("unknown")
        .to_string();
    Ok(Done {
        bin_dir: program.parent().map(Path::to_path_buf).unwrap_or_default(),
        packages: vec![InstalledPackage {
            name: component.to_string(),
            version,
            checksums: Vec::new(),
        }],
        component_added: !already,
    })
}

pub(super) async fn go(
    recipe: &Recipe,
    stage: &Path,
    report: &Report<'_>,
) -> Result<Done, InstallError> {
    let server = recipe.server.as_str();
    let go = on_path("go").ok_or_else(|| InstallError::MissingTool {
        server: server.to_string(),
        tool: "go",
        fix: "install Go 1.21 or later (https://go.dev/dl/, or `apt-get install golang`)",
    })?;
    let spec = recipe.package().spec(recipe.source);
    let bin = stage.join("bin");
    report.step(&format!("go install {spec}"));
    let step = Step::new(&go, format!("go install {spec}"), stage)
        .args(["install", spec.as_str()])
        .env("GOBIN", &bin)
        .env("GOFLAGS", "-mod=mod")
        // The module cache stays the user's (shared, read-only files).
        .env("GOTOOLCHAIN", "local");
    let out = run(&step, server).await?;
    if !out.success {
        let detail = last_lines(&out.text, 3);
        let unreachable = [
            "dial tcp",
            "no such host",
            "connection refused",
            "i/o timeout",
            "proxyconnect",
        ];
        if unreachable.iter().any(|m| out.text.contains(m)) {
            return Err(InstallError::RegistryUnreachable {
                server: server.to_string(),
                source_name: "Go module proxy",
                setting: "go env GOPROXY",
                detail,
            });
        }
        if out.text.contains("unknown revision") || out.text.contains("invalid version") {
            return Err(InstallError::NoSuchVersion {
                server: server.to_string(),
                package: spec,
                source_name: "Go module proxy",
                detail,
            });
        }
        return Err(InstallError::StepFailed {
            server: server.to_string(),
            step: step.label,
            detail,
        });
    }
    Ok(Done {
        bin_dir: PathBuf::from("bin"),
        packages: vec![InstalledPackage {
            name: recipe.package().name.clone(),
            version: recipe.version_label().to_string(),
            checksums: Vec::new(),
        }],
        component_added: false,
    })
}

pub(super) async fn cargo(
    recipe: &Recipe,
    stage: &Path,
    report: &Report<'_>,
) -> Result<Done, InstallError> {
    let server = recipe.server.as_str();
    let cargo = on_path("cargo").ok_or_else(|| InstallError::MissingTool {
        server: server.to_string(),
        tool: "cargo",
        fix: "install Rust with rustup (https://rustup.rs)",
    })?;
    let package = recipe.package();
    let version = recipe.version_label().to_string();
    report.step(&format!(
        "cargo install {}@{version} (this compiles it)",
        package.name
    ));
    let mut step = Step::new(
        &cargo,
        format!("cargo install --locked {}", package.name),
        stage,
    )
    .args(["install", "--locked", "--quiet", "--root"])
    .arg(stage)
    .args(["--version", version.as_str(), package.name.as_str()]);
    if !recipe.features.is_empty() {
        step = step.args(["--features".to_string(), recipe.features.join(",")]);
    }
    let out = run(&step, server).await?;
    if !out.success {
        let detail = last_lines(&out.text, 3);
        if out.text.contains("could not find") && out.text.contains("in registry") {
            return Err(InstallError::NoSuchVersion {
                server: server.to_string(),
                package: format!("{}@{version}", package.name),
                source_name: "crates.io",
                detail,
            });
        }
        if out.text.contains("failed to get") || out.text.contains("Couldn't resolve host") {
            return Err(InstallError::RegistryUnreachable {
                server: server.to_string(),
                source_name: "crates.io",
                setting: "CARGO_REGISTRIES_CRATES_IO_PROTOCOL / .cargo/config.toml",
                detail,
            });
        }
        return Err(InstallError::StepFailed {
            server: server.to_string(),
            step: step.label,
            detail,
        });
    }
    Ok(Done {
        bin_dir: PathBuf::from("bin"),
        packages: vec![InstalledPackage {
            name: package.name.clone(),
            version,
            checksums: Vec::new(),
        }],
        component_added: false,
    })
}
