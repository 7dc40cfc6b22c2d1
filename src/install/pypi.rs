//! PyPI recipes: a private virtualenv in the staging directory. `pip
//! download` resolves the package and its dependencies to wheels only (no
//! source build runs code) and checks each against the index's sha256; the
//! pinned digests of the recipe's own files are compared; then `pip install
//! --require-hashes --no-index` installs exactly those files, each with its
//! hash. The virtualenv's scripts name their interpreter by absolute path,
//! so they are pointed at the final directory before the rename.

use super::error::InstallError;
use super::marker::InstalledPackage;
use super::recipe::Recipe;
use super::run::{last_lines, on_path, run, telling_lines, Step};
use super::Report;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Retries pip makes per download (a registry that is down is said within
/// seconds).
const PIP_RETRIES: &str = "1";
/// pip's socket timeout, seconds.
const PIP_TIMEOUT: &str = "30";

pub(super) async fn install(
    recipe: &Recipe,
    stage: &Path,
    final_dir: &Path,
    report: &Report<'_>,
) -> Result<(PathBuf, Vec<InstalledPackage>), InstallError> {
    let server = recipe.server.as_str();
    let python = on_path("python3")
        .or_else(|| on_path("python"))
        .ok_or_else(|| InstallError::MissingTool {
            server: server.to_string(),
            tool: "python3",
            fix: "install Python 3.8 or later with its venv module (`apt-get install python3 python3-venv`, or https://www.python.org)",
        })?;
    let venv = stage.join("venv");
    report.step("creating a private virtualenv");
    let make = Step::new(&python, "python3 -m venv", stage)
        .args(["-m", "venv"])
        .arg(&venv);
    let out = run(&make, server).await?;
    if !out.success {
        return Err(InstallError::StepFailed {
            server: server.to_string(),
            step: make.label,
            detail: format!(
                "{} (on Debian and Ubuntu: `apt-get install python3-venv`)",
                last_lines(&out.text, 3)
            ),
        });
    }
    let venv_python = venv.join("bin").join("python");
    let wheels = stage.join("wheels");
    report.step("downloading from PyPI");
    let specs: Vec<String> = recipe
        .packages
        .iter()
        .map(|p| p.spec(recipe.source))
        .collect();
    let download = Step::new(&venv_python, "pip download", stage)
        .args([
            "-m",
            "pip",
            "download",
            "--only-binary=:all:",
            "--disable-pip-version-check",
        ])
        .args(["--retries", PIP_RETRIES, "--timeout", PIP_TIMEOUT, "--dest"])
        .arg(&wheels)
        .args(specs.iter().cloned());
    let out = run(&download, server).await?;
    if !out.success {
        return Err(classify(recipe, &download.label, &out.text));
    }

    report.step("checking sha256 digests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&wheels)
        .map_err(InstallError::io(&wheels))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    files.sort();
    let main_name = normalize(&recipe.package().name);
    let mut requirements = String::new();
    let mut main_checksums = Vec::new();
    let mut main_version = String::new();
    for file in &files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let digest = sha256_file(file).map_err(InstallError::io(file))?;
        let (dist, version) = wheel_name_version(&name);
        if normalize(dist) == main_name {
            main_version = version.to_string();
            if let Some(expected) = recipe.package().sha256.get(&name) {
                if *expected != digest {
                    return Err(InstallError::ChecksumMismatch {
                        server: server.to_string(),
                        file: name,
                        expected: format!("sha256:{expected}"),
                        actual: format!("sha256:{digest}"),
                    });
                }
            }
            main_checksums.push(format!("sha256:{digest}"));
        }
        requirements.push_str(&format!("{} --hash=sha256:{digest}\n", file.display()));
    }
    if main_version.is_empty() {
        return Err(InstallError::StepFailed {
            server: server.to_string(),
            step: download.label,
            detail: format!("no wheel of {} was downloaded", recipe.package().name),
        });
    }
    let requirements_path = stage.join("requirements.txt");
    std::fs::write(&requirements_path, &requirements)
        .map_err(InstallError::io(&requirements_path))?;

    report.step("installing into the virtualenv");
    let install = Step::new(&venv_python, "pip install --require-hashes", stage)
        .args([
            "-m",
            "pip",
            "install",
            "--no-index",
            "--require-hashes",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            "-r",
        ])
        .arg(&requirements_path);
    let out = run(&install, server).await?;
    if !out.success {
        return Err(classify(recipe, &install.label, &out.text));
    }
    // The wheels are in the venv now; the requirements (with hashes) stay
    // as the record of what was installed.
    let _ = std::fs::remove_dir_all(&wheels);
    let kept: String = requirements
        .lines()
        .map(|l| match l.split_once(' ') {
            Some((path, hash)) => format!(
                "{} {hash}\n",
                Path::new(path)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
            None => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&requirements_path, kept).map_err(InstallError::io(&requirements_path))?;
    relocate_scripts(&venv.join("bin"), stage, final_dir)?;
    Ok((
        PathBuf::from("venv").join("bin"),
        vec![InstalledPackage {
            name: recipe.package().name.clone(),
            version: main_version,
            checksums: main_checksums,
        }],
    ))
}

/// PEP 503 normalization: lower case, runs of `-_.` as one `-`.
fn normalize(name: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in name.chars() {
        if "-_.".contains(c) {
            dash = true;
        } else {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// A wheel file name's distribution and version.
fn wheel_name_version(file: &str) -> (&str, &str) {
    let mut parts = file.splitn(3, '-');
    (parts.next().unwrap_or(""), parts.next().unwrap_or(""))
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// Points the virtualenv's scripts (their `#!` line, or pip's `exec` line
/// for long paths) at `final_dir` instead of `stage`.
fn relocate_scripts(bin: &Path, stage: &Path, final_dir: &Path) -> Result<(), InstallError> {
    let from = stage.to_string_lossy().into_owned();
    let to = final_dir.to_string_lossy().into_owned();
    for entry in std::fs::read_dir(bin).map_err(InstallError::io(bin))? {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        let meta = match path.symlink_metadata() {
            Ok(m) if m.is_file() && m.len() < 1024 * 1024 => m,
            _ => continue,
        };
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        if !bytes.starts_with(b"#!") {
            continue;
        }
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        if !text.contains(&from) {
            continue;
        }
        let fixed = text.replace(&from, &to);
        std::fs::write(&path, fixed).map_err(InstallError::io(&path))?;
        std::fs::set_permissions(&path, meta.permissions()).map_err(InstallError::io(&path))?;
    }
    Ok(())
}

fn classify(recipe: &Recipe, step: &str, output: &str) -> InstallError {
    let server = recipe.server.clone();
    let detail = telling_lines(output, 2, &["ERROR:", "Connection refused", "Errno"]);
    let unreachable = [
        "Connection refused",
        "Failed to establish a new connection",
        "Name or service not known",
        "Temporary failure in name resolution",
        "Network is unreachable",
        "Read timed out",
        "ConnectTimeoutError",
    ];
    if unreachable.iter().any(|m| output.contains(m)) {
        return InstallError::RegistryUnreachable {
            server,
            source_name: "PyPI",
            setting: "pip config list; PIP_INDEX_URL",
            detail,
        };
    }
    if output.contains("No matching distribution found")
        || output.contains("Could not find a version that satisfies")
    {
        return InstallError::NoSuchVersion {
            server,
            package: recipe
                .packages
                .iter()
                .map(|p| p.spec(recipe.source))
                .collect::<Vec<_>>()
                .join(", "),
            source_name: "PyPI",
            detail,
        };
    }
    if output.contains("THESE PACKAGES DO NOT MATCH THE HASHES") || output.contains("HashMismatch")
    {
        return InstallError::ChecksumMismatch {
            server,
            file: recipe.package().spec(recipe.source),
            expected: "the index's sha256".into(),
            actual: detail,
        };
    }
    InstallError::StepFailed {
        server,
        step: step.to_string(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_versions_of_wheels() {
        assert_eq!(normalize("python_lsp_server"), "python-lsp-server");
        assert_eq!(normalize("Python.LSP--Server"), "python-lsp-server");
        assert_eq!(
            wheel_name_version("ruff-0.17.6-py3-none-manylinux_2_17_x86_64.whl"),
            ("ruff", "0.17.6")
        );
    }

    #[test]
    fn scripts_point_at_the_final_directory() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let stage = dir.path().join(".stage-x");
        let bin = stage.join("venv/bin");
        std::fs::create_dir_all(&bin).unwrap_or_else(|e| panic!("{e}"));
        let script = bin.join("ruff-wrapper");
        std::fs::write(
            &script,
            format!("#!{}/venv/bin/python\nprint(1)\n", stage.display()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(bin.join("native"), b"\x7fELF....").unwrap_or_else(|e| panic!("{e}"));
        let final_dir = dir.path().join("1.0-abc");
        relocate_scripts(&bin, &stage, &final_dir).unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(&script).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            text,
            format!("#!{}/venv/bin/python\nprint(1)\n", final_dir.display())
        );
        assert_eq!(
            std::fs::read(bin.join("native")).unwrap_or_default(),
            b"\x7fELF...."
        );
    }
}
