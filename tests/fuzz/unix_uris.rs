//! The Unix side of the URI fuzzing: a tree with symlinks in and out of
//! the root, adversarial `file:` URIs around it, and the oracle that says
//! whether an accepted URI names a place inside the root.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use proptest::prelude::*;

/// A tree under cargo's per-target temporary directory, made once per test
/// process (idempotently): `root` (the session root) with `sub/file.rs`,
/// links inside (`link_in` → `sub`) and out (`link_out` → `outside`,
/// `sub/up.rs` → `../../outside/secret.rs`); a sibling `root-evil` and an
/// `outside` with `secret.rs`.
pub struct Tree {
    pub base: PathBuf,
    pub root: PathBuf,
}

pub fn tree() -> &'static Tree {
    static TREE: std::sync::OnceLock<Tree> = std::sync::OnceLock::new();
    TREE.get_or_init(|| {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-tree");
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).expect("mkdir");
        std::fs::write(root.join("sub/file.rs"), "fn main() {}\n").expect("write");
        std::fs::create_dir_all(base.join("outside")).expect("mkdir");
        std::fs::write(base.join("outside/secret.rs"), "secret\n").expect("write");
        std::fs::create_dir_all(base.join("root-evil")).expect("mkdir");
        for (target, link) in [
            (base.join("outside"), root.join("link_out")),
            (root.join("sub"), root.join("link_in")),
            (
                PathBuf::from("../../outside/secret.rs"),
                root.join("sub/up.rs"),
            ),
        ] {
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(target, link).expect("link");
            }
        }
        let base = base.canonicalize().expect("canonical");
        Tree {
            root: base.join("root"),
            base,
        }
    })
}

/// Adversarial file URIs around `tree`: odd prefixes, hosts, encodings,
/// dot segments, symlinks, separators, NULs, query and fragment.
pub fn uri(tree: &'static Tree) -> impl Strategy<Value = String> {
    let root = tree.root.display().to_string();
    let base = tree.base.display().to_string();
    let starts = prop::sample::select(vec![
        root.clone(),
        root.clone(),
        root.clone(),
        base.clone(),
        format!("{base}/root-evil"),
        "/etc".to_string(),
        String::new(),
        root.replace('/', "//"),
        root.replace("root", "r%6Fot"),
        root.replace('/', "%2F"),
    ]);
    let prefixes = prop::sample::select(vec![
        "file://",
        "file://",
        "file://",
        "file:",
        "FILE://",
        "File://",
        "file://localhost",
        "file://LOCALHOST",
        "file://evil.example",
        " file://",
        "\u{1}file://",
        "file:/",
        "file:////",
        "fIle:",
    ]);
    let parts = prop::collection::vec(
        prop::sample::select(vec![
            "sub",
            "file.rs",
            "..",
            ".",
            "%2e%2e",
            "%2E%2e",
            ".%2e",
            "%2e",
            "link_out",
            "link_in",
            "up.rs",
            "secret.rs",
            "root",
            "root-evil",
            "outside",
            "new.rs",
            "",
            "%2f",
            "%5C",
            "..\\..",
            "%00",
            "a%20b",
            "%7e",
            "é",
            "%C3%A9",
            "%252e%252e",
            "..%2f..",
        ]),
        0..7,
    );
    let tails = prop::sample::select(vec!["", "", "", "?x=..", "#..", "/", "%"]);
    (prefixes, starts, parts, tails).prop_map(|(prefix, start, parts, tail)| {
        let mut text = format!("{prefix}{start}");
        for part in parts {
            text.push('/');
            text.push_str(part);
        }
        text.push_str(tail);
        text
    })
}

/// The oracle: whether a URI the gate accepted really names a place inside
/// `root`, under both readings a server may make of it. Written from the
/// RFC (scheme, optional empty/`localhost` authority, percent-decoded path)
/// with no code shared with `gate::confine`.
pub fn inside(uri: &str, root: &Path) -> Result<(), String> {
    let text = uri.trim_start_matches(|c: char| c.is_whitespace() || c.is_control());
    let rest = text
        .get(..5)
        .filter(|s| s.eq_ignore_ascii_case("file:"))
        .map(|_| &text[5..])
        .ok_or("not a file URI")?;
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            let host = &after[..end];
            if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                return Err(format!("host {host:?} accepted"));
            }
            &after[end..]
        }
        None => rest,
    };
    let path = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    if decoded.contains(&0) {
        return Err("a NUL accepted".into());
    }
    let raw = PathBuf::from(OsString::from_vec(decoded));
    if !raw.is_absolute() {
        return Err("a relative path accepted".into());
    }
    // WHATWG reading: dot segments removed first, then the OS resolves links.
    let lexical = resolve_links(&normalize(&raw));
    // RFC 3986 reading as open() sees it: `..` after a link is the link
    // target's parent.
    let physical = resolve_links(&raw);
    for (name, resolved) in [("lexical", lexical), ("physical", physical)] {
        if !resolved.starts_with(root) {
            return Err(format!("{name} reading {} is outside", resolved.display()));
        }
    }
    Ok(())
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            _ => {}
        }
    }
    out
}

/// Resolves `path` as the kernel would: the longest prefix that exists is
/// canonicalized (links followed, `..` physical), the rest appended with
/// `..` taken lexically.
fn resolve_links(path: &Path) -> PathBuf {
    let components: Vec<Component> = path.components().collect();
    for cut in (1..=components.len()).rev() {
        let prefix: PathBuf = components[..cut].iter().collect();
        if let Ok(real) = prefix.canonicalize() {
            let rest: PathBuf = components[cut..].iter().collect();
            return normalize(&real.join(rest));
        }
    }
    normalize(path)
}

#[test]
fn the_oracle_refuses_what_it_should() {
    let tree = tree();
    let root = tree.root.display().to_string();
    assert!(inside(&format!("file://{root}/sub/file.rs"), &tree.root).is_ok());
    for bad in [
        format!("file://{root}/link_out/secret.rs"),
        format!("file://{root}/link_in/../../outside"),
        format!("file://{root}/../root-evil"),
        format!("file://{root}-evil"),
        format!("file://{root}/sub/up.rs"),
        format!("file://{root}/link_in/up.rs"),
        format!("file://evil{root}"),
        "file:///etc/passwd".to_string(),
    ] {
        assert!(inside(&bad, &tree.root).is_err(), "{bad}");
    }
}

/// `file://` and the path of `relative` under `root`.
pub fn file_uri_in(root: &Path, relative: &str) -> String {
    format!("file://{}/{relative}", root.display())
}
