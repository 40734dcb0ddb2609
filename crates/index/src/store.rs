//! The index on disk: one SQLite file (WAL) with documents, their pages, chunks, embeddings and an
//! FTS5 table for BM25.
//!
//! Why SQLite: one file a user can copy, crash-safe transactions, full-text search built in. Every
//! document is written in one transaction (its row, pages, chunks and new embeddings), so a run
//! killed at any instant leaves each document either fully indexed or as it was before, and the
//! next run picks up exactly what is missing. Embeddings are keyed by the SHA-256 of the chunk
//! text, so an edited file only re-embeds the chunks whose text changed, and identical chunks in
//! different files are embedded once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior};

use crate::chunk::DocumentChunk;
use crate::language::{LANGUAGE_FUNCTION, SCRIPT_FUNCTION};
use crate::segment::FTS_TEXT_FUNCTION;

const SCHEMA_VERSION: &str = "1";

/// Why the index could not be used. SQLite's message is held as the error's own text and not also
/// as its `source`, so a report that prints the chain (`{:#}`) says it once.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("index database {path}: {message}")]
    Open { path: String, message: String },
    #[error("index database: {0}")]
    Sql(String),
    #[error(
        "the index {path} was built with the model {found} ({found_dim} dimensions); this run uses {wanted} ({wanted_dim}), whose vectors do not compare with its. Use that index with its own model: leave out --model and WARPFOLD_MODEL, or give `--model {found}`; to re-index with {wanted}, give a new index (`warpfold index PATH... --model {wanted} --db NEW.db`) or delete {path} and index again"
    )]
    ModelMismatch { path: String, found: String, found_dim: usize, wanted: String, wanted_dim: usize },
    #[error("{path} is not a warpfold index (schema version {found:?}, expected {SCHEMA_VERSION})")]
    Schema { path: String, found: Option<String> },
    #[error("{0} does not exist; build it first with `warpfold index PATH... --db {0}`")]
    Missing(String),
    #[error("{0} is a folder; the index is a file: give one such as {0}/index.db")]
    Folder(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sql(sqlite_message(&e))
    }
}

/// SQLite's message once: rusqlite's failure carries SQLite's message and, as its source, the
/// error code's description, which is most often the same words.
fn sqlite_message(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(message)) => message.clone(),
        other => other.to_string(),
    }
}

fn open_error(path: &str, e: rusqlite::Error) -> StoreError {
    StoreError::Open { path: path.to_string(), message: sqlite_message(&e) }
}

/// What [`Store::commit_document`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Commit {
    /// The document is written.
    Done,
    /// Nothing was written: these chunk texts have no stored vector (decided inside the
    /// transaction). Embed them and commit again with their vectors.
    MissingVectors(Vec<[u8; 32]>),
}

/// A chunk text without a vector, found by [`Store::chunks_without_vectors`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingVector {
    pub text_hash: [u8; 32],
    pub text: String,
    /// How many chunks share the text, and one document holding it.
    pub chunks: u64,
    pub example_path: String,
}

/// A document's row as the indexer needs it to decide whether to read the file again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentState {
    pub content_hash: String,
    pub status: String,
    /// Why it failed, for a document that did.
    pub error: Option<String>,
}

/// A document's record and the embeddings its chunks need that the store does not hold yet: one
/// `(text hash, vector)` pair a new chunk text.
pub type DocumentCommit = (DocumentRecord, Vec<([u8; 32], Vec<f32>)>);

/// Everything written for one file in one transaction.
#[derive(Debug, Clone)]
pub struct DocumentRecord {
    pub path: String,
    pub content_hash: String,
    pub size: u64,
    pub mtime: i64,
    /// `indexed`, `no_text` or `failed`.
    pub status: &'static str,
    /// The error (failed, no_text) or warnings (indexed) for this file.
    pub error: Option<String>,
    pub pages: Vec<String>,
    /// The pages (1-based) whose text was read by OCR.
    pub ocr_pages: Vec<u32>,
    pub chunks: Vec<DocumentChunk>,
}

/// A chunk as search shows it.
#[derive(Debug, Clone)]
pub struct StoredChunk {
    pub id: i64,
    pub path: String,
    pub text: String,
    pub page_start: u32,
    pub page_breaks: Vec<(usize, u32)>,
    pub char_start: usize,
    pub char_end: usize,
}

impl StoredChunk {
    pub fn page_at(&self, offset: usize) -> u32 {
        crate::chunk::page_at(self.page_start, &self.page_breaks, offset)
    }
}

pub struct Store {
    pub(crate) conn: Connection,
    path: String,
    /// The stemmers of the index's languages for keyword queries ([`Store::query_stems`]), with
    /// the highest chunk id when they were read: new chunks may bring a new language.
    query_stems: parking_lot::Mutex<Option<(i64, crate::stem::QueryStems)>>,
}

fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn decode_vector(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn encode_breaks(breaks: &[(usize, u32)]) -> String {
    breaks.iter().map(|(at, page)| format!("{at}:{page}")).collect::<Vec<_>>().join(",")
}

fn decode_breaks(text: &str) -> Vec<(usize, u32)> {
    text.split(',')
        .filter_map(|pair| {
            let (at, page) = pair.split_once(':')?;
            Some((at.parse().ok()?, page.parse().ok()?))
        })
        .collect()
}

/// Creates the index file readable by its owner alone (0600) when it does not exist yet: it holds
/// every indexed document's text. SQLite gives its -wal and -shm files the mode of the index file,
/// so they are private too. An existing index keeps its mode; [`readable_by_others`] tells when
/// that lets other users read it.
fn create_private(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// What of an index (the file, its -wal and -shm, its folder) other users of the machine may read,
/// as a warning to show; None when nothing is.
pub fn readable_by_others(path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut open: Vec<String> = Vec::new();
        let wal = PathBuf::from(format!("{}-wal", path.display()));
        let shm = PathBuf::from(format!("{}-shm", path.display()));
        for file in [path.to_path_buf(), wal, shm] {
            if std::fs::metadata(&file).is_ok_and(|m| m.permissions().mode() & 0o044 != 0) {
                open.push(file.display().to_string());
            }
        }
        if !open.is_empty() {
            return Some(format!(
                "the index {} can be read by other users of this machine (chmod 600 it to keep its text private)",
                open.join(", ")
            ));
        }
    }
    None
}

/// The SQL functions the store's triggers and upkeep call ([`crate::segment`], [`crate::language`]).
fn register_functions(conn: &Connection) -> rusqlite::Result<()> {
    crate::segment::register(conn)?;
    crate::language::register(conn)
}

/// Writes every chunk's full-text row anew from its segmented text: what FTS5's own `rebuild`
/// would do if it read the text through [`crate::segment::fts_text`].
pub(crate) fn rewrite_full_text_sql() -> String {
    format!(
        "INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all');
         INSERT INTO chunks_fts(rowid, text) SELECT id, {FTS_TEXT_FUNCTION}(text) FROM chunks;"
    )
}

/// One language of an index's chunks ([`Store::languages`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IndexLanguage {
    /// ISO 639-3 (`eng`, `deu`, `jpn`); `None` for chunks whose language was not told apart.
    pub code: Option<String>,
    /// Its English name (`German`).
    pub name: Option<String>,
    pub chunks: u64,
    /// How much the index's embedding model counts in it, 0 to 1: 1 where it was trained, 0 where
    /// search in it is by keyword alone.
    pub model_weight: f64,
}

impl Store {
    /// Opens (creating if needed) the index at `path` for a model; refuses an index built with
    /// another model, whose vectors would not be comparable.
    pub fn open(path: &Path, model: &str, dim: usize) -> Result<Store, StoreError> {
        let display = path.display().to_string();
        if path.is_dir() {
            return Err(StoreError::Folder(display));
        }
        create_private(path).map_err(|e| StoreError::Open { path: display.clone(), message: e.to_string() })?;
        let conn = Connection::open(path).map_err(|e| open_error(&display, e))?;
        // 16 KiB pages for a new index (an existing one keeps its own): a chunk's text, its vector
        // and its full-text postings fit a page where 4 KiB pages spill into overflow pages, and a
        // commit writes a third as many pages (half the writer's time, `examples/commit_cost.rs`).
        conn.pragma_update(None, "page_size", 16_384).map_err(|e| open_error(&display, e))?;
        let store = Store { conn, path: display, query_stems: Default::default() };
        store.configure()?;
        store.create_schema()?;
        // The writer's page cache: 64 MiB rather than SQLite's 2 MiB. Inserting into the chunk and
        // full-text b-trees re-reads their inner pages all the time; with the small cache each
        // re-read is a system call (most of a commit's time, `examples/commit_cost.rs`).
        store.conn.pragma_update(None, "cache_size", -65_536)?;
        store.check_model(model, dim, true)?;
        Ok(store)
    }

    /// Opens an existing index without writing to it (search, parallel readers).
    /// Moves the index at `path` to `to` whole: its write-ahead log folded into the file first,
    /// so the file alone is the index (an index re-embedded with another model keeps the old one
    /// under a name of its own). `to` must not exist.
    pub fn set_aside(path: &Path, to: &Path) -> Result<(), StoreError> {
        let io = |e: std::io::Error| StoreError::Open { path: to.display().to_string(), message: e.to_string() };
        if to.exists() {
            return Err(io(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "already exists")));
        }
        {
            let store = Store::open_existing(path)?;
            // Busy: another connection (another warpfold on this data folder) holds the log, whose
            // commits would be lost with it. Nothing is moved.
            let busy: i64 = store.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
            if busy != 0 {
                return Err(StoreError::Open {
                    path: path.display().to_string(),
                    message: "another program has this index open (another warpfold?): close it and start again".into(),
                });
            }
        }
        std::fs::rename(path, to).map_err(io)?;
        // The log is empty now (truncated by the checkpoint); the shared-memory file is rebuilt.
        for suffix in ["-wal", "-shm"] {
            let mut side = path.as_os_str().to_owned();
            side.push(suffix);
            if std::fs::metadata(&side).is_ok_and(|m| m.len() == 0 || suffix == "-shm") {
                let _ = std::fs::remove_file(side);
            }
        }
        Ok(())
    }

    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        let display = path.display().to_string();
        if !path.exists() {
            return Err(StoreError::Missing(display));
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(|e| open_error(&display, e))?;
        let store = Store { conn, path: display, query_stems: Default::default() };
        store.configure()?;
        store.check_schema()?;
        Ok(store)
    }

    /// Opens an existing index for reading only (search, the document view): works on an index the
    /// user may not write (a read-only file, folder or mount). When SQLite cannot even create its
    /// shared-memory file beside it, the file is opened as immutable: nothing can be writing it.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let display = path.display().to_string();
        if !path.exists() {
            return Err(StoreError::Missing(display));
        }
        if path.is_dir() {
            return Err(StoreError::Folder(display));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let plain = Connection::open_with_flags(path, flags).map_err(|e| open_error(&display, e)).and_then(|conn| {
            let store = Store { conn, path: display.clone(), query_stems: Default::default() };
            register_functions(&store.conn)?;
            store.conn.busy_timeout(std::time::Duration::from_secs(30))?;
            store.check_schema()?;
            Ok(store)
        });
        match plain {
            Ok(store) => Ok(store),
            Err(StoreError::Schema { .. }) => plain,
            Err(_) => {
                let uri = format!("file:{}?immutable=1", uri_path(path));
                let conn = Connection::open_with_flags(uri, flags).map_err(|e| open_error(&display, e))?;
                let store = Store { conn, path: display, query_stems: Default::default() };
                register_functions(&store.conn)?;
                store.check_schema()?;
                Ok(store)
            }
        }
    }

    fn check_schema(&self) -> Result<(), StoreError> {
        let version = match self.meta("schema_version") {
            // An SQLite file of something else: not a warpfold index, said as such.
            Err(StoreError::Sql(message)) if message.starts_with("no such table") => None,
            other => other?,
        };
        if version.as_deref() != Some(SCHEMA_VERSION) {
            return Err(StoreError::Schema { path: self.path.clone(), found: version });
        }
        Ok(())
    }

    fn configure(&self) -> Result<(), StoreError> {
        register_functions(&self.conn)?;
        self.conn.busy_timeout(std::time::Duration::from_secs(30))?;
        self.conn.pragma_update(None, "journal_mode", "WAL")?;
        // NORMAL in WAL mode: a committed transaction survives a killed process (not a power cut,
        // which would lose at most the last few, never corrupt the file).
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        // Deleted rows are zeroed by every writer, not only by a forget: a re-indexed document's
        // earlier version, or full-text segments merged away, would otherwise stay readable on
        // the file's free pages after the document is forgotten.
        self.conn.pragma_update(None, "secure_delete", "ON")?;
        Ok(())
    }

    pub(crate) fn create_schema(&self) -> Result<(), StoreError> {
        self.conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS documents(
                 id INTEGER PRIMARY KEY,
                 path TEXT NOT NULL UNIQUE,
                 content_hash TEXT NOT NULL,
                 size INTEGER NOT NULL,
                 mtime INTEGER NOT NULL,
                 status TEXT NOT NULL CHECK (status IN ('indexed', 'no_text', 'failed')),
                 error TEXT,
                 page_count INTEGER NOT NULL,
                 indexed_at INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS pages(
                 document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
                 page INTEGER NOT NULL,
                 text TEXT NOT NULL,
                 PRIMARY KEY (document_id, page)) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS chunks(
                 id INTEGER PRIMARY KEY,
                 document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
                 ordinal INTEGER NOT NULL,
                 text TEXT NOT NULL,
                 text_hash BLOB NOT NULL,
                 page_start INTEGER NOT NULL,
                 page_end INTEGER NOT NULL,
                 page_breaks TEXT NOT NULL,
                 char_start INTEGER NOT NULL,
                 char_end INTEGER NOT NULL,
                 tokens INTEGER NOT NULL,
                 UNIQUE (document_id, ordinal));
             CREATE INDEX IF NOT EXISTS chunks_by_hash ON chunks(text_hash);
             CREATE TABLE IF NOT EXISTS embeddings(text_hash BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID;
             CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
                 text, content='chunks', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
",
        )?;
        self.segment_full_text()?;
        self.detect_chunk_languages()?;
        self.conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?1)", params![SCHEMA_VERSION])?;
        // Which pages OCR read (added after schema version 1 was first written: an older index
        // gains the column, all its pages marked as not OCR'd, which they were not).
        if !self.pages_have_ocr_column()? {
            self.conn.execute_batch("ALTER TABLE pages ADD COLUMN ocr INTEGER NOT NULL DEFAULT 0")?;
        }
        Ok(())
    }

    /// Keeps the full-text index on the segmented text of [`crate::segment`]: the triggers that
    /// write and delete its rows cut each chunk's text alike. An index written before segmentation
    /// gets the new triggers, and its full-text rows are written again when a chunk of it holds
    /// text the segmentation changes (Chinese, Japanese or Korean); otherwise they are the same.
    fn segment_full_text(&self) -> Result<(), StoreError> {
        let insert: Option<String> = self
            .conn
            .query_row("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'chunks_fts_insert'", [], |r| r.get(0))
            .optional()?;
        if insert.as_deref().is_some_and(|sql| sql.contains(FTS_TEXT_FUNCTION)) {
            return Ok(());
        }
        let tx = self.conn.unchecked_transaction()?;
        let older = insert.is_some();
        tx.execute_batch(&format!(
            "DROP TRIGGER IF EXISTS chunks_fts_insert;
             DROP TRIGGER IF EXISTS chunks_fts_delete;
             CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
                 INSERT INTO chunks_fts(rowid, text) VALUES (new.id, {FTS_TEXT_FUNCTION}(new.text));
             END;
             CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
                 INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, {FTS_TEXT_FUNCTION}(old.text));
             END;"
        ))?;
        let changed = older
            && tx.query_row(&format!("SELECT EXISTS (SELECT 1 FROM chunks WHERE {FTS_TEXT_FUNCTION}(text) != text)"), [], |r| {
                r.get::<_, bool>(0)
            })?;
        if changed {
            tx.execute_batch(&rewrite_full_text_sql())?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Keeps each chunk's language and script ([`crate::language`]): an index written before they
    /// were stored gains the columns, filled from each chunk's text. Only then: a chunk written
    /// since has them from [`Store::commit_documents`], and reading every row at each opening
    /// would cost a large index seconds (merged chunks get theirs from [`Store::fill_chunk_languages`]).
    fn detect_chunk_languages(&self) -> Result<(), StoreError> {
        if !self.has_chunk_languages()? {
            self.conn.execute_batch("ALTER TABLE chunks ADD COLUMN language TEXT; ALTER TABLE chunks ADD COLUMN script TEXT;")?;
            self.fill_chunk_languages()?;
        }
        self.conn.execute_batch("CREATE INDEX IF NOT EXISTS chunks_by_language ON chunks(language)")?;
        Ok(())
    }

    /// Gives every chunk without a language and script ([`crate::language::detect`]) its own: the
    /// rows of an index that did not store them, and rows copied in without them (a merge).
    pub(crate) fn fill_chunk_languages(&self) -> Result<(), StoreError> {
        // '' marks a text with nothing to tell by, so it is not read again.
        self.conn.execute(
            &format!("UPDATE chunks SET language = {LANGUAGE_FUNCTION}(text), script = coalesce({SCRIPT_FUNCTION}(text), '') WHERE script IS NULL"),
            [],
        )?;
        Ok(())
    }

    /// Whether the index stores each chunk's language (an index written before it did, opened
    /// without upgrading it, does not).
    pub fn has_chunk_languages(&self) -> Result<bool, StoreError> {
        Ok(self.conn.query_row("SELECT count(*) FROM pragma_table_info('chunks') WHERE name = 'script'", [], |r| r.get::<_, i64>(0))? > 0)
    }

    /// The languages of the index's chunks (ISO 639-3), each once, those not told left out.
    pub fn stem_languages(&self) -> Result<Vec<String>, StoreError> {
        if !self.has_chunk_languages()? {
            return Ok(Vec::new());
        }
        let mut statement = self.conn.prepare_cached("SELECT DISTINCT language FROM chunks WHERE language IS NOT NULL")?;
        let languages = statement.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        Ok(languages)
    }

    /// The stemmers a keyword query's words are expanded with ([`crate::stem`]): those of the
    /// index's languages, read again once the index holds chunks it did not when last read.
    pub fn query_stems(&self) -> Result<crate::stem::QueryStems, StoreError> {
        let newest: i64 = self.conn.query_row("SELECT coalesce(max(id), 0) FROM chunks", [], |r| r.get(0))?;
        let mut cached = self.query_stems.lock();
        if let Some((_, stems)) = cached.as_ref().filter(|(read_at, _)| *read_at == newest) {
            return Ok(stems.clone());
        }
        let languages = self.stem_languages()?;
        let stems = crate::stem::QueryStems::for_languages(languages.iter().map(String::as_str));
        *cached = Some((newest, stems.clone()));
        Ok(stems)
    }

    /// Chunks by language, most first, each with its script and how much the index's model counts
    /// in it ([`crate::language::dense_weight`]): what an index holds, and the values
    /// [`crate::filter::Filter::language`] takes. Empty for an index that stores no languages.
    pub fn languages(&self) -> Result<Vec<IndexLanguage>, StoreError> {
        if !self.has_chunk_languages()? {
            return Ok(Vec::new());
        }
        let model = self.model()?.map(|(name, _)| name).unwrap_or_default();
        Ok(self
            .conn
            .prepare_cached("SELECT language, max(script), count(*) FROM chunks GROUP BY language ORDER BY count(*) DESC, language")?
            .query_map([], |r| Ok((r.get::<_, Option<String>>(0)?, r.get::<_, Option<String>>(1)?, r.get::<_, i64>(2)? as u64)))?
            .map(|row| {
                row.map(|(code, script, chunks)| IndexLanguage {
                    name: code.as_deref().and_then(crate::language::english_name).map(String::from),
                    model_weight: crate::language::dense_weight(&model, code.as_deref(), script.as_deref().filter(|s| !s.is_empty())),
                    code,
                    chunks,
                })
            })
            .collect::<Result<_, _>>()?)
    }

    /// The share of English among the index's chunks whose language was told, 0 to 1 (1 for an
    /// index with none told, or that stores no languages): how likely a query too short to tell is
    /// English ([`crate::language::query_weight`]). Chunks whose language was not told (short,
    /// code, tables) do not count: in a translated manual they were a fifth of the chunks, and
    /// counted as English they made an Italian index look a third English. Reads every chunk's
    /// language: read it once per opened index, not per query.
    pub fn english_share(&self) -> Result<f64, StoreError> {
        let told: Vec<bool> = self.english_chunks()?.into_iter().filter_map(|(_, english)| english).collect();
        let english = told.iter().filter(|e| **e).count();
        Ok(if told.is_empty() { 1.0 } else { english as f64 / told.len() as f64 })
    }

    /// Every chunk's id and whether it is English, `None` where its language was not told (every
    /// chunk of an index that stores no languages).
    pub fn english_chunks(&self) -> Result<Vec<(i64, Option<bool>)>, StoreError> {
        let sql = if self.has_chunk_languages()? {
            "SELECT id, CASE WHEN language IS NULL THEN NULL WHEN language = 'eng' THEN 1 ELSE 0 END FROM chunks"
        } else {
            "SELECT id, NULL FROM chunks"
        };
        Ok(self.conn.prepare(sql)?.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?)
    }

    /// The weight of each of `ids`' nearest-vector place in hybrid search, by its language and
    /// the index's model ([`crate::language::dense_weight`]); 1 for a chunk not found.
    pub fn semantic_weights(&self, ids: &[i64]) -> Result<Vec<f64>, StoreError> {
        let model = self.model()?.map(|(name, _)| name).unwrap_or_default();
        if crate::language::is_multilingual(&model) || !self.has_chunk_languages()? {
            return Ok(vec![1.0; ids.len()]);
        }
        let mut read = self.conn.prepare_cached("SELECT language, script FROM chunks WHERE id = ?1")?;
        ids.iter()
            .map(|id| {
                let found: Option<(Option<String>, Option<String>)> =
                    read.query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
                Ok(found.map_or(1.0, |(language, script)| {
                    crate::language::dense_weight(&model, language.as_deref(), script.as_deref().filter(|s| !s.is_empty()))
                }))
            })
            .collect()
    }

    fn pages_have_ocr_column(&self) -> Result<bool, StoreError> {
        Ok(self.conn.query_row("SELECT count(*) FROM pragma_table_info('pages') WHERE name = 'ocr'", [], |r| r.get::<_, i64>(0))? > 0)
    }

    /// The pages (1-based) of the document at `path` whose text was read by OCR.
    pub fn ocr_pages(&self, path: &str) -> Result<Vec<u32>, StoreError> {
        // An index opened read-only may predate the column: none of its pages was OCR'd.
        if !self.pages_have_ocr_column()? {
            return Ok(Vec::new());
        }
        Ok(self
            .conn
            .prepare_cached(
                "SELECT page FROM pages WHERE document_id = (SELECT id FROM documents WHERE path = ?1) AND ocr = 1 ORDER BY page",
            )?
            .query_map(params![path], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    }

    pub(crate) fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.conn.query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| r.get(0)).optional()?)
    }

    /// The model the index was built with, and its dimension.
    pub fn model(&self) -> Result<Option<(String, usize)>, StoreError> {
        let model = self.meta("model")?;
        let dim = self.meta("dimension")?.and_then(|d| d.parse().ok());
        Ok(model.zip(dim))
    }

    /// Fails unless the index holds vectors of `model`; records it first if `claim` and the index
    /// has none yet.
    pub fn check_model(&self, model: &str, dim: usize, claim: bool) -> Result<(), StoreError> {
        match self.model()? {
            Some((found, found_dim)) if found != model || found_dim != dim => {
                Err(StoreError::ModelMismatch { path: self.path.clone(), found, found_dim, wanted: model.to_string(), wanted_dim: dim })
            }
            Some(_) => Ok(()),
            None if claim => {
                self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('model', ?1)", params![model])?;
                self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('dimension', ?1)", params![dim.to_string()])?;
                Ok(())
            }
            None => Ok(()),
        }
    }

    pub fn document_state(&self, path: &str) -> Result<Option<DocumentState>, StoreError> {
        Ok(self
            .conn
            .prepare_cached("SELECT content_hash, status, error FROM documents WHERE path = ?1")?
            .query_row(params![path], |r| Ok(DocumentState { content_hash: r.get(0)?, status: r.get(1)?, error: r.get(2)? }))
            .optional()?)
    }

    /// Which of `hashes` already have a stored embedding.
    pub fn embedded_hashes(&self, hashes: &[[u8; 32]]) -> Result<HashSet<[u8; 32]>, StoreError> {
        let mut stmt = self.conn.prepare_cached("SELECT 1 FROM embeddings WHERE text_hash = ?1")?;
        let mut found = HashSet::new();
        for hash in hashes {
            if stmt.exists(params![&hash[..]])? {
                found.insert(*hash);
            }
        }
        Ok(found)
    }

    /// Replaces everything stored for `record.path` with `record`, adding `new_embeddings`
    /// (text hash, vector), in one transaction. Embeddings no chunk uses any more are dropped.
    /// If a chunk of the record would be left without a vector (its text's vector was dropped
    /// after the caller looked), nothing is written and the missing texts are returned.
    pub fn commit_document(&mut self, record: &DocumentRecord, new_embeddings: &[([u8; 32], Vec<f32>)]) -> Result<Commit, StoreError> {
        Ok(self.commit_documents([(record, new_embeddings)])?.remove(0))
    }

    /// [`commit_document`](Self::commit_document) for several documents in one transaction, each
    /// inside its own savepoint: a document refused for a missing vector is rolled back alone and
    /// the others are kept. One transaction per group rather than per document is what lets the
    /// writer keep up with a GPU: every transaction pays its commit and adds a segment to the
    /// full-text index that later inserts must merge (measured by `examples/commit_cost.rs`).
    /// An error rolls back the whole group.
    pub fn commit_documents<'a>(
        &mut self,
        documents: impl IntoIterator<Item = (&'a DocumentRecord, &'a [([u8; 32], Vec<f32>)])>,
    ) -> Result<Vec<Commit>, StoreError> {
        let mut tx = self.write_transaction()?;
        let mut out = Vec::new();
        for (record, new_embeddings) in documents {
            let savepoint = tx.savepoint()?;
            let commit = write_document(&savepoint, record, new_embeddings)?;
            if matches!(commit, Commit::Done) {
                savepoint.commit()?;
            } // else the savepoint rolls back on drop
            out.push(commit);
        }
        tx.commit()?;
        Ok(out)
    }

    /// Every chunk text that has no stored vector, once per text.
    pub fn chunks_without_vectors(&self) -> Result<Vec<MissingVector>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT chunks.text_hash, min(chunks.text), count(*), min(documents.path)
             FROM chunks JOIN documents ON documents.id = chunks.document_id
             WHERE NOT EXISTS (SELECT 1 FROM embeddings WHERE embeddings.text_hash = chunks.text_hash)
             GROUP BY chunks.text_hash ORDER BY min(documents.path)",
        )?;
        let rows = stmt
            .query_map([], |r| {
                let hash: Vec<u8> = r.get(0)?;
                Ok((hash, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, String>(3)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows
            .into_iter()
            .filter_map(|(hash, text, chunks, example_path)| {
                Some(MissingVector { text_hash: hash.as_slice().try_into().ok()?, text, chunks: chunks as u64, example_path })
            })
            .collect())
    }

    /// Stores vectors for chunk texts (kept if one is already there), in one transaction.
    pub fn add_embeddings(&mut self, vectors: &[([u8; 32], Vec<f32>)]) -> Result<(), StoreError> {
        let tx = self.write_transaction()?;
        {
            let mut insert = tx.prepare_cached("INSERT OR IGNORE INTO embeddings(text_hash, vector) VALUES (?1, ?2)")?;
            for (hash, vector) in vectors {
                insert.execute(params![&hash[..], encode_vector(vector)])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Removes documents whose file no longer exists; returns their paths.
    pub fn prune_missing(&mut self) -> Result<Vec<String>, StoreError> {
        let paths: Vec<String> =
            self.conn.prepare("SELECT path FROM documents ORDER BY path")?.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        let mut removed = Vec::new();
        for path in paths {
            if !Path::new(&path).exists() && self.remove_document(&path)? {
                removed.push(path);
            }
        }
        Ok(removed)
    }

    /// Removes one document with its pages, chunks and the embeddings no other chunk uses; false
    /// if it was not in the index.
    pub fn remove_document(&mut self, path: &str) -> Result<bool, StoreError> {
        let tx = self.write_transaction()?;
        let Some(id): Option<i64> = tx.query_row("SELECT id FROM documents WHERE path = ?1", params![path], |r| r.get(0)).optional()?
        else {
            return Ok(false);
        };
        let hashes: Vec<Vec<u8>> = tx
            .prepare("SELECT DISTINCT text_hash FROM chunks WHERE document_id = ?1")?
            .query_map(params![id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        tx.execute("DELETE FROM chunks WHERE document_id = ?1", params![id])?;
        tx.execute("DELETE FROM pages WHERE document_id = ?1", params![id])?;
        tx.execute("DELETE FROM documents WHERE id = ?1", params![id])?;
        drop_unused_embeddings(&tx, &hashes)?;
        tx.commit()?;
        Ok(true)
    }

    /// Forgets documents for good: each one's pages, chunks, full-text rows, the vectors no other
    /// chunk uses and the summaries of its content no other document shares, then nothing of them
    /// left in the file. Deleted rows are zeroed (`secure_delete`, on for every connection), the full-text index merges its
    /// segments (FTS5 keeps a deleted row's words in older segments until they merge), and the
    /// write-ahead log is checkpointed and truncated, so a reader of index.db and its -wal finds no
    /// text of them. Returns the paths it held; a path it did not hold is skipped.
    pub fn forget_documents(&mut self, paths: &[String]) -> Result<Vec<String>, StoreError> {
        let mut forgotten = Vec::new();
        for path in paths {
            let content: Option<String> =
                self.conn.query_row("SELECT content_hash FROM documents WHERE path = ?1", params![path], |r| r.get(0)).optional()?;
            if !self.remove_document(path)? {
                continue;
            }
            if let Some(hash) = content {
                let shared: bool =
                    self.conn.query_row("SELECT EXISTS (SELECT 1 FROM documents WHERE content_hash = ?1)", params![hash], |r| r.get(0))?;
                if !shared && self.has_summaries()? {
                    self.conn.execute("DELETE FROM summaries WHERE content_hash = ?1", params![hash])?;
                }
            }
            forgotten.push(path.clone());
        }
        if !forgotten.is_empty() {
            self.conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')", [])?;
            self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        }
        Ok(forgotten)
    }

    /// A transaction that takes the write lock at its start (`BEGIN IMMEDIATE`), so a writer in
    /// another process (the desktop app and `warpfold serve` share an index) is waited for under
    /// the busy timeout. A deferred one that reads first and then writes is refused at once with
    /// "database is locked" when the other writer got in between, and the documents of that
    /// group would be lost to the run.
    fn write_transaction(&mut self) -> rusqlite::Result<Transaction<'_>> {
        self.conn.transaction_with_behavior(TransactionBehavior::Immediate)
    }

    /// Moves a document's entries to a new path (the file was renamed): nothing is extracted or
    /// embedded again. An entry already at `to` is replaced. False if `from` was not indexed.
    pub fn rename_document(&mut self, from: &str, to: &str) -> Result<bool, StoreError> {
        if from == to || self.document_state(from)?.is_none() {
            return Ok(false);
        }
        self.remove_document(to)?;
        let moved = self.conn.execute("UPDATE documents SET path = ?2 WHERE path = ?1", params![from, to])?;
        Ok(moved == 1)
    }

    /// Every document with its status, for a queue restored at start.
    pub fn documents(&self) -> Result<Vec<DocumentSummary>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT path, status, error, page_count, size, content_hash,
                    (SELECT count(*) FROM chunks WHERE chunks.document_id = documents.id)
             FROM documents ORDER BY path",
        )?;
        let rows = stmt.query_map([], DocumentSummary::from_row)?.collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// An indexed document's content hash and whole text (its pages joined by blank lines).
    pub fn document_text(&self, path: &str) -> Result<Option<(String, String)>, StoreError> {
        let Some(state) = self.document_state(path)? else { return Ok(None) };
        if state.status != "indexed" {
            return Ok(None);
        }
        let pages: Vec<String> = self
            .conn
            .prepare_cached("SELECT text FROM pages WHERE document_id = (SELECT id FROM documents WHERE path = ?1) ORDER BY page")?
            .query_map(params![path], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(Some((state.content_hash, pages.join("\n\n"))))
    }

    /// One document with all its chunks, for a detail view.
    pub fn document_detail(&self, path: &str) -> Result<Option<DocumentDetail>, StoreError> {
        let summary = self
            .conn
            .prepare_cached(
                "SELECT path, status, error, page_count, size, content_hash,
                        (SELECT count(*) FROM chunks WHERE chunks.document_id = documents.id)
                 FROM documents WHERE path = ?1",
            )?
            .query_row(params![path], DocumentSummary::from_row)
            .optional()?;
        let Some(summary) = summary else { return Ok(None) };
        let chunks = self
            .conn
            .prepare_cached(
                "SELECT ordinal, page_start, page_end, text FROM chunks
                 WHERE document_id = (SELECT id FROM documents WHERE path = ?1) ORDER BY ordinal",
            )?
            .query_map(params![path], |r| {
                Ok(ChunkView { ordinal: r.get(0)?, page_start: r.get(1)?, page_end: r.get(2)?, text: r.get(3)? })
            })?
            .collect::<Result<_, _>>()?;
        let ocr_pages = self.ocr_pages(path)?;
        Ok(Some(DocumentDetail { document: summary, chunks, ocr_pages }))
    }

    /// Every chunk id with its embedding, for the vector half of search, by text hash and then row
    /// order: equal cosines (chunks of equal text) rank in row order, which a merge of shards
    /// writes shard after shard, so shards searched together rank them as their merge does.
    pub fn load_vectors(&self) -> Result<(Vec<i64>, Vec<f32>, usize), StoreError> {
        let dim = self.model()?.map(|(_, d)| d).unwrap_or(0);
        let mut ids = Vec::new();
        let mut flat = Vec::new();
        let mut stmt = self.conn.prepare(VECTORS_IN_ORDER)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let bytes = row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
            if bytes.len() != dim * 4 {
                continue;
            }
            ids.push(row.get(0)?);
            flat.extend(decode_vector(bytes));
        }
        Ok((ids, flat, dim))
    }

    pub fn chunk(&self, id: i64) -> Result<Option<StoredChunk>, StoreError> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT chunks.id, documents.path, chunks.text, chunks.page_start, chunks.page_breaks,
                        chunks.char_start, chunks.char_end
                 FROM chunks JOIN documents ON documents.id = chunks.document_id WHERE chunks.id = ?1",
            )?
            .query_row(params![id], |r| {
                Ok(StoredChunk {
                    id: r.get(0)?,
                    path: r.get(1)?,
                    text: r.get(2)?,
                    page_start: r.get(3)?,
                    page_breaks: decode_breaks(&r.get::<_, String>(4)?),
                    char_start: r.get::<_, i64>(5)? as usize,
                    char_end: r.get::<_, i64>(6)? as usize,
                })
            })
            .optional()?)
    }

    /// Row counts: documents by status, chunks, distinct embeddings.
    pub fn counts(&self) -> Result<StoreCounts, StoreError> {
        let count = |sql: &str| -> Result<u64, StoreError> { Ok(self.conn.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64) };
        Ok(StoreCounts {
            documents: count("SELECT count(*) FROM documents")?,
            indexed: count("SELECT count(*) FROM documents WHERE status = 'indexed'")?,
            chunks: count("SELECT count(*) FROM chunks")?,
            embeddings: count("SELECT count(*) FROM embeddings")?,
        })
    }

    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The index file's path as given when it was opened.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// By text hash, then row order: the order of the `chunks_by_hash` index, so no sort.
const VECTORS_IN_ORDER: &str = "SELECT chunks.id, embeddings.vector FROM chunks JOIN embeddings ON embeddings.text_hash = chunks.text_hash
     ORDER BY chunks.text_hash, chunks.id";

/// A path as the `file:` URI SQLite expects: `%`, `?` and `#` escaped.
pub(crate) fn uri_path(path: &Path) -> String {
    path.display().to_string().replace('%', "%25").replace('?', "%3f").replace('#', "%23")
}

/// A document's row: what a queue or a list shows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DocumentSummary {
    pub path: String,
    /// `indexed`, `no_text` or `failed`.
    pub status: String,
    pub error: Option<String>,
    pub pages: u32,
    pub size: u64,
    pub content_hash: String,
    /// How many chunks it has (named apart from a detail's list of chunks).
    #[serde(rename = "chunk_count")]
    pub chunks: u64,
}

impl DocumentSummary {
    fn from_row(r: &rusqlite::Row) -> rusqlite::Result<DocumentSummary> {
        Ok(DocumentSummary {
            path: r.get(0)?,
            status: r.get(1)?,
            error: r.get(2)?,
            pages: r.get(3)?,
            size: r.get::<_, i64>(4)? as u64,
            content_hash: r.get(5)?,
            chunks: r.get::<_, i64>(6)? as u64,
        })
    }
}

/// One chunk as a detail view lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChunkView {
    pub ordinal: u32,
    pub page_start: u32,
    pub page_end: u32,
    pub text: String,
}

/// A document and its chunks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DocumentDetail {
    #[serde(flatten)]
    pub document: DocumentSummary,
    pub chunks: Vec<ChunkView>,
    /// The pages (1-based) whose text was read by OCR from their image.
    pub ocr_pages: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StoreCounts {
    pub documents: u64,
    pub indexed: u64,
    pub chunks: u64,
    pub embeddings: u64,
}

/// Writes one document (see [`Store::commit_document`]) inside the caller's transaction or
/// savepoint, which it does not commit; `MissingVectors` means the caller must roll it back.
fn write_document(conn: &Connection, record: &DocumentRecord, new_embeddings: &[([u8; 32], Vec<f32>)]) -> Result<Commit, StoreError> {
    let old_id: Option<i64> = conn.query_row("SELECT id FROM documents WHERE path = ?1", params![record.path], |r| r.get(0)).optional()?;
    let mut old_hashes: Vec<Vec<u8>> = Vec::new();
    if let Some(id) = old_id {
        old_hashes = conn
            .prepare_cached("SELECT DISTINCT text_hash FROM chunks WHERE document_id = ?1")?
            .query_map(params![id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        conn.execute("DELETE FROM chunks WHERE document_id = ?1", params![id])?;
        conn.execute("DELETE FROM pages WHERE document_id = ?1", params![id])?;
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let id: i64 = conn.query_row(
        "INSERT INTO documents(path, content_hash, size, mtime, status, error, page_count, indexed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT(path) DO UPDATE SET content_hash = excluded.content_hash, size = excluded.size,
             mtime = excluded.mtime, status = excluded.status, error = excluded.error,
             page_count = excluded.page_count, indexed_at = excluded.indexed_at
         RETURNING id",
        params![
            record.path,
            record.content_hash,
            record.size as i64,
            record.mtime,
            record.status,
            record.error,
            record.pages.len() as i64,
            now
        ],
        |r| r.get(0),
    )?;
    {
        let mut insert_page = conn.prepare_cached("INSERT INTO pages(document_id, page, text, ocr) VALUES (?1, ?2, ?3, ?4)")?;
        for (i, page) in record.pages.iter().enumerate() {
            let number = i as u32 + 1;
            insert_page.execute(params![id, number, page, record.ocr_pages.contains(&number)])?;
        }
        let mut insert_embedding = conn.prepare_cached("INSERT OR IGNORE INTO embeddings(text_hash, vector) VALUES (?1, ?2)")?;
        for (hash, vector) in new_embeddings {
            insert_embedding.execute(params![&hash[..], encode_vector(vector)])?;
        }
        let mut insert_chunk = conn.prepare_cached(
            "INSERT INTO chunks(document_id, ordinal, text, text_hash, page_start, page_end, page_breaks,
                                char_start, char_end, tokens, language, script)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )?;
        for c in &record.chunks {
            let detected = crate::language::detect(&c.text);
            insert_chunk.execute(params![
                id,
                c.ordinal as i64,
                c.text,
                &c.text_hash[..],
                c.page_start,
                c.page_end,
                encode_breaks(&c.page_breaks),
                c.char_start as i64,
                c.char_end as i64,
                c.ids.len() as i64,
                detected.language,
                detected.script.map_or(String::new(), |s| s.name().to_string())
            ])?;
        }
    }
    drop_unused_embeddings(conn, &old_hashes)?;
    let missing: Vec<[u8; 32]> = conn
        .prepare_cached(
            "SELECT DISTINCT text_hash FROM chunks WHERE document_id = ?1
             AND NOT EXISTS (SELECT 1 FROM embeddings WHERE embeddings.text_hash = chunks.text_hash)",
        )?
        .query_map(params![id], |r| r.get::<_, Vec<u8>>(0))?
        .filter_map(|h| h.map(|h| <[u8; 32]>::try_from(h.as_slice()).ok()).transpose())
        .collect::<Result<_, _>>()?;
    if !missing.is_empty() {
        return Ok(Commit::MissingVectors(missing));
    }
    Ok(Commit::Done)
}

fn drop_unused_embeddings(conn: &Connection, hashes: &[Vec<u8>]) -> Result<(), StoreError> {
    let mut stmt =
        conn.prepare_cached("DELETE FROM embeddings WHERE text_hash = ?1 AND NOT EXISTS (SELECT 1 FROM chunks WHERE text_hash = ?1)")?;
    for hash in hashes {
        stmt.execute(params![hash])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(ordinal: usize, text: &str) -> DocumentChunk {
        DocumentChunk {
            ordinal,
            text: text.into(),
            text_hash: crate::chunk::text_hash(text),
            ids: vec![101, 7, 102],
            page_start: 1,
            page_end: 1,
            page_breaks: vec![],
            char_start: 0,
            char_end: text.chars().count(),
        }
    }

    fn record(path: &str, hash: &str, chunks: Vec<DocumentChunk>) -> DocumentRecord {
        DocumentRecord {
            path: path.into(),
            content_hash: hash.into(),
            size: 10,
            mtime: 0,
            status: "indexed",
            error: None,
            pages: vec!["p".into()],
            ocr_pages: Vec::new(),
            chunks,
        }
    }

    #[test]
    fn replacing_a_document_keeps_shared_embeddings_and_drops_orphans() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 2).unwrap();
        let (a, b, c) = (chunk(0, "alpha words"), chunk(1, "beta words"), chunk(0, "gamma words"));
        store
            .commit_document(
                &record("/x", "h1", vec![a.clone(), b.clone()]),
                &[(a.text_hash, vec![1.0, 0.0]), (b.text_hash, vec![0.0, 1.0])],
            )
            .unwrap();
        store.commit_document(&record("/y", "h2", vec![chunk(0, "alpha words")]), &[]).unwrap();
        assert_eq!(store.counts().unwrap(), StoreCounts { documents: 2, indexed: 2, chunks: 3, embeddings: 2 });
        // /x now holds only gamma: beta's vector has no user left, alpha's is still used by /y.
        store.commit_document(&record("/x", "h3", vec![c.clone()]), &[(c.text_hash, vec![0.5, 0.5])]).unwrap();
        assert_eq!(store.counts().unwrap(), StoreCounts { documents: 2, indexed: 2, chunks: 2, embeddings: 2 });
        let have = store.embedded_hashes(&[a.text_hash, b.text_hash, c.text_hash]).unwrap();
        assert!(have.contains(&a.text_hash) && have.contains(&c.text_hash) && !have.contains(&b.text_hash));
        assert_eq!(store.keyword_search("gamma", 10).unwrap().len(), 1);
        assert_eq!(store.keyword_search("beta", 10).unwrap().len(), 0, "FTS rows follow deletions");
        assert_eq!(store.keyword_search("words", 10).unwrap().len(), 2);
        // Chunks with every word come before chunks with some, whatever BM25 says of the rest.
        let both = store.keyword_search("words gamma", 10).unwrap();
        assert_eq!(both.len(), 2);
        assert_eq!(store.chunk(both[0]).unwrap().unwrap().text, "gamma words");
        assert_eq!(store.phrase_search("gamma words", 10).unwrap(), vec![both[0]]);
        assert!(store.phrase_search("words gamma", 10).unwrap().is_empty(), "a phrase keeps its order");
    }

    /// The desktop app and `warpfold serve` write one index. A commit that meets the other's write
    /// in progress waits for it (under the busy timeout) and then goes in; it is not refused.
    #[test]
    fn a_commit_waits_for_another_connections_write_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.db");
        let mut store = Store::open(&path, "m", 2).unwrap();
        let a = chunk(0, "alpha words");
        store.commit_document(&record("/a", "h1", vec![a.clone()]), &[(a.text_hash, vec![1.0, 0.0])]).unwrap();
        let other = Store::open_existing(&path).unwrap();
        let (started, writing) = std::sync::mpsc::channel();
        let holder = std::thread::spawn(move || {
            let conn = other.connection();
            conn.execute_batch("BEGIN IMMEDIATE; UPDATE documents SET mtime = mtime + 1;").unwrap();
            started.send(()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(500));
            conn.execute_batch("COMMIT").unwrap();
        });
        writing.recv().unwrap();
        let b = chunk(0, "beta words");
        let committed = store.commit_document(&record("/b", "h2", vec![b.clone()]), &[(b.text_hash, vec![0.0, 1.0])]);
        holder.join().unwrap();
        assert_eq!(committed.unwrap(), Commit::Done);
        assert_eq!(store.counts().unwrap().documents, 2);
        assert!(store.remove_document("/a").unwrap());
    }

    #[test]
    fn an_index_refuses_another_model() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.db");
        drop(Store::open(&path, "model-a", 384).unwrap());
        let err = Store::open(&path, "model-b", 768).err().expect("must refuse");
        assert!(err.to_string().contains("model-a"), "{err}");
        assert!(Store::open(&path, "model-a", 384).is_ok());
    }

    #[test]
    fn prune_removes_documents_whose_file_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("kept.txt");
        std::fs::write(&kept, "x").unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 2).unwrap();
        let gone = dir.path().join("gone.txt").display().to_string();
        let only_gone = chunk(0, "only in the gone file");
        store.commit_document(&record(&gone, "h", vec![only_gone.clone()]), &[(only_gone.text_hash, vec![1.0, 1.0])]).unwrap();
        let kept_chunk = chunk(0, "kept text");
        store
            .commit_document(&record(&kept.display().to_string(), "k", vec![kept_chunk.clone()]), &[(kept_chunk.text_hash, vec![0.0, 1.0])])
            .unwrap();
        assert_eq!(store.prune_missing().unwrap(), vec![gone]);
        assert_eq!(store.counts().unwrap(), StoreCounts { documents: 1, indexed: 1, chunks: 1, embeddings: 1 });
    }

    /// A forgotten document leaves no byte of its text in the index file or its log: not in the
    /// chunks, the pages, the full-text index (words and stems), the vectors or the summaries.
    #[test]
    fn a_forgotten_document_leaves_no_text_in_the_index_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("i.db");
        let mut store = Store::open(&db, "m", 2).unwrap();
        let secret = "Quokkazygote marmaladeprotocol, account 77341-SECRET";
        let mut forgotten = record("/docs/secret.txt", "secret-hash", vec![chunk(0, secret), chunk(1, "a shared passage about tides")]);
        forgotten.pages = vec![format!("page text: {secret}")];
        let vectors: Vec<([u8; 32], Vec<f32>)> = forgotten.chunks.iter().map(|c| (c.text_hash, vec![0.25, 0.75])).collect();
        store.commit_document(&forgotten, &vectors).unwrap();
        let kept = chunk(0, "a shared passage about tides");
        store.commit_document(&record("/docs/kept.txt", "kept-hash", vec![kept.clone()]), &[(kept.text_hash, vec![0.25, 0.75])]).unwrap();
        store
            .put_summary(&crate::summaries::StoredSummary {
                content_hash: "secret-hash".into(),
                model: "chat".into(),
                path: "/docs/secret.txt".into(),
                summary: format!("It says {secret}."),
                tokens_in: 1,
                tokens_out: 1,
                seconds: 0.0,
                created_at: 0,
                check: None,
            })
            .unwrap();
        // Searched for, found.
        assert!(!store.keyword_search("quokkazygote", 5).unwrap().is_empty());

        let gone = store.forget_documents(&["/docs/secret.txt".into(), "/docs/never-indexed.txt".into()]).unwrap();
        assert_eq!(gone, ["/docs/secret.txt"]);
        assert!(store.keyword_search("quokkazygote", 5).unwrap().is_empty());
        assert_eq!(store.summary("secret-hash", "chat").unwrap(), None);
        assert_eq!(
            store.counts().unwrap(),
            StoreCounts { documents: 1, indexed: 1, chunks: 1, embeddings: 1 },
            "the shared passage's vector stays"
        );
        assert_eq!(store.keyword_search("tides", 5).unwrap().len(), 1);
        // Nothing of it in the bytes of the file or of its log, in any case.
        drop(store);
        let mut bytes = std::fs::read(&db).unwrap();
        bytes.extend(std::fs::read(dir.path().join("i.db-wal")).unwrap_or_default());
        let lower = String::from_utf8_lossy(&bytes).to_lowercase();
        for word in ["quokkazygote", "marmaladeprotocol", "77341", "secret.txt"] {
            assert!(!lower.contains(word), "{word:?} is still in the index file");
        }
    }

    /// A document re-indexed (its file changed) and then forgotten leaves no text of either
    /// version: the rows the re-indexing replaced are zeroed when they are deleted, not left on
    /// the file's free pages for the forget to miss.
    #[test]
    fn a_document_reindexed_then_forgotten_leaves_no_text_of_its_earlier_version() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("i.db");
        let mut store = Store::open(&db, "m", 2).unwrap();
        let commit = |store: &mut Store, hash: &str, text: &str| {
            // Enough chunks that the replaced rows fill whole pages of their own.
            let chunks: Vec<DocumentChunk> = (0..40).map(|i| chunk(i, &format!("{text} paragraph {i} {}", "filler ".repeat(60)))).collect();
            let mut record = record("/docs/lettre.txt", hash, chunks);
            record.pages = vec![format!("page: {text}")];
            let vectors: Vec<([u8; 32], Vec<f32>)> = record.chunks.iter().map(|c| (c.text_hash, vec![0.5, 0.5])).collect();
            store.commit_document(&record, &vectors).unwrap();
        };
        commit(&mut store, "v1", "Zanzibarquill locativesfirst régularisation");
        commit(&mut store, "v2", "Xylophonequest the second version");
        store.forget_documents(&["/docs/lettre.txt".into()]).unwrap();
        drop(store);
        let mut bytes = std::fs::read(&db).unwrap();
        bytes.extend(std::fs::read(dir.path().join("i.db-wal")).unwrap_or_default());
        let lower = String::from_utf8_lossy(&bytes).to_lowercase();
        for word in ["zanzibarquill", "locativesfirst", "xylophonequest"] {
            assert!(!lower.contains(word), "{word:?} is still in the index file");
        }
    }

    #[test]
    fn rename_moves_entries_and_remove_drops_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 2).unwrap();
        let a = chunk(0, "renamed words");
        let (more, other) = (chunk(1, "more"), chunk(0, "other"));
        store
            .commit_document(
                &record("/old.pdf", "h", vec![a.clone(), more.clone()]),
                &[(a.text_hash, vec![1.0, 0.0]), (more.text_hash, vec![0.5, 0.5])],
            )
            .unwrap();
        store.commit_document(&record("/other.pdf", "o", vec![other.clone()]), &[(other.text_hash, vec![0.0, 1.0])]).unwrap();
        assert!(store.rename_document("/old.pdf", "/new.pdf").unwrap());
        assert!(!store.rename_document("/missing.pdf", "/x.pdf").unwrap());
        assert!(store.document_state("/old.pdf").unwrap().is_none());
        let detail = store.document_detail("/new.pdf").unwrap().expect("moved");
        assert_eq!((detail.document.chunks, detail.chunks.len(), detail.chunks[0].text.as_str()), (2, 2, "renamed words"));
        let hit = store.keyword_search("renamed", 5).unwrap();
        assert_eq!(store.chunk(hit[0]).unwrap().unwrap().path, "/new.pdf", "search follows the rename");
        assert_eq!(store.embedded_hashes(&[a.text_hash]).unwrap().len(), 1, "the vector stays");
        let listed: Vec<String> = store.documents().unwrap().into_iter().map(|d| d.path).collect();
        assert_eq!(listed, ["/new.pdf", "/other.pdf"]);
        assert!(store.remove_document("/new.pdf").unwrap());
        assert!(!store.remove_document("/new.pdf").unwrap());
        assert_eq!(store.counts().unwrap(), StoreCounts { documents: 1, indexed: 1, chunks: 1, embeddings: 1 });
        assert!(store.keyword_search("renamed", 5).unwrap().is_empty());
    }

    #[test]
    fn a_chunk_is_never_committed_without_its_vector() {
        // A run reads y (its text "shared words" already has a vector, so none is asked for) while
        // x, which held that text, is edited and committed first and takes the vector with it.
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 2).unwrap();
        let (shared, other) = (chunk(0, "shared words"), chunk(0, "other words"));
        assert_eq!(
            store.commit_document(&record("/x", "h1", vec![shared.clone()]), &[(shared.text_hash, vec![1.0, 0.0])]).unwrap(),
            Commit::Done
        );
        assert!(store.embedded_hashes(&[shared.text_hash]).unwrap().contains(&shared.text_hash), "y's submitter sees the vector");
        store.commit_document(&record("/x", "h2", vec![other.clone()]), &[(other.text_hash, vec![0.0, 1.0])]).unwrap();
        let y = record("/y", "h3", vec![shared.clone()]);
        assert_eq!(store.commit_document(&y, &[]).unwrap(), Commit::MissingVectors(vec![shared.text_hash]));
        assert!(store.document_state("/y").unwrap().is_none(), "nothing of y was written");
        assert_eq!(store.commit_document(&y, &[(shared.text_hash, vec![1.0, 0.0])]).unwrap(), Commit::Done);
        assert!(store.chunks_without_vectors().unwrap().is_empty());
        assert_eq!(store.load_vectors().unwrap().0.len(), 2, "both chunks are searchable by meaning");
    }

    /// Documents committed as a group: one refused for a missing vector is rolled back alone, the
    /// others (before and after it, one of them replacing the document that held its text) stay.
    #[test]
    fn a_group_commit_rolls_back_only_the_document_missing_a_vector() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 2).unwrap();
        let (shared, other, third) = (chunk(0, "shared words"), chunk(0, "other words"), chunk(0, "third words"));
        store.commit_document(&record("/x", "h1", vec![shared.clone()]), &[(shared.text_hash, vec![1.0, 0.0])]).unwrap();
        // In one group: x edited (its old text's vector goes), y counting on that vector, z new.
        let x = record("/x", "h2", vec![other.clone()]);
        let y = record("/y", "h3", vec![shared.clone()]);
        let z = record("/z", "h4", vec![third.clone()]);
        let (xv, zv) = (vec![(other.text_hash, vec![0.0, 1.0])], vec![(third.text_hash, vec![0.5, 0.5])]);
        let commits = store.commit_documents([(&x, xv.as_slice()), (&y, &[][..]), (&z, zv.as_slice())]).unwrap();
        assert_eq!(commits, [Commit::Done, Commit::MissingVectors(vec![shared.text_hash]), Commit::Done]);
        assert_eq!(store.document_state("/x").unwrap().unwrap().content_hash, "h2");
        assert!(store.document_state("/y").unwrap().is_none(), "nothing of y was written");
        assert_eq!(store.document_state("/z").unwrap().unwrap().content_hash, "h4");
        assert!(store.chunks_without_vectors().unwrap().is_empty());
        assert_eq!(store.counts().unwrap().chunks, 2);
    }

    #[test]
    fn the_check_finds_chunks_without_vectors_and_sqlite_errors_say_their_text_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.db");
        let mut store = Store::open(&path, "m", 2).unwrap();
        let (a, b) = (chunk(0, "first text"), chunk(1, "second text"));
        store
            .commit_document(
                &record("/x", "h", vec![a.clone(), b.clone()]),
                &[(a.text_hash, vec![1.0, 0.0]), (b.text_hash, vec![0.0, 1.0])],
            )
            .unwrap();
        store.connection().execute("DELETE FROM embeddings WHERE text_hash = ?1", params![&b.text_hash[..]]).unwrap();
        let missing = store.chunks_without_vectors().unwrap();
        assert_eq!(
            missing,
            vec![MissingVector { text_hash: b.text_hash, text: "second text".into(), chunks: 1, example_path: "/x".into() }]
        );
        store.add_embeddings(&[(b.text_hash, vec![0.0, 1.0])]).unwrap();
        assert!(store.chunks_without_vectors().unwrap().is_empty());

        let garbage = dir.path().join("garbage.db");
        std::fs::write(&garbage, vec![7u8; 8192]).unwrap();
        let err = Store::open_read_only(&garbage).err().expect("not a database");
        let chain = format!("{:#}", anyhow_like(&err));
        assert_eq!(chain.matches("not a database").count(), 1, "{chain}");
    }

    /// The error with its sources, as `anyhow`'s `{:#}` prints it.
    fn anyhow_like(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            text.push_str(&format!(": {s}"));
            source = s.source();
        }
        text
    }

    #[test]
    fn a_read_only_index_can_be_searched() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("ro");
        std::fs::create_dir(&folder).unwrap();
        let path = folder.join("i.db");
        {
            let mut store = Store::open(&path, "m", 2).unwrap();
            let a = chunk(0, "lighthouse keepers");
            store.commit_document(&record("/x", "h", vec![a.clone()]), &[(a.text_hash, vec![1.0, 0.0])]).unwrap();
        }
        // A folder its user may not write (the integration tests also run `warpfold search` as an
        // unprivileged user on such a folder, where even SQLite's -shm file cannot be created).
        let mut perms = std::fs::metadata(&folder).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o555);
        std::fs::set_permissions(&folder, perms).unwrap();
        let store = Store::open_read_only(&path).expect("a read-only index opens for reading");
        assert_eq!(store.keyword_search("lighthouse", 5).unwrap().len(), 1);
        assert!(store.connection().execute("DELETE FROM chunks", []).is_err(), "and cannot be written through");
        let mut perms = std::fs::metadata(&folder).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&folder, perms).unwrap();
    }

    /// Equal BM25 scores rank by path and chunk order however the rows were written, also when the
    /// run of equal scores crosses the cut (which rows make it must not depend on row order).
    #[test]
    fn equal_keyword_scores_rank_by_path_and_chunk_order_across_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 2).unwrap();
        let best = chunk(0, "lantern lantern lantern");
        store.commit_document(&record("/m/best", "b", vec![best.clone()]), &[(best.text_hash, vec![1.0, 0.0])]).unwrap();
        // Ten equal chunks, written in reverse path order, two chunks each.
        for i in (0..10).rev() {
            let (a, b) = (chunk(0, &format!("lantern tower {i}")), chunk(1, &format!("lantern tower {}", i + 10)));
            let vectors = [(a.text_hash, vec![0.0, 1.0]), (b.text_hash, vec![0.5, 0.5])];
            store.commit_document(&record(&format!("/m/d{i}"), "h", vec![a, b]), &vectors).unwrap();
        }
        let ids = store.keyword_search("lantern", 5).unwrap();
        let places: Vec<(String, String)> = ids
            .iter()
            .map(|id| {
                let c = store.chunk(*id).unwrap().unwrap();
                (c.path, c.text)
            })
            .collect();
        let expected = [
            ("/m/best", "lantern lantern lantern"),
            ("/m/d0", "lantern tower 0"),
            ("/m/d0", "lantern tower 10"),
            ("/m/d1", "lantern tower 1"),
            ("/m/d1", "lantern tower 11"),
        ];
        assert_eq!(places, expected.map(|(p, t)| (p.to_string(), t.to_string())));
    }
}
