//! Progress on stderr while a command waits: which server, what it is doing
//! (from its `$/progress`: "rust-analyzer: Indexing 143/412 (35%)"), and the
//! time so far. Nothing is shown for a wait shorter than [`SHOW_AFTER`]. On
//! a terminal it is one `indicatif` spinner line, cleared at the end;
//! otherwise (a log, CI) plain lines, one per change and at most one per
//! [`PLAIN_INTERVAL`]. stdout is never touched: it carries the result.

use crate::gate::ServerState;
use crate::lsp::registry::Registry;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A wait shorter than this shows nothing.
pub(crate) const SHOW_AFTER: Duration = Duration::from_millis(500);
/// Overrides [`SHOW_AFTER`], in milliseconds (tests set 0 to see the lines
/// without depending on how long a server takes).
pub const SHOW_AFTER_ENV: &str = "ACP_LSP_PROGRESS_AFTER_MS";
/// How often the line is recomputed from the servers' states.
pub(crate) const REFRESH: Duration = Duration::from_millis(100);
/// Plain output: at most one line this often, unless what is waited for
/// changes (a new server, a new state).
pub(crate) const PLAIN_INTERVAL: Duration = Duration::from_secs(2);
/// How long the spinner takes per frame.
const SPINNER_TICK: Duration = Duration::from_millis(120);

/// Shows a command's wait on stderr until [`Progress::finish`].
pub struct Progress {
    activity: watch::Sender<String>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Progress {
    /// Starts reporting `activity` (what the command does, e.g. "rename
    /// src/lib.rs:4:8 → total") and the state of `registry`'s servers.
    /// Must be called inside a tokio runtime.
    pub fn start(activity: impl Into<String>, registry: Option<Arc<Registry>>) -> Progress {
        let (tx, rx) = watch::channel(activity.into());
        let stop = CancellationToken::new();
        let show_after = std::env::var(SHOW_AFTER_ENV)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(SHOW_AFTER, Duration::from_millis);
        let sink = if std::io::stderr().is_terminal() {
            Sink::bar()
        } else {
            Sink::Plain {
                last: String::new(),
                last_stage: String::new(),
                last_at: None,
            }
        };
        let task = tokio::spawn(report(rx, registry, sink, show_after, stop.clone()));
        Progress {
            activity: tx,
            stop,
            task,
        }
    }

    /// What the command does now.
    pub fn set_activity(&self, activity: impl Into<String>) {
        self.activity.send_replace(activity.into());
    }

    /// Stops reporting and clears the spinner.
    pub async fn finish(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

enum Sink {
    Bar(ProgressBar),
    Plain {
        /// The last line printed, without its time.
        last: String,
        /// What it was about.
        last_stage: String,
        last_at: Option<Instant>,
    },
}

impl Sink {
    fn bar() -> Sink {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{spinner} {elapsed:>3} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        Sink::Bar(bar)
    }

    /// Shows `line`; `stage` is what it is about (the activity, each busy
    /// server's state and work title, without counts and messages).
    fn show(&mut self, line: &str, stage: &str, elapsed: Duration) {
        match self {
            Sink::Bar(bar) => {
                if bar.message() != line {
                    bar.set_message(line.to_string());
                }
                if bar.is_hidden() {
                    return;
                }
                bar.enable_steady_tick(SPINNER_TICK);
            }
            Sink::Plain {
                last,
                last_stage,
                last_at,
            } => {
                let changed = last_stage != stage;
                let due = last_at.is_none_or(|at| at.elapsed() >= PLAIN_INTERVAL);
                if line != last && (changed || due) {
                    eprintln!("acp-lsp: {line} ({:.1} s)", elapsed.as_secs_f64());
                    *last = line.to_string();
                    *last_stage = stage.to_string();
                    *last_at = Some(Instant::now());
                }
            }
        }
    }

    fn finish(&self) {
        if let Sink::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

async fn report(
    activity: watch::Receiver<String>,
    registry: Option<Arc<Registry>>,
    mut sink: Sink,
    show_after: Duration,
    stop: CancellationToken,
) {
    let started = Instant::now();
    tokio::select! {
        _ = tokio::time::sleep(show_after) => {}
        _ = stop.cancelled() => return,
    }
    let mut refresh = tokio::time::interval(REFRESH);
    loop {
        let (line, stage) = describe(&activity.borrow(), registry.as_deref());
        sink.show(&line, &stage, started.elapsed());
        tokio::select! {
            _ = refresh.tick() => {}
            _ = stop.cancelled() => break,
        }
    }
    sink.finish();
}

/// The longest part of a server's progress message shown (rust-analyzer's
/// name whole paths).
const MAX_MESSAGE_CHARS: usize = 60;

/// "ACTIVITY · SERVER: WHAT IT DOES" for each server not yet ready, and the
/// line's stage: the same without progress messages and percentages.
fn describe(activity: &str, registry: Option<&Registry>) -> (String, String) {
    let mut busy: Vec<String> = Vec::new();
    let mut stage = activity.to_string();
    let mut servers = registry.map(Registry::all_servers).unwrap_or_default();
    servers.sort_by(|a, b| a.spec().config.name.cmp(&b.spec().config.name));
    for server in servers {
        let status = server.status();
        let name = &server.spec().config.name;
        if matches!(
            status.state,
            ServerState::Ready
                | ServerState::Stopped
                | ServerState::Idle
                | ServerState::NotInstalled
        ) {
            continue;
        }
        stage.push_str(&format!(
            " · {name}: {} {}",
            status.state.as_str(),
            status.progress.as_ref().map_or("", |p| p.title.as_str())
        ));
        let doing = match status.state {
            ServerState::Indexing => match &status.progress {
                Some(progress) => {
                    let mut text = progress.title.clone();
                    if let Some(message) = &progress.message {
                        text.push(' ');
                        text.extend(message.chars().take(MAX_MESSAGE_CHARS));
                        if message.chars().count() > MAX_MESSAGE_CHARS {
                            text.push('…');
                        }
                    }
                    if let Some(percentage) = progress.percentage {
                        text.push_str(&format!(" ({percentage}%)"));
                    }
                    text
                }
                None => "indexing".to_string(),
            },
            ServerState::Installing => match &status.progress {
                Some(progress) => match &progress.message {
                    Some(step) => format!("{}: {step}", progress.title),
                    None => progress.title.clone(),
                },
                None => "installing".to_string(),
            },
            ServerState::Restarting => match &status.last_error {
                Some(error) => format!(
                    "restarting after: {}",
                    error.lines().next().unwrap_or_default()
                ),
                None => "restarting".to_string(),
            },
            state => state.as_str().to_string(),
        };
        busy.push(format!("{name}: {doing}"));
    }
    let line = if busy.is_empty() {
        activity.to_string()
    } else {
        format!("{activity} · {}", busy.join(" · "))
    };
    (line, stage)
}
