//! Checkers on one file's code: spawns whose handle is dropped, and how
//! long each function is.

use super::source::{is_ident, matching, spans};

/// Functions that start a task or thread and return its handle.
pub(crate) const SPAWN_PATHS: &[&[&str]] = &[
    &["tokio", "spawn"],
    &["tokio", "task", "spawn"],
    &["task", "spawn"],
    &["tokio", "task", "spawn_blocking"],
    &["task", "spawn_blocking"],
    &["tokio", "task", "spawn_local"],
    &["std", "thread", "spawn"],
    &["thread", "spawn"],
];

/// The spawns in `code` (from [`code_only`], test modules blanked) whose
/// handle is dropped: a call that is a statement of its own, `let _ =`,
/// `drop(…)`, or every arm of a `match` that is a statement. Each is given
/// as its code with whitespace removed.
pub(crate) fn detached_spawns(code: &str) -> Vec<String> {
    let spans = spans(code);
    let chars: Vec<char> = code.chars().collect();
    let token = |k: usize| spans.get(k).map(|(t, _)| t.as_str());
    let is_statement_start = |k: usize| k == 0 || matches!(token(k - 1), Some(";" | "{" | "}"));
    // Whether the expression spanning `start..=end` has its value dropped.
    let dropped = |start: usize, end: usize| {
        let discarded_after = token(end + 1) == Some(";");
        (is_statement_start(start) && discarded_after)
            || (start >= 3
                && token(start - 3) == Some("let")
                && token(start - 2) == Some("_")
                && token(start - 1) == Some("="))
            || (start >= 2 && token(start - 2) == Some("drop") && token(start - 1) == Some("("))
    };
    let mut found = Vec::new();
    for k in 0..spans.len() {
        // A path from its start: not the tail of a longer one.
        if k > 0 && token(k - 1) == Some("::") {
            continue;
        }
        let (start, open) = if let Some(path) = SPAWN_PATHS.iter().find(|path| {
            path.iter()
                .enumerate()
                .all(|(n, part)| token(k + 2 * n) == Some(part))
                && (1..path.len()).all(|n| token(k + 2 * n - 1) == Some("::"))
        }) {
            (k, k + 2 * path.len() - 1)
        } else if is_runtime_spawn(&spans, k) {
            (chain_start(&spans, k - 1), k + 1)
        } else {
            continue;
        };
        if token(open) != Some("(") {
            continue;
        }
        let Some(close) = matching(&spans, open) else {
            continue;
        };
        let is_dropped = if start > 0 && token(start - 1) == Some("=>") {
            // A match arm's value: dropped when the match is.
            enclosing_match(&spans, start).is_some_and(|(m, end)| dropped(m, end))
                && matches!(token(close + 1), Some("," | "}"))
        } else {
            dropped(start, close)
        };
        if is_dropped {
            let end = spans[close].1;
            let text: String = chars[spans[start].1..=end]
                .iter()
                .filter(|c| !c.is_whitespace())
                .collect();
            found.push(text);
        }
    }
    found
}

/// Receivers of `.spawn(…)` that are a runtime's handle (a `JoinSet`'s,
/// a `TaskTracker`'s or a thread scope's `spawn` is owned by them).
pub(crate) const RUNTIME_RECEIVERS: &[&str] = &["runtime", "rt", "handle", "current"];

/// Whether the token at `k` is the method of `runtime.spawn(…)`,
/// `Handle::current().spawn_blocking(…)` and the like.
fn is_runtime_spawn(spans: &[(String, usize)], k: usize) -> bool {
    let token = |at: usize| spans.get(at).map(|(t, _)| t.as_str());
    if k < 2 || token(k - 1) != Some(".") || !matches!(token(k), Some("spawn" | "spawn_blocking")) {
        return false;
    }
    // The receiver: an identifier, or a call `current()`.
    let receiver = if token(k - 2) == Some(")") && k >= 4 && token(k - 3) == Some("(") {
        token(k - 4)
    } else {
        token(k - 2)
    };
    receiver.is_some_and(|r| RUNTIME_RECEIVERS.contains(&r))
}

/// Where the method chain ending at the `.` at `dot` begins: back over
/// identifiers, `::`, `.` and bracketed groups.
fn chain_start(spans: &[(String, usize)], dot: usize) -> usize {
    let mut at = dot;
    while at > 0 {
        let before = spans[at - 1].0.as_str();
        if before == ")" || before == "]" {
            // Back to the opening bracket.
            let mut depth = 0usize;
            let mut k = at - 1;
            loop {
                match spans[k].0.as_str() {
                    ")" | "]" => depth += 1,
                    "(" | "[" => depth -= 1,
                    _ => {}
                }
                if depth == 0 || k == 0 {
                    break;
                }
                k -= 1;
            }
            at = k;
        } else if before == "::" || before == "." || before.chars().all(is_ident) {
            at -= 1;
        } else {
            break;
        }
    }
    at
}

/// The `match` whose arm holds the token at `at`: the index of its `match`
/// keyword and of its closing brace.
pub(crate) fn enclosing_match(spans: &[(String, usize)], at: usize) -> Option<(usize, usize)> {
    // Back to the brace that opens the arms.
    let mut depth = 0usize;
    let mut open = None;
    for k in (0..at).rev() {
        match spans[k].0.as_str() {
            ")" | "]" | "}" => depth += 1,
            "(" | "[" => depth = depth.checked_sub(1)?,
            "{" if depth == 0 => {
                open = Some(k);
                break;
            }
            "{" => depth -= 1,
            _ => {}
        }
    }
    let open = open?;
    // The scrutinee runs back to `match` at the same depth.
    let mut depth = 0usize;
    let mut keyword = None;
    for k in (0..open).rev() {
        match spans[k].0.as_str() {
            ")" | "]" | "}" => depth += 1,
            "(" | "[" | "{" => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return None,
            },
            ";" if depth == 0 => return None,
            "match" if depth == 0 => {
                keyword = Some(k);
                break;
            }
            _ => {}
        }
    }
    Some((keyword?, matching(spans, open)?))
}

/// Each function in `code` (from [`code_only`]) with its length in lines.
pub(crate) fn function_lengths(code: &str) -> Vec<(String, usize)> {
    let spans = spans(code);
    let line_of = {
        let mut lines = Vec::with_capacity(code.len());
        let mut line = 1;
        for c in code.chars() {
            lines.push(line);
            if c == '\n' {
                line += 1;
            }
        }
        move |offset: usize| lines[offset]
    };
    let mut out = Vec::new();
    for k in 0..spans.len() {
        if spans[k].0 != "fn"
            || !spans
                .get(k + 1)
                .is_some_and(|(t, _)| t.chars().all(is_ident))
        {
            continue;
        }
        // The body is the first `{` at the signature's own depth; a `;`
        // first is a declaration without one.
        let mut depth = 0usize;
        let mut body = None;
        for (j, (token, _)) in spans.iter().enumerate().skip(k + 2) {
            match token.as_str() {
                "(" | "[" => depth += 1,
                ")" | "]" => depth = depth.saturating_sub(1),
                "{" if depth == 0 => {
                    body = Some(j);
                    break;
                }
                ";" if depth == 0 => break,
                _ => {}
            }
        }
        let Some(close) = body.and_then(|open| matching(&spans, open)) else {
            continue;
        };
        let lines = line_of(spans[close].1) - line_of(spans[k].1) + 1;
        out.push((spans[k + 1].0.clone(), lines));
    }
    out
}
