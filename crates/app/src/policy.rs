//! Which paths the UI may name: what the user chose (dropped on the window, inside a watched folder
//! or the upload inbox) or a document the app holds, always judged on the canonical path.
//!
//! Why here and nowhere else: the webview and the HTTP server are attack surface, so every path
//! they send goes through [`App::checked_path`] (or, for new work, [`App::allowed`]) before any file
//! is read, opened or indexed.

use std::path::{Path, PathBuf};

use warpfold_index::files;

use crate::{App, AppError};

impl App {
    /// Records paths the user dropped on the desktop window: the webview may then ask for them.
    pub fn choose(&self, paths: &[PathBuf]) {
        let mut chosen = self.inner.chosen.lock();
        for path in paths {
            chosen.insert(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()));
        }
    }

    /// The folders the user chose: dropped folders and files and watched folders, each kept only
    /// while it is still what was chosen (its canonical path unchanged: one replaced since by a
    /// link, to the home folder say, is not followed to wherever the link points), and the
    /// upload inbox.
    pub(crate) fn chosen_roots(&self) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = self.inner.chosen.lock().iter().filter(|r| unchanged(r)).cloned().collect();
        roots.extend(self.watched_roots());
        roots.extend(std::fs::canonicalize(self.inner.config.data_dir.join("inbox")).ok());
        roots
    }

    /// The watched folders still as they were chosen (see [`unchanged`]).
    pub(crate) fn watched_roots(&self) -> Vec<PathBuf> {
        self.folders().into_iter().map(PathBuf::from).filter(|f| unchanged(f)).collect()
    }

    /// Is `path` (canonical: every link resolved, no `..`) something the user chose: dropped,
    /// inside a watched folder or the inbox, or a document the app holds?
    pub(crate) fn allowed(&self, path: &Path) -> bool {
        files::within(path, &self.chosen_roots()) || self.inner.board.get(&path.display().to_string()).is_some()
    }

    /// The canonical path for a path the UI names, if the user chose it. The check is made on the
    /// canonical path (every link resolved, no `..`), so `WATCHED/../../etc/shadow` and a link
    /// out of a watched folder are refused; a refusal reads the same whether or not the path
    /// exists. A document the app holds whose file has gone is still named (its detail shows).
    pub(crate) fn checked_path(&self, path: &str) -> Result<PathBuf, AppError> {
        let refused = || AppError::PathNotAllowed(format!("{path} is not a file warpfold was given"));
        let named = Path::new(path);
        let plain =
            named.is_absolute() && named.components().all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::Normal(_)));
        if !plain {
            return Err(refused());
        }
        match std::fs::canonicalize(named) {
            Ok(canonical) if self.allowed(&canonical) => Ok(canonical),
            Ok(_) => Err(refused()),
            Err(_) if self.inner.board.get(path).is_some() => Ok(named.to_path_buf()),
            Err(_) => Err(refused()),
        }
    }
}

/// Is `chosen` (a canonical path, as it was recorded) still its own canonical path? Not when it, or
/// a folder above it, has been replaced by a link since (or it is gone).
pub(crate) fn unchanged(chosen: &Path) -> bool {
    std::fs::canonicalize(chosen).is_ok_and(|now| now == chosen)
}

pub(crate) fn canonical_dir(path: &str) -> Result<PathBuf, AppError> {
    if path.trim().is_empty() {
        return Err(AppError::InvalidInput("no folder given".into()));
    }
    let canonical = std::fs::canonicalize(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => AppError::NotFound(format!("{path}: no such folder")),
        std::io::ErrorKind::PermissionDenied => AppError::NotFound(format!("{path}: warpfold may not read it (permission denied)")),
        _ => AppError::NotFound(format!("{path}: {e}")),
    })?;
    if !canonical.is_dir() {
        return Err(AppError::InvalidInput(format!("{path} is not a folder")));
    }
    Ok(canonical)
}
