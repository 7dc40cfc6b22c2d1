//! `acp-lsp index [PATH]`: runs the right SCIP indexer for each project it
//! finds in PATH (`rust-analyzer scip`, `scip-python`, `scip-typescript`)
//! and writes `<out>/<language>.scip` with its sidecar (`scip::sidecar`),
//! where a session on PATH finds it (`.scip/` by default).
//!
//! Each indexer runs in its own process group, its output passed on to
//! stderr as progress, bounded by a timeout. A document whose file was
//! modified while its indexer ran gets no hash (it is never answered): the
//! sidecar says only what is known to be the indexed bytes.

use super::config::CONVENTIONAL_DIR;
use super::load::{self, LoadLimits};
use super::sidecar::{self, Sidecar, FORMAT};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
#[cfg(unix)]
use std::os::unix::process::CommandExt;
#[cfg(windows)]
use std::os::windows::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// Default longest run of one indexer (rust-analyzer takes ~20 minutes on
/// the largest repositories).
pub const DEFAULT_INDEXER_TIMEOUT: Duration = Duration::from_secs(3 * 60 * 60);
/// The npm packages of the indexers that are not built into a server,
/// pinned (what `--install` installs and the docs name).
pub const SCIP_PYTHON: &str = "@sourcegraph/scip-python@0.6.6";
pub const SCIP_TYPESCRIPT: &str = "@sourcegraph/scip-typescript@0.4.0";
/// Overrides where installed indexers are looked for and installed.
pub const INDEXERS_DIR_ENV: &str = "ACP_LSP_INDEXERS_DIR";

/// A language acp-lsp can index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Language {
    Rust,
    Python,
    TypeScript,
}

impl Language {
    pub const ALL: [Language; 3] = [Language::Rust, Language::Python, Language::TypeScript];

    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::TypeScript => "typescript",
        }
    }

    pub fn parse(name: &str) -> Option<Language> {
        Language::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The indexer's program name.
    pub fn program(self) -> &'static str {
        match self {
            Language::Rust => "rust-analyzer",
            Language::Python => "scip-python",
            Language::TypeScript => "scip-typescript",
        }
    }

    /// How to get the indexer.
    pub fn install_hint(self) -> String {
        match self {
            Language::Rust => "rustup component add rust-analyzer".to_string(),
            Language::Python => format!("acp-lsp index --install (npm: {SCIP_PYTHON})"),
            Language::TypeScript => format!("acp-lsp index --install (npm: {SCIP_TYPESCRIPT})"),
        }
    }

    /// Whether `dir` is a project of this language (by its marker files).
    fn detects(self, dir: &Path) -> bool {
        let has = |name: &str| dir.join(name).exists();
        match self {
            Language::Rust => has("Cargo.toml"),
            Language::Python => ["pyproject.toml", "setup.py", "setup.cfg"]
                .iter()
                .any(|m| has(m)),
            Language::TypeScript => {
                has("tsconfig.json") || has("jsconfig.json") || has("package.json")
            }
        }
    }
}

/// What to index and where to write.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// The project directory.
    pub path: PathBuf,
    /// Where the indexes go (default `PATH/.scip`).
    pub out: Option<PathBuf>,
    /// What the recorded root is relative to (default: the parent of `out`
    /// when it is a `.scip` directory, else PATH).
    pub base: Option<PathBuf>,
    /// Only these languages (default: every one detected).
    pub languages: Vec<Language>,
    pub timeout: Duration,
}

/// One index written.
#[derive(Debug, Clone)]
pub struct Produced {
    pub language: Language,
    pub index: PathBuf,
    pub sidecar: PathBuf,
    pub documents: usize,
    /// Documents left without a hash (modified while indexed, unreadable).
    pub unhashed: usize,
    pub occurrences: usize,
    pub took: Duration,
}

/// Why indexing failed.
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    #[error("{}: no Rust, Python or TypeScript project here (looked for Cargo.toml, pyproject.toml/setup.py/setup.cfg, tsconfig.json/package.json)", path.display())]
    NothingToIndex { path: PathBuf },
    #[error("{program} is not installed (install it with: {hint})")]
    NotInstalled { program: &'static str, hint: String },
    #[error("{program} failed ({status}); its last lines:\n{tail}")]
    IndexerFailed {
        program: &'static str,
        status: String,
        tail: String,
    },
    #[error("{program} did not finish within {} s", timeout.as_secs())]
    TimedOut {
        program: &'static str,
        timeout: Duration,
    },
    #[error("the index {program} wrote cannot be read: {source}")]
    Unreadable {
        program: &'static str,
        #[source]
        source: load::LoadError,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: --base must contain the project directory {}", base.display(), path.display())]
    BaseOutside { base: PathBuf, path: PathBuf },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ProduceError + '_ {
    move |source| ProduceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The languages detected in `dir`.
pub fn detect(dir: &Path) -> Vec<Language> {
    Language::ALL
        .into_iter()
        .filter(|l| l.detects(dir))
        .collect()
}

/// Where installed indexers live: `$ACP_LSP_INDEXERS_DIR`, else
/// `$XDG_DATA_HOME/acp-lsp/indexers` (`~/.local/share/acp-lsp/indexers`).
pub fn indexers_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(INDEXERS_DIR_ENV) {
        return Some(PathBuf::from(dir));
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("acp-lsp/indexers"))
}

/// The indexer of `language`: on `PATH`, else in [`indexers_dir`].
pub fn find_indexer(language: Language) -> Result<PathBuf, ProduceError> {
    let program = language.program();
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    });
    let installed = || {
        indexers_dir()
            .map(|d| d.join("node_modules/.bin").join(program))
            .filter(|p| p.is_file())
    };
    on_path
        .or_else(installed)
        .ok_or_else(|| ProduceError::NotInstalled {
            program,
            hint: language.install_hint(),
        })
}

/// The command that installs the npm indexers into [`indexers_dir`].
pub fn install_command() -> Option<(PathBuf, Command)> {
    let dir = indexers_dir()?;
    let mut command = Command::new("npm");
    command
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .args([SCIP_PYTHON, SCIP_TYPESCRIPT]);
    Some((dir, command))
}

/// Indexes every project of `options.path`; `report` gets progress lines.
pub fn index(
    options: &IndexOptions,
    report: &mut dyn FnMut(&str),
) -> Result<Vec<Produced>, ProduceError> {
    let path = options.path.canonicalize().map_err(io(&options.path))?;
    let out = match &options.out {
        Some(out) => out.clone(),
        None => path.join(CONVENTIONAL_DIR),
    };
    std::fs::create_dir_all(&out).map_err(io(&out))?;
    let out = out.canonicalize().map_err(io(&out))?;
    let base = match &options.base {
        Some(base) => base.canonicalize().map_err(io(base))?,
        None if out.file_name().is_some_and(|n| n == CONVENTIONAL_DIR) => {
            out.parent().unwrap_or(&out).to_path_buf()
        }
        None => path.clone(),
    };
    let root = relative_root(&base, &path)?;
    let mut languages = detect(&path);
    if !options.languages.is_empty() {
        languages.retain(|l| options.languages.contains(l));
    }
    if languages.is_empty() {
        return Err(ProduceError::NothingToIndex { path });
    }
    let commit = git_commit(&path);
    let mut produced = Vec::new();
    for language in languages {
        let program = find_indexer(language)?;
        let name = if root == "." {
            format!("{}.scip", language.name())
        } else {
            format!("{}-{}.scip", language.name(), root.replace('/', "-"))
        };
        let target = out.join(&name);
        report(&format!(
            "indexing {} ({}) with {} → {}",
            path.display(),
            language.name(),
            program.display(),
            target.display()
        ));
        let started = Instant::now();
        let since = SystemTime::now();
        let scratch = out.join(format!(".{name}.partial"));
        let run = Run {
            language,
            program: &program,
            dir: &path,
            commit: commit.as_deref(),
        };
        run_indexer(&run, &scratch, options.timeout, report)?;
        let outcome = finish(
            language,
            &path,
            &scratch,
            &target,
            since,
            &root,
            commit.clone(),
        );
        let _ = std::fs::remove_file(&scratch);
        let mut done = outcome?;
        done.took = started.elapsed();
        report(&format!(
            "{}: {} documents ({} without a hash), {} occurrences, in {:.1} s",
            language.name(),
            done.documents,
            done.unhashed,
            done.occurrences,
            done.took.as_secs_f64()
        ));
        produced.push(done);
    }
    Ok(produced)
}

/// `path` relative to `base`, `/`-separated (`.` when the same).
fn relative_root(base: &Path, path: &Path) -> Result<String, ProduceError> {
    let rest = path
        .strip_prefix(base)
        .map_err(|_| ProduceError::BaseOutside {
            base: base.to_path_buf(),
            path: path.to_path_buf(),
        })?;
    let parts: Vec<String> = rest
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Ok(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

/// `git rev-parse HEAD` in `dir`, with `+dirty` when the work tree has
/// changes (the sidecar's hashes are what count either way).
fn git_commit(dir: &Path) -> Option<String> {
    let run = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = run(&["rev-parse", "HEAD"]).filter(|h| !h.is_empty())?;
    let dirty =
        run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}+dirty") } else { head })
}

/// One indexer run: which indexer, over which project.
struct Run<'a> {
    language: Language,
    program: &'a Path,
    dir: &'a Path,
    /// The project's git commit (`index` reads it once for the index's
    /// metadata; scip-python's `--project-version` is the same).
    commit: Option<&'a str>,
}

/// The indexer's command line for `run`, writing `output`.
fn indexer_command(run: &Run, output: &Path) -> Result<Command, ProduceError> {
    let Run {
        language,
        program,
        dir,
        commit,
    } = *run;
    let mut command = Command::new(program);
    match language {
        Language::Rust => {
            // Build output (build scripts, proc macros) goes to a directory
            // of its own, not into the project's `target/`.
            let config = output.with_extension("ra.json");
            let target =
                std::env::temp_dir().join(format!("acp-lsp-index-target-{}", std::process::id()));
            let text = serde_json::json!({"cargo": {"targetDir": target}}).to_string();
            std::fs::write(&config, text).map_err(io(&config))?;
            command
                .arg("scip")
                .arg(dir)
                .arg("--output")
                .arg(output)
                .arg("--config-path")
                .arg(&config);
        }
        Language::Python => {
            let project = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            // Without a version scip-python asks git for one, and outside a
            // repository it fails on the first module outside a package
            // (`normalizeNameOrVersion` of undefined: packaging's
            // `docs/conf.py`). The version only names the index's symbols.
            let version = commit
                .map(|c| c.trim_end_matches("+dirty").to_string())
                .unwrap_or_else(|| "unversioned".to_string());
            command
                .args([
                    "index",
                    "--show-progress-rate-limit",
                    "2",
                    "--project-name",
                    &project,
                    "--project-version",
                    &version,
                ])
                .arg("--cwd")
                .arg(dir)
                .arg("--output")
                .arg(output);
        }
        Language::TypeScript => {
            command
                .args(["index", "--no-progress-bar"])
                .arg("--cwd")
                .arg(dir)
                .arg("--output")
                .arg(output);
            if !dir.join("tsconfig.json").exists() {
                command.arg("--infer-tsconfig");
            }
        }
    }
    Ok(command)
}

/// Runs one indexer to `output`, passing its output lines on.
fn run_indexer(
    run: &Run,
    output: &Path,
    timeout: Duration,
    report: &mut dyn FnMut(&str),
) -> Result<(), ProduceError> {
    let Run {
        language,
        program,
        dir,
        ..
    } = *run;
    let name = language.program();
    let mut command = indexer_command(run, output)?;
    command
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own group (Unix) or a Job Object (Windows, created suspended and
    // put in the job before it runs): indexers start workers of their own.
    #[cfg(unix)]
    command.process_group(0);
    #[cfg(windows)]
    command.creation_flags(crate::sys::CHILD_CREATION_FLAGS);
    let mut child = command.spawn().map_err(|e| ProduceError::Io {
        path: program.to_path_buf(),
        source: e,
    })?;
    // Closing the job (at return, or a panic) ends whatever is left of it.
    #[cfg(windows)]
    let _job = {
        use std::os::windows::io::AsRawHandle;
        let pid = crate::sys::pid(child.id())
            .ok_or_else(|| std::io::Error::other("pid out of range"))
            .map_err(io(program))?;
        crate::sys::Job::adopt_suspended(child.as_raw_handle(), pid).map_err(io(program))?
    };
    // Both streams into one channel of lines, read by two plain threads.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut readers = Vec::new();
    for stream in [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        }));
    }
    drop(tx);
    let deadline = Instant::now() + timeout;
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let status = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                let line = line.trim_end().to_string();
                if !line.is_empty() {
                    report(&format!("  {name}: {line}"));
                    tail.push_back(line);
                    if tail.len() > 20 {
                        tail.pop_front();
                    }
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {}
        }
        if let Some(status) = child.try_wait().map_err(io(program))? {
            // What is still in the pipes.
            for line in rx.try_iter() {
                tail.push_back(line);
            }
            break status;
        }
        if Instant::now() > deadline {
            // Its whole group: indexers start workers of their own.
            #[cfg(unix)]
            if let Some(group) = crate::sys::pid(child.id()) {
                let _ = crate::sys::kill_group(group, crate::sys::Signal::Kill);
            }
            #[cfg(windows)]
            _job.terminate();
            let _ = child.kill();
            let _ = child.wait();
            return Err(ProduceError::TimedOut {
                program: name,
                timeout,
            });
        }
    };
    for reader in readers {
        let _ = reader.join();
    }
    let _ = std::fs::remove_file(output.with_extension("ra.json"));
    if !status.success() || !output.is_file() {
        let tail: Vec<String> = tail.into_iter().collect();
        return Err(ProduceError::IndexerFailed {
            program: name,
            status: status.to_string(),
            tail: tail.join("\n"),
        });
    }
    Ok(())
}

/// Hashes the indexed documents, moves the index into place and writes its
/// sidecar (index first: a sidecar that does not describe its index is refused).
fn finish(
    language: Language,
    dir: &Path,
    scratch: &Path,
    target: &Path,
    since: SystemTime,
    root: &str,
    commit: Option<String>,
) -> Result<Produced, ProduceError> {
    let program = language.program();
    let loaded = load::load(scratch, LoadLimits::default(), None)
        .map_err(|source| ProduceError::Unreadable { program, source })?;
    let mut documents = BTreeMap::new();
    let mut unhashed = 0;
    for document in &loaded.index.documents {
        let file = dir.join(&*document.path);
        let modified = std::fs::metadata(&file).and_then(|m| m.modified()).ok();
        // Modified after the indexer started: the index may hold either
        // version, so no hash says it is this one.
        if modified.is_none_or(|m| m > since) {
            unhashed += 1;
            continue;
        }
        match std::fs::read(&file) {
            Ok(bytes) => {
                documents.insert(
                    document.path.to_string(),
                    sidecar::to_hex(&sidecar::hash(&bytes)),
                );
            }
            Err(_) => unhashed += 1,
        }
    }
    let bytes = std::fs::read(scratch).map_err(io(scratch))?;
    std::fs::rename(scratch, target).map_err(io(target))?;
    let indexer = format!("{} {}", loaded.meta.tool, loaded.meta.tool_version)
        .trim()
        .to_string();
    let sidecar_path = sidecar::write(
        target,
        &Sidecar {
            format: FORMAT.into(),
            commit,
            root: root.to_string(),
            indexer,
            index_bytes: bytes.len() as u64,
            index_sha256: sidecar::to_hex(&sidecar::hash(&bytes)),
            documents,
        },
    )
    .map_err(io(target))?;
    Ok(Produced {
        language,
        index: target.to_path_buf(),
        sidecar: sidecar_path,
        documents: loaded.index.documents.len(),
        unhashed,
        occurrences: loaded.index.occurrence_count(),
        took: Duration::ZERO,
    })
}

/// What `acp-lsp index --check FILE` prints: what an index holds and how
/// much of it the disk still matches.
pub fn describe(file: &Path, base: &Path) -> Result<String, String> {
    use std::fmt::Write;
    let started = Instant::now();
    let checked = sidecar::read(file);
    let expected = checked.as_ref().ok().map(|c| load::Expected {
        bytes: c.sidecar.index_bytes,
        sha256: c.index_hash,
    });
    let loaded = load::load(file, LoadLimits::default(), expected).map_err(|e| e.to_string())?;
    let took = started.elapsed();
    let index = &loaded.index;
    let mut out = String::new();
    let _ = writeln!(out, "index      {}", file.display());
    let _ = writeln!(
        out,
        "tool       {} {}",
        loaded.meta.tool, loaded.meta.tool_version
    );
    let _ = writeln!(out, "built in   {}", loaded.meta.project_root);
    let _ = writeln!(
        out,
        "holds      {} documents, {} occurrences, {} symbols ({} KiB of tables, loaded in {} ms)",
        index.documents.len(),
        index.occurrence_count(),
        index.symbol_count(),
        index.heap_bytes() / 1024,
        took.as_millis()
    );
    let mut encodings: BTreeMap<&str, usize> = BTreeMap::new();
    for d in &index.documents {
        *encodings.entry(d.encoding.as_str()).or_default() += 1;
    }
    let _ = writeln!(out, "positions  {encodings:?}");
    let dropped = loaded.dropped;
    if dropped != load::Dropped::default() {
        let _ = writeln!(out, "dropped    {dropped:?}");
    }
    match checked {
        Err(e) => {
            let _ = writeln!(out, "sidecar    {e}");
        }
        Ok(checked) => {
            let base = base.canonicalize().unwrap_or_else(|_| base.to_path_buf());
            let root = if checked.sidecar.root == "." {
                base.to_path_buf()
            } else {
                base.join(&checked.sidecar.root)
            };
            let truth = super::verify::Truth::new(
                root.clone(),
                index,
                &checked.documents,
                &loaded.duplicate,
            );
            let inside = |p: &Path| p.starts_with(&root);
            let mut verdicts: BTreeMap<&'static str, usize> = BTreeMap::new();
            for d in 0..index.documents.len() as u32 {
                *verdicts
                    .entry(truth.check(index, d, &inside).verdict.reason())
                    .or_default() += 1;
            }
            let _ = writeln!(
                out,
                "sidecar    commit {}, root {}, indexer {}",
                checked.sidecar.commit.as_deref().unwrap_or("unknown"),
                checked.sidecar.root,
                checked.sidecar.indexer
            );
            let _ = writeln!(out, "documents  {verdicts:?} (against {})", root.display());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_projects_by_their_markers() {
        let dir = tempfile::tempdir().unwrap();
        assert!(detect(dir.path()).is_empty());
        std::fs::write(dir.path().join("Cargo.toml"), "").unwrap();
        std::fs::write(dir.path().join("package.json"), "{}").unwrap();
        assert_eq!(
            detect(dir.path()),
            vec![Language::Rust, Language::TypeScript]
        );
    }

    #[test]
    fn roots_are_relative_to_the_base() {
        let base = Path::new("/r");
        assert_eq!(relative_root(base, Path::new("/r")).unwrap(), ".");
        assert_eq!(
            relative_root(base, Path::new("/r/crates/a")).unwrap(),
            "crates/a"
        );
        assert!(relative_root(base, Path::new("/elsewhere")).is_err());
    }
}
