//! `acp-lsp install` and `acp-lsp uninstall` for people: which servers to
//! install (by name, or what the projects under a folder need, with a
//! trusted project's `.acp-lsp.toml` read as a session would), each
//! install's progress on stderr (an indicatif spinner on a terminal, plain
//! lines otherwise), and what was done on stdout.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::UsageError;
use crate::install::{InstallError, Outcome, Recipe, Store};
use crate::lsp::config::{Config, PROJECT_FILE};
use crate::lsp::detect::{detect, DetectReason};
use crate::lsp::primary::{self, Role};
use crate::lsp::program::{find_program, Origin};

/// One server to install.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub server: String,
    /// The program the server runs (`pyright-langserver`).
    pub command: String,
    /// `None`: acp-lsp has no recipe for it.
    pub recipe: Option<Recipe>,
}

/// What `install` will do.
#[derive(Debug, Default)]
pub struct Plan {
    pub wanted: Vec<Wanted>,
    /// Servers a folder needs that are there already: (name, where).
    pub present: Vec<(String, String)>,
    /// What people should know before (an untrusted project file not read).
    pub notes: Vec<String>,
}

/// The servers named, each with its recipe; an unknown name is a usage error.
pub fn plan_named(names: &[String], config: &Config) -> Result<Plan, UsageError> {
    let mut plan = Plan::default();
    for name in names {
        let Some(server) = config.server(name) else {
            let mut known: Vec<&str> = config.install.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Err(UsageError::new(format!(
                "no server named {name:?}; servers with an install recipe: {}",
                known.join(", ")
            )));
        };
        plan.wanted.push(Wanted {
            server: name.clone(),
            command: server.command.clone(),
            recipe: config.recipe(name).cloned(),
        });
    }
    Ok(plan)
}

/// What the projects under `dir` need and do not have: for each language
/// detected, its primary (the first enabled server, when none of the
/// language is installed) and the companions enabled for it. `config` is
/// read with `dir`'s project file when `dir` is a trusted project.
pub fn plan_for(dir: &Path, mut config: Config) -> Result<Plan, UsageError> {
    let mut plan = Plan::default();
    if dir.join(PROJECT_FILE).is_file() {
        match config.load_project(dir) {
            Ok(true) => {}
            Ok(false) => plan.notes.push(format!(
                "{} was not read: {} is not under trusted_projects (a project file names \
                 programs to run; add the folder to trusted_projects in your config to use it)",
                dir.join(PROJECT_FILE).display(),
                dir.display()
            )),
            Err(e) => return Err(UsageError::new(e.to_string())),
        }
    }
    let detected = detect(dir, &config);
    let mut found = std::collections::BTreeMap::new();
    for server in config.enabled_servers() {
        if let Some(program) = find_program(&config, server) {
            found.insert(server.name.clone(), program);
        }
    }
    let roles = primary::roles(&config, |s| found.contains_key(&s.name));
    let mut names: Vec<&str> = detected.iter().map(|d| d.server.as_str()).collect();
    names.dedup();
    for name in names {
        let Some(server) = config.server(name) else {
            continue;
        };
        // A server is wanted where a marker of its is: files of its
        // extension alone (a Cargo.toml for taplo) do not make a project of it.
        let by_marker = detected
            .iter()
            .any(|d| d.server == name && matches!(d.reason, DetectReason::Marker(_)));
        match roles.get(name) {
            Some(Role::NotInstalled { .. }) if !by_marker => {
                plan.notes.push(format!(
                    "not installing {name}: only files of its extensions here, no project \
                     marker of its{}; `acp-lsp install {name}` installs it",
                    if server.root_markers.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", server.root_markers.join(", "))
                    }
                ));
            }
            Some(Role::NotInstalled { .. }) => plan.wanted.push(Wanted {
                server: name.to_string(),
                command: server.command.clone(),
                recipe: config.recipe(name).cloned(),
            }),
            Some(role) if role.runs() => {
                if let Some(program) = found.get(name) {
                    let origin = match &program.origin {
                        Origin::Installed(i) => format!("installed: {}", i.describe()),
                        other => other.to_string(),
                    };
                    plan.present.push((
                        name.to_string(),
                        format!("{} ({origin})", program.path.display()),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(plan)
}

/// What became of one wanted server.
pub struct Done {
    pub wanted: Wanted,
    pub outcome: Result<Outcome, InstallError>,
    pub took: Duration,
}

/// Installs each wanted server in turn, showing its progress.
pub async fn install_all(store: &Store, plan: &Plan) -> Vec<Done> {
    let mut done = Vec::new();
    for wanted in &plan.wanted {
        let started = Instant::now();
        let outcome = match &wanted.recipe {
            None => Err(InstallError::NoRecipe {
                server: wanted.server.clone(),
                command: wanted.command.clone(),
            }),
            Some(recipe)
                if store
                    .exact(recipe)
                    .is_some_and(|i| i.command(&wanted.command).is_some()) =>
            {
                crate::install::install(store, recipe, &wanted.command, &|_: &str, _: &str| {})
                    .await
            }
            Some(recipe) => {
                let line = StepLine::start("installing", &wanted.server, &recipe.describe());
                let sink = {
                    let line = line.clone();
                    move |_: &str, step: &str| line.step(step)
                };
                let outcome = crate::install::install(store, recipe, &wanted.command, &sink).await;
                line.finish();
                outcome
            }
        };
        done.push(Done {
            wanted: wanted.clone(),
            outcome,
            took: started.elapsed(),
        });
    }
    done
}

/// One line of progress on stderr for one install.
#[derive(Clone)]
pub struct StepLine {
    /// The server, before each plain line.
    what: String,
    /// The whole first line, before each step on the spinner.
    full: String,
    bar: Option<ProgressBar>,
}

impl StepLine {
    /// "installing pyright (npm pyright@1.1.414)".
    pub fn start(action: &str, server: &str, detail: &str) -> StepLine {
        let what = format!("{action} {server} ({detail})");
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{spinner} {elapsed:>3} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar.set_message(what.clone());
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        if bar.is_none() {
            eprintln!("acp-lsp: {what}");
        }
        StepLine {
            what: server.to_string(),
            bar,
            full: what,
        }
    }

    pub fn step(&self, step: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(format!("{}: {step}", self.full)),
            None => eprintln!("acp-lsp: {}: {step}", self.what),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The line stdout gets for a finished install.
pub fn describe_done(done: &Done) -> Option<String> {
    let outcome = done.outcome.as_ref().ok()?;
    Some(if outcome.fresh {
        format!(
            "installed {} ({}) in {:.1} s: {}",
            done.wanted.server,
            outcome.installed.describe(),
            done.took.as_secs_f64(),
            outcome.program.display()
        )
    } else {
        format!(
            "{} is installed already ({}): {}",
            done.wanted.server,
            outcome.installed.describe(),
            outcome.program.display()
        )
    })
}

/// The folders `install --for` reads (for messages).
pub fn folder_label(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())
}
