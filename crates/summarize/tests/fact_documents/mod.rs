//! The documents of tests/data/facts/documents.jsonl (everyday documents with known facts: leases,
//! invoices, letters, handbooks, forms, notes, receipts, long reports), read as the summarizer sees
//! them, and the measures a summary of one is judged by. Shared by tests/facts.rs and
//! examples/facts.rs (`#[path]`).
//!
//! Two measures, each independent of the check the summarizer runs (`grounding`):
//! - [`FactDocument::key_facts_kept`]: the document's stated facts whose keys ("2900", "deposit")
//!   all occur in the summary, compared as the set was written (lower case, no thousands commas);
//! - [`unsupported_numbers_and_names`]: a cruder look for invented figures and names: every
//!   number of the summary, its digits joined, must be one of the document's, and every
//!   capitalized word past a sentence's start must occur in it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, serde::Deserialize)]
pub struct Fact {
    pub statement: String,
    pub keys: Vec<String>,
}

#[derive(Debug, Clone, serde::Deserialize)]
pub struct Trap {
    pub false_statement: String,
    pub why: String,
}

#[derive(Debug, Clone, serde::Deserialize)]
pub struct FactDocument {
    pub id: String,
    pub kind: String,
    pub lang: String,
    /// Rendered as a page image and read back by OCR before summarizing: the OCR'd text is the
    /// source.
    pub scan: bool,
    pub title: String,
    pub text: String,
    pub facts: Vec<Fact>,
    pub traps: Vec<Trap>,
}

pub fn data_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/facts/documents.jsonl")
}

pub fn load(path: &Path) -> Vec<FactDocument> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// The text the summarizer gets: the document's own, or for a scan what OCR reads from its page
/// image (typeset at 300 dpi, then read by Tesseract).
pub fn source_text(doc: &FactDocument) -> Result<String, String> {
    if !doc.scan {
        return Ok(doc.text.clone());
    }
    let font = warpfold_index::scangen::load_font()?;
    let (page, _) = warpfold_index::scangen::typeset(&font, &doc.text, 300);
    let scanned = warpfold_index::scangen::scan(&page, &warpfold_index::scangen::ScanSettings::noisy(300, 7));
    let mut ocr = warpfold_index::ocr::Tesseract::new("eng")?;
    Ok(ocr.read(&scanned, 300)?.text)
}

/// Lower case, thousands commas between digits removed, spaces collapsed: how the set's keys were
/// written.
pub fn normalized(text: &str) -> String {
    let lower = text.to_lowercase();
    let chars: Vec<char> = lower.chars().collect();
    let mut out = String::with_capacity(lower.len());
    for (i, &c) in chars.iter().enumerate() {
        let between_digits = i > 0 && chars[i - 1].is_ascii_digit() && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit());
        if c == ',' && between_digits {
            continue;
        }
        if c.is_whitespace() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl FactDocument {
    /// The facts whose keys all occur in `summary`, a number spelled in words or in digits either
    /// way ("twelve months" is kept by "12 months", "2 weeks" by "two weeks").
    pub fn key_facts_kept(&self, summary: &str) -> usize {
        let s = normalized(summary);
        let spellings = [s.clone(), number_words_as_digits(&s)];
        self.facts
            .iter()
            .filter(|f| {
                f.keys.iter().all(|k| {
                    let k = normalized(k);
                    let k_digits = number_words_as_digits(&k);
                    spellings.iter().any(|s| s.contains(&k) || s.contains(&k_digits))
                })
            })
            .count()
    }
}

/// `text` (already [`normalized`]) with each whole word of [`WORDS`] written in digits.
fn number_words_as_digits(text: &str) -> String {
    text.split(' ')
        .map(|w| {
            let core = w.trim_matches(|c: char| !c.is_alphanumeric());
            match WORDS.iter().find(|(word, _)| *word == core) {
                Some((_, digits)) if !core.is_empty() => w.replacen(core, digits, 1),
                _ => w.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// English number words a document may spell a figure with.
const WORDS: &[(&str, &str)] = &[
    ("one", "1"),
    ("two", "2"),
    ("three", "3"),
    ("four", "4"),
    ("five", "5"),
    ("six", "6"),
    ("seven", "7"),
    ("eight", "8"),
    ("nine", "9"),
    ("ten", "10"),
    ("eleven", "11"),
    ("twelve", "12"),
    ("fifteen", "15"),
    ("twenty", "20"),
    ("thirty", "30"),
    ("sixty", "60"),
    ("ninety", "90"),
    ("hundred", "100"),
];

/// The digit keys of every number in `text`, one list per number: first the whole number, its
/// digit runs joined ("1,450" → 1450) without a decimal part of zeros ("1,450.00" → 1450), then
/// each run alone; leading zeros dropped.
fn number_keys(text: &str) -> Vec<Vec<String>> {
    let mut numbers = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let strip = |s: &str| {
        let t = s.trim_start_matches('0');
        if t.is_empty() {
            "0".to_string()
        } else {
            t.to_string()
        }
    };
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let mut runs = vec![String::new()];
        while i < chars.len() {
            let c = chars[i];
            if c.is_ascii_digit() {
                runs.last_mut().unwrap().push(c);
            } else if matches!(c, ',' | '.' | '\u{a0}' | '\u{202f}') && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit()) {
                runs.push(String::new());
            } else {
                break;
            }
            i += 1;
        }
        let mut whole: Vec<&String> = runs.iter().collect();
        if runs.len() > 1 && runs.last().is_some_and(|r| r.chars().all(|c| c == '0')) {
            whole.pop();
        }
        let mut keys = vec![strip(&whole.iter().map(|s| s.as_str()).collect::<String>())];
        keys.extend(runs.iter().map(|r| strip(r)));
        numbers.push(keys);
    }
    numbers
}

/// Month and day names: a date may be written with or without them.
const CALENDAR: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

fn fold(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    text.nfkd().filter(|c| !unicode_normalization::char::is_combining_mark(*c)).flat_map(char::to_lowercase).collect()
}

/// Numbers and names of `summary` that `source` does not hold (see the module's note).
pub fn unsupported_numbers_and_names(summary: &str, source: &str) -> Vec<String> {
    let mut known: std::collections::HashSet<String> = number_keys(source).into_iter().flatten().collect();
    let folded_source = fold(source);
    for word in folded_source.split(|c: char| !c.is_alphanumeric()) {
        if let Some((_, n)) = WORDS.iter().find(|(w, _)| *w == word) {
            known.insert(n.to_string());
        }
    }
    let mut out = Vec::new();
    // sentences end at a stop before a space or the end ("1,317.60" is one number)
    let mut sentences = Vec::new();
    let mut start = 0;
    for (i, c) in summary.char_indices() {
        let end = i + c.len_utf8();
        if c == '\n' || (matches!(c, '.' | '!' | '?') && summary[end..].chars().next().is_none_or(char::is_whitespace)) {
            sentences.push(&summary[start..end]);
            start = end;
        }
    }
    sentences.push(&summary[start..]);
    for sentence in sentences {
        // the summary's number keys: the first (the whole number) is what must be found
        for keys in number_keys(sentence) {
            if !known.contains(&keys[0]) {
                out.push(keys[0].clone());
            }
        }
        let words: Vec<&str> = sentence
            .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-'))
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .filter(|w| !w.is_empty())
            .collect();
        for w in words.iter().skip(1) {
            let capital =
                w.chars().next().is_some_and(char::is_uppercase) && w.chars().count() > 2 && !CALENDAR.contains(&fold(w).as_str());
            if capital && !folded_source.contains(&fold(w)) {
                out.push(w.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crude_check_finds_invented_numbers_and_names() {
        let source = "Rent: 1,450.00 euros a month from 2026-04-01. Landlord: Héloïse Marchetti. Twelve months.";
        assert!(
            unsupported_numbers_and_names("Héloise Marchetti lets it for 1,450 euros from 1 April 2026 for 12 months.", source).is_empty()
        );
        assert_eq!(unsupported_numbers_and_names("The rent is 1,540 euros. Paid to Hugo.", source), ["1540", "Hugo"]);
        // a decimal point is not a sentence end
        assert!(unsupported_numbers_and_names("A new rate makes the payment £1,317.60.", "Your payment: £1,317.60.").is_empty());
    }
}
