//! What is done to a summary after the model wrote it: a loop detector, and cutting at the last
//! sentence end when the token budget ran out.
//!
//! Why a detector when decoding already penalizes repetition: the penalty and n-gram blocking make a
//! loop unlikely, not impossible (a small model can loop on paraphrases, and the settings that
//! suit most documents are too weak for a few). A loop is cheap to see in the text, and a summary
//! that loops is worse than one summarized again with stronger settings, so the summarizer
//! checks every output with [`repeated_ngram`] and retries the ones it flags.
//!
//! Why cut at a sentence end: a summary stopped by the budget ends mid-word or mid-sentence; the
//! sentences before are whole, and a reader is better served by those alone.

use std::collections::HashMap;

/// Word n-grams that flag a loop: any 4 words in a row ...
pub const LOOP_NGRAM_WORDS: usize = 4;
/// ... occurring this often. Twice is common in honest prose ("the renovation of the bridge"
/// in the first and last sentence); three times in a few sentences is a loop.
pub const LOOP_NGRAM_TIMES: usize = 3;

/// Lowercase words with the punctuation around them removed.
fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase()).filter(|w| !w.is_empty()).collect()
}

/// The first word n-gram (of `n` words) that occurs at least `times` times in `text`, with its
/// count; case and punctuation are ignored.
pub fn repeated_ngram(text: &str, n: usize, times: usize) -> Option<(String, usize)> {
    let words = words(text);
    if n == 0 || words.len() < n {
        return None;
    }
    let mut counts: HashMap<&[String], usize> = HashMap::new();
    for gram in words.windows(n) {
        *counts.entry(gram).or_default() += 1;
    }
    words.windows(n).find(|g| counts[g] >= times).map(|g| (g.join(" "), counts[g]))
}

/// Whether a summary loops: a word 4-gram occurs 3 times or more.
pub fn loops(text: &str) -> bool {
    repeated_ngram(text, LOOP_NGRAM_WORDS, LOOP_NGRAM_TIMES).is_some()
}

/// `text` up to and including its last sentence end (`.`, `!` or `?`, with any closing quotes or
/// brackets, followed by whitespace or the end) or the end of its last whole list item ("- ...",
/// "2. ..." followed by a line break), whichever comes later; the whole text when it has neither. A list marker ("2." at the start of a line) and a
/// decimal point are not sentence ends.
pub fn end_at_sentence(text: &str) -> &str {
    let text = text.trim_end();
    let bytes = text.as_bytes();
    let mut cut = None;
    for (i, c) in text.char_indices() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        // Closing quotes and brackets belong to the sentence.
        let mut end = i + 1;
        while end < bytes.len() && matches!(bytes[end], b'"' | b'\'' | b')' | b']') {
            end += 1;
        }
        let followed_by_space = text[end..].chars().next().is_none_or(char::is_whitespace);
        if !followed_by_space || (c == '.' && is_list_marker(&text[..i])) {
            continue;
        }
        cut = Some(end);
    }
    // A list's items need not end with a stop: a line break after one ends it, and the line the
    // budget cut off is dropped.
    let line_end = text.rfind('\n').map(|i| text[..i].trim_end()).filter(|before| {
        let line = before.rsplit('\n').next().unwrap_or(before).trim_start();
        let number = line.split_once(['.', ')']).is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        line.starts_with(['-', '*', '•']) || number
    });
    let line_end = line_end.map(str::len);
    match cut.max(line_end) {
        Some(end) => &text[..end],
        None => text,
    }
}

/// Whether the text before a period ends with a list number at the start of a line ("\n2").
fn is_list_marker(before: &str) -> bool {
    let line = before.rsplit('\n').next().unwrap_or(before).trim_start();
    !line.is_empty() && line.chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(warpfold_testkit::cases(10_000))]

        /// A summary in any script is cut at a character boundary: what is kept is the start of
        /// the text, ends at a sentence end (`.`, `!` or `?` and what closes it) or a list item's
        /// end when it is shorter than the text, and the loop detector reads it without panicking.
        #[test]
        fn a_summary_in_any_script_is_cut_at_a_sentence_end(text in warpfold_testkit::text(60)) {
            let kept = end_at_sentence(&text);
            proptest::prop_assert!(text.starts_with(kept));
            if kept.len() < text.trim_end().len() {
                let last = kept.trim_end_matches(['"', '\'', ')', ']']).chars().last();
                let at_line_end = text[kept.len()..].trim_start_matches(|c: char| c.is_whitespace() && c != '\n').starts_with('\n');
                proptest::prop_assert!(matches!(last, Some('.' | '!' | '?')) || at_line_end, "{kept:?}");
                proptest::prop_assert!(text[kept.len()..].chars().next().is_some_and(char::is_whitespace));
            }
            let _ = loops(&text);
        }
    }

    #[test]
    fn a_word_four_gram_three_times_is_a_loop_twice_is_not() {
        let looping = "This document is a report of a report of a report of a report about bridges.";
        assert_eq!(repeated_ngram(looping, 4, 3), Some(("a report of a".into(), 3)));
        assert!(loops(looping));
        let issue = "The project was a small project that was a small project that was a small project that was";
        assert!(loops(issue));
        // Case and punctuation do not hide a loop.
        assert!(loops("The bridge was closed. the Bridge was closed! THE BRIDGE, WAS CLOSED."));
        // Honest prose may say a phrase twice.
        let fine = "The renovation of the bridge began in 2019. Traffic returned in 2021, and the renovation of the bridge cost 4.2 million euros.";
        assert_eq!(repeated_ngram(fine, 4, 2).map(|g| g.0), Some("the renovation of the".into()));
        assert!(!loops(fine));
        assert!(!loops(""));
        assert!(!loops("one two three"));
    }

    #[test]
    fn a_summary_cut_by_the_budget_ends_at_its_last_sentence() {
        assert_eq!(end_at_sentence("The bridge reopened in 2021. It cost 4.2 million euros and the wor"), "The bridge reopened in 2021.");
        // Decimal points, list markers and abbreviations inside words are not ends.
        assert_eq!(end_at_sentence("It cost 4.2 million. Then\n2. The next"), "It cost 4.2 million.");
        assert_eq!(end_at_sentence("Key facts:\n1. Cost 4.2 million\n2"), "Key facts:\n1. Cost 4.2 million");
        assert_eq!(end_at_sentence("A lease.\n- Rent: 1,180 euros per month\n- Deposit: 2,9"), "A lease.\n- Rent: 1,180 euros per month");
        // Closing quotes stay with their sentence; ! and ? end sentences too.
        assert_eq!(end_at_sentence("He said \"it is done.\" And then"), "He said \"it is done.\"");
        assert_eq!(end_at_sentence("Is it safe? Yes! It is saf"), "Is it safe? Yes!");
        // A text that already ends a sentence, or has none, is kept whole.
        assert_eq!(end_at_sentence("Done. "), "Done.");
        assert_eq!(end_at_sentence("no sentence end at all"), "no sentence end at all");
        assert_eq!(end_at_sentence(""), "");
    }
}
