//! `call_hierarchy`: a function's callers (incoming) or callees (outgoing),
//! followed up to [`MAX_DEPTH`] levels, bounded per function
//! ([`MAX_FANOUT`]) and in all ([`MAX_CALLS`], [`MAX_REQUESTS`]); items
//! outside the session's roots are left out and counted, never read.

use super::budget::{Entry, Page, DEFAULT_BUDGET};
use super::partial::partial_view;
use super::*;

/// Deepest level followed.
pub(crate) const MAX_DEPTH: u32 = 3;
/// Most calls listed under one function (the rest counted).
pub(crate) const MAX_FANOUT: usize = 25;
/// Most calls in one answer, all levels.
pub(crate) const MAX_CALLS: usize = 300;
/// Most `callHierarchy/*Calls` requests one answer makes.
pub(crate) const MAX_REQUESTS: usize = 60;

/// One call in the tree.
struct Call {
    depth: usize,
    /// The function at this node: the caller (incoming) or the callee (outgoing).
    name: String,
    kind: &'static str,
    /// Where the function is declared.
    at: Point,
    /// Where the calls are: in the caller's file (incoming), in the parent's
    /// file (outgoing).
    sites: Vec<Point>,
    /// Met before on the way down: not followed again.
    recursive: bool,
}

impl LspTools {
    pub(super) async fn call_hierarchy_inner(
        &self,
        args: CallHierarchyArgs,
    ) -> ToolResult<CallToolResult> {
        let (at, text) = match self.target_at(&args.target).await? {
            Ok(found) => found,
            Err(answer) => return Ok(answer),
        };
        let depth = args.depth.unwrap_or(1);
        if depth == 0 || depth > MAX_DEPTH {
            return Err(format!("depth is 1 to {MAX_DEPTH}"));
        }
        let direction = Direction::parse(args.direction.as_deref())?;
        if capabilities_of(&at.entry)["callHierarchyProvider"].is_null() {
            return Err(format!("{} offers no call hierarchy", at.server()));
        }
        let prepared = at
            .tool
            .request(
                at.server_id(),
                "textDocument/prepareCallHierarchy",
                json!({ "textDocument": at.text_document(), "position": at.position(&text) }),
            )
            .await
            .map_err(describe)?;
        let roots: Vec<Value> = match parse(prepared.get())? {
            Value::Array(items) => items,
            Value::Null => Vec::new(),
            single => vec![single],
        };
        let Some(root) = roots.first().cloned() else {
            return Err(format!(
                "{} finds no function at {} (call hierarchy needs a function or method)",
                at.server(),
                at.label()
            ));
        };
        let (method, member) = match direction {
            Direction::Incoming => ("callHierarchy/incomingCalls", "from"),
            Direction::Outgoing => ("callHierarchy/outgoingCalls", "to"),
        };
        let confinement = at
            .tool
            .confinement()
            .ok_or_else(|| format!("the ACP session {} is closed", at.tool.session_id()))?;
        let mut files = Files::new(&at.tool, &self.texts, at.encoding);
        files.load(&root, &[]).await;
        let top = files.point(
            root["uri"].as_str().unwrap_or_default(),
            &root["selectionRange"]["start"],
        );
        let top_name = root["name"].as_str().unwrap_or("?").to_string();
        let top_kind = symbol_kind(root["kind"].as_u64().unwrap_or(0));

        // Depth first: each caller's own callers right under it.
        let mut walk = Walk {
            tool: &at.tool,
            server_id: at.server_id(),
            method,
            member,
            direction,
            depth: depth as usize,
            confinement,
            files,
            calls: Vec::new(),
            left_out: LeftOut::default(),
            requests: 0,
        };
        walk.expand(&root, 1, &mut vec![item_key(&root)]).await?;
        let Walk {
            calls, left_out, ..
        } = walk;
        let what = match direction {
            Direction::Incoming => "callers",
            Direction::Outgoing => "callees",
        };
        let entries: Vec<Entry> = calls.iter().map(|c| call_entry(c, direction)).collect();
        let page = Page::cut(&entries, args.offset.unwrap_or(0), DEFAULT_BUDGET);
        let mut text = format!(
            "{} of {top_kind} {top_name} ({}){}:\n",
            match direction {
                Direction::Incoming => "incoming calls",
                Direction::Outgoing => "outgoing calls",
            },
            top.label(),
            if depth > 1 {
                format!(", {depth} levels")
            } else {
                String::new()
            }
        );
        text.push_str(&page.render(&entries, &format!("no {what} found")));
        text.push_str(&left_out.line());
        let structured: Vec<Value> = calls
            .iter()
            .skip(page.start)
            .take(page.end.saturating_sub(page.start))
            .map(|c| {
                json!({ "depth": c.depth, "name": c.name, "kind": c.kind, "file": c.at.file,
                        "line": c.at.line, "column": c.at.column, "recursive": c.recursive,
                        "calls": c.sites.iter().map(|s| json!({ "file": s.file, "line": s.line, "column": s.column })).collect::<Vec<_>>() })
            })
            .collect();
        let mut fields = page_fields(&page);
        fields.insert("calls".into(), Value::Array(structured));
        fields.insert("leftOut".into(), left_out.json());
        let hint = partial_view(&at.tool, &at.entry, &at.path).await;
        Ok(Answer::new(text, Value::Object(fields))
            .noted(at.note.as_deref())
            .hinted(hint)
            .into_result())
    }
}

/// What an answer did not follow, by why.
#[derive(Default)]
struct LeftOut {
    outside: usize,
    fanout: usize,
    unexplored: usize,
    failed: usize,
}

impl LeftOut {
    fn line(&self) -> String {
        let mut parts = Vec::new();
        if self.outside > 0 {
            parts.push(format!("{} outside the session's roots", self.outside));
        }
        if self.fanout > 0 {
            parts.push(format!(
                "{} past {MAX_FANOUT} calls under one function or {MAX_CALLS} in all",
                self.fanout
            ));
        }
        if self.unexplored > 0 {
            parts.push(format!(
                "{} functions not followed (past {MAX_REQUESTS} requests)",
                self.unexplored
            ));
        }
        if self.failed > 0 {
            parts.push(format!("{} the server could not list", self.failed));
        }
        if parts.is_empty() {
            return String::new();
        }
        format!("left out: {}\n", parts.join("; "))
    }

    fn json(&self) -> Value {
        json!({ "outsideRoots": self.outside, "pastFanout": self.fanout,
                "notFollowed": self.unexplored, "failed": self.failed })
    }
}

/// One answer's walk down the hierarchy.
struct Walk<'a> {
    tool: &'a SessionFacade,
    server_id: &'a str,
    method: &'static str,
    /// `from` (incoming) or `to` (outgoing).
    member: &'static str,
    direction: Direction,
    depth: usize,
    confinement: crate::gate::confine::Confinement,
    files: Files<'a>,
    calls: Vec<Call>,
    left_out: LeftOut,
    requests: usize,
}

impl Walk<'_> {
    /// The calls of `item` at `level`, each followed (depth first) while
    /// levels and bounds are left; `path`: the items above, for recursion.
    fn expand<'b>(
        &'b mut self,
        item: &'b Value,
        level: usize,
        path: &'b mut Vec<String>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolResult<()>> + Send + 'b>> {
        Box::pin(async move {
            if self.requests >= MAX_REQUESTS || self.calls.len() >= MAX_CALLS {
                self.left_out.unexplored += 1;
                return Ok(());
            }
            self.requests += 1;
            let answer = match self
                .tool
                .request(self.server_id, self.method, json!({ "item": item }))
                .await
            {
                Ok(answer) => answer,
                Err(e) if level == 1 => {
                    return Err(format!(
                        "the server cannot list {} calls: {}",
                        match self.direction {
                            Direction::Incoming => "incoming",
                            Direction::Outgoing => "outgoing",
                        },
                        describe(e)
                    ))
                }
                Err(_) => {
                    self.left_out.failed += 1;
                    return Ok(());
                }
            };
            let answer = parse(answer.get())?;
            let mut children = Vec::new();
            for call in answer.as_array().into_iter().flatten() {
                let uri = call[self.member]["uri"].as_str().unwrap_or_default();
                if matches!(self.confinement.check_uri(uri), Ok(Some(_))) {
                    children.push(call.clone());
                } else {
                    self.left_out.outside += 1;
                }
            }
            if children.len() > MAX_FANOUT {
                self.left_out.fanout += children.len() - MAX_FANOUT;
                children.truncate(MAX_FANOUT);
            }
            self.files.load(&Value::Array(children.clone()), &[]).await;
            for call in &children {
                if self.calls.len() >= MAX_CALLS {
                    self.left_out.fanout += 1;
                    continue;
                }
                let other = &call[self.member];
                let other_uri = other["uri"].as_str().unwrap_or_default();
                // Incoming call sites are in the caller's file; outgoing ones in this item's.
                let site_uri = match self.direction {
                    Direction::Incoming => other_uri,
                    Direction::Outgoing => item["uri"].as_str().unwrap_or_default(),
                };
                let sites = call["fromRanges"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|range| self.files.point(site_uri, &range["start"]))
                    .collect();
                let key = item_key(other);
                let recursive = path.contains(&key);
                self.calls.push(Call {
                    depth: level,
                    name: other["name"].as_str().unwrap_or("?").to_string(),
                    kind: symbol_kind(other["kind"].as_u64().unwrap_or(0)),
                    at: self
                        .files
                        .point(other_uri, &other["selectionRange"]["start"]),
                    sites,
                    recursive,
                });
                if !recursive && level < self.depth {
                    path.push(key);
                    self.expand(other, level + 1, path).await?;
                    path.pop();
                }
            }
            Ok(())
        })
    }
}

/// A call hierarchy item's identity: its file and where its name is.
fn item_key(item: &Value) -> String {
    format!(
        "{}:{}:{}",
        item["uri"].as_str().unwrap_or_default(),
        item["selectionRange"]["start"]["line"],
        item["selectionRange"]["start"]["character"]
    )
}

/// `  src/lib.rs:11:5: function total — calls at 11:19: l.tally() + …`
fn call_entry(call: &Call, direction: Direction) -> Entry {
    let indent = "  ".repeat(call.depth - 1);
    let sites = call
        .sites
        .iter()
        .map(|s| format!("{}:{}", s.line, s.column))
        .collect::<Vec<_>>()
        .join(", ");
    let first = call
        .sites
        .first()
        .map(|s| s.text.as_str())
        .unwrap_or_default();
    let (verb, site_file) = match direction {
        Direction::Incoming => ("calls it at", String::new()),
        Direction::Outgoing => (
            "called at",
            call.sites
                .first()
                .map(|s| format!("{}:", s.file))
                .unwrap_or_default(),
        ),
    };
    let recursive = if call.recursive { " (recursive)" } else { "" };
    Entry::new(
        call.at.file.clone(),
        format!(
            "{indent}{} {} {}{recursive} — {verb} {site_file}{sites}: {first}",
            call.at.label(),
            call.kind,
            call.name
        ),
    )
}
