//! Reading the sources: which files are modules, code with comments and
//! literals blanked, tokens, test modules left out.

use super::ModPath;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every source file under `src` with its module path (`lib.rs` is `[]`),
/// test module files included; `main.rs` and `main/` only with `binary`.
pub(crate) fn source_files(src: &Path, binary: bool) -> BTreeMap<ModPath, PathBuf> {
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
        let is_binary = parts[0] == "main.rs" || parts[0] == "main";
        if is_binary && !binary {
            continue;
        }
        let last = parts.pop().expect("a file name");
        match last.as_str() {
            "lib.rs" if parts.is_empty() => {}
            "mod.rs" => {}
            name => parts.push(name.trim_end_matches(".rs").to_string()),
        }
        if is_binary {
            // Its own crate: kept apart from the library's module paths.
            parts.insert(0, "<binary>".into());
        }
        out.insert(parts, file);
    }
    out
}

/// The module files that are test modules (`#[cfg(test)] mod NAME;` in
/// their parent), and everything under them.
pub(crate) fn test_files(files: &BTreeMap<ModPath, PathBuf>) -> BTreeSet<ModPath> {
    let tests: BTreeSet<ModPath> = files
        .iter()
        .flat_map(|(module, file)| {
            test_module_files(&code_only(&read(file)))
                .into_iter()
                .map(|name| {
                    let mut child = module.clone();
                    child.push(name);
                    child
                })
                .collect::<Vec<_>>()
        })
        .collect();
    files
        .keys()
        .filter(|m| tests.iter().any(|t| m.starts_with(t)))
        .cloned()
        .collect()
}

/// Every library source file with its module path, test module files left
/// out like inline test modules.
pub(crate) fn library_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut files = source_files(src, false);
    for test in test_files(&files) {
        files.remove(&test);
    }
    files
}

/// Every product source file (the library and the binary), as code with
/// test modules blanked, by path.
pub(crate) fn product_code(src: &Path) -> Vec<(PathBuf, String)> {
    let mut files = source_files(src, true);
    for test in test_files(&files) {
        files.remove(&test);
    }
    files
        .into_values()
        .map(|file| {
            let code = without_test_modules(&code_only(&read(&file)));
            (file, code)
        })
        .collect()
}

pub(crate) fn read(file: &Path) -> String {
    std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The names of the out-of-line modules declared `#[cfg(test)] mod NAME;`.
pub(crate) fn test_module_files(code: &str) -> Vec<String> {
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
pub(crate) fn code_only(text: &str) -> String {
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
pub(crate) fn raw_string_prefix_starts(chars: &[char], i: usize) -> bool {
    let before = |k: usize| i.checked_sub(k).map(|at| chars[at]);
    match before(1) {
        None => true,
        Some('b' | 'c') => !before(2).is_some_and(is_ident),
        Some(c) => !is_ident(c),
    }
}

pub(crate) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The code's tokens: identifiers, `::`, `=>` and single punctuation
/// characters, each with its offset (in chars) in `code`.
pub(crate) fn spans(code: &str) -> Vec<(String, usize)> {
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
            out.push((chars[start..i].iter().collect(), start));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(("::".into(), i));
            i += 2;
        } else if c == '=' && chars.get(i + 1) == Some(&'>') {
            out.push(("=>".into(), i));
            i += 2;
        } else {
            out.push((c.to_string(), i));
            i += 1;
        }
    }
    out
}

/// The code's tokens (see [`spans`]).
pub(crate) fn tokens(code: &str) -> Vec<String> {
    spans(code).into_iter().map(|(t, _)| t).collect()
}

/// `code` (already [`code_only`]) with the bodies of inline
/// `#[cfg(test)] mod NAME { … }` modules blanked.
pub(crate) fn without_test_modules(code: &str) -> String {
    let mut chars: Vec<char> = code.chars().collect();
    let spans = spans(code);
    let test_attr = ["#", "[", "cfg", "(", "test", ")", "]", "mod"];
    let mut i = 0;
    while i + test_attr.len() + 1 < spans.len() {
        let opens = spans[i..i + test_attr.len()]
            .iter()
            .zip(test_attr)
            .all(|((t, _), a)| t == a)
            && spans[i + test_attr.len() + 1].0 == "{";
        if !opens {
            i += 1;
            continue;
        }
        let open = i + test_attr.len() + 1;
        let close = matching(&spans, open).unwrap_or(spans.len() - 1);
        for c in &mut chars[spans[i].1..=spans[close].1] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = close + 1;
    }
    chars.into_iter().collect()
}

/// The index of the bracket closing the one at `open` (`(`, `[` or `{`).
pub(crate) fn matching(spans: &[(String, usize)], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, (token, _)) in spans.iter().enumerate().skip(open) {
        match token.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}
