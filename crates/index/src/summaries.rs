//! Document summaries in the index, keyed by the document's content hash.
//!
//! Why the content hash and not the document id: a summary belongs to a text, not to a row; a file
//! that moves or is indexed again unchanged keeps its summary, an edited file does not show a stale
//! one, and a summary can be written before the document is indexed (or for a file never
//! indexed). The model is part of the key: another model's summary is another summary.
//!
//! The table is created on first use by these methods, so indexes made before summaries existed
//! need no migration.

use rusqlite::{params, OptionalExtension};

use crate::store::{Store, StoreError};

/// A stored summary.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StoredSummary {
    pub content_hash: String,
    pub model: String,
    /// The path the document had when it was summarized.
    pub path: String,
    pub summary: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub seconds: f64,
    /// Unix seconds.
    pub created_at: i64,
}

pub(crate) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS summaries(
    content_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    path TEXT NOT NULL,
    summary TEXT NOT NULL,
    tokens_in INTEGER NOT NULL,
    tokens_out INTEGER NOT NULL,
    seconds REAL NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (content_hash, model)) WITHOUT ROWID;";

impl Store {
    fn ensure_summaries(&self) -> Result<(), StoreError> {
        self.connection().execute_batch(SCHEMA)?;
        Ok(())
    }

    /// Has any summary been stored yet? Readers ask before reading, so that a read-only index
    /// (which cannot have the table created) answers "none" instead of failing.
    fn has_summaries(&self) -> Result<bool, StoreError> {
        Ok(self
            .connection()
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'summaries'", [], |r| r.get::<_, i64>(0))?
            > 0)
    }

    /// Stores (or replaces) the summary of a text by its content hash and model.
    pub fn put_summary(&self, s: &StoredSummary) -> Result<(), StoreError> {
        self.ensure_summaries()?;
        self.connection().execute(
            "INSERT OR REPLACE INTO summaries(content_hash, model, path, summary, tokens_in, tokens_out, seconds, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![s.content_hash, s.model, s.path, s.summary, s.tokens_in as i64, s.tokens_out as i64, s.seconds, s.created_at],
        )?;
        Ok(())
    }

    /// The summary of a text by one model, if stored.
    pub fn summary(&self, content_hash: &str, model: &str) -> Result<Option<StoredSummary>, StoreError> {
        if !self.has_summaries()? {
            return Ok(None);
        }
        Ok(self
            .connection()
            .query_row(
                "SELECT content_hash, model, path, summary, tokens_in, tokens_out, seconds, created_at
                 FROM summaries WHERE content_hash = ?1 AND model = ?2",
                params![content_hash, model],
                row_to_summary,
            )
            .optional()?)
    }

    /// The newest summary of the document now indexed at `path` (by its current content hash).
    pub fn summary_for_path(&self, path: &str) -> Result<Option<StoredSummary>, StoreError> {
        if !self.has_summaries()? {
            return Ok(None);
        }
        Ok(self
            .connection()
            .query_row(
                "SELECT s.content_hash, s.model, s.path, s.summary, s.tokens_in, s.tokens_out, s.seconds, s.created_at
                 FROM summaries s JOIN documents d ON d.content_hash = s.content_hash
                 WHERE d.path = ?1 ORDER BY s.created_at DESC LIMIT 1",
                params![path],
                row_to_summary,
            )
            .optional()?)
    }
}

fn row_to_summary(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredSummary> {
    Ok(StoredSummary {
        content_hash: r.get(0)?,
        model: r.get(1)?,
        path: r.get(2)?,
        summary: r.get(3)?,
        tokens_in: r.get::<_, i64>(4)? as u64,
        tokens_out: r.get::<_, i64>(5)? as u64,
        seconds: r.get(6)?,
        created_at: r.get(7)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_kept_by_content_hash_and_model_and_found_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("i.db");
        let store = Store::open(&db, "m", 4).unwrap();
        let s = StoredSummary {
            content_hash: "abc".into(),
            model: "smol".into(),
            path: "/x/a.pdf".into(),
            summary: "About tomatoes.".into(),
            tokens_in: 120,
            tokens_out: 9,
            seconds: 1.5,
            created_at: 1,
        };
        store.put_summary(&s).unwrap();
        assert_eq!(store.summary("abc", "smol").unwrap(), Some(s.clone()));
        assert_eq!(store.summary("abc", "other").unwrap(), None);
        let newer = StoredSummary { summary: "Tomatoes ripen indoors.".into(), created_at: 2, ..s.clone() };
        store.put_summary(&newer).unwrap();
        assert_eq!(store.summary("abc", "smol").unwrap().unwrap().summary, "Tomatoes ripen indoors.");
        // Not indexed: nothing by path. The table survives reopening.
        assert_eq!(store.summary_for_path("/x/a.pdf").unwrap(), None);
        drop(store);
        let again = Store::open_existing(&db).unwrap();
        assert_eq!(again.summary("abc", "smol").unwrap().unwrap().tokens_in, 120);
    }
}
