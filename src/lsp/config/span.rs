//! Where a key is written in a configuration file: spans of every key path
//! (from `toml_edit`), turned into `FILE:LINE:COLUMN: KEY` for errors.

use std::ops::Range;

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// One key path of a document with the span of its key and of its value (or table header).
pub(super) type SpanEntry = (String, Option<Range<usize>>, Option<Range<usize>>);

/// Spans of every key path of a document, for turning error offsets into key paths.
pub(super) struct SpanIndex {
    entries: Vec<SpanEntry>,
    /// Order of `[servers.NAME]` tables as written.
    pub(super) server_order: Vec<String>,
}

pub(super) fn is_bare_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

pub(super) fn join_key(prefix: &str, key: &str) -> String {
    let key = if is_bare_key(key) {
        key.to_string()
    } else {
        format!("{key:?}")
    };
    if prefix.is_empty() {
        key
    } else {
        format!("{prefix}.{key}")
    }
}

impl SpanIndex {
    pub(super) fn build(text: &str) -> SpanIndex {
        let mut index = SpanIndex {
            entries: Vec::new(),
            server_order: Vec::new(),
        };
        if let Ok(doc) = toml_edit::ImDocument::parse(text) {
            index.add_table(doc.as_table(), "");
            if let Some(servers) = doc.as_table().get("servers") {
                if let Some(t) = servers.as_table_like() {
                    index.server_order = t.iter().map(|(k, _)| k.to_string()).collect();
                }
            }
        }
        index
    }

    fn add_item(&mut self, path: &str, key_span: Option<Range<usize>>, item: &toml_edit::Item) {
        match item {
            toml_edit::Item::Table(t) => {
                self.entries.push((path.to_string(), key_span, t.span()));
                self.add_table(t, path);
            }
            toml_edit::Item::Value(v) => {
                self.entries.push((path.to_string(), key_span, v.span()));
                self.add_value(path, v);
            }
            toml_edit::Item::ArrayOfTables(a) => {
                self.entries.push((path.to_string(), key_span, a.span()));
                for (i, t) in a.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    self.entries.push((p.clone(), None, t.span()));
                    self.add_table(t, &p);
                }
            }
            toml_edit::Item::None => {}
        }
    }

    fn add_table(&mut self, table: &toml_edit::Table, prefix: &str) {
        for (k, _) in table.iter() {
            if let Some((key, item)) = table.get_key_value(k) {
                let path = join_key(prefix, k);
                self.add_item(&path, key.span(), item);
            }
        }
    }

    fn add_value(&mut self, path: &str, value: &toml_edit::Value) {
        match value {
            toml_edit::Value::InlineTable(t) => {
                for (k, _) in t.iter() {
                    if let Some((key, item)) = t.get_key_value(k) {
                        let p = join_key(path, k);
                        self.add_item(&p, key.span(), item);
                    }
                }
            }
            toml_edit::Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    self.entries.push((p.clone(), None, v.span()));
                    self.add_value(&p, v);
                }
            }
            _ => {}
        }
    }

    /// The most specific key path whose key or value span contains `span.start`.
    pub(super) fn key_at(&self, span: &Range<usize>) -> Option<String> {
        let offset = span.start;
        let mut best: Option<(usize, &str)> = None;
        for (path, key_span, value_span) in &self.entries {
            for s in [key_span, value_span].into_iter().flatten() {
                let contains =
                    (s.start <= offset && offset < s.end) || (s.start == offset && s.is_empty());
                if !contains {
                    continue;
                }
                let len = s.end - s.start;
                let better = match best {
                    None => true,
                    Some((best_len, best_path)) => {
                        len < best_len || (len == best_len && path.len() > best_path.len())
                    }
                };
                if better {
                    best = Some((len, path));
                }
            }
        }
        best.map(|(_, p)| p.to_string())
    }

    /// Where a key path is written (its key, else its value or table header).
    pub(super) fn location_of(&self, text: &str, path: &str) -> Option<(usize, usize)> {
        self.entries
            .iter()
            .find(|(p, _, _)| p == path)
            .and_then(|(_, k, v)| {
                // The earlier of the key and its value: for `[a.b]` that is the header's `[`.
                [k, v].into_iter().flatten().map(|s| s.start).min()
            })
            .map(|start| line_col(text, start))
    }
}

/// The `in `a.b`` line toml prints when an error has no span.
pub(super) fn key_from_display(err: &toml::de::Error) -> Option<String> {
    let shown = err.to_string();
    shown.lines().rev().find_map(|l| {
        l.strip_prefix("in `")
            .and_then(|r| r.strip_suffix('`'))
            .map(str::to_string)
    })
}

/// For an unknown-field message inside a key path, the path of the unknown key itself.
pub(super) fn refine_key(key: Option<String>, message: &str) -> Option<String> {
    let field = message
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())?;
    match key {
        Some(k) if k.ends_with(&format!(".{field}")) || k == field => Some(k),
        Some(k) => Some(join_key(&k, field)),
        None => Some(field.to_string()),
    }
}
