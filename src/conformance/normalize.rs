//! What legitimately varies between a recording and a replay, and nothing
//! else: the workspace path, serverIds, acp-lsp's own request ids toward a
//! server, process ids, acp-lsp's version, resident memory, and a crashed
//! server's stderr tail. Everything else must be equal.

use serde_json::Value;
use std::collections::BTreeMap;

/// `${ROOT}`: the workspace copy's absolute path.
pub const ROOT: &str = "${ROOT}";

/// The placeholder for the serverId of `name` rooted at `${ROOT}/sub`.
pub(crate) fn server_placeholder(name: &str, sub: &str) -> String {
    let sub = sub.trim_matches('/');
    if sub.is_empty() {
        format!("${{serverId:{name}}}")
    } else {
        format!("${{serverId:{name}@{sub}}}")
    }
}

/// The placeholder of server `name` whose root is `server_root`, below the
/// workspace `workspace_root` (as a recording's `spawn` event gives them).
pub(crate) fn placeholder_for(
    name: &str,
    server_root: &std::path::Path,
    workspace_root: &str,
) -> String {
    let sub = server_root
        .strip_prefix(workspace_root)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    server_placeholder(name, &sub)
}

/// Placeholder ↔ live value bindings of one replay.
#[derive(Debug, Clone, Default)]
pub struct Bindings {
    /// The live workspace root (no trailing slash).
    pub root: String,
    /// `${serverId:…}` → live serverId.
    pub servers: BTreeMap<String, String>,
}

impl Bindings {
    pub fn new(root: &str) -> Bindings {
        Bindings {
            root: root.trim_end_matches('/').to_string(),
            servers: BTreeMap::new(),
        }
    }

    /// Recorded text → what goes on the wire now.
    pub(crate) fn to_live(&self, text: &str) -> String {
        let mut out = text.replace(ROOT, &self.root);
        for (placeholder, live) in &self.servers {
            if out.contains(placeholder.as_str()) {
                out = out.replace(placeholder.as_str(), live);
            }
        }
        out
    }

    /// Live text → its recorded form.
    pub(crate) fn to_recorded(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (placeholder, live) in &self.servers {
            if !live.is_empty() && out.contains(live.as_str()) {
                out = out.replace(live.as_str(), placeholder);
            }
        }
        if !self.root.is_empty() {
            out = out.replace(&self.root, ROOT);
        }
        out
    }
}

/// Field-level normalisation of a message (already in recorded form).
/// Returns whether anything was replaced.
pub(crate) fn normalize_fields(value: &mut Value, toward_server: bool) -> bool {
    let mut changed = false;
    if toward_server && value_method(value) == Some("initialize") {
        {
            if let Some(params) = value.get_mut("params").and_then(Value::as_object_mut) {
                if params.get("processId").is_some_and(|p| !p.is_null()) {
                    params.insert("processId".into(), Value::String("${PID}".into()));
                    changed = true;
                }
                if let Some(info) = params.get_mut("clientInfo").and_then(Value::as_object_mut) {
                    if info.contains_key("version") {
                        info.insert("version".into(), Value::String("${VERSION}".into()));
                        changed = true;
                    }
                }
            }
        }
    }
    normalize_server_entries(value, &mut changed);
    changed
}

fn value_method(value: &Value) -> Option<&str> {
    value.get("method").and_then(Value::as_str)
}

/// acp-lsp's part of `lsp/servers` entries (`_meta["acp-lsp"]`: objects with
/// `status` and `restarts`), and error data naming a server (`lastError`):
/// `pid`, `memoryBytes`, and all of `lastError` after its first line.
fn normalize_server_entries(value: &mut Value, changed: &mut bool) {
    match value {
        Value::Object(map) => {
            let entry = map.contains_key("status") && map.contains_key("restarts");
            if entry || map.contains_key("lastError") {
                for key in ["pid", "memoryBytes"] {
                    if map.contains_key(key) {
                        map.insert(key.into(), Value::String(format!("${{{key}}}")));
                        *changed = true;
                    }
                }
                if let Some(Value::String(text)) = map.get_mut("lastError") {
                    if let Some((first, _)) = text.split_once('\n') {
                        *text = first.to_string();
                        *changed = true;
                    }
                }
            }
            for child in map.values_mut() {
                normalize_server_entries(child, changed);
            }
        }
        Value::Array(items) => {
            for item in items {
                normalize_server_entries(item, changed);
            }
        }
        _ => {}
    }
}

/// Compares a recorded value with a live one (both normalised), binding any
/// `${serverId:…}` the recorded side names but `bindings` does not know yet
/// (another implementation's ids are learnt from its answers). Returns the
/// JSON path of the first difference.
pub fn compare(recorded: &Value, live: &Value, bindings: &mut Bindings) -> Result<(), String> {
    let mut learnt = Vec::new();
    compare_at(recorded, live, &mut String::new(), &mut learnt)?;
    for (placeholder, id) in learnt {
        bindings.servers.entry(placeholder).or_insert(id);
    }
    Ok(())
}

fn compare_at(
    recorded: &Value,
    live: &Value,
    path: &mut String,
    learnt: &mut Vec<(String, String)>,
) -> Result<(), String> {
    let here = || {
        if path.is_empty() {
            "$".to_string()
        } else {
            format!("${path}")
        }
    };
    match (recorded, live) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys()) {
                if !(a.contains_key(key) && b.contains_key(key)) {
                    return Err(format!("{}.{key}", here()));
                }
            }
            for (key, value) in a {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                compare_at(value, &b[key], path, learnt)?;
                path.truncate(len);
            }
            Ok(())
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Err(format!("{} (length {} ≠ {})", here(), a.len(), b.len()));
            }
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                compare_at(x, y, path, learnt)?;
                path.truncate(len);
            }
            Ok(())
        }
        (Value::String(a), Value::String(b)) => {
            if a == b || unify(a, b, learnt) {
                Ok(())
            } else {
                Err(here())
            }
        }
        (a, b) if a == b => Ok(()),
        _ => Err(here()),
    }
}

/// `a` holds one `${serverId:…}` placeholder not yet bound; `b` is the same
/// text with an id in its place.
fn unify(a: &str, b: &str, learnt: &mut Vec<(String, String)>) -> bool {
    let Some(start) = a.find("${serverId:") else {
        return false;
    };
    let Some(len) = a[start..].find('}') else {
        return false;
    };
    let placeholder = &a[start..start + len + 1];
    let (prefix, suffix) = (&a[..start], &a[start + len + 1..]);
    if suffix.contains("${serverId:") || !b.starts_with(prefix) || !b.ends_with(suffix) {
        return false;
    }
    if b.len() < prefix.len() + suffix.len() {
        return false;
    }
    let id = &b[prefix.len()..b.len() - suffix.len()];
    if id.is_empty() {
        return false;
    }
    if let Some((_, known)) = learnt.iter().find(|(p, _)| p == placeholder) {
        return known == id;
    }
    learnt.push((placeholder.to_string(), id.to_string()));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn root_and_server_ids_round_trip() {
        let mut b = Bindings::new("/tmp/ws/");
        b.servers
            .insert(server_placeholder("pyright", ""), "1234-uuid".into());
        let recorded = r#"{"uri":"file://${ROOT}/a.py","serverId":"${serverId:pyright}"}"#;
        let live = b.to_live(recorded);
        assert_eq!(
            live,
            r#"{"uri":"file:///tmp/ws/a.py","serverId":"1234-uuid"}"#
        );
        assert_eq!(b.to_recorded(&live), recorded);
        assert_eq!(
            server_placeholder("clangd", "/sub/"),
            "${serverId:clangd@sub}"
        );
    }

    #[test]
    fn only_the_listed_fields_are_normalised() {
        let mut v = json!({"result": {"servers": [{"serverId": "x", "name": "n",
            "_meta": {"acp-lsp": {"status": "ready", "restarts": 1, "pid": 7,
            "memoryBytes": 9, "lastError": "exited (signal: 9)\nstderr tail"}}}]}});
        assert!(normalize_fields(&mut v, false));
        let ours = &v["result"]["servers"][0]["_meta"]["acp-lsp"];
        assert_eq!(ours["pid"], "${pid}");
        assert_eq!(ours["memoryBytes"], "${memoryBytes}");
        assert_eq!(ours["lastError"], "exited (signal: 9)");
        assert_eq!(v["result"]["servers"][0]["name"], "n");

        let mut init = json!({"id": 1, "method": "initialize", "params": {"processId": 42,
            "clientInfo": {"name": "acp-lsp", "version": "0.1.0"}, "rootUri": "file:///r"}});
        assert!(normalize_fields(&mut init, true));
        assert_eq!(init["params"]["processId"], "${PID}");
        assert_eq!(init["params"]["clientInfo"]["name"], "acp-lsp");
        assert_eq!(init["params"]["rootUri"], "file:///r");
        // Toward the agent an `initialize` is not touched.
        let mut agent_init = json!({"method": "initialize", "params": {"processId": 42}});
        assert!(!normalize_fields(&mut agent_init, false));
    }

    #[test]
    fn compare_names_the_first_difference_and_learns_ids() {
        let mut b = Bindings::new("/r");
        let recorded = json!({"servers": [{"serverId": "${serverId:clangd}", "state": "ready"}]});
        let live = json!({"servers": [{"serverId": "abc", "state": "ready"}]});
        compare(&recorded, &live, &mut b).unwrap();
        assert_eq!(b.servers["${serverId:clangd}"], "abc");

        let live = json!({"servers": [{"serverId": "abc", "state": "starting"}]});
        assert_eq!(
            compare(&recorded, &live, &mut b).unwrap_err(),
            "$.servers[0].state"
        );
        let missing = json!({"servers": [{"serverId": "abc"}]});
        assert_eq!(
            compare(&recorded, &missing, &mut b).unwrap_err(),
            "$.servers[0].state"
        );
        // Once learnt, a placeholder must stand for the same id everywhere.
        let two = json!(["${serverId:x}", "${serverId:x}"]);
        assert!(compare(&two, &json!(["a", "b"]), &mut Bindings::new("/r")).is_err());
    }
}
