//! Saying when an answer is partial: a server that sees only part of the
//! project (tsserver on a folder without `tsconfig.json`/`jsconfig.json`
//! knows only the files open in it; clangd compiles a source missing from
//! the project's compilation database with fallback flags and has not
//! indexed it), with what would fix it.

use super::*;

/// JavaScript and TypeScript sources tsserver reads.
const TS_EXTENSIONS: &[&str] = &["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"];
/// The configuration files that make tsserver see a whole project.
const TS_PROJECT_FILES: &[&str] = &["tsconfig.json", "jsconfig.json"];
/// C and C++ sources a compilation database lists (headers are never listed).
const C_SOURCES: &[&str] = &["c", "cc", "cpp", "cxx", "c++", "cp", "m", "mm"];
/// Where clangd looks for the project's database in its root.
const DATABASES: &[&str] = &["compile_commands.json", "build/compile_commands.json"];

fn extension(path: &Path) -> &str {
    path.extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
}

fn is_server(entry: &ServerEntry, names: &[&str]) -> bool {
    names.iter().any(|n| entry.name.contains(n))
}

/// Why `entry`'s answer about `path` may miss part of the project, and
/// what fixes it; `None` when nothing says so.
pub(super) async fn partial_view(
    tool: &SessionFacade,
    entry: &ServerEntry,
    path: &Path,
) -> Option<String> {
    let root = PathBuf::from(&entry.workspace_path);
    if is_server(entry, &["typescript", "tsserver", "vtsls"])
        && TS_EXTENSIONS.contains(&extension(path))
    {
        return no_ts_project(&root, path);
    }
    if is_server(entry, &["clangd"]) && C_SOURCES.contains(&extension(path)) {
        return outside_database(tool, &root, path).await;
    }
    None
}

/// tsserver without a project file between the file and the root: an
/// inferred project of the open files and what they import.
fn no_ts_project(root: &Path, path: &Path) -> Option<String> {
    let covered = path
        .ancestors()
        .skip(1)
        .take_while(|dir| dir.starts_with(root))
        .any(|dir| TS_PROJECT_FILES.iter().any(|f| dir.join(f).is_file()));
    if covered {
        return None;
    }
    let config = if matches!(extension(path), "js" | "jsx" | "mjs" | "cjs") {
        "jsconfig.json"
    } else {
        "tsconfig.json"
    };
    Some(format!(
        "no tsconfig.json or jsconfig.json covers this file, so tsserver sees only the files \
         open in it and what they import: uses in other files are missing. Add a {config} at \
         {} (e.g. {{\"compilerOptions\": {{\"allowJs\": true}}, \"include\": [\"**/*\"]}}) and \
         ask again",
        root.display()
    ))
}

/// A C/C++ source that the project's own compilation database does not
/// list (acp-lsp's generated database lists every source it walked).
async fn outside_database(tool: &SessionFacade, root: &Path, path: &Path) -> Option<String> {
    let database = DATABASES
        .iter()
        .map(|name| root.join(name))
        .find(|p| p.is_file())?;
    let text = tool.read_text(&database).await.ok()?;
    #[derive(Deserialize)]
    struct Command {
        directory: Option<PathBuf>,
        file: PathBuf,
    }
    let commands: Vec<Command> = serde_json::from_str(&text).ok()?;
    // Relative directories are taken from the database's own directory.
    let base = database.parent().unwrap_or(root);
    let listed = commands.iter().any(|c| {
        let directory = match &c.directory {
            Some(dir) => base.join(dir),
            None => base.to_path_buf(),
        };
        let file = directory.join(&c.file);
        file == path || file.canonicalize().is_ok_and(|f| f == path)
    });
    if listed {
        return None;
    }
    let shown = database
        .strip_prefix(root)
        .unwrap_or(&database)
        .display()
        .to_string();
    Some(format!(
        "{} is not in the compilation database {shown}: clangd compiles it with fallback \
         flags and has not indexed it, so references from and to it may be missing. \
         Regenerate the database so that it lists the file (e.g. `cmake -B build \
         -DCMAKE_EXPORT_COMPILE_COMMANDS=ON`, or `bear -- make`) and ask again",
        path.strip_prefix(root).unwrap_or(path).display()
    ))
}
