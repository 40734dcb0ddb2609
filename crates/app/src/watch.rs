//! Following watched folders: a debounced watcher turning file-system events into indexer jobs.
//!
//! Why debounced, and why an mtime check on top: a file being copied fires many modify events;
//! the debouncer waits until a file has been quiet for `settle` and pairs a rename's two halves
//! (inotify cookies, file ids), and the indexer reads a file only once its mtime is at least
//! `settle` old, so a copy that pauses longer than the debouncer still is not read half-written:
//! it is re-checked later. Events missed while the app was closed are caught by a scan at start.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crossbeam_channel::Sender;
use notify_debouncer_full::notify::event::{ModifyKind, RenameMode};
use notify_debouncer_full::notify::{EventKind, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult, DebouncedEvent, Debouncer, RecommendedCache};
use warpfold_index::extract::file_kind;

use crate::Job;

pub struct FolderWatcher {
    debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
}

impl FolderWatcher {
    pub(crate) fn start(settle: Duration, jobs: Sender<Job>) -> Result<FolderWatcher, String> {
        let debouncer = new_debouncer(settle, None, move |result: DebounceEventResult| match result {
            Ok(events) => {
                for job in jobs_for(&events) {
                    let _ = jobs.send(job);
                }
            }
            Err(errors) => {
                for e in errors {
                    tracing::warn!(error = %e, "folder watcher");
                }
            }
        })
        .map_err(|e| e.to_string())?;
        Ok(FolderWatcher { debouncer })
    }

    pub fn watch(&mut self, folder: &Path) -> Result<(), String> {
        self.debouncer.watch(folder, RecursiveMode::Recursive).map_err(|e| e.to_string())
    }

    pub fn unwatch(&mut self, folder: &Path) {
        let _ = self.debouncer.unwatch(folder);
    }
}

/// Hidden files and partial downloads (`.name.part`, `~$lock`) are never indexed.
fn interesting(path: &Path) -> bool {
    let hidden = path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'));
    !hidden && (path.is_dir() || file_kind(path).is_some())
}

/// The jobs for one debounced batch of events, in order.
fn jobs_for(events: &[DebouncedEvent]) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut changed: Vec<PathBuf> = Vec::new();
    for event in events {
        match (&event.kind, event.paths.as_slice()) {
            (EventKind::Modify(ModifyKind::Name(RenameMode::Both)), [from, to]) => {
                jobs.push(Job::Rename(from.clone(), to.clone()));
            }
            (EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From)), paths) => {
                jobs.extend(paths.iter().map(|p| Job::Remove(p.clone())));
            }
            (EventKind::Create(_) | EventKind::Modify(_), paths) => {
                changed.extend(paths.iter().filter(|p| interesting(p)).cloned());
            }
            _ => {}
        }
    }
    changed.sort();
    changed.dedup();
    if !changed.is_empty() {
        jobs.push(Job::Settle(changed));
    }
    jobs
}
