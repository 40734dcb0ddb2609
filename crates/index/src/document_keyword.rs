//! Keyword ranking of whole documents: BM25 over each document's text, counted from the chunks'
//! full-text index, each document standing in the ranking as its chunk that holds most of it.
//!
//! Why: BM25 over chunks (the store's FTS5 table) sees a chunk, not the document. When a query's
//! words are spread over a page (one in the synopsis, two in the description), no chunk holds them
//! all and the page loses to a chunk elsewhere that happens to hold them together. On Debian's
//! translated man pages, ranking the same words over whole pages (bm25s) was 0.03–0.04 nDCG@10
//! above ranking them over passages (bench/retrieval/bm25_chunks.py). Fused into hybrid search at
//! a quarter of a vote, this ranking lifted German, French and Chinese by about 0.01 nDCG@10
//! (BENCHMARKS.md, "Search in other languages"). A user asking for "the lease that mentions the
//! deposit and the garden" means the document, not one of its chunks.
//!
//! How: no second full-text table. FTS5 already holds where each word occurs in each chunk; an
//! `fts5vocab` table of kind `instance` (a temporary one, created per connection, so the index
//! file is unchanged) reads the occurrences of each query word, which sum to the word's count in
//! each document. A document's length is the sum of its chunks' tokens. Overlapping chunks count
//! their shared few tokens twice; BM25's saturation keeps that small. The document's stand-in
//! chunk is the one where the query's words weigh most, so the vote lands where a reader would
//! look first. A word held by more than half of the chunks is left out: it tells little about
//! which document is meant, and its occurrences cost the most to read (a third of a second for a
//! word in each of 100,000 chunks; `fts5vocab`'s per-word chunk count costs milliseconds).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rusqlite::{params, OptionalExtension};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

use crate::keyword::fts_groups;
use crate::shard_search::{B, K1};
use crate::store::{Store, StoreError};

/// The temporary table of every word occurrence in the chunks' full-text index.
const OCCURRENCES: &str = "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_word_occurrences USING fts5vocab(main, chunks_fts, 'instance');
     CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_words USING fts5vocab(main, chunks_fts, 'row')";

/// A query token as FTS5's `unicode61 remove_diacritics 2` tokenizer stores it: lower case, and
/// Latin letters without their diacritics (`Größe` → `große`, `référence` → `reference`; Cyrillic,
/// Greek and the rest keep theirs, as the tokenizer leaves them).
pub(crate) fn indexed_form(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    for c in token.chars().flat_map(char::to_lowercase) {
        if is_latin(c) {
            out.extend(std::iter::once(c).nfd().filter(|m| !is_combining_mark(*m)));
        } else {
            out.push(c);
        }
    }
    out
}

fn is_latin(c: char) -> bool {
    matches!(c as u32, 0x00C0..=0x024F | 0x1E00..=0x1EFF)
}

/// What the document ranking reads of an index: one store, or shards searched together
/// (`crate::shard_search`), which must rank as their merge does.
pub(crate) trait DocumentWords {
    /// Which document each chunk is of, and each document's tokens.
    fn chunk_documents(&self) -> Result<Arc<ChunkDocuments>, StoreError>;
    /// Each chunk holding `term` (as the index holds it), with its occurrences in it.
    fn occurrences(&self, term: &str) -> Result<Vec<(i64, f64)>, StoreError>;
    /// How many chunks hold `term`, without reading its occurrences.
    fn chunks_holding(&self, term: &str) -> Result<usize, StoreError>;
    /// The order of equal scores: a document's path, and a chunk's place in its document.
    fn document_path(&self, document: i64) -> Result<String, StoreError>;
    fn chunk_ordinal(&self, chunk: i64) -> Result<i64, StoreError>;
}

/// The query's words as the index holds them, each once: those of the chunk ranking
/// ([`fts_groups`]: stopwords out, each word as written and as its stems). A lone Chinese or
/// Japanese character, which the chunk ranking finds as a prefix, is left out.
pub(crate) fn query_terms(query: &str, stems: &crate::stem::QueryStems) -> Vec<String> {
    let mut terms: Vec<String> = fts_groups(query, stems)
        .into_iter()
        .flatten()
        .filter_map(|phrase| phrase.strip_prefix('"').and_then(|p| p.strip_suffix('"')).map(indexed_form))
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

/// Documents ranked by BM25 over their whole text for `terms`, best first, at most `limit`, each
/// as its chunk where the terms weigh most; only chunks of `admitted` count (all when `None`).
/// Equal scores rank by document path, equal chunks by their place in the document, so a store,
/// its shards searched together and their merge rank alike.
pub(crate) fn rank_documents(
    index: &impl DocumentWords,
    terms: &[String],
    limit: usize,
    admitted: Option<&HashSet<i64>>,
) -> Result<Vec<i64>, StoreError> {
    if limit == 0 || terms.is_empty() {
        return Ok(Vec::new());
    }
    let chunks = index.chunk_documents()?;
    let documents = chunks.tokens.len() as f64;
    if documents == 0.0 {
        return Ok(Vec::new());
    }
    let average_length = (chunks.tokens.values().sum::<f64>() / documents).max(1.0);
    let is_admitted = |id: &i64| admitted.is_none_or(|a| a.contains(id));
    let mut scores: HashMap<i64, f64> = HashMap::new();
    // Per chunk: its document and the weight of the terms in it.
    let mut chunk_weight: HashMap<i64, (i64, f64)> = HashMap::new();
    for term in terms {
        // A word in most chunks tells little about which document is meant, and reading its
        // every occurrence costs the most (a third of a second in 100,000 chunks).
        if index.chunks_holding(term)? * 2 > chunks.document_of.len() {
            continue;
        }
        // A chunk without a document here is one the index does not search (a shard's hidden copy).
        let rows: Vec<(i64, i64, f64)> = index
            .occurrences(term)?
            .into_iter()
            .filter(|(chunk, _)| is_admitted(chunk))
            .filter_map(|(chunk, count)| chunks.document_of.get(&chunk).map(|document| (chunk, *document, count)))
            .collect();
        let mut in_document: Vec<(i64, f64)> = Vec::new();
        let mut at: HashMap<i64, usize> = HashMap::new();
        for &(chunk, document, count) in &rows {
            let slot = *at.entry(document).or_insert_with(|| {
                in_document.push((document, 0.0));
                in_document.len() - 1
            });
            in_document[slot].1 += count;
            chunk_weight.entry(chunk).or_insert((document, 0.0));
        }
        let holding = in_document.len() as f64;
        let idf = ((documents - holding + 0.5) / (holding + 0.5) + 1.0).ln();
        for (document, count) in in_document {
            let length = chunks.tokens.get(&document).copied().unwrap_or(0.0);
            let norm = K1 * (1.0 - B + B * length / average_length);
            *scores.entry(document).or_default() += idf * count * (K1 + 1.0) / (count + norm);
        }
        for &(chunk, _, count) in &rows {
            if let Some(weight) = chunk_weight.get_mut(&chunk) {
                weight.1 += idf * count;
            }
        }
    }
    let mut ranked: Vec<(i64, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Runs of equal scores that reach into the kept places go by path.
    let mut start = 0;
    while start < ranked.len().min(limit) {
        let end = start + ranked[start..].iter().take_while(|r| r.1 == ranked[start].1).count();
        if end - start > 1 {
            let mut run: Vec<(String, (i64, f64))> =
                ranked[start..end].iter().map(|r| Ok((index.document_path(r.0)?, *r))).collect::<Result<_, StoreError>>()?;
            run.sort_by(|a, b| a.0.cmp(&b.0));
            for (slot, (_, r)) in ranked[start..end].iter_mut().zip(run) {
                *slot = r;
            }
        }
        start = end;
    }
    ranked.truncate(limit);
    let kept: HashSet<i64> = ranked.iter().map(|r| r.0).collect();
    // Each kept document's stand-in: its chunk of the greatest weight, the earliest of equals.
    let mut stand_in: HashMap<i64, (i64, f64, Option<i64>)> = HashMap::new();
    for (&chunk, &(document, weight)) in &chunk_weight {
        if !kept.contains(&document) {
            continue;
        }
        match stand_in.get_mut(&document) {
            None => {
                stand_in.insert(document, (chunk, weight, None));
            }
            Some(best) if weight > best.1 => *best = (chunk, weight, None),
            Some(best) if weight == best.1 => {
                let ordinal = index.chunk_ordinal(chunk)?;
                let best_ordinal = match best.2 {
                    Some(o) => o,
                    None => index.chunk_ordinal(best.0)?,
                };
                *best = if ordinal < best_ordinal { (chunk, weight, Some(ordinal)) } else { (best.0, best.1, Some(best_ordinal)) };
            }
            Some(_) => {}
        }
    }
    Ok(ranked.into_iter().filter_map(|(document, _)| stand_in.get(&document).map(|s| s.0)).collect())
}

/// Which document each chunk is of, and each document's tokens (its chunks' together).
#[derive(Default)]
pub(crate) struct ChunkDocuments {
    pub document_of: HashMap<i64, i64>,
    pub tokens: HashMap<i64, f64>,
}

/// [`ChunkDocuments`] with the index's highest chunk id and chunk count when they were read.
pub(crate) type CachedChunkDocuments = ((i64, i64), Arc<ChunkDocuments>);

impl Store {
    /// Documents ranked by BM25 over their whole text for `query` ([`rank_documents`]), among the
    /// chunks of `admitted` (all when `None`).
    pub fn document_keyword_search_among(
        &self,
        query: &str,
        limit: usize,
        admitted: Option<&HashSet<i64>>,
    ) -> Result<Vec<i64>, StoreError> {
        let terms = query_terms(query, &self.query_stems()?);
        rank_documents(self, &terms, limit, admitted)
    }

    /// Each chunk holding `term` (as the index holds it), with its occurrences in it.
    pub(crate) fn term_occurrences(&self, term: &str) -> Result<Vec<(i64, f64)>, StoreError> {
        self.conn.execute_batch(OCCURRENCES)?;
        let mut stmt = self.conn.prepare_cached("SELECT doc, count(*) FROM temp.chunk_word_occurrences WHERE term = ?1 GROUP BY doc")?;
        let rows = stmt.query_map(params![term], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as f64)))?.collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Every chunk's document and every document's tokens, read in one pass over the chunks.
    pub(crate) fn read_chunk_documents(&self) -> Result<ChunkDocuments, StoreError> {
        let mut out = ChunkDocuments::default();
        let mut stmt = self.conn.prepare("SELECT id, document_id, tokens FROM chunks")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let (chunk, document, tokens): (i64, i64, i64) = (row.get(0)?, row.get(1)?, row.get(2)?);
            out.document_of.insert(chunk, document);
            *out.tokens.entry(document).or_default() += tokens as f64;
        }
        Ok(out)
    }
}

impl DocumentWords for Store {
    fn chunk_documents(&self) -> Result<Arc<ChunkDocuments>, StoreError> {
        // Read again only when chunks were added or removed since.
        let newest: i64 = self.conn.query_row("SELECT coalesce(max(id), 0) FROM chunks", [], |r| r.get(0))?;
        let count: i64 = self.conn.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
        let mut cached = self.chunk_documents.lock();
        if let Some((at, documents)) = cached.as_ref() {
            if *at == (newest, count) {
                return Ok(documents.clone());
            }
        }
        let documents = Arc::new(self.read_chunk_documents()?);
        *cached = Some(((newest, count), documents.clone()));
        Ok(documents)
    }

    fn occurrences(&self, term: &str) -> Result<Vec<(i64, f64)>, StoreError> {
        self.term_occurrences(term)
    }

    fn chunks_holding(&self, term: &str) -> Result<usize, StoreError> {
        self.conn.execute_batch(OCCURRENCES)?;
        let chunks: Option<i64> = self
            .conn
            .prepare_cached("SELECT doc FROM temp.chunk_words WHERE term = ?1")?
            .query_row(params![term], |r| r.get(0))
            .optional()?;
        Ok(chunks.unwrap_or(0) as usize)
    }

    fn document_path(&self, document: i64) -> Result<String, StoreError> {
        Ok(self.conn.prepare_cached("SELECT path FROM documents WHERE id = ?1")?.query_row(params![document], |r| r.get(0))?)
    }

    fn chunk_ordinal(&self, chunk: i64) -> Result<i64, StoreError> {
        Ok(self.conn.prepare_cached("SELECT ordinal FROM chunks WHERE id = ?1")?.query_row(params![chunk], |r| r.get(0))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::testing::add;

    fn paths(store: &Store, ids: &[i64]) -> Vec<String> {
        ids.iter().map(|id| store.chunk(*id).unwrap().unwrap().path).collect()
    }

    #[test]
    fn indexed_forms_fold_latin_diacritics_and_keep_other_scripts() {
        assert_eq!(indexed_form("Größe"), "große");
        assert_eq!(indexed_form("référence"), "reference");
        assert_eq!(indexed_form("Ørsted"), "ørsted");
        assert_eq!(indexed_form("Йогурт"), "йогурт", "Cyrillic keeps its breve, as unicode61 does");
        assert_eq!(indexed_form("が"), "が");
    }

    /// A document holding the query's words in different chunks ranks above one whose single
    /// chunk holds only some of them, though the chunk ranking puts that chunk first; each
    /// document stands in as its chunk where the words weigh most.
    #[test]
    fn a_document_holding_the_words_across_its_chunks_ranks_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 8).unwrap();
        add(
            &mut store,
            "/spread",
            "s",
            &[
                "The tenant pays the deposit before moving in, by bank transfer to the account named below.",
                "Keys are handed over on the first day. The garden is shared with the upstairs flat.",
                "Rubbish goes out on Tuesdays; the bins stand by the gate.",
            ],
        );
        add(&mut store, "/dense", "d", &["The deposit is due on signing."]);
        add(&mut store, "/other", "o", &["A garden party on Sunday."]);
        for (i, text) in
            ["Trains to the coast leave hourly.", "Bread rises overnight in a cool room.", "The museum opens at ten."].iter().enumerate()
        {
            add(&mut store, &format!("/filler-{i}"), &format!("f{i}"), &[text]);
        }
        let chunks = store.keyword_search("deposit garden", 10).unwrap();
        assert_ne!(paths(&store, &chunks)[0], "/spread", "no chunk holds both words: a short chunk holding one ranks first");
        let documents = store.document_keyword_search_among("deposit garden", 10, None).unwrap();
        assert_eq!(paths(&store, &documents)[0], "/spread");
        let mut rest = paths(&store, &documents[1..]);
        rest.sort();
        assert_eq!(rest, ["/dense", "/other"]);
        let first = store.chunk(documents[0]).unwrap().unwrap();
        assert!(first.text.contains("deposit"), "the stand-in is a chunk holding a query word: {}", first.text);
        // Only admitted chunks count: the spread document's deposit chunk left out, it holds the
        // garden alone, and ranks below the short document that holds it.
        let deposit_chunk = documents[0];
        let admitted: HashSet<i64> = (1..=20).filter(|id| *id != deposit_chunk).collect();
        let some = paths(&store, &store.document_keyword_search_among("deposit garden", 10, Some(&admitted)).unwrap());
        assert_eq!(some.len(), 3);
        assert_eq!(some[2], "/spread", "{some:?}");
        assert!(store.document_keyword_search_among("the and", 0, None).unwrap().is_empty());
        assert!(store.document_keyword_search_among("zanzibar", 10, None).unwrap().is_empty());
    }

    /// Words are matched in the form the index holds them: diacritics, other forms of a word in
    /// the chunk's language (stems), and Chinese or Japanese words inside longer runs.
    #[test]
    fn documents_are_found_by_the_words_as_the_index_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 8).unwrap();
        add(&mut store, "/fr", "f", &["La référence du dossier figure en haut de la première page de la lettre."]);
        add(&mut store, "/de", "d", &["Die Häuser am Seeufer wurden im neunzehnten Jahrhundert von Fischern gebaut."]);
        add(&mut store, "/ja", "j", &["東京の交通網は世界有数の規模を誇り、毎日およそ四千万人が利用している。"]);
        add(&mut store, "/en", "e", &["Tokyo has one of the largest transport networks in the world."]);
        let found = |q: &str| paths(&store, &store.document_keyword_search_among(q, 5, None).unwrap());
        assert_eq!(found("Référence"), ["/fr"]);
        assert_eq!(found("reference"), ["/fr"]);
        assert_eq!(found("Häusern"), ["/de"]);
        assert_eq!(found("交通網"), ["/ja"]);
        assert_eq!(found("transport"), ["/en"]);
    }
}
