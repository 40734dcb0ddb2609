//! How text is cut into words for the keyword index, in every script.
//!
//! Why: FTS5's `unicode61` tokenizer ends a word at spaces and punctuation, which Chinese and
//! Japanese do not write between words, and Korean writes only between phrases. A run such as
//! `東京の交通網について` became one token, so `交通網` inside it matched nothing by keyword: only
//! the whole run did. Here each run of Han, Kana or Hangul characters is written as its
//! overlapping pairs of characters (`東京 京の の交 交通 通網 網に につ つい いて`) before
//! `unicode61` reads it, and a query is cut the same way: a word of two characters is one pair, a
//! longer one several pairs side by side. Pairs are what the CJK analyzers of Lucene and
//! Elasticsearch index: they need no dictionary, work for all three languages and rank well with
//! BM25. Everything outside those scripts passes through unchanged (case and diacritics are still
//! folded by `unicode61`), so an index without CJK text is exactly as before.
//!
//! The keyword index stores the cut text, followed by its words' stems ([`crate::stem`]), through
//! the SQL function [`FTS_TEXT_FUNCTION`] ([`fts_words`]), which every connection that writes
//! chunks registers ([`register`]); the triggers that keep the index and the chunks in step call
//! it, so an insert and a delete always cut a text alike. Both depend on the text alone.

use std::borrow::Cow;

use rusqlite::functions::FunctionFlags;
use rusqlite::Connection;

/// The SQL name of [`fts_words`], as the full-text triggers call it.
pub const FTS_TEXT_FUNCTION: &str = "warpfold_fts_words";
/// The SQL name of [`fts_text`] alone, which the triggers of an index written before stems were
/// stored call (registered still, so such an index can be written until it is upgraded on open).
const SEGMENTED_TEXT_FUNCTION: &str = "warpfold_fts_text";

/// Whether `c` belongs to a script written without spaces between words (Han ideographs,
/// Hiragana, Katakana, Hangul syllables and their compatibility and half-width forms).
pub fn is_unspaced(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}'   // Hiragana, Katakana
        | '\u{31F0}'..='\u{31FF}' // Katakana phonetic extensions
        | '\u{3400}'..='\u{4DBF}' // CJK extension A
        | '\u{4E00}'..='\u{9FFF}' // CJK unified ideographs
        | '\u{AC00}'..='\u{D7AF}' // Hangul syllables
        | '\u{F900}'..='\u{FAFF}' // CJK compatibility ideographs
        | '\u{FF66}'..='\u{FF9F}' // half-width Katakana
        | '\u{20000}'..='\u{2FA1F}' // CJK extensions B-F and compatibility supplement
    )
}

/// The tokens a run of unspaced characters is indexed as: its overlapping pairs, or the
/// character itself when the run is one character long.
fn pairs(run: &[char]) -> impl Iterator<Item = String> + '_ {
    let single = (run.len() == 1).then(|| run[0].to_string());
    single.into_iter().chain(run.windows(2).map(|w| w.iter().collect()))
}

/// `text` as the keyword index reads it: each run of unspaced characters replaced by its
/// overlapping pairs, separated by spaces; unchanged (borrowed) when it has no such run.
pub fn fts_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unspaced) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() * 2);
    let mut run: Vec<char> = Vec::new();
    let flush = |run: &mut Vec<char>, out: &mut String| {
        if !run.is_empty() {
            out.push(' ');
            for (i, pair) in pairs(run).enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(&pair);
            }
            out.push(' ');
            run.clear();
        }
    };
    for c in text.chars() {
        if is_unspaced(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    Cow::Owned(out)
}

/// `text` as the keyword index stores it: [`fts_text`], then the stems of its words in its
/// language ([`crate::stem::text_stems`], the language told by [`crate::language::detect`]).
pub fn fts_words(text: &str) -> Cow<'_, str> {
    let stems = crate::stem::text_stems(text, crate::language::detect(text).language);
    if stems.is_empty() {
        return fts_text(text);
    }
    let mut words = fts_text(text).into_owned();
    words.push_str(&stems);
    Cow::Owned(words)
}

/// One word of a query as the keyword index holds it: a spaced word is itself; an unspaced run
/// is its pairs (a lone character is searched as the prefix of the pairs it starts, since no pair
/// is the character alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryToken {
    Word(String),
    Prefix(String),
}

impl QueryToken {
    /// The token as a quoted FTS5 phrase (`"word"`, or `"山" *` for a prefix).
    pub fn fts(&self) -> String {
        match self {
            QueryToken::Word(w) => format!("\"{w}\""),
            QueryToken::Prefix(p) => format!("\"{p}\" *"),
        }
    }

    pub fn text(&self) -> &str {
        match self {
            QueryToken::Word(w) | QueryToken::Prefix(w) => w,
        }
    }
}

/// A lowercase query word (letters and digits, possibly mixing scripts: `iphone用`) as the
/// tokens it is indexed as, in order.
pub fn word_tokens(word: &str) -> Vec<QueryToken> {
    if !word.chars().any(is_unspaced) {
        return vec![QueryToken::Word(word.to_string())];
    }
    let mut tokens = Vec::new();
    let mut spaced = String::new();
    let mut run: Vec<char> = Vec::new();
    let flush_run = |run: &mut Vec<char>, tokens: &mut Vec<QueryToken>| {
        match run.len() {
            0 => {}
            1 => tokens.push(QueryToken::Prefix(run[0].to_string())),
            _ => tokens.extend(pairs(run).map(QueryToken::Word)),
        }
        run.clear();
    };
    for c in word.chars() {
        if is_unspaced(c) {
            if !spaced.is_empty() {
                tokens.push(QueryToken::Word(std::mem::take(&mut spaced)));
            }
            run.push(c);
        } else {
            flush_run(&mut run, &mut tokens);
            spaced.push(c);
        }
    }
    flush_run(&mut run, &mut tokens);
    if !spaced.is_empty() {
        tokens.push(QueryToken::Word(spaced));
    }
    tokens
}

/// Registers [`fts_words`] on `conn` as [`FTS_TEXT_FUNCTION`] (and [`fts_text`] under the name
/// older triggers call), deterministic, so the full-text triggers can call them.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC | FunctionFlags::SQLITE_INNOCUOUS;
    conn.create_scalar_function(FTS_TEXT_FUNCTION, 1, flags, |ctx| Ok(fts_words(&ctx.get::<String>(0)?).into_owned()))?;
    conn.create_scalar_function(SEGMENTED_TEXT_FUNCTION, 1, flags, |ctx| Ok(fts_text(&ctx.get::<String>(0)?).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspaced_runs_become_overlapping_pairs_and_the_rest_is_untouched() {
        assert_eq!(fts_text("Größe 2,900 € naïve"), "Größe 2,900 € naïve");
        assert!(matches!(fts_text("plain"), Cow::Borrowed(_)));
        assert_eq!(fts_text("東京の交通網"), " 東京 京の の交 交通 通網 ");
        assert_eq!(fts_text("人口は1,400万人。"), " 人口 口は 1,400 万人 。");
        assert_eq!(fts_text("山"), " 山 ");
        assert_eq!(fts_text("서울에서 만나요"), " 서울 울에 에서   만나 나요 ");
        assert_eq!(fts_text("Linux カーネル"), "Linux  カー ーネ ネル ");
    }

    #[test]
    fn a_query_word_is_cut_as_the_index_cuts_it() {
        let words = |w: &str| word_tokens(w).iter().map(QueryToken::fts).collect::<Vec<_>>();
        assert_eq!(words("größe"), ["\"größe\""]);
        assert_eq!(words("人口"), ["\"人口\""]);
        assert_eq!(words("交通網"), ["\"交通\"", "\"通網\""]);
        assert_eq!(words("山"), ["\"山\" *"]);
        assert_eq!(words("iphone用"), ["\"iphone\"", "\"用\" *"]);
        assert_eq!(words("第3章"), ["\"第\" *", "\"3\"", "\"章\" *"]);
    }
}
