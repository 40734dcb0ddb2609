//! What a hit shows of its chunk: the sentence that matches the query best, and the words to mark.
//!
//! Why a sentence: a chunk is a page or so of text, and the line a person looks for ("Employees
//! get 25 vacation days per year") can be its last. Showing the chunk's start shows the wrong
//! text; a window placed by where the query's words are densest can cut the answering sentence in
//! half. So the chunk is read as sentences, each scored by the query words it holds (how many
//! distinct ones first; then how rare each is among the chunk's sentences, the in-chunk analogue
//! of BM25's inverse document frequency), and the snippet opens on the best one, the answer being
//! the first thing read. A "sentence" longer than a snippet (a table, a list without stops, a
//! run of code) is scored by windows of it instead, each opening on a query word, as one window
//! is all the snippet can show of it.
//!
//! The words to mark are those of the chunk that matched, stopwords left out ([`crate::stopwords`]):
//! the ranking ignored "how" and "many", so marking them would point at nothing.

use std::collections::{HashMap, HashSet};

use crate::segment::{is_unspaced, word_tokens};
use crate::stopwords::is_stopword;

/// A snippet's length in bytes, give or take the word it ends on.
pub const SNIPPET_CHARS: usize = 240;

/// How much of a long sentence one scored window spans: a snippet less the context before it.
const WINDOW: usize = SNIPPET_CHARS - 60;

/// How much text before its first query word a window of a long sentence shows.
const LEAD: usize = 40;

/// What a hit shows of its chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    /// About [`SNIPPET_CHARS`] of the chunk, whitespace made single spaces, '…' where cut.
    pub text: String,
    /// Byte offset in the chunk of the first query word the snippet was placed by (0 if none):
    /// where to read the hit's page.
    pub anchor: usize,
    /// The chunk's words that matched the query (lowercase, in order of first appearance, each
    /// once), stopwords never among them: the words to mark in the snippet and the chunk.
    pub terms: Vec<String>,
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The longest ending an inflection adds to a word (-s, -ed, -ing, -ness): a longer one makes
/// another word ("conf" is not "configure", "network" not "networkmanager").
const LONGEST_ENDING: usize = 4;

/// Whether two lowercase words are forms of one another by a shared start (ripen, ripens,
/// ripening; tomato, tomatoes): a crude stemmer, enough to place a snippet and mark its words.
pub(crate) fn same_stem(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long
        || (short.chars().count() >= 4 && long.starts_with(short) && long.chars().count() - short.chars().count() <= LONGEST_ENDING)
}

/// The query's words a snippet is placed by and marks: lowercase, each once, stopwords left out. A
/// word in a script written without spaces counts as the character pairs the keyword index holds
/// it as ([`crate::segment::word_tokens`]: `総務部` as `総務` and `務部`), found inside the chunk's
/// runs of such text; pairs of Hiragana alone (particles and endings: `について`) are left out like
/// stopwords, unless the query has nothing else.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    let mut kana: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase) {
        for token in word_tokens(&word) {
            let term = token.text();
            let list = if term.chars().all(is_hiragana) { &mut kana } else { &mut terms };
            if !is_stopword(term) && !list.iter().any(|t| t == term) {
                list.push(term.to_string());
            }
        }
    }
    if terms.is_empty() {
        kana
    } else {
        terms
    }
}

fn is_hiragana(c: char) -> bool {
    ('\u{3040}'..='\u{309F}').contains(&c)
}

/// Whether `term` (of [`query_terms`]) is written without spaces: found as a part of a run of such
/// text, not as a whole word.
fn is_unspaced_term(term: &str) -> bool {
    term.chars().all(is_unspaced)
}

/// A run of letters and digits cut where it passes between a script written without spaces and
/// one written with them (`iphone用` as `iphone` and `用`): (byte offset in the run, piece,
/// whether it is unspaced).
fn script_pieces(run: &str) -> impl Iterator<Item = (usize, &str, bool)> {
    let mut start = 0;
    let mut chars = run.char_indices().peekable();
    std::iter::from_fn(move || {
        let (_, first) = chars.next()?;
        let unspaced = is_unspaced(first);
        let mut end = run.len();
        while let Some(&(i, c)) = chars.peek() {
            if is_unspaced(c) != unspaced {
                end = i;
                break;
            }
            chars.next();
        }
        let piece = (start, &run[start..end], unspaced);
        start = end;
        Some(piece)
    })
}

/// Characters that end a sentence when whitespace (or the text's end) follows them.
fn ends_sentence(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…')
}

/// Characters that end a sentence whatever follows: Chinese and Japanese write no space after them.
fn ends_sentence_unspaced(c: char) -> bool {
    matches!(c, '。' | '！' | '？')
}

/// Closing quotes and brackets a sentence's end may carry past its stop (`He said "no."`).
fn closes(c: char) -> bool {
    matches!(c, '"' | '\'' | '”' | '’' | '»' | ')' | ']')
}

/// The chunk's sentences as byte ranges, without the whitespace between them. A sentence ends at
/// a stop followed by whitespace, at a Chinese or Japanese stop, or at a blank line (a paragraph,
/// a heading or a list item without a stop).
fn sentences(text: &str) -> Vec<(usize, usize)> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut start = None;
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if c.is_whitespace() {
            // A blank line: two line breaks with only whitespace between them.
            if c == '\n' {
                let next_break = chars[i + 1..].iter().take_while(|(_, c)| c.is_whitespace()).any(|(_, c)| *c == '\n');
                if let (true, Some(s)) = (next_break, start) {
                    out.push((s, trim_end(text, s, at)));
                    start = None;
                }
            }
            i += 1;
            continue;
        }
        if start.is_none() {
            start = Some(at);
        }
        let mut end = i + 1;
        let stop = if ends_sentence_unspaced(c) {
            true
        } else if ends_sentence(c) {
            while end < chars.len() && (ends_sentence(chars[end].1) || closes(chars[end].1)) {
                end += 1;
            }
            end == chars.len() || chars[end].1.is_whitespace()
        } else {
            false
        };
        if stop {
            while end < chars.len() && closes(chars[end].1) {
                end += 1;
            }
            let end_byte = chars.get(end).map_or(text.len(), |(b, _)| *b);
            out.push((start.take().expect("set above"), end_byte));
        }
        i = end;
    }
    if let Some(s) = start {
        out.push((s, trim_end(text, s, text.len())));
    }
    out
}

fn trim_end(text: &str, start: usize, end: usize) -> usize {
    start + text[start..end].trim_end().len()
}

/// One query word found in the chunk.
struct Found {
    /// Byte offset of the chunk's word.
    at: usize,
    /// Which query term it is a form of.
    term: usize,
}

/// A place the snippet could open on, with what it would show.
struct Candidate {
    /// Distinct query terms in it.
    distinct: usize,
    /// Their rarity among the chunk's sentences (the sum of 1 / sentences holding each).
    rarity: f64,
    /// The first query word in it (byte offset).
    anchor: usize,
    /// The sentence it lies in, for a whole sentence; `None` for a window of a long one.
    sentence: Option<(usize, usize)>,
}

/// The snippet of `chunk` for `query` (see the module docs).
pub fn snippet(chunk: &str, query: &str) -> Snippet {
    let wanted = query_terms(query);
    // Every occurrence of a query term in the chunk: a whole word, or a part of a run of text
    // written without spaces.
    let mut found: Vec<Found> = Vec::new();
    let mut terms: Vec<String> = Vec::new();
    let mut word_start = None;
    for (i, c) in chunk.char_indices().chain(std::iter::once((chunk.len(), ' '))) {
        match (c.is_alphanumeric(), word_start) {
            (true, None) => word_start = Some(i),
            (false, Some(start)) => {
                for (offset, piece, unspaced) in script_pieces(&chunk[start..i]) {
                    if unspaced {
                        find_unspaced(piece, start + offset, &wanted, &mut found, &mut terms);
                        continue;
                    }
                    let word = piece.to_lowercase();
                    let term = wanted.iter().position(|w| !is_unspaced_term(w) && same_stem(w, &word));
                    if let Some(term) = term.filter(|_| !is_stopword(&word)) {
                        found.push(Found { at: start + offset, term });
                        if !terms.contains(&word) {
                            terms.push(word);
                        }
                    }
                }
                word_start = None;
            }
            _ => {}
        }
    }
    let sentences = sentences(chunk);
    let sentence_of = |at: usize| sentences.iter().position(|&(s, e)| at >= s && at < e);
    // In how many sentences each term appears: the rarer, the more it says about a sentence.
    let mut holding: HashMap<usize, HashSet<Option<usize>>> = HashMap::new();
    for f in &found {
        holding.entry(f.term).or_default().insert(sentence_of(f.at));
    }
    let score = |found: &[&Found]| -> (usize, f64) {
        let distinct: HashSet<usize> = found.iter().map(|f| f.term).collect();
        (distinct.len(), distinct.iter().map(|t| 1.0 / holding[t].len() as f64).sum())
    };
    let mut candidates: Vec<Candidate> = Vec::new();
    for &(s, e) in &sentences {
        let inside: Vec<&Found> = found.iter().filter(|f| f.at >= s && f.at < e).collect();
        let Some(first) = inside.first() else { continue };
        if e - s <= SNIPPET_CHARS {
            let (distinct, rarity) = score(&inside);
            candidates.push(Candidate { distinct, rarity, anchor: first.at, sentence: Some((s, e)) });
        } else {
            for opening in &inside {
                let window: Vec<&Found> = inside.iter().copied().filter(|f| f.at >= opening.at && f.at < opening.at + WINDOW).collect();
                let (distinct, rarity) = score(&window);
                candidates.push(Candidate { distinct, rarity, anchor: opening.at, sentence: None });
            }
        }
    }
    // The most distinct terms, then the rarest, then the earliest.
    let best = candidates.into_iter().reduce(|best, c| {
        let better = c.distinct.cmp(&best.distinct).then(c.rarity.total_cmp(&best.rarity)).then(best.anchor.cmp(&c.anchor));
        if better.is_gt() {
            c
        } else {
            best
        }
    });
    let (start, end, anchor) = match best {
        Some(Candidate { sentence: Some((s, e)), anchor, .. }) => sentence_span(chunk, s, e, anchor),
        Some(Candidate { anchor, .. }) => window_span(chunk, anchor),
        None => window_span(chunk, 0),
    };
    let mut text = String::new();
    if start > 0 {
        text.push('…');
    }
    text.push_str(&chunk[start..end].split_whitespace().collect::<Vec<_>>().join(" "));
    if end < chunk.len() {
        text.push('…');
    }
    Snippet { text, anchor, terms }
}

/// The query's unspaced terms where they occur in `piece` (a run of text written without spaces
/// at byte `at` of the chunk), added to `found`; the words to mark are the stretches they cover,
/// overlapping matches joined (`総務` and `務部` mark `総務部`), less the Hiragana at their ends
/// (the particle a pair such as `部の` takes in).
fn find_unspaced(piece: &str, at: usize, wanted: &[String], found: &mut Vec<Found>, terms: &mut Vec<String>) {
    let mut stretch: Option<(usize, usize)> = None;
    let mark = |(s, e): (usize, usize), terms: &mut Vec<String>| {
        let trimmed = piece[s..e].trim_matches(is_hiragana);
        let word = if trimmed.is_empty() { &piece[s..e] } else { trimmed };
        if !terms.iter().any(|t| t == word) {
            terms.push(word.to_string());
        }
    };
    for (i, _) in piece.char_indices() {
        for (term, text) in wanted.iter().enumerate().filter(|(_, w)| is_unspaced_term(w)) {
            if !piece[i..].starts_with(text.as_str()) {
                continue;
            }
            found.push(Found { at: at + i, term });
            let end = i + text.len();
            stretch = match stretch {
                Some((s, e)) if i < e => Some((s, e.max(end))),
                Some(done) => {
                    mark(done, terms);
                    Some((i, end))
                }
                None => Some((i, end)),
            };
        }
    }
    if let Some(done) = stretch {
        mark(done, terms);
    }
}

/// The span shown for a whole sentence `s..e`: from its start, filled with what follows it; when
/// the chunk ends first, with what precedes it.
fn sentence_span(chunk: &str, s: usize, e: usize, anchor: usize) -> (usize, usize, usize) {
    if s + SNIPPET_CHARS >= chunk.len() {
        let mut start = floor_boundary(chunk, chunk.len().saturating_sub(SNIPPET_CHARS)).min(s);
        if start > 0 && start < s {
            // At the next word's start (past the whole whitespace character, which may be several bytes).
            start = chunk[start..s].char_indices().find(|(_, c)| c.is_whitespace()).map_or(s, |(w, c)| start + w + c.len_utf8());
        }
        return (start, chunk.len(), anchor);
    }
    let limit = floor_boundary(chunk, s + SNIPPET_CHARS);
    let end = chunk[..limit].rfind(char::is_whitespace).filter(|&w| w >= e).unwrap_or(e);
    (s, end, anchor)
}

/// The span shown for a window opening at `anchor`: a little before it, at a word's start.
fn window_span(chunk: &str, anchor: usize) -> (usize, usize, usize) {
    let mut start = floor_boundary(chunk, anchor.saturating_sub(LEAD));
    if start > 0 {
        // Past the whole whitespace character: U+00A0, U+202F or U+3000 are two or three bytes.
        start =
            chunk[start..anchor].char_indices().find(|(_, c)| c.is_whitespace()).map(|(w, c)| start + w + c.len_utf8()).unwrap_or(anchor);
    }
    let mut end = floor_boundary(chunk, (start + SNIPPET_CHARS).min(chunk.len()));
    if end < chunk.len() {
        end = chunk[..end].rfind(char::is_whitespace).filter(|&w| w > anchor).unwrap_or(end);
    }
    (start, end, anchor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_centre_on_the_query_words() {
        let chunk = format!("{} the violet heron counted lanterns {}", "filler ".repeat(80), "tail ".repeat(80));
        let s = snippet(&chunk, "violet heron");
        assert!(s.text.starts_with('…') && s.text.ends_with('…'), "{}", s.text);
        assert!(s.text.contains("the violet heron counted lanterns"), "{}", s.text);
        assert_eq!(&chunk[s.anchor..s.anchor + 6], "violet");
        let text = format!("Tomatoes grow. {} Picked tomatoes ripen indoors.", "Filler words go here. ".repeat(12));
        let s = snippet(&text, "pick tomato to ripen");
        assert_eq!(&text[s.anchor..s.anchor + 6], "Picked", "the sentence with the most distinct words (picked, tomatoes, ripen) wins");
        let plain = snippet("short text", "nothing matches");
        assert_eq!((plain.text.as_str(), plain.anchor), ("short text", 0));
    }

    /// The answer is the chunk's last sentence, its query words at its end; earlier, two
    /// sentences meet at "vacation. Days". The snippet used to open on that meeting point (the
    /// first place with both words close together), and would have cut the answer's start.
    #[test]
    fn a_snippet_opens_on_the_answering_sentence_at_the_end_of_its_chunk() {
        let answer = "According to the agreement signed by the works council last spring, every employee gets 25 vacation days per year.";
        let chunk = format!(
            "The office closes for two weeks of summer vacation. Days off are planned with your manager. \
             Sick days need a note from the third day. Parking permits are renewed each January at the front desk. {answer}"
        );
        let s = snippet(&chunk, "how many vacation days");
        assert!(s.text.contains(answer), "{}", s.text);
        assert!(s.text.starts_with('…') && !s.text.ends_with('…'), "{}", s.text);
        assert_eq!(&chunk[s.anchor..s.anchor + 8], "vacation");
        assert!(chunk.find(answer).is_some_and(|at| s.anchor > at));
        // The same sentence first in its chunk: the snippet opens on it and shows what follows.
        let first = "Employees get 25 vacation days per year. Days off are planned with your manager. \
                     Sick days need a note from the third day. Parking permits are renewed each January. \
                     The canteen opens at eight and serves breakfast until ten, and lunch until two.";
        let s = snippet(first, "how many vacation days");
        assert!(s.text.starts_with("Employees get 25 vacation days per year. Days off"), "{}", s.text);
        assert!(s.text.ends_with('…') && s.text.len() <= SNIPPET_CHARS + 8, "{}", s.text);
    }

    #[test]
    fn the_words_to_mark_are_the_matched_words_and_never_stopwords() {
        let chunk = "How many days? Employees get 25 vacation days per year; many take them in August.";
        let s = snippet(chunk, "How many vacation days");
        assert_eq!(s.terms, vec!["days", "vacation"]);
        let s = snippet("Tomatoes ripen indoors.", "the tomato");
        assert_eq!(s.terms, vec!["tomatoes"], "inflected forms are the chunk's own words");
        let s = snippet("Edit the conf file of NetworkManager for the networks you configure.", "configure network");
        assert_eq!(s.terms, vec!["networks", "configure"], "a word that merely starts alike is another word");
        assert_eq!(query_terms("Wie viele Urlaubstage? Combien de congés ?"), vec!["urlaubstage", "congés"]);
        assert_eq!(query_terms("AI in the UK"), vec!["ai", "uk"], "short words that are not stopwords stay");
    }

    #[test]
    fn sentences_end_at_stops_before_whitespace_at_cjk_stops_and_at_blank_lines() {
        let text = "Version 3.5 is out (see notes.) He said \"no.\" Next!\n\nHEADING\nline one\n\n  last 。句子。end";
        let got: Vec<&str> = sentences(text).into_iter().map(|(s, e)| &text[s..e]).collect();
        assert_eq!(
            got,
            vec!["Version 3.5 is out (see notes.)", "He said \"no.\"", "Next!", "HEADING\nline one", "last 。", "句子。", "end"]
        );
        assert!(sentences("").is_empty() && sentences(" \n\n ").is_empty());
    }

    /// Chinese and Japanese write no spaces between words, so a query word is a part of a long
    /// run of text. The snippet used to look for it as a whole run, never found it, and showed
    /// the chunk's start.
    #[test]
    fn a_snippet_finds_words_inside_text_written_without_spaces() {
        let notice = format!(
            "{}ご不明な点は総務部の山田までご連絡ください。{}",
            "本日は設備点検のため、午前九時から正午まで全館で停電いたします。".repeat(6),
            "エレベーターは点検中も使用できません。".repeat(4)
        );
        let s = snippet(&notice, "総務部の連絡先");
        assert!(notice[s.anchor..].starts_with("総務部の山田"), "anchored at {:?}", &notice[s.anchor..]);
        assert!(s.text.starts_with("…ご不明な点は総務部の山田までご連絡ください。"), "{}", s.text);
        assert_eq!(s.terms, vec!["総務部", "連絡"], "stretches of matched pairs, their particles left out");
        let report = format!("{}上海的交通网络在过去十年中扩展了一倍。{}", "会议讨论了年度预算。".repeat(12), "其他事项。".repeat(10));
        let s = snippet(&report, "交通网");
        assert!(s.text.contains("上海的交通网络在过去十年中扩展了一倍。"), "{}", s.text);
        assert_eq!(s.terms, vec!["交通网"]);
        assert_eq!(query_terms("東京について"), vec!["東京", "京に"], "Hiragana pairs alone are like stopwords");
        assert_eq!(query_terms("について"), vec!["につ", "つい", "いて"], "unless the query has nothing else");
        assert_eq!(query_terms("iPhone用 ケース"), vec!["iphone", "用", "ケー", "ース"]);
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
            let s = snippet(&letter, query);
            assert!(letter.is_char_boundary(s.anchor));
            assert!(!s.text.contains('\u{a0}'), "spaces inside a snippet are plain: {}", s.text);
        }
        let s = snippet(&letter, "charges locatives");
        assert!(s.text.starts_with('…') && s.text.contains("charges locatives : 312,40 € par mois"), "{}", s.text);
        for space in warpfold_testkit::SPACES {
            let chunk = format!("{}{space}héron{space}violet", "mot ".repeat(20));
            assert!(snippet(&chunk, "violet").text.contains("violet"), "after {space:?}");
            let long = format!("{}{space}héron{space}violet. Fin.", "mot ".repeat(80));
            assert!(snippet(&long, "violet").text.contains("violet"), "after {space:?}");
        }
    }

    /// The letters and digits starting at `at` in one kind of script (written with spaces or
    /// without: `iphone` of `iphone用`).
    fn piece_at(text: &str, at: usize) -> &str {
        let unspaced = text[at..].chars().next().is_some_and(is_unspaced);
        let end = text[at..]
            .char_indices()
            .find(|&(_, c)| !c.is_alphanumeric() || is_unspaced(c) != unspaced)
            .map_or(text.len(), |(i, _)| at + i);
        &text[at..end]
    }

    proptest::proptest! {
        #![proptest_config(warpfold_testkit::cases(10_000))]

        /// On text of every script: never a panic, the anchor on a character boundary at a query
        /// word when the chunk holds one (a whole word, or a part of text written without
        /// spaces), the snippet made of the chunk's own words around it, and the words to mark
        /// the chunk's own, none a stopword.
        #[test]
        fn snippets_cut_text_of_every_script_at_character_boundaries(
            chunk in warpfold_testkit::text(120),
            query in warpfold_testkit::query(),
        ) {
            let s = snippet(&chunk, &query);
            proptest::prop_assert!(s.anchor <= chunk.len() && chunk.is_char_boundary(s.anchor));
            let wanted = query_terms(&query);
            let (unspaced, spaced): (Vec<&String>, Vec<&String>) = wanted.iter().partition(|t| t.chars().all(is_unspaced));
            let words: Vec<String> = chunk
                .char_indices()
                .filter(|&(i, c)| c.is_alphanumeric() && !chunk[..i].chars().next_back().is_some_and(|p| p.is_alphanumeric() && is_unspaced(p) == is_unspaced(c)))
                .map(|(i, _)| piece_at(&chunk, i).to_lowercase())
                .collect();
            let holds_spaced = words.iter().any(|w| !is_stopword(w) && spaced.iter().any(|q| same_stem(q, w)));
            if holds_spaced || unspaced.iter().any(|q| chunk.contains(q.as_str())) {
                let at = piece_at(&chunk, s.anchor).to_lowercase();
                let at_term = spaced.iter().any(|q| same_stem(q, &at)) || unspaced.iter().any(|q| chunk[s.anchor..].starts_with(q.as_str()));
                proptest::prop_assert!(at_term, "anchor {} at {at:?}", s.anchor);
                if at.len() <= 60 {
                    proptest::prop_assert!(s.text.contains(piece_at(&chunk, s.anchor)), "{:?} lacks the anchor's word", s.text);
                }
            }
            let inner = s.text.strip_prefix('…').unwrap_or(&s.text);
            let inner = inner.strip_suffix('…').unwrap_or(inner);
            for word in inner.split(' ') {
                proptest::prop_assert!(chunk.contains(word), "{word:?} is not the chunk's");
            }
            for term in &s.terms {
                let the_chunks = words.contains(term) || (term.chars().all(is_unspaced) && chunk.contains(term.as_str()));
                proptest::prop_assert!(the_chunks && !is_stopword(term), "{term:?}");
            }
        }
    }
}
