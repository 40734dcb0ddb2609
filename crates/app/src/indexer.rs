//! The app's one indexer thread and what it does: index what arrives (drops, uploads, watcher
//! events once the files have settled), follow renames and deletions, catch up with a folder at
//! start, and run the index's integrity check.
//!
//! Why one thread: every write to the index goes through it in order, so watcher events, drops and
//! scans never race each other.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::Receiver;
use warpfold_index::files::{self, Collected};
use warpfold_index::pipeline::{hash_file, index_collected, repair_missing_vectors, Progress};
use warpfold_index::search::Searcher;
use warpfold_index::store::Store;

use crate::{App, AppError, Job, QueueState};

/// What an index run reads of what was collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    /// All of it: files and folders the person gave (drops, uploads, `add_paths`).
    Given,
    /// What a watched folder still holds: its catch-up and settled changes.
    Watched,
    /// Every file again, changed or not, of what the app still follows or holds (a re-index).
    Reread,
}

/// How long a forget waits for a paused index run before it says to resume first.
const FORGET_WAITS_FOR_A_RUN: Duration = Duration::from_secs(2);

impl App {
    pub(crate) fn refresh_searcher(&self) {
        match Searcher::open(&self.inner.config.db) {
            Ok(searcher) => *self.inner.searcher.lock() = Some(searcher),
            Err(e) => tracing::warn!(error = %e, "reopening the index for search"),
        }
    }

    pub(crate) fn run_indexer(&self, jobs: Receiver<Job>) {
        // A pause holds the next file of a run, not only the next run: a folder of thousands stops
        // within a file or two. Stopping the app cancels what the run has not started.
        let paused = self.inner.paused.clone();
        let hold = std::sync::Arc::new(move || paused.load(Ordering::Relaxed));
        let progress = Progress {
            observer: Some(self.inner.board.clone()),
            hold: Some(hold),
            cancel: Some(self.inner.stop.clone()),
            ..Progress::default()
        };
        let mut pending: Vec<Job> = Vec::new();
        let mut settling = Settling::default();
        let mut rearmed = std::time::Instant::now();
        loop {
            // Paused for want of space: no job runs (each would fail the same way) until a write
            // succeeds again; then the run's files are indexed again.
            if self.inner.writes_paused.lock().is_some() {
                if self.inner.stop.load(Ordering::Relaxed) {
                    return;
                }
                self.try_resume();
                if self.inner.writes_paused.lock().is_some() {
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            }
            if self.inner.paused.load(Ordering::Relaxed) {
                if self.inner.stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            if rearmed.elapsed() >= REARM_EVERY {
                self.rearm_watches();
                rearmed = std::time::Instant::now();
            }
            if pending.is_empty() {
                match jobs.recv_timeout(Duration::from_millis(200)) {
                    Ok(job) => pending.push(job),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                        if self.inner.stop.load(Ordering::Relaxed) {
                            return;
                        }
                        continue;
                    }
                    Err(_) => return,
                }
            }
            pending.extend(jobs.try_iter());
            let job = pending.remove(0);
            // An index deleted or replaced under the app is not written to (App::index_intact).
            if !self.index_intact() {
                continue;
            }
            let result = match job {
                Job::Index(mut paths) => {
                    // Merge every index job waiting behind this one into one run (one set of bins).
                    let mut rest = Vec::new();
                    for job in pending.drain(..) {
                        match job {
                            Job::Index(more) => paths.extend(more),
                            other => rest.push(other),
                        }
                    }
                    pending = rest;
                    let present: Vec<PathBuf> = paths.into_iter().filter(|p| std::fs::symlink_metadata(p).is_ok()).collect();
                    self.index(files::collect(&present).unwrap_or_default(), &progress)
                }
                Job::Reindex(paths) => {
                    let present: Vec<PathBuf> = paths.into_iter().filter(|p| std::fs::symlink_metadata(p).is_ok()).collect();
                    self.index_with(files::collect(&present).unwrap_or_default(), &progress, Run::Reread)
                }
                Job::Settle(paths) => {
                    // A new folder stands for the files in it, each of which must have settled.
                    let Collected { files, refused } = self.collect_watched(&paths);
                    let settle = self.inner.config.settle;
                    let (ready, later): (Vec<_>, Vec<_>) = files.into_iter().partition(|p| settling.settled(p, settle));
                    if !later.is_empty() {
                        let (jobs, wait) = (self.inner.jobs.clone(), self.inner.config.settle);
                        std::thread::spawn(move || {
                            std::thread::sleep(wait);
                            let _ = jobs.send(Job::Settle(later));
                        });
                    }
                    let ready = Collected { files: ready.into_iter().filter(|p| p.exists()).collect(), refused };
                    self.queue_collected(&ready);
                    self.index_with(ready, &progress, Run::Watched)
                }
                Job::Remove(path) => self.remove(&path),
                Job::Rename(from, to) => self.rename(&from, &to),
                Job::Scan(folder) => self.catch_up(folder, &progress),
                Job::ScanWatched => self.watched_roots().into_iter().try_for_each(|folder| self.catch_up(folder, &progress)),
                Job::Check => self.check(),
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, "indexer job failed");
            }
        }
    }

    /// The index's integrity check: chunks without a vector are embedded (see `warpfold index --check`).
    fn check(&self) -> Result<(), AppError> {
        let report = repair_missing_vectors(&self.inner.config.db, &self.inner.embedder, &self.inner.config.model)?;
        if report.chunks_without_vectors > 0 {
            tracing::warn!(
                chunks = report.chunks_without_vectors,
                embedded = report.texts_reembedded,
                "chunks without vectors were embedded again"
            );
            self.refresh_searcher();
        }
        for failure in &report.failures {
            tracing::warn!(failure, "integrity check");
        }
        Ok(())
    }

    fn index(&self, collected: Collected, progress: &Progress) -> Result<(), AppError> {
        self.index_with(collected, progress, Run::Given)
    }

    /// Indexes what was collected, as `run` says.
    fn index_with(&self, collected: Collected, progress: &Progress, run: Run) -> Result<(), AppError> {
        if collected.files.is_empty() && collected.refused.is_empty() {
            return Ok(());
        }
        let reread = run == Run::Reread;
        let options = if reread {
            std::borrow::Cow::Owned(warpfold_index::pipeline::IndexOptions { reread: true, ..self.inner.config.index_options.clone() })
        } else {
            std::borrow::Cow::Borrowed(&self.inner.config.index_options)
        };
        let writing = self.inner.writing.lock();
        let mut collected = collected;
        if run != Run::Given {
            // Only what the app still follows or holds, decided under the lock a forget takes: a
            // folder removed with its documents since its scan or re-index was queued is not read
            // back into the index.
            let store = Store::open_existing(&self.inner.config.db).ok();
            let held = |file: &Path| store.as_ref().is_some_and(|s| s.document_state(&file.display().to_string()).ok().flatten().is_some());
            let (held, gone): (Vec<PathBuf>, Vec<PathBuf>) =
                std::mem::take(&mut collected.files).into_iter().partition(|file| self.would_read(file) || (reread && held(file)));
            for file in gone {
                self.inner.board.remove(&file.display().to_string());
            }
            collected.files = held;
        }
        let indexed_files = collected.files.clone();
        let report =
            match index_collected(collected, &self.inner.config.db, &self.inner.embedder, &self.inner.config.model, &options, progress) {
                Ok(report) => report,
                Err(e) if e.disk_full() => {
                    self.pause_for_space(&e.to_string(), &indexed_files);
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            };
        drop(writing);
        // A re-embedding ends once the new index holds every document of the old one.
        if crate::reembed::pending(&self.inner.config.db).is_some() {
            match crate::reembed::finish_if_done(&self.inner.config.db) {
                Ok(true) => tracing::info!("every document is embedded again; the old index is removed"),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "checking the re-embedding"),
            }
        }
        tracing::info!(
            indexed = report.documents_indexed,
            failed = report.documents_failed,
            unchanged = report.documents_skipped,
            skipped = report.skipped.len(),
            "indexed"
        );
        self.refresh_searcher();
        if self.inner.config.summaries.as_ref().is_some_and(|s| s.auto) {
            let done: Vec<String> = indexed_files
                .iter()
                .map(|file| file.display().to_string())
                .filter(|path| self.inner.board.get(path).is_some_and(|f| f.state == QueueState::Done))
                .collect();
            self.queue_summaries(done);
        }
        Ok(())
    }

    /// Forgets documents for good ([`Store::forget_documents`]: no text of them left in the index
    /// file): each path is a document the index holds, named exactly (a folder's documents go
    /// with it through [`App::remove_folder_and`]: a script in the web view cannot empty the index
    /// by naming `/`). One inside a watched folder is refused, as the next scan would read it
    /// again: stop watching the folder with its documents forgotten, or delete the file. Returns
    /// the documents forgotten.
    pub fn forget(&self, paths: &[String]) -> Result<Vec<String>, AppError> {
        self.forget_under(paths, false)
    }

    /// [`App::forget`], where `folders_too` lets a path name a folder of documents too.
    pub(crate) fn forget_under(&self, paths: &[String], folders_too: bool) -> Result<Vec<String>, AppError> {
        if paths.is_empty() {
            return Err(AppError::InvalidInput("no paths given".into()));
        }
        let folders = self.folders();
        for path in paths {
            if let Some(folder) = folders.iter().find(|f| Path::new(path).starts_with(f)) {
                return Err(AppError::InvalidInput(format!(
                    "{path} is inside the watched folder {folder}, whose next scan would read it again: stop watching the folder and forget its documents, or delete the file"
                )));
            }
        }
        let _writing = self.writing_lock()?;
        self.forget_locked(paths, folders_too)
    }

    /// The index's write lock, after the index run in progress, if any (it could commit again
    /// what is forgotten now). A run held by a pause does not end: that is said at once.
    pub(crate) fn writing_lock(&self) -> Result<parking_lot::MutexGuard<'_, ()>, AppError> {
        loop {
            if let Some(guard) = self.inner.writing.try_lock_for(FORGET_WAITS_FOR_A_RUN) {
                return Ok(guard);
            }
            if self.inner.paused.load(Ordering::Relaxed) {
                return Err(AppError::InvalidInput(
                    "indexing is paused in the middle of a run that may read these documents: resume it, then forget them".into(),
                ));
            }
        }
    }

    /// [`Self::forget_under`] once the write lock is held ([`Self::writing_lock`]).
    pub(crate) fn forget_locked(&self, paths: &[String], folders_too: bool) -> Result<Vec<String>, AppError> {
        let mut store = Store::open_existing(&self.inner.config.db)?;
        let mut documents = Vec::new();
        for path in paths {
            let under = self.named_documents(&store, path, folders_too)?;
            if under.is_empty() {
                return Err(AppError::NotFound(format!("{path} is not a document warpfold holds")));
            }
            documents.extend(under);
        }
        documents.sort();
        documents.dedup();
        let forgotten = store.forget_documents(&documents)?;
        drop(store);
        // The index set aside for a re-embedding holds them too: forgotten there as well, so
        // neither file keeps their text nor queues them again.
        if let Some(kept) = crate::reembed::pending(&self.inner.config.db) {
            let forgotten_there = Store::open_existing(&kept).map_err(AppError::from).and_then(|mut old| {
                let mut named = Vec::new();
                for path in paths {
                    named.extend(self.named_documents(&old, path, folders_too)?);
                }
                Ok(old.forget_documents(&named)?)
            });
            if let Err(e) = forgotten_there {
                tracing::warn!(error = %e, "forgetting in the index being embedded again");
            }
        }
        for path in &forgotten {
            self.inner.board.remove(path);
        }
        self.refresh_searcher();
        Ok(forgotten)
    }

    /// The documents of `store` that `path` names: that document, or with `folders_too` every
    /// document at or under it.
    fn named_documents(&self, store: &Store, path: &str, folders_too: bool) -> Result<Vec<String>, AppError> {
        Ok(self.indexed_under(store, Path::new(path))?.into_iter().filter(|d| folders_too || d == path).collect())
    }

    /// Indexed documents at or under `path`.
    fn indexed_under(&self, store: &Store, path: &Path) -> Result<Vec<String>, AppError> {
        Ok(store.documents()?.into_iter().map(|d| d.path).filter(|p| Path::new(p).starts_with(path)).collect())
    }

    fn remove(&self, path: &Path) -> Result<(), AppError> {
        if path.exists() {
            return Ok(()); // recreated since the event
        }
        if self.holds_a_watched_folder(path) {
            self.rearm_watches(); // notes it gone; its documents stay until it returns
            return Ok(());
        }
        let mut store = Store::open_existing(&self.inner.config.db)?;
        for doc in self.indexed_under(&store, path)? {
            if !Path::new(&doc).exists() {
                store.remove_document(&doc)?;
                self.inner.board.remove(&doc);
            }
        }
        self.refresh_searcher();
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), AppError> {
        if self.holds_a_watched_folder(from) {
            self.rearm_watches(); // renamed away: its documents stay until it returns
            return Ok(());
        }
        let mut store = Store::open_existing(&self.inner.config.db)?;
        let mut moved = 0;
        for doc in self.indexed_under(&store, from)? {
            let target = to.join(Path::new(&doc).strip_prefix(from).expect("under from"));
            let target = if doc == from.display().to_string() { to.to_path_buf() } else { target };
            if target.is_file() && !self.would_read(&target) {
                // Renamed to what a scan would not read (`a.pdf.bak`, into a hidden folder, to the
                // desktop's trash): its old text leaves the index instead of following it there.
                store.remove_document(&doc)?;
                self.inner.board.remove(&doc);
                moved += 1;
                continue;
            }
            if target.is_file() && store.rename_document(&doc, &target.display().to_string())? {
                self.inner.board.rename(&doc, &target.display().to_string());
                moved += 1;
            }
        }
        drop(store);
        if moved == 0 {
            // Not something we had (a file renamed into a watched folder, say): index it.
            let _ = self.inner.jobs.send(Job::Settle(vec![to.to_path_buf()]));
        } else {
            self.refresh_searcher();
        }
        Ok(())
    }

    /// Would a scan of the watched folders read `file`: a kind warpfold reads, inside a watched
    /// folder, with no hidden (`.`) folder or name on the way to it?
    fn would_read(&self, file: &Path) -> bool {
        let roots = self.watched_roots();
        roots.iter().any(|root| file.starts_with(root))
            && !files::hidden_within(file, &roots)
            && warpfold_index::extract::file_kind(file).is_some()
    }

    /// A watched folder's catch-up: what went or was renamed ([`Self::scan`]), then everything in it
    /// indexed (unchanged files are skipped).
    fn catch_up(&self, folder: PathBuf, progress: &Progress) -> Result<(), AppError> {
        self.scan(&folder)?;
        self.index_with(files::collect(&[folder]).unwrap_or_default(), progress, Run::Watched)
    }

    /// Catches up with changes made while the app was closed: files gone are removed (or, when a
    /// new file has the same content, renamed); new and edited files are then indexed by the
    /// normal run, which skips the unchanged ones.
    fn scan(&self, folder: &Path) -> Result<(), AppError> {
        let mut store = Store::open_existing(&self.inner.config.db)?;
        let docs = store.documents()?;
        let (gone, unmounted): (Vec<_>, Vec<_>) = docs
            .iter()
            .filter(|d| Path::new(&d.path).starts_with(folder) && !Path::new(&d.path).exists())
            .partition(|d| !in_empty_folder(Path::new(&d.path), folder));
        if !unmounted.is_empty() {
            tracing::warn!(
                folder = %folder.display(),
                documents = unmounted.len(),
                "documents whose folder is now empty (a drive not mounted?) keep their entries"
            );
        }
        if gone.is_empty() {
            return Ok(());
        }
        let known: HashSet<&str> = docs.iter().map(|d| d.path.as_str()).collect();
        // A renamed file has the size of a gone one: only those are hashed, each streamed through
        // the checked open (no link followed, nothing blocking, flat memory whatever its size).
        let gone_sizes: HashSet<u64> = gone.iter().map(|d| d.size).collect();
        let mut by_hash: std::collections::HashMap<String, PathBuf> = std::collections::HashMap::new();
        for file in files::collect(&[folder.to_path_buf()])?.files {
            if known.contains(file.display().to_string().as_str()) {
                continue;
            }
            let Ok((handle, meta)) = files::open_checked(&file) else { continue };
            if gone_sizes.contains(&meta.len()) {
                if let Ok(hash) = hash_file(&handle) {
                    by_hash.insert(hash, file);
                }
            }
        }
        for doc in gone {
            match by_hash.remove(&doc.content_hash) {
                Some(new_path) => {
                    let to = new_path.display().to_string();
                    store.rename_document(&doc.path, &to)?;
                    self.inner.board.rename(&doc.path, &to);
                }
                None => {
                    store.remove_document(&doc.path)?;
                    self.inner.board.remove(&doc.path);
                }
            }
        }
        drop(store);
        self.refresh_searcher();
        Ok(())
    }
}

/// Is `gone` (a document's file, missing) in a folder that is now empty, or unreadable, under
/// `root`? That is what a drive that is not mounted looks like (its mount point an empty folder):
/// its documents keep their entries rather than be removed and, once it is back, extracted and
/// embedded all over again. A folder emptied by hand keeps them too, until the files' removal is
/// seen while the app runs; they stay searchable, their detail saying the file is gone.
fn in_empty_folder(gone: &Path, root: &Path) -> bool {
    let Some(folder) = gone.ancestors().skip(1).take_while(|a| a.starts_with(root)).find(|a| a.exists()) else { return false };
    std::fs::read_dir(folder).map_or(true, |mut entries| entries.next().is_none())
}

/// Indexing paused for want of space.
pub(crate) struct Paused {
    pub(crate) reason: String,
    /// The files of the run that could not be written, indexed again on resuming.
    files: Vec<PathBuf>,
    /// When a write was last tried.
    probed: std::time::Instant,
}

/// How often a paused app tries a write.
const PROBE_EVERY: Duration = Duration::from_secs(3);
/// What a probe writes beside the index: a commit's worth of pages.
const PROBE_BYTES: usize = 1 << 20;

impl App {
    /// The disk is full: the run's files that are not done go back to waiting (not failed: they
    /// were never written), and indexing pauses, visibly, until [`Self::try_resume`] succeeds.
    fn pause_for_space(&self, error: &str, files: &[PathBuf]) {
        let reason = format!("the disk holding the index is full ({error}): indexing is paused, and resumes by itself when there is room");
        tracing::error!("{reason}");
        let not_done: Vec<String> = files
            .iter()
            .map(|f| f.display().to_string())
            .filter(|p| self.inner.board.get(p).is_some_and(|f| f.state != QueueState::Done))
            .collect();
        self.inner.board.waiting(&not_done);
        *self.inner.writes_paused.lock() =
            Some(Paused { reason: reason.clone(), files: files.to_vec(), probed: std::time::Instant::now() });
        let _ = self.inner.events.send(crate::AppEvent::WritesPaused(Some(reason)));
    }

    /// While paused: every [`PROBE_EVERY`], writes and syncs [`PROBE_BYTES`] beside the index; when
    /// that succeeds, resumes and indexes the paused run's files again (what was written is
    /// skipped as unchanged).
    fn try_resume(&self) {
        let mut paused = self.inner.writes_paused.lock();
        let Some(state) = paused.as_mut() else { return };
        if state.probed.elapsed() < PROBE_EVERY {
            return;
        }
        state.probed = std::time::Instant::now();
        let dir = self.inner.config.db.parent().unwrap_or(Path::new("."));
        let probe = tempfile::NamedTempFile::new_in(dir).and_then(|mut file| {
            use std::io::Write;
            file.write_all(&vec![0u8; PROBE_BYTES])?;
            file.as_file().sync_all()
        });
        if probe.is_err() {
            return;
        }
        let files = std::mem::take(&mut state.files);
        *paused = None;
        drop(paused);
        tracing::info!("there is room on the disk again: indexing resumes");
        let _ = self.inner.events.send(crate::AppEvent::WritesPaused(None));
        let _ = self.inner.jobs.send(Job::Index(files));
    }
}

/// How often the watched folders are checked for having come back (renamed back, remounted).
const REARM_EVERY: Duration = Duration::from_secs(2);

/// What the watcher's files looked like when last seen, to tell when each has settled.
///
/// Why by what the file is and not by its clock: a file whose modification time lies in the
/// future (a camera or another machine with a wrong clock, `touch -d tomorrow`) never grows old
/// by the clock, and was waited for forever; one copied with its old time kept looks settled
/// while still being written. A file is settled when its size and modification time are what
/// they were when it was seen `settle` ago or more.
#[derive(Default)]
struct Settling {
    seen: std::collections::HashMap<PathBuf, (u64, Option<std::time::SystemTime>, std::time::Instant)>,
}

impl Settling {
    fn settled(&mut self, path: &Path, settle: Duration) -> bool {
        let Ok(meta) = std::fs::metadata(path) else {
            self.seen.remove(path);
            return true; // gone: the indexer skips it
        };
        let now = (meta.len(), meta.modified().ok());
        match self.seen.get(path) {
            Some(&(size, mtime, since)) if (size, mtime) == now => {
                let settled = since.elapsed() >= settle;
                if settled {
                    self.seen.remove(path);
                }
                settled
            }
            _ => {
                self.seen.insert(path.to_path_buf(), (now.0, now.1, std::time::Instant::now()));
                false
            }
        }
    }
}
