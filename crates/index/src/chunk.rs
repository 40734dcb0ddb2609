//! Documents to model-sized chunks, keeping where each chunk came from.
//!
//! Why chunk by tokens and not characters: the model's limit is in tokens (256 for
//! all-MiniLM-L6-v2), and a character budget either wastes most of it or overflows it on dense
//! text. Chunks break between words, overlap a little so a sentence cut at a boundary is whole in
//! one of them, and together cover every token of the document: nothing is truncated.
//!
//! Why chunks hold the text as written but ids as a passage: a model like e5 wants `passage: ` in
//! front of what it embeds. The encoder adds it when it encodes a chunk and counts its tokens in the
//! budget, while offsets, pages and the stored text stay those of the document.

use sha2::{Digest, Sha256};
use warpfold_engine::tokenize::{TextChunk, TextEncoder, TextError, TextRole};

/// What goes between pages in a document's joined text.
pub const PAGE_SEPARATOR: &str = "\n\n";

#[derive(Debug, Clone, PartialEq)]
pub struct DocumentChunk {
    pub ordinal: usize,
    pub text: String,
    /// SHA-256 of `text`: the key embeddings are stored and reused under.
    pub text_hash: [u8; 32],
    /// Token ids with the model's special tokens and passage prefix, exactly as the text encodes on
    /// its own as a passage.
    pub ids: Vec<u32>,
    /// 1-based pages of the first and last character.
    pub page_start: u32,
    pub page_end: u32,
    /// Pages that begin inside this chunk: (byte offset in `text`, page number).
    pub page_breaks: Vec<(usize, u32)>,
    /// Character (Unicode scalar) offsets into the document's joined text.
    pub char_start: usize,
    pub char_end: usize,
}

impl DocumentChunk {
    /// The page holding byte `offset` of this chunk's text.
    pub fn page_at(&self, offset: usize) -> u32 {
        page_at(self.page_start, &self.page_breaks, offset)
    }
}

/// The page holding byte `offset` of a chunk that starts on `page_start` and has `page_breaks`.
pub fn page_at(page_start: u32, page_breaks: &[(usize, u32)], offset: usize) -> u32 {
    page_breaks.iter().take_while(|(at, _)| *at <= offset).last().map(|(_, p)| *p).unwrap_or(page_start)
}

pub fn text_hash(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Pages joined with [`PAGE_SEPARATOR`], and the byte offset where each page starts.
pub fn join_pages(pages: &[String]) -> (String, Vec<usize>) {
    let mut text = String::with_capacity(pages.iter().map(|p| p.len() + PAGE_SEPARATOR.len()).sum());
    let mut starts = Vec::with_capacity(pages.len());
    for (i, page) in pages.iter().enumerate() {
        if i > 0 {
            text.push_str(PAGE_SEPARATOR);
        }
        starts.push(text.len());
        text.push_str(page);
    }
    (text, starts)
}

/// Byte offsets to character offsets, walking from the last position asked (chunks come in order,
/// overlapping a little), so a long document costs one pass instead of one per chunk.
struct CharCursor<'a> {
    text: &'a str,
    byte: usize,
    chars: usize,
}

impl CharCursor<'_> {
    fn char_offset(&mut self, byte: usize) -> usize {
        if byte >= self.byte {
            self.chars += self.text[self.byte..byte].chars().count();
        } else {
            self.chars -= self.text[byte..self.byte].chars().count();
        }
        self.byte = byte;
        self.chars
    }
}

/// How much text the tokenizer sees at once. Its working memory is tens of bytes per token
/// (ids, offsets, word ids, token strings), so a long document is cut into windows of this size
/// at whitespace, where no token can span the cut; memory then follows the window, not the file.
pub const TOKENIZER_WINDOW_BYTES: usize = 1 << 20;

/// Where the window starting at `start` ends: after the last whitespace in its second half, or
/// (one word longer than half a window) at a character boundary.
fn window_end(text: &str, start: usize, window: usize) -> usize {
    if text.len() - start <= window {
        return text.len();
    }
    let limit = start + window;
    let bytes = text.as_bytes();
    if let Some(at) = bytes[start + window / 2..limit].iter().rposition(|b| b.is_ascii_whitespace()) {
        return start + window / 2 + at + 1;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// The encoder's overlapping spans over `text`, computed window by window.
fn windowed_spans(encoder: &TextEncoder, text: &str, overlap: usize) -> Result<Vec<TextChunk>, TextError> {
    let mut spans = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let end = window_end(text, start, TOKENIZER_WINDOW_BYTES);
        for span in encoder.chunk_overlapping(&text[start..end], overlap)? {
            spans.push(TextChunk { start: span.start + start, end: span.end + start, tokens: span.tokens });
        }
        start = end;
    }
    Ok(spans)
}

/// Cuts a document (its pages) into chunks the encoder accepts, consecutive chunks sharing about
/// `overlap` tokens.
pub fn chunk_document(encoder: &TextEncoder, pages: &[String], overlap: usize) -> Result<Vec<DocumentChunk>, TextError> {
    let (text, page_starts) = join_pages(pages);
    let page_of = |byte: usize| page_starts.partition_point(|&s| s <= byte).max(1) as u32;
    // The special tokens and the passage prefix's, on top of each span's own.
    let specials = encoder.added_tokens(TextRole::Passage);
    let mut cursor = CharCursor { text: &text, byte: 0, chars: 0 };
    let mut chunks = Vec::new();
    for span in windowed_spans(encoder, &text, overlap)? {
        // A span re-encodes to the same pieces in all but freak cases (a tokenizer whose pieces
        // depend on context across a word boundary); then it is cut smaller, never truncated.
        let pieces = match encoder.encode_as(TextRole::Passage, &text[span.start..span.end]) {
            Ok(ids) => vec![(span.start, span.end, ids)],
            Err(TextError::TooLong { tokens, max }) => {
                let budget = (span.tokens - specials).saturating_sub(tokens - max + 8);
                let mut pieces = Vec::new();
                for sub in encoder.chunk_with_budget(&text[span.start..span.end], budget, 0, specials)? {
                    let (start, end) = (span.start + sub.start, span.start + sub.end);
                    pieces.push((start, end, encoder.encode_as(TextRole::Passage, &text[start..end])?));
                }
                pieces
            }
            Err(e) => return Err(e),
        };
        for (start, end, ids) in pieces {
            let chunk_text = text[start..end].to_string();
            let page_start = page_of(start);
            let page_end = page_of(end.saturating_sub(1).max(start));
            let page_breaks = (page_start + 1..=page_end).map(|p| (page_starts[p as usize - 1] - start, p)).collect();
            let char_start = cursor.char_offset(start);
            let char_end = cursor.char_offset(end);
            chunks.push(DocumentChunk {
                ordinal: chunks.len(),
                text_hash: text_hash(&chunk_text),
                text: chunk_text,
                ids,
                page_start,
                page_end,
                page_breaks,
                char_start,
                char_end,
            });
        }
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_pages_know_where_each_page_starts() {
        let pages = vec!["ab".to_string(), String::new(), "cdé".to_string()];
        let (text, starts) = join_pages(&pages);
        assert_eq!(text, "ab\n\n\n\ncdé");
        assert_eq!(starts, vec![0, 4, 6]);
    }

    #[test]
    fn windows_end_after_whitespace_or_at_a_character_boundary() {
        let text = "aaaa bbbb cccc dddd";
        assert_eq!(window_end(text, 0, 100), text.len(), "short text: one window");
        assert_eq!(&text[..window_end(text, 0, 12)], "aaaa bbbb ", "cut after the last space of the window");
        assert_eq!(&text[10..window_end(text, 10, 8)], "cccc ");
        let word = "é".repeat(20); // 40 bytes, no whitespace
        let end = window_end(&word, 0, 9);
        assert!(word.is_char_boundary(end) && end <= 9 && end > 0, "{end}");
        // Windows cover the text exactly, in order.
        let long = "word ".repeat(1000) + &"x".repeat(300);
        let (mut start, mut pieces) = (0, String::new());
        while start < long.len() {
            let end = window_end(&long, start, 256);
            assert!(end > start);
            pieces.push_str(&long[start..end]);
            start = end;
        }
        assert_eq!(pieces, long);
    }

    #[test]
    fn char_cursor_moves_both_ways() {
        let text = "aé€b";
        let mut c = CharCursor { text, byte: 0, chars: 0 };
        assert_eq!(c.char_offset(text.len()), 4);
        assert_eq!(c.char_offset(1), 1);
        assert_eq!(c.char_offset(3), 2);
        assert_eq!(c.char_offset(6), 3);
    }

    #[test]
    fn page_at_follows_the_breaks() {
        let chunk = DocumentChunk {
            ordinal: 0,
            text: String::new(),
            text_hash: [0; 32],
            ids: vec![],
            page_start: 3,
            page_end: 5,
            page_breaks: vec![(10, 4), (20, 5)],
            char_start: 0,
            char_end: 0,
        };
        assert_eq!(chunk.page_at(0), 3);
        assert_eq!(chunk.page_at(9), 3);
        assert_eq!(chunk.page_at(10), 4);
        assert_eq!(chunk.page_at(25), 5);
    }
}
