//! Tidy: the import rules ARCHITECTURE.md states, checked on the source
//! text (in the manner of rust-analyzer's `tidy` tests), so a new circle or
//! a layer reaching upward fails CI instead of waiting for a reviewer.
//!
//! Each library file of the two crates with library code, `src/` (the
//! proxy; `main.rs` is another crate and reaches the library only through
//! its public API) and `crates/acp-lsp-core/src/` (the core), is read with
//! comments and string literals blanked; every path through `crate::`,
//! `super::` or `self::` (in `use` trees, braces expanded, and inline in
//! code) is resolved to the file of the module it names. Code inside a
//! `#[cfg(test)]` module (inline, or a file of its own such as `foo/tests.rs`)
//! is left out: tests may reach anywhere. Module files
//! (`mod.rs`) naming their own children (re-exports) are not edges back.
//!
//! The rules:
//! - In the core, `jsonrpc` and `sys` use nothing of ours but themselves;
//!   `gate` uses only `jsonrpc` and `sys`. (That the core uses nothing of the
//!   proxy is the crate boundary's: it does not depend on it.)
//! - In the proxy, `sys` uses nothing of ours; `read` and `record` only `sys`.
//! - `lsp` uses no `acp`, `mcp`, `conformance`, `session_facade`, `cli`, `edit`.
//! - `edit` uses no `acp`, `mcp`, `conformance`, `session_facade`, `cli`, `lsp`.
//! - No two files of one directory use each other, directly or round a
//!   longer circle; a subdirectory counts as one file (`lsp/server/` is one
//!   entry of `lsp/`), and a file may use its own directory's `mod.rs`.
//! - No two top-level modules use each other, directly or round a circle.
//! - Only each crate's `sys.rs` names `libc` (every `unsafe` system call in
//!   one place per crate).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path from the crate root (`["lsp", "server"]`).
type ModPath = Vec<String>;

/// Which top-level modules a layer may not use.
enum Forbidden {
    /// Every other one but these (the leaves: a module added later is
    /// forbidden to them too, with no list to keep up).
    AllBut(&'static [&'static str]),
    /// These.
    These(&'static [&'static str]),
}

impl Forbidden {
    fn forbids(&self, module: &str) -> bool {
        match self {
            Forbidden::AllBut(allowed) => !allowed.contains(&module),
            Forbidden::These(forbidden) => forbidden.contains(&module),
        }
    }
}

use Forbidden::{AllBut, These};

/// The core's top-level modules a module of the core may not use.
const CORE_FORBIDDEN: &[(&str, Forbidden)] = &[
    ("jsonrpc", AllBut(&[])),
    ("sys", AllBut(&[])),
    ("gate", AllBut(&["jsonrpc", "sys"])),
];

/// The proxy's top-level modules a module of the proxy may not use, by the
/// ARCHITECTURE's layers (`gate` and `jsonrpc` are the core's, below them all).
const PROXY_FORBIDDEN: &[(&str, Forbidden)] = &[
    ("sys", AllBut(&[])),
    ("read", AllBut(&["sys"])),
    ("record", AllBut(&["sys"])),
    (
        "lsp",
        These(&[
            "acp",
            "cli",
            "conformance",
            "edit",
            "proxy_host",
            "mcp",
            "session_facade",
        ]),
    ),
    (
        "edit",
        These(&[
            "acp",
            "cli",
            "conformance",
            "lsp",
            "mcp",
            "proxy_host",
            "session_facade",
        ]),
    ),
    (
        "daemon",
        These(&[
            "acp",
            "cli",
            "conformance",
            "edit",
            "proxy_host",
            "mcp",
            "session_facade",
        ]),
    ),
];

// ---------------------------------------------------------------------------
// Reading the source
// ---------------------------------------------------------------------------

/// Every library source file with its module path.
fn library_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let mut parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if parts[0] == "main.rs" {
            continue;
        }
        let last = parts.pop().expect("a file name");
        match last.as_str() {
            "lib.rs" if parts.is_empty() => {}
            "mod.rs" => {}
            name => parts.push(name.trim_end_matches(".rs").to_string()),
        }
        out.insert(parts, file);
    }
    // A file that is a test module (`#[cfg(test)] mod tests;` in its
    // parent) is test code: left out like an inline one.
    let tests: Vec<ModPath> = out
        .iter()
        .flat_map(|(module, file)| {
            let text = std::fs::read_to_string(file).expect("source is UTF-8");
            test_module_files(&code_only(&text))
                .into_iter()
                .map(|name| {
                    let mut child = module.clone();
                    child.push(name);
                    child
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for module in tests {
        out.remove(&module);
    }
    out
}

/// The names of the out-of-line modules declared `#[cfg(test)] mod NAME;`.
fn test_module_files(code: &str) -> Vec<String> {
    let tokens = tokens(code);
    let test_attr = ["#", "[", "cfg", "(", "test", ")", "]", "mod"];
    tokens
        .windows(test_attr.len() + 2)
        .filter(|w| {
            w[..test_attr.len()]
                .iter()
                .zip(test_attr)
                .all(|(t, a)| t == a)
        })
        .filter(|w| w[test_attr.len() + 1] == ";")
        .map(|w| w[test_attr.len()].clone())
        .collect()
}

/// The source with comments and the contents of string and char literals
/// replaced by spaces (newlines kept), so only code is scanned.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && raw_string_prefix_starts(&chars, i)
        {
            // A raw string r"…" or r#"…"#, if that is what follows.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('"');
            j += 1;
            let closing: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while j < chars.len() && !chars[j..].starts_with(&closing) {
                out.push(blank(chars[j]));
                j += 1;
            }
            out.push('"');
            i = j + closing.len();
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A char literal (a lifetime has no closing quote).
            out.push('\'');
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether the `r` at `i` begins a raw string literal: nothing of an
/// identifier before it, or only the `b` of a byte string (`br"…"`) or the
/// `c` of a C string (`cr"…"`).
fn raw_string_prefix_starts(chars: &[char], i: usize) -> bool {
    let before = |k: usize| i.checked_sub(k).map(|at| chars[at]);
    match before(1) {
        None => true,
        Some('b' | 'c') => !before(2).is_some_and(is_ident),
        Some(c) => !is_ident(c),
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The code's tokens: identifiers, `::`, and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if is_ident(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// Expands a `use` tree starting at `tokens[*at]` into full paths, leaving
/// `*at` after the tree.
fn use_tree(tokens: &[String], at: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    while *at < tokens.len() {
        let token = tokens[*at].as_str();
        match token {
            "{" => {
                *at += 1;
                loop {
                    use_tree(tokens, at, &path, out);
                    match tokens.get(*at).map(String::as_str) {
                        Some(",") => {
                            *at += 1;
                            if tokens.get(*at).map(String::as_str) == Some("}") {
                                *at += 1;
                                return;
                            }
                        }
                        Some("}") => {
                            *at += 1;
                            return;
                        }
                        _ => return,
                    }
                }
            }
            "::" => *at += 1,
            "as" => {
                *at += 2;
                break;
            }
            "*" => {
                *at += 1;
                break;
            }
            "," | "}" | ";" => break,
            // `a::{self, …}` names `a` itself.
            "self" if !path.is_empty() => *at += 1,
            ident => {
                path.push(ident.to_string());
                *at += 1;
            }
        }
    }
    out.push(path);
}

/// The paths one file names through `crate::`, `super::` or `self::`, each
/// with the module it is written in (an inline module's path included), and
/// whether it is written inside a `#[cfg(test)]` module.
fn named_paths(module: &ModPath, code: &str) -> Vec<(ModPath, Vec<String>)> {
    let tokens = tokens(code);
    let mut out = Vec::new();
    // Inline modules open at a brace depth: (name, depth, is a test module).
    let mut inline: Vec<(String, usize, bool)> = Vec::new();
    let mut depth = 0usize;
    let mut cfg_test_pending = false;
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        let here = || {
            let mut m = module.clone();
            m.extend(inline.iter().map(|(name, _, _)| name.clone()));
            m
        };
        let in_test = inline.iter().any(|(_, _, test)| *test);
        match token {
            "#" if tokens.get(i + 1).map(String::as_str) == Some("[") => {
                let attr: Vec<&str> = tokens[i + 2..]
                    .iter()
                    .take_while(|t| t.as_str() != "]")
                    .map(String::as_str)
                    .collect();
                if attr == ["cfg", "(", "test", ")"] {
                    cfg_test_pending = true;
                }
                i += 2 + attr.len() + 1;
                continue;
            }
            "mod"
                if tokens.get(i + 2).map(String::as_str) == Some("{")
                    && tokens.get(i + 1).is_some_and(|t| t.chars().all(is_ident)) =>
            {
                inline.push((tokens[i + 1].clone(), depth, cfg_test_pending || in_test));
                cfg_test_pending = false;
                depth += 1;
                i += 3;
                continue;
            }
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if inline.last().is_some_and(|(_, d, _)| *d == depth) {
                    inline.pop();
                }
            }
            "use" => {
                let mut at = i + 1;
                let mut paths = Vec::new();
                use_tree(&tokens, &mut at, &[], &mut paths);
                if !in_test {
                    let m = here();
                    out.extend(paths.into_iter().map(|p| (m.clone(), p)));
                }
                i = at;
                continue;
            }
            "crate" | "super" | "self"
                if tokens.get(i + 1).map(String::as_str) == Some("::")
                    && (i == 0 || tokens[i - 1] != "::") =>
            {
                let mut path = vec![token.to_string()];
                let mut at = i + 1;
                while tokens.get(at).map(String::as_str) == Some("::")
                    && tokens.get(at + 1).is_some_and(|t| t.chars().all(is_ident))
                {
                    path.push(tokens[at + 1].clone());
                    at += 2;
                }
                if !in_test {
                    out.push((here(), path));
                }
                i = at;
                continue;
            }
            ";" | "fn" | "struct" | "enum" | "impl" | "const" | "static" | "type" | "trait" => {
                cfg_test_pending = false
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The module a path names, from the module it is written in; `None` for
/// paths that are not ours (`std::…`, a crate's).
fn resolve(written_in: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut base = written_in.clone();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("super") | Some("self") => {
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        base.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file-level dependency graph of the library: file module → the file
/// modules it uses.
fn graph(src: &Path) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let files = library_files(src);
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (module, file) in &files {
        let text = std::fs::read_to_string(file).expect("source is UTF-8");
        let targets = edges.entry(module.clone()).or_default();
        for (written_in, path) in named_paths(module, &code_only(&text)) {
            let Some(mut target) = resolve(&written_in, &path) else {
                continue;
            };
            // The longest prefix that is a file: items live in their file.
            while !target.is_empty() && !files.contains_key(&target) {
                target.pop();
            }
            let is_own_child = target.len() > module.len() && target.starts_with(module);
            if target != *module && !target.is_empty() && !is_own_child {
                targets.insert(target);
            }
        }
    }
    edges
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn core_src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/acp-lsp-core/src")
}

/// Each crate with library code, with its layer rules.
fn crates() -> [(PathBuf, &'static [(&'static str, Forbidden)]); 2] {
    [
        (src_dir(), PROXY_FORBIDDEN),
        (core_src_dir(), CORE_FORBIDDEN),
    ]
}

fn show(module: &ModPath) -> String {
    module.join("::")
}

// ---------------------------------------------------------------------------
// The rules
// ---------------------------------------------------------------------------

#[test]
fn layers_use_only_what_is_below_them() {
    let mut broken = Vec::new();
    for (src, rules) in crates() {
        let graph = graph(&src);
        for (from, targets) in &graph {
            let Some(top) = from.first() else { continue };
            let Some((_, forbidden)) = rules.iter().find(|(layer, _)| layer == top) else {
                continue;
            };
            for to in targets {
                if to[0] != *top && forbidden.forbids(&to[0]) {
                    broken.push(format!("{} uses {}", show(from), show(to)));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports against ARCHITECTURE's layers:\n  {}",
        broken.join("\n  ")
    );
}

/// The graph between the entries (files and subdirectories) of the
/// directory `dir`: a file deeper down stands for the entry it is under;
/// uses of `dir`'s own `mod.rs`, and inside one entry, are not edges here.
fn entries_graph(
    graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
    dir: &[String],
) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let entry =
        |m: &ModPath| (m.len() > dir.len() && m.starts_with(dir)).then(|| m[..=dir.len()].to_vec());
    let mut out: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, targets) in graph {
        let Some(from) = entry(from) else { continue };
        for to in targets.iter().filter_map(&entry) {
            if to != from {
                out.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    out
}

/// Circles in a graph (each listed once, from its smallest node).
fn circles(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    let mut found = BTreeSet::new();
    for start in graph.keys() {
        // Depth-first search for paths back to `start` through nodes after it.
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                if next == start {
                    found.insert(path.clone());
                } else if next > start && !path.contains(next) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    found.into_iter().collect()
}

/// The circles between the entries of every directory that `keep` accepts.
fn circles_in(keep: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut found = Vec::new();
    for (src, _) in crates() {
        let graph = graph(&src);
        let dirs: BTreeSet<ModPath> = graph
            .keys()
            .flat_map(|m| (0..m.len()).map(|n| m[..n].to_vec()))
            .filter(|dir| keep(dir))
            .collect();
        found.extend(
            dirs.iter()
                .flat_map(|dir| circles(&entries_graph(&graph, dir)))
                .map(|circle| {
                    let mut names: Vec<String> = circle.iter().map(show).collect();
                    names.push(names[0].clone());
                    names.join(" → ")
                }),
        );
    }
    found
}

const BREAK_IT: &str = "break the circle: move what both need into its own file, or down a layer";

#[test]
fn no_circles_between_the_files_of_a_directory() {
    let found = circles_in(|dir| !dir.is_empty());
    assert!(
        found.is_empty(),
        "files that use each other ({BREAK_IT}):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn no_circles_between_top_level_modules() {
    let found = circles_in(|dir| dir.is_empty());
    assert!(
        found.is_empty(),
        "top-level modules that use each other ({BREAK_IT}):\n  {}",
        found.join("\n  ")
    );
}

/// Every `libc` and `windows_sys` call is in its crate's `sys.rs` (or the
/// per-OS files under `sys/`), behind a safe wrapper with its `// SAFETY:`
/// reasoning; the rest of each library names neither.
#[test]
fn libc_only_in_sys() {
    // Every file of the libraries and the `acp-lsp` binary, test modules
    // included (the fake server is test support, a crate of its own).
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    let mut sys_files = Vec::new();
    for (src, _) in crates() {
        walk(&src, &mut files);
        sys_files.push(src.join("sys.rs"));
        sys_files.push(src.join("sys"));
    }
    assert!(files.len() > 20, "the walk finds the sources: {files:?}");
    let found: Vec<String> = files
        .into_iter()
        .filter(|file| !sys_files.iter().any(|sys| file.starts_with(sys)))
        .filter(|file| {
            let text = std::fs::read_to_string(file).expect("source is UTF-8");
            let code = code_only(&text);
            code.contains("libc::") || code.contains("windows_sys::")
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        found.is_empty(),
        "libc or windows_sys named outside a crate's sys (add a safe wrapper there):\n  {}",
        found.join("\n  ")
    );
}

/// The checker itself: it sees the edges it must see.
#[test]
fn the_checker_reads_use_trees_inline_paths_and_test_modules() {
    let code = code_only(
        r##"
use super::config::ServerConfig;
use crate::{gate::{self, GateError}, jsonrpc::*};
pub(crate) use super::watch::{
    FileChange as Change,
};
// use crate::mcp::Hidden;
const S: &str = "crate::acp::InAString";
const R: &str = r#"use crate::cli::InARawString;"#;
const B: &[u8] = br#"{"use crate::cli::InAByteRawString": "\"}"#;
fn f<'a>(x: &'a str) -> char { let _ = crate::record::Recorder::new; 'x' }
#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::OnlyInTests;
}
mod inner {
    use super::super::documents::DocumentTable;
}
"##,
    );
    let module: ModPath = vec!["lsp".into(), "server".into()];
    let named: BTreeSet<ModPath> = named_paths(&module, &code)
        .iter()
        .filter_map(|(written_in, path)| resolve(written_in, path))
        .collect();
    let expect = |path: &str| -> ModPath { path.split("::").map(String::from).collect() };
    for path in [
        "lsp::config::ServerConfig",
        "gate",
        "gate::GateError",
        "jsonrpc",
        "lsp::watch::FileChange",
        "record::Recorder::new",
        "lsp::documents::DocumentTable",
    ] {
        assert!(
            named.contains(&expect(path)),
            "{path} not seen in {named:?}"
        );
    }
    for module in ["mcp", "acp", "cli", "conformance"] {
        assert!(
            !named.iter().any(|p| p[0] == module),
            "{module} seen in a comment, a string or a test module: {named:?}"
        );
    }
    assert_eq!(
        test_module_files(&code_only(
            "#[cfg(test)]\nmod tests;\nmod real;\n#[cfg(test)]\nmod inline {}"
        )),
        ["tests"],
        "an out-of-line test module is seen, and only that"
    );
}
