//! Scenario verdicts: a table for people, JSON for machines, and a readable
//! diff of the first differing message.

use serde::Serialize;
use serde_json::Value;

/// Why a scenario failed.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The `session.jsonl` line that was expected, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    pub message: String,
    /// Unified diff, recorded (`-`) against live (`+`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

impl Failure {
    pub fn new(line: Option<usize>, message: impl Into<String>) -> Failure {
        Failure {
            line,
            message: message.into(),
            diff: None,
        }
    }

    pub(crate) fn with_diff(mut self, recorded: &Value, live: &Value) -> Failure {
        self.diff = Some(diff(recorded, live));
        self
    }
}

/// One scenario's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub scenario: String,
    pub passed: bool,
    /// Lines played (or requests checked, for the normative suite).
    pub checked: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    pub millis: u128,
    /// The RFD requirements the normative checks covered (normative runs only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<super::rfd::Verdict>,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.failure {
            None => write!(f, "{}: pass ({} checked)", self.scenario, self.checked),
            Some(failure) => {
                write!(f, "{}: FAIL", self.scenario)?;
                if let Some(line) = failure.line {
                    write!(f, " at session.jsonl:{line}")?;
                }
                write!(f, ": {}", failure.message)?;
                if let Some(diff) = &failure.diff {
                    write!(f, "\n{diff}")?;
                }
                Ok(())
            }
        }
    }
}

/// Pretty JSON of both, as a unified diff.
pub fn diff(recorded: &Value, live: &Value) -> String {
    let a = serde_json::to_string_pretty(recorded).unwrap_or_default();
    let b = serde_json::to_string_pretty(live).unwrap_or_default();
    similar::TextDiff::from_lines(&a, &b)
        .unified_diff()
        .context_radius(4)
        .header("recorded", "acp-lsp sent")
        .to_string()
}

/// A plain table: scenario, verdict, time, and the reason of each failure.
pub fn table(outcomes: &[Outcome]) -> String {
    let width = outcomes
        .iter()
        .map(|o| o.scenario.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let mut out = format!("{:width$}  result  checked  ms\n", "scenario");
    for o in outcomes {
        out.push_str(&format!(
            "{:width$}  {:6}  {:7}  {}\n",
            o.scenario,
            if o.passed { "pass" } else { "FAIL" },
            o.checked,
            o.millis
        ));
    }
    let passed = outcomes.iter().filter(|o| o.passed).count();
    out.push_str(&format!(
        "{passed} of {} scenarios passed\n",
        outcomes.len()
    ));
    for o in outcomes.iter().filter(|o| !o.passed) {
        out.push_str(&format!("\n{o}\n"));
    }
    if outcomes.iter().any(|o| !o.verdicts.is_empty()) {
        out.push('\n');
        out.push_str(&super::rfd::checklist_table(&checklist(outcomes)));
    }
    out
}

/// The RFD checklist over every scenario's verdicts.
pub fn checklist(outcomes: &[Outcome]) -> Vec<super::rfd::ChecklistRow> {
    super::rfd::checklist(
        outcomes
            .iter()
            .map(|o| (o.scenario.as_str(), o.verdicts.as_slice())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failure_shows_the_differing_member() {
        let f = Failure::new(Some(7), "differs at $.error.code").with_diff(
            &json!({"error": {"code": -32601}}),
            &json!({"error": {"code": -32602}}),
        );
        let text = Outcome {
            scenario: "s".into(),
            passed: false,
            checked: 3,
            failure: Some(f),
            millis: 1,
            verdicts: Vec::new(),
        }
        .to_string();
        assert!(text.contains("session.jsonl:7"), "{text}");
        assert!(text.contains("-    \"code\": -32601"), "{text}");
        assert!(text.contains("+    \"code\": -32602"), "{text}");
    }
}
