//! Where servers keep their caches and build output: a private directory per
//! (server, root) under the user's cache directory, never the user's tree,
//! where the server lets acp-lsp choose. Two hooks: [`configure`] adjusts a
//! server's configuration when its `Server` is made (pure: paths only), and
//! [`prepare_launch`] does the I/O right before each spawn (directories,
//! clangd's compilation database) and says what to add to the command line.
//!
//! Per server (docs/configuration.md "Caches and build output"): clangd's background index goes beside the
//! compilation database it is given, so a generated one here keeps
//! `.cache/clangd/` out of the project ([`super::clangd`]); rust-analyzer's
//! `cargo check` and build-script output goes to `cargo.targetDir` set here.
//! pyright and typescript-language-server write nothing into the project.

use super::clangd;
use super::config::ServerConfig;
pub use super::launch::Launch;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Per-root directories of one kind looked at for removal on each launch
/// (those whose root no longer exists are removed): bounded work per spawn.
pub const MAX_PRUNED_PER_LAUNCH: usize = 64;

/// The file in a per-root directory naming the root it belongs to.
const ROOT_FILE: &str = "root";

/// acp-lsp's cache directory: `$XDG_CACHE_HOME/acp-lsp` when that is an
/// absolute path, else the OS's (`~/.cache/acp-lsp`, `~/Library/Caches/acp-lsp`,
/// `%LOCALAPPDATA%\acp-lsp\cache`); `None` when the OS names none.
pub fn cache_home() -> Option<PathBuf> {
    crate::sys::places::cache_dir()
}

/// The private directory of `kind` (a server name) for `root`:
/// `<cache_home>/<kind>/<root's last name>-<hash of the root path>`. The
/// hash keeps two roots of the same name apart; the name is for people.
pub fn root_dir(kind: &str, root: &Path) -> Option<PathBuf> {
    let hash = uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        root.as_os_str().as_encoded_bytes(),
    );
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    let hash = hash.simple().to_string();
    Some(
        cache_home()?
            .join(kind)
            .join(format!("{name}-{}", &hash[..16])),
    )
}

/// Creates `dir` and its missing parents, each 0700 (caches name a user's
/// files), and notes which root it belongs to (for [`prune`]).
pub fn ensure_private_dir(dir: &Path, root: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    let note = dir.join(ROOT_FILE);
    let text = root.as_os_str().as_encoded_bytes();
    if std::fs::read(&note).ok().as_deref() != Some(text) {
        std::fs::write(&note, text)?;
    }
    Ok(())
}

/// The root a per-root directory's note names: its bytes as written (Unix),
/// or as UTF-8 (Windows; a note that is not is kept, never pruned).
fn root_of(note: &[u8]) -> Option<PathBuf> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(note)))
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(note).ok().map(PathBuf::from)
    }
}

/// Removes, among at most [`MAX_PRUNED_PER_LAUNCH`] per-root directories of
/// `kind`, those whose root no longer exists (temporary projects, deleted
/// checkouts), so the cache does not grow forever.
fn prune(kind: &str) {
    if let Some(dir) = cache_home().map(|h| h.join(kind)) {
        prune_dir(&dir);
    }
}

fn prune_dir(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten().take(MAX_PRUNED_PER_LAUNCH) {
        let path = entry.path();
        let Ok(root) = std::fs::read(path.join(ROOT_FILE)) else {
            continue;
        };
        if root_of(&root).is_some_and(|root| !root.exists()) {
            if let Err(error) = std::fs::remove_dir_all(&path) {
                tracing::debug!(dir = %path.display(), %error, "stale cache not removed");
            }
        }
    }
}

/// What the per-root directory of a server is for; `None` when acp-lsp
/// moves nothing for it. Known by the program, not the configured name: a
/// stand-in under the server's name (the conformance replay's bridge) must
/// get the recorded command line and `initialize` params.
fn kind_of(program: &Path) -> Option<&'static str> {
    if clangd::is_clangd(program) {
        Some("clangd")
    } else if super::detect::program_name(program) == Some("rust-analyzer") {
        Some("rust-analyzer")
    } else {
        None
    }
}

/// The configuration a server runs with for `root`: rust-analyzer's
/// `cargo.targetDir` in the private directory (in `initializationOptions`
/// and in the settings answered to `workspace/configuration`, where
/// rust-analyzer reads it), unless the user chose one (there, or with
/// `CARGO_TARGET_DIR`). Pure: no I/O.
pub fn configure(config: &ServerConfig, program: &Path, root: &Path) -> Option<ServerConfig> {
    let target = root_dir("rust-analyzer", root)?.join("target");
    let inherited = std::env::var_os("CARGO_TARGET_DIR").is_some();
    configure_with(config, program, &target, inherited)
}

/// [`configure`] with the target directory and whether acp-lsp's own
/// environment sets `CARGO_TARGET_DIR` given.
fn configure_with(
    config: &ServerConfig,
    program: &Path,
    target: &Path,
    inherited_target_dir: bool,
) -> Option<ServerConfig> {
    if kind_of(program) != Some("rust-analyzer") {
        return None;
    }
    let user_set = |v: &Value| !v.is_null();
    let options_set = config
        .initialization_options
        .as_ref()
        .and_then(|o| o.pointer("/cargo/targetDir"))
        .is_some_and(user_set);
    let settings_set = config
        .settings
        .pointer("/rust-analyzer/cargo/targetDir")
        .is_some_and(user_set);
    // The user's `CARGO_TARGET_DIR` (inherited, or in the server's `env`)
    // is a choice too: rust-analyzer's `--target-dir` would override it.
    let env_set = config.env.contains_key("CARGO_TARGET_DIR") || inherited_target_dir;
    if options_set || settings_set || env_set {
        return None;
    }
    let target = target.display().to_string();
    let mut config = config.clone();
    let options = config
        .initialization_options
        .get_or_insert_with(|| json!({}));
    set_path(options, &["cargo", "targetDir"], &target);
    if !config.settings.is_object() {
        config.settings = json!({});
    }
    set_path(
        &mut config.settings,
        &["rust-analyzer", "cargo", "targetDir"],
        &target,
    );
    Some(config)
}

/// Sets `value[path…] = text`, making objects on the way (a non-object on
/// the way is replaced: only called where the user set nothing).
fn set_path(value: &mut Value, path: &[&str], text: &str) {
    let mut at = value;
    for key in &path[..path.len() - 1] {
        if !at.get(*key).is_some_and(Value::is_object) {
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
    at[path[path.len() - 1]] = json!(text);
}

/// The I/O before a spawn (blocking: call it off the async threads): the
/// server's private directory, and for clangd a compilation database of
/// the root when the project has none. Failures are logged and the server
/// starts as configured.
pub fn prepare_launch(config: &ServerConfig, program: &Path, root: &Path) -> Launch {
    let Some(kind) = kind_of(program) else {
        return Launch::default();
    };
    prune(kind);
    let Some(dir) = root_dir(kind, root) else {
        tracing::warn!(
            server = %config.name,
            "no cache directory (the OS names none, and $XDG_CACHE_HOME is unset): caches stay where the server puts them"
        );
        return clangd::launch_in_place(config, root);
    };
    if let Err(error) = ensure_private_dir(&dir, root) {
        tracing::warn!(server = %config.name, dir = %dir.display(), %error, "cache directory not created");
        return if kind == "clangd" {
            clangd::launch_in_place(config, root)
        } else {
            Launch::default()
        };
    }
    match kind {
        "clangd" => clangd::launch(config, root, &dir),
        _ => Launch::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_dirs_differ_per_root_and_name_the_root() {
        let a = root_dir("clangd", Path::new("/ws/a/proj"));
        let b = root_dir("clangd", Path::new("/ws/b/proj"));
        assert_ne!(a, b);
        if let Some(a) = a {
            let name = a.file_name().map(|n| n.to_string_lossy().into_owned());
            assert!(name.is_some_and(|n| n.starts_with("proj-") && n.len() == 5 + 16));
            // `…/acp-lsp/clangd` on Unix, `…\acp-lsp\cache\clangd` on Windows.
            let parent = a.parent().expect("a cache dir has a parent");
            assert!(parent.ends_with("clangd"), "{}", parent.display());
            assert!(parent.components().any(|c| c.as_os_str() == "acp-lsp"));
        }
    }

    #[test]
    fn rust_analyzer_target_dir_goes_to_the_cache_unless_the_user_chose() {
        let mut ra = ServerConfig::new(
            "rust-analyzer",
            "rust-analyzer",
            &[],
            &["rust"],
            &["rs"],
            &[],
        );
        ra.settings = json!({ "rust-analyzer": { "checkOnSave": false } });
        let program = Path::new("/bin/rust-analyzer");
        let target = Path::new("/home/u/.cache/acp-lsp/rust-analyzer/crate-0123/target");
        let configured = configure_with(&ra, program, target, false);
        let Some(configured) = configured else {
            panic!("rust-analyzer's targetDir not set");
        };
        assert_eq!(
            configured.settings["rust-analyzer"]["cargo"]["targetDir"],
            json!(target.display().to_string())
        );
        assert_eq!(configured.settings["rust-analyzer"]["checkOnSave"], false);
        assert_eq!(
            configured
                .initialization_options
                .as_ref()
                .map(|o| &o["cargo"]["targetDir"]),
            Some(&configured.settings["rust-analyzer"]["cargo"]["targetDir"])
        );

        // A stand-in under the name (the replay's bridge) is left alone.
        let bridge = Path::new("/work/target/debug/acp-lsp");
        assert!(configure_with(&ra, bridge, target, false).is_none());
        // The user's choices win: CARGO_TARGET_DIR inherited or in `env`,
        // or `cargo.targetDir` in the settings.
        assert!(configure_with(&ra, program, target, true).is_none());
        let mut with_env = ra.clone();
        with_env
            .env
            .insert("CARGO_TARGET_DIR".into(), "/ws/out".into());
        assert!(configure_with(&with_env, program, target, false).is_none());
        ra.settings["rust-analyzer"]["cargo"] = json!({ "targetDir": true });
        assert!(configure_with(&ra, program, target, false).is_none());
        let pyright = ServerConfig::new(
            "pyright",
            "pyright-langserver",
            &[],
            &["python"],
            &["py"],
            &[],
        );
        assert!(configure_with(
            &pyright,
            Path::new("/bin/pyright-langserver"),
            target,
            false
        )
        .is_none());
    }

    #[test]
    fn private_dirs_are_0700_and_pruned_when_their_root_is_gone() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("proj");
        std::fs::create_dir(&root).expect("root");
        let dir = tmp.path().join("cache/kind/proj-1");
        ensure_private_dir(&dir, &root).expect("create");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dir).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        assert_eq!(
            std::fs::read(dir.join(ROOT_FILE)).ok(),
            Some(root.as_os_str().as_encoded_bytes().to_vec())
        );
        let other_root = tmp.path().join("gone");
        std::fs::create_dir(&other_root).expect("other root");
        let other = tmp.path().join("cache/kind/gone-2");
        ensure_private_dir(&other, &other_root).expect("create");
        std::fs::remove_dir(&other_root).expect("remove the other root");
        prune_dir(&tmp.path().join("cache/kind"));
        assert!(dir.is_dir(), "a live root's cache is kept");
        assert!(!other.exists(), "a deleted root's cache is removed");
    }
}
