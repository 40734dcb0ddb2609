//! Hybrid search: cosine similarity over every stored embedding, BM25 over FTS5, merged by
//! reciprocal rank fusion.
//!
//! Why both: embeddings find paraphrases and miss rare exact terms (names, codes, numbers); BM25 is
//! the reverse. Reciprocal rank fusion merges rankings without having to calibrate a cosine
//! against a BM25 score: a chunk ranked r-th by a method earns 1/(60 + r) from it. Three rankings
//! take part: nearest embeddings, BM25 (chunks with all the words first), and exact-phrase
//! matches. The third matters for the common "I remember this sentence" query: a 256-token chunk's
//! embedding is dominated by its other 240 tokens, so the chunk quoting the sentence can rank
//! tenth by cosine; the phrase ranking puts it first. It votes with half a ranking's weight
//! ([`PHRASE_WEIGHT`]): a chunk holding the phrase holds all its words, so at full weight the
//! same evidence voted twice against the meaning ranking.
//!
//! Two rules then shape the list ([`SearchOptions`]). Diversity: a document of many similar
//! chunks (a manual, a long contract) would otherwise fill the first screen with near-copies of one
//! passage and push every other document out of sight, so one document keeps at most two of the
//! first five places by default; its further hits are not dropped but follow the fifth. Filters
//! (a folder, file types, modification times, [`crate::filter`]) act inside each ranking, before
//! it is cut at k.
//!
//! A search can also rank by one list alone ([`Ranking`]): the fused list is what users get, and
//! the single lists exist to measure what each half adds (bench/retrieval). They go through the
//! same steps, with only the lists fused changed, so a measured difference is the lists' and
//! nothing else's.

use std::collections::{HashMap, HashSet};

use crate::filter::{admitted_chunks, Filter};
use crate::language::query_weight;
use crate::snippet::snippet;
use crate::store::{Store, StoreError, StoredChunk};

/// The constant of reciprocal rank fusion: a place `rank` counts `1 / (RRF_K + rank)`, so the
/// smaller it is, the more each ranking's first places lead the rest. Cormack et al. use 60; 10 was
/// measured against 5, 20 and 60 on the nine known-item sets (BENCHMARKS.md, "Search in other
/// languages"). With multilingual-e5-small it gains nDCG@10 over 60 in eight of the nine (+0.015
/// French, +0.019 Chinese, +0.013 Italian, +0.010 on both English sets) and loses 0.003 in Spanish;
/// with MiniLM it loses 0.001 on the man pages and gains 0.010 on the Debian handbook. Its mean over
/// the nine e5 sets is the highest of the four (0.761; 5: 0.759, 20: 0.758, 60: 0.752).
pub const RRF_K: f64 = 10.0;

/// The exact-phrase ranking's weight in hybrid fusion. Measured against a full vote on nine
/// known-item sets, with MiniLM and with multilingual-e5-small (17 indexes; BENCHMARKS.md, "Search
/// in other languages"): nDCG@10 +0.012 in German (e5), +0.002 to +0.005 on the Debian handbook,
/// no set lower by more than 0.0022. Leaving the phrase out gained more on those sets (+0.024 in
/// German) but lost up to 0.007 elsewhere, and the sets cannot show what it is for: their queries
/// are removed from their documents, so an exact phrase there can only match another page.
pub const PHRASE_WEIGHT: f64 = 0.5;

/// All stored embeddings in one flat, normalized array: a query is one pass over memory.
pub struct VectorIndex {
    ids: Vec<i64>,
    flat: Vec<f32>,
    dim: usize,
}

fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Dot product with eight independent accumulators, so the compiler vectorizes it.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

impl VectorIndex {
    pub fn load(store: &Store) -> Result<VectorIndex, StoreError> {
        let (ids, mut flat, dim) = store.load_vectors()?;
        if dim > 0 {
            flat.chunks_exact_mut(dim).for_each(normalize);
        }
        Ok(VectorIndex { ids, flat, dim })
    }

    pub fn from_parts(ids: Vec<i64>, mut flat: Vec<f32>, dim: usize) -> VectorIndex {
        assert_eq!(flat.len(), ids.len() * dim);
        flat.chunks_exact_mut(dim).for_each(normalize);
        VectorIndex { ids, flat, dim }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The `k` chunks most similar to `query` (cosine), best first. Large indexes are scanned on
    /// every core: the scan is one pass over memory, and a query should not wait for one core.
    pub fn top(&self, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        self.top_among(query, k, None)
    }

    /// [`VectorIndex::top`] among the chunks of `admitted` only (all when `None`).
    pub fn top_among(&self, query: &[f32], k: usize, admitted: Option<&HashSet<i64>>) -> Vec<(i64, f32)> {
        if self.dim == 0 || query.len() != self.dim || k == 0 {
            return Vec::new();
        }
        let mut q = query.to_vec();
        normalize(&mut q);
        let rows = self.ids.len();
        let threads = if rows < 20_000 { 1 } else { std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(8) };
        let per_thread = rows.div_ceil(threads).max(1);
        let best_of = |first: usize| -> Vec<(f32, u32)> {
            let end = (first + per_thread).min(rows);
            let mut scored: Vec<(f32, u32)> = self.flat[first * self.dim..end * self.dim]
                .chunks_exact(self.dim)
                .enumerate()
                .filter(|(i, _)| admitted.is_none_or(|a| a.contains(&self.ids[first + i])))
                .map(|(i, v)| (dot(&q, v), (first + i) as u32))
                .collect();
            if k < scored.len() {
                scored.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
                scored.truncate(k);
            }
            scored
        };
        let mut scored: Vec<(f32, u32)> = if threads == 1 {
            best_of(0)
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> =
                    (0..threads).map(|t| t * per_thread).filter(|&f| f < rows).map(|f| scope.spawn(move || best_of(f))).collect();
                handles.into_iter().flat_map(|h| h.join().expect("scan does not panic")).collect()
            })
        };
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.truncate(k);
        scored.into_iter().map(|(s, i)| (self.ids[i as usize], s)).collect()
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    pub path: String,
    /// The page where the snippet is (1-based).
    pub page: u32,
    /// Whether that page's text was read by OCR from its image (a scan): it may hold misread words.
    pub ocr: bool,
    /// Reciprocal-rank-fusion score over the rankings that took part ([`Ranking`]).
    pub score: f64,
    /// A snippet of the chunk: its sentence that best matches the query ([`crate::snippet`]).
    pub text: String,
    /// The chunk's words that matched the query, lowercase, stopwords never among them: the
    /// words to mark in `text` and `chunk`.
    pub terms: Vec<String>,
    /// The whole chunk, for retrieval-augmented generation.
    pub chunk: String,
    pub chunk_id: i64,
    pub char_start: usize,
    pub char_end: usize,
    /// Cosine similarity to the query, when the chunk was among the nearest vectors.
    pub cosine: Option<f32>,
    /// 1-based ranks in each list, when the chunk was in it.
    pub semantic_rank: Option<usize>,
    pub keyword_rank: Option<usize>,
}

/// Merges best-first rankings by reciprocal rank fusion; ties keep the order of the first list
/// that ranked them.
pub fn reciprocal_rank_fusion(rankings: &[&[i64]]) -> Vec<(i64, f64)> {
    let weighted: Vec<WeightedRanking> = rankings.iter().map(|list| (*list, vec![1.0; list.len()])).collect();
    weighted_rank_fusion(&weighted)
}

/// [`reciprocal_rank_fusion`] with a weight per place: the chunk at `rank` of a ranking whose
/// weight there is `w` gets `w / (k + rank)`. A place of weight 0 adds nothing and orders
/// nothing; the places after it keep their ranks.
pub fn weighted_rank_fusion(rankings: &[WeightedRanking]) -> Vec<(i64, f64)> {
    let mut scores: HashMap<i64, (f64, usize)> = HashMap::new();
    for (list_index, (list, weights)) in rankings.iter().enumerate() {
        for (rank, (id, weight)) in list.iter().zip(weights).enumerate() {
            if *weight <= 0.0 {
                continue;
            }
            let entry = scores.entry(*id).or_insert((0.0, list_index * 1_000_000 + rank));
            entry.0 += weight / (RRF_K + rank as f64 + 1.0);
        }
    }
    let mut merged: Vec<(i64, f64, usize)> = scores.into_iter().map(|(id, (s, order))| (id, s, order)).collect();
    merged.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    merged.into_iter().map(|(id, s, _)| (id, s)).collect()
}

/// A best-first ranking with the weight of each of its places ([`weighted_rank_fusion`]).
pub type WeightedRanking<'a> = (&'a [i64], Vec<f64>);

/// Which rankings a search fuses: all of them (the default, see the module docs), or one alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ranking {
    /// Nearest embeddings, BM25 and exact phrase, fused.
    #[default]
    Hybrid,
    /// BM25 alone (chunks holding every word of the query first); the query is not embedded.
    Keyword,
    /// Nearest embeddings alone.
    Semantic,
}

impl Ranking {
    /// Hybrid search whose nearest vectors count nothing for the query ([`query_weight`]: a
    /// script or a language the index's model does not read) is its keyword half, and the query
    /// is not embedded at all. Other rankings are what was asked for.
    pub fn for_weight(self, query_weight: f64) -> Ranking {
        if self == Ranking::Hybrid && query_weight <= 0.0 {
            Ranking::Keyword
        } else {
            self
        }
    }

    /// Whether the query is embedded and compared with the stored vectors.
    pub fn uses_vectors(self) -> bool {
        self != Ranking::Keyword
    }

    /// Whether the keyword rankings (BM25 and phrase) are computed.
    pub fn uses_keywords(self) -> bool {
        self != Ranking::Semantic
    }

    /// The rankings that take part, of the three every search may compute, with the weight of
    /// each place: in hybrid search a chunk's nearest-vector place counts by how well the model
    /// reads its language (`semantic_weights`, [`crate::language`]), every other place fully.
    fn lists<'a>(
        self,
        semantic: &'a [i64],
        keyword: &'a [i64],
        phrase: &'a [i64],
        semantic_weights: impl FnOnce() -> Result<Vec<f64>, StoreError>,
    ) -> Result<Vec<WeightedRanking<'a>>, StoreError> {
        let full = |list: &'a [i64]| (list, vec![1.0; list.len()]);
        Ok(match self {
            Ranking::Hybrid => vec![(semantic, semantic_weights()?), full(keyword), (phrase, vec![PHRASE_WEIGHT; phrase.len()])],
            Ranking::Keyword => vec![full(keyword)],
            Ranking::Semantic => vec![full(semantic)],
        })
    }
}

/// How many leading places diversity spreads over documents: about one screen of hits.
pub const DIVERSE_TOP: usize = 5;

/// How a search ranks and which documents it may return (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SearchOptions {
    /// At most this many hits of one document among the first five ([`DIVERSE_TOP`]); its further
    /// hits follow the fifth, in their order. `None`: hits in the order of their scores alone.
    pub per_document_in_top_five: Option<usize>,
    /// Which documents may be returned.
    pub filter: Filter,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { per_document_in_top_five: Some(2), filter: Filter::default() }
    }
}

/// Items best first, except that one document keeps at most `per_document` of the first
/// [`DIVERSE_TOP`] places: its further items wait, and follow the last of those places in their
/// own order. Fed best first until [`Diversified::is_full`].
struct Diversified<T> {
    per_document: usize,
    k: usize,
    placed: Vec<T>,
    waiting: Vec<T>,
    in_top: HashMap<String, usize>,
}

impl<T> Diversified<T> {
    fn new(per_document: Option<usize>, k: usize) -> Self {
        let per_document = per_document.map_or(usize::MAX, |n| n.max(1));
        Diversified { per_document, k, placed: Vec::new(), waiting: Vec::new(), in_top: HashMap::new() }
    }

    fn is_full(&self) -> bool {
        self.placed.len() >= self.k
    }

    fn offer(&mut self, item: T, document: &str) {
        if self.placed.len() >= DIVERSE_TOP {
            self.placed.push(item);
            return;
        }
        let count = self.in_top.entry(document.to_owned()).or_default();
        if *count >= self.per_document {
            self.waiting.push(item);
            return;
        }
        *count += 1;
        self.placed.push(item);
        if self.placed.len() == DIVERSE_TOP {
            self.placed.append(&mut self.waiting);
        }
    }

    /// The first `k`; items still waiting (too few other documents) follow the placed ones.
    fn finish(mut self) -> Vec<T> {
        self.placed.append(&mut self.waiting);
        self.placed.truncate(self.k);
        self.placed
    }
}

/// How deep each ranking goes: deeper than k, so fusion can lift a chunk that several rank
/// moderately.
pub(crate) fn depth(k: usize) -> usize {
    (k * 4).max(50)
}

/// The keyword half: BM25 (all words first) and exact phrase, best first, among the chunks of
/// `admitted` only (all when `None`).
fn keyword_rankings(store: &Store, query: &str, k: usize, admitted: Option<&HashSet<i64>>) -> Result<(Vec<i64>, Vec<i64>), StoreError> {
    Ok((store.keyword_search_among(query, depth(k), admitted)?, store.phrase_search_among(query, depth(k), admitted)?))
}

/// Where [`fuse`] reads the chunks it ranked: one index, or several shards searched together.
pub(crate) trait ChunkSource {
    fn chunk(&self, id: i64) -> Result<Option<StoredChunk>, StoreError>;
    /// The OCR'd pages of the document holding chunk `id` (at `path`).
    fn ocr_pages(&self, id: i64, path: &str) -> Result<Vec<u32>, StoreError>;
    /// [`Store::semantic_weights`] of these chunks.
    fn semantic_weights(&self, ids: &[i64]) -> Result<Vec<f64>, StoreError>;
}

impl ChunkSource for Store {
    fn chunk(&self, id: i64) -> Result<Option<StoredChunk>, StoreError> {
        Store::chunk(self, id)
    }

    fn ocr_pages(&self, _id: i64, path: &str) -> Result<Vec<u32>, StoreError> {
        Store::ocr_pages(self, path)
    }

    fn semantic_weights(&self, ids: &[i64]) -> Result<Vec<f64>, StoreError> {
        Store::semantic_weights(self, ids)
    }
}

/// The rankings a search computed, best first each; a ranking it did not need is empty.
pub(crate) struct Rankings {
    pub nearest: Vec<(i64, f32)>,
    pub keyword: Vec<i64>,
    pub phrase: Vec<i64>,
    /// How much the nearest vectors count for this query ([`query_weight`]), times each chunk's
    /// own weight.
    pub query_weight: f64,
}

/// Fuses the rankings `ranking` names, places the hits by `per_document_in_top_five`
/// ([`SearchOptions`]) and reads the top `k` chunks with their snippets.
pub(crate) fn fuse(
    store: &impl ChunkSource,
    query: &str,
    rankings: &Rankings,
    ranking: Ranking,
    k: usize,
    per_document_in_top_five: Option<usize>,
) -> Result<Vec<Hit>, StoreError> {
    let Rankings { nearest, keyword, phrase, query_weight } = rankings;
    let cosines: HashMap<i64, f32> = nearest.iter().copied().collect();
    let semantic: Vec<i64> = nearest.iter().map(|(id, _)| *id).collect();
    let mut order = Diversified::new(per_document_in_top_five, k);
    let weights = || store.semantic_weights(&semantic).map(|w| w.into_iter().map(|w| w * query_weight).collect());
    let lists = ranking.lists(&semantic, keyword, phrase, weights)?;
    for (id, score) in weighted_rank_fusion(&lists) {
        if order.is_full() {
            break;
        }
        let Some(stored) = store.chunk(id)? else { continue };
        let document = stored.path.clone();
        order.offer((id, score, stored), &document);
    }
    let mut hits = Vec::with_capacity(k);
    // `id` is the ranking's (a shard's key for shards searched together), not `stored.id`.
    for (id, score, stored) in order.finish() {
        let shown = snippet(&stored.text, query);
        let page = stored.page_at(shown.anchor);
        let ocr = store.ocr_pages(id, &stored.path)?.contains(&page);
        let StoredChunk { text, path, char_start, char_end, .. } = stored;
        hits.push(Hit {
            path,
            page,
            ocr,
            score,
            text: shown.text,
            terms: shown.terms,
            chunk: text,
            chunk_id: id,
            char_start,
            char_end,
            cosine: cosines.get(&id).copied(),
            semantic_rank: semantic.iter().position(|x| *x == id).map(|r| r + 1),
            keyword_rank: keyword.iter().position(|x| *x == id).map(|r| r + 1),
        });
    }
    Ok(hits)
}

/// Hybrid search over the index, one step after the other: `query_vector` is the embedding of
/// `query`. With the default [`SearchOptions`].
pub fn hybrid_search(store: &Store, vectors: &VectorIndex, query: &str, query_vector: &[f32], k: usize) -> Result<Vec<Hit>, StoreError> {
    hybrid_search_with(store, vectors, query, query_vector, k, &SearchOptions::default())
}

/// [`hybrid_search`] with the given options.
pub fn hybrid_search_with(
    store: &Store,
    vectors: &VectorIndex,
    query: &str,
    query_vector: &[f32],
    k: usize,
    options: &SearchOptions,
) -> Result<Vec<Hit>, StoreError> {
    let admitted = admitted_chunks(store, &options.filter)?;
    let query_weight = query_weight(&store.model()?.map(|(name, _)| name).unwrap_or_default(), query, store.english_share()?);
    let ranking = Ranking::Hybrid.for_weight(query_weight);
    let nearest = if ranking.uses_vectors() { vectors.top_among(query_vector, depth(k), admitted.as_ref()) } else { Vec::new() };
    let (keyword, phrase) = keyword_rankings(store, query, k, admitted.as_ref())?;
    fuse(store, query, &Rankings { nearest, keyword, phrase, query_weight }, ranking, k, options.per_document_in_top_five)
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("embedding the query failed: {0}")]
    Embed(String),
}

/// An index opened for many queries: vectors in memory, and a second connection so the keyword
/// half runs on another core while the query is embedded and compared with every vector.
pub struct Searcher {
    store: Store,
    keyword_store: parking_lot::Mutex<Store>,
    vectors: VectorIndex,
    /// The index's model, and how much of it is English ([`query_weight`]), read once.
    model: String,
    english_share: f64,
}

impl Searcher {
    pub fn open(db: &std::path::Path) -> Result<Searcher, StoreError> {
        let store = Store::open_read_only(db)?;
        let vectors = VectorIndex::load(&store)?;
        let model = store.model()?.map(|(name, _)| name).unwrap_or_default();
        let english_share = store.english_share()?;
        Ok(Searcher { keyword_store: parking_lot::Mutex::new(Store::open_read_only(db)?), store, vectors, model, english_share })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn vectors(&self) -> &VectorIndex {
        &self.vectors
    }

    /// [`Searcher::search_with`] with the default [`SearchOptions`].
    pub fn search<E>(&self, query: &str, k: usize, embed: E) -> Result<Vec<Hit>, SearchError>
    where
        E: FnOnce(&str) -> Result<Vec<f32>, String>,
    {
        self.search_with(query, k, &SearchOptions::default(), embed)
    }

    /// The same result as [`hybrid_search_with`], with the keyword rankings computed in parallel
    /// with `embed(query)` and the vector scan.
    pub fn search_with<E>(&self, query: &str, k: usize, options: &SearchOptions, embed: E) -> Result<Vec<Hit>, SearchError>
    where
        E: FnOnce(&str) -> Result<Vec<f32>, String>,
    {
        self.search_ranked(query, k, options, Ranking::Hybrid, embed)
    }

    /// [`Searcher::search_with`] ranked as `ranking` says; `embed` is not called when the
    /// ranking uses no vectors.
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
        let admitted = admitted_chunks(&self.store, &options.filter)?;
        let admitted = admitted.as_ref();
        let query_weight = query_weight(&self.model, query, self.english_share);
        let ranking = ranking.for_weight(query_weight);
        let (nearest, keywords) = std::thread::scope(|scope| {
            let keyword_store = &self.keyword_store;
            let keywords = scope.spawn(move || {
                if ranking.uses_keywords() {
                    keyword_rankings(&keyword_store.lock(), query, k, admitted)
                } else {
                    Ok(Default::default())
                }
            });
            let nearest =
                if ranking.uses_vectors() { embed(query).map(|v| self.vectors.top_among(&v, depth(k), admitted)) } else { Ok(Vec::new()) };
            (nearest, keywords.join().expect("keyword search does not panic"))
        });
        let nearest = nearest.map_err(SearchError::Embed)?;
        let (keyword, phrase) = keywords?;
        let rankings = Rankings { nearest, keyword, phrase, query_weight };
        Ok(fuse(&self.store, query, &rankings, ranking, k, options.per_document_in_top_five)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::testing::{add, vector};

    /// An index of `documents` (path, chunk texts), vectors from [`vector`].
    fn index_of(documents: &[(&str, Vec<String>)]) -> (tempfile::TempDir, Store, VectorIndex) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 8).unwrap();
        for (path, texts) in documents {
            add(&mut store, path, path, &texts.iter().map(String::as_str).collect::<Vec<_>>());
        }
        let vectors = VectorIndex::load(&store).unwrap();
        (dir, store, vectors)
    }

    fn search(store: &Store, vectors: &VectorIndex, query: &str, k: usize, options: &SearchOptions) -> Vec<Hit> {
        hybrid_search_with(store, vectors, query, &vector(query, 8), k, options).unwrap()
    }

    fn paths(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.path.as_str()).collect()
    }

    #[test]
    fn diversity_keeps_two_of_a_document_in_the_top_five_and_the_rest_after_it() {
        let place = |per_document: Option<usize>, k: usize, items: &[&str]| {
            let mut order = Diversified::new(per_document, k);
            for (i, document) in items.iter().enumerate() {
                if order.is_full() {
                    break;
                }
                order.offer(format!("{document}{i}"), document);
            }
            order.finish()
        };
        let ranked = ["a", "a", "a", "a", "b", "c", "a", "d", "e"];
        assert_eq!(place(Some(2), 10, &ranked), ["a0", "a1", "b4", "c5", "d7", "a2", "a3", "a6", "e8"]);
        assert_eq!(place(None, 10, &ranked), ["a0", "a1", "a2", "a3", "b4", "c5", "a6", "d7", "e8"]);
        assert_eq!(place(Some(2), 5, &ranked), ["a0", "a1", "b4", "c5", "d7"]);
        assert_eq!(place(Some(1), 3, &ranked), ["a0", "b4", "c5"]);
        // Too few other documents: the waiting hits fill the places left, in their order.
        assert_eq!(place(Some(2), 5, &["a", "a", "a", "a", "b"]), ["a0", "a1", "b4", "a2", "a3"]);
        assert_eq!(place(Some(0), 2, &["a", "a", "b"]), ["a0", "b2"], "zero means one");
    }

    /// A handbook with four strong passages on vacation days and a contract with one: the handbook
    /// used to take the first four places.
    #[test]
    fn a_document_with_many_strong_chunks_leaves_room_in_the_top_five() {
        let handbook: Vec<String> =
            (0..4).map(|i| format!("vacation days: vacation days are booked, vacation days carry over, rule {i}")).collect();
        let (_dir, store, vectors) = index_of(&[
            ("/docs/handbook.txt", handbook),
            ("/docs/contract.txt", vec!["the contract grants vacation days each year besides holidays and other leave".into()]),
            ("/docs/memo.txt", vec!["a memo about parking, with one line on vacation".into()]),
            ("/docs/faq.txt", vec!["questions on sick days and parking".into()]),
        ]);
        let query = "vacation days";
        let plain = search(&store, &vectors, query, 10, &SearchOptions { per_document_in_top_five: None, ..SearchOptions::default() });
        assert_eq!(paths(&plain)[..4], ["/docs/handbook.txt"; 4], "without diversity the handbook takes four places");
        let hits = search(&store, &vectors, query, 10, &SearchOptions::default());
        let top: Vec<&str> = paths(&hits).into_iter().take(DIVERSE_TOP).collect();
        assert_eq!(top.iter().filter(|p| **p == "/docs/handbook.txt").count(), 2, "{top:?}");
        for other in ["/docs/contract.txt", "/docs/memo.txt", "/docs/faq.txt"] {
            assert!(top.contains(&other), "{top:?}");
        }
        assert_eq!(hits.len(), plain.len(), "the handbook's other passages are kept, further down");
        let mut ids: Vec<i64> = hits.iter().map(|h| h.chunk_id).collect();
        let mut plain_ids: Vec<i64> = plain.iter().map(|h| h.chunk_id).collect();
        ids.sort_unstable();
        plain_ids.sort_unstable();
        assert_eq!(ids, plain_ids);
        assert_eq!(Searcher::open(std::path::Path::new(store.path())).unwrap().search(query, 10, |q| Ok(vector(q, 8))).unwrap(), hits);
    }

    /// Sixty chunks outside the filter match better than any inside it, more than each ranking
    /// keeps: filtering the hits afterwards found nothing.
    #[test]
    fn filters_act_before_the_cut_so_k_hits_come_back_when_enough_match() {
        let strong: Vec<String> = (0..60).map(|i| format!("harbour lantern schedule {i}")).collect();
        let weak = |what: &str| vec![format!("{what}: minutes of the meeting on parking, budget and the harbour, among other things")];
        let (_dir, store, vectors) = index_of(&[
            ("/corpus/other/logbook.txt", strong),
            ("/corpus/notes/a.txt", weak("a")),
            ("/corpus/notes/2024/b.md", weak("b")),
            ("/corpus/notes/c.PDF", weak("c")),
            ("/corpus/notes-old/d.txt", weak("d")),
        ]);
        let dated = [("/corpus/notes/a.txt", 1_000), ("/corpus/notes/2024/b.md", 2_000), ("/corpus/notes/c.PDF", 3_000)];
        for (path, mtime) in dated {
            store.connection().execute("UPDATE documents SET mtime = ?1 WHERE path = ?2", rusqlite::params![mtime, path]).unwrap();
        }
        let query = "harbour lantern";
        let unfiltered = search(&store, &vectors, query, 3, &SearchOptions::default());
        assert!(paths(&unfiltered).iter().all(|p| p.starts_with("/corpus/other/")), "{:?}", paths(&unfiltered));
        let with = |filter: Filter| {
            let mut got: Vec<String> = search(&store, &vectors, query, 3, &SearchOptions { filter, ..SearchOptions::default() })
                .into_iter()
                .map(|h| h.path)
                .collect();
            got.sort();
            got
        };
        assert_eq!(
            with(Filter { folder: Some("/corpus/notes".into()), ..Filter::default() }),
            ["/corpus/notes/2024/b.md", "/corpus/notes/a.txt", "/corpus/notes/c.PDF"],
            "k hits, none from the sibling notes-old"
        );
        assert_eq!(
            with(Filter { extensions: vec!["pdf".into(), "MD".into()], ..Filter::default() }),
            ["/corpus/notes/2024/b.md", "/corpus/notes/c.PDF"]
        );
        assert_eq!(with(Filter { modified_from: Some(2_000), ..Filter::default() }), ["/corpus/notes/2024/b.md", "/corpus/notes/c.PDF"]);
        assert_eq!(
            with(Filter { modified_from: Some(1_000), modified_before: Some(3_000), ..Filter::default() }),
            ["/corpus/notes/2024/b.md", "/corpus/notes/a.txt"]
        );
        assert_eq!(
            with(Filter { folder: Some("/corpus/notes".into()), extensions: vec!["txt".into()], ..Filter::default() }),
            ["/corpus/notes/a.txt"]
        );
        assert!(with(Filter { folder: Some("/elsewhere".into()), ..Filter::default() }).is_empty());
        let searcher = Searcher::open(std::path::Path::new(store.path())).unwrap();
        let options =
            SearchOptions { filter: Filter { folder: Some("/corpus/notes".into()), ..Filter::default() }, ..SearchOptions::default() };
        assert_eq!(searcher.search_with(query, 3, &options, |q| Ok(vector(q, 8))).unwrap(), search(&store, &vectors, query, 3, &options));
    }

    /// The library lists what the filter lets through, in the order asked, a page at a time.
    #[test]
    fn the_library_filters_sorts_and_pages_the_documents() {
        use crate::filter::{library, LibraryOrder};
        let one = |text: &str| vec![text.to_string()];
        let (_dir, store, _vectors) = index_of(&[
            ("/docs/notes/Zebra.txt", one("zebra crossing")),
            ("/docs/notes/apple.md", one("apple harvest")),
            ("/docs/letters/mango.pdf", one("mango season")),
            ("/docs/notes-old/kiwi.txt", one("kiwi vines")),
        ]);
        for (path, mtime, size) in [
            ("/docs/notes/Zebra.txt", 300, 10),
            ("/docs/notes/apple.md", 100, 30),
            ("/docs/letters/mango.pdf", 200, 20),
            ("/docs/notes-old/kiwi.txt", 0, 5),
        ] {
            store
                .connection()
                .execute("UPDATE documents SET mtime = ?1, size = ?2 WHERE path = ?3", rusqlite::params![mtime, size, path])
                .unwrap();
        }
        let list = |filter: Filter, order: LibraryOrder, descending: bool, offset: usize, limit: usize| {
            let (total, entries) = library(&store, &filter, order, descending, offset, limit).unwrap();
            (total, entries.into_iter().map(|e| e.path.rsplit('/').next().unwrap().to_string()).collect::<Vec<_>>())
        };
        let all = Filter::default();
        assert_eq!(
            list(all.clone(), LibraryOrder::Name, false, 0, 10),
            (4, vec!["apple.md".into(), "kiwi.txt".into(), "mango.pdf".into(), "Zebra.txt".into()])
        );
        assert_eq!(list(all.clone(), LibraryOrder::Modified, true, 0, 2), (4, vec!["Zebra.txt".into(), "mango.pdf".into()]));
        assert_eq!(list(all.clone(), LibraryOrder::Size, false, 1, 2), (4, vec!["Zebra.txt".into(), "mango.pdf".into()]));
        let notes = Filter { folder: Some("/docs/notes".into()), ..Filter::default() };
        assert_eq!(list(notes, LibraryOrder::Name, false, 0, 10), (2, vec!["apple.md".into(), "Zebra.txt".into()]));
        let typed = Filter { extensions: vec!["TXT".into()], modified_from: Some(1), ..Filter::default() };
        assert_eq!(
            list(typed, LibraryOrder::Name, false, 0, 10),
            (1, vec!["Zebra.txt".into()]),
            "an undated file is outside any date range"
        );
    }

    /// Three documents, and a query whose words are in one of them while its embedding (chosen
    /// here) is nearest another's: each ranking alone finds its own document first, and the
    /// fused ranking is the one `search_with` gives.
    #[test]
    fn a_search_ranks_by_the_lists_its_ranking_names() {
        let (_dir, store, _vectors) = index_of(&[
            ("/docs/birds.txt", vec!["the heron waits by the harbour lantern".into()]),
            ("/docs/kitchen.txt", vec!["amber fox kettle on the stove, thyme in the pot".into()]),
            ("/docs/walk.txt", vec!["river stone path along the water meadow".into()]),
        ]);
        let searcher = Searcher::open(std::path::Path::new(store.path())).unwrap();
        let all = SearchOptions { per_document_in_top_five: None, ..SearchOptions::default() };
        let near_walk = |_: &str| Ok(vector("river stone path along the water meadow", 8));
        let ranked = |query: &str, ranking: Ranking| searcher.search_ranked(query, 3, &all, ranking, near_walk).unwrap();

        let keyword = ranked("amber fox", Ranking::Keyword);
        assert_eq!(paths(&keyword), ["/docs/kitchen.txt"], "only the chunk holding the words");
        assert_eq!(keyword[0].keyword_rank, Some(1));
        assert_eq!((keyword[0].cosine, keyword[0].semantic_rank), (None, None), "no vector was compared");
        assert_eq!(keyword[0].score, 1.0 / (RRF_K + 1.0), "one list: the reciprocal rank alone");
        let unembedded =
            searcher.search_ranked("amber fox", 3, &all, Ranking::Keyword, |_| Err("the keyword ranking embeds nothing".into())).unwrap();
        assert_eq!(unembedded, keyword);

        let semantic = ranked("amber fox", Ranking::Semantic);
        assert_eq!(paths(&semantic)[0], "/docs/walk.txt");
        assert_eq!(semantic.len(), 3, "every chunk has a cosine");
        assert!(semantic.iter().all(|h| h.keyword_rank.is_none()), "no keyword ranking was computed");
        assert!((semantic[0].cosine.unwrap() - 1.0).abs() < 1e-5);
        let ranks: Vec<Option<usize>> = semantic.iter().map(|h| h.semantic_rank).collect();
        assert_eq!(ranks, [Some(1), Some(2), Some(3)]);

        let hybrid = ranked("amber fox", Ranking::Hybrid);
        assert_eq!(paths(&hybrid)[..2], ["/docs/kitchen.txt", "/docs/walk.txt"], "BM25 and phrase outvote one cosine");
        assert_eq!(hybrid, searcher.search_with("amber fox", 3, &all, near_walk).unwrap(), "hybrid is the default search");
        assert_eq!(hybrid, hybrid_search_with(&store, &searcher.vectors, "amber fox", &near_walk("").unwrap(), 3, &all).unwrap());

        // Words found nowhere: the keyword ranking has nothing, the semantic one still ranks all.
        assert_eq!(paths(&ranked("meadow sparrow", Ranking::Keyword)), ["/docs/walk.txt"], "some of the words");
        assert!(ranked("zebra quokka", Ranking::Keyword).is_empty());
        assert_eq!(paths(&ranked("zebra quokka", Ranking::Semantic))[0], "/docs/walk.txt");
    }

    #[test]
    fn the_nearest_among_admitted_chunks_skip_the_others_before_the_cut() {
        let dim = 2;
        let index = VectorIndex::from_parts(vec![1, 2, 3, 4], vec![1.0, 0.0, 0.9, 0.1, 0.0, 1.0, 0.5, 0.5], dim);
        let admitted: HashSet<i64> = [3, 4].into();
        let got: Vec<i64> = index.top_among(&[1.0, 0.0], 1, Some(&admitted)).into_iter().map(|(id, _)| id).collect();
        assert_eq!(got, [4]);
        assert_eq!(index.top_among(&[1.0, 0.0], 2, None), index.top(&[1.0, 0.0], 2));
    }

    /// With an English model, a chunk's nearest-vector place counts fully in English and not at
    /// all in another language; with a multilingual model fully everywhere. A language filter keeps the chunks in that language.
    #[test]
    fn nearest_places_count_by_the_chunks_language_and_a_language_filter_keeps_its_chunks() {
        let english = "Employees get twenty-five days of paid annual leave each year, agreed with their manager.";
        let german = "Die Mitarbeiter erhalten jedes Jahr fünfundzwanzig Tage bezahlten Urlaub, abgestimmt mit dem Vorgesetzten.";
        let japanese = "従業員は毎年二十五日の有給休暇を上司と相談して取得できます。";
        let (_dir, store, vectors) =
            index_of(&[("/en.txt", vec![english.into()]), ("/de.txt", vec![german.into()]), ("/ja.txt", vec![japanese.into()])]);
        let ids: Vec<i64> = ["/en.txt", "/de.txt", "/ja.txt"]
            .iter()
            .map(|p| {
                store
                    .connection()
                    .query_row("SELECT chunks.id FROM chunks JOIN documents ON documents.id = document_id WHERE path = ?1", [p], |r| {
                        r.get(0)
                    })
                    .unwrap()
            })
            .collect();
        assert_eq!(store.semantic_weights(&ids).unwrap(), [1.0, 0.0, 0.0]);
        assert!((store.english_share().unwrap() - 1.0 / 3.0).abs() < 1e-12, "one of three told chunks is English");
        let languages: Vec<(String, String, f64)> =
            store.languages().unwrap().into_iter().map(|l| (l.code.unwrap(), l.name.unwrap(), l.model_weight)).collect();
        let expected = [("deu", "German", 0.0), ("eng", "English", 1.0), ("jpn", "Japanese", 0.0)];
        assert_eq!(languages, expected.map(|(c, n, w)| (c.to_string(), n.to_string(), w)));
        let japanese_only =
            SearchOptions { filter: crate::filter::Filter { language: Some("JPN".into()), ..Default::default() }, ..Default::default() };
        assert_eq!(paths(&search(&store, &vectors, "有給休暇", 5, &japanese_only)), ["/ja.txt"]);
        assert!(search(&store, &vectors, "leave", 5, &japanese_only).is_empty(), "an English word is in no Japanese chunk");
        // Weighted fusion: a place of weight 0 adds nothing, and a half weight half as much.
        let fused = weighted_rank_fusion(&[(&[7, 8, 9][..], vec![0.0, 0.5, 1.0]), (&[8][..], vec![1.0])]);
        assert_eq!(fused.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [8, 9]);
        assert!((fused[0].1 - (0.5 / (RRF_K + 2.0) + 1.0 / (RRF_K + 1.0))).abs() < 1e-12);
    }

    #[test]
    fn fusion_rewards_agreement() {
        // 3 is second in both lists and beats 1, which is first in one list only.
        let merged = reciprocal_rank_fusion(&[&[1, 3, 4], &[5, 3, 6]]);
        assert_eq!(merged[0].0, 3);
        assert!((merged[0].1 - 2.0 / (RRF_K + 2.0)).abs() < 1e-12);
        assert_eq!(merged.iter().map(|m| m.0).collect::<Vec<_>>(), vec![3, 1, 5, 4, 6]);
        // A third list that agrees lifts its chunk over two-list agreement at lower ranks.
        let merged = reciprocal_rank_fusion(&[&[1, 3, 4], &[5, 3, 6], &[6]]);
        assert_eq!(merged[0].0, 6);
    }

    #[test]
    fn top_k_is_the_exact_nearest_in_order() {
        let dim = 4;
        let vectors: Vec<Vec<f32>> = (0..100).map(|i| vec![(i as f32).cos(), (i as f32).sin(), 0.3, -0.1 * i as f32]).collect();
        let index = VectorIndex::from_parts((0..100).collect(), vectors.concat(), dim);
        let q = [0.2, 0.9, 0.1, -1.0];
        let got = index.top(&q, 7);
        let mut brute: Vec<(i64, f32)> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt() * q.iter().map(|x| x * x).sum::<f32>().sqrt();
                (i as i64, v.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>() / n)
            })
            .collect();
        brute.sort_by(|a, b| b.1.total_cmp(&a.1));
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), brute[..7].iter().map(|b| b.0).collect::<Vec<_>>());
        for (g, b) in got.iter().zip(&brute) {
            assert!((g.1 - b.1).abs() < 1e-5);
        }
    }

    #[test]
    fn a_parallel_scan_finds_the_same_nearest_as_a_serial_one() {
        let dim = 8;
        let mut x = 1u64;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let flat: Vec<f32> = (0..30_000 * dim).map(|_| next()).collect();
        let index = VectorIndex::from_parts((0..30_000).collect(), flat.clone(), dim);
        let q: Vec<f32> = (0..dim).map(|_| next()).collect();
        let got = index.top(&q, 20);
        let small = VectorIndex::from_parts((0..15_000).collect(), flat[..15_000 * dim].to_vec(), dim);
        let other = VectorIndex::from_parts((15_000..30_000).collect(), flat[15_000 * dim..].to_vec(), dim);
        let mut serial: Vec<(i64, f32)> = small.top(&q, 20).into_iter().chain(other.top(&q, 20)).collect();
        serial.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        serial.truncate(20);
        assert_eq!(got, serial);
    }
}
