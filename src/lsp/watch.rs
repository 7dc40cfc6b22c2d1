//! Watching session roots for file changes, ignore-aware: each directory the
//! walk keeps gets its own non-recursive OS watch (a recursive watch would
//! also descend into `target/`, `node_modules/`, `.git/`). Raw events are
//! coalesced adaptively and handed on as one batch of changes: an in-place
//! write after quiet goes on as soon as its file is closed; creations,
//! deletions, renames (half of an atomic save, or a directory move) and
//! bursts are gathered over a short window.
//!
//! Per OS: on Linux (inotify) each kept directory is one OS watch, as
//! above. FSEvents (macOS) and `ReadDirectoryChangesW` (Windows) watch a
//! whole tree at the price of one: there the root gets one recursive
//! watch, the walk still decides which directories are kept, and an event
//! counts only when its path is a kept directory or lies directly in one
//! (what `target/` or an ignored folder does never reaches the batches).
//! Neither reports a written file's close, so a batch of writes waits for
//! the window there.

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long events are gathered after the first one before a batch is handed
/// on, unless the batch may go at once (see [`WatchOptions::adaptive`]).
pub const DEFAULT_COALESCE: Duration = Duration::from_millis(20);

/// What happened to a path, as seen after the coalescing window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileChange {
    Created,
    Changed,
    Deleted,
}

/// One batch of changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchBatch {
    /// Paths and what happened to them, sorted by path. A deleted directory is
    /// reported once, for the directory.
    Changes(Vec<(PathBuf, FileChange)>),
    /// Events were lost (the OS queue overflowed): every file may have changed.
    Rescan,
}

/// A batch handed to the consumer. Dropping `done` (or sending on it) says the
/// consumer has finished with it: [`Settler::settle`] waits for that.
#[derive(Debug)]
pub struct Delivery {
    pub batch: WatchBatch,
    pub done: tokio::sync::oneshot::Sender<()>,
}

/// How long a request waits for events already received to be handed on.
pub const SETTLE_TIMEOUT: Duration = Duration::from_millis(250);

/// Waits until every event received so far has been handled, so that a
/// request sent after a change on disk sees it even for files it does not
/// name (the ones it names are checked anyway).
#[derive(Clone)]
pub struct Settler {
    received: Arc<AtomicU64>,
    handled: tokio::sync::watch::Receiver<u64>,
}

impl Settler {
    /// Raw events received from the OS so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Acquire)
    }

    /// Waits, at most `limit`, until the events received before the call are handled.
    pub async fn settle(&self, limit: Duration) {
        let target = self.received.load(Ordering::Acquire);
        if *self.handled.borrow() >= target {
            return;
        }
        let mut handled = self.handled.clone();
        let _ = tokio::time::timeout(limit, handled.wait_for(|h| *h >= target)).await;
    }
}

/// How to watch.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// Directory names never walked or reported (`.git`, `target`, …).
    pub skip_dirs: Vec<String>,
    pub coalesce: Duration,
    /// Adaptive coalescing: after quiet, a batch of in-place writes goes on
    /// as soon as every written file is closed (no window). Anything that
    /// may be one step of several (a creation, a deletion, a rename: an
    /// atomic save is a temporary file renamed over the original, a moved
    /// directory is a rename) and events following a batch closely (a
    /// burst) still wait for the whole window. `false`: every batch waits
    /// for the window (the bench's baseline).
    pub adaptive: bool,
    /// Most directory watches to add (test hook for the OS limit); `None` = the OS decides.
    pub max_watches: Option<usize>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            skip_dirs: super::config::DEFAULT_SKIP_DIRS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            coalesce: DEFAULT_COALESCE,
            adaptive: true,
            max_watches: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot watch {path}: {source}")]
    Notify {
        path: PathBuf,
        #[source]
        source: notify::Error,
    },
}

/// Whether the OS watches a whole tree with one watch (see the module docs).
const RECURSIVE_ROOT_WATCH: bool = cfg!(any(target_os = "macos", windows));

struct Shared {
    root: PathBuf,
    /// Raw events received from the OS, and how many of them are handled.
    received: Arc<AtomicU64>,
    handled: tokio::sync::watch::Sender<u64>,
    options: WatchOptions,
    ignore: Gitignore,
    watcher: Mutex<Option<RecommendedWatcher>>,
    /// The directories kept by the walk (each an OS watch, or, with one
    /// recursive watch of the root, the filter of its events).
    watched: Arc<Mutex<HashSet<PathBuf>>>,
    degraded: AtomicBool,
}

/// A watched root. Dropping it stops the watching.
pub struct RootWatch {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RootWatch {
    fn drop(&mut self) {
        self.task.abort();
        // Dropping the OS watcher ends its thread and closes the raw event channel.
        self.shared.watcher.lock().take();
    }
}

impl RootWatch {
    /// Starts watching `root`; batches go to `sink`. Returns once every kept
    /// directory has its watch (or the watch limit was hit: see [`RootWatch::degraded`]).
    pub fn start(
        root: &Path,
        options: WatchOptions,
        sink: mpsc::UnboundedSender<Delivery>,
    ) -> Result<RootWatch, WatchError> {
        let (raw_tx, raw_rx) = mpsc::unbounded_channel::<notify::Result<Event>>();
        let received = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&received);
        let watched: Arc<Mutex<HashSet<PathBuf>>> = Arc::default();
        let kept = Arc::clone(&watched);
        let watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            // Reads (open, close) change nothing; counted, each would make
            // the next request settle for a batch (~20 ms) that does
            // nothing, and the MCP tools read the files they answer about.
            // The close of a written file is kept: it says the write is
            // complete (the adaptive coalescing hands the batch on then).
            if matches!(&event, Ok(e) if is_read(&e.kind)) {
                return;
            }
            // One recursive watch: only what the walk keeps counts.
            if RECURSIVE_ROOT_WATCH {
                if let Ok(e) = &event {
                    if !e.need_rescan() && !e.paths.iter().any(|p| in_kept(&kept.lock(), p)) {
                        return;
                    }
                }
            }
            // Counted before it is queued: a settle that reads the count then
            // always waits for this event.
            counter.fetch_add(1, Ordering::AcqRel);
            let _ = raw_tx.send(event);
        })
        .map_err(|source| WatchError::Notify {
            path: root.to_path_buf(),
            source,
        })?;
        let shared = Arc::new(Shared {
            root: root.to_path_buf(),
            received,
            handled: tokio::sync::watch::channel(0).0,
            ignore: root_ignore(root),
            options,
            watcher: Mutex::new(Some(watcher)),
            watched,
            degraded: AtomicBool::new(false),
        });
        shared.watch_tree(root);
        let task = tokio::spawn(coalesce(Arc::clone(&shared), raw_rx, sink));
        Ok(RootWatch { shared, task })
    }

    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    /// A handle that waits for received events to be handled.
    pub fn settler(&self) -> Settler {
        Settler {
            received: Arc::clone(&self.shared.received),
            handled: self.shared.handled.subscribe(),
        }
    }

    /// Whether some directories could not be watched (the OS watch limit).
    /// Answers stay fresh through the check made before each request.
    pub fn degraded(&self) -> bool {
        self.shared.degraded.load(Ordering::Relaxed)
    }

    /// How many directories are watched.
    pub fn watched_directories(&self) -> usize {
        self.shared.watched.lock().len()
    }
}

/// `.gitignore` and `.ignore` of the root, for events (the walk reads nested ones itself).
fn root_ignore(root: &Path) -> Gitignore {
    let mut builder = GitignoreBuilder::new(root);
    for name in [".gitignore", ".ignore"] {
        let path = root.join(name);
        if path.is_file() {
            let _ = builder.add(path);
        }
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

impl Shared {
    fn skipped_name(&self, path: &Path) -> bool {
        path.strip_prefix(&self.root).is_ok_and(|rel| {
            rel.components().any(|c| {
                let name = c.as_os_str().to_string_lossy();
                name == ".git" || self.options.skip_dirs.iter().any(|s| *s == name)
            })
        })
    }

    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        self.skipped_name(path)
            || self
                .ignore
                .matched_path_or_any_parents(path, is_dir)
                .is_ignore()
    }

    /// Walks `dir` ignore-aware and watches every directory kept. Returns the
    /// files found (for a directory that appeared after the start).
    fn watch_tree(&self, dir: &Path) -> Vec<PathBuf> {
        let skip: HashSet<String> = self.options.skip_dirs.iter().cloned().collect();
        let walk = ignore::WalkBuilder::new(dir)
            .hidden(false)
            .git_ignore(true)
            .git_exclude(true)
            .ignore(true)
            .parents(true)
            .require_git(false)
            .filter_entry(move |entry| {
                let name = entry.file_name().to_string_lossy();
                !(entry.file_type().is_some_and(|t| t.is_dir())
                    && (name == ".git" || skip.contains(name.as_ref())))
            })
            .build();
        let mut files = Vec::new();
        for entry in walk.flatten() {
            if entry.file_type().is_some_and(|t| t.is_dir()) {
                self.watch_dir(entry.path());
            } else {
                files.push(entry.into_path());
            }
        }
        files
    }

    fn watch_dir(&self, dir: &Path) {
        if self.degraded.load(Ordering::Relaxed) {
            return;
        }
        let mut watched = self.watched.lock();
        if watched.contains(dir) {
            return;
        }
        if self
            .options
            .max_watches
            .is_some_and(|max| watched.len() >= max)
        {
            self.degrade(dir, "the configured watch limit was reached");
            return;
        }
        if RECURSIVE_ROOT_WATCH {
            watched.insert(dir.to_path_buf());
            if dir != self.root {
                // Under the root's one watch already: kept, for the filter.
                return;
            }
            // Not held across the OS call: the event thread takes it.
            drop(watched);
            let mut watcher = self.watcher.lock();
            let Some(watcher) = watcher.as_mut() else {
                return;
            };
            if let Err(e) = watcher.watch(dir, RecursiveMode::Recursive) {
                self.watched.lock().remove(dir);
                self.degrade(dir, &format!("the root cannot be watched ({e})"));
            }
            return;
        }
        let mut watcher = self.watcher.lock();
        let Some(watcher) = watcher.as_mut() else {
            return;
        };
        match watcher.watch(dir, RecursiveMode::NonRecursive) {
            Ok(()) => {
                watched.insert(dir.to_path_buf());
            }
            Err(e) if matches!(e.kind, notify::ErrorKind::MaxFilesWatch) => {
                self.degrade(
                    dir,
                    "the OS watch limit (inotify max_user_watches) was reached",
                );
            }
            // The directory vanished meanwhile: its parent reports that.
            Err(e) => tracing::debug!(dir = %dir.display(), error = %e, "cannot watch"),
        }
    }

    fn degrade(&self, dir: &Path, why: &str) {
        if !self.degraded.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                root = %self.root.display(),
                at = %dir.display(),
                "file watching is degraded: {why}; changes are still found before each request"
            );
        }
    }

    fn forget_dir(&self, dir: &Path) {
        self.watched.lock().retain(|d| !d.starts_with(dir));
    }
}

/// Gathers raw events for the coalescing window, then decides what each path
/// went through by looking at the disk (an atomic save is a create or rename
/// over the old name: it ends up `Changed`).
async fn coalesce(
    shared: Arc<Shared>,
    mut raw: mpsc::UnboundedReceiver<notify::Result<Event>>,
    sink: mpsc::UnboundedSender<Delivery>,
) {
    let mut consumed: u64 = 0;
    let window = shared.options.coalesce;
    // Until when a new event counts as part of a burst (and waits for the
    // whole window), and until when the batch after a batch handed on at
    // once keeps gathering: that one covered no window, so the next covers
    // two, and a burst gets no more batches than with fixed windows.
    let mut burst_until = tokio::time::Instant::now();
    let mut stretch_until = burst_until;
    while let Some(first) = raw.recv().await {
        let started = tokio::time::Instant::now();
        let mut pending = Pending::default();
        pending.add(&first);
        let mut events = vec![first];
        let quiet = shared.options.adaptive && started >= burst_until;
        let deadline = (started + window).max(stretch_until);
        let mut at_once = false;
        loop {
            // Whatever is queued already belongs to this batch.
            while let Ok(event) = raw.try_recv() {
                pending.add(&event);
                events.push(event);
            }
            if quiet && pending.complete() {
                at_once = true;
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                next = raw.recv() => match next {
                    Some(event) => {
                        pending.add(&event);
                        events.push(event);
                    }
                    None => break,
                },
            }
        }
        let now = tokio::time::Instant::now();
        burst_until = now + window;
        stretch_until = if at_once { started + 2 * window } else { now };
        consumed += events.len() as u64;
        let mut rescan = false;
        // Path → whether some event said it was created.
        let mut touched: BTreeMap<PathBuf, bool> = BTreeMap::new();
        for event in events {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!(error = %e, "file watch error");
                    continue;
                }
            };
            if event.need_rescan() {
                rescan = true;
                continue;
            }
            let created = matches!(
                event.kind,
                EventKind::Create(_) | EventKind::Modify(notify::event::ModifyKind::Name(_))
            );
            if matches!(event.kind, EventKind::Access(_)) {
                continue;
            }
            // A rename's source left: it was not created (an earlier batch
            // may have reported it; it is now reported deleted).
            let from = match event.kind {
                EventKind::Modify(ModifyKind::Name(RenameMode::From)) => event.paths.len(),
                EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => 1,
                _ => 0,
            };
            for (i, path) in event.paths.into_iter().enumerate() {
                *touched.entry(path).or_default() |= created && i >= from;
            }
        }
        if rescan {
            shared.watch_tree(&shared.root.clone());
            if !deliver(&sink, WatchBatch::Rescan).await {
                return;
            }
            shared.handled.send_replace(consumed);
            continue;
        }
        let mut changes = Vec::new();
        for (path, created) in touched {
            // Not following links, as the walk does not: a directory
            // replaced by a link to a folder outside the root must not be
            // walked, watched or listed to servers.
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => {
                    if shared.ignored(&path, true) || !created {
                        continue;
                    }
                    // A new or moved-in directory: watch it, report its files.
                    for file in shared.watch_tree(&path) {
                        changes.push((file, FileChange::Created));
                    }
                }
                Ok(_) => {
                    if shared.ignored(&path, false) {
                        continue;
                    }
                    let change = if created {
                        FileChange::Created
                    } else {
                        FileChange::Changed
                    };
                    changes.push((path, change));
                }
                Err(_) => {
                    // Created and gone within one window (an editor's temp file):
                    // nothing to report.
                    if created || shared.ignored(&path, false) {
                        continue;
                    }
                    shared.forget_dir(&path);
                    changes.push((path, FileChange::Deleted));
                }
            }
        }
        if !changes.is_empty() {
            changes.sort();
            changes.dedup_by(|a, b| a.0 == b.0);
            if !deliver(&sink, WatchBatch::Changes(changes)).await {
                return;
            }
        }
        shared.handled.send_replace(consumed);
    }
}

/// Whether `path` is a kept directory or lies directly in one.
fn in_kept(kept: &HashSet<PathBuf>, path: &Path) -> bool {
    kept.contains(path) || path.parent().is_some_and(|parent| kept.contains(parent))
}

/// Reads: opening a file, closing one not written. Nothing changed.
fn is_read(kind: &EventKind) -> bool {
    matches!(kind, EventKind::Access(access) if *access != AccessKind::Close(AccessMode::Write))
}

/// What the events of a batch so far say about handing it on at once.
#[derive(Default)]
struct Pending {
    /// Some event may be one step of several (creation, deletion, rename,
    /// overflow, an error, an event of a kind not known).
    structural: bool,
    /// Files written and not closed yet.
    open: HashSet<PathBuf>,
}

impl Pending {
    fn add(&mut self, event: &notify::Result<Event>) {
        let Ok(event) = event else {
            self.structural = true;
            return;
        };
        if event.need_rescan() {
            self.structural = true;
            return;
        }
        match event.kind {
            EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) => {
                self.open.extend(event.paths.iter().cloned());
            }
            EventKind::Modify(ModifyKind::Metadata(_)) => {}
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
                for path in &event.paths {
                    self.open.remove(path);
                }
            }
            _ => self.structural = true,
        }
    }

    /// Only in-place writes, each file closed since: the batch is whole.
    fn complete(&self) -> bool {
        !self.structural && self.open.is_empty()
    }
}

/// Hands a batch on and waits until the consumer is done with it. False when
/// the consumer is gone.
async fn deliver(sink: &mpsc::UnboundedSender<Delivery>, batch: WatchBatch) -> bool {
    let (done, finished) = tokio::sync::oneshot::channel();
    if sink.send(Delivery { batch, done }).is_err() {
        return false;
    }
    // An error only means the consumer dropped `done`: it is finished too.
    let _ = finished.await;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Longest wait for a batch in these tests.
    const BATCH_TIMEOUT: Duration = Duration::from_secs(10);

    struct Fixture {
        dir: tempfile::TempDir,
        root: PathBuf,
        watch: RootWatch,
        rx: mpsc::UnboundedReceiver<Delivery>,
    }

    fn fixture(options: WatchOptions) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join("src/a.rs"), "a").unwrap();
        std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
        std::fs::create_dir_all(root.join("ignored")).unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let watch = RootWatch::start(&root, options, tx).unwrap();
        Fixture {
            dir,
            root,
            watch,
            rx,
        }
    }

    impl Fixture {
        /// Changes until one batch mentions `path`.
        async fn changes_for(&mut self, path: &Path) -> Vec<(PathBuf, FileChange)> {
            loop {
                let delivery = tokio::time::timeout(BATCH_TIMEOUT, self.rx.recv())
                    .await
                    .expect("no batch in time")
                    .expect("watch ended");
                if let WatchBatch::Changes(changes) = delivery.batch {
                    if changes.iter().any(|(p, _)| p == path) {
                        return changes;
                    }
                }
            }
        }
    }

    fn change_of(changes: &[(PathBuf, FileChange)], path: &Path) -> Option<FileChange> {
        changes.iter().find(|(p, _)| p == path).map(|(_, c)| *c)
    }

    #[tokio::test]
    async fn watches_only_kept_directories() {
        let f = fixture(WatchOptions::default());
        // root, src, src/deep: not target/ (skip list) nor ignored/ (.gitignore).
        assert_eq!(f.watch.watched_directories(), 3);
        assert!(!f.watch.degraded());
        drop(f.dir);
    }

    #[tokio::test]
    async fn reports_create_change_atomic_save_and_delete() {
        let mut f = fixture(WatchOptions::default());
        let a = f.root.join("src/a.rs");
        std::fs::write(&a, "changed").unwrap();
        assert_eq!(
            change_of(&f.changes_for(&a).await, &a),
            Some(FileChange::Changed)
        );

        let b = f.root.join("src/deep/b.rs");
        std::fs::write(&b, "new").unwrap();
        assert_eq!(
            change_of(&f.changes_for(&b).await, &b),
            Some(FileChange::Created)
        );

        // Atomic save: write a temp file, rename it over the original.
        let tmp = f.root.join("src/.a.rs.tmp");
        std::fs::write(&tmp, "saved").unwrap();
        std::fs::rename(&tmp, &a).unwrap();
        let changes = f.changes_for(&a).await;
        assert!(change_of(&changes, &a).is_some());
        assert_eq!(change_of(&changes, &tmp), None, "{changes:?}");

        std::fs::remove_file(&b).unwrap();
        assert_eq!(
            change_of(&f.changes_for(&b).await, &b),
            Some(FileChange::Deleted)
        );
    }

    #[tokio::test]
    async fn a_new_directory_is_watched_and_its_files_reported() {
        let mut f = fixture(WatchOptions::default());
        // Built elsewhere, then moved in: one rename event for the directory.
        let outside = f.dir.path().join("../").canonicalize().unwrap();
        let staging = tempfile::tempdir_in(outside).unwrap();
        std::fs::create_dir_all(staging.path().join("pkg")).unwrap();
        std::fs::write(staging.path().join("pkg/m.rs"), "m").unwrap();
        let pkg = f.root.join("src/pkg");
        std::fs::rename(staging.path().join("pkg"), &pkg).unwrap();
        let m = pkg.join("m.rs");
        assert_eq!(
            change_of(&f.changes_for(&m).await, &m),
            Some(FileChange::Created)
        );
        // Now watched: a change inside is seen.
        std::fs::write(&m, "m2").unwrap();
        assert_eq!(
            change_of(&f.changes_for(&m).await, &m),
            Some(FileChange::Changed)
        );
    }

    /// The next batch of changes (a rescan fails the test).
    async fn next_changes(f: &mut Fixture) -> Vec<(PathBuf, FileChange)> {
        let delivery = tokio::time::timeout(BATCH_TIMEOUT, f.rx.recv())
            .await
            .expect("no batch in time")
            .expect("watch ended");
        match delivery.batch {
            WatchBatch::Changes(changes) => changes,
            WatchBatch::Rescan => panic!("a rescan"),
        }
    }

    /// A window no test waits out: a batch that arrives was handed on
    /// without it.
    #[cfg(target_os = "linux")]
    const ENDLESS: Duration = Duration::from_secs(3600);
    /// A window long enough that the steps of one save fall inside it.
    const WIDE: Duration = Duration::from_millis(500);

    // inotify only: FSEvents and ReadDirectoryChangesW report no close after
    // a write (ARCHITECTURE.md "Per OS").
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_in_place_write_after_quiet_goes_on_without_the_window() {
        let mut f = fixture(WatchOptions {
            coalesce: ENDLESS,
            ..WatchOptions::default()
        });
        let a = f.root.join("src/a.rs");
        std::fs::write(&a, "changed").unwrap();
        assert_eq!(next_changes(&mut f).await, vec![(a, FileChange::Changed)]);
    }

    #[tokio::test]
    async fn an_atomic_save_is_one_change() {
        let mut f = fixture(WatchOptions {
            coalesce: WIDE,
            ..WatchOptions::default()
        });
        let a = f.root.join("src/a.rs");
        // Write a temporary file, rename it over the original.
        let tmp = f.root.join("src/.a.rs.tmp");
        std::fs::write(&tmp, "saved").unwrap();
        std::fs::rename(&tmp, &a).unwrap();
        let changes = next_changes(&mut f).await;
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].0, a);
        // And the temporary file never shows up later either.
        let sentinel = f.root.join("src/sentinel.rs");
        std::fs::write(&sentinel, "s").unwrap();
        loop {
            let changes = next_changes(&mut f).await;
            assert_eq!(change_of(&changes, &tmp), None, "{changes:?}");
            if change_of(&changes, &sentinel).is_some() {
                break;
            }
        }
    }

    #[tokio::test]
    async fn a_directory_move_is_one_change() {
        let mut f = fixture(WatchOptions {
            coalesce: WIDE,
            ..WatchOptions::default()
        });
        let outside = f.dir.path().join("../").canonicalize().unwrap();
        let staging = tempfile::tempdir_in(outside).unwrap();
        std::fs::create_dir_all(staging.path().join("pkg")).unwrap();
        std::fs::write(staging.path().join("pkg/m.rs"), "m").unwrap();
        std::fs::write(staging.path().join("pkg/n.rs"), "n").unwrap();
        let pkg = f.root.join("src/pkg");
        std::fs::rename(staging.path().join("pkg"), &pkg).unwrap();
        assert_eq!(
            next_changes(&mut f).await,
            vec![
                (pkg.join("m.rs"), FileChange::Created),
                (pkg.join("n.rs"), FileChange::Created)
            ]
        );
        // Renamed inside the root: the old directory goes, once, and the
        // files come under the new name, in the same batch.
        let moved = f.root.join("src/moved");
        std::fs::rename(&pkg, &moved).unwrap();
        assert_eq!(
            next_changes(&mut f).await,
            vec![
                (moved.join("m.rs"), FileChange::Created),
                (moved.join("n.rs"), FileChange::Created),
                (pkg, FileChange::Deleted),
            ]
        );
    }

    #[tokio::test]
    async fn skipped_and_ignored_paths_are_not_reported() {
        let mut f = fixture(WatchOptions::default());
        std::fs::write(f.root.join("target/debug/x"), "x").unwrap();
        std::fs::write(f.root.join("ignored/y"), "y").unwrap();
        let marker = f.root.join("src/marker.rs");
        std::fs::write(&marker, "m").unwrap();
        let changes = f.changes_for(&marker).await;
        assert!(
            changes
                .iter()
                .all(|(p, _)| !p.starts_with(f.root.join("target"))
                    && !p.starts_with(f.root.join("ignored"))),
            "{changes:?}"
        );
    }

    #[tokio::test]
    async fn settle_waits_until_received_events_are_handled() {
        let mut f = fixture(WatchOptions::default());
        let settler = f.watch.settler();
        let before = settler.received();
        let file = f.root.join("src/new.rs");
        std::fs::write(&file, "x").unwrap();
        // The OS delivers the event asynchronously: wait until it is received.
        let deadline = std::time::Instant::now() + BATCH_TIMEOUT;
        while settler.received() == before {
            assert!(std::time::Instant::now() < deadline, "no event received");
            tokio::task::yield_now().await;
        }
        // Not handled yet: the consumer has not taken the batch.
        let mut settle = tokio::spawn({
            let settler = settler.clone();
            async move { settler.settle(BATCH_TIMEOUT).await }
        });
        let delivery = tokio::time::timeout(BATCH_TIMEOUT, f.rx.recv())
            .await
            .expect("a batch")
            .expect("the watch runs");
        assert!(
            tokio::time::timeout(Duration::from_millis(50), &mut settle)
                .await
                .is_err(),
            "settled before the batch was handled"
        );
        let WatchBatch::Changes(changes) = &delivery.batch else {
            panic!("{:?}", delivery.batch)
        };
        assert!(changes.iter().any(|(p, _)| *p == file), "{changes:?}");
        drop(delivery);
        tokio::time::timeout(BATCH_TIMEOUT, settle)
            .await
            .expect("settled once the batch was handled")
            .unwrap();
        // Nothing pending: settling is immediate.
        tokio::time::timeout(Duration::from_millis(1), settler.settle(BATCH_TIMEOUT))
            .await
            .expect("nothing to wait for");
    }

    #[tokio::test]
    async fn reads_are_not_counted_as_events_to_settle() {
        const READS: u64 = 20;
        let mut f = fixture(WatchOptions::default());
        let settler = f.watch.settler();
        let before = settler.received();
        for _ in 0..READS {
            std::fs::read_to_string(f.root.join("src/a.rs")).unwrap();
        }
        // inotify keeps order: once the write's batch is here, every read's
        // events (an open and a close each) came before it.
        let sentinel = f.root.join("src/sentinel.rs");
        std::fs::write(&sentinel, "s").unwrap();
        f.changes_for(&sentinel).await;
        let counted = settler.received() - before;
        assert!(
            counted < READS,
            "{counted} events counted for {READS} reads and one write"
        );
    }

    #[tokio::test]
    async fn the_watch_limit_degrades_visibly() {
        let f = fixture(WatchOptions {
            max_watches: Some(1),
            ..WatchOptions::default()
        });
        assert!(f.watch.degraded());
        assert_eq!(f.watch.watched_directories(), 1);
    }
}
