//! Runs many scenarios: replay against acp-lsp, the normative suite against
//! an implementation, or re-recording against the real servers.

use super::drive::{drive, DriveOptions};
use super::fixture::{scenario_dirs, Scenario};
use super::record::record_fixture;
use super::replay::{replay, ReplayOptions};
use super::report::Outcome;
use super::{normative, ConformanceError, STEP_TIMEOUT};
use std::ffi::OsString;
use std::path::Path;

/// Which scenarios: all under `fixtures`, or the named ones.
pub fn select(fixtures: &Path, names: &[String]) -> Result<Vec<Scenario>, ConformanceError> {
    let mut scenarios = Vec::new();
    for dir in scenario_dirs(fixtures)? {
        let scenario = Scenario::load(&dir)?;
        if names.is_empty() || names.contains(&scenario.name) {
            scenarios.push(scenario);
        }
    }
    for name in names {
        if !scenarios.iter().any(|s| &s.name == name) {
            return Err(ConformanceError::Fixture {
                scenario: name.clone(),
                what: format!("no such scenario under {}", fixtures.display()),
            });
        }
    }
    Ok(scenarios)
}

/// Replays recorded scenarios against acp-lsp with stand-in servers.
/// `finished` is told each outcome as it comes (the CLI prints a line).
pub async fn replay_all(
    scenarios: &[Scenario],
    acp_lsp: &Path,
    mut finished: impl FnMut(&Outcome),
) -> Result<Vec<Outcome>, ConformanceError> {
    let options = ReplayOptions {
        acp_lsp: acp_lsp.to_path_buf(),
        step_timeout: STEP_TIMEOUT,
    };
    let mut outcomes = Vec::new();
    for scenario in scenarios {
        if !scenario.is_recorded() {
            return Err(ConformanceError::Fixture {
                scenario: scenario.name.clone(),
                what: "session.jsonl is a script: record it first (--record-fixtures)".into(),
            });
        }
        let outcome = replay(scenario, &options).await?;
        finished(&outcome);
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// The normative suite against `command` (acp-lsp itself when empty).
/// `finished` is told each outcome as it comes.
pub async fn normative_all(
    scenarios: &[Scenario],
    acp_lsp: &Path,
    command: Vec<OsString>,
    mut finished: impl FnMut(&Outcome),
) -> Result<Vec<Outcome>, ConformanceError> {
    let ours = command.is_empty();
    let command = if ours {
        vec![
            acp_lsp.as_os_str().to_owned(),
            "proxy".into(),
            "--config".into(),
            "{config}".into(),
            "--".into(),
            "{agent}".into(),
        ]
    } else {
        command
    };
    let options = DriveOptions {
        command,
        acp_lsp: acp_lsp.to_path_buf(),
        acp_lsp_ids: ours,
    };
    let mut outcomes = Vec::new();
    for scenario in scenarios.iter().filter(|s| s.meta.normative) {
        let started = std::time::Instant::now();
        let (_temp, base) = super::scratch_dir()?;
        let mut verdicts = super::rfd::Verdicts::default();
        let result = match drive(scenario, &options, None, &base.join("ws"), &base).await {
            Ok(session) => normative::check(scenario, &session, &mut verdicts),
            Err(failure) => Err(failure),
        };
        let (checked, failure) = match result {
            Ok(n) => (n, None),
            Err(f) => (0, Some(f)),
        };
        let outcome = Outcome {
            scenario: scenario.name.clone(),
            passed: failure.is_none(),
            checked,
            failure,
            millis: started.elapsed().as_millis(),
            verdicts: verdicts.0,
        };
        finished(&outcome);
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// Re-records every scenario against acp-lsp and the real language servers.
/// `finished` is told each outcome as it comes.
pub async fn record_all(
    scenarios: &[Scenario],
    acp_lsp: &Path,
    mut finished: impl FnMut(&Outcome),
) -> Result<Vec<Outcome>, ConformanceError> {
    let mut outcomes = Vec::new();
    for scenario in scenarios {
        let outcome = record_fixture(scenario, acp_lsp).await?;
        finished(&outcome);
        outcomes.push(outcome);
    }
    Ok(outcomes)
}
