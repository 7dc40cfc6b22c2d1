//! Answering LSP requests from one index, in the shapes a live server gives
//! (`Location[]`, `Hover`, `DocumentSymbol[]`, `SymbolInformation[]`), with
//! positions in UTF-16 as the entry advertises.
//!
//! Only what the index knows to be true is answered: the requested
//! document, and the documents defining the symbol asked about, must be
//! unchanged since indexing (`scip::verify`), or the request is declined
//! (the caller asks the live server, or says why not). A result's
//! locations are given for unchanged documents only; the others are listed
//! as not covered, for the caller to fill from the live server.
//! Blocking: checking a document may read it.

use super::index::{Encoding, Index, Pos, Span};
use super::verify::{Checked, Truth};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most `workspace/symbol` results (rust-analyzer's default limit).
pub const MAX_WORKSPACE_SYMBOLS: usize = 128;

/// The methods an index answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    Definition,
    References { include_declaration: bool },
    Hover,
    Implementation,
    DocumentSymbol,
    WorkspaceSymbol { query: String },
}

pub const DEFINITION: &str = "textDocument/definition";
pub const REFERENCES: &str = "textDocument/references";
pub const HOVER: &str = "textDocument/hover";
pub const IMPLEMENTATION: &str = "textDocument/implementation";
pub const DOCUMENT_SYMBOL: &str = "textDocument/documentSymbol";
pub const WORKSPACE_SYMBOL: &str = "workspace/symbol";

impl Method {
    /// The method of an LSP request and its params, if an index answers it.
    pub fn parse(method: &str, params: &Value) -> Option<Method> {
        Some(match method {
            DEFINITION => Method::Definition,
            REFERENCES => Method::References {
                include_declaration: params
                    .pointer("/context/includeDeclaration")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            HOVER => Method::Hover,
            IMPLEMENTATION => Method::Implementation,
            DOCUMENT_SYMBOL => Method::DocumentSymbol,
            WORKSPACE_SYMBOL => Method::WorkspaceSymbol {
                query: params
                    .get("query")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            },
            _ => return None,
        })
    }
}

/// An answer from the index.
#[derive(Debug)]
pub struct Answer {
    pub result: Value,
    /// URIs with results the index could not give (changed since indexing,
    /// no hash, not readable), and why.
    pub uncovered: BTreeMap<String, &'static str>,
    /// URIs the result covers from the index (checked unchanged).
    pub answered: Vec<String>,
}

/// Why the index does not answer at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decline {
    /// Machine-readable: `document_changed`, `not_indexed`, `definition_changed`,
    /// `merged_declarations`, `no_symbol`, `no_documentation`, `defined_outside`,
    /// `invalid_params`.
    pub reason: &'static str,
    pub uri: Option<String>,
    pub message: String,
}

/// One request being answered: the index, where its files are, and what was
/// checked so far.
pub struct Answering<'a> {
    index: &'a Index,
    truth: &'a Truth,
    allowed: &'a dyn Fn(&Path) -> bool,
    checked: HashMap<u32, Arc<Checked>>,
}

impl<'a> Answering<'a> {
    pub fn new(index: &'a Index, truth: &'a Truth, allowed: &'a dyn Fn(&Path) -> bool) -> Self {
        Answering {
            index,
            truth,
            allowed,
            checked: HashMap::new(),
        }
    }

    fn check(&mut self, document: u32) -> Arc<Checked> {
        if let Some(c) = self.checked.get(&document) {
            return Arc::clone(c);
        }
        let c = self.truth.check(self.index, document, self.allowed);
        self.checked.insert(document, Arc::clone(&c));
        c
    }

    fn uri(&self, document: u32) -> String {
        file_uri(&self.truth.path_of(self.index, document))
    }

    /// A span of `document` in UTF-16.
    fn range(&mut self, document: u32, span: Span) -> Value {
        let encoding = self.index.documents[document as usize].encoding;
        let checked = self.check(document);
        let at = |p: Pos| json!({"line": p.line, "character": checked.convert(p.line, p.character, encoding, Encoding::Utf16)});
        json!({"start": at(span.start), "end": at(span.end)})
    }

    fn location(&mut self, occurrence: u32) -> Value {
        let document = self.index.document_of(occurrence);
        let span = self.index.occurrence(occurrence).span;
        json!({"uri": self.uri(document), "range": self.range(document, span)})
    }

    /// Answers `method`.
    pub fn answer(&mut self, method: &Method, params: &Value) -> Result<Answer, Decline> {
        match method {
            Method::DocumentSymbol => {
                let document = self.requested_document(params)?;
                Ok(self.document_symbols(document))
            }
            Method::WorkspaceSymbol { query } => Ok(self.workspace_symbols(query)),
            _ => {
                let (document, occurrence) = self.at_position(params)?;
                let symbol = self.index.occurrence(occurrence).symbol;
                self.definitions_unchanged(symbol)?;
                self.declarations_told_apart(symbol)?;
                match method {
                    Method::Definition => self.definition(symbol),
                    Method::References {
                        include_declaration,
                    } => Ok(self.references(symbol, *include_declaration)),
                    Method::Hover => self.hover(document, occurrence, symbol),
                    Method::Implementation => Ok(self.implementations(symbol)),
                    Method::DocumentSymbol | Method::WorkspaceSymbol { .. } => {
                        unreachable!("BUG: answered above")
                    }
                }
            }
        }
    }

    /// The document a request names, checked unchanged.
    fn requested_document(&mut self, params: &Value) -> Result<u32, Decline> {
        let uri = params
            .pointer("/textDocument/uri")
            .and_then(Value::as_str)
            .ok_or_else(|| Decline {
                reason: "invalid_params",
                uri: None,
                message: "params have no textDocument.uri".into(),
            })?;
        let declined = |reason: &'static str, message: String| Decline {
            reason,
            uri: Some(uri.to_string()),
            message,
        };
        let relative = relative_path(self.truth.root(), uri).ok_or_else(|| {
            declined(
                "not_indexed",
                format!("{uri} is not in the indexed project"),
            )
        })?;
        let document = self.index.document(&relative).ok_or_else(|| {
            declined(
                "not_indexed",
                format!("{uri} is not in the index (a file added since?)"),
            )
        })?;
        let checked = self.check(document);
        if !checked.verdict.is_unchanged() {
            return Err(declined(
                "document_changed",
                format!(
                    "{uri} cannot be answered from the index: {}",
                    verdict_words(checked.verdict.reason())
                ),
            ));
        }
        Ok(document)
    }

    /// The requested document and the occurrence at the requested position.
    fn at_position(&mut self, params: &Value) -> Result<(u32, u32), Decline> {
        let document = self.requested_document(params)?;
        let number = |key: &str| {
            params
                .pointer(&format!("/position/{key}"))
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
        };
        let (Some(line), Some(character)) = (number("line"), number("character")) else {
            return Err(Decline {
                reason: "invalid_params",
                uri: None,
                message: "params have no position".into(),
            });
        };
        let encoding = self.index.documents[document as usize].encoding;
        let checked = self.check(document);
        let character = checked.convert(line, character, Encoding::Utf16, encoding);
        let occurrence = self
            .index
            .occurrence_at(document, Pos { line, character })
            .ok_or_else(|| Decline {
                reason: "no_symbol",
                uri: Some(self.uri(document)),
                message: format!(
                    "the index has no symbol at {}:{}:{}",
                    self.uri(document),
                    line + 1,
                    character + 1
                ),
            })?;
        Ok((document, occurrence))
    }

    /// Declines when a document defining `symbol` changed since indexing:
    /// what the symbol is may have changed with it.
    fn definitions_unchanged(&mut self, symbol: u32) -> Result<(), Decline> {
        let documents: Vec<u32> = self
            .index
            .definitions_of(symbol)
            .map(|o| self.index.document_of(o))
            .collect();
        for document in documents {
            let checked = self.check(document);
            if !checked.verdict.is_unchanged() {
                let uri = self.uri(document);
                return Err(Decline {
                    reason: "definition_changed",
                    message: format!(
                        "{} is defined in {uri}, which cannot be answered from the index: {}",
                        self.index.short_name(symbol),
                        verdict_words(checked.verdict.reason())
                    ),
                    uri: Some(uri),
                });
            }
        }
        Ok(())
    }

    /// Declines a parameter or type parameter the index defines more than
    /// once: scip-typescript and scip-python give every overload signature
    /// of a function the same parameter symbols (`original().(value)`), so
    /// the index would merge what the live server keeps apart (each
    /// signature's `value` has its own references). A function's own
    /// overloads are one symbol to the live servers too, and stay answered.
    fn declarations_told_apart(&self, symbol: u32) -> Result<(), Decline> {
        let definitions = self.index.definitions_of(symbol).count();
        if definitions > 1 && super::index::is_parameter(self.index.symbol_name(symbol)) {
            return Err(Decline {
                reason: "merged_declarations",
                uri: None,
                message: format!(
                    "the index records {definitions} declarations of {} as one symbol \
                     (overload signatures); only the live server tells them apart",
                    self.index.short_name(symbol)
                ),
            });
        }
        Ok(())
    }

    /// Locations of `occurrences`, for unchanged documents; the rest
    /// uncovered. With `names_only`, occurrences that are not names
    /// (operators, module keywords, whole-file ranges) are left out.
    fn locations(&mut self, occurrences: &[u32], names_only: bool) -> Answer {
        let mut result = Vec::new();
        let mut uncovered = BTreeMap::new();
        let mut answered = Vec::new();
        let mut last_document = None;
        for &occurrence in occurrences {
            let document = self.index.document_of(occurrence);
            let checked = self.check(document);
            if !checked.verdict.is_unchanged() {
                uncovered.insert(self.uri(document), checked.verdict.reason());
                continue;
            }
            if last_document != Some(document) {
                answered.push(self.uri(document));
                last_document = Some(document);
            }
            let nth = occurrence - self.index.occurrences_in(document).start;
            if names_only && !checked.is_name(nth) {
                continue;
            }
            result.push(self.location(occurrence));
        }
        answered.dedup();
        Answer {
            result: Value::Array(result),
            uncovered,
            answered,
        }
    }

    fn definition(&mut self, symbol: u32) -> Result<Answer, Decline> {
        let definitions: Vec<u32> = self.index.definitions_of(symbol).collect();
        if definitions.is_empty() {
            return Err(Decline {
                reason: "defined_outside",
                uri: None,
                message: format!(
                    "{} is defined outside the index ({})",
                    self.index.short_name(symbol),
                    self.index.symbol_name(symbol)
                ),
            });
        }
        Ok(self.locations(&definitions, false))
    }

    fn references(&mut self, symbol: u32, include_declaration: bool) -> Answer {
        let occurrences: Vec<u32> = self
            .index
            .occurrences_of(symbol)
            .iter()
            .copied()
            .filter(|&o| include_declaration || !self.index.occurrence(o).is_definition())
            .collect();
        self.locations(&occurrences, true)
    }

    fn implementations(&mut self, symbol: u32) -> Answer {
        let implementors: Vec<u32> = self.index.implementations_of(symbol).collect();
        let mut definitions: Vec<u32> = implementors
            .iter()
            .flat_map(|&s| self.index.definitions_of(s).collect::<Vec<_>>())
            .collect();
        definitions.sort_unstable();
        definitions.dedup();
        self.locations(&definitions, true)
    }

    fn hover(&mut self, document: u32, occurrence: u32, symbol: u32) -> Result<Answer, Decline> {
        let documentation = self
            .index
            .facts(symbol)
            .map(|f| f.documentation.to_string())
            .filter(|d| !d.is_empty())
            .ok_or_else(|| Decline {
                reason: "no_documentation",
                uri: Some(self.uri(document)),
                message: format!(
                    "the index has no documentation for {}",
                    self.index.short_name(symbol)
                ),
            })?;
        let span = self.index.occurrence(occurrence).span;
        let range = self.range(document, span);
        Ok(Answer {
            result: json!({"contents": {"kind": "markdown", "value": documentation}, "range": range}),
            uncovered: BTreeMap::new(),
            answered: vec![self.uri(document)],
        })
    }

    /// The document's definitions as a `DocumentSymbol` tree: a symbol is
    /// the child of the nearest definition in the document whose SCIP name
    /// is a prefix of its own (`…/Point#` holds `…/Point#norm().`).
    fn document_symbols(&mut self, document: u32) -> Answer {
        let index = self.index;
        let mut definitions: Vec<(String, u32)> = index
            .occurrences_in(document)
            .filter(|&o| index.occurrence(o).is_definition())
            .filter(|&o| !index.is_local(index.occurrence(o).symbol))
            .map(|o| (index.symbol_name(index.occurrence(o).symbol).to_string(), o))
            .collect();
        definitions.sort();
        definitions.dedup_by(|a, b| a.0 == b.0);
        // Parent by the longest defined prefix (names sorted: a parent comes
        // before its children, and an open chain is a stack).
        let mut parent: Vec<Option<usize>> = vec![None; definitions.len()];
        let mut stack: Vec<usize> = Vec::new();
        for i in 0..definitions.len() {
            while let Some(&top) = stack.last() {
                if definitions[i].0.starts_with(&definitions[top].0) {
                    break;
                }
                stack.pop();
            }
            parent[i] = stack.last().copied();
            stack.push(i);
        }
        let mut nodes: Vec<Value> = Vec::with_capacity(definitions.len());
        for (name, occurrence) in &definitions {
            let o = *index.occurrence(*occurrence);
            let selection = self.range(document, o.span);
            let whole = index
                .enclosing_range(*occurrence)
                .map(|span| self.range(document, span))
                .unwrap_or_else(|| selection.clone());
            let mut node = json!({
                "name": index.short_name(o.symbol),
                "kind": lsp_kind(index, o.symbol, name),
                "range": whole,
                "selectionRange": selection,
            });
            if let Some(detail) = index
                .facts(o.symbol)
                .and_then(|f| first_code_line(&f.documentation))
            {
                node["detail"] = Value::String(detail);
            }
            nodes.push(node);
        }
        // Children attached bottom-up, then roots in source order.
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); definitions.len()];
        for (i, p) in parent.iter().enumerate() {
            if let Some(p) = p {
                children[*p].push(i);
            }
        }
        let start_of = |i: usize| index.occurrence(definitions[i].1).span.start;
        fn build(
            i: usize,
            nodes: &mut [Value],
            children: &[Vec<usize>],
            start_of: &dyn Fn(usize) -> Pos,
        ) -> Value {
            let mut mine = children[i].clone();
            mine.sort_by_key(|&c| start_of(c));
            let built: Vec<Value> = mine
                .into_iter()
                .map(|c| build(c, nodes, children, start_of))
                .collect();
            let mut node = std::mem::take(&mut nodes[i]);
            if !built.is_empty() {
                node["children"] = Value::Array(built);
            }
            node
        }
        let mut roots: Vec<usize> = (0..definitions.len())
            .filter(|&i| parent[i].is_none())
            .collect();
        roots.sort_by_key(|&r| start_of(r));
        let result: Vec<Value> = roots
            .into_iter()
            .map(|r| build(r, &mut nodes, &children, &start_of))
            .collect();
        Answer {
            result: Value::Array(result),
            uncovered: BTreeMap::new(),
            answered: vec![self.uri(document)],
        }
    }

    /// `SymbolInformation[]` for the global symbols whose short name matches
    /// `query` (case-insensitive, in order: exact, prefix, substring,
    /// subsequence), at most [`MAX_WORKSPACE_SYMBOLS`], unchanged documents only.
    fn workspace_symbols(&mut self, query: &str) -> Answer {
        let index = self.index;
        let query = query.to_lowercase();
        let mut matches: Vec<(u8, String, u32)> = Vec::new();
        for symbol in 0..index.symbol_count() as u32 {
            if index.is_local(symbol) {
                continue;
            }
            let Some(definition) = index.definitions_of(symbol).next() else {
                continue;
            };
            let name = index.short_name(symbol);
            let Some(rank) = match_rank(&name.to_lowercase(), &query) else {
                continue;
            };
            matches.push((rank, name, definition));
        }
        matches.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let mut result = Vec::new();
        let mut uncovered = BTreeMap::new();
        let mut answered = Vec::new();
        for (_, name, definition) in matches {
            if result.len() >= MAX_WORKSPACE_SYMBOLS {
                break;
            }
            let document = index.document_of(definition);
            let checked = self.check(document);
            if !checked.verdict.is_unchanged() {
                uncovered.insert(self.uri(document), checked.verdict.reason());
                continue;
            }
            let symbol = index.occurrence(definition).symbol;
            let scip_name = index.symbol_name(symbol).to_string();
            let mut info = json!({
                "name": name,
                "kind": lsp_kind(index, symbol, &scip_name),
                "location": self.location(definition),
            });
            if let Some(container) = container_name(index, symbol, &scip_name) {
                info["containerName"] = Value::String(container);
            }
            answered.push(self.uri(document));
            result.push(info);
        }
        answered.sort();
        answered.dedup();
        Answer {
            result: Value::Array(result),
            uncovered,
            answered,
        }
    }
}

fn verdict_words(reason: &str) -> &'static str {
    match reason {
        "changed_since_indexed" => "it changed since the index was built",
        "no_hash" => "the index's sidecar has no hash for it",
        "outside_roots" => "it is outside the session roots",
        "not_a_file" => "it is not a regular file",
        "too_large" => "it is too large to check",
        _ => "it cannot be read",
    }
}

/// How well `name` matches `query`: 0 exact, 1 prefix, 2 substring, 3
/// subsequence (both lowercase).
fn match_rank(name: &str, query: &str) -> Option<u8> {
    if query.is_empty() {
        return Some(3);
    }
    if name == query {
        return Some(0);
    }
    if name.starts_with(query) {
        return Some(1);
    }
    if name.contains(query) {
        return Some(2);
    }
    let mut rest = name.chars();
    query.chars().all(|q| rest.any(|c| c == q)).then_some(3)
}

/// The first line of a fenced code block (a signature) in documentation.
fn first_code_line(documentation: &str) -> Option<String> {
    let mut lines = documentation.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("```") {
            return lines
                .next()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("```"))
                .map(str::to_string);
        }
    }
    None
}

/// The containing symbol's short name: the enclosing symbol the index
/// names, or the descriptor before the last.
fn container_name(index: &Index, symbol: u32, scip_name: &str) -> Option<String> {
    if let Some(enclosing) = index.facts(symbol).and_then(|f| f.enclosing) {
        return Some(index.short_name(enclosing));
    }
    let descriptors = super::index::descriptors(scip_name)?;
    let trimmed = descriptors.trim_end_matches(['.', '#', '/', ':', '!', ')', '(']);
    let cut = trimmed.rfind(['.', '#', '/'])?;
    let parent = &descriptors[..=cut];
    let name = super::index::last_descriptor(&format!("a b c d {parent}"));
    (!name.is_empty()).then_some(name)
}

/// LSP `SymbolKind` of a symbol: from the index's kind, else from the
/// suffix of its last descriptor.
fn lsp_kind(index: &Index, symbol: u32, scip_name: &str) -> u32 {
    let kind = index.facts(symbol).map_or(0, |f| f.kind);
    let by_kind = match kind {
        7 | 75 => 5,                                          // Class, SingletonClass → Class
        8 => 14,                                              // Constant
        9 => 9,                                               // Constructor
        11 => 10,                                             // Enum
        12 => 22,                                             // EnumMember
        13 | 78 => 24,                                        // Event
        15 | 77 | 79 => 8,                                    // Field
        16 => 1,                                              // File
        17 => 12,                                             // Function
        21 | 42 | 53 | 56 => 11, // Interface, Protocol, Trait, TypeClass
        22 => 20,                // Key
        25 => 12,                // Macro → Function
        26 | 66 | 67 | 68 | 69 | 70 | 71 | 74 | 76 | 80 => 6, // methods
        29 => 2,                 // Module
        30 | 36 => 3,            // Namespace
        31 => 21,                // Null
        32 => 16,                // Number
        33 => 19,                // Object
        34 => 25,                // Operator
        35 | 64 => 4,            // Package, Library
        41 | 18 | 45 | 72 | 81 => 7, // Property, accessors
        48 => 15,                // String
        49 | 59 => 23,           // Struct, Union
        54 | 55 | 57 | 3 => 26,  // Type, TypeAlias, TypeFamily, AssociatedType
        58 => 26,                // TypeParameter
        61 | 37 | 44 | 52 | 82 | 60 => 13, // variables and parameters
        6 => 17,                 // Boolean
        1 => 18,                 // Array
        _ => 0,
    };
    if by_kind != 0 {
        return by_kind;
    }
    let descriptors = scip_name.trim_end();
    if descriptors.ends_with(").") {
        6
    } else if descriptors.ends_with('#') {
        5
    } else if descriptors.ends_with('/') {
        2
    } else if descriptors.ends_with(']') {
        26
    } else if descriptors.ends_with('!') {
        12
    } else {
        13
    }
}

/// A `file://` URI of an absolute path.
pub fn file_uri(path: &Path) -> String {
    url::Url::from_file_path(path)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| format!("file://{}", path.display()))
}

/// The path of `uri` relative to `root`, `/`-separated, if it is under it.
pub fn relative_path(root: &Path, uri: &str) -> Option<String> {
    let path: PathBuf = url::Url::parse(uri)
        .ok()
        .filter(|u| u.scheme() == "file")?
        .to_file_path()
        .ok()?;
    let inside = |p: &Path| -> Option<String> {
        let rest = p.strip_prefix(root).ok()?;
        let parts: Vec<&str> = rest
            .components()
            .map(|c| c.as_os_str().to_str())
            .collect::<Option<_>>()?;
        (!parts.is_empty()).then(|| parts.join("/"))
    };
    inside(&path).or_else(|| inside(&path.canonicalize().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_matches() {
        assert_eq!(match_rank("norm", "norm"), Some(0));
        assert_eq!(match_rank("normalize", "norm"), Some(1));
        assert_eq!(match_rank("renormalize", "norm"), Some(2));
        assert_eq!(match_rank("nxoxrxm", "norm"), Some(3));
        assert_eq!(match_rank("area", "norm"), None);
    }

    #[test]
    fn relative_paths_stay_under_the_root() {
        use crate::test_paths::{os_pathbuf, os_uri};
        let root = os_pathbuf("/p/root");
        assert_eq!(
            relative_path(&root, &os_uri("/p/root/src/a.rs")).as_deref(),
            Some("src/a.rs")
        );
        assert_eq!(relative_path(&root, &os_uri("/p/other/a.rs")), None);
        assert_eq!(relative_path(&root, &os_uri("/p/root")), None);
        assert_eq!(relative_path(&root, "untitled:x"), None);
    }
}
