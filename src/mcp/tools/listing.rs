//! The tools that list what the session has: `lsp_servers`, the raw
//! `lsp_request`, `document_symbols`, `workspace_symbols`, `code_actions`.

use super::budget::{Entry, Page, DEFAULT_BUDGET};
use super::*;

/// Most bytes of a raw `lsp_request` result shown (a raw answer has no
/// pages: past it the text is cut, saying so).
const RAW_BUDGET: usize = 8 * DEFAULT_BUDGET;

impl LspTools {
    pub(super) async fn lsp_servers_inner(&self) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        let servers = tool.servers().await.map_err(describe)?;
        let mut text = String::new();
        for s in &servers {
            text.push_str(&format!(
                "{} [{}] root={} languages={} encoding={} serverId={}\n",
                s.name,
                s.status().as_str(),
                s.workspace_path,
                s.ours().language_ids.join(","),
                s.ours().position_encoding,
                s.server_id,
            ));
        }
        if servers.is_empty() {
            text.push_str("no language server serves this session's roots\n");
        }
        let structured: Vec<Value> = servers
            .iter()
            .map(|s| {
                json!({
                    "serverId": s.server_id, "name": s.name, "state": s.state,
                    "status": s.status(), "workspacePath": s.workspace_path,
                    "languageIds": s.ours().language_ids,
                    "fileExtensions": s.file_extensions,
                    "positionEncoding": s.ours().position_encoding,
                })
            })
            .collect();
        Ok(ok(text, json!({ "servers": structured })))
    }

    pub(super) async fn lsp_request_inner(
        &self,
        args: LspRequestArgs,
    ) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        let params = args.params.unwrap_or(Value::Null);
        let file = crate::session_facade::params_file(&params);
        let by_id = match &args.server {
            Some(server) => tool
                .servers()
                .await
                .map_err(describe)?
                .into_iter()
                .find(|s| s.server_id == *server),
            None => None,
        };
        let entry = match by_id {
            Some(entry) => wait_ready(&tool, entry).await?,
            None => ready_server(&tool, args.server.as_deref(), file.as_deref()).await?,
        };
        let server_id = entry.server_id.as_str();
        let result = tool
            .request(server_id, &args.method, params)
            .await
            .map_err(describe)?;
        let raw = result.get();
        if raw.len() > RAW_BUDGET {
            let mut cut = RAW_BUDGET;
            while !raw.is_char_boundary(cut) {
                cut -= 1;
            }
            return Ok(ok(
                format!(
                    "{}\n… cut at {cut} of {} bytes: ask a narrower request (one file, a \
                     range), or use the dedicated tools, whose answers have pages",
                    &raw[..cut],
                    raw.len()
                ),
                json!({ "serverId": server_id, "cut": true, "bytes": raw.len() }),
            ));
        }
        let value: Value = parse(raw)?;
        Ok(ok(
            raw.to_string(),
            json!({ "serverId": server_id, "lspResult": value }),
        ))
    }

    pub(super) async fn document_symbols_inner(
        &self,
        args: FileArgs,
    ) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        let path = resolve(&tool, &args.file)?;
        let entry = ready_server(&tool, None, Some(&path)).await?;
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
        let mut symbols = Vec::new();
        for item in result.as_array().into_iter().flatten() {
            collect_symbols(&mut files, item, Some(&path), 0, &mut symbols);
        }
        Ok(render_symbols(
            &symbols,
            &format!("{} has no symbols", args.file),
            args.offset.unwrap_or(0),
        )
        .into_result())
    }

    pub(super) async fn workspace_symbols_inner(
        &self,
        args: WorkspaceSymbolsArgs,
    ) -> ToolResult<CallToolResult> {
        let tool = self.session().await?;
        let confinement = tool
            .confinement()
            .ok_or_else(|| format!("the ACP session {} is closed", tool.session_id()))?;
        let servers = tool.servers().await.map_err(describe)?;
        let chosen: Vec<ServerEntry> = servers
            .into_iter()
            .filter(|s| args.server.as_deref().is_none_or(|n| s.name == n))
            .collect();
        if chosen.is_empty() {
            return Err("no language server of this session matches".into());
        }
        // (server encoding, symbol) inside the roots, in the servers' order.
        let mut found: Vec<(PositionEncoding, Value)> = Vec::new();
        let mut outside = 0;
        let mut failures = Vec::new();
        for entry in chosen {
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
            match tool
                .request(
                    &entry.server_id,
                    "workspace/symbol",
                    json!({ "query": args.query }),
                )
                .await
            {
                Ok(result) => {
                    let result: Value = parse(result.get())?;
                    let Value::Array(items) = result else {
                        continue;
                    };
                    for item in items {
                        let uri = item["location"]["uri"].as_str().unwrap_or_default();
                        match confinement.check_uri(uri) {
                            Ok(Some(_)) => found.push((encoding_of(&entry), item)),
                            _ => outside += 1,
                        }
                    }
                }
                Err(e) => failures.push(format!("{name}: {}", describe(e))),
            }
        }
        if found.is_empty() && !failures.is_empty() {
            return Err(failures.join("\n"));
        }
        // The page first (lines from the servers' positions), then only its files read.
        let offset = args.offset.unwrap_or(0);
        let entries: Vec<Entry> = found
            .iter()
            .map(|(_, item)| {
                let uri = item["location"]["uri"].as_str().unwrap_or_default();
                let line = item["location"]["range"]["start"]["line"]
                    .as_u64()
                    .unwrap_or(0);
                Entry::new(
                    uri,
                    format!(
                        "{} {} {uri}:{}:1 — {}",
                        symbol_kind(item["kind"].as_u64().unwrap_or(0)),
                        item["name"].as_str().unwrap_or("?"),
                        line + 1,
                        item["containerName"].as_str().unwrap_or_default()
                    ),
                )
            })
            .collect();
        let page = Page::cut(&entries, offset, DEFAULT_BUDGET);
        let mut symbols = Vec::new();
        for (encoding, item) in found
            .iter()
            .skip(page.start)
            .take(page.end.saturating_sub(page.start))
        {
            let mut files = Files::new(&tool, &self.texts, *encoding);
            files.load(item, &[]).await;
            collect_symbols(&mut files, item, None, 0, &mut symbols);
        }
        let mut answer =
            render_symbols(&symbols, &format!("no symbol matches {:?}", args.query), 0);
        // The page's own count is of the page; the whole list's decides what is left.
        let lines: Vec<&str> = answer.text.lines().collect();
        let mut text = lines.join("\n");
        text.push('\n');
        if let Some(rest) = page.rest(&entries) {
            text.push_str(&rest);
            text.push('\n');
        }
        if outside > 0 {
            text.push_str(&format!(
                "{outside} symbol{} outside the session's roots left out\n",
                if outside == 1 { "" } else { "s" }
            ));
        }
        if !failures.is_empty() {
            text.push_str(&failures.join("\n"));
            text.push('\n');
        }
        answer.text = text;
        for (key, value) in page_fields(&page) {
            answer.structured.insert(key, value);
        }
        answer
            .structured
            .insert("outsideRoots".into(), json!(outside));
        Ok(answer.into_result())
    }

    pub(super) async fn code_actions_inner(
        &self,
        args: CodeActionsArgs,
    ) -> ToolResult<CallToolResult> {
        let (at, text) = self.at_exact(&args.file, args.line, args.column).await?;
        let start = at.position(&text);
        let end = match (args.end_line, args.end_column) {
            (None, None) => start.clone(),
            (end_line, end_column) => {
                let end_line = end_line.unwrap_or(args.line);
                let end_column = end_column.unwrap_or(args.column);
                let character = lsp_position(&text, &at.path, end_line, end_column, at.encoding)?;
                json!({ "line": end_line - 1, "character": character })
            }
        };
        if capabilities_of(&at.entry)["codeActionProvider"].is_null() {
            return Err(format!("{} offers no code actions", at.server()));
        }
        let result = at
            .tool
            .request(
                at.server_id(),
                "textDocument/codeAction",
                json!({
                    "textDocument": at.text_document(),
                    "range": { "start": start, "end": end },
                    "context": { "diagnostics": [] },
                }),
            )
            .await
            .map_err(describe)?;
        let result: Value = parse(result.get())?;
        let mut lines = Vec::new();
        let mut items = Vec::new();
        for action in result.as_array().into_iter().flatten() {
            let title = action["title"].as_str().unwrap_or("?");
            let kind = action["kind"].as_str().unwrap_or("");
            lines.push(if kind.is_empty() {
                title.to_string()
            } else {
                format!("{title} ({kind})")
            });
            items.push(json!({ "title": title, "kind": action["kind"], "isPreferred": action["isPreferred"] }));
        }
        let answer = Answer::new(
            list(&lines, "no code actions here"),
            json!({ "actions": items }),
        );
        Ok(answer.noted(at.note.as_deref()).into_result())
    }
}
