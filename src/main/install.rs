//! `acp-lsp install` and `acp-lsp uninstall` (`acp_lsp::install`,
//! `acp_lsp::cli::install`).

use std::path::PathBuf;
use std::process::ExitCode;

use acp_lsp::cli::install::{
    describe_done, folder_label, install_all, plan_for, plan_named, StepLine,
};
use acp_lsp::cli::UsageError;
use acp_lsp::install::{InstallError, Store};

use super::args::LogArgs;
use super::{existing_dir, init_logging, load_config_file};

/// Some servers could not be installed (exit 1; each error was shown).
#[derive(Debug, thiserror::Error)]
#[error("{failed} of {total} servers could not be installed")]
struct SomeFailed {
    failed: usize,
    total: usize,
}

fn store() -> anyhow::Result<Store> {
    Ok(Store::user().ok_or(InstallError::NoDataDir)?)
}

/// `acp-lsp install [SERVER…] [--for PATH]`.
pub(crate) fn run_install(
    servers: Vec<String>,
    for_path: Option<PathBuf>,
    config: Option<PathBuf>,
    log: &LogArgs,
) -> anyhow::Result<ExitCode> {
    init_logging(log)?;
    let config = load_config_file(config.as_deref())?;
    let plan = if servers.is_empty() {
        let dir = existing_dir(for_path, "--for")?;
        let dir = folder_label(&dir);
        let plan = plan_for(&dir, config)?;
        for note in &plan.notes {
            eprintln!("acp-lsp: note: {note}");
        }
        for (name, at) in &plan.present {
            println!("{name} is there already: {at}");
        }
        if plan.wanted.is_empty() {
            println!("nothing to install for {}", dir.display());
            return Ok(ExitCode::SUCCESS);
        }
        plan
    } else {
        plan_named(&servers, &config)?
    };
    let store = store()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let done = runtime.block_on(install_all(&store, &plan));
    let mut failed = 0;
    for d in &done {
        match (&d.outcome, describe_done(d)) {
            (Ok(_), Some(line)) => println!("{line}"),
            (Err(e), _) => {
                failed += 1;
                eprint!("{}", acp_lsp::cli::render(e));
            }
            _ => {}
        }
    }
    if failed > 0 {
        return Err(SomeFailed {
            failed,
            total: done.len(),
        }
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

/// `acp-lsp uninstall SERVER… | --all`.
pub(crate) fn run_uninstall(
    servers: Vec<String>,
    all: bool,
    config: Option<PathBuf>,
    log: &LogArgs,
) -> anyhow::Result<ExitCode> {
    init_logging(log)?;
    let config = load_config_file(config.as_deref())?;
    if servers.is_empty() && !all {
        return Err(UsageError::new("name the servers to remove, or give --all").into());
    }
    let store = store()?;
    // (package directory, the name progress and errors use).
    let mut packages: Vec<(String, String)> = Vec::new();
    if all {
        for installed in store.all() {
            if let Some(package) = installed
                .dir
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
            {
                if !packages.iter().any(|(p, _)| *p == package) {
                    packages.push((package, installed.marker.server.clone()));
                }
            }
        }
    }
    for name in &servers {
        let recipe = config.recipe(name).ok_or_else(|| {
            UsageError::new(format!(
                "{name:?} has no install recipe, so acp-lsp never installs it"
            ))
        })?;
        packages.push((recipe.store_name(), name.clone()));
    }
    let runtime = tokio::runtime::Runtime::new()?;
    let mut removed_any = false;
    runtime.block_on(async {
        for (package, server) in &packages {
            let line = StepLine::start("removing", server, package);
            let sink = {
                let line = line.clone();
                move |_: &str, step: &str| line.step(step)
            };
            let removed = acp_lsp::install::uninstall_package(&store, package, server, &sink).await;
            line.finish();
            for r in removed? {
                removed_any = true;
                println!(
                    "removed {} ({}){}",
                    r.installed.describe(),
                    r.installed.dir.display(),
                    if r.component_removed {
                        " and its rustup component"
                    } else {
                        ""
                    }
                );
            }
        }
        anyhow::Ok(())
    })?;
    if !removed_any {
        println!("nothing to remove: none of them was installed by acp-lsp");
    }
    Ok(ExitCode::SUCCESS)
}
