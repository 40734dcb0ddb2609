//! Following watched folders: a debounced watcher turning file-system events into indexer jobs.
//!
//! Why debounced, and why an mtime check on top: a file being copied fires many modify events;
//! the debouncer waits until a file has been quiet for `settle` and pairs a rename's two halves
//! (inotify cookies, file ids), and the indexer reads a file only once its mtime is at least
//! `settle` old, so a copy that pauses longer than the debouncer still is not read half-written:
//! it is re-checked later. Events missed while the app was closed are caught by a scan at start.
//!
//! Why a thread of its own, and no symbolic links: registering a recursive watch walks the whole
//! tree, and notify follows links by default, so one link to `/sys` inside a watched folder kept
//! it walking forever. The watcher here never follows links (the indexer does not read through
//! them either, see `warpfold_index::files`), and registration happens on the watcher's thread
//! with no lock of the app held, so the state, the metrics and other folders keep answering
//! whatever a folder holds. System trees that are not documents (`/`, `/proc`, `/sys`, `/dev`)
//! are refused outright.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crossbeam_channel::Sender;
use notify_debouncer_full::notify::event::{ModifyKind, RenameMode};
use notify_debouncer_full::notify::{EventKind, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{new_debouncer_opt, DebounceEventResult, DebouncedEvent, Debouncer, NoCache};
use warpfold_index::extract::file_kind;

use crate::Job;

/// Folders that are never watched: the root and the kernel's virtual trees.
pub const REFUSED_FOLDERS: [&str; 4] = ["/", "/proc", "/sys", "/dev"];

/// Why `folder` (canonical) may not be watched or indexed (`doing`: "watching", "indexing"), if it
/// may not.
pub fn refusal(folder: &Path, doing: &str) -> Option<String> {
    if folder == Path::new("/") {
        return Some(format!("{doing} the whole file system (/) is refused: choose the folders that hold your documents"));
    }
    REFUSED_FOLDERS[1..]
        .iter()
        .find(|system| folder.starts_with(system))
        .map(|system| format!("{} is inside {system}, a system tree of the kernel, not documents: {doing} it is refused", folder.display()))
}

enum Command {
    Watch(PathBuf, Sender<Result<(), String>>),
    Unwatch(PathBuf),
}

/// The watcher's handle: commands go to the thread that owns the debouncer. Dropping the last
/// handle stops it.
#[derive(Clone)]
pub struct FolderWatcher {
    commands: Sender<Command>,
}

impl FolderWatcher {
    pub(crate) fn start(settle: Duration, jobs: Sender<Job>) -> Result<FolderWatcher, String> {
        let config = notify_debouncer_full::notify::Config::default().with_follow_symlinks(false);
        let mut debouncer: Debouncer<RecommendedWatcher, NoCache> = new_debouncer_opt(
            settle,
            None,
            move |result: DebounceEventResult| match result {
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
            },
            // No file-id cache: the one notify offers walks the tree following links. Linux pairs
            // a rename's halves by inotify cookies; where a platform cannot, a rename is seen as a
            // deletion and a new file (its chunks' vectors are embedded again).
            NoCache::new(),
            config,
        )
        .map_err(|e| e.to_string())?;
        let (commands, received) = crossbeam_channel::unbounded::<Command>();
        std::thread::Builder::new()
            .name("warpfold-watcher".into())
            .spawn(move || {
                for command in received {
                    match command {
                        Command::Watch(folder, reply) => {
                            let _ = reply.send(debouncer.watch(&folder, RecursiveMode::Recursive).map_err(|e| e.to_string()));
                        }
                        Command::Unwatch(folder) => {
                            let _ = debouncer.unwatch(&folder);
                        }
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(FolderWatcher { commands })
    }

    /// Starts watching `folder` (canonical); waits for the registration's answer, holding nothing.
    pub fn watch(&self, folder: &Path) -> Result<(), String> {
        if let Some(reason) = refusal(folder, "watching") {
            return Err(reason);
        }
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.commands.send(Command::Watch(folder.to_path_buf(), reply)).map_err(|_| "the folder watcher has stopped".to_string())?;
        answer.recv().map_err(|_| "the folder watcher has stopped".to_string())?
    }

    pub fn unwatch(&self, folder: &Path) {
        let _ = self.commands.send(Command::Unwatch(folder.to_path_buf()));
    }
}

/// Hidden files and partial downloads (`.name.part`, `~$lock`) are never indexed.
fn interesting(path: &Path) -> bool {
    !path.file_name().is_some_and(warpfold_index::files::hidden) && (path.is_dir() || file_kind(path).is_some())
}

/// The jobs for one debounced batch of events, in order.
fn jobs_for(events: &[DebouncedEvent]) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut changed: Vec<PathBuf> = Vec::new();
    for event in events {
        if event.need_rescan() {
            // Events were lost (inotify's queue overflowed): only a scan of every folder can tell
            // what changed. Once is enough for the batch.
            if !jobs.iter().any(|j| matches!(j, Job::ScanWatched)) {
                jobs.push(Job::ScanWatched);
            }
            continue;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// When the kernel drops events (its queue overflowed), the debouncer passes on one event
    /// flagged "rescan": every watched folder is scanned, since what changed is unknown.
    #[test]
    fn lost_events_make_every_watched_folder_scanned_again() {
        use notify_debouncer_full::notify::event::{Event, Flag};
        let at = std::time::Instant::now();
        let rescan = DebouncedEvent::new(Event::new(EventKind::Other).set_flag(Flag::Rescan), at);
        let created = DebouncedEvent::new(
            Event::new(EventKind::Create(notify_debouncer_full::notify::event::CreateKind::File)).add_path(PathBuf::from("/w/a.txt")),
            at,
        );
        let jobs = jobs_for(&[created.clone(), rescan.clone(), rescan]);
        assert_eq!(jobs.iter().filter(|j| matches!(j, Job::ScanWatched)).count(), 1, "one scan for the batch");
        assert!(jobs_for(&[created]).iter().all(|j| !matches!(j, Job::ScanWatched)), "no scan without lost events");
    }

    #[test]
    fn system_trees_are_refused_and_document_folders_are_not() {
        for folder in ["/", "/proc", "/proc/self", "/sys/class", "/dev", "/dev/shm"] {
            assert!(refusal(Path::new(folder), "watching").is_some(), "{folder} must be refused");
        }
        for folder in ["/home/me/Documents", "/devices-of-mine", "/tmp/sysadmin"] {
            assert!(refusal(Path::new(folder), "watching").is_none(), "{folder} is a fine folder");
        }
    }
}
