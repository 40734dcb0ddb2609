//! Text to token ids, with the model's limits enforced instead of silently applied.
//!
//! Why not the tokenizer.json as shipped: model repositories often enable truncation and fixed padding
//! in it (all-MiniLM-L6-v2's cuts at 128 and pads to 128). warpfold turns both off: padding is the
//! packer's business, and a text that is too long gets an error naming its length, never a quiet cut.
//!
//! Ids for embedding come from [`WordPieceAscii`] where the tokenizer is BERT's (the library's ids,
//! without its per-character bookkeeping: see [`crate::wordpiece`]), from the library otherwise;
//! `WARPFOLD_TOKENIZER=library` uses the library for everything. Chunking needs each token's offsets
//! and always uses the library.
//!
//! Why the prefixes are the encoder's: a model like e5 wants `query: ` or `passage: ` in front of
//! each text, and the prefix costs tokens of the model's limit. The encoder knows both the prefix
//! ([`InputPrefixes`], from the model folder) and the limit, so callers say what a text is
//! ([`TextRole`]) and the encoder writes it as the model wants it; the chunker budgets the passage
//! prefix while its spans stay offsets into the text as written.

use std::borrow::Cow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use tokenizers::{PostProcessor, Tokenizer};

use crate::wordpiece::WordPieceAscii;

pub use warpfold_backend::model_dir::{InputPrefixes, TextRole};

#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize)]
pub enum TextError {
    #[error("the text is empty")]
    Empty,
    #[error("the text is {tokens} tokens long; the model takes at most {max} (split it into chunks, e.g. with `warpfold index`)")]
    TooLong { tokens: usize, max: usize },
    #[error("tokenizer failed: {0}")]
    Tokenizer(String),
}

/// A span of a text that tokenizes to at most the model's limit.
#[derive(Debug, Clone, PartialEq)]
pub struct TextChunk {
    /// Byte offsets into the source text.
    pub start: usize,
    pub end: usize,
    pub tokens: usize,
}

pub struct TextEncoder {
    tokenizer: Tokenizer,
    fast: Option<WordPieceAscii>,
    max_tokens: usize,
    prefixes: InputPrefixes,
    /// Tokens the query prefix and the passage prefix add.
    prefix_tokens: [usize; 2],
}

/// Whether tokenizer.json files are read by the tokenizers library alone, without the
/// [`WordPieceAscii`] fast path ([`tokenize_with_library_only`]).
static LIBRARY_ONLY: AtomicBool = AtomicBool::new(false);

/// Leaves the fast path out of encoders made from now on, to measure the library alone (the
/// front's `WARPFOLD_TOKENIZER=library`, docs/settings.md).
pub fn tokenize_with_library_only(on: bool) {
    LIBRARY_ONLY.store(on, Ordering::Relaxed);
}

impl TextEncoder {
    /// A tokenizer.json, with the [`WordPieceAscii`] fast path where it is BERT's.
    pub fn from_file(path: &Path, max_tokens: usize) -> Result<Self, TextError> {
        let mut tokenizer = Tokenizer::from_file(path).map_err(|e| TextError::Tokenizer(format!("{}: {e}", path.display())))?;
        // Before the fast path is built from it: it takes the tokenizer's padding and truncation
        // with it (all-MiniLM-L6-v2's file pads to 128, and a padded query is another vector).
        unpadded(&mut tokenizer)?;
        let fast = if LIBRARY_ONLY.load(Ordering::Relaxed) { None } else { WordPieceAscii::from_tokenizer(&tokenizer) };
        Self::new(tokenizer, fast, max_tokens)
    }

    /// A tokenizer built in code (e5's, from its model file). The library makes every id: the
    /// fast path's equality with the library is checked for tokenizer.json files of BERT only.
    pub fn from_tokenizer(tokenizer: Tokenizer, max_tokens: usize) -> Result<Self, TextError> {
        Self::new(tokenizer, None, max_tokens)
    }

    /// Padding and truncation off, whatever the tokenizer came with (see the module's docs).
    fn new(mut tokenizer: Tokenizer, fast: Option<WordPieceAscii>, max_tokens: usize) -> Result<Self, TextError> {
        unpadded(&mut tokenizer)?;
        Ok(Self { tokenizer, fast, max_tokens, prefixes: InputPrefixes::default(), prefix_tokens: [0, 0] })
    }

    /// The same encoder writing queries and passages with `prefixes` in front.
    pub fn with_prefixes(mut self, prefixes: InputPrefixes) -> Result<Self, TextError> {
        // What a prefix adds in front of a word, measured on one: "passage: " alone may end in a
        // word-start piece that a following word absorbs.
        let count = |text: &str| -> Result<usize, TextError> {
            self.tokenizer.encode_fast(text, false).map(|e| e.len()).map_err(|e| TextError::Tokenizer(e.to_string()))
        };
        let word = count("a")?;
        let added = |prefix: &str| -> Result<usize, TextError> {
            if prefix.is_empty() {
                Ok(0)
            } else {
                Ok(count(&format!("{prefix}a"))?.saturating_sub(word))
            }
        };
        self.prefix_tokens = [added(&prefixes.query)?, added(&prefixes.passage)?];
        self.prefixes = prefixes;
        Ok(self)
    }

    /// What this model wants in front of a text of `role` (empty for most models).
    pub fn prefix(&self, role: TextRole) -> &str {
        self.prefixes.for_role(role)
    }

    /// Tokens a text of `role` gets on top of its own: the special tokens and the prefix's.
    pub fn added_tokens(&self, role: TextRole) -> usize {
        let prefix = match role {
            TextRole::Query => self.prefix_tokens[0],
            TextRole::Passage => self.prefix_tokens[1],
        };
        self.special_tokens() + prefix
    }

    /// The same tokenizer with the library doing all of the work (for comparing the two).
    pub fn library_only(mut self) -> Self {
        self.fast = None;
        self
    }

    /// Whether ids come from [`WordPieceAscii`] where it can make them.
    pub fn has_fast_path(&self) -> bool {
        self.fast.is_some()
    }

    /// The longest sequence (special tokens included) this encoder lets through.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Special tokens the model adds around every sequence ([CLS] and [SEP] for BERT).
    pub fn special_tokens(&self) -> usize {
        self.tokenizer.get_post_processor().map(|p| p.added_tokens(false)).unwrap_or(0)
    }

    /// Ids of `text` as written, with the model's special tokens, or why not.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TextError> {
        self.encode_with_prefix("", text)
    }

    /// Ids of `text` as the model wants a text of `role` (its prefix in front), or why not.
    pub fn encode_as(&self, role: TextRole, text: &str) -> Result<Vec<u32>, TextError> {
        self.encode_with_prefix(self.prefix(role), text)
    }

    fn encode_with_prefix(&self, prefix: &str, text: &str) -> Result<Vec<u32>, TextError> {
        let written = prefixed(prefix, text);
        let ids = match &self.fast {
            Some(fast) => fast.encode(&written, &self.tokenizer),
            None => self.tokenizer.encode_fast(written.as_ref(), true).map(|e| e.get_ids().to_vec()),
        };
        self.check(text, ids)
    }

    fn check(&self, text: &str, ids: tokenizers::Result<Vec<u32>>) -> Result<Vec<u32>, TextError> {
        if text.trim().is_empty() {
            return Err(TextError::Empty);
        }
        let ids = ids.map_err(|e| TextError::Tokenizer(e.to_string()))?;
        if ids.len() > self.max_tokens {
            return Err(TextError::TooLong { tokens: ids.len(), max: self.max_tokens });
        }
        Ok(ids)
    }

    /// Encodes many texts as written on all cores; one result per text, in order.
    pub fn encode_batch(&self, texts: &[&str]) -> Vec<Result<Vec<u32>, TextError>> {
        self.encode_batch_with_prefix("", texts)
    }

    /// Encodes many texts of `role` (see [`encode_as`](Self::encode_as)) on all cores.
    pub fn encode_batch_as(&self, role: TextRole, texts: &[&str]) -> Vec<Result<Vec<u32>, TextError>> {
        self.encode_batch_with_prefix(self.prefix(role), texts)
    }

    fn encode_batch_with_prefix(&self, prefix: &str, texts: &[&str]) -> Vec<Result<Vec<u32>, TextError>> {
        if self.fast.is_some() {
            return texts.par_iter().map(|t| self.encode_with_prefix(prefix, t)).collect();
        }
        let written: Vec<Cow<str>> = texts.iter().map(|t| prefixed(prefix, t)).collect();
        let encodings = match self.tokenizer.encode_batch_fast(written.iter().map(Cow::as_ref).collect::<Vec<&str>>(), true) {
            Ok(encodings) => encodings,
            // One bad text fails the whole batch call: fall back to one at a time so the rest survive.
            Err(_) => return texts.iter().map(|t| self.encode_with_prefix(prefix, t)).collect(),
        };
        texts.iter().zip(encodings).map(|(t, e)| self.check(t, Ok(e.get_ids().to_vec()))).collect()
    }

    /// Cuts `text` into spans that each encode as a passage ([`encode_as`](Self::encode_as), the
    /// prefix and special tokens included) to at most `max_tokens`, breaking only between words so
    /// that every span re-tokenizes to the same pieces. Every word lands in exactly one span:
    /// nothing is dropped. Spans are offsets into `text` itself, not into the prefixed text.
    pub fn chunk(&self, text: &str) -> Result<Vec<TextChunk>, TextError> {
        self.chunk_overlapping(text, 0)
    }

    /// Like [`chunk`](Self::chunk), but each span after the first starts about `overlap` tokens
    /// before the previous one ended (at a word start), so a sentence cut by a chunk boundary is
    /// whole in one of the two. Every word lands in at least one span.
    pub fn chunk_overlapping(&self, text: &str, overlap: usize) -> Result<Vec<TextChunk>, TextError> {
        let added = self.added_tokens(TextRole::Passage);
        self.chunk_with_budget(text, self.max_tokens.saturating_sub(added).max(1), overlap, added)
    }

    /// Spans of at most `budget` tokens of `text` itself (`specials`, the special and prefix tokens,
    /// are counted on top).
    pub fn chunk_with_budget(&self, text: &str, budget: usize, overlap: usize, specials: usize) -> Result<Vec<TextChunk>, TextError> {
        let enc = self.tokenizer.encode(text, false).map_err(|e| TextError::Tokenizer(e.to_string()))?;
        let budget = budget.max(1);
        let overlap = overlap.min(budget / 2);
        let offsets = enc.get_offsets();
        let words = enc.get_word_ids();
        let continues_word = |i: usize| words[i].is_some() && words[i] == words[i - 1];
        let n = offsets.len();
        let mut chunks = Vec::new();
        let mut start_tok = 0;
        while start_tok < n {
            let mut end_tok = (start_tok + budget).min(n);
            if end_tok < n {
                // Move the cut back to the start of the word it falls in, unless that word alone is
                // longer than the budget (then cut inside it rather than loop forever).
                let mut cut = end_tok;
                while cut > start_tok + 1 && continues_word(cut) {
                    cut -= 1;
                }
                if cut > start_tok + 1 || !continues_word(end_tok) {
                    end_tok = cut;
                }
            }
            chunks.push(TextChunk { start: offsets[start_tok].0, end: offsets[end_tok - 1].1, tokens: end_tok - start_tok + specials });
            if end_tok >= n {
                break;
            }
            // The next span re-reads the last `overlap` tokens, from the first word start at or
            // after that point, and always moves forward.
            let mut next = end_tok.saturating_sub(overlap).max(start_tok + 1);
            while next < end_tok && continues_word(next) {
                next += 1;
            }
            start_tok = next;
        }
        Ok(chunks)
    }
}

/// `text` with `prefix` in front, copied only when there is a prefix.
/// Padding and truncation off (see the module's docs).
fn unpadded(tokenizer: &mut Tokenizer) -> Result<(), TextError> {
    tokenizer.with_padding(None);
    tokenizer.with_truncation(None).map_err(|e| TextError::Tokenizer(e.to_string()))?;
    Ok(())
}

fn prefixed<'a>(prefix: &str, text: &'a str) -> Cow<'a, str> {
    if prefix.is_empty() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(format!("{prefix}{text}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::Whitespace;
    use tokenizers::processors::template::TemplateProcessing;
    use tokenizers::{PaddingParams, TruncationParams};

    /// A word-level tokenizer built in code, with padding to 16 and truncation at 4 switched on, as
    /// tokenizers often ship.
    fn word_tokenizer() -> Tokenizer {
        let words = ["[UNK]", "[CLS]", "[SEP]", "query", "passage", ":", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
        let vocab = words.iter().enumerate().map(|(i, w)| (w.to_string(), i as u32)).collect();
        let model = WordLevel::builder().vocab(vocab).unk_token("[UNK]".into()).build().unwrap();
        let mut tokenizer = Tokenizer::new(model);
        tokenizer.with_pre_tokenizer(Some(Whitespace {}));
        let template = TemplateProcessing::builder()
            .try_single("[CLS] $A [SEP]")
            .unwrap()
            .special_tokens(vec![("[CLS]", 1), ("[SEP]", 2)])
            .build()
            .unwrap();
        tokenizer.with_post_processor(Some(template));
        tokenizer.with_padding(Some(PaddingParams { strategy: tokenizers::PaddingStrategy::Fixed(16), ..PaddingParams::default() }));
        tokenizer.with_truncation(Some(TruncationParams { max_length: 4, ..TruncationParams::default() })).unwrap();
        tokenizer
    }

    fn e5_style() -> InputPrefixes {
        InputPrefixes { query: "query: ".into(), passage: "passage: ".into() }
    }

    #[test]
    fn a_tokenizer_built_in_code_neither_pads_nor_truncates_nor_takes_the_wordpiece_path() {
        let encoder = TextEncoder::from_tokenizer(word_tokenizer(), 64).unwrap();
        assert!(!encoder.has_fast_path());
        assert_eq!(encoder.encode("a b c d e f").unwrap(), vec![1, 6, 7, 8, 9, 10, 11, 2]);
        let short = TextEncoder::from_tokenizer(word_tokenizer(), 5).unwrap();
        assert_eq!(short.encode("a b c d"), Err(TextError::TooLong { tokens: 6, max: 5 }));
    }

    #[test]
    fn a_role_is_written_with_its_prefix_and_a_text_as_written_without() {
        let encoder = TextEncoder::from_tokenizer(word_tokenizer(), 64).unwrap().with_prefixes(e5_style()).unwrap();
        assert_eq!(encoder.encode_as(TextRole::Query, "a b").unwrap(), vec![1, 3, 5, 6, 7, 2]);
        assert_eq!(encoder.encode_as(TextRole::Passage, "a b").unwrap(), vec![1, 4, 5, 6, 7, 2]);
        assert_eq!(encoder.encode("a b").unwrap(), vec![1, 6, 7, 2]);
        let batch = encoder.encode_batch_as(TextRole::Query, &["a", " ", "b"]);
        assert_eq!(batch, vec![Ok(vec![1, 3, 5, 6, 2]), Err(TextError::Empty), Ok(vec![1, 3, 5, 7, 2])]);
        assert_eq!((encoder.added_tokens(TextRole::Query), encoder.added_tokens(TextRole::Passage)), (4, 4));
        // Without prefixes a role changes nothing.
        let plain = TextEncoder::from_tokenizer(word_tokenizer(), 64).unwrap();
        assert_eq!(plain.encode_as(TextRole::Query, "a b").unwrap(), plain.encode("a b").unwrap());
        assert_eq!(plain.added_tokens(TextRole::Passage), plain.special_tokens());
    }

    #[test]
    fn chunks_budget_the_passage_prefix_and_point_into_the_text_as_written() {
        // 8 tokens a sequence: [CLS] passage : + 4 words + [SEP].
        let encoder = TextEncoder::from_tokenizer(word_tokenizer(), 8).unwrap().with_prefixes(e5_style()).unwrap();
        let text = "a b c d e f g h i j";
        let chunks = encoder.chunk(text).unwrap();
        let spans: Vec<&str> = chunks.iter().map(|c| &text[c.start..c.end]).collect();
        assert_eq!(spans, ["a b c d", "e f g h", "i j"]);
        for (chunk, span) in chunks.iter().zip(spans) {
            let ids = encoder.encode_as(TextRole::Passage, span).unwrap();
            assert_eq!(ids.len(), chunk.tokens);
            assert!(ids.len() <= encoder.max_tokens());
        }
    }
}
