//! Word stems for the keyword index, so that a query finds other forms of its words.
//!
//! Why: FTS5 matches words as written. A German question about `Häusern` missed a page that says
//! `Häuser`, a Russian one about `файла` the page about `файл`, and an English one about
//! `configuring` the page that says `configure`. On Debian's translated man pages (BENCHMARKS.md,
//! "Search in other languages") that left the keyword ranking 0.03-0.08 nDCG@10 below a BM25 with
//! Snowball stemming in German, Russian and English. A stemmer needs the text's language; each
//! chunk's is told by [`crate::language::detect`] (the same detection that is stored with it).
//!
//! How: a chunk's keyword text ([`crate::segment::fts_words`]) is its words as written, followed by
//! the Snowball stem of every word whose stem differs from it, in the chunk's language. The words
//! keep their positions, so exact phrases match as before; only the chunk's length grows. A query
//! word matches as written or as its stem in each language of the index that has a stemmer
//! ([`QueryStems::forms`]): a chunk holding the word as written matches both and ranks above one
//! holding another form of it, as an exact match should.
//!
//! Measured (nDCG@10 of the keyword ranking, known-item sets of BENCHMARKS.md): English man pages
//! 0.606 → 0.622, the Debian handbook 0.545 → 0.559, Russian 0.689 → 0.729, French 0.692 → 0.706;
//! Spanish 0.672 → 0.661, Italian 0.776 → 0.763 and German 0.624 → 0.618 lost a little.

use std::borrow::Cow;

use rust_stemmers::{Algorithm, Stemmer};

/// The Snowball stemmer for a language told by [`crate::language::detect`] (ISO 639-3), when
/// there is one.
pub fn algorithm(language: &str) -> Option<Algorithm> {
    Some(match language {
        "ara" => Algorithm::Arabic,
        "dan" => Algorithm::Danish,
        "nld" => Algorithm::Dutch,
        "eng" => Algorithm::English,
        "fin" => Algorithm::Finnish,
        "fra" => Algorithm::French,
        "deu" => Algorithm::German,
        "ell" => Algorithm::Greek,
        "hun" => Algorithm::Hungarian,
        "ita" => Algorithm::Italian,
        "nob" | "nno" => Algorithm::Norwegian,
        "por" => Algorithm::Portuguese,
        "ron" => Algorithm::Romanian,
        "rus" => Algorithm::Russian,
        "spa" => Algorithm::Spanish,
        "swe" => Algorithm::Swedish,
        "tam" => Algorithm::Tamil,
        "tur" => Algorithm::Turkish,
        _ => return None,
    })
}

/// The words of `text` as the keyword index splits them (runs of letters and digits), lowercased;
/// only words of letters alone are stemmed.
fn stemmable_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 2 && w.chars().all(char::is_alphabetic))
        .map(str::to_lowercase)
}

/// The stems of `text`'s words in `language` that differ from the words, space-separated, in the
/// order of the words (repeats kept, so a stem counts as often as its forms); empty when the
/// language has no stemmer.
pub fn text_stems(text: &str, language: Option<&str>) -> String {
    let Some(algorithm) = language.and_then(algorithm) else {
        return String::new();
    };
    let stemmer = Stemmer::create(algorithm);
    let mut out = String::new();
    for word in stemmable_words(text) {
        if let Cow::Owned(stem) = stemmer.stem(&word) {
            if stem != word && !stem.is_empty() {
                out.push(' ');
                out.push_str(&stem);
            }
        }
    }
    out
}

/// Every word of `text` (as [`text_stems`] reads them) as its Snowball stem in `language`, in
/// order; `None` when the language has no stemmer. For telling whether two texts use one word in
/// different forms ("Beträge" and "Betrag", "Петровой" and "Петрова").
pub fn stemmed_words(text: &str, language: &str) -> Option<Vec<String>> {
    let stemmer = Stemmer::create(algorithm(language)?);
    Some(stemmable_words(text).map(|word| stemmer.stem(&word).into_owned()).filter(|stem| !stem.is_empty()).collect())
}

/// The stemmers of an index's languages (those of [`crate::store::Store::stem_languages`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryStems {
    algorithms: Vec<Algorithm>,
}

impl QueryStems {
    /// The stemmers for these languages (ISO 639-3), those without one left out, each once.
    pub fn for_languages<'a>(languages: impl IntoIterator<Item = &'a str>) -> QueryStems {
        let mut algorithms = Vec::new();
        for algorithm in languages.into_iter().filter_map(algorithm) {
            if !algorithms.contains(&algorithm) {
                algorithms.push(algorithm);
            }
        }
        QueryStems { algorithms }
    }

    /// No stemming: a query word matches itself only.
    pub fn none() -> QueryStems {
        QueryStems::default()
    }

    /// The forms a lowercase query word matches in the keyword index: the word as written, then
    /// its stem in each language of the index that has a stemmer, each once; the word alone for a
    /// word with digits or of two letters or fewer (which [`text_stems`] leaves unstemmed).
    ///
    /// Why the word too, and not its stems alone as a BM25 over stemmed text would: a chunk whose
    /// language was not told (short, code, tables) holds its words unstemmed, and a chunk holding
    /// the word as written should rank above one holding another form of it. Measured on the
    /// translated man pages (BENCHMARKS.md), the stems alone did better in Italian only and worse
    /// in English, German, French and Spanish.
    pub fn forms(&self, word: &str) -> Vec<String> {
        let mut forms = vec![word.to_string()];
        if word.chars().count() <= 2 || !word.chars().all(char::is_alphabetic) {
            return forms;
        }
        for algorithm in &self.algorithms {
            let stem = Stemmer::create(*algorithm).stem(word).into_owned();
            if !stem.is_empty() && !forms.contains(&stem) {
                forms.push(stem);
            }
        }
        forms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_stemmed_in_their_language_and_only_where_the_stem_differs() {
        assert_eq!(text_stems("Die Häuser am See", Some("deu")), " haus");
        assert_eq!(text_stems("Configuring the networks", Some("eng")), " configur network");
        assert_eq!(text_stems("Ouvrir les fichiers", Some("fra")), " ouvr le fichi");
        assert_eq!(text_stems("открыть файлы", Some("rus")), " откр файл");
        assert_eq!(text_stems("2,900 euros x2", Some("eng")), " euro", "figures and words with digits are left as they are");
        assert_eq!(text_stems("東京の交通網", Some("jpn")), "", "no stemmer: nothing added");
        assert_eq!(text_stems("Häuser", None), "");
    }

    #[test]
    fn words_in_other_forms_have_one_stem() {
        assert_eq!(stemmed_words("Leistungen und Beträge", "deu").unwrap(), ["leistung", "und", "betrag"]);
        assert_eq!(stemmed_words("Leistung, Betrag", "deu").unwrap(), ["leistung", "betrag"]);
        assert_eq!(stemmed_words("Анны Петровой", "rus"), stemmed_words("Анна Петрова", "rus"));
        assert_eq!(stemmed_words("a 2,900 x2", "eng").unwrap(), Vec::<String>::new(), "short words and figures are left out");
        assert_eq!(stemmed_words("東京", "jpn"), None);
    }

    #[test]
    fn a_query_word_matches_as_written_or_as_its_stem_in_each_language_of_the_index() {
        let stems = QueryStems::for_languages(["deu", "eng", "jpn", "deu"]);
        assert_eq!(stems.forms("häusern"), ["häusern", "haus"], "German stems it, English leaves it");
        assert_eq!(QueryStems::for_languages(["eng"]).forms("networks"), ["networks", "network"]);
        assert_eq!(stems.forms("ab"), ["ab"]);
        assert_eq!(stems.forms("x2"), ["x2"]);
        assert_eq!(QueryStems::none().forms("networks"), ["networks"]);
    }
}
