//! Where a position tool points: a file, line and column, or a symbol by
//! name (`tally`, `Ledger::tally`, or a name in a given file or on a given
//! line), resolved with the servers' `textDocument/documentSymbol` and
//! `workspace/symbol`, else with a text search whose occurrences the server
//! judges by their definitions. An ambiguous name is answered with its
//! candidates, never guessed; a column off any name snaps to the nearest
//! one on its line and says so. Symbols outside the session's roots are
//! dropped and counted, never read.

use super::found::{candidates, check_line, found_at, line_text, outline_matches, Found};
use super::names::{container_matches, identifier_near, word_occurrences, SymbolPath};
use super::scan::{occurrences, source_files, MAX_SCAN_FILES};
use super::*;
use std::collections::BTreeMap;

/// Occurrences found by a text search that are asked their definition.
const MAX_JUDGED: usize = 24;

/// Where a position tool points. Give `symbol` (alone, with `file`, or
/// with `file` and `line`), or `file`, `line` and `column`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct Target {
    /// The symbol's name: `tally`, or qualified: `Ledger::tally`, `Ledger.tally`.
    /// Alone it is looked up in the whole workspace; with `file`, in that file;
    /// with `file` and `line`, on that line.
    #[serde(default)]
    pub symbol: Option<String>,
    /// A file, relative to the session's working directory or absolute.
    #[serde(default)]
    pub file: Option<String>,
    /// 1-based line in `file`.
    #[serde(default)]
    pub line: Option<u32>,
    /// 1-based column in characters (needed without `symbol`).
    #[serde(default)]
    pub column: Option<u32>,
}

/// What a position tool resolved before asking its server.
pub(super) struct At {
    pub(super) tool: SessionFacade,
    /// The file's server, ready.
    pub(super) entry: ServerEntry,
    pub(super) encoding: PositionEncoding,
    pub(super) path: PathBuf,
    pub(super) uri: String,
    /// 0-based line and column (characters).
    pub(super) line: u32,
    pub(super) column: usize,
    /// The name at the position, when there is one.
    pub(super) name: Option<String>,
    /// How the target was found, for the answer's first line.
    pub(super) note: Option<String>,
    /// Said before the answer when a SCIP index stands in for the file's
    /// live server (still starting): where the answer came from.
    pub(super) source: Option<String>,
}

impl At {
    pub(super) fn server_id(&self) -> &str {
        self.entry.server_id.as_str()
    }

    pub(super) fn server(&self) -> &str {
        &self.entry.name
    }

    pub(super) fn text_document(&self) -> Value {
        json!({ "uri": self.uri })
    }

    /// The LSP position (the character in the server's encoding).
    pub(super) fn position(&self, text: &Text) -> Value {
        let character = text
            .index
            .character_of_column(&text.text, u64::from(self.line), self.column, self.encoding)
            .unwrap_or(0);
        json!({ "line": self.line, "character": character })
    }

    /// `file:line:column` (1-based) as the model sees files.
    pub(super) fn label(&self) -> String {
        let file =
            Files::new(&self.tool, &TextCache::default(), self.encoding).display_path(&self.path);
        format!("{file}:{}:{}", self.line + 1, self.column + 1)
    }

    /// The 1-based location the command-line rename takes.
    pub(super) fn file_location(&self) -> FileLocation {
        FileLocation {
            file: self.path.clone(),
            line: self.line as usize + 1,
            column: self.column + 1,
        }
    }
}

/// A resolved target, or the answer that stands instead (the candidates of
/// an ambiguous name).
pub(super) enum Resolved {
    At(Box<At>),
    Answer(CallToolResult),
}

impl LspTools {
    /// Resolves `target` to a position in a file whose server is ready.
    pub(super) async fn resolve(&self, target: &Target) -> ToolResult<Resolved> {
        let tool = self.session().await?;
        let symbol = target
            .symbol
            .as_deref()
            .map(SymbolPath::parse)
            .transpose()?;
        match (symbol, target.file.as_deref(), target.line, target.column) {
            (None, Some(file), Some(line), Some(column)) => {
                let at = self.at_column(tool, file, line, column).await?;
                Ok(Resolved::At(Box::new(at)))
            }
            (None, Some(_), Some(_), None) => {
                Err("give `column` too (1-based), or `symbol`: the name on that line".into())
            }
            (None, ..) => Err(
                "say which symbol: `symbol` (a name such as `tally` or `Ledger::tally`), or \
                 `file`, `line` and `column`"
                    .into(),
            ),
            (Some(symbol), Some(file), Some(line), column) => {
                let at = self.on_line(tool, file, line, column, &symbol).await?;
                Ok(Resolved::At(Box::new(at)))
            }
            (Some(symbol), Some(file), None, _) => self.in_file(tool, file, &symbol).await,
            (Some(_), None, Some(_), _) => Err("`line` needs `file`".into()),
            (Some(symbol), None, None, _) => self.in_workspace(tool, &symbol).await,
        }
    }

    /// The position `line`:`column` of `file` exactly as given (code
    /// actions ask about ranges, names or not), with the file's text.
    pub(super) async fn at_exact(
        &self,
        file: &str,
        line: u32,
        column: u32,
    ) -> ToolResult<(At, Arc<Text>)> {
        let tool = self.session().await?;
        let path = resolve(&tool, file)?;
        let text = read_text(&tool, &self.texts, &path, file).await?;
        // Checks the line and the 1-based numbers.
        lsp_position(&text, &path, line, column, PositionEncoding::Utf8)?;
        let at = self
            .at_point(tool, path, line - 1, column as usize - 1, None, None)
            .await?;
        Ok((at, text))
    }

    /// The position `line`:`column` of `file`, snapped to the nearest name
    /// on the line when it is not on one.
    async fn at_column(
        &self,
        tool: SessionFacade,
        file: &str,
        line: u32,
        column: u32,
    ) -> ToolResult<At> {
        if line == 0 || column == 0 {
            return Err("line and column are 1-based".into());
        }
        let path = resolve(&tool, file)?;
        let text = read_text(&tool, &self.texts, &path, file).await?;
        check_line(&text, &path, line)?;
        let line0 = line - 1;
        let column0 = column as usize - 1;
        let words = line_text(&text, line0);
        let Some(word) = identifier_near(words, column0) else {
            return Err(format!(
                "{file}:{line} holds no name to ask about; give the column of one, or `symbol`"
            ));
        };
        let end = word.column + word.text.chars().count();
        let (column0, note) = if (word.column..end).contains(&column0) {
            (column0, None)
        } else {
            (
                word.column,
                Some(format!(
                    "{file}:{line}:{column} is not on a name; used `{}` at column {}",
                    word.text,
                    word.column + 1
                )),
            )
        };
        self.at_point(tool, path, line0, column0, Some(word.text), note)
            .await
    }

    /// `symbol` on line `line` of `file` (the occurrence nearest `column`).
    async fn on_line(
        &self,
        tool: SessionFacade,
        file: &str,
        line: u32,
        column: Option<u32>,
        symbol: &SymbolPath,
    ) -> ToolResult<At> {
        if line == 0 {
            return Err("line is 1-based".into());
        }
        let path = resolve(&tool, file)?;
        let text = read_text(&tool, &self.texts, &path, file).await?;
        check_line(&text, &path, line)?;
        let name = &symbol.name;
        let here = line_text(&text, line - 1);
        let columns: Vec<usize> = word_occurrences(here, name)
            .map(|r| here[..r.start].chars().count())
            .collect();
        if columns.is_empty() {
            let lines: Vec<String> = text
                .text
                .split('\n')
                .enumerate()
                .filter(|(_, l)| word_occurrences(l, name).next().is_some())
                .map(|(i, _)| (i + 1).to_string())
                .take(10)
                .collect();
            return Err(if lines.is_empty() {
                format!("`{name}` occurs nowhere in {file}")
            } else {
                format!(
                    "`{name}` does not occur on {file}:{line}; it does on line {}",
                    lines.join(", ")
                )
            });
        }
        let wanted = column.map_or(0, |c| c.saturating_sub(1) as usize);
        let chosen = columns
            .iter()
            .copied()
            .min_by_key(|c| c.abs_diff(wanted))
            .expect("BUG: columns is not empty");
        let note = (columns.len() > 1 && column.is_none()).then(|| {
            format!(
                "`{name}` occurs {} times on {file}:{line}; used the one at column {} \
                 (give `column` for another)",
                columns.len(),
                chosen + 1
            )
        });
        self.at_point(tool, path, line - 1, chosen, Some(name.clone()), note)
            .await
    }

    /// An [`At`] for a point of a confined file, its server ready.
    async fn at_point(
        &self,
        tool: SessionFacade,
        path: PathBuf,
        line: u32,
        column: usize,
        name: Option<String>,
        note: Option<String>,
    ) -> ToolResult<At> {
        let entry = ready_server(&tool, None, Some(&path)).await?;
        let encoding = encoding_of(&entry);
        let uri = file_uri(&path)?;
        let source = (entry.name == crate::scip::SERVER_NAME).then(|| {
            format!(
                "(answered from the SCIP index {} while the language server starts: \
                 files changed since it was built are left out)",
                entry.ours().version.as_deref().unwrap_or("scip")
            )
        });
        Ok(At {
            tool,
            entry,
            encoding,
            path,
            uri,
            line,
            column,
            name,
            note,
            source,
        })
    }

    /// `symbol` in `file`: the file's outline, else the name's occurrences
    /// in it judged by their definitions.
    async fn in_file(
        &self,
        tool: SessionFacade,
        file: &str,
        symbol: &SymbolPath,
    ) -> ToolResult<Resolved> {
        let path = resolve(&tool, file)?;
        read_text(&tool, &self.texts, &path, file).await?;
        let entry = ready_server(&tool, None, Some(&path)).await?;
        let mut found = Vec::new();
        if !capabilities_of(&entry)["documentSymbolProvider"].is_null() {
            let uri = file_uri(&path)?;
            let result = tool
                .request(
                    &entry.server_id,
                    "textDocument/documentSymbol",
                    json!({ "textDocument": { "uri": uri } }),
                )
                .await
                .map_err(describe)?;
            let result: Value = parse(result.get())?;
            let mut files = Files::new(&tool, &self.texts, encoding_of(&entry));
            files.load(&Value::Null, std::slice::from_ref(&uri)).await;
            for item in result.as_array().into_iter().flatten() {
                outline_matches(&mut files, item, &uri, &mut Vec::new(), symbol, &mut found);
            }
        }
        let how = format!("in the outline of {file}");
        if found.is_empty() {
            return self
                .by_text(tool, symbol, vec![path], &format!("in {file}"))
                .await;
        }
        self.choose(tool, symbol, found, 0, &how).await
    }

    /// `symbol` anywhere: `workspace/symbol` of the session's servers, else
    /// a text search judged by definitions.
    async fn in_workspace(&self, tool: SessionFacade, symbol: &SymbolPath) -> ToolResult<Resolved> {
        let confinement = tool
            .confinement()
            .ok_or_else(|| format!("the ACP session {} is closed", tool.session_id()))?;
        let servers = tool.servers_brief().await.map_err(describe)?;
        // Servers already running answer; idle ones start only when nothing runs.
        let up = |s: &ServerEntry| {
            matches!(
                s.status(),
                ServerState::Starting
                    | ServerState::Indexing
                    | ServerState::Ready
                    | ServerState::Restarting
            )
        };
        let running = servers.iter().any(up);
        let mut found = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut outside = 0;
        let mut failures = Vec::new();
        for entry in servers {
            if running && !up(&entry) {
                continue;
            }
            let name = entry.name.clone();
            let entry = match wait_ready(&tool, entry).await {
                Ok(entry) => entry,
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            if capabilities_of(&entry)["workspaceSymbolProvider"].is_null() {
                continue;
            }
            let result = match tool
                .request(
                    &entry.server_id,
                    "workspace/symbol",
                    json!({ "query": symbol.name }),
                )
                .await
            {
                Ok(result) => result,
                Err(e) => {
                    failures.push(format!("{name}: {}", describe(e)));
                    continue;
                }
            };
            let result: Value = parse(result.get())?;
            // Only exact names inside the roots, whose files may be read.
            let mut wanted = Vec::new();
            for item in result.as_array().into_iter().flatten() {
                if item["name"].as_str() != Some(symbol.name.as_str()) {
                    continue;
                }
                let container = item["containerName"].as_str().unwrap_or_default();
                if !container_matches(&[container], &symbol.qualifiers) {
                    continue;
                }
                let uri = item["location"]["uri"].as_str().unwrap_or_default();
                match confinement.check_uri(uri) {
                    Ok(Some(_)) => wanted.push(item),
                    _ => outside += 1,
                }
            }
            let mut files = Files::new(&tool, &self.texts, encoding_of(&entry));
            files
                .load(
                    &Value::Array(wanted.iter().map(|v| (*v).clone()).collect()),
                    &[],
                )
                .await;
            for item in wanted {
                let location = &item["location"];
                let uri = location["uri"].as_str().unwrap_or_default();
                let start = if location["range"].is_null() {
                    json!({ "line": 0, "character": 0 })
                } else {
                    location["range"]["start"].clone()
                };
                if let Some(f) = found_at(
                    &mut files,
                    uri,
                    &start,
                    &symbol.name,
                    symbol_kind(item["kind"].as_u64().unwrap_or(0)),
                    item["containerName"].as_str().unwrap_or_default(),
                ) {
                    if seen.insert((f.path.clone(), f.line)) {
                        found.push(f);
                    }
                }
            }
        }
        if found.is_empty() {
            let roots = tool.roots().to_vec();
            let mut why = String::from("in the workspace");
            if outside > 0 {
                why.push_str(&format!(
                    " ({outside} match{} outside the session's roots left out)",
                    if outside == 1 { "" } else { "es" }
                ));
            }
            if !failures.is_empty() {
                why.push_str(&format!(
                    " (workspace/symbol failed: {})",
                    failures.join("; ")
                ));
            }
            let extensions = self.session_extensions(&tool).await;
            let files = tokio::task::spawn_blocking(move || {
                source_files(&roots, Some(&extensions), MAX_SCAN_FILES).0
            })
            .await
            .map_err(|e| format!("the search failed: {e}"))?;
            return self.by_text(tool, symbol, files, &why).await;
        }
        self.choose(tool, symbol, found, outside, "by workspace/symbol")
            .await
    }

    /// The file extensions the session's servers handle.
    async fn session_extensions(&self, tool: &SessionFacade) -> Vec<String> {
        let mut extensions: Vec<String> = tool
            .servers_brief()
            .await
            .unwrap_or_default()
            .into_iter()
            .flat_map(|s| s.file_extensions)
            .collect();
        extensions.sort();
        extensions.dedup();
        extensions
    }

    /// The name's whole-word occurrences in `files`, each asked its
    /// definition (the first [`MAX_JUDGED`]); the distinct definitions
    /// inside the roots are the symbols found.
    async fn by_text(
        &self,
        tool: SessionFacade,
        symbol: &SymbolPath,
        files: Vec<PathBuf>,
        scope: &str,
    ) -> ToolResult<Resolved> {
        let confinement = tool
            .confinement()
            .ok_or_else(|| format!("the ACP session {} is closed", tool.session_id()))?;
        let name = symbol.name.clone();
        let scan = {
            let confinement = confinement.clone();
            tokio::task::spawn_blocking(move || occurrences(&files, &name, &confinement, 10_000))
                .await
                .map_err(|e| format!("the search failed: {e}"))?
        };
        if scan.hits.is_empty() {
            return Err(format!(
                "no symbol named `{}` {scope}, and the name occurs in none of the {} files \
                 searched under the session's roots",
                symbol.display(),
                scan.files_read
            ));
        }
        // One occurrence per file first, so that every file is heard.
        let mut judged = Vec::new();
        let mut seen_files = Vec::new();
        for hit in &scan.hits {
            if !seen_files.contains(&hit.path) {
                seen_files.push(hit.path.clone());
                judged.push(hit.clone());
            }
        }
        for hit in &scan.hits {
            if judged.len() >= MAX_JUDGED {
                break;
            }
            if !judged.contains(hit) {
                judged.push(hit.clone());
            }
        }
        judged.truncate(MAX_JUDGED);
        let mut definitions: BTreeMap<(PathBuf, u32, usize), Found> = BTreeMap::new();
        let mut outside = 0;
        let mut servers: HashMap<PathBuf, ServerEntry> = HashMap::new();
        for hit in &judged {
            let entry = match servers.get(&hit.path) {
                Some(entry) => entry.clone(),
                None => match ready_server(&tool, None, Some(&hit.path)).await {
                    Ok(entry) => {
                        servers.insert(hit.path.clone(), entry.clone());
                        entry
                    }
                    Err(_) => continue,
                },
            };
            let Ok(text) = read_text(
                &tool,
                &self.texts,
                &hit.path,
                &hit.path.display().to_string(),
            )
            .await
            else {
                continue;
            };
            let encoding = encoding_of(&entry);
            let character = text
                .index
                .character_of_column(&text.text, u64::from(hit.line), hit.column, encoding)
                .unwrap_or(0);
            let uri = file_uri(&hit.path)?;
            let Ok(result) = tool
                .request(
                    &entry.server_id,
                    "textDocument/definition",
                    json!({ "textDocument": { "uri": uri },
                            "position": { "line": hit.line, "character": character } }),
                )
                .await
            else {
                continue;
            };
            let result: Value = parse(result.get())?;
            let first = match &result {
                Value::Array(items) => items.first().cloned(),
                Value::Null => None,
                single => Some(single.clone()),
            };
            let Some(first) = first else { continue };
            let (uri, range) = match first.get("targetUri") {
                Some(uri) => (uri.clone(), first["targetSelectionRange"].clone()),
                None => (first["uri"].clone(), first["range"].clone()),
            };
            let uri = uri.as_str().unwrap_or_default();
            if !matches!(confinement.check_uri(uri), Ok(Some(_))) {
                outside += 1;
                continue;
            }
            let mut files = Files::new(&tool, &self.texts, encoding);
            files.load(&Value::Null, &[uri.to_string()]).await;
            if let Some(found) =
                found_at(&mut files, uri, &range["start"], &symbol.name, "symbol", "")
            {
                definitions
                    .entry((found.path.clone(), found.line, found.column))
                    .or_insert(found);
            }
        }
        let mut how = format!(
            "by a text search {scope}: {} occurrence{} in {} file{}, ",
            scan.hits.len() + scan.hits_left_out,
            if scan.hits.len() + scan.hits_left_out == 1 {
                ""
            } else {
                "s"
            },
            seen_files.len(),
            if seen_files.len() == 1 { "" } else { "s" },
        );
        how.push_str(&format!("{} judged by their definition", judged.len()));
        let found: Vec<Found> = definitions.into_values().collect();
        if found.is_empty() {
            return Err(format!(
                "no symbol named `{}` {scope}: the name occurs {} time(s) but {} finds no \
                 definition for it{}",
                symbol.display(),
                scan.hits.len() + scan.hits_left_out,
                servers
                    .values()
                    .next()
                    .map_or("the server", |e| e.name.as_str()),
                if outside > 0 {
                    format!(" inside the session's roots ({outside} outside left out)")
                } else {
                    String::new()
                }
            ));
        }
        self.choose(tool, symbol, found, outside, &how).await
    }

    /// One found symbol is the target; several are the candidates.
    async fn choose(
        &self,
        tool: SessionFacade,
        symbol: &SymbolPath,
        mut found: Vec<Found>,
        outside: usize,
        how: &str,
    ) -> ToolResult<Resolved> {
        found.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
        if found.len() == 1 {
            let f = found.remove(0);
            let mut note = format!(
                "`{}` → {} ({}, found {how})",
                symbol.display(),
                f.label(),
                f.describe()
            );
            if outside > 0 {
                note.push_str(&format!("; {outside} outside the session's roots left out"));
            }
            let at = self
                .at_point(
                    tool,
                    f.path,
                    f.line,
                    f.column,
                    Some(symbol.name.clone()),
                    Some(note),
                )
                .await?;
            return Ok(Resolved::At(Box::new(at)));
        }
        Ok(Resolved::Answer(candidates(symbol, &found, outside, how)))
    }
}
