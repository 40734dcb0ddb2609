//! `warpfold merge`: shard indexes (see [`crate::shard`]) into one index.
//!
//! What the merged index holds: every document of every shard once (a path found in several
//! shards, say after overlapping runs, is taken from the copy indexed last, ties going to the
//! shard named first: [`winners`], which `warpfold search --db A --db B` applies too), its pages
//! and chunks, one embedding per chunk text (the first shard's vector of that text), the
//! summaries (the newest per content hash and model), and a full-text index rebuilt over the
//! merged chunks rather than copied, since BM25 statistics are the whole index's.
//!
//! Why it is safe to run anywhere: the shards are only read; the output is written to a temporary
//! file beside `OUT` (each shard copied in one transaction) and renamed over `OUT` only once it is
//! complete, so a merge killed half-way leaves no index that looks whole. An existing `OUT` is
//! refused unless `force`. Shards built with another model (name or dimension), files that are
//! not warpfold indexes, a mix of shard counts, and (unless `partial`) missing shards are refused
//! before anything is written, each error naming the file.
//!
//! Chunk rows are inserted shard by shard, in each shard's own row order, so equal cosines (equal
//! texts) rank in the merged index as in a search over the shards (see [`crate::shard_search`]).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::params;
use serde::Serialize;

use crate::shard::Shard;
use crate::store::{uri_path, Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge: name at least one shard index")]
    NoShards,
    #[error("{0} already exists; choose a new output or pass --force to replace it")]
    Exists(String),
    #[error("the output {0} is also one of the shards")]
    OutputIsShard(String),
    #[error("shard {shard} was built with the model {found} ({found_dim} dimensions), but {first} with {expected} ({expected_dim}); their vectors cannot be compared: index every shard with the same --model")]
    ModelMismatch { shard: String, found: String, found_dim: usize, first: String, expected: String, expected_dim: usize },
    #[error("shard {0} holds documents but records no embedding model; it is not a complete warpfold index")]
    NoModel(String),
    #[error("the shards were split different ways: {first} is shard {first_shard}, {shard} is shard {other_shard}")]
    MixedShardCounts { first: String, first_shard: Shard, shard: String, other_shard: Shard },
    #[error("shard(s) {missing} of {count} are missing (have: {have}); merge them all, or pass --partial to merge what is here")]
    MissingShards { missing: String, count: u32, have: String },
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("shard {path}: {source}")]
    Shard { path: String, source: StoreError },
    #[error("writing {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

impl From<rusqlite::Error> for MergeError {
    fn from(e: rusqlite::Error) -> Self {
        MergeError::Store(StoreError::from(e))
    }
}

#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// Replace an existing output.
    pub force: bool,
    /// Merge even if some shards of a split are not among the inputs.
    pub partial: bool,
}

/// One input as `warpfold merge --json` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct MergedShard {
    pub path: String,
    /// Which shard it recorded (`I/N`), if it was built by a sharded run.
    pub shard: Option<String>,
    pub documents: u64,
    /// Of its documents, those taken into the merged index (the others had a newer copy elsewhere).
    pub documents_taken: u64,
}

/// What `warpfold merge --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct MergeReport {
    pub output: String,
    pub model: String,
    pub dimension: usize,
    pub shards: Vec<MergedShard>,
    pub documents: u64,
    pub indexed: u64,
    pub chunks: u64,
    pub embeddings: u64,
    /// Paths found in more than one shard (each kept once).
    pub duplicate_documents: u64,
    pub summaries: u64,
    pub seconds: f64,
}

/// Opens a shard for reading; an error says which file it is about.
pub fn open_shard(path: &Path) -> Result<Store, MergeError> {
    Store::open_read_only(path).map_err(|e| {
        let display = path.display().to_string();
        if e.to_string().contains(&display) {
            MergeError::Store(e)
        } else {
            MergeError::Shard { path: display, source: e }
        }
    })
}

/// For every path in the shards, the position (in `shards`) of the copy to keep: the one indexed
/// last, ties to the shard named first.
pub fn winners(shards: &[Store]) -> Result<HashMap<String, usize>, StoreError> {
    let mut best: HashMap<String, (usize, i64)> = HashMap::new();
    for (position, store) in shards.iter().enumerate() {
        let mut stmt = store.connection().prepare("SELECT path, indexed_at FROM documents ORDER BY id")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        for row in rows {
            let (path, indexed_at) = row?;
            match best.get_mut(&path) {
                Some(kept) if indexed_at > kept.1 => *kept = (position, indexed_at),
                Some(_) => {}
                None => {
                    best.insert(path, (position, indexed_at));
                }
            }
        }
    }
    Ok(best.into_iter().map(|(path, (position, _))| (path, position)).collect())
}

/// The model every shard was built with, or the error naming the first shard that differs.
pub fn common_model(shards: &[Store]) -> Result<Option<(String, usize)>, MergeError> {
    let mut first: Option<(String, usize, String)> = None;
    for store in shards {
        match store.model()? {
            Some((model, dim)) => {
                let Some((expected, expected_dim, first_path)) = first.clone() else {
                    first = Some((model, dim, store.path().to_string()));
                    continue;
                };
                if expected != model || expected_dim != dim {
                    return Err(MergeError::ModelMismatch {
                        shard: store.path().to_string(),
                        found: model,
                        found_dim: dim,
                        first: first_path,
                        expected,
                        expected_dim,
                    });
                }
            }
            None if store.counts()?.documents > 0 => return Err(MergeError::NoModel(store.path().to_string())),
            None => {}
        }
    }
    Ok(first.map(|(model, dim, _)| (model, dim)))
}

/// Checks that the shards' recorded splits agree and that none is missing (unless `partial`).
fn check_split(shards: &[Store], partial: bool) -> Result<(), MergeError> {
    let mut first: Option<(Shard, String)> = None;
    let mut have = BTreeSet::new();
    for store in shards {
        let Some(shard) = store.shard()? else { continue };
        have.insert(shard.index);
        let Some((f, path)) = first.clone() else {
            first = Some((shard, store.path().to_string()));
            continue;
        };
        if f.count != shard.count {
            return Err(MergeError::MixedShardCounts { first: path, first_shard: f, shard: store.path().to_string(), other_shard: shard });
        }
    }
    let Some((f, _)) = first else { return Ok(()) };
    let missing: Vec<String> = (0..f.count).filter(|i| !have.contains(i)).map(|i| i.to_string()).collect();
    if !missing.is_empty() && !partial {
        let have = have.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
        return Err(MergeError::MissingShards { missing: missing.join(", "), count: f.count, have });
    }
    Ok(())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Removes a database file with its WAL and shared-memory files, if there.
fn remove_database(path: &Path) -> Result<(), MergeError> {
    remove_with_suffixes(path, &["", "-wal", "-shm", "-journal"])
}

/// Removes `path` with each suffix appended (those that exist).
fn remove_with_suffixes(path: &Path, suffixes: &[&str]) -> Result<(), MergeError> {
    for suffix in suffixes {
        let file = PathBuf::from(format!("{}{suffix}", path.display()));
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(MergeError::Io { path: file.display().to_string(), source }),
        }
    }
    Ok(())
}

/// Merges the shard indexes `shards` into a new index at `out` (see the module docs).
pub fn merge_indexes(out: &Path, shards: &[PathBuf], options: &MergeOptions) -> Result<MergeReport, MergeError> {
    let started = Instant::now();
    if shards.is_empty() {
        return Err(MergeError::NoShards);
    }
    let out_text = out.display().to_string();
    if let Some(shard) = shards.iter().find(|s| same_file(s, out)) {
        return Err(MergeError::OutputIsShard(shard.display().to_string()));
    }
    if out.exists() && !options.force {
        return Err(MergeError::Exists(out_text));
    }
    let stores = shards.iter().map(|s| open_shard(s)).collect::<Result<Vec<_>, _>>()?;
    let Some((model, dim)) = common_model(&stores)? else {
        // No shard has been indexed into yet: there is no model to record.
        return Err(MergeError::NoModel(shards[0].display().to_string()));
    };
    check_split(&stores, options.partial)?;
    let keep = winners(&stores)?;
    let mut taken = vec![0u64; stores.len()];
    for position in keep.values() {
        taken[*position] += 1;
    }
    let mut merged_shards = Vec::new();
    let mut documents_seen = 0u64;
    for (store, taken) in stores.iter().zip(&taken) {
        let documents = store.counts()?.documents;
        documents_seen += documents;
        merged_shards.push(MergedShard {
            path: store.path().to_string(),
            shard: store.shard()?.map(|s| s.to_string()),
            documents,
            documents_taken: *taken,
        });
    }
    drop(stores);

    let file_name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "index.db".into());
    let temp = out.with_file_name(format!(".{file_name}.merging-{}", std::process::id()));
    remove_database(&temp)?;
    let result = write_merged(&temp, shards, &model, dim, &keep);
    let counts = match result {
        Ok(counts) => counts,
        Err(e) => {
            let _ = remove_database(&temp);
            return Err(e);
        }
    };
    if options.force && out.exists() {
        // A WAL left beside the old OUT would be replayed into the new file, so it goes; but first
        // its committed pages go into the old file, so that until the rename below (which replaces
        // OUT in one step) the old index is whole: a crash in between loses nothing.
        if let Ok(old) = rusqlite::Connection::open(out) {
            let _ = old.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
        remove_with_suffixes(out, &["-wal", "-shm", "-journal"])?;
    }
    std::fs::rename(&temp, out).map_err(|source| MergeError::Io { path: out_text.clone(), source })?;
    let (documents, indexed, chunks, embeddings, summaries) = counts;
    Ok(MergeReport {
        output: out_text,
        model,
        dimension: dim,
        shards: merged_shards,
        documents,
        indexed,
        chunks,
        embeddings,
        duplicate_documents: documents_seen - keep.len() as u64,
        summaries,
        seconds: started.elapsed().as_secs_f64(),
    })
}

type Counts = (u64, u64, u64, u64, u64);

fn table_exists(conn: &rusqlite::Connection, schema: &str, table: &str) -> Result<bool, rusqlite::Error> {
    conn.query_row(&format!("SELECT count(*) FROM {schema}.sqlite_master WHERE type = 'table' AND name = ?1"), params![table], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n > 0)
}

/// Builds the merged index at `temp` (a fresh file) and closes it; returns its counts.
fn write_merged(temp: &Path, shards: &[PathBuf], model: &str, dim: usize, keep: &HashMap<String, usize>) -> Result<Counts, MergeError> {
    let store = Store::open(temp, model, dim)?;
    let conn = store.connection();
    // Chunks go in without the per-row full-text trigger; the full-text index is rebuilt once.
    conn.execute_batch("DROP TRIGGER IF EXISTS chunks_fts_insert; CREATE TEMP TABLE keep(path TEXT PRIMARY KEY) WITHOUT ROWID;")?;
    let mut any_summaries = false;
    for (position, shard) in shards.iter().enumerate() {
        let uri = format!("file:{}?mode=ro", uri_path(shard));
        conn.execute("ATTACH DATABASE ?1 AS shard", params![uri])?;
        let copied = copy_shard(conn, position, keep, &mut any_summaries);
        let detached = conn.execute_batch("DETACH DATABASE shard");
        copied?;
        detached?;
    }
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch(&format!(
        "DELETE FROM embeddings WHERE NOT EXISTS (SELECT 1 FROM chunks WHERE chunks.text_hash = embeddings.text_hash);
         {}
         DROP TABLE temp.keep;",
        crate::store::rewrite_full_text_sql()
    ))?;
    tx.commit()?;
    store.fill_chunk_languages()?; // the shards' rows were copied without them
    store.create_schema()?; // the trigger again, for the runs that update the merged index
    let counts = store.counts()?;
    let summaries: u64 =
        if any_summaries { conn.query_row("SELECT count(*) FROM summaries", [], |r| r.get::<_, i64>(0))? as u64 } else { 0 };
    // One file, no WAL beside it, before it is renamed into place.
    conn.pragma_update(None, "journal_mode", "DELETE")?;
    drop(store);
    Ok((counts.documents, counts.indexed, counts.chunks, counts.embeddings, summaries))
}

/// Copies the documents of the attached `shard` that `keep` assigns to it, in one transaction.
fn copy_shard(
    conn: &rusqlite::Connection,
    position: usize,
    keep: &HashMap<String, usize>,
    any_summaries: &mut bool,
) -> Result<(), MergeError> {
    let tx = conn.unchecked_transaction()?;
    tx.execute("DELETE FROM temp.keep", [])?;
    {
        let mut insert = tx.prepare("INSERT INTO temp.keep(path) VALUES (?1)")?;
        for (path, _) in keep.iter().filter(|(_, p)| **p == position) {
            insert.execute(params![path])?;
        }
    }
    tx.execute_batch(
        "INSERT INTO main.documents(path, content_hash, size, mtime, status, error, page_count, indexed_at)
             SELECT path, content_hash, size, mtime, status, error, page_count, indexed_at FROM shard.documents
             WHERE path IN (SELECT path FROM temp.keep) ORDER BY id;
         INSERT INTO main.chunks(document_id, ordinal, text, text_hash, page_start, page_end, page_breaks, char_start, char_end, tokens)
             SELECT m.id, c.ordinal, c.text, c.text_hash, c.page_start, c.page_end, c.page_breaks, c.char_start, c.char_end, c.tokens
             FROM shard.chunks c JOIN shard.documents d ON d.id = c.document_id JOIN main.documents m ON m.path = d.path
             WHERE d.path IN (SELECT path FROM temp.keep) ORDER BY c.id;
         INSERT OR IGNORE INTO main.embeddings(text_hash, vector)
             SELECT e.text_hash, e.vector FROM shard.embeddings e
             WHERE EXISTS (SELECT 1 FROM shard.chunks c WHERE c.text_hash = e.text_hash);",
    )?;
    let ocr = tx.query_row("SELECT count(*) FROM pragma_table_info('pages', 'shard') WHERE name = 'ocr'", [], |r| r.get::<_, i64>(0))? > 0;
    tx.execute_batch(&format!(
        "INSERT INTO main.pages(document_id, page, text, ocr)
             SELECT m.id, p.page, p.text, {} FROM shard.pages p JOIN shard.documents d ON d.id = p.document_id
             JOIN main.documents m ON m.path = d.path WHERE d.path IN (SELECT path FROM temp.keep);",
        if ocr { "p.ocr" } else { "0" }
    ))?;
    if table_exists(&tx, "shard", "summaries")? {
        if !*any_summaries {
            tx.execute_batch(crate::summaries::SCHEMA)?;
            *any_summaries = true;
        }
        // a shard from before summaries were checked has no check column: its summaries merge unchecked
        let check = if crate::summaries::has_check_column(&tx, "shard")? { "check_json" } else { "NULL" };
        tx.execute_batch(&format!(
            "INSERT INTO main.summaries(content_hash, model, path, summary, tokens_in, tokens_out, seconds, created_at, check_json)
                 SELECT content_hash, model, path, summary, tokens_in, tokens_out, seconds, created_at, {check} FROM shard.summaries WHERE true
                 ON CONFLICT(content_hash, model) DO UPDATE SET path = excluded.path, summary = excluded.summary,
                     tokens_in = excluded.tokens_in, tokens_out = excluded.tokens_out, seconds = excluded.seconds,
                     created_at = excluded.created_at, check_json = excluded.check_json
                 WHERE excluded.created_at > summaries.created_at;"
        ))?;
    }
    tx.commit()?;
    Ok(())
}

/// Helpers for the merge and shard-search tests: small indexes with chosen texts and vectors.
#[cfg(test)]
pub(crate) mod testing {
    use crate::chunk::{text_hash, DocumentChunk};
    use crate::store::{DocumentRecord, Store};

    pub fn record(path: &str, content: &str, texts: &[&str]) -> DocumentRecord {
        let mut at = 0;
        let chunks = texts
            .iter()
            .enumerate()
            .map(|(ordinal, text)| {
                let chunk = DocumentChunk {
                    ordinal,
                    text: text.to_string(),
                    text_hash: text_hash(text),
                    ids: vec![101, 7, 102],
                    page_start: 1,
                    page_end: 1,
                    page_breaks: vec![],
                    char_start: at,
                    char_end: at + text.chars().count(),
                };
                at += text.chars().count();
                chunk
            })
            .collect();
        DocumentRecord {
            path: path.into(),
            content_hash: content.into(),
            size: 10,
            mtime: 0,
            status: "indexed",
            error: None,
            pages: vec![texts.join(" ")],
            ocr_pages: vec![],
            chunks,
        }
    }

    /// A vector for a text: a fixed function of its words, so equal texts get equal vectors.
    pub fn vector(text: &str, dim: usize) -> Vec<f32> {
        let mut v = vec![0.0f32; dim];
        for word in text.split_whitespace() {
            let h = text_hash(word);
            v[h[0] as usize % dim] += 1.0 + h[1] as f32 / 255.0;
        }
        v
    }

    pub fn add(store: &mut Store, path: &str, content: &str, texts: &[&str]) {
        let record = record(path, content, texts);
        let vectors: Vec<([u8; 32], Vec<f32>)> = record.chunks.iter().map(|c| (c.text_hash, vector(&c.text, 8))).collect();
        store.commit_document(&record, &vectors).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::testing::add;
    use super::*;

    fn shard(dir: &Path, index: u32, count: u32) -> (PathBuf, Store) {
        let path = dir.join(format!("shard-{index}-of-{count}.db"));
        let store = Store::open(&path, "m", 8).unwrap();
        store.claim_shard(Shard { index, count }).unwrap();
        (path, store)
    }

    #[test]
    fn merged_shards_hold_every_document_once_with_pages_chunks_vectors_summaries_and_full_text() {
        let dir = tempfile::tempdir().unwrap();
        let (p0, mut s0) = shard(dir.path(), 0, 3);
        let (p1, mut s1) = shard(dir.path(), 1, 3);
        let (p2, mut s2) = shard(dir.path(), 2, 3);
        add(&mut s0, "/c/a.txt", "ha", &["alpha lighthouse keepers", "shared closing words"]);
        add(&mut s0, "/c/dup.txt", "old", &["an old copy of the duplicate"]);
        add(&mut s1, "/c/b.txt", "hb", &["beta harbour pilots", "shared closing words"]);
        s1.put_summary(&crate::summaries::StoredSummary {
            content_hash: "hb".into(),
            model: "smol".into(),
            path: "/c/b.txt".into(),
            summary: "About pilots.".into(),
            tokens_in: 3,
            tokens_out: 2,
            seconds: 0.1,
            created_at: 5,
            check: Some(crate::summaries::SummaryCheck { checked: true, ..Default::default() }),
        })
        .unwrap();
        add(&mut s2, "/c/dup.txt", "new", &["the new copy of the duplicate"]);
        add(&mut s2, "/c/d.txt", "hd", &["delta river ferries"]);
        // The duplicate was indexed again later in shard 2: that copy is kept.
        s2.connection().execute("UPDATE documents SET indexed_at = indexed_at + 100 WHERE path = '/c/dup.txt'", []).unwrap();
        s0.connection().execute("UPDATE pages SET ocr = 1", []).unwrap();
        drop((s0, s1, s2));

        let out = dir.path().join("merged.db");
        let report = merge_indexes(&out, &[p0, p1, p2], &MergeOptions::default()).unwrap();
        assert_eq!((report.documents, report.chunks, report.duplicate_documents, report.summaries), (4, 6, 1, 1));
        assert_eq!(report.embeddings, 5, "the shared text's vector once, the stale duplicate's dropped");
        assert_eq!(report.shards.iter().map(|s| s.documents_taken).collect::<Vec<_>>(), [1, 1, 2]);
        let merged = Store::open_existing(&out).unwrap();
        assert_eq!(merged.model().unwrap(), Some(("m".into(), 8)));
        assert_eq!(merged.shard().unwrap(), None, "the merge is not a shard");
        assert_eq!(merged.document_state("/c/dup.txt").unwrap().unwrap().content_hash, "new");
        assert_eq!(merged.document_detail("/c/a.txt").unwrap().unwrap().chunks.len(), 2);
        assert_eq!(merged.ocr_pages("/c/a.txt").unwrap(), [1], "pages keep their OCR mark");
        assert_eq!(merged.summary_for_path("/c/b.txt").unwrap().unwrap().summary, "About pilots.");
        assert!(merged.summary_for_path("/c/b.txt").unwrap().unwrap().check.is_some_and(|c| c.checked), "the check is merged too");
        let (ids, _, dim) = merged.load_vectors().unwrap();
        assert_eq!((ids.len(), dim), (6, 8), "every chunk has its vector");
        assert!(merged.chunks_without_vectors().unwrap().is_empty());
        // The full-text index was rebuilt over the merged chunks, and new runs keep it up to date.
        assert_eq!(merged.keyword_search("shared closing", 10).unwrap().len(), 2);
        assert_eq!(merged.keyword_search("duplicate", 10).unwrap().len(), 1);
        assert_eq!(merged.keyword_search("old", 10).unwrap().len(), 0);
        let mut merged = merged;
        add(&mut merged, "/c/e.txt", "he", &["epsilon lanterns"]);
        assert_eq!(merged.keyword_search("lanterns", 10).unwrap().len(), 1);
        let names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert!(!names.iter().any(|n| n.contains("merging")), "no temporary file left: {names:?}");
    }

    #[test]
    fn a_merge_refuses_other_models_non_indexes_missing_shards_and_an_existing_output() {
        let dir = tempfile::tempdir().unwrap();
        let (p0, mut s0) = shard(dir.path(), 0, 3);
        let (p1, mut s1) = shard(dir.path(), 1, 3);
        add(&mut s0, "/a", "a", &["first"]);
        add(&mut s1, "/b", "b", &["second"]);
        drop((s0, s1));
        let out = dir.path().join("out.db");
        let err = merge_indexes(&out, &[p0.clone(), p1.clone()], &MergeOptions::default()).unwrap_err().to_string();
        assert!(err.contains("shard(s) 2 of 3 are missing (have: 0, 1)") && err.contains("--partial"), "{err}");
        assert!(!out.exists(), "nothing written");
        merge_indexes(&out, &[p0.clone(), p1.clone()], &MergeOptions { partial: true, ..Default::default() }).unwrap();
        let err =
            merge_indexes(&out, std::slice::from_ref(&p0), &MergeOptions { partial: true, ..Default::default() }).unwrap_err().to_string();
        assert!(err.contains("already exists") && err.contains("--force"), "{err}");
        let report = merge_indexes(&out, std::slice::from_ref(&p0), &MergeOptions { partial: true, force: true }).unwrap();
        assert_eq!(report.documents, 1, "replaced");
        let err = merge_indexes(&p0, &[p0.clone(), p1.clone()], &MergeOptions { partial: true, force: true }).unwrap_err();
        assert!(matches!(err, MergeError::OutputIsShard(_)), "{err}");

        let other = dir.path().join("other-model.db");
        {
            let mut store = Store::open(&other, "another-model", 768).unwrap();
            store.claim_shard(Shard { index: 2, count: 3 }).unwrap();
            add(&mut store, "/c", "c", &["third"]);
        }
        let err = merge_indexes(&dir.path().join("x.db"), &[p0.clone(), p1.clone(), other.clone()], &MergeOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(&other.display().to_string()) && err.contains("another-model") && err.contains("(768"), "{err}");

        let garbage = dir.path().join("notes.db");
        std::fs::write(&garbage, b"not an index at all, just some text in a file that is long enough").unwrap();
        let err =
            merge_indexes(&dir.path().join("y.db"), &[p0.clone(), garbage.clone()], &MergeOptions::default()).unwrap_err().to_string();
        assert!(err.contains(&garbage.display().to_string()), "{err}");
        let sqlite_not_ours = dir.path().join("plain.db");
        rusqlite::Connection::open(&sqlite_not_ours).unwrap().execute_batch("CREATE TABLE t(x)").unwrap();
        let err = merge_indexes(&dir.path().join("z.db"), std::slice::from_ref(&sqlite_not_ours), &MergeOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a warpfold index"), "{err}");

        let (p4, s4) = shard(&dir.path().join(""), 0, 4);
        drop(s4);
        let err = merge_indexes(&dir.path().join("w.db"), &[p0, p4], &MergeOptions::default()).unwrap_err().to_string();
        assert!(err.contains("split different ways"), "{err}");
    }
}
