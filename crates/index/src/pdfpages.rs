//! Repairs to a loaded PDF before pdf-extract reads it (issue 16.4): its page tree walked once and
//! cycle-safe, and each page's content streams joined into one that pdf-extract can parse.
//!
//! Why: pdf-extract 0.12.1 numbers pages with lopdf 0.42's page-tree iterator, which follows /Kids
//! without remembering where it has been. A /Kids entry that points back to an ancestor makes it
//! go round until it has yielded as many pages as the file has objects, and a page listed twice
//! comes out twice; either way every later page gets a wrong number, so facts are cited on the
//! wrong page. And both read a page's /Contents array as one concatenated stream: a first stream
//! that lopdf cannot decode (a standard filter it lacks, /ASCIIHexDecode or /RunLengthDecode) or
//! that holds a token its content lexer stops at (a stray `]`) ends the parse there, so the text
//! in the streams after it is never seen and the page reads as empty.
//!
//! Both are repaired in the loaded document, in memory, and pdf-extract then reads it as before
//! (in the isolated worker, like all PDF parsing).

use std::collections::HashSet;

use lopdf::content::Content;
use lopdf::{Dictionary, Document, Object, ObjectId, Stream};

/// The pages of `doc` in document order, each once: a depth-first walk of /Kids from the catalog's
/// /Pages that never enters a node twice. Only dictionaries typed /Pages and /Page count, as
/// lopdf's own walk has it; entries that are not references are skipped.
pub fn page_ids(doc: &Document) -> Vec<ObjectId> {
    let Ok(root) = doc.catalog().and_then(|c| c.get(b"Pages")).and_then(Object::as_reference) else {
        return Vec::new();
    };
    let mut pages = Vec::new();
    let mut seen = HashSet::from([root]);
    // Each entry: a /Kids array and the position of the next kid to visit in it.
    let mut stack: Vec<(&[Object], usize)> = vec![(kids(doc, root), 0)];
    while let Some((list, next)) = stack.last_mut() {
        let Some(kid) = list.get(*next) else {
            stack.pop();
            continue;
        };
        *next += 1;
        let Ok(id) = kid.as_reference() else { continue };
        let Ok(dict) = doc.get_dictionary(id) else { continue };
        match dict.get_type() {
            Ok(b"Page") if seen.insert(id) => pages.push(id),
            Ok(b"Pages") if seen.insert(id) => stack.push((kids(doc, id), 0)),
            _ => {}
        }
    }
    pages
}

fn kids(doc: &Document, node: ObjectId) -> &[Object] {
    doc.get_dictionary(node).and_then(|d| d.get_deref(b"Kids", doc)).and_then(Object::as_array).map(|k| k.as_slice()).unwrap_or(&[])
}

/// Makes lopdf's (and so pdf-extract's) page numbering follow [`page_ids`]: when the tree has a
/// cycle or lists a page more than once, the root's /Kids becomes the flat list of its pages, each
/// once, in order (the pages keep their /Parent, so inherited attributes are found as before).
/// Returns a note for the document's warnings when something was repaired.
pub fn repair_page_tree(doc: &mut Document) -> Option<String> {
    let walked = page_ids(doc);
    // lopdf's own iterator stops after as many kids as the file has objects, so this is bounded
    // even on a cyclic tree.
    let listed = doc.page_iter().count();
    if listed == walked.len() && doc.page_iter().eq(walked.iter().copied()) {
        return None;
    }
    let root = doc.catalog().and_then(|c| c.get(b"Pages")).and_then(Object::as_reference).ok()?;
    let node = doc.get_object_mut(root).and_then(Object::as_dict_mut).ok()?;
    node.set("Kids", Object::Array(walked.iter().map(|&id| Object::Reference(id)).collect()));
    node.set("Count", walked.len() as i64);
    Some(format!(
        "the page tree loops or lists a page more than once ({listed} entries for {} distinct pages); each page was read once, in order",
        walked.len()
    ))
}

/// Filters lopdf 0.42 decodes itself ([`Stream::decompressed_content`]).
const LOPDF_FILTERS: [&[u8]; 3] = [b"FlateDecode", b"LZWDecode", b"ASCII85Decode"];

fn filters(stream: &Stream) -> Vec<Vec<u8>> {
    match stream.dict.get(b"Filter") {
        Ok(Object::Name(name)) => vec![name.clone()],
        Ok(Object::Array(names)) => names.iter().filter_map(|n| n.as_name().ok().map(<[u8]>::to_vec)).collect(),
        _ => Vec::new(),
    }
}

/// The decoded data of a content stream: lopdf's own decoders where it has them, and ASCIIHex and
/// RunLength (and the abbreviated filter names) here.
pub fn decode_stream(stream: &Stream) -> Result<Vec<u8>, String> {
    let names = filters(stream);
    if names.iter().all(|n| LOPDF_FILTERS.contains(&n.as_slice())) {
        return stream.decompressed_content().or_else(|e| if names.is_empty() { Ok(stream.content.clone()) } else { Err(e.to_string()) });
    }
    let params = |i: usize| match stream.dict.get(b"DecodeParms") {
        Ok(Object::Dictionary(d)) if names.len() == 1 => Some(d.clone()),
        Ok(Object::Array(a)) => a.get(i).and_then(|p| p.as_dict().ok()).cloned(),
        _ => None,
    };
    let mut data = stream.content.clone();
    for (i, name) in names.iter().enumerate() {
        data = match name.as_slice() {
            b"ASCIIHexDecode" | b"AHx" => ascii_hex_decode(&data),
            b"RunLengthDecode" | b"RL" => run_length_decode(&data),
            other => {
                let full: &[u8] = match other {
                    b"Fl" => b"FlateDecode",
                    b"LZW" => b"LZWDecode",
                    b"A85" => b"ASCII85Decode",
                    known => known,
                };
                if !LOPDF_FILTERS.contains(&full) {
                    return Err(format!("unsupported filter /{}", String::from_utf8_lossy(other)));
                }
                let mut dict = Dictionary::new();
                dict.set("Filter", Object::Name(full.to_vec()));
                if let Some(p) = params(i) {
                    dict.set("DecodeParms", Object::Dictionary(p));
                }
                Stream::new(dict, data).decompressed_content().map_err(|e| e.to_string())?
            }
        };
    }
    Ok(data)
}

/// ASCIIHexDecode: hex digit pairs up to `>`, whitespace ignored, an odd last digit padded with 0.
pub fn ascii_hex_decode(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2);
    let mut high: Option<u8> = None;
    for &b in data {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            b'>' => break,
            _ => continue,
        };
        match high.take() {
            Some(h) => out.push(h << 4 | digit),
            None => high = Some(digit),
        }
    }
    if let Some(h) = high {
        out.push(h << 4);
    }
    out
}

/// RunLengthDecode: a length byte n, then n+1 literal bytes (n < 128) or one byte repeated 257-n
/// times (n > 128); 128 ends the data.
pub fn run_length_decode(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while let Some(&n) = data.get(i) {
        match n {
            0..=127 => {
                let end = (i + 2 + n as usize).min(data.len());
                out.extend_from_slice(&data[i + 1..end]);
                i = end;
            }
            128 => break,
            _ => {
                if let Some(&b) = data.get(i + 1) {
                    out.extend(std::iter::repeat_n(b, 257 - n as usize));
                }
                i += 2;
            }
        }
    }
    out
}

/// Joins a page's content streams into one when it has several or one that lopdf cannot decode:
/// each stream decoded on its own (one that cannot be decoded is left out, with a note), and, when
/// the joined data does not parse as a whole, each stream parsed on its own so that a token
/// lopdf's lexer stops at costs only the rest of its own stream. A page with one stream lopdf
/// decodes is left as it is. Returns a note for the document's warnings when a stream was left
/// out.
pub fn join_page_contents(doc: &mut Document, page: ObjectId) -> Option<String> {
    let ids = doc.get_page_contents(page);
    let streams: Vec<&Stream> = ids.iter().filter_map(|&id| doc.get_object(id).and_then(Object::as_stream).ok()).collect();
    let lopdf_decodes = |s: &Stream| filters(s).iter().all(|n| LOPDF_FILTERS.contains(&n.as_slice()));
    if streams.len() < 2 && streams.iter().all(|s| lopdf_decodes(s)) {
        return None;
    }
    let mut parts = Vec::with_capacity(streams.len());
    let mut skipped = Vec::new();
    for (i, stream) in streams.iter().enumerate() {
        match decode_stream(stream) {
            Ok(data) => parts.push(data),
            Err(e) => skipped.push(format!("content stream {} of {}: {e}", i + 1, streams.len())),
        }
    }
    let mut joined = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for part in &parts {
        joined.extend_from_slice(part);
        joined.push(b'\n');
    }
    if parts.len() > 1 && Content::decode_strict(&joined).is_err() {
        let mut operations = Vec::new();
        for part in &parts {
            if let Ok(content) = Content::decode(part) {
                // Inline images do not survive re-encoding and hold no text.
                operations.extend(content.operations.into_iter().filter(|op| op.operator != "BI"));
            }
        }
        if let Ok(data) = (Content { operations }).encode() {
            joined = data;
        }
    }
    let joined_id = doc.add_object(Stream::new(Dictionary::new(), joined));
    if let Ok(dict) = doc.get_object_mut(page).and_then(Object::as_dict_mut) {
        dict.set("Contents", Object::Reference(joined_id));
    }
    (!skipped.is_empty()).then(|| skipped.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_run_length_decode_as_the_spec_says() {
        assert_eq!(ascii_hex_decode(b"48 65 6c\n6C6f7>ignored"), b"Hellop");
        assert_eq!(run_length_decode(&[2, b'a', b'b', b'c', 254, b'x', 128, b'z']), b"abcxxx");
        assert_eq!(run_length_decode(&[5, b'a']), b"a", "a literal run cut short keeps what is there");
    }
}
