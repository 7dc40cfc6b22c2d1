//! How the MCP tools show what servers answer: LSP positions back to
//! 1-based `file:line:col` with the line's text (files read once, confined,
//! kept while unchanged: [`super::texts`]),
//! locations, symbols, hover text and reports as compact lines, at most
//! [`MAX_LISTED`] of them.

use super::*;

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

/// Location | Location[] | LocationLink[] | null as `file:line:col: text` lines.
pub(super) async fn render_locations(
    tool: &SessionFacade,
    cache: &TextCache,
    encoding: PositionEncoding,
    result: &Value,
    what: &str,
) -> CallToolResult {
    let items: Vec<&Value> = match result {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        single => vec![single],
    };
    let mut files = Files::new(tool, cache, encoding);
    files.load(result, &[]).await;
    let mut lines = Vec::new();
    let mut structured = Vec::new();
    for item in items {
        let (uri, range) = match item.get("targetUri") {
            Some(uri) => (uri, &item["targetSelectionRange"]),
            None => (&item["uri"], &item["range"]),
        };
        let uri = uri.as_str().unwrap_or_default();
        let start = files.point(uri, &range["start"]);
        let end = files.point(uri, &range["end"]);
        lines.push(format!("{}: {}", start.label(), start.text));
        structured.push(json!({
            "file": start.file, "line": start.line, "column": start.column,
            "endLine": end.line, "endColumn": end.column, "text": start.text,
        }));
    }
    let mut text = list(&lines, &format!("no {what} found"));
    if !lines.is_empty() {
        text = format!("{}:\n{text}", counted(lines.len(), what));
    }
    ok(text, json!({ "locations": structured }))
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

pub(super) fn render_symbols(symbols: &[Symbol], empty: &str) -> CallToolResult {
    let lines: Vec<String> = symbols
        .iter()
        .map(|s| {
            let detail = if s.detail.is_empty() {
                String::new()
            } else {
                format!(" — {}", first_line(&s.detail))
            };
            format!(
                "{}{} {} {}{detail}",
                "  ".repeat(s.depth),
                s.kind,
                s.name,
                s.at.label()
            )
        })
        .collect();
    let structured: Vec<Value> = symbols
        .iter()
        .map(|s| {
            json!({ "name": s.name, "kind": s.kind, "depth": s.depth, "detail": s.detail,
                    "file": s.at.file, "line": s.at.line, "column": s.at.column })
        })
        .collect();
    ok(list(&lines, empty), json!({ "symbols": structured }))
}

pub(super) fn render_report(
    tool: &SessionFacade,
    cache: &TextCache,
    report: &ApplyReport,
    server: &str,
    new_name: &str,
    through: &str,
) -> CallToolResult {
    let files = Files::new(tool, cache, PositionEncoding::Utf16);
    let show = |paths: &[PathBuf]| -> Vec<String> {
        paths.iter().map(|p| files.display_path(p)).collect()
    };
    let changed = show(&report.written);
    let created = show(&report.created);
    let deleted = show(&report.deleted);
    let renamed: Vec<(String, String)> = report
        .renamed
        .iter()
        .map(|(a, b)| (files.display_path(a), files.display_path(b)))
        .collect();
    let mut text = format!("renamed to {new_name} with {server}, written through {through}:\n");
    for f in &changed {
        text.push_str(&format!("changed {f}\n"));
    }
    for f in &created {
        text.push_str(&format!("created {f}\n"));
    }
    for (a, b) in &renamed {
        text.push_str(&format!("renamed {a} -> {b}\n"));
    }
    for f in &deleted {
        text.push_str(&format!("deleted {f}\n"));
    }
    if changed.is_empty() && created.is_empty() && renamed.is_empty() && deleted.is_empty() {
        text.push_str("no file needed a change\n");
    }
    ok(
        text,
        json!({ "changed": changed, "created": created, "deleted": deleted,
                "renamed": renamed.iter().map(|(a, b)| json!({"from": a, "to": b})).collect::<Vec<_>>() }),
    )
}

/// Lines, at most [`MAX_LISTED`], or `empty`.
pub(super) fn list(lines: &[String], empty: &str) -> String {
    if lines.is_empty() {
        return format!("{empty}\n");
    }
    let mut text = String::new();
    for line in lines.iter().take(MAX_LISTED) {
        text.push_str(line);
        text.push('\n');
    }
    if lines.len() > MAX_LISTED {
        text.push_str(&format!(
            "… and {} more (all are in the structured content)\n",
            lines.len() - MAX_LISTED
        ));
    }
    text
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
