//! Hybrid search: cosine similarity over every stored embedding, BM25 over FTS5, merged by
//! reciprocal rank fusion.
//!
//! Why both: embeddings find paraphrases and miss rare exact terms (names, codes, numbers); BM25 is
//! the reverse. Reciprocal rank fusion merges rankings without having to calibrate a cosine
//! against a BM25 score: a chunk ranked r-th by a method earns 1/(60 + r) from it. Three rankings
//! take part: nearest embeddings, BM25 (chunks with all the words first), and exact-phrase
//! matches. The third matters for the common "I remember this sentence" query: a 256-token chunk's
//! embedding is dominated by its other 240 tokens, so the chunk quoting the sentence can rank
//! tenth by cosine; the phrase ranking puts it first.

use std::collections::{HashMap, HashSet};

use crate::store::{Store, StoreError, StoredChunk};

/// The constant of reciprocal rank fusion (Cormack et al. use 60; it damps the top ranks' lead).
pub const RRF_K: f64 = 60.0;

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
    /// Reciprocal-rank-fusion score.
    pub score: f64,
    /// A snippet of the chunk around the query's words.
    pub text: String,
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
    let mut scores: HashMap<i64, (f64, usize)> = HashMap::new();
    for (list_index, list) in rankings.iter().enumerate() {
        for (rank, id) in list.iter().enumerate() {
            let entry = scores.entry(*id).or_insert((0.0, list_index * 1_000_000 + rank));
            entry.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
        }
    }
    let mut merged: Vec<(i64, f64, usize)> = scores.into_iter().map(|(id, (s, order))| (id, s, order)).collect();
    merged.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    merged.into_iter().map(|(id, s, _)| (id, s)).collect()
}

const SNIPPET_CHARS: usize = 240;

fn floor_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Words too common to place a snippet by.
const STOPWORDS: &[&str] = &[
    "an", "of", "to", "in", "on", "at", "by", "is", "it", "or", "as", "be", "we", "he", "if", "so", "do", "no", "my", "me", "up", "the",
    "and", "for", "are", "but", "not", "you", "all", "any", "can", "her", "was", "one", "our", "out", "his", "has", "how", "its", "who",
    "did", "yes", "she", "him", "what", "when", "with", "that", "this", "from", "they", "have", "were", "been", "into", "near", "than",
    "then", "them", "some", "where", "which", "there",
];

/// Whether a lowercase word is too common to rank or place a snippet by.
pub fn is_stopword(word: &str) -> bool {
    word.chars().count() <= 1 || STOPWORDS.contains(&word)
}

/// Whether two lowercase words are forms of one another by a shared start (ripen, ripens,
/// ripening; tomato, tomatoes): a crude stemmer, enough to place a snippet.
fn same_stem(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long || (short.chars().count() >= 4 && long.starts_with(short))
}

/// The window of the chunk holding the most distinct query words (whole words or their inflected
/// forms, case-insensitive, stopwords ignored), and where its first such word starts (byte offset).
pub fn snippet(chunk: &str, query: &str) -> (String, usize) {
    let wanted: HashSet<String> =
        query.split(|c: char| !c.is_alphanumeric()).map(str::to_lowercase).filter(|w| w.chars().count() > 2 && !is_stopword(w)).collect();
    // (byte offset, query word) for every whole-word occurrence in the chunk.
    let mut hits: Vec<(usize, String)> = Vec::new();
    let mut word_start = None;
    for (i, c) in chunk.char_indices().chain(std::iter::once((chunk.len(), ' '))) {
        match (c.is_alphanumeric(), word_start) {
            (true, None) => word_start = Some(i),
            (false, Some(start)) => {
                let word = chunk[start..i].to_lowercase();
                if let Some(w) = wanted.iter().find(|w| same_stem(w, &word)) {
                    hits.push((start, w.clone()));
                }
                word_start = None;
            }
            _ => {}
        }
    }
    let reach = SNIPPET_CHARS - 60;
    let best = hits
        .iter()
        .map(|(start, _)| {
            let distinct: HashSet<&str> =
                hits.iter().filter(|(h, _)| *h >= *start && *h < start + reach).map(|(_, w)| w.as_str()).collect();
            (distinct.len(), *start)
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(_, start)| start);
    let anchor = best.unwrap_or(0);
    // Start a little before the first hit, at a word start.
    let mut start = floor_boundary(chunk, anchor.saturating_sub(40));
    if start > 0 {
        // Past the whole whitespace character: U+00A0, U+202F or U+3000 are two or three bytes.
        start =
            chunk[start..anchor].char_indices().find(|(_, c)| c.is_whitespace()).map(|(w, c)| start + w + c.len_utf8()).unwrap_or(anchor);
    }
    let mut end = floor_boundary(chunk, (start + SNIPPET_CHARS).min(chunk.len()));
    if end < chunk.len() {
        end = chunk[..end].rfind(char::is_whitespace).filter(|&w| w > anchor).unwrap_or(end);
    }
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(&chunk[start..end].split_whitespace().collect::<Vec<_>>().join(" "));
    if end < chunk.len() {
        out.push('…');
    }
    (out, anchor)
}

/// How deep each ranking goes: deeper than k, so fusion can lift a chunk that several rank
/// moderately.
pub(crate) fn depth(k: usize) -> usize {
    (k * 4).max(50)
}

/// The keyword half: BM25 (all words first) and exact phrase, best first.
fn keyword_rankings(store: &Store, query: &str, k: usize) -> Result<(Vec<i64>, Vec<i64>), StoreError> {
    Ok((store.keyword_search(query, depth(k))?, store.phrase_search(query, depth(k))?))
}

/// Where [`fuse`] reads the chunks it ranked: one index, or several shards searched together.
pub(crate) trait ChunkSource {
    fn chunk(&self, id: i64) -> Result<Option<StoredChunk>, StoreError>;
    /// The OCR'd pages of the document holding chunk `id` (at `path`).
    fn ocr_pages(&self, id: i64, path: &str) -> Result<Vec<u32>, StoreError>;
}

impl ChunkSource for Store {
    fn chunk(&self, id: i64) -> Result<Option<StoredChunk>, StoreError> {
        Store::chunk(self, id)
    }

    fn ocr_pages(&self, _id: i64, path: &str) -> Result<Vec<u32>, StoreError> {
        Store::ocr_pages(self, path)
    }
}

/// Fuses the three rankings and reads the top `k` chunks with their snippets.
pub(crate) fn fuse(
    store: &impl ChunkSource,
    query: &str,
    nearest: &[(i64, f32)],
    keyword: &[i64],
    phrase: &[i64],
    k: usize,
) -> Result<Vec<Hit>, StoreError> {
    let cosines: HashMap<i64, f32> = nearest.iter().copied().collect();
    let semantic: Vec<i64> = nearest.iter().map(|(id, _)| *id).collect();
    let mut hits = Vec::with_capacity(k);
    for (id, score) in reciprocal_rank_fusion(&[&semantic, keyword, phrase]).into_iter().take(k) {
        let Some(stored) = store.chunk(id)? else { continue };
        let (snippet_text, anchor) = snippet(&stored.text, query);
        let page = stored.page_at(anchor);
        let ocr = store.ocr_pages(id, &stored.path)?.contains(&page);
        let StoredChunk { text, path, char_start, char_end, .. } = stored;
        hits.push(Hit {
            path,
            page,
            ocr,
            score,
            text: snippet_text,
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
/// `query`.
pub fn hybrid_search(store: &Store, vectors: &VectorIndex, query: &str, query_vector: &[f32], k: usize) -> Result<Vec<Hit>, StoreError> {
    let nearest = vectors.top(query_vector, depth(k));
    let (keyword, phrase) = keyword_rankings(store, query, k)?;
    fuse(store, query, &nearest, &keyword, &phrase, k)
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
}

impl Searcher {
    pub fn open(db: &std::path::Path) -> Result<Searcher, StoreError> {
        let store = Store::open_read_only(db)?;
        let vectors = VectorIndex::load(&store)?;
        Ok(Searcher { keyword_store: parking_lot::Mutex::new(Store::open_read_only(db)?), store, vectors })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn vectors(&self) -> &VectorIndex {
        &self.vectors
    }

    /// The same result as [`hybrid_search`], with the keyword rankings computed in parallel with
    /// `embed(query)` and the vector scan.
    pub fn search<E>(&self, query: &str, k: usize, embed: E) -> Result<Vec<Hit>, SearchError>
    where
        E: FnOnce(&str) -> Result<Vec<f32>, String>,
    {
        let (nearest, keywords) = std::thread::scope(|scope| {
            let keyword_store = &self.keyword_store;
            let keywords = scope.spawn(move || keyword_rankings(&keyword_store.lock(), query, k));
            let nearest = embed(query).map(|v| self.vectors.top(&v, depth(k)));
            (nearest, keywords.join().expect("keyword search does not panic"))
        });
        let nearest = nearest.map_err(SearchError::Embed)?;
        let (keyword, phrase) = keywords?;
        Ok(fuse(&self.store, query, &nearest, &keyword, &phrase, k)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_rewards_agreement() {
        // 3 is second in both lists and beats 1, which is first in one list only.
        let merged = reciprocal_rank_fusion(&[&[1, 3, 4], &[5, 3, 6]]);
        assert_eq!(merged[0].0, 3);
        assert!((merged[0].1 - 2.0 / 62.0).abs() < 1e-12);
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

    #[test]
    fn snippets_centre_on_the_query_words() {
        let chunk = format!("{} the violet heron counted lanterns {}", "filler ".repeat(80), "tail ".repeat(80));
        let (s, anchor) = snippet(&chunk, "violet heron");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("the violet heron counted lanterns"), "{s}");
        assert_eq!(&chunk[anchor..anchor + 6], "violet");
        let text = format!("Tomatoes grow. {} Picked tomatoes ripen indoors.", "Filler words go here. ".repeat(12));
        let (_, at) = snippet(&text, "pick tomato to ripen");
        assert_eq!(&text[at..at + 6], "Picked", "the window with the most distinct words (picked, tomatoes, ripen) wins");
        let (plain, at) = snippet("short text", "nothing matches");
        assert_eq!((plain.as_str(), at), ("short text", 0));
    }

    #[test]
    fn a_snippet_starts_after_a_multi_byte_space() {
        // French typography: a no-break space before ':' and a narrow one inside numbers. The
        // snippet's start was moved one byte past the space, inside its two or three bytes.
        let letter = format!(
            "{}Les charges locatives\u{a0}: 312,40\u{a0}€ par mois, révisées selon l'indice de référence des loyers\u{a0}; 1\u{202f}250\u{a0}€.",
            "Madame, Monsieur, veuillez trouver ci-joint le décompte annuel.\u{a0}".repeat(3)
        );
        for query in ["charges locatives", "indice de référence", "loyers", "décompte"] {
            let (text, at) = snippet(&letter, query);
            assert!(letter.is_char_boundary(at));
            assert!(!text.contains('\u{a0}'), "spaces inside a snippet are plain: {text}");
        }
        let (text, _) = snippet(&letter, "charges locatives");
        assert!(text.starts_with('…') && text.contains("charges locatives : 312,40 € par mois"), "{text}");
        for space in warpfold_testkit::SPACES {
            let chunk = format!("{}{space}héron{space}violet", "mot ".repeat(20));
            assert!(snippet(&chunk, "violet").0.contains("violet"), "after {space:?}");
        }
    }

    /// The byte range of the alphanumeric run starting at `at`.
    fn word_at(text: &str, at: usize) -> &str {
        let end = text[at..].char_indices().find(|(_, c)| !c.is_alphanumeric()).map_or(text.len(), |(i, _)| at + i);
        &text[at..end]
    }

    proptest::proptest! {
        #![proptest_config(warpfold_testkit::cases(10_000))]

        /// On text of every script: never a panic, the anchor on a character boundary at a query
        /// word when the chunk holds one, and the snippet made of the chunk's own words around it.
        #[test]
        fn snippets_cut_text_of_every_script_at_character_boundaries(
            chunk in warpfold_testkit::text(120),
            query in warpfold_testkit::query(),
        ) {
            let (text, anchor) = snippet(&chunk, &query);
            proptest::prop_assert!(anchor <= chunk.len() && chunk.is_char_boundary(anchor));
            let wanted: Vec<String> = query
                .split(|c: char| !c.is_alphanumeric())
                .map(str::to_lowercase)
                .filter(|w| w.chars().count() > 2 && !is_stopword(w))
                .collect();
            let words: Vec<String> = chunk.split(|c: char| !c.is_alphanumeric()).map(str::to_lowercase).collect();
            if words.iter().any(|w| wanted.iter().any(|q| same_stem(q, w))) {
                let at = word_at(&chunk, anchor).to_lowercase();
                proptest::prop_assert!(wanted.iter().any(|q| same_stem(q, &at)), "anchor {anchor} at {at:?}");
                if at.len() <= 60 {
                    proptest::prop_assert!(text.contains(word_at(&chunk, anchor)), "{text:?} lacks the anchor's word");
                }
            }
            let inner = text.strip_prefix('…').unwrap_or(&text);
            let inner = inner.strip_suffix('…').unwrap_or(inner);
            for word in inner.split(' ') {
                proptest::prop_assert!(chunk.contains(word), "{word:?} is not the chunk's");
            }
        }
    }
}
