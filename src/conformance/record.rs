//! `acp-lsp conformance --record-fixtures`: plays a scenario's script
//! against acp-lsp and the real language servers with `--record`, then
//! stores the recording in fixture form (placeholders, workspace steps where
//! they happened) and `expect/`.

use super::drive::{drive, DriveOptions, MARK_METHOD};
use super::fixture::{
    copy_workspace, parse_line, read_tree, Body, Dir, Line, Scenario, WorkspaceStep,
};
use super::normalize::{placeholder_for, Bindings, ROOT};
use super::report::Outcome;
use super::transcript::Session;
use super::ConformanceError;
use serde_json::Value;
use std::path::Path;

/// Re-records a scenario against acp-lsp and the real servers: rewrites
/// `session.jsonl` (and `expect/` when the session wrote).
pub(crate) async fn record_fixture(
    scenario: &Scenario,
    acp_lsp: &Path,
) -> Result<Outcome, ConformanceError> {
    let started = std::time::Instant::now();
    let (_temp, base) = super::scratch_dir()?;
    let root = base.join("ws");
    let record = base.join("record.jsonl");
    let options = DriveOptions {
        command: vec![
            acp_lsp.as_os_str().to_owned(),
            "proxy".into(),
            // As in replay: no MCP entry, whose socket and token vary per run.
            "--mcp".into(),
            "off".into(),
            "--config".into(),
            "{config}".into(),
            "--record".into(),
            "{record}".into(),
            "--".into(),
            "{agent}".into(),
        ],
        acp_lsp: acp_lsp.to_path_buf(),
        acp_lsp_ids: true,
    };
    let session = match drive(scenario, &options, Some(&record), &root, &base).await {
        Ok(session) => session,
        Err(failure) => {
            return Ok(Outcome {
                scenario: scenario.name.clone(),
                passed: false,
                checked: 0,
                failure: Some(failure),
                millis: started.elapsed().as_millis(),
                verdicts: Vec::new(),
            })
        }
    };
    let recorded =
        std::fs::read_to_string(&record).map_err(ConformanceError::io("reading the recording"))?;
    let lines = fixture_lines(scenario, &recorded, &session.bindings.root);
    let count = lines.len();
    let mut out = lines.join("\n");
    out.push('\n');
    std::fs::write(scenario.dir.join("session.jsonl"), out)
        .map_err(ConformanceError::io("writing session.jsonl"))?;
    write_expect(scenario, &session, &base)?;
    Ok(Outcome {
        scenario: scenario.name.clone(),
        passed: true,
        checked: count,
        failure: None,
        millis: started.elapsed().as_millis(),
        verdicts: Vec::new(),
    })
}

/// The proxy's recording in fixture form: placeholders for the root and the
/// serverIds, the workspace steps where their marks went.
fn fixture_lines(scenario: &Scenario, recorded: &str, root: &str) -> Vec<String> {
    let mut bindings = Bindings::new(root);
    for text in recorded.lines() {
        let Ok(line) = parse_line(0, text) else {
            continue;
        };
        if let (
            Dir::ProxyToServer(id),
            Body::Spawn {
                name,
                root: server_root,
            },
        ) = (&line.dir, &line.body)
        {
            bindings.servers.insert(
                placeholder_for(name, Path::new(server_root), root),
                id.clone(),
            );
        }
    }
    let steps: Vec<&Line> = scenario.lines.iter().collect();
    let mut out = Vec::new();
    for text in recorded.lines() {
        let Ok(line) = parse_line(0, text) else {
            out.push(bindings.to_recorded(text));
            continue;
        };
        if let Body::Message(raw) = &line.body {
            if raw.get().contains(MARK_METHOD) {
                if line.dir == Dir::EditorToProxy {
                    let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                    if let Some(step) = value["params"]["step"]
                        .as_u64()
                        .and_then(|s| steps.get(s as usize))
                    {
                        out.push(step.source.clone());
                    }
                }
                continue;
            }
        }
        out.push(bindings.to_recorded(text));
    }
    out
}

fn write_expect(
    scenario: &Scenario,
    session: &Session,
    base: &Path,
) -> Result<(), ConformanceError> {
    let steps_write = scenario.lines.iter().any(|l| {
        matches!(
            l.body,
            Body::Step(WorkspaceStep::Write { .. } | WorkspaceStep::Remove(_))
        )
    });
    let expect = scenario.expect();
    if session.buffers.is_empty() && !steps_write {
        if expect.exists() {
            std::fs::remove_dir_all(&expect).map_err(ConformanceError::io("removing expect/"))?;
        }
        return Ok(());
    }
    // The workspace as the session left it, without what servers wrote:
    // a fresh copy, the steps, then the editor's buffers saved.
    let clean = base.join("expect");
    let root_text = session.root.to_string_lossy().into_owned();
    copy_workspace(&scenario.workspace(), &clean, ROOT)
        .map_err(ConformanceError::io("copying the workspace"))?;
    for line in &scenario.lines {
        match &line.body {
            Body::Step(WorkspaceStep::Write { path, text }) => {
                let path = clean.join(path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(ConformanceError::io("writing expect/"))?;
                }
                std::fs::write(path, text).map_err(ConformanceError::io("writing expect/"))?;
            }
            Body::Step(WorkspaceStep::Remove(path)) => {
                let _ = std::fs::remove_file(clean.join(path));
            }
            _ => {}
        }
    }
    for (path, text) in &session.buffers {
        if let Ok(rel) = path.strip_prefix(&session.root) {
            let target = clean.join(rel);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(ConformanceError::io("writing expect/"))?;
            }
            std::fs::write(target, text.replace(&root_text, ROOT))
                .map_err(ConformanceError::io("writing expect/"))?;
        }
    }
    if expect.exists() {
        std::fs::remove_dir_all(&expect).map_err(ConformanceError::io("removing expect/"))?;
    }
    let tree = read_tree(&clean).map_err(ConformanceError::io("reading expect/"))?;
    for (rel, bytes) in tree {
        let target = expect.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(ConformanceError::io("writing expect/"))?;
        }
        std::fs::write(target, bytes).map_err(ConformanceError::io("writing expect/"))?;
    }
    Ok(())
}
