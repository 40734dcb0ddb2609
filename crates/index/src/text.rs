//! Text files in whatever encoding they were saved in.
//!
//! Why not UTF-8 only: a real folder holds notes saved by Windows editors (Windows-1252), old
//! exports in Latin-1 or Shift_JIS, and UTF-16 files from PowerShell and Excel; refusing them loses
//! most of what a person keeps. The order of the checks is the order of certainty: a byte-order
//! mark says what the file is; UTF-16 without a mark shows as zero bytes in every other position
//! (and would pass for UTF-8 otherwise); valid UTF-8 is almost never an accident; a file with other
//! zero or control bytes is not text at all (an executable, an image renamed .txt) and is refused
//! with what gave it away; anything else is handed to chardetng (Firefox's detector) and decoded by
//! encoding_rs. Whatever was not UTF-8 is named in a note kept with the document, so a reader can
//! tell how its text was read.

use encoding_rs::{Encoding, UTF_16BE, UTF_16LE, UTF_8};

use crate::extract::ExtractError;

/// How many leading bytes the binary and UTF-16 checks look at.
const SNIFF_BYTES: usize = 64 * 1024;

/// A file's text and how it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub text: String,
    pub encoding: &'static Encoding,
    pub how: How,
    /// Byte sequences that were not valid in the encoding, each replaced by U+FFFD.
    pub replaced: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// A byte-order mark named the encoding.
    ByteOrderMark,
    /// The bytes are valid UTF-8.
    Utf8,
    /// Zero bytes in every other position: UTF-16 without a mark.
    Utf16Pattern,
    /// Neither: chardetng's guess.
    Guessed,
}

impl Decoded {
    /// What a reader should know about how the text was read: None for plain UTF-8.
    pub fn note(&self) -> Option<String> {
        let name = self.encoding.name();
        let how = match self.how {
            How::Utf8 if !self.replaced => return None,
            How::Utf8 => "UTF-8",
            How::ByteOrderMark if self.encoding == UTF_8 && !self.replaced => return None,
            How::ByteOrderMark => "named by its byte-order mark",
            How::Utf16Pattern => "UTF-16 without a byte-order mark, from its zero bytes",
            How::Guessed => "guessed: the file is not UTF-8 and has no byte-order mark",
        };
        let replaced = if self.replaced { "; bytes that were not valid in it were replaced by \u{fffd}" } else { "" };
        Some(format!("read as {name} ({how}){replaced}"))
    }
}

/// Decodes a text file's bytes (see the module docs); an error only for a file that is not text.
pub fn decode(bytes: &[u8]) -> Result<Decoded, ExtractError> {
    if let Some((encoding, bom)) = Encoding::for_bom(bytes) {
        let (text, replaced) = encoding.decode_without_bom_handling(&bytes[bom..]);
        return Ok(Decoded { text: text.into_owned(), encoding, how: How::ByteOrderMark, replaced });
    }
    // Before UTF-8: UTF-16 of ASCII text is valid UTF-8 too, with a zero in every other byte.
    if let Some(encoding) = utf16_pattern(bytes) {
        let (text, replaced) = encoding.decode_without_bom_handling(bytes);
        return Ok(Decoded { text: text.into_owned(), encoding, how: How::Utf16Pattern, replaced });
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        if let Some(reason) = not_text(bytes) {
            return Err(ExtractError::Binary(reason));
        }
        return Ok(Decoded { text: text.to_string(), encoding: UTF_8, how: How::Utf8, replaced: false });
    }
    if let Some(reason) = not_text(bytes) {
        return Err(ExtractError::Binary(reason));
    }
    if mostly_utf8(bytes) {
        // UTF-8 with a few stray bytes (a cut-off download, one pasted Windows quote): the
        // guesser would read the whole file as a legacy encoding and garble every accent in it.
        let text = String::from_utf8_lossy(bytes).into_owned();
        return Ok(Decoded { text, encoding: UTF_8, how: How::Utf8, replaced: true });
    }
    let mut detector = chardetng::EncodingDetector::new();
    detector.feed(bytes, true);
    let encoding = detector.guess(None, true);
    let (text, replaced) = encoding.decode_without_bom_handling(bytes);
    Ok(Decoded { text: text.into_owned(), encoding, how: How::Guessed, replaced })
}

/// Does invalid UTF-8 still look like UTF-8: more valid multi-byte characters than invalid bytes?
/// Text in a legacy single-byte encoding has almost no valid multi-byte sequences (an accented
/// letter there is one high byte between ASCII ones), so it goes to the guesser.
fn mostly_utf8(bytes: &[u8]) -> bool {
    let (mut multibyte, mut invalid) = (0usize, 0usize);
    for chunk in bytes.utf8_chunks() {
        multibyte += chunk.valid().chars().filter(|c| !c.is_ascii()).count();
        invalid += chunk.invalid().len();
    }
    multibyte > invalid
}

/// UTF-16 without a mark: in its first bytes, zeros fill one of the two byte positions (the high
/// byte of Latin-script characters) and almost none of the other.
fn utf16_pattern(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES) & !1];
    if head.len() < 8 {
        return None;
    }
    let pairs = head.len() / 2;
    let zeros_at = |offset: usize| head.iter().skip(offset).step_by(2).filter(|&&b| b == 0).count();
    let (even, odd) = (zeros_at(0), zeros_at(1));
    if odd * 10 >= pairs * 4 && even * 20 < pairs {
        Some(UTF_16LE)
    } else if even * 10 >= pairs * 4 && odd * 20 < pairs {
        Some(UTF_16BE)
    } else {
        None
    }
}

/// Why the start of a file is not text: a zero byte, or control characters other than the usual
/// layout ones (tab, line feed, form feed, carriage return, escape) in more than 1 of 100 bytes.
fn not_text(bytes: &[u8]) -> Option<String> {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    if let Some(at) = head.iter().position(|&b| b == 0) {
        return Some(format!("a zero byte at offset {at}: a binary file"));
    }
    let controls = head.iter().filter(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | 0x1b)).count();
    (controls * 100 > head.len()).then(|| format!("{controls} control bytes in its first {} bytes: a binary file", head.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16(text: &str, big_endian: bool) -> Vec<u8> {
        text.encode_utf16().flat_map(|u| if big_endian { u.to_be_bytes() } else { u.to_le_bytes() }).collect()
    }

    #[test]
    fn byte_order_marks_name_the_encoding_and_utf8_needs_no_note() {
        let plain = decode("naïve café".as_bytes()).unwrap();
        assert_eq!((plain.text.as_str(), plain.how, plain.note()), ("naïve café", How::Utf8, None));
        let marked = decode(b"\xef\xbb\xbfhello").unwrap();
        assert_eq!((marked.text.as_str(), marked.note()), ("hello", None), "the mark is not text");
        for big_endian in [false, true] {
            let mut bytes = if big_endian { vec![0xfe, 0xff] } else { vec![0xff, 0xfe] };
            bytes.extend(utf16("Zoë's report, 2024", big_endian));
            let d = decode(&bytes).unwrap();
            assert_eq!(d.text, "Zoë's report, 2024");
            assert_eq!(d.how, How::ByteOrderMark);
            assert!(d.note().unwrap().contains(if big_endian { "UTF-16BE" } else { "UTF-16LE" }), "{:?}", d.note());
        }
    }

    #[test]
    fn utf16_without_a_mark_is_recognised_by_its_zero_bytes() {
        for big_endian in [false, true] {
            let d = decode(&utf16("Quarterly figures: revenue rose 12% in March.", big_endian)).unwrap();
            assert_eq!(d.text, "Quarterly figures: revenue rose 12% in March.");
            assert_eq!((d.encoding, d.how), (if big_endian { UTF_16BE } else { UTF_16LE }, How::Utf16Pattern));
        }
    }

    #[test]
    fn legacy_encodings_are_guessed_and_named() {
        // Windows-1252 (curly quotes and the euro sign live in 0x80-0x9f), Latin-1 text, Shift_JIS.
        let w1252 = decode(b"The \x93quoted\x94 price was \x80 40 \x96 a bargain.").unwrap();
        assert_eq!(w1252.text, "The \u{201c}quoted\u{201d} price was \u{20ac} 40 \u{2013} a bargain.");
        assert_eq!((w1252.encoding.name(), w1252.how), ("windows-1252", How::Guessed));
        assert!(w1252.note().unwrap().contains("guessed"));
        let sjis = decode(b"\x93\xfa\x96\x7b\x8c\xea\x82\xcc\x95\xb6\x8f\xcd\x82\xc5\x82\xb7\x81\x42\x93\x8c\x8b\x9e\x82\xcd\x91\xe5\x82\xab\x82\xa2\x93\x73\x8e\x73\x82\xc5\x82\xb7\x81\x42").unwrap();
        assert_eq!(sjis.encoding.name(), "Shift_JIS");
        assert_eq!(sjis.text, "日本語の文章です。東京は大きい都市です。");
    }

    #[test]
    fn utf8_with_a_stray_byte_stays_utf8_and_says_what_was_replaced() {
        // One Windows-1252 quote pasted into a long UTF-8 file: the accents elsewhere stay whole.
        let mut bytes = "Le café du coin est fermé le lundi. ".repeat(2000).into_bytes();
        bytes.extend_from_slice(b"He said \x93enough\x94.");
        let d = decode(&bytes).unwrap();
        assert_eq!((d.encoding, d.how, d.replaced), (UTF_8, How::Utf8, true));
        assert!(
            d.text.starts_with("Le café du coin est fermé") && d.text.ends_with("He said \u{fffd}enough\u{fffd}."),
            "{}",
            &d.text[..60]
        );
        assert!(d.note().unwrap().contains("replaced"), "{:?}", d.note());
    }

    #[test]
    fn binary_files_are_refused_with_what_gave_them_away() {
        let Err(ExtractError::Binary(why)) = decode(b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00") else {
            panic!("an executable is not text")
        };
        assert!(why.contains("zero byte at offset 7"), "{why}");
        let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 | 1).collect();
        assert!(matches!(decode(&noise), Err(ExtractError::Binary(_))), "control bytes all over: {:?}", decode(&noise).map(|d| d.how));
        // Layout characters are text.
        assert!(decode(b"a\tb\x0cc\r\nd \x1b[1mbold\x1b[0m").is_ok());
    }
}
