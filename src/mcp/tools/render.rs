//! How the MCP tools show what servers answer: LSP positions back to
//! 1-based `file:line:col` with the line's text (files read once, confined,
//! kept while unchanged: [`super::texts`]),
//! locations, symbols, hover text and reports as compact lines, cut to the
//! budget ([`super::budget`]).

use super::budget::{rest_line, Entry, Page, DEFAULT_BUDGET};
use super::*;

/// A tool's answer before it goes out: its text, and the structured
/// content (the text is added to it as `summary`).
pub(super) struct Answer {
    pub(super) text: String,
    pub(super) structured: serde_json::Map<String, Value>,
}

impl Answer {
    pub(super) fn new(text: String, structured: Value) -> Answer {
        let structured = match structured {
            Value::Object(map) => map,
            other => {
                let mut map = serde_json::Map::new();
                map.insert("result".into(), other);
                map
            }
        };
        Answer { text, structured }
    }

    /// With how the target was found as the first line.
    pub(super) fn noted(mut self, note: Option<&str>) -> Answer {
        if let Some(note) = note {
            self.text = format!("{note}\n{}", self.text);
            self.structured
                .insert("resolved".into(), Value::String(note.to_string()));
        }
        self
    }

    /// With where the answer came from as the very first line, when a SCIP
    /// index stood in for the live server (`source` in the structured content).
    pub(super) fn sourced(mut self, source: Option<&str>) -> Answer {
        if let Some(source) = source {
            self.text = format!("{source}\n{}", self.text);
            self.structured
                .insert("source".into(), Value::String(source.to_string()));
        }
        self
    }

    /// With a warning that the answer is partial, and what would fix it, last.
    pub(super) fn hinted(mut self, hint: Option<String>) -> Answer {
        if let Some(hint) = hint {
            self.text.push_str(&format!("partial: {hint}\n"));
            self.structured
                .insert("partial".into(), Value::String(hint));
        }
        self
    }

    pub(super) fn into_result(self) -> CallToolResult {
        ok(self.text, Value::Object(self.structured))
    }
}

/// The page of `entries` from `offset`, in the structured content as
/// `total`, `offset` and (when more follow) `nextOffset`.
pub(super) fn page_fields(page: &Page) -> serde_json::Map<String, Value> {
    let mut fields = serde_json::Map::new();
    fields.insert("total".into(), json!(page.total));
    fields.insert("offset".into(), json!(page.start));
    if page.more() {
        fields.insert("nextOffset".into(), json!(page.end));
    }
    fields
}

/// A point in a file as agents read it.
pub(super) struct Point {
    /// Relative to the root that holds it, else absolute; or the URI.
    pub(super) file: String,
    pub(super) line: u64,
    pub(super) column: u64,
    /// The line's text, trimmed.
    pub(super) text: String,
}

impl Point {
    pub(super) fn label(&self) -> String {
        format!("{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Files read to turn LSP positions back into 1-based columns, each once,
/// confined to the session: kept from earlier calls while unchanged
/// ([`TextCache`]), else read off the runtime threads ([`Files::load`]).
pub(super) struct Files<'a> {
    tool: &'a SessionFacade,
    cache: &'a TextCache,
    texts: HashMap<PathBuf, Option<Arc<Text>>>,
    encoding: PositionEncoding,
    /// The session's roots, canonical: where displayed paths start.
    roots: Vec<PathBuf>,
    /// Bytes loaded so far.
    loaded: u64,
}

impl<'a> Files<'a> {
    /// `encoding`: the position encoding of the server whose results are read.
    pub(super) fn new(
        tool: &'a SessionFacade,
        cache: &'a TextCache,
        encoding: PositionEncoding,
    ) -> Files<'a> {
        let roots = tool
            .roots()
            .iter()
            .map(|root| root.canonicalize().unwrap_or_else(|_| root.clone()))
            .collect();
        Files {
            tool,
            cache,
            texts: HashMap::new(),
            encoding,
            roots,
            loaded: 0,
        }
    }

    /// Loads the files `value` names (see [`collect_uris`]) and `more`,
    /// those not loaded yet: regular files inside the session, at most
    /// [`MAX_DOCUMENT_BYTES`] each and [`MAX_LOADED_BYTES`] in all; the
    /// others are shown without their line's text.
    pub(super) async fn load(&mut self, value: &Value, more: &[String]) {
        let mut uris = Vec::new();
        collect_uris(value, &mut uris);
        uris.extend(more.iter().cloned());
        let mut paths: Vec<PathBuf> = uris
            .iter()
            .filter_map(|uri| url::Url::parse(uri).ok()?.to_file_path().ok())
            .filter(|path| !self.texts.contains_key(path))
            .collect();
        paths.sort();
        paths.dedup();
        if paths.is_empty() {
            return;
        }
        let Some(confinement) = self.tool.confinement() else {
            return;
        };
        // Files read by an earlier call and unchanged since: no trip through
        // the blocking pool.
        let mut missing = Vec::new();
        for path in paths {
            match self.cache.get(&path, &confinement) {
                Some(text) => {
                    let size = text.text.len() as u64;
                    let fits = self.loaded + size <= MAX_LOADED_BYTES;
                    if fits {
                        self.loaded += size;
                    }
                    self.texts.insert(path, fits.then_some(text));
                }
                None => missing.push(path),
            }
        }
        if missing.is_empty() {
            return;
        }
        let mut budget = MAX_LOADED_BYTES.saturating_sub(self.loaded);
        let read = tokio::task::spawn_blocking(move || {
            let allowed = |real: &Path| confinement.contains(real);
            let mut read = Vec::with_capacity(missing.len());
            for path in missing {
                let text =
                    read_confined_blocking(&path, &allowed, MAX_DOCUMENT_BYTES.min(budget)).ok();
                budget -= text.as_ref().map_or(0, |t| t.text.len() as u64);
                read.push((path, text));
            }
            read
        })
        .await
        .unwrap_or_default();
        let read_at = std::time::SystemTime::now();
        for (path, read) in read {
            let entry = read.map(|read| {
                self.loaded += read.text.len() as u64;
                let text = Arc::new(Text::new(read.text));
                self.cache
                    .put(path.clone(), read.stamp, Arc::clone(&text), read_at);
                text
            });
            self.texts.insert(path, entry);
        }
    }

    /// A file's text, if it was loaded.
    pub(super) fn text_of(&self, path: &Path) -> Option<Arc<Text>> {
        self.texts.get(path).cloned().flatten()
    }

    pub(super) fn display_path(&self, path: &Path) -> String {
        for root in &self.roots {
            if let Ok(rel) = path.strip_prefix(root) {
                return rel.display().to_string();
            }
        }
        path.display().to_string()
    }

    pub(super) fn display_uri(&self, uri: &str) -> String {
        match url::Url::parse(uri)
            .ok()
            .and_then(|u| u.to_file_path().ok())
        {
            Some(path) => self.display_path(&path),
            None => uri.to_string(),
        }
    }

    /// `position` (LSP, 0-based) in `uri` as a 1-based point.
    pub(super) fn point(&mut self, uri: &str, position: &Value) -> Point {
        let line = position["line"].as_u64().unwrap_or(0);
        let character = position["character"].as_u64().unwrap_or(0);
        let path = url::Url::parse(uri)
            .ok()
            .and_then(|u| u.to_file_path().ok());
        let Some(path) = path else {
            return Point {
                file: uri.to_string(),
                line: line + 1,
                column: character + 1,
                text: String::new(),
            };
        };
        let (column, text) = match self.texts.get(&path).and_then(Option::as_ref) {
            Some(loaded) => {
                let (text, index) = (&loaded.text, &loaded.index);
                let start = index
                    .offset(text, line, 0, PositionEncoding::Utf8)
                    .unwrap_or(0);
                let end = index
                    .offset(text, line, u64::MAX, PositionEncoding::Utf8)
                    .unwrap_or(start);
                let at = index
                    .offset(text, line, character, self.encoding)
                    .unwrap_or(start)
                    .clamp(start, end);
                let column = text[start..at].chars().count() as u64 + 1;
                (column, text[start..end].trim().to_string())
            }
            None => (character + 1, String::new()),
        };
        Point {
            file: self.display_path(&path),
            line: line + 1,
            column,
            text,
        }
    }
}

/// Location | Location[] | LocationLink[] | null as `file:line:col: text`
/// lines: the page from `offset` within the budget, only the files of the
/// page read (a result of thousands of locations costs a page of reads).
pub(super) async fn render_locations(
    tool: &SessionFacade,
    cache: &TextCache,
    encoding: PositionEncoding,
    result: &Value,
    what: &str,
    offset: usize,
) -> Answer {
    let items: Vec<(&str, &Value)> = match result {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        single => vec![single],
    }
    .into_iter()
    .map(|item| match item.get("targetUri") {
        Some(uri) => (
            uri.as_str().unwrap_or_default(),
            &item["targetSelectionRange"],
        ),
        None => (item["uri"].as_str().unwrap_or_default(), &item["range"]),
    })
    .collect();
    let total = items.len();
    let mut files = Files::new(tool, cache, encoding);
    let mut lines = Vec::new();
    let mut structured = Vec::new();
    let mut used = 0;
    let mut end = offset.min(total);
    for (uri, range) in items.iter().skip(offset) {
        files.load(&Value::Null, &[uri.to_string()]).await;
        let start = files.point(uri, &range["start"]);
        let stop = files.point(uri, &range["end"]);
        let line = format!("{}: {}", start.label(), start.text);
        if !lines.is_empty() && used + line.len() + 1 > DEFAULT_BUDGET {
            break;
        }
        used += line.len() + 1;
        lines.push(line);
        structured.push(json!({
            "file": start.file, "line": start.line, "column": start.column,
            "endLine": stop.line, "endColumn": stop.column, "text": start.text,
        }));
        end += 1;
    }
    let page = Page {
        start: offset,
        end,
        total,
    };
    let mut text = String::new();
    if total == 0 {
        text.push_str(&format!("no {what} found\n"));
    } else if offset >= total {
        text.push_str(&format!(
            "offset {offset} is past the end: there are {total} {what}\n"
        ));
    } else {
        let shown = if offset == 0 && end == total {
            String::new()
        } else {
            format!(" ({}–{end} shown)", offset + 1)
        };
        text.push_str(&format!("{}{shown}:\n", counted(total, what)));
        for line in &lines {
            text.push_str(line);
            text.push('\n');
        }
        if end < total {
            let left: Vec<String> = items[end..]
                .iter()
                .map(|(uri, _)| files.display_uri(uri))
                .collect();
            text.push_str(&rest_line(left.iter().map(String::as_str), end));
            text.push('\n');
        }
    }
    let mut fields = page_fields(&page);
    fields.insert("locations".into(), Value::Array(structured));
    Answer::new(text, Value::Object(fields))
}

/// One symbol, flattened with its depth.
pub(super) struct Symbol {
    depth: usize,
    name: String,
    kind: &'static str,
    detail: String,
    at: Point,
}

/// DocumentSymbol (nested), SymbolInformation and WorkspaceSymbol alike.
pub(super) fn collect_symbols(
    files: &mut Files<'_>,
    item: &Value,
    file: Option<&Path>,
    depth: usize,
    out: &mut Vec<Symbol>,
) {
    let (uri, start) = if let Some(location) = item.get("location") {
        (
            location["uri"].as_str().unwrap_or_default().to_string(),
            location["range"]["start"].clone(),
        )
    } else {
        let uri = file
            .and_then(|f| url::Url::from_file_path(f).ok())
            .map(String::from)
            .unwrap_or_default();
        (uri, item["selectionRange"]["start"].clone())
    };
    let mut at = files.point(&uri, &start);
    if start.is_null() {
        // A WorkspaceSymbol may name only its file.
        at.line = 0;
        at.column = 0;
    }
    out.push(Symbol {
        depth,
        name: item["name"].as_str().unwrap_or("?").to_string(),
        kind: symbol_kind(item["kind"].as_u64().unwrap_or(0)),
        detail: item["detail"]
            .as_str()
            .or(item["containerName"].as_str())
            .unwrap_or_default()
            .to_string(),
        at,
    });
    for child in item["children"].as_array().into_iter().flatten() {
        collect_symbols(files, child, file, depth + 1, out);
    }
}

pub(super) fn render_symbols(symbols: &[Symbol], empty: &str, offset: usize) -> Answer {
    let entries: Vec<Entry> = symbols
        .iter()
        .map(|s| {
            let detail = if s.detail.is_empty() {
                String::new()
            } else {
                format!(" — {}", first_line(&s.detail))
            };
            Entry::new(
                s.at.file.clone(),
                format!(
                    "{}{} {} {}{detail}",
                    "  ".repeat(s.depth),
                    s.kind,
                    s.name,
                    s.at.label()
                ),
            )
        })
        .collect();
    let page = Page::cut(&entries, offset, DEFAULT_BUDGET);
    let structured: Vec<Value> = symbols
        .iter()
        .skip(page.start)
        .take(page.end.saturating_sub(page.start))
        .map(|s| {
            json!({ "name": s.name, "kind": s.kind, "depth": s.depth, "detail": s.detail,
                    "file": s.at.file, "line": s.at.line, "column": s.at.column })
        })
        .collect();
    let mut fields = page_fields(&page);
    fields.insert("symbols".into(), Value::Array(structured));
    Answer::new(page.render(&entries, empty), Value::Object(fields))
}

/// Lines, or `empty`: for short lists that need no page (code actions).
pub(super) fn list(lines: &[String], empty: &str) -> String {
    let entries: Vec<Entry> = lines.iter().map(|l| Entry::new("", l.clone())).collect();
    Page::cut(&entries, 0, DEFAULT_BUDGET).render(&entries, empty)
}

/// "1 reference", "2 references" (`plural` ends in s).
pub(super) fn counted(n: usize, plural: &str) -> String {
    match n {
        1 => format!("1 {}", plural.strip_suffix('s').unwrap_or(plural)),
        _ => format!("{n} {plural}"),
    }
}

pub(super) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// MarkedString | MarkedString[] | MarkupContent as plain text.
pub(super) fn hover_text(contents: &Value) -> String {
    match contents {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(hover_text)
            .collect::<Vec<_>>()
            .join("\n\n"),
        Value::Object(o) => match (o.get("language"), o.get("value")) {
            (Some(language), Some(value)) => format!(
                "```{}\n{}\n```",
                language.as_str().unwrap_or_default(),
                value.as_str().unwrap_or_default()
            ),
            (_, Some(value)) => value.as_str().unwrap_or_default().to_string(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

pub(super) fn symbol_kind(kind: u64) -> &'static str {
    const KINDS: [&str; 26] = [
        "symbol",
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum-member",
        "struct",
        "event",
        "operator",
    ];
    match kind {
        26 => "type-parameter",
        k => KINDS.get(k as usize).copied().unwrap_or("symbol"),
    }
}
