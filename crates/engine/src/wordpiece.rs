//! BERT's WordPiece tokenization of ASCII text, done here, with the tokenizers library's ids.
//!
//! Why: on a GPU the encoder embeds texts faster than the tokenizers library tokenizes them on all of
//! the host's cores (H200, all-MiniLM-L6-v2: 8.6–9.0M tokens/s for the model, 3–6M for the library
//! on 16 cores, BENCHMARKS.md), so "texts in, vectors out" was bound by the tokenizer. The library
//! keeps every character's alignment to the original text and builds offsets, word indices and a
//! string per token; the embedder needs only the ids.
//!
//! What it covers, and only that: a tokenizer.json that is BERT's pipeline (a `BertNormalizer` that
//! cleans the text, the `BertPreTokenizer`, a `WordPiece` model, a post-processor that puts fixed ids
//! around the sequence; [`WordPieceAscii::from_tokenizer`] says `None` for anything else). A text is
//! cut at ASCII whitespace, which ends a word in every step of that pipeline; a piece that is all
//! ASCII is cleaned of control characters, lowercased when the normalizer lowercases, split at
//! punctuation and matched greedily against the vocabulary here; a piece with any other character
//! goes to the library alone (its normalization and splits work character by character, so the piece
//! gives the same ids alone as inside the text). A text holding an added token's string, such as
//! `[SEP]`, goes to the library whole. The integration tests hold it to the library's ids on both
//! benchmark corpora and on generated texts of every kind of character it treats differently.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use aho_corasick::AhoCorasick;
use rustc_hash::FxHasher;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{Encoding, Model, ModelWrapper, Token, Tokenizer};

type Vocab = HashMap<Box<[u8]>, u32, BuildHasherDefault<FxHasher>>;

/// An id the vocabulary cannot hold, used once at start-up to find where the post-processor puts
/// the sequence between its special tokens.
const SENTINEL: u32 = u32::MAX - 7;

pub struct WordPieceAscii {
    /// Every vocabulary entry: what a word's first piece is looked up in.
    starts: Vocab,
    /// The entries that begin with the continuing-subword prefix (`##`), without it: the later pieces.
    continues: Vocab,
    unk: u32,
    max_word_bytes: usize,
    lowercase: bool,
    /// The post-processor's ids before and after the sequence ([CLS] and [SEP] for BERT).
    prefix: Vec<u32>,
    suffix: Vec<u32>,
    /// Added tokens' strings, lowercased: a text holding one goes to the library whole.
    added: Vec<String>,
    /// The same strings as one automaton that ignores ASCII case: an ASCII text is searched without
    /// a lowercased copy (other texts are lowercased first, as Unicode case can map a non-ASCII
    /// character onto an ASCII letter: the Kelvin sign onto `k`).
    added_ascii: Option<AhoCorasick>,
}

impl WordPieceAscii {
    /// The fast path for `tokenizer` (padding and truncation already off), or `None` when its
    /// pipeline is not BERT's.
    pub fn from_tokenizer(tokenizer: &Tokenizer) -> Option<Self> {
        let lowercase = match tokenizer.get_normalizer()? {
            NormalizerWrapper::BertNormalizer(n) if n.clean_text => n.lowercase,
            _ => return None,
        };
        if !matches!(tokenizer.get_pre_tokenizer()?, PreTokenizerWrapper::BertPreTokenizer(_)) {
            return None;
        }
        let ModelWrapper::WordPiece(model) = tokenizer.get_model() else { return None };
        if model.continuing_subword_prefix.is_empty() {
            return None;
        }
        let mut starts = Vocab::default();
        let mut continues = Vocab::default();
        for (piece, id) in model.get_vocab() {
            if let Some(rest) = piece.strip_prefix(model.continuing_subword_prefix.as_str()) {
                continues.insert(rest.as_bytes().into(), id);
            }
            starts.insert(piece.into_bytes().into(), id);
        }
        let unk = *starts.get(model.unk_token.as_bytes())?;
        let (prefix, suffix) = special_ids_around(tokenizer)?;
        let added: Vec<String> =
            tokenizer.get_added_tokens_decoder().into_values().map(|t| t.content.to_lowercase()).filter(|c| !c.is_empty()).collect();
        // Without the automaton (it cannot fail for a handful of short strings, but if it did) every
        // text takes the lowercased search: slower, the same answer.
        let added_ascii = AhoCorasick::builder().ascii_case_insensitive(true).build(&added).ok();
        Some(Self { starts, continues, unk, max_word_bytes: model.max_input_chars_per_word, lowercase, prefix, suffix, added, added_ascii })
    }

    /// The ids of `text` with the special tokens, as `tokenizer.encode_fast(text, true)` gives them.
    pub fn encode(&self, text: &str, tokenizer: &Tokenizer) -> tokenizers::Result<Vec<u32>> {
        if self.holds_added_token(text) {
            return Ok(tokenizer.encode_fast(text, true)?.get_ids().to_vec());
        }
        let mut ids = Vec::with_capacity(self.prefix.len() + text.len() / 3 + self.suffix.len());
        ids.extend_from_slice(&self.prefix);
        let mut word = Vec::with_capacity(64);
        for piece in text.split([' ', '\t', '\n', '\r']) {
            if piece.is_ascii() {
                self.ascii_piece(piece.as_bytes(), &mut word, &mut ids);
            } else {
                ids.extend_from_slice(tokenizer.encode_fast(piece, false)?.get_ids());
            }
        }
        ids.extend_from_slice(&self.suffix);
        Ok(ids)
    }

    fn holds_added_token(&self, text: &str) -> bool {
        if self.added.is_empty() {
            return false;
        }
        if let Some(automaton) = self.added_ascii.as_ref().filter(|_| text.is_ascii()) {
            return automaton.is_match(text);
        }
        let lower = text.to_lowercase();
        self.added.iter().any(|a| lower.contains(a.as_str()))
    }

    /// An ASCII piece between whitespace: control characters dropped (they join what is around
    /// them), each punctuation mark a word of its own, every word through WordPiece.
    fn ascii_piece(&self, piece: &[u8], word: &mut Vec<u8>, ids: &mut Vec<u32>) {
        word.clear();
        for &b in piece {
            if b.is_ascii_control() {
                continue;
            }
            if b.is_ascii_punctuation() {
                self.word_piece(word, ids);
                word.clear();
                self.word_piece(&[b], ids);
            } else {
                word.push(if self.lowercase { b.to_ascii_lowercase() } else { b });
            }
        }
        self.word_piece(word, ids);
    }

    /// Greedy longest match from the left; a word with a part no entry matches, or longer than the
    /// model takes, is one unknown token.
    fn word_piece(&self, word: &[u8], ids: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        if word.len() > self.max_word_bytes {
            ids.push(self.unk);
            return;
        }
        let mark = ids.len();
        let mut start = 0;
        while start < word.len() {
            let vocab = if start == 0 { &self.starts } else { &self.continues };
            let Some((end, id)) = (start + 1..=word.len()).rev().find_map(|end| vocab.get(&word[start..end]).map(|&id| (end, id))) else {
                ids.truncate(mark);
                ids.push(self.unk);
                return;
            };
            ids.push(id);
            start = end;
        }
    }
}

/// The ids the tokenizer's post-processor puts before and after a single sequence, found by running
/// it on a one-token sequence; `None` when it does anything else with it.
fn special_ids_around(tokenizer: &Tokenizer) -> Option<(Vec<u32>, Vec<u32>)> {
    let one = Encoding::from_tokens(vec![Token { id: SENTINEL, value: "x".into(), offsets: (0, 1) }], 0);
    let ids = tokenizer.post_process(one, None, true).ok()?.get_ids().to_vec();
    let at = ids.iter().position(|&i| i == SENTINEL)?;
    if ids.iter().filter(|&&i| i == SENTINEL).count() != 1 {
        return None;
    }
    Some((ids[..at].to_vec(), ids[at + 1..].to_vec()))
}
