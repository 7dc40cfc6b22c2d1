//! clangd on a plain folder of C/C++ files: a compilation database acp-lsp
//! generates when the project has none, and what clangd's readiness waits
//! for (its background index).
//!
//! With only `compile_flags.txt` (or nothing) clangd knows only the files
//! open in it: it builds no background index, so references and rename miss
//! every file not open (a rename from `main.c` leaves `util.c` and `util.h`
//! as they were). With a `compile_commands.json` listing every source it
//! indexes them all. clangd looks for one in each directory from a file up,
//! and in its `build/`; when the root and its ancestors have none, acp-lsp
//! writes one covering every C/C++ source of the root (an ignore-aware walk,
//! at most [`MAX_COMPILE_COMMANDS`]) into the server's private cache
//! directory (`super::caches`) and passes `--compile-commands-dir`. clangd
//! writes its index beside the database, so `.cache/clangd/` lands there too,
//! not in the project. The database is written again at each server start.
//! A project's own database in the root or its `build/` is linked there
//! (a symbolic link), for the same reason; one elsewhere (an ancestor, or
//! named by `.clangd`) is left to clangd, which then indexes beside it.

use super::config::ServerConfig;
use super::launch::Launch;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Most source files listed in a generated compilation database; the walk
/// stops there (and says so in the log). clangd indexes every one.
pub const MAX_COMPILE_COMMANDS: usize = 20_000;

/// Most directory entries the walk looks at, sources or not.
pub const MAX_WALK_ENTRIES: usize = 500_000;

/// The work-done progress token of clangd's background index.
pub const BACKGROUND_INDEX_TOKEN: &str = "backgroundIndexProgress";

/// Extensions of sources (headers are not compiled alone: clangd infers
/// their flags from the sources that include them).
const C_SOURCES: &[&str] = &["c"];
const CXX_SOURCES: &[&str] = &["cc", "cpp", "cxx", "c++", "cp"];

/// Where clangd looks for a compilation database in a directory (clangd 12+).
const DATABASE_NAMES: &[&str] = &["compile_commands.json", "build/compile_commands.json"];

/// Whether the server is clangd, by its program (`clangd`, `clangd-14`):
/// not by the configured name, which a stand-in (the conformance replay's
/// bridge) carries too.
pub fn is_clangd(program: &Path) -> bool {
    super::detect::program_name(program).is_some_and(|n| n == "clangd" || n.starts_with("clangd-"))
}

/// Whether the user's arguments turn clangd's background index off.
fn background_index_off(args: &[String]) -> bool {
    args.iter().any(|a| {
        let a = a.trim_start_matches('-');
        a == "background-index=false" || a == "background-index=0"
    })
}

/// Whether the user's arguments name a compilation database directory.
fn database_dir_given(args: &[String]) -> bool {
    args.iter().any(|a| {
        a.trim_start_matches('-')
            .starts_with("compile-commands-dir")
    })
}

/// Whether clangd would find a compilation database of the project's own
/// for files under `root`: in the root or an ancestor (or their `build/`),
/// or one a `.clangd` file in the root names.
pub fn project_has_database(root: &Path) -> bool {
    let in_ancestors = root
        .ancestors()
        .any(|dir| DATABASE_NAMES.iter().any(|name| dir.join(name).is_file()));
    in_ancestors || names_database_in_config(root)
}

fn names_database_in_config(root: &Path) -> bool {
    std::fs::read_to_string(root.join(".clangd"))
        .is_ok_and(|text| text.contains("CompilationDatabase"))
}

/// The project's own database in the root or its `build/` (what clangd
/// would pick first for the root's files), unless a `.clangd` names one.
fn root_database(root: &Path) -> Option<PathBuf> {
    if names_database_in_config(root) {
        return None;
    }
    DATABASE_NAMES
        .iter()
        .map(|name| root.join(name))
        .find(|path| path.is_file())
}

/// clangd's launch when acp-lsp may write its database in `dir`.
pub fn launch(config: &ServerConfig, root: &Path, dir: &Path) -> Launch {
    if database_dir_given(&config.args) {
        return launch_in_place(config, root);
    }
    if let Some(own) = root_database(root) {
        return launch_linked(config, root, dir, &own);
    }
    if project_has_database(root) {
        return launch_in_place(config, root);
    }
    let sources = sources(root, MAX_COMPILE_COMMANDS);
    let database = dir.join("compile_commands.json");
    let text = database_text(root, &sources);
    // A link left from a start with the project's own database is replaced.
    let unchanged = std::fs::symlink_metadata(&database).is_ok_and(|m| m.is_file())
        && std::fs::read_to_string(&database).is_ok_and(|old| old == text);
    if !unchanged {
        let written = tempfile::NamedTempFile::new_in(dir)
            .and_then(|mut file| {
                std::io::Write::write_all(&mut file, text.as_bytes())?;
                Ok(file)
            })
            .and_then(|file| file.persist(&database).map_err(|e| e.error));
        if let Err(error) = written {
            tracing::warn!(server = %config.name, path = %database.display(), %error, "compilation database not written; clangd sees open files only");
            return launch_in_place(config, root);
        }
    }
    tracing::info!(
        server = %config.name,
        root = %root.display(),
        sources = sources.len(),
        database = %database.display(),
        "compilation database generated"
    );
    Launch {
        extra_args: vec![format!("--compile-commands-dir={}", dir.display())],
        awaits_background_index: !background_index_off(&config.args) && !sources.is_empty(),
        first_source: sources.first().cloned(),
        generated_database: Some(database),
        sources,
    }
}

/// clangd's launch with the project's own database in the root (or its
/// `build/`): `dir/compile_commands.json` is a symbolic link to it, so clangd
/// reads the project's database (and rereads it when the build rewrites it,
/// as it would in place) but writes its index beside the link, in `dir`.
fn launch_linked(config: &ServerConfig, root: &Path, dir: &Path, own: &Path) -> Launch {
    let link = dir.join("compile_commands.json");
    let current = std::fs::read_link(&link).ok();
    if current.as_deref() != Some(own) {
        let staged = dir.join(".compile_commands.json.link");
        let _ = std::fs::remove_file(&staged);
        #[cfg(unix)]
        let linked =
            std::os::unix::fs::symlink(own, &staged).and_then(|()| std::fs::rename(&staged, &link));
        // A file symlink needs a privilege or developer mode on Windows:
        // where it cannot be made, clangd's index goes beside the project's.
        #[cfg(windows)]
        let linked = std::os::windows::fs::symlink_file(own, &staged)
            .and_then(|()| std::fs::rename(&staged, &link));
        if let Err(error) = linked {
            tracing::warn!(server = %config.name, path = %link.display(), %error, "compilation database not linked; clangd's index goes beside the project's");
            return launch_in_place(config, root);
        }
    }
    let mut launch = launch_in_place(config, root);
    launch.extra_args = vec![format!("--compile-commands-dir={}", dir.display())];
    launch
}

/// clangd's launch with the project's own database (or none acp-lsp could
/// write): only the readiness part.
pub fn launch_in_place(config: &ServerConfig, root: &Path) -> Launch {
    let first = sources(root, 1).into_iter().next();
    Launch {
        awaits_background_index: !background_index_off(&config.args) && first.is_some(),
        first_source: first,
        ..Launch::default()
    }
}

/// Whether a path is a C/C++ source acp-lsp lists (not a header).
pub fn is_source(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| C_SOURCES.contains(&e) || CXX_SOURCES.contains(&e))
}

/// Up to `cap` C/C++ sources under `root`, in a stable order: an
/// ignore-aware walk (`.gitignore`, `.ignore`, hidden directories skipped)
/// that does not enter a directory holding its own `compile_commands.json`
/// (another project).
pub fn sources(root: &Path, cap: usize) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let top = root.to_path_buf();
    let walk = ignore::WalkBuilder::new(root)
        .hidden(true)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| {
            !(entry.file_type().is_some_and(|t| t.is_dir())
                && entry.path() != top
                && entry.path().join("compile_commands.json").is_file())
        })
        .build();
    for (seen, entry) in walk.enumerate() {
        if seen >= MAX_WALK_ENTRIES {
            tracing::warn!(root = %root.display(), "C/C++ source walk stopped after {MAX_WALK_ENTRIES} entries");
            break;
        }
        let Ok(entry) = entry else { continue };
        if entry.file_type().is_some_and(|t| t.is_file()) && is_source(entry.path()) {
            if found.len() >= cap {
                if cap > 1 {
                    tracing::warn!(root = %root.display(), "compilation database capped at {cap} sources");
                }
                break;
            }
            found.push(entry.into_path());
        }
    }
    found
}

/// The flags of the nearest `compile_flags.txt` from `dir` up to `root`
/// (one argument a line, as clangd reads it), and the directory they are
/// relative to.
fn flags_for(
    dir: &Path,
    root: &Path,
    cache: &mut HashMap<PathBuf, Option<(PathBuf, Vec<String>)>>,
) -> Option<(PathBuf, Vec<String>)> {
    if let Some(known) = cache.get(dir) {
        return known.clone();
    }
    let here = std::fs::read_to_string(dir.join("compile_flags.txt"))
        .ok()
        .map(|text| {
            let flags = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            (dir.to_path_buf(), flags)
        });
    let found = match here {
        Some(found) => Some(found),
        None if dir != root => dir.parent().and_then(|up| flags_for(up, root, cache)),
        None => None,
    };
    cache.insert(dir.to_path_buf(), found.clone());
    found
}

/// The JSON text of a compilation database for `sources` under `root`.
pub fn database_text(root: &Path, sources: &[PathBuf]) -> String {
    #[derive(serde::Serialize)]
    struct Command {
        directory: String,
        file: String,
        arguments: Vec<String>,
    }
    let mut cache = HashMap::new();
    let commands: Vec<Command> = sources
        .iter()
        .map(|file| {
            let (directory, flags) = file
                .parent()
                .and_then(|dir| flags_for(dir, root, &mut cache))
                .unwrap_or_else(|| (root.to_path_buf(), Vec::new()));
            let cxx = file
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| CXX_SOURCES.contains(&e));
            let mut arguments = vec![if cxx { "c++" } else { "cc" }.to_string()];
            arguments.extend(flags);
            // The root on the include path: a project without flags still
            // finds its own headers from any directory.
            arguments.push(format!("-I{}", root.display()));
            arguments.extend(["-c".to_string(), file.display().to_string()]);
            Command {
                directory: directory.display().to_string(),
                file: file.display().to_string(),
                arguments,
            }
        })
        .collect();
    serde_json::to_string_pretty(&commands).unwrap_or_else(|_| "[]".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn write(root: &Path, file: &str, text: &str) {
        let path = root.join(file);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("mkdir");
        }
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn lists_every_source_with_the_nearest_flags_and_the_root_on_the_include_path() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        write(root, "compile_flags.txt", "-std=c11\n\n  -DTOP  \n");
        write(root, "main.c", "");
        write(root, "util.h", "");
        write(root, "lib/extra.cpp", "");
        write(root, "lib/compile_flags.txt", "-std=c++17\n");
        write(root, "ignored/skip.c", "");
        write(root, ".gitignore", "ignored/\n");
        write(root, ".hidden/x.c", "");
        write(root, "vendor/compile_commands.json", "[]");
        write(root, "vendor/other.c", "");
        let sources = sources(root, MAX_COMPILE_COMMANDS);
        let extra = root.join("lib").join("extra.cpp");
        assert_eq!(sources, vec![extra.clone(), root.join("main.c")]);
        let db: Value = serde_json::from_str(&database_text(root, &sources)).expect("json");
        let include = format!("-I{}", root.display());
        assert_eq!(db[0]["directory"], root.join("lib").display().to_string());
        assert_eq!(
            db[0]["arguments"],
            serde_json::json!([
                "c++",
                "-std=c++17",
                include,
                "-c",
                extra.display().to_string()
            ])
        );
        assert_eq!(db[1]["directory"], root.display().to_string());
        assert_eq!(
            db[1]["arguments"],
            serde_json::json!([
                "cc",
                "-std=c11",
                "-DTOP",
                include,
                "-c",
                root.join("main.c").display().to_string()
            ])
        );
    }

    #[test]
    fn the_cap_bounds_the_list() {
        let tmp = tempfile::tempdir().expect("tempdir");
        for i in 0..5 {
            write(tmp.path(), &format!("f{i}.c"), "");
        }
        assert_eq!(sources(tmp.path(), 3).len(), 3);
    }

    /// Whether this process can link as `launch_linked` does in `dir` (a
    /// symlink to a file, renamed into place, read back): always on Unix,
    /// on Windows only with the privilege (or developer mode).
    fn can_make_file_symlinks(dir: &Path) -> bool {
        let target = dir.join("probe-target");
        let (staged, link) = (dir.join("probe-staged"), dir.join("probe-link"));
        std::fs::write(&target, "").expect("write");
        #[cfg(unix)]
        let made = std::os::unix::fs::symlink(&target, &staged);
        #[cfg(windows)]
        let made = std::os::windows::fs::symlink_file(&target, &staged);
        let linked = made.and_then(|()| std::fs::rename(&staged, &link)).is_ok()
            && std::fs::read_link(&link).ok().as_deref() == Some(target.as_path());
        for path in [&target, &staged, &link] {
            let _ = std::fs::remove_file(path);
        }
        linked
    }

    #[test]
    fn a_project_database_in_the_root_or_build_is_kept() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("proj");
        write(&root, "main.c", "");
        assert!(!project_has_database(&root));
        write(&root, "build/compile_commands.json", "[]");
        assert!(project_has_database(&root));
        let config = ServerConfig::new("clangd", "clangd", &[], &["c"], &["c"], &[]);
        let dir = tmp.path().join("cache");
        std::fs::create_dir(&dir).expect("mkdir");
        // Linked, not copied: clangd reads the project's, indexes into `dir`.
        // Windows makes a file symlink only with a privilege or developer
        // mode (wine: never); without one clangd's index goes beside the
        // project's, which is what is checked there instead.
        let can_link = can_make_file_symlinks(tmp.path());
        let expect_linked = |launch: &Launch, own: PathBuf| {
            let link = std::fs::read_link(dir.join("compile_commands.json")).ok();
            if can_link {
                assert_eq!(
                    launch.extra_args,
                    vec![format!("--compile-commands-dir={}", dir.display())]
                );
                assert_eq!(link, Some(own));
            } else {
                assert!(launch.extra_args.is_empty(), "{:?}", launch.extra_args);
                assert_eq!(link, None);
            }
            assert!(launch.generated_database.is_none());
            assert!(launch.awaits_background_index);
            assert_eq!(launch.first_source, Some(root.join("main.c")));
        };
        let linked = launch(&config, &root, &dir);
        expect_linked(&linked, root.join("build").join("compile_commands.json"));
        // One in the root wins over build/, as in clangd.
        write(&root, "compile_commands.json", "[]");
        let linked = launch(&config, &root, &dir);
        expect_linked(&linked, root.join("compile_commands.json"));
        // A `.clangd` naming a database: left to clangd.
        write(
            &root,
            ".clangd",
            "CompileFlags:\n  CompilationDatabase: out\n",
        );
        let named = launch(&config, &root, &dir);
        assert!(named.extra_args.is_empty() && named.awaits_background_index);
    }

    #[test]
    fn generates_into_the_private_directory_and_passes_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("proj");
        write(&root, "main.c", "");
        write(&root, "util.c", "");
        let dir = tmp.path().join("cache");
        std::fs::create_dir(&dir).expect("mkdir");
        let config = ServerConfig::new("clangd", "clangd", &[], &["c"], &["c"], &[]);
        let launch = launch(&config, &root, &dir);
        assert_eq!(
            launch.extra_args,
            vec![format!("--compile-commands-dir={}", dir.display())]
        );
        let db: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("compile_commands.json")).expect("read"),
        )
        .expect("json");
        assert_eq!(db.as_array().map(Vec::len), Some(2));
        assert!(launch.awaits_background_index);
        assert!(!root.join("compile_commands.json").exists());

        let mut off = config.clone();
        off.args = vec!["--background-index=false".into()];
        assert!(!super::launch(&off, &root, &dir).awaits_background_index);
        let mut given = config;
        given.args = vec!["--compile-commands-dir=/elsewhere".into()];
        assert!(super::launch(&given, &root, &dir).extra_args.is_empty());
    }

    #[test]
    fn clangd_is_known_by_its_program() {
        assert!(is_clangd(Path::new("/usr/bin/clangd-14")));
        assert!(is_clangd(Path::new("/usr/bin/clangd")));
        assert!(!is_clangd(Path::new("/usr/bin/ccls")));
        assert!(!is_clangd(Path::new("/work/target/debug/acp-lsp")));
    }
}
