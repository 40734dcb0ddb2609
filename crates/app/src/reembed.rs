//! Embedding the data folder's index again with another model, when the person chose one in the
//! settings.
//!
//! Why this shape: an index's vectors only compare with vectors of the model that made them, so
//! another model means every passage embedded again. The old index is set aside whole (its file
//! renamed after its write-ahead log is folded in), a new one is filled from the same documents
//! through the ordinary queue (so its progress shows there), and the old one is removed only once
//! every document it held is in the new one or gone from disk. Until then a marker file in the
//! data folder names it, so a start cut short goes on where it stopped, and a document forgotten
//! meanwhile is forgotten in both. Only a model named in settings.json (the settings view) moves
//! an index: a one-off `--model` flag or variable against it is refused with its way out, as before,
//! and an index the person named (`--db`) is theirs to manage.

use std::path::{Path, PathBuf};

use warpfold_index::store::Store;

use crate::settings::Settings;
use crate::AppError;

/// The marker of a re-embedding under way: the set-aside index's path, in the data folder.
const MARKER: &str = "reembedding-from";

/// What a start must do about the data folder's index and the model the settings ask for.
pub(crate) struct Plan {
    /// The model the index was built with.
    pub built: String,
    /// The pinned model the settings ask for.
    pub wanted: String,
}

/// Whether this start re-embeds: settings.json in the data folder names a pinned embedding model
/// other than the one `db` (the data folder's own index) was built with.
pub(crate) fn plan(settings: &Settings, db: &Path, recorded: Option<&str>) -> Option<Plan> {
    if settings.db.is_some() {
        return None;
    }
    let built = recorded?;
    let saved = Settings::from_file(&settings.data_dir().join("settings.json")).ok()?;
    let asked = saved.model.filter(|m| Some(m) == settings.model.as_ref())?;
    let manifest = warpfold_runtime::models::Manifest::embedded();
    let entry = manifest.get(&asked).ok().filter(|entry| entry.role == "embedding" && entry.name != built)?;
    db.exists().then(|| Plan { built: built.to_string(), wanted: entry.name.clone() })
}

/// Sets the index at `db` aside for `plan` (call once the new model has started: a failed fetch
/// must leave the index where it was) and leaves the marker. Returns where it went.
pub(crate) fn set_aside(db: &Path, plan: &Plan) -> Result<PathBuf, AppError> {
    let kept = set_aside_name(db, &plan.built);
    let marker = marker_of(db);
    // The marker first: a crash between the two leaves a marker naming a file not there yet
    // (ignored), never a set-aside index nobody knows of.
    std::fs::write(&marker, kept.display().to_string())?;
    if let Err(e) = Store::set_aside(db, &kept) {
        let _ = std::fs::remove_file(&marker);
        return Err(AppError::Internal(format!("setting the index built with {} aside to embed it again: {e}", plan.built)));
    }
    Ok(kept)
}

/// The set-aside index of a re-embedding under way for the index at `db`, if any.
pub fn pending(db: &Path) -> Option<PathBuf> {
    let kept = PathBuf::from(std::fs::read_to_string(marker_of(db)).ok()?.trim());
    kept.is_file().then_some(kept)
}

/// Ends a re-embedding when every document of the set-aside index is in the new one at `db` (or
/// its file is gone): the old index and the marker are removed. Returns whether it ended.
pub(crate) fn finish_if_done(db: &Path) -> Result<bool, AppError> {
    let Some(kept) = pending(db) else {
        let _ = std::fs::remove_file(marker_of(db));
        return Ok(false);
    };
    if !missing(db, &kept)?.is_empty() {
        return Ok(false);
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut file = kept.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
    let _ = std::fs::remove_file(marker_of(db));
    Ok(true)
}

/// The documents of the set-aside index `kept` that the index at `db` does not hold yet and
/// whose files are still there.
pub(crate) fn missing(db: &Path, kept: &Path) -> Result<Vec<PathBuf>, AppError> {
    let old = Store::open_read_only(kept)?;
    let new = Store::open_read_only(db).ok();
    let held = |path: &str| new.as_ref().is_some_and(|s| s.document_state(path).ok().flatten().is_some());
    Ok(old.documents()?.into_iter().filter(|d| !held(&d.path)).map(|d| PathBuf::from(d.path)).filter(|p| p.is_file()).collect())
}

fn marker_of(db: &Path) -> PathBuf {
    db.with_file_name(format!("{}.{MARKER}", db.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()))
}

/// Where an index built with `model` is kept while its folder's index is embedded again: beside
/// it, named after the model (`index-all-MiniLM-L6-v2.db`), never over another file.
fn set_aside_name(db: &Path, model: &str) -> PathBuf {
    let stem = db.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "index".into());
    let safe: String = model.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    (1..)
        .map(|n| if n == 1 { format!("{stem}-{safe}.db") } else { format!("{stem}-{safe} ({n}).db") })
        .map(|name| db.with_file_name(name))
        .find(|candidate| !candidate.exists())
        .expect("some name is free")
}
