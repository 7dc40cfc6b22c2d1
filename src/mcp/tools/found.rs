//! The symbols a server or a search found, as the tools show and compare
//! them: a point in a file with its line, the candidates of an ambiguous
//! name, the matches in a document outline.

use super::budget::{Entry, Page, DEFAULT_BUDGET};
use super::names::{container_matches, word_occurrences, SymbolPath};
use super::*;

/// Candidates shown for an ambiguous name (the rest counted).
const MAX_CANDIDATES: usize = 30;

/// A symbol a server or a search found: a point in a file.
#[derive(Debug, Clone)]
pub(super) struct Found {
    pub(super) path: PathBuf,
    /// 0-based line and column (characters).
    pub(super) line: u32,
    pub(super) column: usize,
    pub(super) name: String,
    pub(super) kind: &'static str,
    pub(super) container: String,
    /// The file as shown, and the line's text.
    pub(super) file: String,
    pub(super) text: String,
}

impl Found {
    pub(super) fn label(&self) -> String {
        format!("{}:{}:{}", self.file, self.line + 1, self.column + 1)
    }

    pub(super) fn describe(&self) -> String {
        let qualified = if self.container.is_empty() {
            self.name.clone()
        } else {
            format!("{}::{}", self.container, self.name)
        };
        format!("{} {qualified}", self.kind)
    }
}

/// The text of line `line` (0-based).
pub(super) fn line_text(text: &Text, line: u32) -> &str {
    let start = text
        .index
        .offset(&text.text, u64::from(line), 0, PositionEncoding::Utf8)
        .unwrap_or(0);
    let end = text
        .index
        .offset(
            &text.text,
            u64::from(line),
            u64::MAX,
            PositionEncoding::Utf8,
        )
        .unwrap_or(start);
    &text.text[start..end]
}

/// The answer for an ambiguous name: every candidate, and how to pick one.
pub(super) fn candidates(
    symbol: &SymbolPath,
    found: &[Found],
    outside: usize,
    how: &str,
) -> CallToolResult {
    let mut text = format!(
        "`{}` is ambiguous: {} symbols match (found {how}). Ask again with `file` and `line` \
         of the one you mean{}:\n",
        symbol.display(),
        found.len(),
        if symbol.qualifiers.is_empty() {
            ", or a qualified name such as `Type::name`"
        } else {
            ""
        }
    );
    let entries: Vec<Entry> = found
        .iter()
        .map(|f| {
            let line: String = f.text.chars().take(100).collect();
            Entry::new(
                f.file.clone(),
                format!("{} {}: {line}", f.describe(), f.label()),
            )
        })
        .collect();
    let page = Page::cut(&entries, 0, DEFAULT_BUDGET);
    let shown = page.end.min(MAX_CANDIDATES);
    for entry in &entries[..shown] {
        text.push_str(&entry.line);
        text.push('\n');
    }
    if shown < entries.len() {
        let left = &entries[shown..];
        let mut files: Vec<&str> = left.iter().map(|e| e.file.as_str()).collect();
        files.sort_unstable();
        files.dedup();
        text.push_str(&format!(
            "… and {} more in {} files: narrow with `file`, or a qualified name\n",
            left.len(),
            files.len()
        ));
    }
    if outside > 0 {
        text.push_str(&format!(
            "{outside} more outside the session's roots left out\n"
        ));
    }
    let items: Vec<Value> = found
        .iter()
        .take(shown)
        .map(|f| {
            json!({ "name": f.name, "kind": f.kind, "container": f.container,
                    "file": f.file, "line": f.line + 1, "column": f.column + 1 })
        })
        .collect();
    ok(
        text,
        json!({ "ambiguous": true, "candidates": items, "total": found.len(),
                "outsideRoots": outside }),
    )
}

/// The symbols of an outline (`DocumentSymbol` nested, or
/// `SymbolInformation`) named like `symbol`, within matching containers.
pub(super) fn outline_matches(
    files: &mut Files<'_>,
    item: &Value,
    uri: &str,
    parents: &mut Vec<String>,
    symbol: &SymbolPath,
    out: &mut Vec<Found>,
) {
    let name = item["name"].as_str().unwrap_or_default();
    // clangd names an out-of-line definition `Ledger::tally`.
    let (own, inline_container) = match name.rsplit_once("::") {
        Some((container, own)) => (own, Some(container)),
        None => (name, None),
    };
    if own == symbol.name {
        let mut containers: Vec<&str> = parents.iter().map(String::as_str).collect();
        containers.extend(item["containerName"].as_str());
        containers.extend(inline_container);
        if container_matches(&containers, &symbol.qualifiers) {
            let (item_uri, start) = match item.get("location") {
                Some(location) => (
                    location["uri"].as_str().unwrap_or(uri).to_string(),
                    location["range"]["start"].clone(),
                ),
                None => (uri.to_string(), item["selectionRange"]["start"].clone()),
            };
            let container = containers.last().copied().unwrap_or_default();
            let kind = symbol_kind(item["kind"].as_u64().unwrap_or(0));
            if let Some(f) = found_at(files, &item_uri, &start, &symbol.name, kind, container) {
                out.push(f);
            }
        }
    }
    parents.push(name.to_string());
    for child in item["children"].as_array().into_iter().flatten() {
        outline_matches(files, child, uri, parents, symbol, out);
    }
    parents.pop();
}

/// A symbol `name` that a server places at `start` of `uri` (the name's
/// start, or the start of its whole declaration: the name is then looked
/// for from there on, within a few lines).
pub(super) fn found_at(
    files: &mut Files<'_>,
    uri: &str,
    start: &Value,
    name: &str,
    kind: &'static str,
    container: &str,
) -> Option<Found> {
    let point = files.point(uri, start);
    let path = url::Url::parse(uri).ok()?.to_file_path().ok()?;
    let (mut line, mut column) = (
        point.line.saturating_sub(1) as u32,
        point.column.saturating_sub(1) as usize,
    );
    // A file that could not be read (gone, too large) keeps the server's point.
    let text = files.text_of(&path);
    if let Some(text) = &text {
        'search: for (offset, candidate) in (line..line.saturating_add(8)).enumerate() {
            let here = line_text(text, candidate);
            let from = if offset == 0 { column } else { 0 };
            for range in word_occurrences(here, name) {
                let at = here[..range.start].chars().count();
                if at >= from {
                    line = candidate;
                    column = at;
                    break 'search;
                }
            }
        }
    }
    Some(Found {
        file: files.display_path(&path),
        text: text
            .map(|t| line_text(&t, line).trim().to_string())
            .unwrap_or_default(),
        path,
        line,
        column,
        name: name.to_string(),
        kind,
        container: container.to_string(),
    })
}

pub(super) fn check_line(text: &Text, path: &Path, line: u32) -> ToolResult<()> {
    if line as usize > text.index.line_count() {
        return Err(format!(
            "{} has {} lines; line {line} does not exist",
            path.display(),
            text.index.line_count()
        ));
    }
    Ok(())
}
