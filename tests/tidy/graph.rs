//! The import graph: `use` trees and inline paths resolved to the files
//! that define what they name (imports and re-exports followed), and the
//! circles in it.

use super::source::{code_only, is_ident, library_files, read, tokens};
use super::{show, ModPath};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A path a `use` tree names, and the name it binds (`as` renames, `self`
/// binds its module's name, `*` binds every name its module has).
pub(crate) struct UsePath {
    path: Vec<String>,
    name: String,
}

/// Expands a `use` tree starting at `tokens[*at]` into full paths, leaving
/// `*at` after the tree.
pub(crate) fn use_tree(
    tokens: &[String],
    at: &mut usize,
    prefix: &[String],
    out: &mut Vec<UsePath>,
) {
    let mut path = prefix.to_vec();
    let mut name = None;
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
                name = tokens.get(*at + 1).cloned();
                *at += 2;
                break;
            }
            "*" => {
                name = Some("*".into());
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
    let name = name.or_else(|| path.last().cloned()).unwrap_or_default();
    out.push(UsePath { path, name });
}

/// What one file names: each path through `crate::`, `super::`, `self::`
/// or a `use`, with the module it is written in (an inline module's path
/// included), and each name a `use` binds in a module, outside
/// `#[cfg(test)]` modules.
#[derive(Default)]
pub(crate) struct Named {
    pub(crate) paths: Vec<(ModPath, Vec<String>)>,
    /// (module, bound name, the path it stands for).
    pub(crate) imports: Vec<(ModPath, String, Vec<String>)>,
}

pub(crate) fn named_paths(module: &ModPath, code: &str) -> Named {
    let tokens = tokens(code);
    let mut out = Named::default();
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
                    for UsePath { path, name } in paths {
                        out.imports.push((m.clone(), name, path.clone()));
                        out.paths.push((m.clone(), path));
                    }
                }
                i = at;
                continue;
            }
            "crate" | "super" | "self" | "acp_lsp_core"
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
                    out.paths.push((here(), path));
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

/// The names a file defines (items and inline modules), for `*` imports.
pub(crate) fn defined_names(code: &str) -> BTreeSet<String> {
    let tokens = tokens(code);
    let keywords = [
        "fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union",
    ];
    tokens
        .windows(2)
        .filter(|w| keywords.contains(&w[0].as_str()) && w[1].chars().all(is_ident))
        .map(|w| w[1].clone())
        .collect()
}

/// What a path names, from the module it is written in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Target {
    /// A path into this crate's modules (the file is found later).
    Ours(ModPath),
    /// A top-level module of the core, from the proxy (`acp_lsp_core::gate`).
    Core(String),
}

/// Resolves a path written in `written_in`; `None` for paths that are not
/// ours (`std::…`, another crate's). `is_module` says whether a module path
/// exists (a bare first segment naming a child module is relative).
pub(crate) fn resolve(
    written_in: &ModPath,
    path: &[String],
    is_module: &dyn Fn(&[String]) -> bool,
) -> Option<Target> {
    let mut base = written_in.clone();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("acp_lsp_core") => return rest.get(1).map(|m| Target::Core(m.clone())),
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
        Some(first) => {
            let mut child = written_in.clone();
            child.push(first.to_string());
            if !is_module(&child) {
                return None;
            }
        }
        None => return None,
    }
    base.extend(rest.iter().cloned());
    Some(Target::Ours(base))
}

/// One crate's modules as tidy reads them: its files, and what each
/// module imports (name → what it stands for).
pub(crate) struct Crate {
    files: BTreeMap<ModPath, PathBuf>,
    /// Every module: the files and their inline modules.
    modules: BTreeSet<ModPath>,
    imports: BTreeMap<ModPath, BTreeMap<String, Target>>,
    /// Modules' `*` imports: module → the modules it glob-imports.
    globs: BTreeMap<ModPath, Vec<ModPath>>,
    defined: BTreeMap<ModPath, BTreeSet<String>>,
    named: BTreeMap<ModPath, Named>,
}

impl Crate {
    pub(crate) fn read(src: &Path) -> Crate {
        let files = library_files(src);
        Crate::from_texts(
            files
                .iter()
                .map(|(m, f)| (m.clone(), f.clone(), read(f)))
                .collect(),
        )
    }

    /// From (module, file, source text) triples.
    pub(crate) fn from_texts(texts: Vec<(ModPath, PathBuf, String)>) -> Crate {
        let files: BTreeMap<ModPath, PathBuf> = texts
            .iter()
            .map(|(m, f, _)| (m.clone(), f.clone()))
            .collect();
        // Inline modules are modules too (for relative paths).
        let mut modules: BTreeSet<ModPath> = files.keys().cloned().collect();
        let mut named = BTreeMap::new();
        let mut defined = BTreeMap::new();
        for (module, _, text) in &texts {
            let code = code_only(text);
            let found = named_paths(module, &code);
            modules.extend(found.paths.iter().map(|(m, _)| m.clone()));
            defined.insert(module.clone(), defined_names(&code));
            named.insert(module.clone(), found);
        }
        let is_module = |m: &[String]| modules.contains(m);
        let mut imports: BTreeMap<ModPath, BTreeMap<String, Target>> = BTreeMap::new();
        let mut globs: BTreeMap<ModPath, Vec<ModPath>> = BTreeMap::new();
        for found in named.values() {
            for (module, name, path) in &found.imports {
                let Some(target) = resolve(module, path, &is_module) else {
                    continue;
                };
                if name == "*" {
                    if let Target::Ours(of) = target {
                        globs.entry(module.clone()).or_default().push(of);
                    }
                } else {
                    imports
                        .entry(module.clone())
                        .or_default()
                        .insert(name.clone(), target);
                }
            }
        }
        Crate {
            files,
            modules,
            imports,
            globs,
            defined,
            named,
        }
    }

    fn is_module(&self, m: &[String]) -> bool {
        self.modules.contains(m)
    }

    /// The file (or core module) a path leads to: the longest prefix that
    /// is a file, unless the next name is one that file imports, which is
    /// followed to where it is defined.
    fn locate(&self, target: &Target, hops: usize) -> Option<Target> {
        let path = match target {
            Target::Core(_) => return Some(target.clone()),
            Target::Ours(path) => path,
        };
        let mut n = path.len();
        while n > 0 && !self.files.contains_key(&path[..n]) {
            n -= 1;
        }
        let file = path[..n].to_vec();
        // Inline modules of the file, then the name after them.
        if hops < 16 {
            for k in n..path.len() {
                let module = &path[..k];
                let name = &path[k];
                if let Some(imported) = self.imports.get(module).and_then(|i| i.get(name)) {
                    let followed = match imported {
                        Target::Ours(to) => {
                            let mut to = to.clone();
                            to.extend(path[k + 1..].iter().cloned());
                            Target::Ours(to)
                        }
                        core => core.clone(),
                    };
                    return self.locate(&followed, hops + 1);
                }
                let from_glob = self.globs.get(module).into_iter().flatten().find(|of| {
                    self.defined.get(*of).is_some_and(|d| d.contains(name))
                        || self.imports.get(*of).is_some_and(|i| i.contains_key(name))
                });
                if let Some(of) = from_glob {
                    let mut to = of.clone();
                    to.extend(path[k..].iter().cloned());
                    return self.locate(&Target::Ours(to), hops + 1);
                }
                if !self.is_module(&path[..=k]) {
                    break;
                }
            }
        }
        Some(Target::Ours(file))
    }

    /// The file-level dependency graph: file module → the file modules (and
    /// core modules, as one-element paths) it uses.
    pub(crate) fn graph(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        let is_module = |m: &[String]| self.is_module(m);
        for (module, named) in &self.named {
            let targets = edges.entry(module.clone()).or_default();
            for (written_in, path) in &named.paths {
                let Some(target) = resolve(written_in, path, &is_module) else {
                    continue;
                };
                let target = match self.locate(&target, 0) {
                    Some(Target::Ours(file)) => file,
                    Some(Target::Core(core)) => vec![core],
                    None => continue,
                };
                let is_own_child = target.len() > module.len() && target.starts_with(module);
                if target != *module && !target.is_empty() && !is_own_child {
                    targets.insert(target);
                }
            }
        }
        edges
    }
}

/// The graph between the entries (files and subdirectories) of the
/// directory `dir`: a file deeper down stands for the entry it is under;
/// uses of `dir`'s own `mod.rs`, and inside one entry, are not edges here.
pub(crate) fn entries_graph(
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
pub(crate) fn circles(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
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

/// The circles between the entries of every directory of `graph` that
/// `keep` accepts, as "a → b → a".
pub(crate) fn circles_of(
    graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
    keep: &dyn Fn(&[String]) -> bool,
) -> Vec<String> {
    let dirs: BTreeSet<ModPath> = graph
        .keys()
        .flat_map(|m| (0..m.len()).map(|n| m[..n].to_vec()))
        .filter(|dir| keep(dir))
        .collect();
    dirs.iter()
        .flat_map(|dir| circles(&entries_graph(graph, dir)))
        .map(|circle| {
            let mut names: Vec<String> = circle.iter().map(show).collect();
            names.push(names[0].clone());
            names.join(" → ")
        })
        .collect()
}
