//! `acp-lsp index`: the arguments and their run (`acp_lsp::scip::produce`).
//! stdout gets one line per index written; progress goes to stderr.

use acp_lsp::cli::UsageError;
use acp_lsp::scip::produce::{self, IndexOptions, Language, DEFAULT_INDEXER_TIMEOUT};
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub(crate) struct IndexArgs {
    /// The project (default: the current folder).
    path: Option<PathBuf>,
    /// Where to write the indexes (default: PATH/.scip, where a session on PATH finds them).
    #[arg(long)]
    out: Option<PathBuf>,
    /// What the recorded project root is relative to: the folder a session
    /// will have as its root (default: the parent of --out when it is a
    /// `.scip` folder, else PATH). For a monorepo's CI: `--base .`.
    #[arg(long)]
    base: Option<PathBuf>,
    /// Only this language (`rust`, `python`, `typescript`; repeatable).
    #[arg(long = "language")]
    languages: Vec<String>,
    /// Longest one indexer may run, in seconds.
    #[arg(long, default_value_t = DEFAULT_INDEXER_TIMEOUT.as_secs())]
    timeout_secs: u64,
    /// Install scip-python and scip-typescript (npm, pinned) where acp-lsp
    /// looks for them, then index.
    #[arg(long)]
    install: bool,
    /// Describe an index file instead (what it holds, what the disk still
    /// matches); PATH is then the folder its sidecar's root is relative to.
    #[arg(long, value_name = "INDEX_FILE")]
    check: Option<PathBuf>,
}

pub(crate) fn run(args: IndexArgs) -> anyhow::Result<ExitCode> {
    let path = match args.path {
        Some(p) => p,
        None => std::env::current_dir().context("cannot read the current folder")?,
    };
    if let Some(file) = args.check {
        let text = produce::describe(&file, &path).map_err(anyhow::Error::msg)?;
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let mut languages = Vec::new();
    for name in &args.languages {
        let language = Language::parse(name).ok_or_else(|| {
            UsageError(format!(
                "--language {name}: one of rust, python, typescript"
            ))
        })?;
        languages.push(language);
    }
    if args.install {
        let (dir, mut command) =
            produce::install_command().context("no data folder to install the indexers into")?;
        eprintln!(
            "installing {} and {} into {}",
            produce::SCIP_PYTHON,
            produce::SCIP_TYPESCRIPT,
            dir.display()
        );
        let status = command
            .stdout(std::process::Stdio::null())
            .status()
            .context("cannot run npm")?;
        anyhow::ensure!(status.success(), "npm install failed ({status})");
    }
    let options = IndexOptions {
        path,
        out: args.out,
        base: args.base,
        languages,
        timeout: Duration::from_secs(args.timeout_secs),
    };
    let produced = produce::index(&options, &mut |line| eprintln!("{line}"))?;
    for p in produced {
        println!("{}\t{}", p.language.name(), p.index.display());
    }
    Ok(ExitCode::SUCCESS)
}
