//! Searching several shard indexes at once (`warpfold search --db A --db B ...`), with the hits a
//! search of their merge ([`crate::merge`]) would give.
//!
//! Why not search each shard and merge the hit lists: BM25 scores a chunk by statistics of the
//! whole index (how many chunks hold a word, the mean chunk length), so one shard's scores are not
//! comparable with another's, and each shard's top list is not a piece of the merged top list.
//! Instead the keyword rankings are recomputed here with the statistics of all shards together,
//! exactly as FTS5's `bm25()` computes them (same constants, same formula, same order of
//! operations, so the same floating-point values): for every query phrase each shard returns all
//! its matching rows with its own BM25 score, from which the phrase's count in the row is read back
//! (one phrase's score is monotone in that count), and the chunk's token count comes from the
//! FTS5 size table. The vector half is exact anyway (a cosine does not depend on the rest of the
//! index). Documents that several shards hold count once, from the copy [`crate::merge::winners`]
//! keeps. Equal BM25 scores rank by document path, then chunk order, as in any one index; equal
//! cosines (equal texts) rank by shard, then the shard's row order, the order a merge writes them.
//!
//! Cost: the keyword half reads every matching row of every shard (FTS5 ranks every matching row
//! too, but inside SQLite); for a large corpus, merge once and search the merge.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use rusqlite::{params, OptionalExtension};

use crate::filter::{admitted_chunks, Filter};
use crate::keyword::{fts_groups, fts_phrase};
use crate::merge::{common_model, open_shard, winners, MergeError};
use crate::search::{depth, fuse, ChunkSource, Hit, Ranking, Rankings, SearchError, SearchOptions, VectorIndex};
use crate::stem::QueryStems;
use crate::store::{decode_vector, Store, StoreError, StoredChunk};

/// FTS5's BM25 constants (`fts5Bm25Function` in SQLite's fts5_aux.c).
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// A chunk across shards: the shard's position in the list, then its id in that shard.
const SHARD_SHIFT: u32 = 40;

fn key(position: usize, id: i64) -> i64 {
    ((position as i64) << SHARD_SHIFT) | id
}

fn split_key(key: i64) -> (usize, i64) {
    ((key >> SHARD_SHIFT) as usize, key & ((1i64 << SHARD_SHIFT) - 1))
}

/// SQLite's variable-length integer (FTS5 writes its sizes and totals with it).
fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..9 {
        let byte = *bytes.get(*at)?;
        *at += 1;
        if i == 8 {
            return Some((value << 8) | byte as u64);
        }
        value = (value << 7) | (byte & 0x7f) as u64;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// One shard opened for searching.
struct ShardIndex {
    store: Store,
    /// Chunks of documents another shard holds a newer copy of: not searched.
    hidden: HashSet<i64>,
}

impl ShardIndex {
    /// FTS5's totals for the table: rows and tokens (its "averages" record).
    fn totals(&self) -> Result<(u64, u64), StoreError> {
        let block: Option<Vec<u8>> =
            self.store.connection().query_row("SELECT block FROM chunks_fts_data WHERE id = 1", [], |r| r.get(0)).optional()?;
        let block = block.unwrap_or_default();
        let mut at = 0;
        let rows = read_varint(&block, &mut at).unwrap_or(0);
        let tokens = read_varint(&block, &mut at).unwrap_or(0);
        Ok((rows, tokens))
    }

    /// A row's size in tokens, as FTS5's `xColumnSize(-1)` gives it.
    fn row_tokens(&self, id: i64) -> Result<u64, StoreError> {
        let sz: Option<Vec<u8>> = self
            .store
            .connection()
            .prepare_cached("SELECT sz FROM chunks_fts_docsize WHERE id = ?1")?
            .query_row(params![id], |r| r.get(0))
            .optional()?;
        let sz = sz.unwrap_or_default();
        Ok(read_varint(&sz, &mut 0).unwrap_or(0))
    }

    /// Every row matching one FTS5 phrase, with its BM25 score in this shard alone.
    fn matches(&self, phrase: &str) -> Result<Vec<(i64, f64)>, StoreError> {
        let mut stmt =
            self.store.connection().prepare_cached("SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?1")?;
        let rows = stmt.query_map(params![phrase], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        Ok(rows)
    }
}

/// FTS5's IDF of a phrase found in `hits` of `rows` rows.
fn idf(rows: u64, hits: u64) -> f64 {
    let idf = ((rows as f64 - hits as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 {
        1e-6
    } else {
        idf
    }
}

/// One phrase's occurrences in each row that holds it, across the shards.
struct PhraseHits {
    /// (key, occurrences).
    rows: HashMap<i64, f64>,
}

/// Shard indexes searched together (see the module docs).
pub struct ShardSearcher {
    shards: Vec<ShardIndex>,
    vectors: VectorIndex,
    /// Rows and tokens of all shards' visible chunks.
    rows: u64,
    tokens: u64,
    /// Each visible chunk's size in tokens (filled as rows are first met).
    sizes: parking_lot::Mutex<HashMap<i64, u64>>,
    /// Each ranked chunk's document path and ordinal: the order of equal scores.
    order: parking_lot::Mutex<HashMap<i64, (String, i64)>>,
    /// The shards' model, and how much of them is English by chunks ([`crate::language::query_weight`]).
    model_name: String,
    english_share: f64,
    /// The stemmers of the shards' languages, as the merge's [`Store::query_stems`].
    query_stems: QueryStems,
}

impl ShardSearcher {
    /// Opens the shard indexes read-only; refuses shards built with different models.
    pub fn open(dbs: &[PathBuf]) -> Result<ShardSearcher, MergeError> {
        if dbs.is_empty() {
            return Err(MergeError::NoShards);
        }
        let stores = dbs.iter().map(|db| open_shard(db)).collect::<Result<Vec<_>, _>>()?;
        let dim = common_model(&stores)?.map(|(_, dim)| dim).unwrap_or(0);
        let keep = winners(&stores)?;
        let mut shards = Vec::new();
        for (position, store) in stores.into_iter().enumerate() {
            let mut hidden = HashSet::new();
            {
                let mut stmt = store
                    .connection()
                    .prepare("SELECT chunks.id, documents.path FROM chunks JOIN documents ON documents.id = chunks.document_id")?;
                let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
                for row in rows {
                    let (id, path) = row?;
                    if keep.get(&path) != Some(&position) {
                        hidden.insert(id);
                    }
                }
            }
            shards.push(ShardIndex { store, hidden });
        }
        // The vector of a text is the first shard's that has one (as the merge keeps it).
        let mut first_with: HashMap<[u8; 32], usize> = HashMap::new();
        for (position, shard) in shards.iter().enumerate() {
            let mut stmt = shard.store.connection().prepare(
                "SELECT DISTINCT chunks.text_hash FROM chunks WHERE EXISTS (SELECT 1 FROM embeddings WHERE embeddings.text_hash = chunks.text_hash)",
            )?;
            for hash in stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))? {
                if let Ok(hash) = <[u8; 32]>::try_from(hash?.as_slice()) {
                    first_with.entry(hash).or_insert(position);
                }
            }
        }
        // Every visible chunk's vector, by text hash, then shard, then row: the order the merge's
        // rows load in (`Store::load_vectors`), so equal cosines rank alike.
        let mut loaded: Vec<(Vec<u8>, i64, Vec<f32>)> = Vec::new();
        for (position, shard) in shards.iter().enumerate() {
            let mut stmt = shard.store.connection().prepare(
                "SELECT chunks.id, chunks.text_hash, embeddings.vector FROM chunks
                 JOIN embeddings ON embeddings.text_hash = chunks.text_hash ORDER BY chunks.id",
            )?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let id: i64 = row.get(0)?;
                if shard.hidden.contains(&id) {
                    continue;
                }
                let hash: Vec<u8> = row.get(1)?;
                let owner = <[u8; 32]>::try_from(hash.as_slice()).ok().and_then(|h| first_with.get(&h).copied()).unwrap_or(position);
                let bytes: Vec<u8> = if owner == position {
                    row.get(2)?
                } else {
                    shards[owner].store.connection().query_row(
                        "SELECT vector FROM embeddings WHERE text_hash = ?1",
                        params![hash],
                        |r| r.get(0),
                    )?
                };
                if bytes.len() != dim * 4 {
                    continue;
                }
                loaded.push((hash, key(position, id), decode_vector(&bytes)));
            }
        }
        loaded.sort_unstable_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        let ids = loaded.iter().map(|l| l.1).collect();
        let flat = loaded.into_iter().flat_map(|l| l.2).collect();
        let vectors = VectorIndex::from_parts(ids, flat, dim.max(1));
        let model_name = common_model_name(&shards)?;
        // Over the visible chunks whose language was told, as the merge holds them.
        let (mut english, mut chunks) = (0u64, 0u64);
        for shard in &shards {
            for (id, is_english) in shard.store.english_chunks()? {
                if let (false, Some(is_english)) = (shard.hidden.contains(&id), is_english) {
                    english += u64::from(is_english);
                    chunks += 1;
                }
            }
        }
        let english_share = if chunks > 0 { english as f64 / chunks as f64 } else { 1.0 };
        let mut languages = Vec::new();
        for shard in &shards {
            languages.extend(shard.store.stem_languages()?);
        }
        let query_stems = QueryStems::for_languages(languages.iter().map(String::as_str));
        let mut searcher = ShardSearcher {
            shards,
            vectors,
            rows: 0,
            tokens: 0,
            sizes: Default::default(),
            order: Default::default(),
            model_name,
            english_share,
            query_stems,
        };
        for shard in &searcher.shards {
            let (rows, tokens) = shard.totals()?;
            let mut hidden_tokens = 0;
            for id in &shard.hidden {
                hidden_tokens += shard.row_tokens(*id)?;
            }
            searcher.rows += rows - shard.hidden.len() as u64;
            searcher.tokens += tokens - hidden_tokens;
        }
        Ok(searcher)
    }

    pub fn vectors(&self) -> &VectorIndex {
        &self.vectors
    }

    /// The model every shard was built with.
    pub fn model(&self) -> Result<Option<(String, usize)>, StoreError> {
        for shard in &self.shards {
            if let Some(model) = shard.store.model()? {
                return Ok(Some(model));
            }
        }
        Ok(None)
    }

    fn size(&self, key: i64) -> Result<u64, StoreError> {
        if let Some(size) = self.sizes.lock().get(&key) {
            return Ok(*size);
        }
        let (position, id) = split_key(key);
        let size = self.shards[position].row_tokens(id)?;
        self.sizes.lock().insert(key, size);
        Ok(size)
    }

    /// A chunk's place among equal scores: its document's path, then its ordinal.
    fn order_of(&self, key: i64) -> Result<(String, i64), StoreError> {
        if let Some(order) = self.order.lock().get(&key) {
            return Ok(order.clone());
        }
        let (position, id) = split_key(key);
        let order: (String, i64) = self.shards[position]
            .store
            .connection()
            .prepare_cached("SELECT documents.path, chunks.ordinal FROM chunks JOIN documents ON documents.id = chunks.document_id WHERE chunks.id = ?1")?
            .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        self.order.lock().insert(key, order.clone());
        Ok(order)
    }

    fn avgdl(&self) -> f64 {
        self.tokens as f64 / self.rows as f64
    }

    /// One phrase's rows across the shards, with their counts read back from each shard's score.
    fn phrase_hits(&self, phrase: &str) -> Result<PhraseHits, StoreError> {
        let mut out = HashMap::new();
        for (position, shard) in self.shards.iter().enumerate() {
            let matches = shard.matches(phrase)?;
            if matches.is_empty() {
                continue;
            }
            let (rows, tokens) = shard.totals()?;
            let local_avgdl = tokens as f64 / rows as f64;
            let local_idf = idf(rows, matches.len() as u64);
            for (id, rank) in matches {
                if shard.hidden.contains(&id) {
                    continue;
                }
                let d = self.size(key(position, id))? as f64;
                // rank = -idf * f(k1 + 1) / (f + K), K = k1 (1 - b + b D / avgdl): solve for f.
                let ratio = -rank / local_idf;
                let k = K1 * (1.0 - B + B * d / local_avgdl);
                let occurrences = (ratio * k / (K1 + 1.0 - ratio)).round().max(1.0);
                out.insert(key(position, id), occurrences);
            }
        }
        Ok(PhraseHits { rows: out })
    }

    /// FTS5's `bm25()` of a row for a query of `phrases` (in the query's order), with the
    /// statistics of all shards.
    fn bm25(&self, key: i64, phrases: &[(&PhraseHits, f64)]) -> Result<f64, StoreError> {
        let d = self.size(key)? as f64;
        let avgdl = self.avgdl();
        let mut score = 0.0;
        for (hits, idf) in phrases {
            let f = hits.rows.get(&key).copied().unwrap_or(0.0);
            score += idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * d / avgdl)));
        }
        Ok(-score)
    }

    /// Rows best first by `phrases` (all of them or any), at most `limit`.
    fn ranked(
        &self,
        candidates: impl IntoIterator<Item = i64>,
        phrases: &[(&PhraseHits, f64)],
        limit: usize,
    ) -> Result<Vec<i64>, StoreError> {
        let mut scored = Vec::new();
        for key in candidates {
            scored.push((self.bm25(key, phrases)?, self.order_of(key)?, key));
        }
        scored.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        Ok(scored.into_iter().take(limit).map(|(_, _, key)| key).collect())
    }

    /// The visible chunks (by key) that `filter` lets through; `None` when it lets every chunk
    /// through.
    fn admitted(&self, filter: &Filter) -> Result<Option<HashSet<i64>>, StoreError> {
        if filter.is_empty() {
            return Ok(None);
        }
        let mut keys = HashSet::new();
        for (position, shard) in self.shards.iter().enumerate() {
            let admitted = admitted_chunks(&shard.store, filter)?.expect("a filter that is not empty admits a set");
            keys.extend(admitted.into_iter().filter(|id| !shard.hidden.contains(id)).map(|id| key(position, id)));
        }
        Ok(Some(keys))
    }

    /// What `Store::keyword_search_among` and `Store::phrase_search_among` return on the merged
    /// index, among the chunks of `admitted` (all when `None`).
    fn keyword_rankings(&self, query: &str, k: usize, admitted: Option<&HashSet<i64>>) -> Result<(Vec<i64>, Vec<i64>), StoreError> {
        let is_admitted = |key: &i64| admitted.is_none_or(|a| a.contains(key));
        let limit = depth(k);
        let groups = fts_groups(query, &self.query_stems);
        let phrases: Vec<&String> = groups.iter().flatten().collect();
        let mut keyword = Vec::new();
        if !phrases.is_empty() {
            let mut distinct: HashMap<&str, PhraseHits> = HashMap::new();
            for phrase in &phrases {
                if !distinct.contains_key(phrase.as_str()) {
                    distinct.insert(phrase, self.phrase_hits(phrase)?);
                }
            }
            let weighted: Vec<(&PhraseHits, f64)> = phrases
                .iter()
                .map(|p| {
                    let hits = &distinct[p.as_str()];
                    (hits, idf(self.rows, hits.rows.len() as u64))
                })
                .collect();
            let mut any: Vec<i64> =
                distinct.values().flat_map(|h| h.rows.keys().copied()).filter(is_admitted).collect::<HashSet<_>>().into_iter().collect();
            any.sort_unstable();
            // A chunk holds every word when it holds a phrase of each word's group (its form or a stem).
            let all: Vec<i64> = any
                .iter()
                .copied()
                .filter(|key| groups.iter().all(|group| group.iter().any(|phrase| distinct[phrase.as_str()].rows.contains_key(key))))
                .collect();
            keyword = self.ranked(all, &weighted, limit)?;
            if keyword.len() < limit {
                let seen: HashSet<i64> = keyword.iter().copied().collect();
                let more = self.ranked(any, &weighted, limit)?;
                let room = limit - seen.len();
                keyword.extend(more.into_iter().filter(|key| !seen.contains(key)).take(room));
            }
        }
        let phrase = match fts_phrase(query) {
            Some(phrase) => {
                let hits = self.phrase_hits(&phrase)?;
                let weighted = [(&hits, idf(self.rows, hits.rows.len() as u64))];
                let mut candidates: Vec<i64> = hits.rows.keys().copied().filter(is_admitted).collect();
                candidates.sort_unstable();
                self.ranked(candidates, &weighted, limit)?
            }
            None => Vec::new(),
        };
        Ok((keyword, phrase))
    }

    /// [`ShardSearcher::search_with`] with the default [`SearchOptions`].
    pub fn search<E>(&self, query: &str, k: usize, embed: E) -> Result<Vec<Hit>, SearchError>
    where
        E: FnOnce(&str) -> Result<Vec<f32>, String>,
    {
        self.search_with(query, k, &SearchOptions::default(), embed)
    }

    /// Hybrid search over all the shards, as [`crate::search::Searcher::search_with`] over their
    /// merge. A hit's `chunk_id` is the chunk's id in its own shard.
    pub fn search_with<E>(&self, query: &str, k: usize, options: &SearchOptions, embed: E) -> Result<Vec<Hit>, SearchError>
    where
        E: FnOnce(&str) -> Result<Vec<f32>, String>,
    {
        self.search_ranked(query, k, options, Ranking::Hybrid, embed)
    }

    /// [`ShardSearcher::search_with`] ranked as `ranking` says, as
    /// [`crate::search::Searcher::search_ranked`] over the merge.
    pub fn search_ranked<E>(
        &self,
        query: &str,
        k: usize,
        options: &SearchOptions,
        ranking: Ranking,
        embed: E,
    ) -> Result<Vec<Hit>, SearchError>
    where
        E: FnOnce(&str) -> Result<Vec<f32>, String>,
    {
        let admitted = self.admitted(&options.filter)?;
        let query_weight = crate::language::query_weight(&self.model_name, query, self.english_share);
        let ranking = ranking.for_weight(query_weight);
        let nearest = if ranking.uses_vectors() {
            let vector = embed(query).map_err(SearchError::Embed)?;
            self.vectors.top_among(&vector, depth(k), admitted.as_ref())
        } else {
            Vec::new()
        };
        let (keyword, phrase) =
            if ranking.uses_keywords() { self.keyword_rankings(query, k, admitted.as_ref())? } else { Default::default() };
        let mut hits =
            fuse(self, query, &Rankings { nearest, keyword, phrase, query_weight }, ranking, k, options.per_document_in_top_five)?;
        for hit in &mut hits {
            hit.chunk_id = split_key(hit.chunk_id).1;
        }
        Ok(hits)
    }
}

/// The model the shards were built with ("" for shards that name none).
fn common_model_name(shards: &[ShardIndex]) -> Result<String, StoreError> {
    for shard in shards {
        if let Some((name, _)) = shard.store.model()? {
            return Ok(name);
        }
    }
    Ok(String::new())
}

impl ChunkSource for ShardSearcher {
    fn chunk(&self, key: i64) -> Result<Option<StoredChunk>, StoreError> {
        let (position, id) = split_key(key);
        self.shards[position].store.chunk(id)
    }

    fn ocr_pages(&self, key: i64, path: &str) -> Result<Vec<u32>, StoreError> {
        self.shards[split_key(key).0].store.ocr_pages(path)
    }

    fn semantic_weights(&self, keys: &[i64]) -> Result<Vec<f64>, StoreError> {
        let mut weights = Vec::with_capacity(keys.len());
        for key in keys {
            let (position, id) = split_key(*key);
            weights.extend(self.shards[position].store.semantic_weights(&[id])?);
        }
        Ok(weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::testing::{add, vector};
    use crate::merge::{merge_indexes, MergeOptions};
    use crate::search::{hybrid_search, hybrid_search_with, Searcher};
    use crate::shard::Shard;

    #[test]
    fn varints_read_as_sqlite_writes_them() {
        let mut at = 0;
        assert_eq!(read_varint(&[0x05, 0x81, 0x00, 0x82, 0x80, 0x01], &mut at), Some(5));
        assert_eq!(read_varint(&[0x05, 0x81, 0x00, 0x82, 0x80, 0x01], &mut at), Some(128));
        assert_eq!(read_varint(&[0x05, 0x81, 0x00, 0x82, 0x80, 0x01], &mut at), Some(2 * 16384 + 1));
        assert_eq!(read_varint(&[0x81], &mut 0), None);
    }

    /// Shards with words in varied counts (BM25 statistics that differ from shard to shard, equal
    /// scores, texts repeated across shards, a document in two shards): every query's hits over
    /// the shards are the hits over their merge, ranks, scores and snippets alike.
    #[test]
    fn searching_shards_together_gives_the_hits_of_their_merge() {
        let dir = tempfile::tempdir().unwrap();
        let words = ["heron", "lantern", "harbour", "amber", "fox", "kettle", "thyme", "river", "stone", "the"];
        let mut x = 7u64;
        let mut next = |n: usize| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as usize % n
        };
        let mut paths = Vec::new();
        for index in 0..3u32 {
            let path = dir.path().join(format!("s{index}.db"));
            let mut store = Store::open(&path, "m", 8).unwrap();
            store.claim_shard(Shard { index, count: 3 }).unwrap();
            for d in 0..(10 + 12 * index as usize) {
                let texts: Vec<String> = (0..1 + next(3))
                    .map(|_| (0..3 + next(index as usize * 4 + 6)).map(|_| words[next(words.len())]).collect::<Vec<_>>().join(" "))
                    .collect();
                let mut texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                if d % 4 == 0 {
                    texts.push("amber heron by the river stone"); // the same text in many documents: ties
                }
                add(&mut store, &format!("/corpus/{index}-{d}.txt"), &format!("{index}-{d}"), &texts);
            }
            if index == 2 {
                add(&mut store, "/corpus/0-3.txt", "newer", &["the heron came back with a lantern"]);
                store.connection().execute("UPDATE documents SET indexed_at = indexed_at + 60 WHERE path = '/corpus/0-3.txt'", []).unwrap();
            }
            // Modification times for the filters: 100, 200 or 300.
            store.connection().execute("UPDATE documents SET mtime = 100 * (1 + (id + ?1) % 3)", [index]).unwrap();
            paths.push(path);
        }
        let out = dir.path().join("merged.db");
        merge_indexes(&out, &paths, &MergeOptions::default()).unwrap();
        let merged = Store::open_read_only(&out).unwrap();
        let vectors = VectorIndex::load(&merged).unwrap();
        let merged_searcher = Searcher::open(&out).unwrap();
        let shards = ShardSearcher::open(&paths).unwrap();
        assert_eq!(shards.vectors().len(), vectors.len());
        let options = [
            SearchOptions { per_document_in_top_five: None, ..SearchOptions::default() },
            SearchOptions { filter: Filter { modified_from: Some(200), ..Filter::default() }, ..SearchOptions::default() },
            SearchOptions {
                per_document_in_top_five: Some(1),
                filter: Filter {
                    folder: Some("/corpus".into()),
                    extensions: vec!["TXT".into()],
                    modified_before: Some(300),
                    ..Filter::default()
                },
            },
        ];
        for query in
            ["heron", "amber heron", "the", "lantern harbour fox", "river stone heron", "kettle thyme the heron", "nothing matches"]
        {
            for k in [3, 10, 40] {
                let q = vector(query, 8);
                let strip = |hits: Vec<Hit>| hits.into_iter().map(|h| Hit { chunk_id: 0, ..h }).collect::<Vec<_>>();
                let expected = strip(hybrid_search(&merged, &vectors, query, &q, k).unwrap());
                let got = strip(shards.search(query, k, |_| Ok(q.clone())).unwrap());
                assert_eq!(got, expected, "{query:?}, k = {k}");
                assert!(!expected.is_empty() || query == "nothing matches");
                assert_eq!(shards.keyword_rankings(query, k, None).unwrap().0.len(), merged.keyword_search(query, depth(k)).unwrap().len());
                for options in &options {
                    let expected = strip(hybrid_search_with(&merged, &vectors, query, &q, k, options).unwrap());
                    let got = strip(shards.search_with(query, k, options, |_| Ok(q.clone())).unwrap());
                    assert_eq!(got, expected, "{query:?}, k = {k}, {options:?}");
                    assert!(!expected.is_empty() || query == "nothing matches", "{query:?}, {options:?}");
                }
                for ranking in [Ranking::Keyword, Ranking::Semantic] {
                    let options = &options[0];
                    let expected = strip(merged_searcher.search_ranked(query, k, options, ranking, |_| Ok(q.clone())).unwrap());
                    let got = strip(shards.search_ranked(query, k, options, ranking, |_| Ok(q.clone())).unwrap());
                    assert_eq!(got, expected, "{query:?}, k = {k}, {ranking:?}");
                }
            }
        }
        assert!(
            shards
                .search("heron", 5, |_| Ok(vector("heron", 8)))
                .unwrap()
                .iter()
                .all(|h| h.path != "/corpus/0-3.txt" || h.chunk.contains("came back")),
            "the stale copy is not searched"
        );
    }
}
