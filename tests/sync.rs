//! Document sync against the disk, end to end through the registry and the
//! gate with the scriptable `acp-lsp-fake-server`: the file watcher pushes
//! disk changes to servers without a request (didChange/didClose, and
//! `workspace/didChangeWatchedFiles` for registered and static globs), a
//! degraded watch still leaves answers fresh, in-flight answers about changed
//! text become `content_modified`, the `text_written` hook, the size limit,
//! and strictly increasing versions under a burst of writes. (The LRU of
//! open documents is unit-tested in `lsp::documents`.)
//!
//! Every asynchronous effect is awaited by polling the fake's log (it logs
//! every message it receives, in order) under [`LOG_TIMEOUT`].
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]
#![cfg(target_os = "linux")]

mod support;

use support::fake::{assert_echo, FakeServer, HOVER, LOG_POLL_INTERVAL, LOG_TIMEOUT, SESSION};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use acp_lsp::lsp::config::ServerConfig;
use acp_lsp::lsp::registry::RegistryOptions;
use acp_lsp_core::gate::{GateMethod, LspHost, ServerState};
use serde_json::{json, Value};

/// Longest wait for the server to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// LSP `ContentModified`.
const CONTENT_MODIFIED: i64 = -32801;

const DID_OPEN: &str = "textDocument/didOpen";
const DID_CHANGE: &str = "textDocument/didChange";
const DID_CLOSE: &str = "textDocument/didClose";
const WATCHED: &str = "workspace/didChangeWatchedFiles";
/// `FileChangeType`s.
const CREATED: i64 = 1;
const CHANGED: i64 = 2;
const DELETED: i64 = 3;

/// Whether `message` is `method` about document `uri`.
fn is_doc(message: &Value, method: &str, uri: &str) -> bool {
    message["method"] == method && message["params"]["textDocument"]["uri"] == uri
}

/// Positions in `log` of `method` messages about `uri`.
fn positions(log: &[Value], method: &str, uri: &str) -> Vec<usize> {
    (0..log.len())
        .filter(|&i| is_doc(&log[i], method, uri))
        .collect()
}

/// (version, full text) of every didOpen/didChange of `uri` in `log[..end]`.
fn texts(log: &[Value], uri: &str, end: usize) -> Vec<(i64, String)> {
    log[..end]
        .iter()
        .filter_map(|m| {
            let version = m["params"]["textDocument"]["version"].as_i64()?;
            let text = if is_doc(m, DID_OPEN, uri) {
                m["params"]["textDocument"]["text"].as_str()?
            } else if is_doc(m, DID_CHANGE, uri) {
                let changes = m["params"]["contentChanges"].as_array()?;
                assert_eq!(changes.len(), 1, "one full-text change: {m}");
                assert!(changes[0].get("range").is_none(), "full text: {m}");
                changes[0]["text"].as_str()?
            } else {
                return None;
            };
            Some((version, text.to_string()))
        })
        .collect()
}

/// (version, text) of every didChange of `uri`.
fn changes(log: &[Value], uri: &str) -> Vec<(i64, String)> {
    let only_changes: Vec<Value> = log
        .iter()
        .filter(|m| is_doc(m, DID_CHANGE, uri))
        .cloned()
        .collect();
    texts(&only_changes, uri, only_changes.len())
}

/// Every `FileEvent` (uri, type) of every didChangeWatchedFiles in `log`.
fn watched_events(log: &[Value]) -> Vec<(String, i64)> {
    log.iter()
        .filter(|m| m["method"] == WATCHED)
        .flat_map(|m| {
            m["params"]["changes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|e| {
            (
                e["uri"].as_str().unwrap_or_default().to_string(),
                e["type"].as_i64().unwrap_or_default(),
            )
        })
        .collect()
}

/// Writes `text` to `path` the way editors save: a temporary file renamed over it.
fn atomic_save(path: &Path, text: &str) {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".saving");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).expect("write the temporary file");
    std::fs::rename(&tmp, path).expect("rename over the original");
}

/// How a test's workspace and proxy are set up.
struct Setup<'a> {
    mode: &'a str,
    options: RegistryOptions,
    tweak: &'a dyn Fn(&mut ServerConfig),
    /// Runs on the workspace root before the session opens.
    prepare: &'a dyn Fn(&Path),
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Setup {
            mode: "",
            options: RegistryOptions::default(),
            tweak: &|_| {},
            prepare: &|_| {},
        }
    }
}

/// The fake harness, ready, with what the sync tests wait for.
struct Fake {
    fake: FakeServer,
}

impl std::ops::Deref for Fake {
    type Target = FakeServer;

    fn deref(&self) -> &FakeServer {
        &self.fake
    }
}

impl Fake {
    async fn start(setup: Setup<'_>) -> Fake {
        let (fake, _) = FakeServer::start(setup.mode, setup.options, setup.prepare, |server, _| {
            (setup.tweak)(server)
        })
        .await;
        let server = fake.server();
        tokio::time::timeout(
            READY_TIMEOUT,
            server.wait_for_state(|s| s == ServerState::Ready),
        )
        .await
        .unwrap_or_else(|_| panic!("never ready: {:?}", server.status()));
        Fake { fake }
    }

    /// Waits for a didChange of `uri` at `version`; returns its text.
    async fn wait_change(&self, uri: &str, version: i64) -> String {
        self.wait_log(&format!("didChange of {uri} at version {version}"), |log| {
            changes(log, uri)
                .into_iter()
                .find(|(v, _)| *v == version)
                .map(|(_, text)| text)
        })
        .await
    }

    /// Waits for a didChangeWatchedFiles event (uri, type) beyond the first `seen` events.
    async fn wait_event(&self, uri: &str, kind: i64, seen: usize) -> usize {
        self.wait_log(&format!("{WATCHED} type {kind} for {uri}"), |log| {
            let events = watched_events(log);
            events
                .iter()
                .skip(seen)
                .any(|(u, k)| u == uri && *k == kind)
                .then_some(events.len())
        })
        .await
    }

    /// Waits until the server has registered its file watchers.
    async fn wait_registration(&self) {
        let deadline = Instant::now() + LOG_TIMEOUT;
        while !self
            .server()
            .registrations()
            .iter()
            .any(|r| r.method == WATCHED)
        {
            assert!(Instant::now() < deadline, "no watcher registration");
            tokio::time::sleep(LOG_POLL_INTERVAL).await;
        }
    }

    /// Stops the server. Returns the complete log.
    async fn finish(self) -> Vec<Value> {
        self.fake.shut_down().await;
        self.fake.log()
    }
}

// ---------------------------------------------------------------- tests

/// 1. An open document follows the disk without any request: a rewrite and an
///    atomic save become full-text didChanges, a delete a didClose.
#[tokio::test]
async fn the_watcher_syncs_open_documents_without_a_request() {
    let fake = Fake::start(Setup::default()).await;
    let path = fake.root.join("a.fake");
    let uri = fake.uri("a.fake");
    assert_echo(&fake.hover(&uri).await, &uri);
    let log = fake.log();
    assert_eq!(
        texts(&log, &uri, log.len()),
        vec![(1, "hello fake\n".to_string())],
        "opened once at version 1"
    );

    std::fs::write(&path, "rewritten on disk\n").expect("rewrite");
    assert_eq!(fake.wait_change(&uri, 2).await, "rewritten on disk\n");

    atomic_save(&path, "saved atomically\n");
    assert_eq!(fake.wait_change(&uri, 3).await, "saved atomically\n");

    std::fs::remove_file(&path).expect("delete");
    fake.wait_log("didClose", |log| {
        (!positions(log, DID_CLOSE, &uri).is_empty()).then_some(())
    })
    .await;

    let log = fake.finish().await;
    assert_eq!(
        positions(&log, HOVER, &uri).len(),
        1,
        "no request after the first"
    );
    assert_eq!(
        changes(&log, &uri),
        vec![
            (2, "rewritten on disk\n".to_string()),
            (3, "saved atomically\n".to_string())
        ],
        "exactly one didChange per disk change (the temporary file is not a document)"
    );
    assert_eq!(positions(&log, DID_CLOSE, &uri).len(), 1);
}

/// 2. Registered watchers (`**/*.fake`) get created/changed/deleted events;
///    non-matching files, skipped directories and ignored ones never appear.
#[tokio::test]
async fn registered_watchers_get_matching_events_only() {
    let fake = Fake::start(Setup {
        mode: "server_requests",
        prepare: &|root| {
            std::fs::write(root.join(".gitignore"), "ignored/\n").expect("gitignore");
            for dir in ["target", "node_modules", "ignored"] {
                std::fs::create_dir(root.join(dir)).expect("create dir");
            }
        },
        ..Setup::default()
    })
    .await;
    fake.wait_registration().await;

    // Never to be reported: written first, so any event for them would be in
    // the same batch as b.fake's creation or an earlier one.
    let unseen = [
        "c.txt",
        "target/x.fake",
        "node_modules/y.fake",
        "ignored/z.fake",
        // Directories created after the start are filtered the same way.
        "target/new/x2.fake",
        "ignored/new/z2.fake",
    ];
    for relative in unseen {
        let path = fake.root.join(relative);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("dirs");
        std::fs::write(&path, "x").expect("write");
    }

    let b = fake.root.join("b.fake");
    let b_uri = fake.uri("b.fake");
    std::fs::write(&b, "b").expect("create b");
    let seen = fake.wait_event(&b_uri, CREATED, 0).await;
    std::fs::write(&b, "b changed").expect("change b");
    let seen = fake.wait_event(&b_uri, CHANGED, seen).await;
    std::fs::remove_file(&b).expect("delete b");
    fake.wait_event(&b_uri, DELETED, seen).await;

    let unseen: Vec<String> = unseen.iter().map(|r| fake.uri(r)).collect();
    let log = fake.finish().await;
    let events = watched_events(&log);
    for uri in &unseen {
        assert!(
            events.iter().all(|(u, _)| u != uri),
            "{uri} was reported: {events:?}"
        );
    }
    // b.fake's events came in order.
    let kinds: Vec<i64> = events
        .iter()
        .filter(|(u, _)| *u == b_uri)
        .map(|(_, k)| *k)
        .collect();
    assert_eq!(kinds.first(), Some(&CREATED), "{events:?}");
    assert_eq!(kinds.last(), Some(&DELETED), "{events:?}");
    assert!(kinds.windows(2).all(|w| w[0] <= w[1]), "{events:?}");
}

/// 2b. Static `watch_globs` from configuration need no registration.
#[tokio::test]
async fn static_watch_globs_get_events_without_a_registration() {
    let fake = Fake::start(Setup {
        tweak: &|server| server.watch_globs = vec!["**/*.cfg".into()],
        ..Setup::default()
    })
    .await;
    assert!(fake.server().registrations().is_empty());
    // Neither matched by the static glob nor registered: never reported.
    std::fs::write(fake.root.join("n.fake"), "n").expect("write n.fake");
    let x_uri = fake.uri("x.cfg");
    std::fs::write(fake.root.join("x.cfg"), "x").expect("write x.cfg");
    let seen = fake.wait_event(&x_uri, CREATED, 0).await;
    std::fs::write(fake.root.join("x.cfg"), "x = 2").expect("change x.cfg");
    fake.wait_event(&x_uri, CHANGED, seen).await;

    let log = fake.finish().await;
    let events = watched_events(&log);
    assert!(
        events.iter().all(|(u, _)| *u == x_uri),
        "only x.cfg: {events:?}"
    );
}

/// 3. A directory moved in is reported (its files as created) and watched.
#[tokio::test]
async fn a_directory_moved_in_is_reported_and_then_watched() {
    let fake = Fake::start(Setup {
        mode: "server_requests",
        ..Setup::default()
    })
    .await;
    fake.wait_registration().await;
    let staging = fake.outside.join("staging/pkg/deeper");
    std::fs::create_dir_all(&staging).expect("staging dirs");
    std::fs::write(fake.outside.join("staging/pkg/m.fake"), "m").expect("write m");
    std::fs::write(staging.join("d.fake"), "d").expect("write d");
    std::fs::rename(fake.outside.join("staging/pkg"), fake.root.join("pkg")).expect("move in");

    let m_uri = fake.uri("pkg/m.fake");
    let d_uri = fake.uri("pkg/deeper/d.fake");
    let seen = fake.wait_event(&m_uri, CREATED, 0).await;
    fake.wait_event(&d_uri, CREATED, 0).await;

    std::fs::write(fake.root.join("pkg/m.fake"), "m changed").expect("change m");
    let seen = fake.wait_event(&m_uri, CHANGED, seen).await;
    // The nested directory is watched too.
    std::fs::write(fake.root.join("pkg/deeper/d.fake"), "d changed").expect("change d");
    fake.wait_event(&d_uri, CHANGED, seen).await;
    fake.finish().await;
}

/// 4. At the watch limit the root is listed as degraded, and a document the
///    request names is still synced before the request.
#[tokio::test]
async fn a_degraded_watch_still_syncs_named_documents_before_the_request() {
    let fake = Fake::start(Setup {
        options: RegistryOptions {
            max_watches: Some(1),
            ..RegistryOptions::default()
        },
        prepare: &|root| {
            std::fs::create_dir_all(root.join("sub/dir")).expect("subdirs");
            std::fs::write(root.join("sub/dir/a.fake"), "deep\n").expect("deep doc");
        },
        ..Setup::default()
    })
    .await;
    let servers = fake.servers().await;
    assert_eq!(
        servers[0]["_meta"]["acp-lsp"]["degradedRoots"],
        json!([fake.root.display().to_string()]),
        "{servers:?}"
    );

    let uri = fake.uri("sub/dir/a.fake");
    assert_echo(&fake.hover(&uri).await, &uri);
    std::fs::write(fake.root.join("sub/dir/a.fake"), "deeper still\n").expect("rewrite");
    assert_echo(&fake.hover(&uri).await, &uri);

    let log = fake.finish().await;
    let hovers = positions(&log, HOVER, &uri);
    assert_eq!(hovers.len(), 2);
    assert_eq!(
        texts(&log, &uri, hovers[1]),
        vec![(1, "deep\n".to_string()), (2, "deeper still\n".to_string())],
        "the new text reached the server before the second request"
    );
}

/// 5. An answer about text that changed while it was computed is never
///    delivered: a read-only request (hover) is asked again and answered
///    for the new text; an edit (rename) ends `content_modified`, retryable.
///    One whose document did not change is delivered.
#[tokio::test]
async fn an_answer_about_changed_text_is_content_modified() {
    const DELAY_MS: u64 = 1_000;
    const RENAME: &str = "textDocument/rename";
    let fake = Fake::start(Setup {
        mode: "slow",
        tweak: &|server| {
            server
                .env
                .insert("FAKE_LSP_DELAY_MS".into(), DELAY_MS.to_string());
        },
        ..Setup::default()
    })
    .await;
    let uri = fake.uri("a.fake");
    // Opened at version 1, unchanged during the flight: delivered.
    let response = fake.hover(&uri).await;
    assert_echo(&response, &uri);
    assert_eq!(response["result"]["_meta"]["documents"][0]["version"], 1);

    // A hover in flight when its document changes: asked again, delivered at version 2.
    let in_flight = tokio::spawn(fake.hover(&uri));
    fake.wait_log("the second hover", |log| {
        (positions(log, HOVER, &uri).len() == 2).then_some(())
    })
    .await;
    std::fs::write(fake.root.join("a.fake"), "changed in flight\n").expect("rewrite");
    // The fake reads it only after its (slow) answer; the proxy sent it at once.
    assert_eq!(fake.wait_change(&uri, 2).await, "changed in flight\n");
    let response = in_flight.await.expect("the call task does not panic");
    assert_echo(&response, &uri);
    assert_eq!(response["result"]["_meta"]["documents"][0]["version"], 2);
    assert_eq!(
        positions(&fake.log(), HOVER, &uri).len(),
        3,
        "asked again once"
    );

    // A rename in flight when its document changes: never sent twice.
    let mut params = fake.hover_params(&uri);
    params["method"] = json!(RENAME);
    params["params"]["newName"] = json!("x");
    let in_flight = tokio::spawn(fake.call(GateMethod::Request, params));
    fake.wait_log("the rename", |log| {
        (positions(log, RENAME, &uri).len() == 1).then_some(())
    })
    .await;
    std::fs::write(fake.root.join("a.fake"), "changed again\n").expect("rewrite");
    assert_eq!(fake.wait_change(&uri, 3).await, "changed again\n");
    let response = in_flight.await.expect("the call task does not panic");
    let error = &response["error"];
    assert_eq!(error["code"], CONTENT_MODIFIED, "{response}");
    assert_eq!(error["data"]["reason"], "content_modified", "{response}");
    assert_eq!(error["data"]["retryable"], true, "{response}");
    assert_eq!(positions(&fake.log(), RENAME, &uri).len(), 1, "sent once");
    fake.finish().await;
}

/// 6. `text_written` sends the written text at once; the next request then
///    trusts the disk again (stamp `None` forces a read).
#[tokio::test]
async fn text_written_is_sent_at_once_and_stays_until_the_disk_changes() {
    let fake = Fake::start(Setup::default()).await;
    let path = fake.root.join("a.fake");
    let uri = fake.uri("a.fake");
    assert_echo(&fake.hover(&uri).await, &uri);
    let session = fake.gate.sessions().get(SESSION).expect("the session");

    // Confirmed but not (yet) on disk: an editor may write into a buffer and
    // save later, or never. The written text is the newest.
    fake.registry
        .text_written(&session, &path, "written, not saved\n");
    assert_eq!(fake.wait_change(&uri, 2).await, "written, not saved\n");
    assert_echo(&fake.hover(&uri).await, &uri);
    let log = fake.log();
    let hovers = positions(&log, HOVER, &uri);
    assert_eq!(
        texts(&log, &uri, hovers[1]),
        vec![
            (1, "hello fake\n".to_string()),
            // The disk did not change since it was last read: the written text stays.
            (2, "written, not saved\n".to_string()),
        ]
    );

    // The usual order: the editor writes the disk, then confirms.
    std::fs::write(&path, "saved and confirmed\n").expect("write");
    fake.registry
        .text_written(&session, &path, "saved and confirmed\n");
    assert_eq!(fake.wait_change(&uri, 3).await, "saved and confirmed\n");
    assert_echo(&fake.hover(&uri).await, &uri);
    // A document that is not open is not opened by a write.
    let other = fake.uri("other.fake");
    fake.registry
        .text_written(&session, &fake.root.join("other.fake"), "other\n");

    let log = fake.finish().await;
    let hovers = positions(&log, HOVER, &uri);
    assert_eq!(hovers.len(), 3);
    assert_eq!(
        changes(&log, &uri)[1..],
        [(3, "saved and confirmed\n".to_string())],
        "the watcher and the request found the disk equal to the written text"
    );
    assert!(
        positions(&log, DID_OPEN, &other).is_empty(),
        "a write does not open a document"
    );
}

/// 7. A file over 5 MiB is not opened, and `_meta` says why; one that grows
///    over the limit while open is closed rather than left stale.
#[tokio::test]
async fn files_over_the_size_limit_are_not_opened() {
    let big_text = "x".repeat(1023) + "\n";
    let big_text = big_text.repeat(6 * 1024);
    let fake = Fake::start(Setup::default()).await;
    atomic_save(&fake.root.join("big.fake"), &big_text);
    let big = fake.uri("big.fake");
    let response = fake.hover(&big).await;
    assert_echo(&response, &big);
    let documents = &response["result"]["_meta"]["documents"];
    assert_eq!(documents[0]["uri"], big.as_str(), "{documents}");
    assert_eq!(documents[0]["skipped"], "too_large", "{documents}");
    assert!(documents[0].get("version").is_none(), "{documents}");

    // An open document that grows over the limit.
    let uri = fake.uri("a.fake");
    assert_echo(&fake.hover(&uri).await, &uri);
    // Saved atomically, so the watcher never reads it half written (and under the limit).
    atomic_save(&fake.root.join("a.fake"), &big_text);
    let response = fake.hover(&uri).await;
    let documents = &response["result"]["_meta"]["documents"];
    assert_eq!(documents[0]["skipped"], "too_large", "{response}");
    assert!(
        documents[0].get("version").is_none(),
        "the server holds no (stale) text for it: {documents}"
    );

    let log = fake.finish().await;
    assert!(
        positions(&log, DID_OPEN, &big).is_empty(),
        "big.fake opened"
    );
    assert!(
        changes(&log, &uri).is_empty(),
        "no didChange with the big text"
    );
    let hovers = positions(&log, HOVER, &uri);
    let closes = positions(&log, DID_CLOSE, &uri);
    assert!(
        closes.len() == 1 && closes[0] < hovers[1],
        "closed before the request that found it too large: {log:?}"
    );
}

/// The text of the `i`th rewrite in test 8.
fn revision(i: usize) -> String {
    format!("revision {i}\n{}", "-".repeat(i % 13))
}

/// Which rewrite `text` is, if it is one whole (a read may also catch a
/// rewrite half done).
fn revision_of(text: &str) -> Option<usize> {
    let number = text.strip_prefix("revision ")?.split('\n').next()?;
    let i = number.parse().ok()?;
    (revision(i) == text).then_some(i)
}

/// 8. Versions strictly increase under a burst of writes racing requests, and
///    the request after the burst sees the final text.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn versions_strictly_increase_under_a_burst_of_writes() {
    const WRITES: usize = 200;
    /// Requests in flight at once while the burst goes on.
    const READERS: usize = 6;
    let fake = Arc::new(Fake::start(Setup::default()).await);
    let path = fake.root.join("a.fake");
    let uri = fake.uri("a.fake");
    assert_echo(&fake.hover(&uri).await, &uri);

    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (path, done) = (path.clone(), Arc::clone(&done));
        tokio::task::spawn_blocking(move || {
            for i in 0..WRITES {
                let text = revision(i);
                std::fs::write(&path, text).expect("rewrite");
            }
            done.store(true, Ordering::Relaxed);
        })
    };
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (fake, done, uri) = (Arc::clone(&fake), Arc::clone(&done), uri.clone());
            tokio::spawn(async move {
                let mut answers = 0;
                while !done.load(Ordering::Relaxed) || answers == 0 {
                    let response = fake.hover(&uri).await;
                    if response["error"]["code"] != CONTENT_MODIFIED {
                        assert_echo(&response, &uri);
                    }
                    answers += 1;
                }
            })
        })
        .collect();
    writer.await.expect("the writer does not panic");
    for reader in readers {
        reader.await.expect("a reader does not panic");
    }

    let disk = std::fs::read_to_string(&path).expect("read back");
    let response = fake.hover(&uri).await;
    assert_echo(&response, &uri);
    let log = fake.log();
    let last_hover = *positions(&log, HOVER, &uri).last().expect("hovers");
    let seen = texts(&log, &uri, last_hover);
    assert_eq!(
        seen.last().map(|(_, t)| t.as_str()),
        Some(disk.as_str()),
        "the request after the burst saw the final text"
    );
    assert_eq!(
        response["result"]["_meta"]["documents"][0]["version"],
        seen.last().map(|(v, _)| *v).expect("some text"),
    );
    let Ok(fake) = Arc::try_unwrap(fake) else {
        panic!("every reader ended");
    };
    let log = fake.finish().await;
    let versions: Vec<i64> = texts(&log, &uri, log.len())
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "versions not strictly increasing: {versions:?}"
    );
    assert!(versions.len() > 2, "the burst was seen: {versions:?}");
    // The disk only moves forward, so what the server is told must too: two
    // reads that raced must not reach the server in the other order.
    let revisions: Vec<usize> = texts(&log, &uri, log.len())
        .iter()
        .filter_map(|(_, t)| revision_of(t))
        .collect();
    assert!(
        revisions.windows(2).all(|w| w[0] <= w[1]),
        "the server was sent an older text after a newer one: {revisions:?}"
    );
    let all = texts(&log, &uri, log.len());
    assert_eq!(
        all.last().map(|(_, t)| t.as_str()),
        Some(disk.as_str()),
        "nothing stale was sent after the final request"
    );
}

/// What the outside folder holds: text that must never reach a server.
const SECRET: &str = "SECRET outside the root\n";

/// Every text the fake received (didOpen/didChange) that holds [`SECRET`].
fn leaked(log: &[Value]) -> usize {
    log.iter()
        .filter(|m| m["method"] == DID_OPEN || m["method"] == DID_CHANGE)
        .filter(|m| m.to_string().contains("SECRET"))
        .count()
}

/// `<tmp>/elsewhere/doc.fake`, outside the workspace, holding [`SECRET`].
fn outside_folder(fake: &FakeServer) -> PathBuf {
    let elsewhere = fake.outside.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("outside folder");
    std::fs::write(elsewhere.join("doc.fake"), SECRET).expect("outside document");
    elsewhere
}

/// Replaces `<root>/sub` by a symlink to `target` (the old folder moves out).
fn swap_for_link(fake: &FakeServer, target: &Path, parked: &str) {
    std::fs::rename(fake.root.join("sub"), fake.outside.join(parked)).expect("move sub away");
    std::os::unix::fs::symlink(target, fake.root.join("sub")).expect("link sub outside");
}

fn with_sub_doc(root: &Path) {
    std::fs::create_dir_all(root.join("sub")).expect("sub");
    std::fs::write(root.join("sub/doc.fake"), "inside\n").expect("doc");
}

/// 9. An open document whose directory is swapped for a symlink to a
///    folder outside the root: the watcher's re-read does not follow it;
///    the document is closed, and the outside text never reaches the server.
#[tokio::test]
async fn a_swapped_directory_is_not_followed_by_the_watcher() {
    let fake = Fake::start(Setup {
        // The fake registers a watcher for `**/*.fake`.
        mode: "server_requests",
        prepare: &with_sub_doc,
        ..Setup::default()
    })
    .await;
    fake.wait_registration().await;
    let uri = fake.uri("sub/doc.fake");
    assert_echo(&fake.hover(&uri).await, &uri);
    let elsewhere = outside_folder(&fake);
    std::fs::write(elsewhere.join("listed.fake"), SECRET).expect("another outside file");
    swap_for_link(&fake, &elsewhere, "parked");
    fake.wait_log("the didClose of the swapped document", |log| {
        (!positions(log, DID_CLOSE, &uri).is_empty()).then_some(())
    })
    .await;
    // Named again, it is refused by the gate: it resolves outside now.
    let response = fake.hover(&uri).await;
    assert_eq!(
        response["error"]["data"]["reason"], "uri_outside_roots",
        "{response}"
    );
    // A request inside hands every change seen so far to the server first.
    let inside = fake.uri("a.fake");
    assert_echo(&fake.hover(&inside).await, &inside);
    let listed = fake.uri("sub/listed.fake");
    let log = fake.finish().await;
    assert_eq!(leaked(&log), 0, "the outside text reached the server");
    // The link was not walked: the outside folder's files were not listed.
    assert!(
        !watched_events(&log).iter().any(|(u, _)| *u == listed),
        "{:?}",
        watched_events(&log)
    );
}

/// 10. The same swap unseen by any watcher, then a restart: the reopen of
///     the server's documents does not follow the link either.
#[tokio::test]
async fn a_swapped_directory_is_not_followed_by_the_reopen_after_a_restart() {
    let fake = Fake::start(Setup {
        // Answers `initialize` and two requests, then exits: the
        // supervisor restarts it.
        mode: "exit_after=3",
        options: RegistryOptions {
            max_watches: Some(0),
            ..RegistryOptions::default()
        },
        prepare: &with_sub_doc,
        ..Setup::default()
    })
    .await;
    let doc = fake.uri("sub/doc.fake");
    let other = fake.uri("a.fake");
    assert_echo(&fake.hover(&doc).await, &doc);
    let elsewhere = outside_folder(&fake);
    swap_for_link(&fake, &elsewhere, "parked");
    assert_echo(&fake.hover(&other).await, &other);
    // The fake exits after that answer and is started again; a request
    // waits until the restart has reopened the documents. The restart's
    // `initialize` in the log does not mean the server runs yet: the
    // request says it waits (without it, it raced the supervisor and was
    // answered `server_not_running` when the gate's checks were quick).
    fake.wait_log("the restart's initialize", |log| {
        (log.iter().filter(|m| m["method"] == "initialize").count() == 2).then_some(())
    })
    .await;
    let mut waiting = fake.hover_params(&other);
    waiting["_meta"] = json!({ "waitUntilReady": LOG_TIMEOUT.as_millis() as u64 });
    assert_echo(&fake.call(GateMethod::Request, waiting).await, &other);
    let log = fake.finish().await;
    let initializes = log.iter().filter(|m| m["method"] == "initialize").count();
    assert!(initializes >= 2, "restarted: {initializes} initializes");
    assert_eq!(leaked(&log), 0, "the reopen sent the outside text");
    assert_eq!(
        positions(&log, DID_OPEN, &doc).len(),
        1,
        "opened once, before the swap"
    );
}

/// 11. A race: the directory flips between the real folder and a link to
///     the outside while requests name the document. The gate's check and
///     the read before the request are moments apart; only the read's own
///     check (of what it opened) is at the moment of the read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_flipping_to_an_outside_link_never_leaks_under_requests() {
    /// Requests sent while the directory flips.
    const REQUESTS: usize = 300;
    let fake = Fake::start(Setup {
        prepare: &with_sub_doc,
        ..Setup::default()
    })
    .await;
    let uri = fake.uri("sub/doc.fake");
    let elsewhere = outside_folder(&fake);
    // The real folder stays inside the root, under another name.
    let real = fake.root.join("real-sub");
    std::fs::rename(fake.root.join("sub"), &real).expect("rename the real folder");
    let link_to_real = fake.outside.join("link-real");
    let link_to_outside = fake.outside.join("link-outside");
    std::os::unix::fs::symlink(&real, &link_to_real).expect("link");
    std::os::unix::fs::symlink(&elsewhere, &link_to_outside).expect("link");
    let sub = fake.root.join("sub");
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = Arc::clone(&stop);
        let (a, b) = (link_to_real.clone(), link_to_outside.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Each flip is atomic: a fresh link renamed over `sub`. One
                // in eight points outside, so that most requests pass the
                // gate's check and reach the read.
                let (from, tmp) = if !flips.is_multiple_of(8) {
                    (&a, "a")
                } else {
                    (&b, "b")
                };
                let staged = sub.with_file_name(format!(".sub-{tmp}"));
                let _ = std::fs::remove_file(&staged);
                std::os::unix::fs::symlink(std::fs::read_link(from).unwrap(), &staged).unwrap();
                std::fs::rename(&staged, &sub).unwrap();
                flips += 1;
            }
            flips
        })
    };
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for _ in 0..REQUESTS {
        let response = fake.hover(&uri).await;
        let outcome = match response["error"]["data"]["reason"].as_str() {
            Some(reason) => reason.to_string(),
            None => response["result"]["_meta"]["documents"][0]["skipped"]
                .as_str()
                .map_or("answered".to_string(), |s| format!("answered, skipped {s}")),
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().expect("flipper");
    let log = fake.finish().await;
    println!(
        "{REQUESTS} requests over {flips} flips: {outcomes:?}; outside texts received: {}",
        leaked(&log)
    );
    assert_eq!(leaked(&log), 0, "outside texts reached the server");
}
