//! `diagnostics`: what every server of a file says about it, each problem
//! tagged with its server (a primary and a companion server may both
//! answer), cut to the budget; and `since: "last_edit"`, the delta since
//! the session last wrote files ([`super::super::journal`]): the problems
//! that appeared (new) and those that went away (fixed), in the files
//! written, the files that had problems before, and the files of the same
//! servers that may depend on them. Every answer ends with what it left out.

use super::budget::{Entry, Page, DEFAULT_BUDGET};
use super::scan::source_files;
use super::*;
use crate::mcp::journal::{delta, Edit, FileKey, Problem};

/// Most files one `since: "last_edit"` answer checks (written ones first,
/// then those with earlier problems, then their neighbours).
pub(crate) const MAX_DELTA_FILES: usize = 64;

/// One (server, file) answer of a check.
struct Checked {
    server: String,
    path: PathBuf,
    /// As shown.
    file: String,
    problems: Vec<Problem>,
    /// The server gave no answer for the file's current text in time.
    timed_out: bool,
    /// The answer predates the server's last copy of the file's text.
    stale: bool,
}

/// A server's name and position encoding, by serverId.
type Servers = HashMap<String, (String, PositionEncoding)>;

fn severity(d: &Value) -> &'static str {
    match d["severity"].as_u64() {
        Some(1) => "error",
        Some(2) => "warning",
        Some(3) => "info",
        _ => "hint",
    }
}

fn code_of(d: &Value) -> String {
    match &d["code"] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// `file:line:col: error E0061 [rust-analyzer]: message`
fn problem_line(file: &str, server: &str, p: &Problem) -> String {
    let code = if p.code.is_empty() {
        String::new()
    } else {
        format!(" {}", p.code)
    };
    format!(
        "{file}:{}:{}: {}{code} [{server}]: {}",
        p.line,
        p.column,
        p.severity,
        first_line(&p.message)
    )
}

impl LspTools {
    /// Records in the journal what each server said of each file it
    /// answered in time (the base a later `since: "last_edit"` compares to).
    fn observe(&self, tool: &SessionFacade, checked: &[Checked]) {
        self.journal.observe(
            tool.session_id(),
            checked
                .iter()
                .filter(|c| !c.timed_out)
                .map(|c| {
                    (
                        FileKey {
                            server: c.server.clone(),
                            path: c.path.clone(),
                        },
                        c.problems.clone(),
                    )
                })
                .collect(),
        );
    }

    pub(super) async fn diagnostics_inner(
        &self,
        args: DiagnosticsArgs,
    ) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        if Since::parse(args.since.as_deref())? == Some(Since::LastEdit) {
            return self.since_last_edit(tool, args).await;
        }
        let mut uris = Vec::new();
        for file in &args.files {
            let path = resolve(&tool, file)?;
            // Diagnostics of a server still loading would be as misleading
            // as an empty reference list.
            ready_server(&tool, None, Some(&path)).await?;
            uris.push(file_uri(&path)?);
        }
        let wait = (!uris.is_empty()).then_some(DIAGNOSTICS_WAIT);
        let (checked, outside) = self.check(&tool, uris, wait).await?;
        self.observe(&tool, &checked);
        let mut entries = Vec::new();
        let mut items = Vec::new();
        for c in &checked {
            for p in &c.problems {
                let line = problem_line(&c.file, &c.server, p);
                // The same diagnostic may come pushed and pulled.
                if entries.iter().any(|e: &Entry| e.line == line) {
                    continue;
                }
                entries.push(Entry::new(c.file.clone(), line));
                items.push(json!({
                    "file": c.file, "line": p.line, "column": p.column, "severity": p.severity,
                    "code": p.code, "message": p.message, "server": c.server,
                }));
            }
        }
        let page = Page::cut(&entries, args.offset.unwrap_or(0), DEFAULT_BUDGET);
        let mut text = page.render(&entries, "no diagnostics");
        // The rest line is part of the page's text; the trailer counts everything else.
        let stale: Vec<&str> = checked
            .iter()
            .filter(|c| c.stale)
            .map(|c| c.file.as_str())
            .collect();
        let timed_out: Vec<&str> = checked
            .iter()
            .filter(|c| c.timed_out)
            .map(|c| c.file.as_str())
            .collect();
        let mut left = Vec::new();
        if page.more() {
            left.push(format!(
                "{} more diagnostics (offset={})",
                page.total - page.end,
                page.end
            ));
        }
        if !stale.is_empty() {
            left.push(format!(
                "{} files not yet re-checked after their last change ({})",
                stale.len(),
                stale.join(", ")
            ));
        }
        if !timed_out.is_empty() {
            left.push(format!(
                "{} files whose server did not answer in time ({})",
                timed_out.len(),
                timed_out.join(", ")
            ));
        }
        if outside > 0 {
            left.push(format!("{outside} files outside the session's roots"));
        }
        text.push_str(&left_out_line(&left));
        let mut fields = page_fields(&page);
        let shown: Vec<Value> = items
            .into_iter()
            .skip(page.start)
            .take(page.end.saturating_sub(page.start))
            .collect();
        fields.insert("diagnostics".into(), Value::Array(shown));
        fields.insert("notFresh".into(), json!(stale));
        fields.insert("timedOut".into(), json!(timed_out));
        Ok(Answer::new(text, Value::Object(fields)).into_result())
    }

    /// Asks the gate for diagnostics: of `uris` (pulled, or waited for up to
    /// `wait` until a publish reflects their text), else every published
    /// one; those of files outside the session's roots are counted, not shown.
    async fn check(
        &self,
        tool: &SessionFacade,
        uris: Vec<String>,
        wait: Option<Duration>,
    ) -> ToolResult<(Vec<Checked>, usize)> {
        let confinement = tool
            .confinement()
            .ok_or_else(|| format!("the ACP session {} is closed", tool.session_id()))?;
        // The gate pulls from servers that answer `textDocument/diagnostic`
        // (rust-analyzer) and waits for a fresh push from the others.
        let wait = if uris.is_empty() {
            Duration::ZERO
        } else {
            wait.unwrap_or(DIAGNOSTICS_WAIT)
        };
        let entries = tool.diagnostics(uris, wait).await.map_err(describe)?;
        let servers: Servers = tool
            .servers_brief()
            .await
            .map_err(describe)?
            .iter()
            .map(|s| (s.server_id.to_string(), (s.name.clone(), encoding_of(s))))
            .collect();
        let mut checked = Vec::new();
        let mut outside = 0;
        // Columns are counted in characters from the files' text; past this
        // many files (every published document, thousands) they are the
        // server's own, the same for ASCII lines, and nothing more is read.
        let read_texts = entries.len() <= MAX_DELTA_FILES;
        for entry in &entries {
            let uri = entry.uri.as_str();
            let Ok(Some(path)) = confinement.check_uri(uri) else {
                outside += 1;
                continue;
            };
            let (server, encoding) = servers
                .get(entry.server_id.as_str())
                .cloned()
                .unwrap_or_else(|| ("?".to_string(), PositionEncoding::Utf16));
            let mut files = Files::new(tool, &self.texts, encoding);
            if read_texts {
                files.load(&Value::Null, &[uri.to_string()]).await;
            }
            // The server's own items, read here to be rendered.
            let items: Vec<Value> = entry
                .items()
                .and_then(|items| serde_json::from_str(items.get()).ok())
                .unwrap_or_default();
            let problems = items
                .iter()
                .map(|d| {
                    let at = files.point(uri, &d["range"]["start"]);
                    Problem {
                        severity: severity(d).to_string(),
                        code: code_of(d),
                        message: d["message"].as_str().unwrap_or_default().to_string(),
                        line: at.line,
                        column: at.column,
                    }
                })
                .collect();
            checked.push(Checked {
                server,
                file: files.display_path(&path),
                path,
                problems,
                timed_out: entry.fetched.is_some_and(|f| f.timed_out),
                stale: !entry.fresh && !entry.fetched.is_some_and(|f| f.timed_out),
            });
        }
        Ok((checked, outside))
    }

    /// `since: "last_edit"`: the delta of the session's last edit.
    async fn since_last_edit(
        &self,
        tool: SessionFacade,
        args: DiagnosticsArgs,
    ) -> ToolResult<CallToolResult> {
        let Some(edit) = self.journal.last_edit(tool.session_id()) else {
            return Err("no file was written through this session yet (the agent's \
                 fs/write_text_file, or the rename tool): nothing to compare with. Call \
                 diagnostics with `files` to check files changed another way"
                .into());
        };
        let (scope, not_checked) = self.delta_scope(&tool, &edit, &args.files).await?;
        // Each file's server must be ready, or its answer would be a loading one.
        for path in &scope {
            if let Err(e) = ready_server(&tool, None, Some(path)).await {
                if edit.files.contains(path) {
                    return Err(e);
                }
            }
        }
        let uris = scope.iter().filter_map(|p| file_uri(p).ok()).collect();
        let (checked, _) = self.check(&tool, uris, Some(DIAGNOSTICS_WAIT)).await?;
        let mut entries = Vec::new();
        let mut items = Vec::new();
        let (mut new_count, mut fixed_count, mut still, mut unknown) = (0, 0, 0, 0);
        let mut timed_out = Vec::new();
        for c in &checked {
            if c.timed_out {
                timed_out.push(c.file.clone());
                continue;
            }
            let key = FileKey {
                server: c.server.clone(),
                path: c.path.clone(),
            };
            let before = edit.baseline.get(&key);
            if before.is_none() && !c.problems.is_empty() {
                unknown += 1;
            }
            let before = before.map_or(&[][..], Vec::as_slice);
            let (new, fixed) = delta(before, &c.problems);
            still += c.problems.len() - new.len();
            for (tag, list) in [("new", &new), ("fixed", &fixed)] {
                for p in list.iter() {
                    let line = format!("{tag}: {}", problem_line(&c.file, &c.server, p));
                    if entries.iter().any(|e: &Entry| e.line == line) {
                        continue;
                    }
                    if tag == "new" {
                        new_count += 1;
                    } else {
                        fixed_count += 1;
                    }
                    entries.push(Entry::new(c.file.clone(), line));
                    items.push(json!({
                        "change": tag, "file": c.file, "line": p.line, "column": p.column,
                        "severity": p.severity, "code": p.code, "message": p.message,
                        "server": c.server,
                    }));
                }
            }
        }
        self.observe(&tool, &checked);
        // New problems first: they are what the edit broke.
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by_key(|&i| !entries[i].line.starts_with("new: "));
        let entries: Vec<Entry> = order.iter().map(|&i| entries[i].clone()).collect();
        let items: Vec<Value> = order.iter().map(|&i| items[i].clone()).collect();
        let page = Page::cut(&entries, args.offset.unwrap_or(0), DEFAULT_BUDGET);
        let mut text = format!(
            "since the last edit ({}): {new_count} new, {fixed_count} fixed, {still} unchanged\n",
            describe_edit(&tool, &self.texts, &edit)
        );
        text.push_str(&page.render(&entries, "nothing changed"));
        let mut left = Vec::new();
        if page.more() {
            left.push(format!(
                "{} more entries (offset={})",
                page.total - page.end,
                page.end
            ));
        }
        if not_checked > 0 {
            left.push(format!(
                "{not_checked} files of the same servers not checked (past {MAX_DELTA_FILES}; \
                 name them in `files`)"
            ));
        }
        if !timed_out.is_empty() {
            left.push(format!(
                "{} files whose server did not answer in time ({})",
                timed_out.len(),
                timed_out.join(", ")
            ));
        }
        if unknown > 0 {
            left.push(format!(
                "{unknown} files were never checked before the edit: their problems count as new"
            ));
        }
        text.push_str(&left_out_line(&left));
        let mut fields = page_fields(&page);
        let shown: Vec<Value> = items
            .into_iter()
            .skip(page.start)
            .take(page.end.saturating_sub(page.start))
            .collect();
        fields.insert("changes".into(), Value::Array(shown));
        fields.insert("new".into(), json!(new_count));
        fields.insert("fixed".into(), json!(fixed_count));
        fields.insert("unchanged".into(), json!(still));
        fields.insert("checkedFiles".into(), json!(scope.len()));
        fields.insert("notChecked".into(), json!(not_checked));
        Ok(Answer::new(text, Value::Object(fields)).into_result())
    }

    /// The files a delta checks: those written, those with problems before,
    /// those named, then the other files of the same servers (the nearest
    /// directories first), at most [`MAX_DELTA_FILES`]; and how many more
    /// there were.
    async fn delta_scope(
        &self,
        tool: &SessionFacade,
        edit: &Edit,
        named: &[String],
    ) -> ToolResult<(Vec<PathBuf>, usize)> {
        let mut scope: Vec<PathBuf> = Vec::new();
        let add = |path: PathBuf, scope: &mut Vec<PathBuf>| {
            if !scope.contains(&path) {
                scope.push(path);
            }
        };
        for file in &edit.files {
            if let Ok(path) = tool.confine(file) {
                add(path, &mut scope);
            }
        }
        for (key, problems) in edit.baseline.iter() {
            if !problems.is_empty() {
                if let Ok(path) = tool.confine(&key.path) {
                    add(path, &mut scope);
                }
            }
        }
        for file in named {
            add(resolve(tool, file)?, &mut scope);
        }
        // The servers of the written files, and the extensions they handle.
        let servers = tool.servers_brief().await.map_err(describe)?;
        let mut extensions: Vec<String> = Vec::new();
        for path in &edit.files {
            let ext = path
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default();
            for s in servers
                .iter()
                .filter(|s| s.file_extensions.iter().any(|e| e == ext))
            {
                extensions.extend(s.file_extensions.iter().cloned());
            }
        }
        extensions.sort();
        extensions.dedup();
        let roots = tool.roots().to_vec();
        let (mut others, mut beyond) = tokio::task::spawn_blocking(move || {
            source_files(&roots, Some(&extensions), super::scan::MAX_SCAN_FILES)
        })
        .await
        .map_err(|e| format!("listing the files failed: {e}"))?;
        let written_dirs: Vec<PathBuf> = scope
            .iter()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect();
        // Nearest first: files beside a written one, then by path.
        others.retain(|p| !scope.contains(p));
        others.sort_by_key(|p| {
            let near = p
                .parent()
                .map(|d| written_dirs.iter().any(|w| d == w))
                .unwrap_or(false);
            (!near, p.clone())
        });
        for path in others {
            if scope.len() < MAX_DELTA_FILES.max(edit.files.len()) {
                scope.push(path);
            } else {
                beyond += 1;
            }
        }
        Ok((scope, beyond))
    }
}

/// `2 writes by the agent, 1 by rename: src/a.rs, src/b.rs`
fn describe_edit(tool: &SessionFacade, cache: &TextCache, edit: &Edit) -> String {
    let files = Files::new(tool, cache, PositionEncoding::Utf16);
    let mut by = Vec::new();
    if edit.by_agent > 0 {
        by.push(format!(
            "{} write{} by the agent",
            edit.by_agent,
            if edit.by_agent == 1 { "" } else { "s" }
        ));
    }
    if edit.by_rename > 0 {
        by.push(format!(
            "{} rename{}",
            edit.by_rename,
            if edit.by_rename == 1 { "" } else { "s" }
        ));
    }
    let mut names: Vec<String> = edit
        .files
        .iter()
        .take(5)
        .map(|p| files.display_path(p))
        .collect();
    if edit.files.len() + edit.files_left_out > 5 {
        names.push(format!(
            "… {} more",
            edit.files.len() + edit.files_left_out - 5
        ));
    }
    format!("{}: {}", by.join(", "), names.join(", "))
}

/// The trailer every diagnostics answer ends with.
fn left_out_line(parts: &[String]) -> String {
    if parts.is_empty() {
        "left out: nothing\n".to_string()
    } else {
        format!("left out: {}\n", parts.join("; "))
    }
}
