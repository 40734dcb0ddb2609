//! The live queue: every file the app has been given, by state.
//!
//! Why a board of its own: the indexer reports stages from several threads; the UI wants a
//! consistent picture (counts that add up) and one event per change. At start the board is
//! filled from the index, so done and failed files survive a restart with their reasons.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use tokio::sync::broadcast;
use warpfold_index::pipeline::{FileObserver, FileStage};
use warpfold_index::store::DocumentSummary;

use crate::events::{now_ms, AppEvent, FileState, QueueCounts, QueueState, QueueView};

pub struct QueueBoard {
    files: Mutex<BTreeMap<String, FileState>>,
    /// Each file's last finished state and error: an unchanged file goes back to it.
    finished: Mutex<HashMap<String, (QueueState, Option<String>)>>,
    events: broadcast::Sender<AppEvent>,
}

fn finished_state(status: &str) -> QueueState {
    match status {
        "indexed" => QueueState::Done,
        "no_text" => QueueState::NoText,
        "skipped" => QueueState::Skipped,
        _ => QueueState::Failed,
    }
}

impl QueueBoard {
    pub fn new(events: broadcast::Sender<AppEvent>) -> Self {
        QueueBoard { files: Mutex::new(BTreeMap::new()), finished: Mutex::new(HashMap::new()), events }
    }

    /// Fills the board with what the index already holds (no events: nothing changed).
    pub fn restore(&self, documents: &[DocumentSummary]) {
        let mut files = self.files.lock();
        let mut finished = self.finished.lock();
        for d in documents {
            finished.insert(d.path.clone(), (finished_state(&d.status), d.error.clone()));
            files.insert(
                d.path.clone(),
                FileState {
                    path: d.path.clone(),
                    state: finished_state(&d.status),
                    error: d.error.clone(),
                    chunks: Some(d.chunks),
                    pages: Some(d.pages),
                    updated_ms: 0,
                },
            );
        }
    }

    fn set(&self, path: &str, update: impl FnOnce(&mut FileState)) {
        let state = {
            let mut files = self.files.lock();
            let entry = files.entry(path.to_string()).or_insert_with(|| FileState {
                path: path.to_string(),
                state: QueueState::Waiting,
                error: None,
                chunks: None,
                pages: None,
                updated_ms: 0,
            });
            update(entry);
            entry.updated_ms = now_ms();
            entry.clone()
        };
        let _ = self.events.send(AppEvent::Queue(state));
    }

    /// Marks files as waiting to be indexed.
    pub fn waiting(&self, paths: &[String]) {
        for path in paths {
            self.set(path, |f| {
                f.state = QueueState::Waiting;
                f.error = None;
            });
        }
    }

    /// A file left the index (deleted): it leaves the board too.
    pub fn remove(&self, path: &str) -> bool {
        self.finished.lock().remove(path);
        let removed = self.files.lock().remove(path).is_some();
        if removed {
            let _ = self.events.send(AppEvent::Removed(path.to_string()));
        }
        removed
    }

    /// A file was renamed: its entry moves with it.
    pub fn rename(&self, from: &str, to: &str) {
        let moved = self.files.lock().remove(from);
        let last = self.finished.lock().remove(from);
        if let Some(last) = last {
            self.finished.lock().insert(to.to_string(), last);
        }
        if moved.is_some() {
            let _ = self.events.send(AppEvent::Removed(from.to_string()));
        }
        if let Some(mut state) = moved {
            state.path = to.to_string();
            self.set(to, |f| *f = state);
        }
    }

    pub fn get(&self, path: &str) -> Option<FileState> {
        self.files.lock().get(path).cloned()
    }

    /// Files not yet finished.
    pub fn depth(&self) -> u64 {
        let files = self.files.lock();
        files.values().filter(|f| matches!(f.state, QueueState::Waiting | QueueState::Extracting | QueueState::Embedding)).count() as u64
    }

    pub fn view(&self) -> QueueView {
        let files = self.files.lock();
        let mut counts = QueueCounts::default();
        for f in files.values() {
            *match f.state {
                QueueState::Waiting => &mut counts.waiting,
                QueueState::Extracting => &mut counts.extracting,
                QueueState::Embedding => &mut counts.embedding,
                QueueState::Done => &mut counts.done,
                QueueState::Failed => &mut counts.failed,
                QueueState::NoText => &mut counts.no_text,
                QueueState::Skipped => &mut counts.skipped,
            } += 1;
        }
        QueueView { counts, files: files.values().cloned().collect() }
    }
}

impl FileObserver for QueueBoard {
    fn file_stage(&self, path: &str, stage: FileStage) {
        match stage {
            FileStage::Extracting => self.set(path, |f| {
                f.state = QueueState::Extracting;
                f.error = None;
            }),
            FileStage::Embedding { .. } => self.set(path, |f| f.state = QueueState::Embedding),
            FileStage::Unchanged => {
                let (state, error) = self.finished.lock().get(path).cloned().unwrap_or((QueueState::Done, None));
                self.set(path, |f| {
                    f.state = state;
                    f.error = error;
                })
            }
            FileStage::Finished { status, error, chunks, pages } => {
                self.finished.lock().insert(path.to_string(), (finished_state(status), error.clone()));
                self.set(path, |f| {
                    f.state = finished_state(status);
                    f.error = error;
                    f.chunks = Some(chunks);
                    f.pages = Some(pages);
                })
            }
        }
    }
}
