//! Document summaries in the index, keyed by the document's content hash.
//!
//! Why the content hash and not the document id: a summary belongs to a text, not to a row; a file
//! that moves or is indexed again unchanged keeps its summary, an edited file does not show a stale
//! one, and a summary can be written before the document is indexed (or for a file never
//! indexed). The model is part of the key: another model's summary is another summary.
//!
//! The table is created on first use by these methods, so indexes made before summaries existed
//! need no migration; a table from before summaries were checked gets its `check_json` column on
//! the first write, and its summaries read back unchecked (`check: None`), which the summarizer
//! takes as "not made yet" and writes again, checked.

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
    /// What checking it against its document found; `None`: made before summaries were checked.
    pub check: Option<SummaryCheck>,
}

/// What the check of a summary against its document found (`warpfold_summarize::grounding`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SummaryCheck {
    /// Every figure, date and name of the summary as shown was found in the document.
    pub checked: bool,
    /// The first summary stated something the document does not, and it was written again with a
    /// stricter instruction.
    pub rewritten: bool,
    /// Sentences taken out because they state something the document does not, with what.
    pub removed: Vec<RemovedSentence>,
    /// The document's language (its English name) when the summary came out in English instead:
    /// the model was asked to write that language and did not (a small model often cannot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub english_instead_of: Option<String>,
}

/// A sentence taken out of a summary, and the items in it the document does not hold.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RemovedSentence {
    pub sentence: String,
    pub items: Vec<String>,
    /// The sentence kept in its place, where taking off what the model added made it true: a
    /// currency sign the document never writes, on figures it gives bare ("$92.75" for "92.75").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
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
    check_json TEXT,
    PRIMARY KEY (content_hash, model)) WITHOUT ROWID;";

/// Whether the summaries table of `schema` has the check column (tables made before it do not).
pub(crate) fn has_check_column(conn: &rusqlite::Connection, schema: &str) -> rusqlite::Result<bool> {
    conn.query_row(&format!("SELECT count(*) FROM {schema}.pragma_table_info('summaries') WHERE name = 'check_json'"), [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n > 0)
}

impl Store {
    fn ensure_summaries(&self) -> Result<(), StoreError> {
        self.connection().execute_batch(SCHEMA)?;
        if !has_check_column(self.connection(), "main")? {
            self.connection().execute_batch("ALTER TABLE summaries ADD COLUMN check_json TEXT")?;
        }
        Ok(())
    }

    /// The check column to read: the column, or NULL for a table from before it.
    fn check_select(&self) -> Result<&'static str, StoreError> {
        Ok(if has_check_column(self.connection(), "main")? { "s.check_json" } else { "NULL" })
    }

    /// Has any summary been stored yet? Readers ask before reading, so that a read-only index
    /// (which cannot have the table created) answers "none" instead of failing.
    pub(crate) fn has_summaries(&self) -> Result<bool, StoreError> {
        Ok(self
            .connection()
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'summaries'", [], |r| r.get::<_, i64>(0))?
            > 0)
    }

    /// Copies the summaries another index holds (the one set aside when this index was re-embedded
    /// with another model): a summary belongs to a text, not to its vectors, so none is written
    /// again. Those already here are kept. Returns how many were copied.
    pub fn copy_summaries_from(&self, other: &std::path::Path) -> Result<usize, StoreError> {
        self.ensure_summaries()?;
        let conn = self.connection();
        conn.execute("ATTACH DATABASE ?1 AS other", params![other.display().to_string()])?;
        let copied = (|| {
            let has_table: i64 =
                conn.query_row("SELECT count(*) FROM other.sqlite_master WHERE type = 'table' AND name = 'summaries'", [], |r| r.get(0))?;
            if has_table == 0 {
                return Ok(0);
            }
            let check = if has_check_column(conn, "other")? { "check_json" } else { "NULL" };
            conn.execute(
                &format!(
                    "INSERT OR IGNORE INTO main.summaries(content_hash, model, path, summary, tokens_in, tokens_out, seconds, created_at, check_json)
                     SELECT content_hash, model, path, summary, tokens_in, tokens_out, seconds, created_at, {check} FROM other.summaries"
                ),
                [],
            )
        })();
        conn.execute("DETACH DATABASE other", [])?;
        Ok(copied?)
    }

    /// Stores (or replaces) the summary of a text by its content hash and model.
    pub fn put_summary(&self, s: &StoredSummary) -> Result<(), StoreError> {
        self.ensure_summaries()?;
        let check = s.check.as_ref().map(|c| serde_json::to_string(c).expect("a check serializes"));
        self.connection().execute(
            "INSERT OR REPLACE INTO summaries(content_hash, model, path, summary, tokens_in, tokens_out, seconds, created_at, check_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![s.content_hash, s.model, s.path, s.summary, s.tokens_in as i64, s.tokens_out as i64, s.seconds, s.created_at, check],
        )?;
        Ok(())
    }

    /// The summary of a text by one model, if stored.
    pub fn summary(&self, content_hash: &str, model: &str) -> Result<Option<StoredSummary>, StoreError> {
        if !self.has_summaries()? {
            return Ok(None);
        }
        let check = self.check_select()?;
        Ok(self
            .connection()
            .query_row(
                &format!(
                    "SELECT s.content_hash, s.model, s.path, s.summary, s.tokens_in, s.tokens_out, s.seconds, s.created_at, {check}
                     FROM summaries s WHERE s.content_hash = ?1 AND s.model = ?2"
                ),
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
        let check = self.check_select()?;
        Ok(self
            .connection()
            .query_row(
                &format!(
                    "SELECT s.content_hash, s.model, s.path, s.summary, s.tokens_in, s.tokens_out, s.seconds, s.created_at, {check}
                     FROM summaries s JOIN documents d ON d.content_hash = s.content_hash
                     WHERE d.path = ?1 ORDER BY s.created_at DESC LIMIT 1"
                ),
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
        // A check that does not parse (written by a later version) reads as none: made again.
        check: r.get::<_, Option<String>>(8)?.and_then(|j| serde_json::from_str(&j).ok()),
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
            check: Some(SummaryCheck {
                checked: true,
                rewritten: true,
                removed: vec![RemovedSentence { sentence: "Sow them outdoors.".into(), items: vec!["March".into()], kept: None }],
                english_instead_of: Some("French".into()),
            }),
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

    /// An index whose summaries table is from before the check: its summaries read back
    /// unchecked, and the first write adds the column and keeps the older rows.
    #[test]
    fn a_summaries_table_from_before_the_check_is_read_and_extended() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("i.db");
        let store = Store::open(&db, "m", 4).unwrap();
        store
            .connection()
            .execute_batch(
                "CREATE TABLE summaries(content_hash TEXT NOT NULL, model TEXT NOT NULL, path TEXT NOT NULL, summary TEXT NOT NULL,
                    tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, seconds REAL NOT NULL, created_at INTEGER NOT NULL,
                    PRIMARY KEY (content_hash, model)) WITHOUT ROWID;
                 INSERT INTO summaries VALUES ('old', 'smol', '/a.txt', 'Old words.', 1, 2, 0.5, 7);",
            )
            .unwrap();
        let old = store.summary("old", "smol").unwrap().unwrap();
        assert_eq!((old.summary.as_str(), &old.check), ("Old words.", &None));
        let new =
            StoredSummary { content_hash: "new".into(), check: Some(SummaryCheck { checked: true, ..Default::default() }), ..old.clone() };
        store.put_summary(&new).unwrap();
        assert_eq!(store.summary("new", "smol").unwrap(), Some(new));
        assert_eq!(store.summary("old", "smol").unwrap().unwrap().check, None);
    }
}
