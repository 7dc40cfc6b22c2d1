//! `rename`: the server's semantic rename, applied through the editor (its
//! `fs/write_text_file`) or to disk, or shown as a diff (`dry_run`); and
//! what it did not touch: the old name's textual occurrences left in the
//! edited files (doc comments, strings: rust-analyzer leaves doc-test
//! examples as they were) and in other files under the roots (files the
//! server does not index), so the agent can decide.

use super::budget::{Entry, Page, DEFAULT_BUDGET};
use super::found::line_text;
use super::names::identifier_near;
use super::scan::{find_in, occurrences, source_files, Hit, Scan, MAX_SCAN_FILES};
use super::*;
use crate::edit::{
    apply_to_disk, apply_with_agent_fs, dry_run, plan_on_disk, AgentApplyError, ApplyReport,
    Decisions, FileOperation, Plan,
};
use crate::mcp::journal::Writer;
use crate::session_facade::RenameEdit;

/// Occurrences of the old name kept for the answer (the rest counted).
const MAX_LEFTOVERS: usize = 200;
/// Occurrences in code asked their definition, to leave out other symbols
/// of the same name.
const MAX_JUDGED_LEFTOVERS: usize = 30;
/// How long the diff that finds untouched occurrences may take per file.
const DIFF_DEADLINE: Duration = Duration::from_secs(2);

/// What the rename did not change.
#[derive(Default)]
struct Leftovers {
    hits: Vec<Hit>,
    /// Past [`MAX_LEFTOVERS`].
    more: usize,
    /// Files searched, and those that could not be (too many, too large, not text).
    files_read: usize,
    files_skipped: usize,
    /// Occurrences in code the server resolves to another symbol of the name.
    other_symbols: usize,
}

impl LspTools {
    pub(super) async fn rename_inner(&self, args: RenameArgs) -> ToolResult<CallToolResult> {
        let (at, text) = match self.target_at(&args.target).await? {
            Ok(found) => found,
            Err(answer) => return Ok(answer),
        };
        let old_name = at
            .name
            .clone()
            .or_else(|| identifier_near(line_text(&text, at.line), at.column).map(|w| w.text));
        let tool = &at.tool;
        let RenameEdit {
            edit,
            encoding,
            server,
        } = tool
            .rename_edit(&at.file_location(), &args.new_name, None)
            .await
            .map_err(describe_rename)?;
        let confinement = tool
            .confinement()
            .ok_or_else(|| format!("the ACP session {} is closed", tool.session_id()))?;
        // Planned on disk: the diff of a dry run, and what the rename leaves.
        let plan = {
            let (edit, confinement) = (edit.clone(), confinement.clone());
            tokio::task::spawn_blocking(move || {
                let writable = |p: &Path| confinement.is_writable(p);
                plan_on_disk(&edit, encoding, &writable, &Decisions::default())
            })
            .await
            .map_err(|e| format!("the edit could not be planned: {e}"))?
            .map_err(|e| format!("the server's edit cannot be applied: {e}"))
            .map(Arc::new)
        };
        let leftovers = match (&old_name, &plan) {
            (Some(old), Ok(plan)) if *old != args.new_name => {
                let (plan, old, roots, confinement) = (
                    Arc::clone(plan),
                    old.clone(),
                    tool.roots().to_vec(),
                    confinement.clone(),
                );
                tokio::task::spawn_blocking(move || leftovers(&plan, &old, &roots, &confinement))
                    .await
                    .map_err(|e| format!("the search for the old name failed: {e}"))?
            }
            _ => Leftovers::default(),
        };
        let leftovers = self.judge(&at, &text, leftovers).await;
        let old = old_name.as_deref().unwrap_or("the old name");
        if args.dry_run == Some(true) {
            let plan = plan?;
            let answer = dry_run_answer(tool, &plan, &server, old, &args, &leftovers, &self.texts);
            return Ok(answer.noted(at.note.as_deref()).into_result());
        }
        // The baseline of `diagnostics {since: "last_edit"}` is what was known before this.
        let written: Vec<PathBuf> = match &plan {
            Ok(plan) => plan
                .operations
                .iter()
                .flat_map(|op| match op {
                    FileOperation::Write { path, .. }
                    | FileOperation::Create { path, .. }
                    | FileOperation::Delete { path, .. } => vec![path.clone()],
                    FileOperation::Rename { from, to, .. } => vec![from.clone(), to.clone()],
                })
                .collect(),
            Err(_) => crate::edit::touched_paths(&edit).unwrap_or_default(),
        };
        self.journal
            .wrote(tool.session_id(), &written, Writer::Rename);
        let (report, through) = self.apply(tool, &edit, encoding, &plan).await?;
        let answer = report_answer(
            tool,
            &self.texts,
            &report,
            &server,
            old,
            &args.new_name,
            through,
            &leftovers,
        );
        Ok(answer.noted(at.note.as_deref()).into_result())
    }

    /// Leaves out the occurrences in code that the server resolves to
    /// another symbol of the same name (the first [`MAX_JUDGED_LEFTOVERS`]
    /// asked); those it resolves to the renamed symbol, or to nothing (a
    /// file it does not index), stay. Asked before anything is written.
    async fn judge(&self, at: &At, text: &Text, mut leftovers: Leftovers) -> Leftovers {
        let Some(target) = self
            .definition_of(at, &at.path, at.line, at.column, text)
            .await
        else {
            return leftovers;
        };
        let mut kept = Vec::new();
        let mut asked = 0;
        for hit in std::mem::take(&mut leftovers.hits) {
            if hit.context != "code" || asked >= MAX_JUDGED_LEFTOVERS {
                kept.push(hit);
                continue;
            }
            asked += 1;
            let Ok(hit_text) = read_text(
                &at.tool,
                &self.texts,
                &hit.path,
                &hit.path.display().to_string(),
            )
            .await
            else {
                kept.push(hit);
                continue;
            };
            match self
                .definition_of(at, &hit.path, hit.line, hit.column, &hit_text)
                .await
            {
                Some(definition) if definition != target => leftovers.other_symbols += 1,
                _ => kept.push(hit),
            }
        }
        leftovers.hits = kept;
        leftovers
    }

    /// Where the file's server says the name at `line`:`column` is defined:
    /// (uri, line) of its first definition.
    async fn definition_of(
        &self,
        at: &At,
        path: &Path,
        line: u32,
        column: usize,
        text: &Text,
    ) -> Option<(String, u64)> {
        let entry = ready_server(&at.tool, None, Some(path)).await.ok()?;
        let character = text
            .index
            .character_of_column(&text.text, u64::from(line), column, encoding_of(&entry))
            .ok()?;
        let result = at
            .tool
            .request(
                &entry.server_id,
                "textDocument/definition",
                json!({ "textDocument": { "uri": file_uri(path).ok()? },
                        "position": { "line": line, "character": character } }),
            )
            .await
            .ok()?;
        let result: Value = serde_json::from_str(result.get()).ok()?;
        let first = match result {
            Value::Array(items) => items.into_iter().next()?,
            Value::Null => return None,
            single => single,
        };
        let (uri, range) = match first.get("targetUri") {
            Some(uri) => (uri.clone(), first["targetSelectionRange"].clone()),
            None => (first["uri"].clone(), first["range"].clone()),
        };
        Some((uri.as_str()?.to_string(), range["start"]["line"].as_u64()?))
    }

    /// Writes the edit through the editor when it writes files, else to
    /// disk (the plan made there); returns what was done and through what.
    async fn apply(
        &self,
        tool: &SessionFacade,
        edit: &Value,
        encoding: PositionEncoding,
        plan: &Result<Arc<Plan>, String>,
    ) -> ToolResult<(ApplyReport, &'static str)> {
        if let Some(editor) = self.editor.as_ref().filter(|e| e.enabled()) {
            let fs = editor.for_session(&self.gate, tool.session_id());
            match apply_with_agent_fs(
                edit,
                &fs,
                encoding,
                |p: &Path| tool.is_writable(p),
                &Decisions::default(),
            )
            .await
            {
                Ok(report) => return Ok((report, "the editor (fs/write_text_file)")),
                // ACP's fs methods cannot rename or delete a file (renaming
                // a module renames its file); nothing was written, so the
                // whole edit goes to disk instead.
                Err(AgentApplyError::Unsupported { .. }) => {}
                Err(e) => {
                    return Err(format!(
                        "the edit could not be applied through the editor: {e}"
                    ))
                }
            }
        }
        // Writing the files is blocking work: off the runtime threads.
        let plan = Arc::clone(plan.as_ref().map_err(String::clone)?);
        let report =
            tokio::task::spawn_blocking(move || apply_to_disk(&plan).map_err(|e| e.to_string()))
                .await
                .map_err(|e| format!("the edit could not be applied: {e}"))??;
        Ok((report, "the disk"))
    }
}

/// The old name's whole-word occurrences the plan does not change: in the
/// files it writes (by a diff of their old and new text), and in every
/// other file under the roots.
fn leftovers(
    plan: &Plan,
    old: &str,
    roots: &[PathBuf],
    confinement: &crate::gate::confine::Confinement,
) -> Leftovers {
    let mut scan = Scan::default();
    let mut planned = Vec::new();
    for op in &plan.operations {
        match op {
            FileOperation::Write {
                path,
                old: before,
                new,
                ..
            } => {
                planned.push(path.clone());
                let mut here = Scan::default();
                find_in(path, before, old, usize::MAX, &mut here);
                if here.hits.is_empty() {
                    continue;
                }
                let untouched = untouched_lines(before, new, old);
                for hit in here.hits {
                    if untouched.contains(&(hit.line, hit.column)) {
                        if scan.hits.len() < MAX_LEFTOVERS {
                            scan.hits.push(hit);
                        } else {
                            scan.hits_left_out += 1;
                        }
                    }
                }
            }
            FileOperation::Rename { from, to, .. } => {
                planned.push(from.clone());
                planned.push(to.clone());
            }
            FileOperation::Create { path, .. } | FileOperation::Delete { path, .. } => {
                planned.push(path.clone());
            }
        }
    }
    let (files, beyond) = source_files(roots, None, MAX_SCAN_FILES);
    let others: Vec<PathBuf> = files.into_iter().filter(|f| !planned.contains(f)).collect();
    let left = MAX_LEFTOVERS.saturating_sub(scan.hits.len());
    let found = occurrences(&others, old, confinement, left);
    scan.hits.extend(found.hits);
    Leftovers {
        more: scan.hits_left_out + found.hits_left_out,
        hits: scan.hits,
        files_read: found.files_read + planned.len(),
        files_skipped: found.files_skipped + beyond,
        other_symbols: 0,
    }
}

/// The (line, column) of every whole-word occurrence of `name` in `before`
/// that the change to `after` leaves exactly as it was (no character of
/// it, and no point between them, edited).
fn untouched_lines(before: &str, after: &str, name: &str) -> Vec<(u32, usize)> {
    use similar::{Algorithm, DiffOp};
    let diff = similar::TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .deadline(std::time::Instant::now() + DIFF_DEADLINE)
        .diff_chars(before, after);
    // Old character ranges that stay equal.
    let equal: Vec<(usize, usize)> = diff
        .ops()
        .iter()
        .filter_map(|op| match op {
            DiffOp::Equal { old_index, len, .. } => Some((*old_index, old_index + len)),
            _ => None,
        })
        .collect();
    // Old character indices where something was inserted or removed.
    let edits: Vec<usize> = diff
        .ops()
        .iter()
        .filter_map(|op| match op {
            DiffOp::Equal { .. } => None,
            DiffOp::Delete { old_index, .. }
            | DiffOp::Insert { old_index, .. }
            | DiffOp::Replace { old_index, .. } => Some(*old_index),
        })
        .collect();
    let mut out = Vec::new();
    let mut chars_before = 0;
    for (line_number, line) in before.split('\n').enumerate() {
        for range in super::names::word_occurrences(line, name) {
            let column = line[..range.start].chars().count();
            let start = chars_before + column;
            let end = start + name.chars().count();
            let kept = equal.iter().any(|&(a, b)| a <= start && end <= b)
                && !edits.iter().any(|&i| start <= i && i <= end);
            if kept {
                out.push((line_number as u32, column));
            }
        }
        chars_before += line.chars().count() + 1;
    }
    out
}

/// The leftovers as lines: `file:line:col: text (doc comment)`, at most
/// half the budget, the rest counted.
fn leftover_lines(
    tool: &SessionFacade,
    cache: &TextCache,
    old: &str,
    leftovers: &Leftovers,
) -> String {
    let others = match leftovers.other_symbols {
        0 => String::new(),
        n => format!(
            "({n} more occurrence{} in code name{} another symbol, by the server's definitions)\n",
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" }
        ),
    };
    format!("{}{others}", leftover_list(tool, cache, old, leftovers))
}

fn leftover_list(
    tool: &SessionFacade,
    cache: &TextCache,
    old: &str,
    leftovers: &Leftovers,
) -> String {
    if leftovers.hits.is_empty() {
        if leftovers.files_skipped > 0 {
            return format!(
                "the old name `{old}` occurs nowhere else in the {} files searched ({} not \
                 searched: too many, too large or not text)\n",
                leftovers.files_read, leftovers.files_skipped
            );
        }
        return format!("the old name `{old}` occurs nowhere else as a word\n");
    }
    let files = Files::new(tool, cache, PositionEncoding::Utf16);
    let entries: Vec<Entry> = leftovers
        .hits
        .iter()
        .map(|h| {
            let file = files.display_path(&h.path);
            let text: String = h.text.chars().take(120).collect();
            Entry::new(
                file.clone(),
                format!(
                    "{file}:{}:{}: {text} ({})",
                    h.line + 1,
                    h.column + 1,
                    h.context
                ),
            )
        })
        .collect();
    let total = leftovers.hits.len() + leftovers.more;
    let mut text = format!(
        "not changed: {total} textual occurrence{} of `{old}` the server's rename left \
         (comments, docs, strings, or files it does not index; check each):\n",
        if total == 1 { "" } else { "s" }
    );
    let page = Page::cut(&entries, 0, DEFAULT_BUDGET / 2);
    for entry in &entries[..page.end] {
        text.push_str(&entry.line);
        text.push('\n');
    }
    if page.end < entries.len() || leftovers.more > 0 {
        let more = entries.len() - page.end + leftovers.more;
        text.push_str(&format!(
            "… and {more} more (search the text for `{old}` to see them all)\n"
        ));
    }
    text
}

fn leftover_items(tool: &SessionFacade, cache: &TextCache, leftovers: &Leftovers) -> Value {
    let files = Files::new(tool, cache, PositionEncoding::Utf16);
    Value::Array(
        leftovers
            .hits
            .iter()
            .take(50)
            .map(|h| {
                json!({ "file": files.display_path(&h.path), "line": h.line + 1,
                        "column": h.column + 1, "context": h.context, "text": h.text })
            })
            .collect(),
    )
}

fn dry_run_answer(
    tool: &SessionFacade,
    plan: &Plan,
    server: &str,
    old: &str,
    args: &RenameArgs,
    leftovers: &Leftovers,
    cache: &TextCache,
) -> Answer {
    let diff = dry_run(plan, tool.root());
    let mut current = String::new();
    let entries: Vec<Entry> = diff
        .lines()
        .map(|line| {
            if let Some(name) = line.strip_prefix("diff --git a/") {
                current = name.split(" b/").next().unwrap_or(name).to_string();
            }
            Entry::new(current.clone(), line)
        })
        .collect();
    let page = Page::cut(&entries, args.offset.unwrap_or(0), DEFAULT_BUDGET);
    let files = entries
        .iter()
        .filter(|e| e.line.starts_with("diff --git "))
        .count();
    let mut text = format!(
        "dry run, nothing written: renaming `{old}` to `{}` with {server} changes {files} \
         file{}:\n",
        args.new_name,
        if files == 1 { "" } else { "s" }
    );
    text.push_str(&page.render(&entries, "(the edit changes no text)"));
    text.push_str(&leftover_lines(tool, cache, old, leftovers));
    let mut fields = page_fields(&page);
    fields.insert(
        "diff".into(),
        Value::String(
            entries[page.start.min(entries.len())..page.end.min(entries.len())]
                .iter()
                .map(|e| format!("{}\n", e.line))
                .collect(),
        ),
    );
    fields.insert("dryRun".into(), Value::Bool(true));
    fields.insert("leftovers".into(), leftover_items(tool, cache, leftovers));
    Answer::new(text, Value::Object(fields))
}

#[allow(clippy::too_many_arguments)]
fn report_answer(
    tool: &SessionFacade,
    cache: &TextCache,
    report: &ApplyReport,
    server: &str,
    old: &str,
    new_name: &str,
    through: &str,
    leftovers: &Leftovers,
) -> Answer {
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
    let mut text =
        format!("renamed `{old}` to `{new_name}` with {server}, written through {through}:\n");
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
    text.push_str(&leftover_lines(tool, cache, old, leftovers));
    Answer::new(
        text,
        json!({ "changed": changed, "created": created, "deleted": deleted,
                "renamed": renamed.iter().map(|(a, b)| json!({"from": a, "to": b})).collect::<Vec<_>>(),
                "leftovers": leftover_items(tool, cache, leftovers) }),
    )
}
