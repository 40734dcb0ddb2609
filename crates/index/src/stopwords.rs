//! Words too common to rank by, to place a snippet by, or to mark in a hit.
//!
//! One list for the three jobs, so that what a hit marks is what ranked it. English first; then
//! the commonest function words of French, German and Spanish, the languages a person's folder
//! most often mixes with English. A word that is also an English content word stays out of the
//! other languages' lists even when it is their commonest word ("die", "man", "son", "will",
//! "fast", "art", "sin", "con", "pour", "comment", "den", "mit"), and so does a command's name
//! ("du", "su"): dropping it would cost an English query a real word, while keeping it costs a
//! German or French query one mark too many. Leaving a word out of the keyword ranking costs little
//! anyway: the exact-phrase ranking still uses every word.

/// Lowercase, sorted within each language for reading; looked up in a few dozen comparisons.
const STOPWORDS: &[&str] = &[
    // English.
    "about", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do", "does",
    "for", "from", "has", "have", "he", "her", "him", "his", "how", "if", "in", "into", "is", "it", "its", "many", "me", "much", "my",
    "near", "no", "not", "of", "on", "one", "or", "our", "out", "she", "should", "so", "some", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "to", "up", "was", "we", "were", "what", "when", "where", "which", "who", "whom",
    "whose", "why", "with", "would", "yes", "you", "your", // French.
    "au", "aux", "avec", "ce", "ces", "cette", "combien", "dans", "des", "elle", "est", "et", "il", "ils", "la", "le", "les", "leur",
    "mais", "mes", "nous", "ou", "où", "par", "pas", "que", "qui", "quoi", "sont", "sur", "une", "vous", // German.
    "auf", "aus", "das", "dem", "der", "ein", "eine", "einem", "einen", "einer", "für", "ich", "ist", "nicht", "oder", "sich", "sie",
    "sind", "und", "viele", "von", "wie", "wir", "zu", "zum", "zur", // Spanish.
    "al", "como", "cuántas", "cuántos", "de", "del", "el", "en", "es", "las", "lo", "los", "más", "para", "por", "se", "un", "una", "uno",
];

/// Whether a lowercase word is too common to rank, place a snippet or mark a hit by; every
/// one-character word is, but for a Chinese or Japanese character, which can be a word.
pub fn is_stopword(word: &str) -> bool {
    let mut chars = word.chars();
    let short = match (chars.next(), chars.next()) {
        (None, _) => true,
        (Some(c), None) => !crate::segment::is_unspaced(c),
        _ => false,
    };
    short || STOPWORDS.contains(&word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_are_lowercase_and_hold_no_word_twice() {
        let mut seen = std::collections::HashSet::new();
        for word in STOPWORDS {
            assert_eq!(*word, word.to_lowercase(), "{word}");
            assert!(seen.insert(word), "{word} twice");
        }
    }

    #[test]
    fn question_words_are_stopwords_in_each_language_and_content_words_are_not() {
        for word in ["how", "many", "much", "combien", "wie", "viele", "cuántos", "the", "der", "les", "x", "é"] {
            assert!(is_stopword(word), "{word}");
        }
        for word in ["vacation", "days", "die", "man", "son", "will", "mit", "du", "su", "urlaubstage", "congés", "ai", "uk"] {
            assert!(!is_stopword(word), "{word}");
        }
    }
}
