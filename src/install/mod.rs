//! Installing language servers: each recipe (`recipe`) from its registry
//! (npm, PyPI, rustup, go, cargo), pinned to a version with its checksum
//! where the registry gives one, into a private prefix under the user's
//! data directory (`paths`), never system-wide and never with sudo.
//!
//! An install is atomic: it is made in a staging directory beside its final
//! place (`.stage-…`), its marker written last, then the directory is
//! renamed into place. A directory with a marker is whole; a staging
//! directory left by a killed install is never run and is removed by the
//! next install of that package. One lock file per package: two processes
//! installing the same server at once make one install, and the second
//! waits for it.
//!
//! This module knows nothing of servers' configuration: `lsp` reads the
//! recipes out of the configuration and asks here where a command is.

pub mod error;
pub mod marker;
pub mod npm;
pub mod paths;
pub mod pypi;
pub mod recipe;
pub mod run;
mod toolchains;

pub use error::InstallError;
pub use marker::Marker;
pub use paths::Store;
pub use recipe::{Recipe, RecipePatch, Source};

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Longest wait for another process's install of the same package.
pub const LOCK_WAIT: Duration = Duration::from_secs(20 * 60);
/// How often a waiter tries the lock again.
pub const LOCK_POLL: Duration = Duration::from_millis(200);

/// Where an install's progress goes: the server and what it does now.
pub type ProgressSink = dyn Fn(&str, &str) + Send + Sync;

/// Progress of one recipe's install.
pub struct Report<'a> {
    server: &'a str,
    sink: &'a ProgressSink,
}

impl Report<'_> {
    pub fn step(&self, what: &str) {
        (self.sink)(self.server, what);
    }
}

/// A complete install.
#[derive(Debug, Clone)]
pub struct Installed {
    pub dir: PathBuf,
    pub marker: Marker,
}

impl Installed {
    /// `command` in this install, if it is there and executable.
    pub fn command(&self, command: &str) -> Option<PathBuf> {
        let path = self.marker.bin_dir_in(&self.dir).join(command);
        run::is_executable(&path).then_some(path)
    }

    /// "npm pyright 1.1.414".
    pub fn describe(&self) -> String {
        format!(
            "{} {} {}",
            self.marker.source,
            self.marker.packages.first().map_or("", |p| p.name.as_str()),
            self.marker.version()
        )
    }
}

/// What [`install`] did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub installed: Installed,
    /// `false`: it was already installed (maybe by another process while
    /// this one waited for the lock).
    pub fresh: bool,
    /// The program the server runs.
    pub program: PathBuf,
}

impl Store {
    /// The complete install of exactly `recipe`, if there is one.
    pub fn exact(&self, recipe: &Recipe) -> Option<Installed> {
        let dir = self.install_dir(&recipe.store_name(), &recipe.install_name());
        let marker = Marker::read(&dir)?;
        (marker.key == recipe.key()).then_some(Installed { dir, marker })
    }

    /// Every complete install of `recipe`'s package, newest first.
    pub fn installs_of(&self, recipe: &Recipe) -> Vec<Installed> {
        self.installs_in(&recipe.store_name())
    }

    /// Every complete install in the package directory `store_name`, newest first.
    pub fn installs_in(&self, store_name: &str) -> Vec<Installed> {
        let package = self.package_dir(store_name);
        let mut out: Vec<Installed> = std::fs::read_dir(&package)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                !p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .filter_map(|dir| Marker::read(&dir).map(|marker| Installed { dir, marker }))
            .collect();
        out.sort_by_key(|i| std::cmp::Reverse(i.marker.installed_at));
        out
    }

    /// The install `command` of `recipe`'s server runs from: exactly the
    /// recipe's, or, unless its version is pinned, any other installed
    /// version of the package (newest first).
    pub fn resolve(&self, recipe: &Recipe, command: &str) -> Option<(PathBuf, Installed)> {
        if let Some(exact) = self.exact(recipe) {
            if let Some(program) = exact.command(command) {
                return Some((program, exact));
            }
        }
        if recipe.pinned {
            return None;
        }
        self.installs_of(recipe)
            .into_iter()
            .find_map(|i| i.command(command).map(|p| (p, i)))
    }

    /// Where `command` will be once `recipe` is installed here (its
    /// directory is known before the install: nothing is moved after).
    pub fn planned_program(&self, recipe: &Recipe, command: &str) -> PathBuf {
        let dir = self.install_dir(&recipe.store_name(), &recipe.install_name());
        match recipe.source {
            Source::Npm => dir.join("node_modules").join(".bin").join(command),
            Source::Pypi => dir.join("venv").join("bin").join(command),
            Source::Go | Source::Cargo => dir.join("bin").join(command),
            // rustup's proxy, which runs the component once it is added.
            Source::Rustup => std::env::var_os("CARGO_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
                .unwrap_or_default()
                .join("bin")
                .join(command),
        }
    }

    /// Every complete install in the store.
    pub fn all(&self) -> Vec<Installed> {
        let mut out = Vec::new();
        for package in std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
        {
            for dir in std::fs::read_dir(package.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let dir = dir.path();
                if dir
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                {
                    continue;
                }
                if let Some(marker) = Marker::read(&dir) {
                    out.push(Installed { dir, marker });
                }
            }
        }
        out.sort_by(|a, b| a.dir.cmp(&b.dir));
        out
    }
}

/// Installs `recipe` (whose server runs `command`) into `store`, unless it
/// is installed already; waits for another process installing it.
pub async fn install(
    store: &Store,
    recipe: &Recipe,
    command: &str,
    sink: &ProgressSink,
) -> Result<Outcome, InstallError> {
    let report = Report {
        server: &recipe.server,
        sink,
    };
    let package = store.package_dir(&recipe.store_name());
    create_dir(&package)?;
    let _lock = PackageLock::take(&package, &recipe.server, &report).await?;
    let final_dir = store.install_dir(&recipe.store_name(), &recipe.install_name());
    if let Some(installed) = store.exact(recipe) {
        if let Some(program) = installed.command(command) {
            return Ok(Outcome {
                installed,
                fresh: false,
                program,
            });
        }
    }
    repair(&package, &final_dir);
    let stage = package.join(format!(
        "{}{}-{}",
        paths::STAGE_PREFIX,
        recipe.install_name(),
        random_suffix()
    ));
    create_dir(&stage)?;
    let made = make(recipe, command, &stage, &final_dir, &report).await;
    let marker = match made {
        Ok(marker) => marker,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&stage);
            return Err(e);
        }
    };
    let committed = commit(&stage, &final_dir, &marker);
    if let Err(e) = committed {
        let _ = std::fs::remove_dir_all(&stage);
        return Err(e);
    }
    let installed = Installed {
        dir: final_dir.clone(),
        marker,
    };
    let program = installed
        .command(command)
        .ok_or_else(|| InstallError::CommandMissing {
            server: recipe.server.clone(),
            command: command.to_string(),
            dir: final_dir,
        })?;
    report.step("installed");
    Ok(Outcome {
        installed,
        fresh: true,
        program,
    })
}

/// Runs the recipe into `stage`; the marker to write.
async fn make(
    recipe: &Recipe,
    command: &str,
    stage: &Path,
    final_dir: &Path,
    report: &Report<'_>,
) -> Result<Marker, InstallError> {
    let (bin_dir, packages, component_added) = match recipe.source {
        Source::Npm => {
            let (bin, packages) = npm::install(recipe, stage, report).await?;
            (bin, packages, false)
        }
        Source::Pypi => {
            let (bin, packages) = pypi::install(recipe, stage, final_dir, report).await?;
            (bin, packages, false)
        }
        Source::Rustup => {
            let done = toolchains::rustup(recipe, stage, command, report).await?;
            (done.bin_dir, done.packages, done.component_added)
        }
        Source::Go => {
            let done = toolchains::go(recipe, stage, report).await?;
            (done.bin_dir, done.packages, false)
        }
        Source::Cargo => {
            let done = toolchains::cargo(recipe, stage, report).await?;
            (done.bin_dir, done.packages, false)
        }
    };
    let marker = Marker {
        format: marker::MARKER_FORMAT,
        server: recipe.server.clone(),
        source: recipe.source,
        key: recipe.key(),
        packages,
        bin_dir,
        installed_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        component_added,
    };
    let in_stage = Installed {
        dir: stage.to_path_buf(),
        marker: marker.clone(),
    };
    if in_stage.command(command).is_none() {
        return Err(InstallError::CommandMissing {
            server: recipe.server.clone(),
            command: command.to_string(),
            dir: marker.bin_dir_in(final_dir),
        });
    }
    Ok(marker)
}

/// Writes the marker last into `stage` (through a temporary file: it is
/// whole or absent), then renames `stage` to `final_dir`.
fn commit(stage: &Path, final_dir: &Path, marker: &Marker) -> Result<(), InstallError> {
    let path = Store::marker(stage);
    let temporary = stage.join(".acp-lsp-install.json.partial");
    let bytes = serde_json::to_vec_pretty(marker).map_err(|e| InstallError::Io {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    let mut file = File::create(&temporary).map_err(InstallError::io(&temporary))?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(InstallError::io(&temporary))?;
    drop(file);
    std::fs::rename(&temporary, &path).map_err(InstallError::io(&path))?;
    std::fs::rename(stage, final_dir).map_err(InstallError::io(final_dir))?;
    if let Some(parent) = final_dir.parent() {
        // The rename reaches the disk before anyone is told it is done.
        if let Ok(dir) = File::open(parent) {
            let _ = dir.sync_all();
        }
    }
    Ok(())
}

/// Under the package's lock: what killed installs left (staging
/// directories; a final directory without a marker) goes.
fn repair(package: &Path, final_dir: &Path) {
    for entry in std::fs::read_dir(package).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(paths::STAGE_PREFIX) {
            tracing::info!(dir = %entry.path().display(), "removing an unfinished install");
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    if final_dir.exists() && Marker::read(final_dir).is_none() {
        tracing::info!(dir = %final_dir.display(), "removing an install without its marker");
        let _ = std::fs::remove_dir_all(final_dir);
    }
}

/// What [`uninstall`] removed.
#[derive(Debug, Clone)]
pub struct Removed {
    pub installed: Installed,
    /// rustup: the component was removed too (this store had added it).
    pub component_removed: bool,
}

/// Removes every install of `recipe`'s package (and a rustup component
/// that an install added). Each directory is first renamed out of place,
/// so no one ever starts a half-removed server.
pub async fn uninstall(
    store: &Store,
    recipe: &Recipe,
    sink: &ProgressSink,
) -> Result<Vec<Removed>, InstallError> {
    uninstall_package(store, &recipe.store_name(), &recipe.server, sink).await
}

/// [`uninstall`] of the package directory `store_name` (`server` names it
/// in progress and errors).
pub async fn uninstall_package(
    store: &Store,
    store_name: &str,
    server: &str,
    sink: &ProgressSink,
) -> Result<Vec<Removed>, InstallError> {
    let report = Report { server, sink };
    let package = store.package_dir(store_name);
    if !package.is_dir() {
        return Ok(Vec::new());
    }
    let _lock = PackageLock::take(&package, server, &report).await?;
    let mut removed = Vec::new();
    for installed in store.installs_in(store_name) {
        let doomed = package.join(format!(
            "{}removing-{}",
            paths::STAGE_PREFIX,
            random_suffix()
        ));
        std::fs::rename(&installed.dir, &doomed).map_err(InstallError::io(&installed.dir))?;
        let _ = std::fs::remove_dir_all(&doomed);
        let mut component_removed = false;
        if installed.marker.component_added {
            if let Some(rustup) = run::on_path("rustup") {
                let name = installed
                    .marker
                    .packages
                    .first()
                    .map_or("", |p| p.name.as_str());
                let step =
                    run::Step::new(&rustup, format!("rustup component remove {name}"), &package)
                        .args(["component", "remove", name]);
                component_removed = run::run(&step, server).await?.success;
            }
        }
        removed.push(Removed {
            installed,
            component_removed,
        });
    }
    repair(&package, &package.join(".none"));
    Ok(removed)
}

/// The package directory's lock, held while installing or removing.
struct PackageLock {
    _file: File,
}

impl PackageLock {
    async fn take(
        package: &Path,
        server: &str,
        report: &Report<'_>,
    ) -> Result<PackageLock, InstallError> {
        let path = package.join(paths::LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(InstallError::io(&path))?;
        let started = Instant::now();
        let mut said = false;
        while !crate::sys::try_lock_exclusive(&file) {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            let holder = holder.trim().to_string();
            if started.elapsed() >= LOCK_WAIT {
                return Err(InstallError::LockTimedOut {
                    server: server.to_string(),
                    holder,
                    secs: LOCK_WAIT.as_secs(),
                });
            }
            if !said {
                report.step(&format!(
                    "waiting for another acp-lsp (pid {holder}) installing it"
                ));
                said = true;
            }
            tokio::time::sleep(LOCK_POLL).await;
        }
        // Who holds it, for a waiter's message.
        let _ = file.set_len(0);
        let _ = write!(file, "{}", std::process::id());
        let _ = file.flush();
        Ok(PackageLock { _file: file })
    }
}

fn create_dir(dir: &Path) -> Result<(), InstallError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o755);
    }
    builder.create(dir).map_err(InstallError::io(dir))
}

fn random_suffix() -> String {
    let mut bytes = [0u8; 6];
    if crate::sys::fill_random(&mut bytes).is_err() {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        bytes[..4].copy_from_slice(&nanos.to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
