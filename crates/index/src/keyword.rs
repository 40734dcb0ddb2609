//! Keyword search over the store's FTS5 index: the words of a query as FTS5 expressions (all words,
//! any word, the exact phrase) and BM25 rankings whose ties are broken by document path and chunk
//! order, so that a one-process index, a merge of shards and shards searched together rank alike.

use std::collections::HashSet;

use rusqlite::params;

use crate::segment::{word_tokens, QueryToken};
use crate::stem::QueryStems;
use crate::store::{Store, StoreError};

impl Store {
    /// BM25 (FTS5) ranking of chunks for `query`, best first, at most `limit`: chunks holding
    /// every word of the query first, then chunks holding some of them.
    pub fn keyword_search(&self, query: &str, limit: usize) -> Result<Vec<i64>, StoreError> {
        self.keyword_search_among(query, limit, None)
    }

    /// [`Store::keyword_search`] among the chunks of `admitted` only (all when `None`): the best
    /// `limit` of those, not those among the best `limit` of all.
    pub fn keyword_search_among(&self, query: &str, limit: usize, admitted: Option<&HashSet<i64>>) -> Result<Vec<i64>, StoreError> {
        let Some((all, any)) = fts_expressions(query, &self.query_stems()?) else {
            return Ok(Vec::new());
        };
        let mut ids = self.ranked_matches(&all, limit, admitted)?;
        if ids.len() < limit {
            let seen: HashSet<i64> = ids.iter().copied().collect();
            let more = self.ranked_matches(&any, limit, admitted)?;
            ids.extend(more.into_iter().filter(|id| !seen.contains(id)).take(limit - seen.len()));
        }
        Ok(ids)
    }

    /// Chunks holding the query's words as one phrase (in order, adjacent), best BM25 first; empty
    /// for one-word queries, which the keyword ranking already covers.
    pub fn phrase_search(&self, query: &str, limit: usize) -> Result<Vec<i64>, StoreError> {
        self.phrase_search_among(query, limit, None)
    }

    /// [`Store::phrase_search`] among the chunks of `admitted` only (all when `None`).
    pub fn phrase_search_among(&self, query: &str, limit: usize, admitted: Option<&HashSet<i64>>) -> Result<Vec<i64>, StoreError> {
        let Some(phrase) = fts_phrase(query) else {
            return Ok(Vec::new());
        };
        self.ranked_matches(&phrase, limit, admitted)
    }

    /// The best `limit` rows for an FTS5 expression by BM25, among the rows of `admitted` (all
    /// when `None`); equal scores by document path, then chunk order, whatever order the rows were
    /// written in (a one-process index, a merge of shards and shards searched together rank
    /// alike, see `crate::shard_search`). A run of equal scores that crosses the cut is read
    /// whole, so which of them make the cut does not depend on row order either. FTS5's own
    /// `ORDER BY rank LIMIT` does the ranking; only the few rows returned are looked up for their
    /// path. When rows outside `admitted` leave fewer than `limit`, FTS5 is asked again for four
    /// times as many, until enough are admitted or every match was read.
    fn ranked_matches(&self, expression: &str, limit: usize, admitted: Option<&HashSet<i64>>) -> Result<Vec<i64>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let is_admitted = |id: &i64| admitted.is_none_or(|a| a.contains(id));
        // A few rows past the cut: a run of equal scores crossing it usually ends among them.
        let mut fetch = limit + TIE_SLACK;
        let (mut rows, last_read, every_match_read) = loop {
            let read: Vec<(i64, f64)> = self
                .conn
                .prepare_cached(RANKED_MATCHES)?
                .query_map(params![expression, fetch as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            let every_match_read = read.len() < fetch;
            let last_read = read.last().map(|r| r.1);
            let rows: Vec<(i64, f64)> = read.into_iter().filter(|(id, _)| is_admitted(id)).collect();
            if every_match_read || rows.len() >= limit {
                break (rows, last_read, every_match_read);
            }
            fetch = fetch.saturating_mul(4);
        };
        if !every_match_read && rows.len() >= limit && last_read == Some(rows[limit - 1].1) {
            // The run of the last kept score may go on past the rows read: read every row of it
            // (a second pass over the matches).
            let cut = rows[limit - 1].1;
            rows.retain(|r| r.1 != cut);
            let mut tied = self.conn.prepare_cached(MATCHES_SCORING)?;
            for row in tied.query_map(params![expression, cut], |r| Ok((r.get(0)?, r.get(1)?)))? {
                let row: (i64, f64) = row?;
                if is_admitted(&row.0) {
                    rows.push(row);
                }
            }
        }
        // FTS5 returned them best first; only runs of equal scores need their rows' paths.
        rows.sort_by(|a, b| a.1.total_cmp(&b.1));
        let mut place = self.conn.prepare_cached(
            "SELECT documents.path, chunks.ordinal FROM chunks JOIN documents ON documents.id = chunks.document_id WHERE chunks.id = ?1",
        )?;
        let mut start = 0;
        while start < rows.len() {
            let end = start + rows[start..].iter().take_while(|r| r.1 == rows[start].1).count();
            if end - start > 1 {
                let mut run = Vec::with_capacity(end - start);
                for &(id, rank) in &rows[start..end] {
                    let (path, ordinal): (String, i64) = place.query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))?;
                    run.push((path, ordinal, id, rank));
                }
                run.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
                for (slot, (_, _, id, rank)) in rows[start..end].iter_mut().zip(run) {
                    *slot = (id, rank);
                }
            }
            start = end;
        }
        rows.truncate(limit);
        Ok(rows.into_iter().map(|(id, _)| id).collect())
    }
}

/// FTS5's own best-first ranking (its fast path for `ORDER BY rank LIMIT`), with the score.
const RANKED_MATCHES: &str = "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY rank LIMIT ?2";
/// Rows read past a ranking's cut, to see the end of a run of equal scores that crosses it.
const TIE_SLACK: usize = 16;
/// Every row of one score: the run of equal scores that crosses a ranking's cut.
const MATCHES_SCORING: &str = "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?1 AND bm25(chunks_fts) = ?2";

/// A user's query as two FTS5 expressions, every word quoted (so FTS syntax characters in the
/// query are plain text): all words (AND), and any word (OR). Stopwords are left out unless the
/// query has nothing else: they match nearly every chunk, cost the most to rank and change the
/// order the least (the phrase ranking still uses them). A word in a script written without
/// spaces counts as the character pairs the index holds it as ([`crate::segment`]); any other
/// word matches as written or as its stem in each language of `stems` ([`crate::stem`]).
pub fn fts_expressions(query: &str, stems: &QueryStems) -> Option<(String, String)> {
    let groups = fts_groups(query, stems);
    let all: Vec<String> =
        groups.iter().map(|group| if group.len() == 1 { group[0].clone() } else { format!("({})", group.join(" OR ")) }).collect();
    let any: Vec<&str> = groups.iter().flatten().map(String::as_str).collect();
    (!groups.is_empty()).then(|| (all.join(" AND "), any.join(" OR ")))
}

/// The quoted tokens (FTS5 phrases) that [`fts_expressions`] joins, in order, repeats kept,
/// grouped: a chunk holds the query's word when it holds any phrase of its group (the word as
/// written or one of its stems in the index's languages, [`QueryStems::forms`]).
pub fn fts_groups(query: &str, stems: &QueryStems) -> Vec<Vec<String>> {
    let words = query_words(query);
    let content: Vec<&String> = words.iter().filter(|w| !crate::stopwords::is_stopword(w)).collect();
    let chosen: Vec<&String> = if content.is_empty() { words.iter().collect() } else { content };
    let mut groups = Vec::new();
    for word in chosen {
        match word_tokens(word).as_slice() {
            [QueryToken::Word(spaced)] if spaced == word => {
                groups.push(stems.forms(spaced).into_iter().map(|form| QueryToken::Word(form).fts()).collect());
            }
            tokens => groups.extend(tokens.iter().map(|token| vec![token.fts()])),
        }
    }
    groups
}

/// A query's words, lowercased.
pub fn query_words(query: &str) -> Vec<String> {
    query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// The exact-phrase FTS5 expression of [`Store::phrase_search`], for queries of two tokens or
/// more (an unspaced word of three characters or more is already two).
pub fn fts_phrase(query: &str) -> Option<String> {
    let tokens: Vec<QueryToken> = query_words(query).iter().flat_map(|w| word_tokens(w)).collect();
    let texts: Vec<&str> = tokens.iter().map(QueryToken::text).collect();
    (tokens.len() >= 2).then(|| format!("\"{}\"", texts.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts_expressions_quote_every_word() {
        let none = QueryStems::none();
        let (all, any) = fts_expressions("The heron's \"lantern\" OR x*", &none).unwrap();
        assert_eq!(any, "\"heron\" OR \"lantern\"");
        assert_eq!(all, "\"heron\" AND \"lantern\"");
        assert_eq!(fts_expressions("AI in the UK", &none).unwrap().0, "\"ai\" AND \"uk\"", "short words that are not stopwords stay");
        assert_eq!(fts_expressions("the and", &none).unwrap().1, "\"the\" OR \"and\"", "all stopwords: keep them");
        assert_eq!(fts_expressions("  ?! ", &none), None);
        let english = QueryStems::for_languages(["eng"]);
        let (all, any) = fts_expressions("heron lanterns", &english).unwrap();
        assert_eq!(all, "\"heron\" AND (\"lanterns\" OR \"lantern\")");
        assert_eq!(any, "\"heron\" OR \"lanterns\" OR \"lantern\"");
        let two = QueryStems::for_languages(["deu", "eng"]);
        assert_eq!(fts_expressions("Häusern", &two).unwrap().0, "(\"häusern\" OR \"haus\")");
    }

    /// Every row admitted by a set of chunks that the first rows read leave out: FTS5 is read
    /// past its first cut, and equal scores among the admitted rows still rank by path, also
    /// across the cut.
    #[test]
    fn a_ranking_among_some_chunks_reads_past_the_rows_outside_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 8).unwrap();
        // More strong rows than the reads before the last take (19, 76), fewer than it (304): the
        // last read ends inside the run of weak rows, which goes on past it.
        for i in 0..280 {
            crate::merge::testing::add(&mut store, &format!("/strong/{i:03}"), "s", &["lantern lantern lantern"]);
        }
        // Forty equal rows, written in reverse path order.
        for i in (0..40).rev() {
            crate::merge::testing::add(&mut store, &format!("/weak/{i:02}"), "w", &[&format!("lantern tower and harbour {i}")]);
        }
        let path_of = |id: &i64| store.chunk(*id).unwrap().unwrap().path;
        let weak: HashSet<i64> =
            store.keyword_search("lantern", 1000).unwrap().into_iter().filter(|id| path_of(id).starts_with("/weak/")).collect();
        assert_eq!(weak.len(), 40);
        let odd: HashSet<i64> = weak.iter().copied().filter(|id| path_of(id).ends_with(['1', '3', '5', '7', '9'])).collect();
        let got: Vec<String> = store.keyword_search_among("lantern", 3, Some(&odd)).unwrap().iter().map(path_of).collect();
        assert_eq!(got, ["/weak/01", "/weak/03", "/weak/05"]);
        assert!(store.keyword_search("lantern", 3).unwrap().iter().all(|id| path_of(id).starts_with("/strong/")));
        let got: Vec<String> = store.phrase_search_among("lantern tower", 2, Some(&odd)).unwrap().iter().map(path_of).collect();
        assert_eq!(got, ["/weak/01", "/weak/03"]);
        assert!(store.keyword_search_among("lantern", 3, Some(&HashSet::new())).unwrap().is_empty());
    }

    fn paths_of(store: &Store, ids: Vec<i64>) -> Vec<String> {
        ids.iter().map(|id| store.chunk(*id).unwrap().unwrap().path).collect()
    }

    /// A Chinese or Japanese word inside a longer run of characters is found by keyword, as a
    /// word inside a sentence is in English; a question that does not repeat the text verbatim
    /// ranks the text that shares most of its pairs first.
    #[test]
    fn a_chinese_or_japanese_word_is_found_inside_a_longer_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 8).unwrap();
        let add = crate::merge::testing::add;
        add(&mut store, "/ja", "j", &["東京の交通網は世界有数の規模を誇り、毎日およそ四千万人が利用している。"]);
        add(&mut store, "/zh", "z", &["北京市的人口约为两千一百万，是中国的首都。"]);
        add(&mut store, "/ja2", "k", &["大阪の人口は約二百七十万人で、食文化で知られている。"]);
        add(&mut store, "/en", "e", &["Tokyo has one of the largest transport networks in the world."]);
        assert_eq!(paths_of(&store, store.keyword_search("交通網", 5).unwrap()), ["/ja"]);
        let mut both = paths_of(&store, store.keyword_search("人口", 5).unwrap());
        both.sort();
        assert_eq!(both, ["/ja2", "/zh"]);
        assert_eq!(paths_of(&store, store.keyword_search("北京的人口是多少？", 5).unwrap())[0], "/zh");
        assert_eq!(paths_of(&store, store.keyword_search("東京 交通網の規模", 5).unwrap())[0], "/ja");
        assert_eq!(paths_of(&store, store.phrase_search("交通網", 5).unwrap()), ["/ja"]);
        assert_eq!(paths_of(&store, store.keyword_search("首", 5).unwrap()), ["/zh"], "a lone character finds the words it starts");
        assert_eq!(paths_of(&store, store.keyword_search("transport networks", 5).unwrap()), ["/en"]);
    }

    /// Another form of a word finds the chunk by keyword, in the chunk's language, and the form
    /// as written ranks first.
    #[test]
    fn a_word_is_found_in_another_form_and_the_form_as_written_ranks_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 8).unwrap();
        let add = crate::merge::testing::add;
        add(
            &mut store,
            "/de",
            "d",
            &["Die Häuser am Seeufer wurden im neunzehnten Jahrhundert von Fischern gebaut und sind heute geschützt."],
        );
        add(&mut store, "/ru", "r", &["Откройте файл настроек в текстовом редакторе и сохраните изменения перед перезапуском службы."]);
        add(&mut store, "/en1", "e", &["Configuring the network interfaces of the server takes a few minutes before the first start."]);
        add(&mut store, "/en2", "f", &["Configure the network interface before you start the server for the first time today."]);
        assert_eq!(paths_of(&store, store.keyword_search("Häusern", 5).unwrap()), ["/de"]);
        assert_eq!(paths_of(&store, store.keyword_search("файла настроек", 5).unwrap()), ["/ru"]);
        assert_eq!(paths_of(&store, store.keyword_search("configure", 5).unwrap()), ["/en2", "/en1"]);
        assert_eq!(paths_of(&store, store.keyword_search("configuring interfaces", 5).unwrap()), ["/en1", "/en2"]);
        assert!(store.phrase_search("network interfaces", 5).unwrap().len() == 1, "phrases match the words as written");
    }

    /// An index written before words were cut into pairs is brought up to date when it is
    /// opened for writing: its Chinese text becomes findable, and deleting a document afterwards
    /// leaves the full-text index consistent.
    #[test]
    fn an_index_written_before_segmentation_is_rewritten_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.db");
        {
            let mut store = Store::open(&path, "m", 8).unwrap();
            // The triggers and full-text rows as they were: the raw text.
            store
                .connection()
                .execute_batch(
                    "DROP TRIGGER chunks_fts_insert; DROP TRIGGER chunks_fts_delete;
                     CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
                         INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text); END;
                     CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
                         INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END;",
                )
                .unwrap();
            crate::merge::testing::add(&mut store, "/zh", "z", &["北京市的人口约为两千一百万。"]);
            crate::merge::testing::add(&mut store, "/en", "e", &["population of the city"]);
            assert!(store.keyword_search("人口", 5).unwrap().is_empty(), "the old index holds the run as one token");
        }
        let store = Store::open(&path, "m", 8).unwrap();
        assert_eq!(paths_of(&store, store.keyword_search("人口", 5).unwrap()), ["/zh"]);
        assert_eq!(paths_of(&store, store.keyword_search("population", 5).unwrap()), ["/en"]);
        store.connection().execute("DELETE FROM documents WHERE path = '/zh'", []).unwrap();
        let check = store.connection().execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')", []);
        assert!(check.is_ok(), "{check:?}");
        assert!(store.keyword_search("人口", 5).unwrap().is_empty());
        // The delete took out exactly what the insert wrote: the index's words are those of the
        // chunk left (its words, then their stems), nothing of the Chinese text remains.
        store.connection().execute_batch("CREATE VIRTUAL TABLE temp.words USING fts5vocab(main, chunks_fts, 'row')").unwrap();
        let mut words: Vec<String> = store
            .connection()
            .prepare("SELECT term FROM temp.words")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        words.sort();
        assert_eq!(words, ["citi", "city", "of", "popul", "population", "the"]);
    }

    /// Words that FTS5 finds as they are written (no combining marks), in several scripts.
    const CLEAN: &[&str] =
        &["charges", "locatives", "référence", "Größe", "naïve", "Ελληνικά", "квартира", "Москва", "한국어", "2,900", "交通網", "カーネル"];

    fn store_of_clean_words() -> (tempfile::TempDir, Store, Vec<i64>) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("i.db"), "m", 2).unwrap();
        let mut ids = Vec::new();
        for (i, word) in CLEAN.iter().enumerate() {
            let text = format!("{word}\u{a0}: une ligne\u{202f}{i}");
            let chunk = crate::chunk::DocumentChunk {
                ordinal: 0,
                text_hash: crate::chunk::text_hash(&text),
                char_end: text.chars().count(),
                text,
                ids: vec![101, 102],
                page_start: 1,
                page_end: 1,
                page_breaks: vec![],
                char_start: 0,
            };
            let record = crate::store::DocumentRecord {
                path: format!("/doc{i}"),
                content_hash: format!("h{i}"),
                size: 1,
                mtime: 0,
                status: "indexed",
                error: None,
                pages: vec![chunk.text.clone()],
                ocr_pages: vec![],
                chunks: vec![chunk.clone()],
            };
            store.commit_document(&record, &[(chunk.text_hash, vec![1.0, 0.0])]).unwrap();
            ids.push(store.keyword_search(word, 5).unwrap()[0]);
        }
        (dir, store, ids)
    }

    proptest::proptest! {
        #![proptest_config(warpfold_testkit::cases(10_000))]

        /// Any query, in any script and with FTS5's own syntax in it (quotes, NEAR, *, ^, -,
        /// column filters), becomes expressions SQLite accepts, and a clean word in it still finds
        /// the chunk holding it whatever surrounds it.
        #[test]
        fn any_query_builds_expressions_fts5_accepts_and_finds_its_words(
            noise in warpfold_testkit::text(12),
            syntax in proptest::sample::select(&["", "\"", "NEAR(", "*", "^", "-", "text:", "AND", "OR NOT", "(", "'"][..]),
            clean in 0..CLEAN.len(),
        ) {
            thread_local! { static STORE: (tempfile::TempDir, Store, Vec<i64>) = store_of_clean_words(); }
            STORE.with(|(_, store, ids)| {
                // Syntax words (AND, NEAR) apart from the word; punctuation glued to it too.
                let glue = if syntax.chars().any(char::is_alphabetic) { " " } else { "" };
                let query = format!("{noise} {syntax}{glue}{}{glue}{syntax} {noise}", CLEAN[clean]);
                let stems = QueryStems::for_languages(["eng", "fra", "deu", "rus"]);
                for phrase in fts_groups(&query, &stems).iter().flatten() {
                    // A lone Chinese or Japanese character is searched as a prefix.
                    let phrase = phrase.strip_suffix(" *").unwrap_or(phrase);
                    proptest::prop_assert!(phrase.starts_with('"') && phrase.ends_with('"') && !phrase[1..phrase.len() - 1].contains('"'));
                }
                let found = store.keyword_search(&query, CLEAN.len() + 10);
                proptest::prop_assert!(found.is_ok(), "{query:?}: {found:?}");
                proptest::prop_assert!(found.unwrap().contains(&ids[clean]), "{query:?} misses {}", CLEAN[clean]);
                let phrase = store.phrase_search(&query, 10);
                proptest::prop_assert!(phrase.is_ok(), "{query:?}: {phrase:?}");
                Ok(())
            })?;
        }
    }
}
