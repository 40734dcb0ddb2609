//! warpfold's application core: what the desktop app and `warpfold serve` both are, minus the
//! window and the socket.
//!
//! Why a crate of its own: the Tauri shell (src-tauri) and the HTTP mode must behave the same, so
//! neither holds any logic. Both call [`App`]'s methods (one per UI operation in docs/api.md) and
//! forward its [`AppEvent`]s (Tauri events and an ipc Channel there, server-sent events here).
//! The app owns:
//! - one indexer thread (`indexer.rs`): every write to the index (new, changed, renamed, deleted
//!   files) goes through it in order, so watcher events, drops and scans never race each other;
//! - the [`QueueBoard`](queue::QueueBoard): each file's state, restored from the index at start;
//! - a sampler thread (`sampler.rs`): tokens/s, computed and padded-equivalent work, bins/s every
//!   interval, and each new bin's shape, from the engine's counters;
//! - the path policy (`policy.rs`): which paths the webview and the server may name;
//! - the watched folders (persisted in `settings.json` in the data folder), scanned at start and
//!   then followed with a debounced watcher ([`watch`]).

pub mod ask;
pub mod error;
pub mod events;
pub mod inbox;
mod indexer;
pub mod launch;
pub mod paths;
mod policy;
pub mod queue;
pub mod reembed;
pub mod runtime;
mod sampler;
pub mod served;
pub mod settings;
pub mod summaries;
pub mod text;
pub mod watch;

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use warpfold_engine::embed::Embedder;
use warpfold_index::files::{self, Collected};
use warpfold_index::pipeline::IndexOptions;
use warpfold_index::search::{Hit, Searcher};
use warpfold_index::store::{DocumentDetail, IndexLanguage, Store};

pub use error::AppError;
pub use events::{AppEvent, AppStateView, BinView, DeviceView, FileState, ProbeView, QueueState, Sample, SummaryEvent};
use policy::canonical_dir;
use queue::QueueBoard;
use summaries::SummaryConfig;
pub use tokio::sync::broadcast::error::RecvError;
pub use warpfold_index::filter::{day_start, Filter, LibraryEntry, LibraryOrder};
pub use warpfold_index::search::SearchOptions;
use watch::FolderWatcher;

/// The most documents one page of the library lists.
pub const MAX_LIBRARY_PAGE: usize = 500;

/// What the library view asks for ([`App::library`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct LibraryQuery {
    /// Folder, file types, dates and language, as search takes them.
    pub filter: Filter,
    pub order: LibraryOrder,
    pub descending: bool,
    pub offset: usize,
    /// At most this many (default 100, at most [`MAX_LIBRARY_PAGE`]).
    pub limit: Option<usize>,
}

/// A page of the library: how many documents the filters let through, and this page of them.
#[derive(Debug, Clone, Serialize)]
pub struct LibraryView {
    pub total: usize,
    pub documents: Vec<LibraryEntry>,
}

/// How many samples the state keeps (5 minutes at the default interval).
pub const SAMPLES_KEPT: usize = 600;

pub struct AppConfig {
    /// The index database.
    pub db: PathBuf,
    /// Where settings and uploaded files live.
    pub data_dir: PathBuf,
    /// The embedding model's name (recorded in the index).
    pub model: String,
    pub index_options: IndexOptions,
    /// How long a watched file must be quiet (no events, an mtime this old) before it is read.
    pub settle: Duration,
    /// How often throughput is sampled.
    pub sample_every: Duration,
    /// The device as found at start (name, bin capacity, probe).
    pub device: DeviceView,
    /// Reads the device's memory (used, total) for the live display, if it can.
    pub memory: Option<warpfold_runtime::MemoryReader>,
    /// The chat model that summarizes documents; None: no summaries.
    pub summaries: Option<SummaryConfig>,
    /// The person's home folder, which `~` in a typed folder stands for.
    pub home: Option<PathBuf>,
    /// The settings the app was launched with ([`launch::launch`]), for the settings view; `None`
    /// for an app started without them (tests).
    pub settings: Option<settings::Settings>,
}

impl AppConfig {
    /// The settings both shells use: the index in `db`, PDF workers started as `worker extract-worker
    /// FILE` (the shell's own binary), one extraction and tokenization job per core but one (that
    /// one feeds the device), 32-token chunk overlap, files read once quiet for 2 s, throughput
    /// sampled every 500 ms.
    pub fn new(db: PathBuf, data_dir: PathBuf, model: String, worker: PathBuf, device: DeviceView) -> AppConfig {
        AppConfig {
            db,
            data_dir,
            model,
            index_options: IndexOptions {
                jobs: std::thread::available_parallelism().map_or(2, |n| n.get().saturating_sub(1).max(2)),
                ..IndexOptions::new(warpfold_index::extract::Isolation::new(worker, vec!["extract-worker".into()]))
            },
            settle: Duration::from_secs(2),
            sample_every: Duration::from_millis(500),
            device,
            memory: None,
            summaries: None,
            settings: None,
            home: settings::home_dir(),
        }
    }
}

/// The watched folders, as `settings.json` holds them beside the person's settings
/// ([`settings::Settings`], whose keys a save of the folders keeps).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Folders {
    #[serde(default)]
    folders: Vec<String>,
}

pub(crate) enum Job {
    /// Index these files or folders (new or changed).
    Index(Vec<PathBuf>),
    /// Index these watched files once their writes have settled.
    Settle(Vec<PathBuf>),
    /// A file or folder is gone.
    Remove(PathBuf),
    /// A file or folder was renamed.
    Rename(PathBuf, PathBuf),
    /// Catch up with a watched folder: deletions, renames and edits made while nobody watched.
    Scan(PathBuf),
    /// Catch up with every watched folder: the kernel dropped events (its queue overflowed, say
    /// when thousands of files arrive at once), so what changed is not known.
    ScanWatched,
    /// Embed every chunk of the index that has no vector (run once at start).
    Check,
    /// Read these files, or the files under these folders, again even if unchanged (the person
    /// asked to re-index them).
    Reindex(Vec<PathBuf>),
}

struct Inner {
    config: AppConfig,
    embedder: Arc<Embedder>,
    board: Arc<QueueBoard>,
    events: broadcast::Sender<AppEvent>,
    samples: Mutex<VecDeque<Sample>>,
    searcher: Mutex<Option<Searcher>>,
    /// The index's languages ([`Store::languages`]) as of the chunk count beside them: read again
    /// only when chunks were added or removed.
    languages: Mutex<(u64, Vec<IndexLanguage>)>,
    jobs: Sender<Job>,
    settings: Mutex<Folders>,
    /// Paths the user handed over by dropping them on the window (desktop).
    chosen: Mutex<HashSet<PathBuf>>,
    watcher: Mutex<Option<FolderWatcher>>,
    /// Each watched folder's identity (device, inode) when its watch was registered, or None while
    /// it is gone: a folder renamed away and back, or a drive mounted again, is watched again and
    /// caught up with when it reappears ([`App::rearm_watches`]).
    armed: Mutex<std::collections::HashMap<PathBuf, Option<(u64, u64)>>>,
    /// The index file's identity (device, inode) when the app opened it ([`App::index_intact`]).
    index_identity: Option<(u64, u64)>,
    /// Why nothing more is written to the index, once that is so.
    writes_stopped: Mutex<Option<String>>,
    /// Indexing paused for want of space, with the files to index again when it resumes.
    writes_paused: Mutex<Option<indexer::Paused>>,
    stop: Arc<AtomicBool>,
    /// The person paused indexing: no new file is started until they resume ([`App::set_paused`]).
    paused: Arc<AtomicBool>,
    /// Held by an index run for its whole length and by a forget: a document forgotten while a run
    /// is reading it would otherwise be committed again by that run, its text back in the index.
    writing: Mutex<()>,
    /// Documents to summarize (when summaries are on), a batch per message: the documents of one index run arrive together,
    /// so the summarizer never starts on the first of them alone.
    chat: Option<Sender<summaries::ChatJob>>,
    /// Documents sent to the summarizer whose summary (or its failure) has not been published yet.
    summaries_pending: Mutex<HashSet<String>>,
    /// What the summarizer is busy with before it can summarize (fetching, loading its model).
    summarizer_status: Mutex<Option<String>>,
    /// What the summarizer has done since the start (the state view and /metrics show it).
    summary_totals: Mutex<summaries::SummaryTotals>,
}

/// The application: cheap to clone, shared by every request and event forwarder.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

/// Who asks for a path to be indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The user directly (a token-holding HTTP client, the command line).
    User,
    /// The desktop webview: only paths the user dropped or folders they watch.
    Webview,
}

/// A folder's identity on disk (device, inode), if it is there.
fn identity(folder: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(folder).ok().map(|m| (m.dev(), m.ino()))
}

/// The most distinct paths one call of [`App::add_paths`] takes (a drop of files, a list pasted):
/// more is a folder's worth, which the folder names in one path.
pub const MAX_PATHS_AT_ONCE: usize = 10_000;

/// Creates `dir` (and its missing parents) readable by its owner alone (0700): the data folder
/// holds the index, uploads and settings. A folder that exists keeps its mode, with a warning when
/// other users may read it.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if let Ok(meta) = std::fs::metadata(dir) {
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!("{} can be read by other users of this machine (chmod 700 it to keep the index private)", dir.display());
            }
            return Ok(());
        }
        return std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    }
    #[allow(unreachable_code)]
    std::fs::create_dir_all(dir)
}

impl App {
    /// Starts the app: opens (creating) the index, restores the queue from it, starts the indexer,
    /// the sampler and the watcher, and scans every watched folder.
    pub fn start(config: AppConfig, embedder: Arc<Embedder>) -> Result<App, AppError> {
        create_private_dir(&config.data_dir)?;
        let store = Store::open(&config.db, &config.model, embedder.engine.info().output_dim)?;
        if let Some(warning) = warpfold_index::store::readable_by_others(&config.db) {
            tracing::warn!("{warning}");
        }
        let (events, _) = broadcast::channel(4096);
        let board = Arc::new(QueueBoard::new(events.clone()));
        board.restore(&store.documents()?);
        drop(store);
        let settings = load_settings(&config.data_dir.join("settings.json"));
        let (jobs, job_rx) = crossbeam_channel::unbounded();
        let summary_config = config.summaries.clone();
        let (chat, chat_rx) = match &summary_config {
            Some(_) => {
                let (tx, rx) = crossbeam_channel::unbounded();
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        let index_identity = identity(&config.db);
        let app = App {
            inner: Arc::new(Inner {
                searcher: Mutex::new(Searcher::open(&config.db).ok()),
                languages: Mutex::new((0, Vec::new())),
                config,
                embedder,
                board,
                events,
                samples: Mutex::new(VecDeque::new()),
                jobs,
                settings: Mutex::new(settings.clone()),
                chosen: Mutex::new(HashSet::new()),
                watcher: Mutex::new(None),
                armed: Mutex::new(std::collections::HashMap::new()),
                index_identity,
                writes_stopped: Mutex::new(None),
                writes_paused: Mutex::new(None),
                stop: Arc::new(AtomicBool::new(false)),
                paused: Arc::new(AtomicBool::new(false)),
                writing: Mutex::new(()),
                chat,
                summaries_pending: Mutex::new(HashSet::new()),
                summarizer_status: Mutex::new(None),
                summary_totals: Mutex::new(summaries::SummaryTotals::default()),
            }),
        };
        if let (Some(summary_config), Some(rx)) = (summary_config, chat_rx) {
            // Documents indexed while summaries were waiting when the app last stopped (or before
            // they were checked) are summarized now.
            if summary_config.auto {
                app.queue_summaries(app.unsummarized(&summary_config.model_name()));
            }
            let summarizer = app.clone();
            std::thread::Builder::new().name("warpfold-summarizer".into()).spawn(move || summarizer.run_summarizer(summary_config, rx))?;
        }
        let indexer = app.clone();
        std::thread::Builder::new().name("warpfold-indexer".into()).spawn(move || indexer.run_indexer(job_rx))?;
        let sampler = app.clone();
        std::thread::Builder::new().name("warpfold-sampler".into()).spawn(move || sampler.run_sampler())?;
        let watcher = FolderWatcher::start(app.inner.config.settle, app.inner.jobs.clone())
            .map_err(|e| AppError::Io(format!("starting the folder watcher: {e}")))?;
        *app.inner.watcher.lock() = Some(watcher);
        let _ = app.inner.jobs.send(Job::Check);
        for folder in &settings.folders {
            let path = PathBuf::from(folder);
            if !policy::unchanged(&path) {
                // Replaced by a link (or gone) while the app was closed: not followed; its documents
                // stay searchable and the folder stays listed, so the user can remove it.
                tracing::warn!(folder, "a watched folder is no longer the folder chosen (a link now, or gone): not watched");
                continue;
            }
            if let Err(e) = app.watch(&path) {
                tracing::warn!(folder, error = %e, "cannot watch a saved folder");
            }
            let _ = app.inner.jobs.send(Job::Scan(path));
        }
        Ok(app)
    }

    /// Stops the background threads (the engine stops when the last [`Embedder`] goes).
    pub fn stop(&self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        self.inner.watcher.lock().take();
    }

    pub fn subscribe(&self) -> broadcast::Receiver<AppEvent> {
        self.inner.events.subscribe()
    }

    pub fn embedder(&self) -> &Arc<Embedder> {
        &self.inner.embedder
    }

    pub fn model(&self) -> &str {
        &self.inner.config.model
    }

    pub fn state(&self) -> AppStateView {
        let stats = &self.inner.embedder.engine;
        let mut device = self.inner.config.device.clone();
        if let Some((used, total)) = self.inner.config.memory.as_ref().and_then(|m| m()) {
            device.memory_used_bytes = Some(used);
            device.memory_total_bytes = Some(total);
        }
        let (counts, languages) = {
            let searcher = self.inner.searcher.lock();
            let store = searcher.as_ref().map(|s| s.store());
            let counts = store.and_then(|s| s.counts().ok());
            let mut cached = self.inner.languages.lock();
            if let (Some(store), Some(c)) = (store, &counts) {
                if cached.0 != c.chunks {
                    *cached = (c.chunks, store.languages().unwrap_or_default());
                }
            }
            (counts, cached.1.clone())
        };
        AppStateView {
            model: self.inner.config.model.clone(),
            device,
            folders: self.folders(),
            queue: self.inner.board.view(),
            bins: stats.recent_bins().iter().map(BinView::from).collect(),
            samples: self.inner.samples.lock().iter().cloned().collect(),
            documents: counts.map_or(0, |c| c.documents),
            chunks: counts.map_or(0, |c| c.chunks),
            languages,
            summaries: self.inner.config.summaries.as_ref().map(|c| {
                c.view(self.summary_totals(), self.inner.summaries_pending.lock().len(), self.inner.summarizer_status.lock().clone())
            }),
            writes_stopped: self.inner.writes_stopped.lock().clone(),
            writes_paused: self.inner.writes_paused.lock().as_ref().map(|p| p.reason.clone()),
            paused: self.inner.paused.load(Ordering::Relaxed),
        }
    }

    /// Is the index still the file the app opened? Deleted, the next write would silently make a
    /// new, empty one (the queue says done, search finds nothing); replaced (by a copy, a restore,
    /// junk), writes would go to another index or fail with the reason only in the log. Either
    /// way nothing more is written: the reason is kept, logged once, and shown (state and event).
    pub(crate) fn index_intact(&self) -> bool {
        if self.inner.writes_stopped.lock().is_some() {
            return false;
        }
        let db = &self.inner.config.db;
        let reason = match (identity(db), self.inner.index_identity) {
            (Some(now), Some(opened)) if now == opened => return true,
            (None, _) => format!("the index {} was deleted while warpfold ran: nothing more is written to it (restart warpfold to make a new one)", db.display()),
            _ => format!("the index {} was replaced by another file while warpfold ran: nothing more is written to it (restart warpfold to use the new file)", db.display()),
        };
        tracing::error!("{reason}");
        *self.inner.writes_stopped.lock() = Some(reason.clone());
        let _ = self.inner.events.send(AppEvent::WritesStopped(reason));
        false
    }

    pub fn folders(&self) -> Vec<String> {
        self.inner.settings.lock().folders.clone()
    }

    /// Saves a change to the watched folders. It is applied to the list in memory and to
    /// settings.json as it is on disk now, so a folder another process on this data folder (the
    /// desktop app and `warpfold serve` share it) saved meanwhile is kept, not overwritten. The
    /// file is written under a name of its own, flushed, and renamed over the old one.
    fn change_folders(&self, settings: &mut Folders, change: impl FnOnce(&mut Vec<String>)) -> Result<(), AppError> {
        let dir = &self.inner.config.data_dir;
        let path = dir.join("settings.json");
        let mut folders = load_settings(&path).folders;
        folders.extend(settings.folders.iter().cloned());
        change(&mut folders);
        folders.sort();
        folders.dedup();
        let updated = Folders { folders };
        // The person's settings in the same file are kept as they are.
        rewrite_settings_file(dir, |saved| {
            saved.insert("folders".into(), serde_json::json!(updated.folders));
        })?;
        *settings = updated;
        Ok(())
    }

    /// The settings view: what settings.json holds, what the app runs with, which variables
    /// override the file, and every setting's meaning (docs/settings.md).
    pub fn settings_view(&self) -> Result<settings::SettingsView, AppError> {
        let dir = &self.inner.config.data_dir;
        let saved = settings::Settings::from_file(&dir.join("settings.json")).map_err(|e| AppError::InvalidInput(e.to_string()))?;
        Ok(settings::SettingsView::new(saved, self.inner.config.settings.clone(), &dir.join("settings.json")))
    }

    /// Saves `wanted` to settings.json (its watched folders and any other key kept), after
    /// checking every value; they take effect at the next start. A value that does not parse is
    /// refused with the setting's name, and nothing is written.
    ///
    /// Paths are not changed here: the UI is reachable by a script in the web view, which may not
    /// point the app at other folders or files (a changed `data_dir`, `db` or `models_dir`, or a
    /// model given by path, is refused; settings.json and the variables still take them).
    pub fn save_settings(&self, wanted: settings::Settings) -> Result<settings::SettingsView, AppError> {
        wanted.check().map_err(|e| AppError::InvalidInput(e.to_string()))?;
        let saved = settings::Settings::from_file(&self.inner.config.data_dir.join("settings.json"))
            .map_err(|e| AppError::InvalidInput(e.to_string()))?;
        settings::refuse_new_paths(&saved, &wanted).map_err(|e| AppError::PathNotAllowed(e.to_string()))?;
        let one_writer = self.inner.settings.lock(); // one writer of settings.json at a time
        let values = serde_json::to_value(&wanted).expect("plain data");
        rewrite_settings_file(&self.inner.config.data_dir, |saved| {
            for (key, value) in values.as_object().expect("a struct").iter() {
                if value.is_null() {
                    saved.remove(key);
                } else {
                    saved.insert(key.clone(), value.clone());
                }
            }
        })?;
        drop(one_writer);
        self.settings_view()
    }

    /// Registers a watch on `folder`. Only the watcher's handle is taken from its lock: the
    /// registration itself (a walk of the whole tree) runs with no lock held.
    fn watch(&self, folder: &Path) -> Result<(), AppError> {
        let watcher = self.inner.watcher.lock().clone();
        match watcher {
            Some(watcher) => {
                watcher.watch(folder).map_err(|e| AppError::Io(format!("watching {}: {e}", folder.display())))?;
                self.inner.armed.lock().insert(folder.to_path_buf(), identity(folder));
                Ok(())
            }
            None => Err(AppError::Internal("the app has stopped".into())),
        }
    }

    /// Watches again, and catches up with, every saved folder that came back: renamed away and
    /// back, or a drive mounted again (a new inode, whose old watch the kernel dropped). A folder
    /// that is gone keeps its documents meanwhile. Run by the indexer every few seconds.
    pub(crate) fn rearm_watches(&self) {
        for folder in self.folders().into_iter().map(PathBuf::from) {
            let now = if policy::unchanged(&folder) { identity(&folder) } else { None };
            let before = self.inner.armed.lock().get(&folder).copied();
            match (before, now) {
                (Some(before), Some(_)) if before == now => {}
                (_, None) => {
                    if before != Some(None) {
                        tracing::warn!(folder = %folder.display(), "a watched folder is gone (renamed, or its drive unmounted): its documents are kept until it returns");
                        self.inner.armed.lock().insert(folder, None);
                    }
                }
                (_, Some(_)) => {
                    tracing::info!(folder = %folder.display(), "a watched folder is back: watching it again and catching up");
                    if let Some(watcher) = self.inner.watcher.lock().as_ref() {
                        watcher.unwatch(&folder);
                    }
                    match self.watch(&folder) {
                        Ok(()) => {
                            let _ = self.inner.jobs.send(Job::Scan(folder));
                        }
                        Err(e) => {
                            // Not tried again every few seconds: again when the folder changes.
                            tracing::warn!(folder = %folder.display(), error = %e, "cannot watch a folder that came back");
                            self.inner.armed.lock().insert(folder, now);
                        }
                    }
                }
            }
        }
    }

    /// Is `path` a watched folder, or a folder holding one? Its removal or rename away keeps the
    /// documents: a folder renamed away and back, or a drive unmounted, is not a deletion.
    pub(crate) fn holds_a_watched_folder(&self, path: &Path) -> bool {
        self.folders().iter().any(|f| Path::new(f).starts_with(path))
    }

    /// Watches a folder from now on (and after restarts) and indexes what it holds. The root, and
    /// the kernel's trees (`/proc`, `/sys`, `/dev`), are refused. From the webview
    /// ([`Origin::Webview`]) only a folder inside what the user already chose: a new root is the
    /// user's to choose (the desktop shell asks them in a dialog of its own, then calls this with
    /// [`Origin::User`]), and the refusal reads the same whether or not the folder exists.
    pub fn add_folder(&self, path: &str, origin: Origin) -> Result<Vec<String>, AppError> {
        let expanded = paths::expand_home(path, self.inner.config.home.as_deref()).map_err(AppError::InvalidInput)?;
        let path = expanded.as_str();
        if origin == Origin::Webview {
            let chosen = std::fs::canonicalize(path).ok().filter(|canonical| self.allowed(canonical));
            if chosen.is_none() {
                return Err(not_chosen(path));
            }
        }
        let folder = canonical_dir(path)?;
        if let Some(reason) = watch::refusal(&folder, "watching") {
            return Err(AppError::InvalidInput(reason));
        }
        let text = folder.display().to_string();
        if !self.inner.settings.lock().folders.contains(&text) {
            self.watch(&folder)?;
        }
        let folders = {
            let mut settings = self.inner.settings.lock();
            if !settings.folders.contains(&text) {
                // Not saved (a full disk, say): not watched either, so what the app follows is
                // what it will follow after a restart.
                if let Err(e) = self.change_folders(&mut settings, |folders| folders.push(text.clone())) {
                    if let Some(watcher) = self.inner.watcher.lock().as_ref() {
                        watcher.unwatch(&folder);
                    }
                    self.inner.armed.lock().remove(&folder);
                    return Err(e);
                }
            }
            settings.folders.clone()
        };
        self.queue_waiting(std::slice::from_ref(&folder));
        let _ = self.inner.jobs.send(Job::Scan(folder));
        let _ = self.inner.events.send(AppEvent::Folders(folders.clone()));
        Ok(folders)
    }

    /// Stops watching a folder; what was indexed from it stays searchable.
    pub fn remove_folder(&self, path: &str) -> Result<Vec<String>, AppError> {
        self.remove_folder_and(path, false).map(|(folders, _)| folders)
    }

    /// Stops watching a folder and, with `forget`, forgets every document indexed from it for
    /// good ([`App::forget`]). Returns the watched folders left and the documents forgotten.
    pub fn remove_folder_and(&self, path: &str, forget: bool) -> Result<(Vec<String>, Vec<String>), AppError> {
        // The write lock before anything changes: a forget that cannot be made now (a paused
        // run) leaves the folder watched, so it can be asked again.
        let writing = if forget { Some(self.writing_lock()?) } else { None };
        let folders = self.stop_watching(path)?;
        let forgotten = if forget {
            match self.forget_locked(&[path.to_string()], true) {
                Ok(forgotten) => forgotten,
                Err(AppError::NotFound(_)) => Vec::new(), // nothing was indexed from it
                Err(e) => return Err(e),
            }
        } else {
            Vec::new()
        };
        drop(writing);
        Ok((folders, forgotten))
    }

    fn stop_watching(&self, path: &str) -> Result<Vec<String>, AppError> {
        let folders = {
            let mut settings = self.inner.settings.lock();
            if !settings.folders.iter().any(|f| f == path) {
                return Err(AppError::NotFound(format!("{path} is not a watched folder")));
            }
            if let Some(watcher) = self.inner.watcher.lock().as_ref() {
                watcher.unwatch(Path::new(path));
            }
            self.inner.armed.lock().remove(Path::new(path));
            self.change_folders(&mut settings, |folders| folders.retain(|f| f != path))?;
            settings.folders.clone()
        };
        let _ = self.inner.events.send(AppEvent::Folders(folders.clone()));
        Ok(folders)
    }

    /// Indexes dropped files and folders. From the webview, only paths the user chose.
    pub fn add_paths(&self, paths: &[String], origin: Origin) -> Result<usize, AppError> {
        if paths.is_empty() {
            return Err(AppError::InvalidInput("no paths given".into()));
        }
        // One folder named 120,000 times in one request is one folder: each is resolved and
        // walked once.
        let mut seen = std::collections::HashSet::new();
        let distinct: Vec<&String> = paths.iter().filter(|p| seen.insert(p.as_str())).collect();
        if distinct.len() > MAX_PATHS_AT_ONCE {
            return Err(AppError::InvalidInput(format!(
                "{} different paths at once; at most {MAX_PATHS_AT_ONCE} (name their folder instead)",
                distinct.len()
            )));
        }
        let mut resolved: Vec<PathBuf> = Vec::new();
        for path in distinct {
            let canonical = self.named_for_indexing(path, origin)?;
            if !resolved.contains(&canonical) {
                resolved.push(canonical);
            }
        }
        let queued = self.queue_waiting(&resolved);
        let _ = self.inner.jobs.send(Job::Index(resolved));
        Ok(queued)
    }

    /// Queues the documents of the index set aside for a re-embedding ([`reembed`]) that the
    /// index does not hold yet, after copying its summaries (they are of the texts, whatever
    /// embeds them; a failure there is logged and costs only summaries). Returns how many.
    pub fn continue_reembedding(&self) -> Result<usize, AppError> {
        let db = &self.inner.config.db;
        let Some(kept) = reembed::pending(db) else { return Ok(0) };
        let paths = reembed::missing(db, &kept)?;
        let queued = paths.len();
        if queued > 0 {
            self.queue_waiting(&paths);
            let _ = self.inner.jobs.send(Job::Index(paths));
        }
        if let Err(e) = Store::open_existing(db).and_then(|store| store.copy_summaries_from(&kept)) {
            tracing::warn!(error = %e, "copying the summaries of the index being embedded again");
        }
        if queued == 0 {
            reembed::finish_if_done(db)?;
        }
        Ok(queued)
    }

    /// Reads a document, or every document under a folder, again, changed or not: a re-index the
    /// person asked for (after new OCR languages, or a file that failed for a reason now mended).
    /// What it names is checked as [`App::add_paths`] checks it. Returns how many files are queued.
    pub fn reindex(&self, path: &str, origin: Origin) -> Result<usize, AppError> {
        let canonical = self.named_for_indexing(path, origin)?;
        let queued = self.queue_waiting(std::slice::from_ref(&canonical));
        if queued == 0 {
            return Err(AppError::InvalidInput(format!(
                "{path}: no file warpfold reads is there ({})",
                warpfold_index::extract::SUPPORTED
            )));
        }
        let _ = self.inner.jobs.send(Job::Reindex(vec![canonical]));
        Ok(queued)
    }

    /// Pauses indexing (`true`: the files being read finish, no new one starts; drops, uploads and
    /// watcher events wait on the queue) or resumes it. Returns whether it is paused now.
    pub fn set_paused(&self, paused: bool) -> bool {
        if self.inner.paused.swap(paused, Ordering::Relaxed) != paused {
            let _ = self.inner.events.send(AppEvent::Paused(paused));
        }
        paused
    }

    /// The real path of a file or folder named to be indexed: from the webview only what the user
    /// chose (a missing path is refused alike, so the answer does not tell whether it exists);
    /// never the whole disk or a kernel tree.
    fn named_for_indexing(&self, path: &str, origin: Origin) -> Result<PathBuf, AppError> {
        let canonical = match (std::fs::canonicalize(path), origin) {
            // Nor a hidden file or folder inside a chosen one (`WATCHED/.config/...`), which the
            // walk of a watched folder leaves alone: the webview may not name it into the index.
            (Ok(canonical), Origin::Webview) if !self.allowed(&canonical) || files::hidden_within(&canonical, &self.chosen_roots()) => {
                return Err(not_chosen(path))
            }
            (Ok(canonical), _) => canonical,
            (Err(_), Origin::Webview) => return Err(not_chosen(path)),
            (Err(e), Origin::User) => return Err(AppError::NotFound(format!("{path}: {e}"))),
        };
        // The whole disk or a kernel tree is no one's documents (and walking it would hold the
        // request): refused here as it is for a watched folder.
        if let Some(reason) = watch::refusal(&canonical, "indexing") {
            return Err(AppError::InvalidInput(reason));
        }
        Ok(canonical)
    }

    /// Saves an uploaded file (browser drag and drop) into the data folder's inbox and indexes it.
    /// The body is streamed to a file of its own and then named without replacing another upload
    /// ([`inbox`]): `name`, or "name (2).ext" and on when that is taken by different bytes. More
    /// than `max_bytes` is [`AppError::TooLarge`]; a name that is not a plain file name, or not of a
    /// type warpfold reads ([`warpfold_index::extract::SUPPORTED`]), is [`AppError::InvalidInput`].
    pub fn upload(&self, name: &str, body: impl std::io::Read, max_bytes: u64) -> Result<String, AppError> {
        inbox::check_name(name)?;
        if warpfold_index::extract::file_kind(Path::new(name)).is_none() {
            return Err(AppError::InvalidInput(format!("{name}: only {} files are indexed", warpfold_index::extract::SUPPORTED)));
        }
        let dir = self.inner.config.data_dir.join("inbox");
        create_private_dir(&dir)?;
        let received = inbox::receive(&dir, body, max_bytes)?;
        let target = std::fs::canonicalize(inbox::store(&dir, name, received)?)?;
        self.queue_waiting(std::slice::from_ref(&target));
        let _ = self.inner.jobs.send(Job::Index(vec![target.clone()]));
        Ok(target.display().to_string())
    }

    fn queue_waiting(&self, paths: &[PathBuf]) -> usize {
        let collected = files::collect(paths).unwrap_or_default();
        self.queue_collected(&collected)
    }

    fn queue_collected(&self, collected: &Collected) -> usize {
        let files: Vec<String> = collected.files.iter().map(|p| p.display().to_string()).collect();
        self.inner.board.waiting(&files);
        files.len()
    }

    /// The real paths of what the watcher reported, only where they lie inside a watched folder.
    fn collect_watched(&self, paths: &[PathBuf]) -> Collected {
        let roots = self.watched_roots();
        // The walk's rule for hidden entries, on the whole way from the watched folder: a file in
        // `.ssh/` or `.git/sub/` is not read because its own name is plain.
        let present: Vec<PathBuf> =
            paths.iter().filter(|p| std::fs::symlink_metadata(p).is_ok()).filter(|p| !files::hidden_within(p, &roots)).cloned().collect();
        files::collect_within(&present, &roots).unwrap_or_default()
    }

    pub fn search(&self, query: &str, k: usize) -> Result<Vec<Hit>, AppError> {
        self.search_with(query, k, &SearchOptions::default())
    }

    /// The library: the indexed documents the query's filters let through (as search takes them),
    /// in its order, a page of at most [`MAX_LIBRARY_PAGE`] at a time, with how many there are.
    pub fn library(&self, query: &LibraryQuery) -> Result<LibraryView, AppError> {
        let limit = query.limit.unwrap_or(100).clamp(1, MAX_LIBRARY_PAGE);
        // A connection of its own: listing a large library does not hold up searches.
        let Ok(store) = Store::open_read_only(&self.inner.config.db) else { return Ok(LibraryView { total: 0, documents: Vec::new() }) };
        let (total, documents) =
            warpfold_index::filter::library(&store, &query.filter, query.order, query.descending, query.offset, limit)?;
        Ok(LibraryView { total, documents })
    }

    /// [`App::search`], ranked and filtered as `options` say (folder, file types, dates; at most
    /// two hits a document in the top five unless asked otherwise).
    pub fn search_with(&self, query: &str, k: usize, options: &SearchOptions) -> Result<Vec<Hit>, AppError> {
        if query.trim().is_empty() {
            return Err(AppError::InvalidInput("empty query".into()));
        }
        // A defect in ranking or snippet code costs this request, not the server or the window: the
        // panic becomes an error for this query, logged by its length and scripts (not its text,
        // which may be private).
        let run = std::panic::AssertUnwindSafe(|| {
            let searcher = self.inner.searcher.lock();
            let Some(searcher) = searcher.as_ref() else { return Ok(Vec::new()) };
            let embedder = &self.inner.embedder;
            searcher
                .search_with(query, k.clamp(1, 100), options, |q| embedder.embed_query(q).map_err(|e| e.to_string()))
                .map_err(|e| AppError::InvalidInput(e.to_string()))
        });
        std::panic::catch_unwind(run).unwrap_or_else(|_| {
            tracing::error!("search failed on an internal error (a panic) for a query of {}", text::profile(query));
            Err(AppError::Internal(
                "the search failed on an internal error; it was logged (the query's length and scripts, not its text)".into(),
            ))
        })
    }

    /// Summarizes indexed documents (in the background: `summary` events follow, and the summary
    /// is stored in the index and shown with the document).
    pub fn summarize(&self, paths: &[String]) -> Result<usize, AppError> {
        if self.inner.chat.is_none() {
            return Err(AppError::InvalidInput("summaries are off (start warpfold serve with --summarize)".into()));
        }
        for path in paths {
            self.checked_path(path)?;
        }
        self.queue_summaries(paths.to_vec());
        Ok(paths.len())
    }

    /// One document: its state, pages, chunks and errors.
    pub fn document(&self, path: &str) -> Result<DocumentView, AppError> {
        let checked = self.checked_path(path)?;
        let queued = self.inner.board.get(path);
        let name = checked.display().to_string();
        let (detail, stored) = match Store::open_read_only(&self.inner.config.db) {
            // The app's own summaries, or `warpfold summarize --db`'s.
            Ok(store) => (store.document_detail(&name)?, store.summary_for_path(&name)?),
            Err(_) => (None, None),
        };
        if queued.is_none() && detail.is_none() {
            return Err(AppError::NotFound(format!("{path} is not in the index")));
        }
        let summary_state = match (&stored, &self.inner.config.summaries) {
            (Some(_), _) => SummaryState::Ready,
            (None, _) if self.inner.summaries_pending.lock().contains(&name) => SummaryState::Pending,
            (None, None) => SummaryState::Off,
            (None, Some(_)) => SummaryState::NotAsked,
        };
        let (summary, summary_check) = stored.map_or((None, None), |s| (Some(s.summary), s.check));
        Ok(DocumentView { path: path.to_string(), state: queued, detail, summary, summary_check, summary_state })
    }

    /// A document the app holds, opened for reading (for a browser to open it), with its size: the
    /// caller streams it, so its size costs no memory. The file is opened at the checked path
    /// without following a link swapped in since the check, and must be regular.
    pub fn open_document(&self, path: &str) -> Result<(std::fs::File, u64), AppError> {
        self.open_held(path).map(|(_, file, size)| (file, size))
    }

    /// A document the app holds, opened through its checked path: the path, the file, its size.
    fn open_held(&self, path: &str) -> Result<(PathBuf, std::fs::File, u64), AppError> {
        let checked = self.held_document(path)?;
        let (file, meta) = files::open_checked(&checked).map_err(|e| AppError::PathNotAllowed(format!("{path}: {e}")))?;
        Ok((checked, file, meta.len()))
    }

    /// A document the app holds, ready for a browser to open: its type, whether it is a download,
    /// and its bytes (texts decoded as the indexer read them, [`served`]).
    pub fn served_document(&self, path: &str) -> Result<served::ServedFile, AppError> {
        // The type of the file itself, not of the name asked for (a link `x.html` to a held text).
        let (checked, file, size) = self.open_held(path)?;
        served::serve(&checked, file, size).map_err(|e| AppError::Io(format!("reading {path}: {e}")))
    }

    /// A document the app holds that the desktop shell may open in the system viewer.
    pub fn openable(&self, path: &str) -> Result<PathBuf, AppError> {
        self.held_document(path)
    }

    /// The checked path of a document the app holds (indexed, failed or on the queue): what may be
    /// handed out or opened in the system viewer. Any other file inside a chosen folder, say a
    /// `payload.desktop` or a program someone wrote into a watched folder, is refused.
    fn held_document(&self, path: &str) -> Result<PathBuf, AppError> {
        let checked = self.checked_path(path)?;
        let name = checked.display().to_string();
        let in_index =
            || Store::open_read_only(&self.inner.config.db).ok().and_then(|store| store.document_state(&name).ok().flatten()).is_some();
        if self.inner.board.get(&name).is_none() && !in_index() {
            return Err(AppError::PathNotAllowed(format!("{path} is not a document warpfold holds")));
        }
        if !checked.exists() {
            return Err(AppError::NotFound(format!("{path} no longer exists")));
        }
        Ok(checked)
    }
}

/// Rewrites settings.json in `dir` through `change`, which sees every key it holds (none when it
/// is missing or unreadable): written under a name of its own, flushed, and renamed over the old
/// one, so a crash leaves the old file or the new, never half of one.
fn rewrite_settings_file(dir: &Path, change: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) -> Result<(), AppError> {
    use std::io::Write;
    let path = dir.join("settings.json");
    let mut saved: serde_json::Map<String, serde_json::Value> =
        std::fs::read(&path).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).unwrap_or_default();
    change(&mut saved);
    let mut file = tempfile::Builder::new().prefix(".settings-").suffix(".json").tempfile_in(dir)?;
    file.write_all(&serde_json::to_vec_pretty(&saved).expect("plain data"))?;
    file.as_file().sync_all()?;
    file.persist(&path).map_err(|e| AppError::Io(format!("saving {}: {e}", path.display())))?;
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all(); // the rename itself, on file systems that need it
    }
    Ok(())
}

/// The settings in `path` (none yet: the defaults). A file that cannot be read, or read as
/// settings, is not overwritten by the next save: it is moved aside to `settings.json.unreadable-SECONDS`, where the
/// folders it names can be recovered, and the app starts watching nothing, saying so in its log.
fn load_settings(path: &Path) -> Folders {
    // Only a file that is not there means "no settings yet": one that cannot be read (no
    // permission, an I/O error, a link loop) is kept aside like one that cannot be parsed.
    let read = std::fs::read(path).map_err(|e| e.to_string()).and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()));
    match read {
        Ok(settings) => settings,
        Err(_) if std::fs::symlink_metadata(path).is_err() => Folders::default(),
        Err(e) => {
            let seconds = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let aside = path.with_extension(format!("json.unreadable-{seconds}"));
            match std::fs::rename(path, &aside) {
                Ok(()) => tracing::error!(error = %e, kept = %aside.display(), "the settings could not be read; they were kept aside"),
                Err(moving) => tracing::error!(error = %e, %moving, "the settings could not be read, nor kept aside"),
            }
            Folders::default()
        }
    }
}

/// The refusal of a path the webview named that the user did not choose (the same text whether it
/// exists or not).
fn not_chosen(path: &str) -> AppError {
    AppError::PathNotAllowed(format!("{path} was not chosen by the user (drop it on the window or watch its folder)"))
}

/// A document as the detail view shows it.
#[derive(Debug, Clone, Serialize)]
pub struct DocumentView {
    pub path: String,
    pub state: Option<FileState>,
    pub detail: Option<DocumentDetail>,
    pub summary: Option<String>,
    /// What checking the summary against the document found (None: no summary, or one made
    /// before summaries were checked).
    pub summary_check: Option<warpfold_index::summaries::SummaryCheck>,
    pub summary_state: SummaryState,
}

/// Where a document's summary stands, so the UI never says "no summary yet" when none will come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryState {
    /// Summaries are off in this app (the server without `--summarize`, the desktop with them off).
    Off,
    /// On, but not automatic, and not asked for this document.
    NotAsked,
    /// Waiting for the chat model, or being written.
    Pending,
    Ready,
}

#[cfg(test)]
mod tests;
