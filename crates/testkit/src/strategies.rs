//! Property-test strategies for text in every script.
//!
//! Why a strategy of our own for text: `proptest`'s `any::<String>()` draws code points almost
//! uniformly, so it rarely yields what real text holds and what breaks byte arithmetic: a French
//! no-break space before a colon, a narrow no-break space inside a number, an ideographic space,
//! a combining accent after its letter, an emoji joined by ZWJ, a right-to-left mark, a run of Han
//! characters. [`text`] draws words and separators from pools of exactly those, mixed with
//! arbitrary characters, so each of them meets every cut.

use proptest::prelude::*;

/// Whitespace characters of every byte length: ASCII, U+00A0 and U+1680 (2 and 3 bytes), the
/// en/thin/narrow no-break spaces (3 bytes), the ideographic space (3 bytes), line and paragraph
/// separators.
pub const SPACES: &[&str] =
    &[" ", "\n", "\t", "\r\n", "\u{a0}", "\u{1680}", "\u{2002}", "\u{2009}", "\u{202f}", "\u{3000}", "\u{2028}", "\u{2029}", "\u{85}"];

/// Words in many scripts, with what makes them hard: combining marks (decomposed é), ligatures
/// (ﬁ), emoji with ZWJ and skin tones, flags, RTL text with its marks, characters outside the BMP
/// (surrogate pairs in JavaScript), CJK with no spaces between words.
pub const WORDS: &[&str] = &[
    "charges",
    "locatives",
    "référence",
    "re\u{301}fe\u{301}rence",
    "Größe",
    "straße",
    "ﬁnancial",
    "naïve",
    "Ελληνικά",
    "квартира",
    "Москва",
    "مرحبا",
    "\u{200f}שלום\u{200e}",
    "हिन्दी",
    "人口",
    "交通網",
    "東京都の人口は",
    "한국어",
    "👩\u{200d}👩\u{200d}👧",
    "👍🏽",
    "🇫🇷",
    "𝒳𝓎",
    "𠀋",
    "1\u{202f}234,56",
    "2,900",
    "x",
    "a",
    "the",
    "\u{200b}",
    "\u{feff}",
    "\u{301}",
    "...",
    "«",
    "»",
    ":",
    "?",
    "…",
    "'",
    "\"",
];

/// One token of [`text`]: a pooled word, a pooled space, or any character at all.
pub fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(WORDS).prop_map(str::to_string),
        3 => proptest::sample::select(SPACES).prop_map(str::to_string),
        1 => any::<char>().prop_map(String::from),
    ]
}

/// Text of up to `max_tokens` tokens from [`token`].
pub fn text(max_tokens: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(token(), 0..=max_tokens).prop_map(|tokens| tokens.concat())
}

/// A query: a few pooled words (so they occur in [`text`]'s output), separated by pooled spaces.
pub fn query() -> impl Strategy<Value = String> {
    proptest::collection::vec((proptest::sample::select(WORDS), proptest::sample::select(SPACES)), 0..5)
        .prop_map(|parts| parts.into_iter().map(|(w, s)| format!("{w}{s}")).collect())
}

/// A proptest configuration of `cases` cases that does not write regression files into the
/// source tree (a failing case prints its input instead).
pub fn cases(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}
