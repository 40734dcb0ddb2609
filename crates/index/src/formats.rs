//! Office documents, web pages and e-books as pages of text: Word (.docx), OpenDocument (.odt),
//! HTML (.html, .htm), EPUB (.epub) and RTF (.rtf).
//!
//! Why pages: a search hit cites a page, so each format keeps what stands for one. Word and
//! LibreOffice record where the pages broke when the document was last laid out
//! (`w:lastRenderedPageBreak`, `text:soft-page-break`) and where the author broke them (`w:br
//! w:type="page"`); those start new pages. An EPUB's chapters (its spine, in reading order) are its
//! pages. RTF's `\page` starts a page; a web page is one page. Headings stay lines of their own.
//!
//! Why in the extraction worker (see [`crate::extract`]): these are zip archives and XML or HTML
//! from anywhere, so a decompression bomb or a pathological file must cost only itself. On top of
//! the worker's limits, no archive member is read past [`MAX_PART_BYTES`].

use std::borrow::Cow;
use std::cell::RefCell;
use std::io::{Cursor, Read};

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, CharacterTokens, EndTag, StartTag, TagToken, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use quick_xml::events::{BytesStart, Event};

use crate::extract::{normalize_page, ExtractError, Extracted};

/// The most bytes read out of one archive member (a chapter, a document's XML): beyond it the file
/// is refused as a likely decompression bomb.
pub const MAX_PART_BYTES: u64 = 256 << 20;

/// Which of these formats a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Docx,
    Odt,
    Html,
    Epub,
    Rtf,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Docx => "Word document",
            Format::Odt => "OpenDocument text",
            Format::Html => "web page",
            Format::Epub => "EPUB e-book",
            Format::Rtf => "RTF document",
        }
    }
}

/// The text of a file in `format`, page by page.
pub fn extract(format: Format, bytes: &[u8]) -> Result<Extracted, ExtractError> {
    if bytes.is_empty() {
        return Err(ExtractError::EmptyFile);
    }
    let (pages, warnings) = match format {
        Format::Docx => (docx(bytes)?, Vec::new()),
        Format::Odt => (odt(bytes)?, Vec::new()),
        Format::Html => {
            let decoded = crate::text::decode(bytes)?;
            (vec![html_text(&decoded.text)], decoded.note().into_iter().collect())
        }
        Format::Epub => epub(bytes)?,
        Format::Rtf => (rtf(bytes)?, Vec::new()),
    };
    let pages: Vec<String> = pages.iter().map(|p| normalize_page(p)).collect();
    if pages.iter().all(|p| p.trim().is_empty()) {
        return Err(ExtractError::Blank);
    }
    let mut warnings = warnings;
    if matches!(format, Format::Docx | Format::Odt | Format::Epub) {
        if let Err(e) = zip::ZipArchive::new(Cursor::new(bytes)) {
            warnings.push(format!("the zip archive's directory is damaged ({e}): its members were read from their own headers"));
        }
    }
    Ok(Extracted { pages, warnings, ocr_pages: Vec::new(), ocr_workers: 0 })
}

fn damaged(format: Format, why: impl std::fmt::Display) -> ExtractError {
    ExtractError::Damaged { format: format.name().into(), reason: why.to_string() }
}

/// A zip archive's members, found by its central directory, or, where the zip crate cannot read
/// that (cut short, or a member a byte short so that every offset after it is off, as in a real
/// LibreOffice file whose thumbnail lost a `\r`), member by member as `unzip` manages to: what a
/// lenient reader can read is read, and only what none can is refused.
enum Archive<'a> {
    Central(zip::ZipArchive<Cursor<&'a [u8]>>),
    Local(LocalMembers),
}

/// Members found by their local headers.
struct LocalMembers {
    /// Each member's name and its bytes, or why they could not be read (a bad checksum).
    found: Vec<(String, Result<Vec<u8>, String>)>,
    /// Why the central directory could not be read, when members may be missing: fewer were found
    /// than the end record declares, or there is no end record (a file cut short).
    missing: Option<String>,
}

/// The most members the local-header search reads (a real document has tens to a few thousand).
const MAX_LOCAL_MEMBERS: usize = 20_000;

fn open_archive(format: Format, bytes: &[u8]) -> Result<Archive<'_>, ExtractError> {
    // Word and LibreOffice save a password-protected document as an OLE compound file.
    if bytes.starts_with(&[0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]) {
        return Err(ExtractError::EncryptedOffice(format.name().into()));
    }
    if !bytes.starts_with(b"PK") {
        return Err(damaged(format, "it is not a zip archive, as the format requires"));
    }
    match zip::ZipArchive::new(Cursor::new(bytes)) {
        Ok(archive) => Ok(Archive::Central(archive)),
        Err(central) => match local_members(bytes, &central.to_string()) {
            Some(members) if members.found.iter().any(|(_, m)| m.is_ok()) => Ok(Archive::Local(members)),
            _ => Err(damaged(format, format!("the zip archive cannot be read: {central}"))),
        },
    }
}

/// How many members the archive's end record declares, if it has one.
fn declared_members(bytes: &[u8]) -> Option<usize> {
    let tail = bytes.len().saturating_sub(65_535 + 22);
    let at = bytes[tail..].windows(4).rposition(|w| w == b"PK\x05\x06")? + tail;
    let count = bytes.get(at + 10..at + 12)?;
    Some(u16::from_le_bytes([count[0], count[1]]) as usize)
}

fn le16(bytes: &[u8], at: usize) -> Option<usize> {
    bytes.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
}

fn le32(bytes: &[u8], at: usize) -> Option<u32> {
    bytes.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// How far from where the directory says a member starts its local header is looked for: the
/// damage seen in real files shifts every later member by a few bytes.
const LOCAL_HEADER_SLACK: usize = 64;

/// The members the archive can still give: each central-directory record found in the bytes (its
/// name, method, sizes and checksum), its data found at its local header (where the record says,
/// or a few bytes off), inflated and checked against the checksum. Where no directory record is
/// left (a file cut short), the local headers are walked from the start instead.
fn local_members(bytes: &[u8], central: &str) -> Option<LocalMembers> {
    let mut found = Vec::new();
    let mut at = 0;
    while found.len() < MAX_LOCAL_MEMBERS {
        let Some(next) = bytes[at..].windows(4).position(|w| w == b"PK\x01\x02") else { break };
        let record = at + next;
        at = record + 4;
        let (Some(method), Some(crc), Some(size), Some(name_len), Some(offset)) = (
            le16(bytes, record + 10),
            le32(bytes, record + 16),
            le32(bytes, record + 20),
            le16(bytes, record + 28),
            le32(bytes, record + 42),
        ) else {
            continue;
        };
        let Some(name) = bytes.get(record + 46..record + 46 + name_len).map(|n| String::from_utf8_lossy(n).into_owned()) else { continue };
        found.push((name.clone(), member_at(bytes, &name, offset as usize, method, size as usize, crc)));
    }
    if found.is_empty() {
        return walk_local_headers(bytes, central);
    }
    let complete = declared_members(bytes).is_some_and(|declared| found.len() >= declared);
    Some(LocalMembers { found, missing: (!complete).then(|| central.to_string()) })
}

/// The data of the member `name` whose local header is at `offset` or a few bytes off.
fn member_at(bytes: &[u8], name: &str, offset: usize, method: usize, size: usize, crc: u32) -> Result<Vec<u8>, String> {
    let from = offset.saturating_sub(LOCAL_HEADER_SLACK);
    let to = (offset + LOCAL_HEADER_SLACK).min(bytes.len());
    let header = (from..to)
        .filter(|&h| bytes[h..].starts_with(b"PK\x03\x04"))
        .filter(|&h| le16(bytes, h + 26).and_then(|n| bytes.get(h + 30..h + 30 + n)) == Some(name.as_bytes()))
        .min_by_key(|&h| h.abs_diff(offset))
        .ok_or("its local header is not where the directory says")?;
    let start = header + 30 + le16(bytes, header + 26).unwrap_or(0) + le16(bytes, header + 28).unwrap_or(0);
    let data = bytes.get(start..start + size).ok_or("its data is cut short")?;
    let mut out = Vec::new();
    match method {
        0 => out.extend_from_slice(data),
        8 => {
            flate2::read::DeflateDecoder::new(data).take(MAX_PART_BYTES + 1).read_to_end(&mut out).map_err(|e| e.to_string())?;
        }
        other => return Err(format!("compression method {other} is not read")),
    }
    if out.len() as u64 > MAX_PART_BYTES {
        return Err(format!("it unpacks to more than {} MiB (a decompression bomb?)", MAX_PART_BYTES >> 20));
    }
    let mut check = flate2::Crc::new();
    check.update(&out);
    if check.sum() != crc {
        return Err("its checksum does not match (damaged)".into());
    }
    Ok(out)
}

/// Every member whose local header is found walking from the start, in order, until one cannot
/// be read: for an archive cut before its directory.
fn walk_local_headers(bytes: &[u8], central: &str) -> Option<LocalMembers> {
    let mut reader = Cursor::new(bytes);
    let mut found = Vec::new();
    while found.len() < MAX_LOCAL_MEMBERS {
        let Ok(Some(file)) = zip::read::read_zipfile_from_stream(&mut reader) else { break };
        let Ok(name) = file.name().map(|n| n.into_owned()) else { break };
        let mut out = Vec::new();
        let read = file.take(MAX_PART_BYTES + 1).read_to_end(&mut out).map_err(|e| e.to_string());
        if out.len() as u64 > MAX_PART_BYTES {
            return None;
        }
        let failed = read.is_err();
        found.push((name, read.map(|_| out)));
        if failed {
            break;
        }
    }
    Some(LocalMembers { found, missing: Some(central.to_string()) })
}

/// One archive member as bytes, or None when the archive has no such member.
fn member(format: Format, archive: &mut Archive<'_>, name: &str) -> Result<Option<Vec<u8>>, ExtractError> {
    let archive = match archive {
        Archive::Central(archive) => archive,
        Archive::Local(members) => {
            return match (members.found.iter().find(|(n, _)| n == name), &members.missing) {
                (Some((_, Ok(bytes))), _) => Ok(Some(bytes.clone())),
                (Some((_, Err(e))), _) => Err(damaged(format, format!("{name}: {e}"))),
                (None, None) => Ok(None),
                (None, Some(central)) => Err(damaged(
                    format,
                    format!("the zip archive cannot be read: {central}; {name} is not among the members that could be found"),
                )),
            };
        }
    };
    let file = match archive.by_name(name) {
        Ok(f) => f,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(damaged(format, format!("{name}: {e}"))),
    };
    let mut out = Vec::new();
    file.take(MAX_PART_BYTES + 1).read_to_end(&mut out).map_err(|e| damaged(format, format!("{name}: {e}")))?;
    if out.len() as u64 > MAX_PART_BYTES {
        return Err(damaged(format, format!("{name} unpacks to more than {} MiB (a decompression bomb?)", MAX_PART_BYTES >> 20)));
    }
    Ok(Some(out))
}

fn member_text(format: Format, archive: &mut Archive<'_>, name: &str) -> Result<Option<String>, ExtractError> {
    Ok(match member(format, archive, name)? {
        Some(bytes) => Some(crate::text::decode(&bytes).map_err(|e| damaged(format, format!("{name}: {e}")))?.text),
        None => None,
    })
}

fn local(name: &str) -> &str {
    name.rsplit(':').next().unwrap_or(name)
}

fn attribute<'a>(e: &'a BytesStart<'_>, local_name: &str) -> Option<Cow<'a, str>> {
    e.attributes()
        .flatten()
        .find(|a| local(a.key.into_inner()) == local_name)
        .and_then(|a| a.normalized_value(quick_xml::XmlVersion::Implicit1_0).ok())
}

/// The pages [`walk_xml`] writes into: text goes to the last page, a page break starts another.
struct XmlText {
    pages: Vec<String>,
}

impl XmlText {
    fn new() -> Self {
        XmlText { pages: vec![String::new()] }
    }
    fn push(&mut self, s: &str) {
        self.pages.last_mut().expect("never empty").push_str(s);
    }
    fn newline(&mut self) {
        self.push("\n");
    }
    fn page_break(&mut self) {
        // A break at the very start of a page (a heading that starts a page) adds no empty page.
        if !self.pages.last().expect("never empty").trim().is_empty() {
            self.pages.push(String::new());
        }
    }
}

/// Walks `xml`, handing elements to `element(text, local name, attributes, is_end)` and text (with
/// entity references resolved) to `text(text, content)`.
fn walk_xml(
    format: Format,
    xml: &str,
    mut element: impl FnMut(&mut XmlText, &str, Option<&BytesStart<'_>>, bool),
    mut text: impl FnMut(&mut XmlText, &str),
) -> Result<Vec<String>, ExtractError> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = XmlText::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => element(&mut out, local(e.name().into_inner()), Some(&e), false),
            Ok(Event::Empty(e)) => {
                element(&mut out, local(e.name().into_inner()), Some(&e), false);
                element(&mut out, local(e.name().into_inner()), Some(&e), true);
            }
            Ok(Event::End(e)) => element(&mut out, local(e.name().into_inner()), None, true),
            Ok(Event::Text(t)) => text(&mut out, &t.xml10_content()),
            Ok(Event::CData(t)) => text(&mut out, &t.xml10_content()),
            Ok(Event::GeneralRef(r)) => {
                let name = r.xml10_content().into_owned();
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => Some(c.to_string()),
                    _ => quick_xml::escape::resolve_predefined_entity(&name).map(str::to_string),
                };
                if let Some(s) = resolved {
                    text(&mut out, &s);
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(damaged(format, format!("its XML is malformed at byte {}: {e}", reader.buffer_position()))),
        }
    }
    Ok(out.pages)
}

/// Word: the paragraphs of word/document.xml, text of `w:t` runs only (not field codes or deleted
/// text), tabs and line breaks kept, a new page at each page break.
fn docx(bytes: &[u8]) -> Result<Vec<String>, ExtractError> {
    let mut archive = open_archive(Format::Docx, bytes)?;
    let xml = member_text(Format::Docx, &mut archive, "word/document.xml")?
        .ok_or_else(|| damaged(Format::Docx, "it has no word/document.xml (is it a Word document?)"))?;
    let mut pages = docx_part(&xml)?;
    // Footnotes and endnotes live in parts of their own; their text follows the body's (where
    // each sits on the page is the layout's to say, which a .docx does not record).
    for part in ["word/footnotes.xml", "word/endnotes.xml"] {
        if let Some(notes) = member_text(Format::Docx, &mut archive, part)? {
            let text = docx_part(&notes)?.join("\n");
            if !text.trim().is_empty() {
                let last = pages.last_mut().expect("never empty");
                last.truncate(last.trim_end().len());
                last.push('\n');
                last.push_str(text.trim());
            }
        }
    }
    Ok(pages)
}

/// One WordprocessingML part (the body, the footnotes, the endnotes) as pages of text.
fn docx_part(xml: &str) -> Result<Vec<String>, ExtractError> {
    let in_run_text = RefCell::new(false);
    walk_xml(
        Format::Docx,
        xml,
        |out, name, start, end| match (name, end) {
            ("t", false) => *in_run_text.borrow_mut() = true,
            ("t", true) => *in_run_text.borrow_mut() = false,
            ("tab", true) => out.push("\t"),
            ("br" | "cr", true) => out.newline(),
            ("br", false) if start.and_then(|s| attribute(s, "type")).is_some_and(|t| t == "page") => out.page_break(),
            ("lastRenderedPageBreak", false) => out.page_break(),
            ("p", true) => out.newline(),
            _ => {}
        },
        |out, s| {
            if *in_run_text.borrow() {
                out.push(s)
            }
        },
    )
}

/// OpenDocument: the paragraphs and headings of content.xml, `text:s` spaces, tabs and line
/// breaks kept, a new page at each page break the layout recorded.
fn odt(bytes: &[u8]) -> Result<Vec<String>, ExtractError> {
    let mut archive = open_archive(Format::Odt, bytes)?;
    let xml = member_text(Format::Odt, &mut archive, "content.xml")?
        .ok_or_else(|| damaged(Format::Odt, "it has no content.xml (is it an OpenDocument file?)"))?;
    // Text counts inside paragraphs and headings only: the whitespace between elements is layout.
    let in_paragraph = RefCell::new(0u32);
    walk_xml(
        Format::Odt,
        &xml,
        |out, name, start, end| match (name, end) {
            ("p" | "h", false) => *in_paragraph.borrow_mut() += 1,
            ("s", false) => {
                let n = start.and_then(|s| attribute(s, "c")).and_then(|c| c.parse::<usize>().ok()).unwrap_or(1).min(64);
                out.push(&" ".repeat(n));
            }
            ("tab", false) => out.push("\t"),
            ("line-break", false) => out.newline(),
            ("soft-page-break", false) => out.page_break(),
            ("p" | "h", true) => {
                let mut depth = in_paragraph.borrow_mut();
                *depth = depth.saturating_sub(1);
                out.newline()
            }
            _ => {}
        },
        |out, s| {
            if *in_paragraph.borrow() > 0 {
                out.push(s)
            }
        },
    )
}

/// An EPUB: its chapters in reading order (the package's spine), each a page.
fn epub(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), ExtractError> {
    let f = Format::Epub;
    let mut archive = open_archive(f, bytes)?;
    // Encrypted content (DRM) cannot be read; fonts alone may be obfuscated, which is harmless.
    if member_text(f, &mut archive, "META-INF/encryption.xml")?.is_some_and(|x| x.contains("EncryptedData") && x.contains("htm")) {
        return Err(ExtractError::EncryptedBook);
    }
    let container =
        member_text(f, &mut archive, "META-INF/container.xml")?.ok_or_else(|| damaged(f, "it has no META-INF/container.xml"))?;
    let mut package_path = None;
    walk_xml(
        f,
        &container,
        |_, name, start, end| {
            if name == "rootfile" && !end && package_path.is_none() {
                package_path = start.and_then(|s| attribute(s, "full-path")).map(|p| p.into_owned());
            }
        },
        |_, _| {},
    )?;
    let package_path = package_path.ok_or_else(|| damaged(f, "its container names no package (rootfile)"))?;
    let package =
        member_text(f, &mut archive, &package_path)?.ok_or_else(|| damaged(f, format!("its package {package_path} is missing")))?;
    let base = package_path.rsplit_once('/').map_or(String::new(), |(dir, _)| format!("{dir}/"));
    let mut manifest = std::collections::HashMap::new();
    let mut spine = Vec::new();
    walk_xml(
        f,
        &package,
        |_, name, start, end| {
            let Some(s) = start.filter(|_| !end) else { return };
            match name {
                "item" => {
                    if let (Some(id), Some(href)) = (attribute(s, "id"), attribute(s, "href")) {
                        manifest.insert(id.into_owned(), href.into_owned());
                    }
                }
                "itemref" => spine.extend(attribute(s, "idref").map(|r| r.into_owned())),
                _ => {}
            }
        },
        |_, _| {},
    )?;
    if spine.is_empty() {
        return Err(damaged(f, "its package lists no chapters (an empty spine)"));
    }
    let mut pages = Vec::new();
    let mut warnings = Vec::new();
    for (i, idref) in spine.iter().enumerate() {
        let Some(href) = manifest.get(idref) else {
            warnings.push(format!("chapter {}: the spine names {idref:?}, which the manifest lacks", i + 1));
            pages.push(String::new());
            continue;
        };
        let path = format!("{base}{}", percent_decode(href.split('#').next().unwrap_or(href)));
        match member_text(f, &mut archive, &path)? {
            Some(xhtml) => pages.push(html_text(&xhtml)),
            None => {
                warnings.push(format!("chapter {}: {path} is missing from the archive", i + 1));
                pages.push(String::new());
            }
        }
    }
    Ok((pages, warnings))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The readable text of an HTML (or XHTML) document: what a browser shows, roughly. Scripts,
/// styles and templates are left out; block elements and line breaks end lines; runs of
/// whitespace collapse to one space except in `pre`.
pub fn html_text(html: &str) -> String {
    struct Sink {
        out: RefCell<String>,
        /// Inside script, style, template or noscript: nothing shown.
        hidden: RefCell<u32>,
        pre: RefCell<u32>,
    }
    const BLOCK: &[&str] = &[
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "tr",
        "table",
        "section",
        "article",
        "header",
        "footer",
        "blockquote",
        "pre",
        "dd",
        "dt",
        "dl",
        "hr",
        "title",
        "nav",
        "aside",
        "figure",
        "figcaption",
        "main",
        "address",
        "caption",
    ];
    impl TokenSink for Sink {
        type Handle = ();
        fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
            match token {
                TagToken(tag) => {
                    let name: &str = &tag.name;
                    let hidden = matches!(name, "script" | "style" | "template" | "noscript");
                    match tag.kind {
                        StartTag if hidden && !tag.self_closing => {
                            *self.hidden.borrow_mut() += 1;
                            // Their content is raw text, not markup.
                            return TokenSinkResult::RawData(if name == "script" {
                                html5ever::tokenizer::states::RawKind::ScriptData
                            } else {
                                html5ever::tokenizer::states::RawKind::Rawtext
                            });
                        }
                        EndTag if hidden => {
                            let mut h = self.hidden.borrow_mut();
                            *h = h.saturating_sub(1);
                        }
                        StartTag if name == "pre" => *self.pre.borrow_mut() += 1,
                        EndTag if name == "pre" => {
                            let mut p = self.pre.borrow_mut();
                            *p = p.saturating_sub(1);
                        }
                        _ => {}
                    }
                    if BLOCK.contains(&name) {
                        let mut out = self.out.borrow_mut();
                        if !out.ends_with('\n') {
                            out.push('\n');
                        }
                    } else if matches!(name, "td" | "th") && tag.kind == EndTag {
                        self.out.borrow_mut().push('\t');
                    }
                }
                CharacterTokens(text) if *self.hidden.borrow() == 0 => {
                    let mut out = self.out.borrow_mut();
                    if *self.pre.borrow() > 0 {
                        out.push_str(&text);
                    } else {
                        for c in text.chars() {
                            // HTML's whitespace is ASCII: a no-break space stays.
                            if c.is_ascii_whitespace() {
                                if !out.ends_with([' ', '\n', '\t']) && !out.is_empty() {
                                    out.push(' ');
                                }
                            } else {
                                out.push(c);
                            }
                        }
                    }
                }
                _ => {}
            }
            TokenSinkResult::Continue
        }
    }
    let sink = Sink { out: RefCell::new(String::new()), hidden: RefCell::new(0), pre: RefCell::new(0) };
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    let text = tokenizer.sink.out.take();
    // Spaces next to line ends are layout, not text.
    text.split('\n').map(str::trim).collect::<Vec<_>>().join("\n")
}

/// RTF: the text of the document's body (font tables, style sheets, pictures and the other
/// destinations left out), `\par` and `\line` as line ends, `\page` as a new page, `\'hh` bytes in
/// the document's code page (`\ansicpg`, Windows-1252 by default), `\uN` characters.
fn rtf(bytes: &[u8]) -> Result<Vec<String>, ExtractError> {
    let f = Format::Rtf;
    if !bytes.starts_with(b"{\\rtf") {
        return Err(damaged(f, "it does not start with {\\rtf"));
    }
    const SKIP: &[&str] = &[
        "fonttbl",
        "colortbl",
        "stylesheet",
        "info",
        "pict",
        "object",
        "header",
        "headerl",
        "headerr",
        "headerf",
        "footer",
        "footerl",
        "footerr",
        "footerf",
        "themedata",
        "datastore",
        "latentstyles",
        "xmlnstbl",
        "listtable",
        "listoverridetable",
        "rsidtbl",
        "generator",
        "filetbl",
        "revtbl",
        "fldinst",
        "bkmkstart",
        "bkmkend",
        "colorschememapping",
        "mmathPr",
        "pgdsctbl",
    ];
    const MAX_DEPTH: usize = 4096;
    let mut pages = vec![String::new()];
    // Per group: (skipped, characters to skip after \u).
    let mut stack: Vec<(bool, usize)> = vec![(false, 1)];
    let mut encoding = encoding_rs::WINDOWS_1252;
    let mut pending: Vec<u8> = Vec::new();
    let mut skip_chars = 0usize;
    let flush = |pending: &mut Vec<u8>, pages: &mut Vec<String>, encoding: &'static encoding_rs::Encoding| {
        if !pending.is_empty() {
            let (text, _, _) = encoding.decode(pending);
            pages.last_mut().expect("never empty").push_str(&text);
            pending.clear();
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        let skipped = stack.last().is_some_and(|g| g.0);
        match bytes[i] {
            b'{' => {
                if stack.len() >= MAX_DEPTH {
                    return Err(damaged(f, format!("its groups nest more than {MAX_DEPTH} deep")));
                }
                let top = *stack.last().expect("never empty");
                stack.push(top);
                i += 1;
            }
            b'}' => {
                flush(&mut pending, &mut pages, encoding);
                stack.pop();
                if stack.is_empty() {
                    break;
                }
                i += 1;
            }
            b'\\' => {
                let start = i + 1;
                let Some(&c) = bytes.get(start) else { break };
                if c.is_ascii_alphabetic() {
                    let mut j = start;
                    while j < bytes.len() && bytes[j].is_ascii_alphabetic() {
                        j += 1;
                    }
                    let word = std::str::from_utf8(&bytes[start..j]).unwrap_or("");
                    let num_start = j;
                    if j < bytes.len() && bytes[j] == b'-' {
                        j += 1;
                    }
                    while j < bytes.len() && bytes[j].is_ascii_digit() {
                        j += 1;
                    }
                    let number: Option<i64> = std::str::from_utf8(&bytes[num_start..j]).ok().and_then(|n| n.parse().ok());
                    if j < bytes.len() && bytes[j] == b' ' {
                        j += 1;
                    }
                    i = j;
                    if word == "bin" {
                        // \binN: N bytes of binary data follow (a `}` among them closes nothing).
                        i = i.saturating_add(number.unwrap_or(0).max(0) as usize).min(bytes.len());
                        continue;
                    }
                    if SKIP.contains(&word) {
                        stack.last_mut().expect("never empty").0 = true;
                        continue;
                    }
                    if word != "u" {
                        flush(&mut pending, &mut pages, encoding);
                    }
                    if skipped {
                        if word == "ansicpg" {
                            encoding = code_page(number);
                        }
                        continue;
                    }
                    let page = pages.last_mut().expect("never empty");
                    match word {
                        "par" | "line" | "row" | "sect" => page.push('\n'),
                        "tab" | "cell" => page.push('\t'),
                        "page" if !page.trim().is_empty() => {
                            pages.push(String::new());
                        }
                        "ansicpg" => encoding = code_page(number),
                        "uc" => stack.last_mut().expect("never empty").1 = number.unwrap_or(1).clamp(0, 16) as usize,
                        "u" => {
                            flush(&mut pending, &mut pages, encoding);
                            let n = number.unwrap_or(0);
                            let code = if n < 0 { n + 65536 } else { n } as u32;
                            pages.last_mut().expect("never empty").push(char::from_u32(code).unwrap_or('\u{fffd}'));
                            skip_chars = stack.last().map_or(1, |g| g.1);
                        }
                        "emdash" => page.push('—'),
                        "endash" => page.push('–'),
                        "bullet" => page.push('•'),
                        "lquote" => page.push('‘'),
                        "rquote" => page.push('’'),
                        "ldblquote" => page.push('“'),
                        "rdblquote" => page.push('”'),
                        _ => {}
                    }
                } else {
                    i = start + 1;
                    match c {
                        b'\'' => {
                            let hex = bytes
                                .get(start + 1..start + 3)
                                .and_then(|h| std::str::from_utf8(h).ok())
                                .and_then(|h| u8::from_str_radix(h, 16).ok());
                            i = start + 3;
                            if let Some(b) = hex {
                                if skip_chars > 0 {
                                    skip_chars -= 1;
                                } else if !skipped {
                                    pending.push(b);
                                }
                            }
                        }
                        b'*' => stack.last_mut().expect("never empty").0 = true,
                        b'~' if !skipped => pages.last_mut().expect("never empty").push('\u{a0}'),
                        b'_' if !skipped => pages.last_mut().expect("never empty").push('-'),
                        b'\\' | b'{' | b'}' if !skipped => {
                            flush(&mut pending, &mut pages, encoding);
                            pages.last_mut().expect("never empty").push(c as char);
                        }
                        b'\n' | b'\r' if !skipped => pages.last_mut().expect("never empty").push('\n'),
                        _ => {}
                    }
                }
            }
            b'\r' | b'\n' => i += 1,
            b => {
                i += 1;
                if skip_chars > 0 {
                    skip_chars -= 1;
                    continue;
                }
                if !skipped {
                    if b.is_ascii() {
                        flush(&mut pending, &mut pages, encoding);
                        pages.last_mut().expect("never empty").push(b as char);
                    } else {
                        pending.push(b);
                    }
                }
            }
        }
    }
    flush(&mut pending, &mut pages, encoding);
    Ok(pages)
}

/// The encoding of a Windows code page number (`\ansicpg1251`), Windows-1252 when unknown.
fn code_page(number: Option<i64>) -> &'static encoding_rs::Encoding {
    let label = match number {
        Some(932) => "shift_jis".to_string(),
        Some(936) => "gbk".to_string(),
        Some(949) => "euc-kr".to_string(),
        Some(950) => "big5".to_string(),
        Some(874) => "windows-874".to_string(),
        Some(n @ 1250..=1258) => format!("windows-{n}"),
        _ => "windows-1252".to_string(),
    };
    encoding_rs::Encoding::for_label(label.as_bytes()).unwrap_or(encoding_rs::WINDOWS_1252)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docgen::zip_of;

    /// A Word document: a heading, a paragraph with a tab, an entity and a field code, a page
    /// break, a second page with deleted text.
    fn docx_bytes() -> Vec<u8> {
        let body = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>
<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Bridge report</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">The renovation cost </w:t></w:r><w:r><w:t>4.2 million euros</w:t></w:r><w:r><w:tab/><w:t>Smith &amp; Sons built it.</w:t></w:r>
<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGE </w:instrText></w:r></w:p>
<w:p><w:r><w:br w:type="page"/></w:r><w:r><w:t>The bridge reopened in September 2021.</w:t></w:r><w:r><w:delText>withdrawn sentence</w:delText></w:r></w:p>
</w:body></w:document>"#;
        zip_of(&[("[Content_Types].xml", "<Types/>"), ("word/document.xml", body)])
    }

    #[test]
    fn a_word_documents_footnotes_and_endnotes_are_read_and_a_locked_one_says_it_is_encrypted() {
        let body =
            r#"<w:document xmlns:w="w"><w:body><w:p><w:r><w:t>The dam was finished in 1936.</w:t></w:r></w:p></w:body></w:document>"#;
        let notes = r#"<w:footnotes xmlns:w="w"><w:footnote w:type="separator"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>
<w:footnote w:id="1"><w:p><w:r><w:t>Two years ahead of schedule.</w:t></w:r></w:p></w:footnote></w:footnotes>"#;
        let end = r#"<w:endnotes xmlns:w="w"><w:endnote w:id="1"><w:p><w:r><w:t>Source: the Bureau's archive.</w:t></w:r></w:p></w:endnote></w:endnotes>"#;
        let bytes = zip_of(&[("word/document.xml", body), ("word/footnotes.xml", notes), ("word/endnotes.xml", end)]);
        let e = extract(Format::Docx, &bytes).unwrap();
        assert_eq!(e.pages, vec!["The dam was finished in 1936.\nTwo years ahead of schedule.\nSource: the Bureau's archive.".to_string()]);
        let mut locked = vec![0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1];
        locked.extend_from_slice(&[0; 504]);
        for format in [Format::Docx, Format::Odt] {
            let err = extract(format, &locked).unwrap_err();
            assert!(matches!(err, ExtractError::EncryptedOffice(_)) && err.to_string().starts_with("encrypted "), "{err}");
        }
    }

    #[test]
    fn a_word_document_reads_as_its_paragraphs_with_a_page_per_page_break() {
        let e = extract(Format::Docx, &docx_bytes()).unwrap();
        assert_eq!(e.pages.len(), 2, "{:?}", e.pages);
        assert_eq!(e.pages[0], "Bridge report\nThe renovation cost 4.2 million euros\tSmith & Sons built it.");
        assert_eq!(e.pages[1], "The bridge reopened in September 2021.", "no deleted text, no field code");
    }

    fn odt_bytes() -> Vec<u8> {
        let content = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0">
<office:automatic-styles><style:style xmlns:style="s">not text</style:style></office:automatic-styles>
<office:body><office:text>
<text:h text:outline-level="1">Trial results</text:h>
<text:p>The trial enrolled<text:s text:c="2"/>412 patients<text:tab/>at 14 hospitals.</text:p>
<text:p><text:soft-page-break/>The most common side effect was a mild rash.<text:line-break/>It passed in days.</text:p>
</office:text></office:body></office:document-content>"#;
        zip_of(&[("mimetype", "application/vnd.oasis.opendocument.text"), ("content.xml", content)])
    }

    #[test]
    fn an_opendocument_text_keeps_spaces_tabs_and_its_layouts_page_breaks() {
        let e = extract(Format::Odt, &odt_bytes()).unwrap();
        assert_eq!(
            e.pages,
            vec![
                "Trial results\nThe trial enrolled  412 patients\tat 14 hospitals.".to_string(),
                "The most common side effect was a mild rash.\nIt passed in days.".to_string(),
            ]
        );
    }

    const HTML: &str = "<!DOCTYPE html><html><head><title>Harbin Valves</title><style>p { color: red }</style>\
        <script>var x = '<p>not text</p>';</script></head><body><h1>Annual   report</h1>\
        <p>Revenue was 86&nbsp;million dollars &amp; sales grew by 12&#37;.</p><ul><li>Porto factory</li><li>Caf&eacute; opened</li></ul>\
        <pre>  kept   as is</pre><!-- a comment --></body></html>";

    #[test]
    fn a_web_page_reads_as_a_browser_shows_it() {
        let e = extract(Format::Html, HTML.as_bytes()).unwrap();
        assert_eq!(
            e.pages,
            vec!["Harbin Valves\nAnnual report\nRevenue was 86\u{a0}million dollars & sales grew by 12%.\nPorto factory\nCafé opened\nkept   as is".to_string()]
        );
    }

    fn epub_bytes() -> Vec<u8> {
        let container = r#"<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#;
        let opf = r#"<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>
<item id="c2" href="text/chapter%202.xhtml" media-type="application/xhtml+xml"/>
<item id="c1" href="text/one.xhtml" media-type="application/xhtml+xml"/>
<item id="css" href="style.css" media-type="text/css"/></manifest>
<spine><itemref idref="c1"/><itemref idref="c2"/></spine></package>"#;
        let chapter = |title: &str, body: &str| {
            format!("<?xml version=\"1.0\"?><html xmlns=\"http://www.w3.org/1999/xhtml\"><head><title>{title}</title></head><body><h2>{title}</h2><p>{body}</p></body></html>")
        };
        zip_of(&[
            ("mimetype", "application/epub+zip"),
            ("META-INF/container.xml", container),
            ("OEBPS/content.opf", opf),
            ("OEBPS/text/one.xhtml", &chapter("The Harbour", "The ship came in at dawn.")),
            ("OEBPS/text/chapter 2.xhtml", &chapter("The Storm", "By noon the sea had turned.")),
            ("OEBPS/style.css", "p {}"),
        ])
    }

    #[test]
    fn an_e_book_reads_chapter_by_chapter_in_reading_order() {
        let e = extract(Format::Epub, &epub_bytes()).unwrap();
        assert_eq!(
            e.pages,
            vec![
                "The Harbour\nThe Harbour\nThe ship came in at dawn.".to_string(),
                "The Storm\nThe Storm\nBy noon the sea had turned.".to_string(),
            ]
        );
    }

    const RTF: &str = r"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fswiss Helvetica;}}{\colortbl;\red0\green0\blue0;}
{\*\generator Writer;}{\info{\title Not body text}}\pard\f0 Caf\'e9 prices rose\par
The price is 5 \u8364? per cup\tab (was 4).\page
Second page: \{braces\} and a backslash \\.\par}";

    #[test]
    fn an_rtf_document_reads_its_body_in_its_code_page_with_pages_at_page_breaks() {
        let e = extract(Format::Rtf, RTF.as_bytes()).unwrap();
        assert_eq!(
            e.pages,
            vec![
                "Café prices rose\nThe price is 5 € per cup\t(was 4).".to_string(),
                "Second page: {braces} and a backslash \\.".to_string(),
            ]
        );
    }

    /// A picture's binary data after \binN may hold any byte, `}` too: it closes no group, and the
    /// text after the picture is read.
    #[test]
    fn binary_data_in_an_rtf_closes_no_group_and_the_text_after_it_is_read() {
        let mut bytes = br"{\rtf1\ansi {\pard Before the picture.\par}{\pict\bin6 ".to_vec();
        bytes.extend_from_slice(b"}}\\{}}");
        bytes.extend_from_slice(br"}{\pard After the picture.\par}}");
        let e = extract(Format::Rtf, &bytes).unwrap();
        assert_eq!(e.pages, vec!["Before the picture.\nAfter the picture.".to_string()]);
    }

    /// A LibreOffice document whose zip directory is cut short (here by its last byte, so the end
    /// record is not found) is read from its members' own headers, as `unzip` and Python's
    /// zipfile read it, and says its directory is damaged. Before: refused as damaged.
    #[test]
    fn a_document_whose_zip_directory_is_damaged_is_read_from_its_local_headers() {
        let mut short = odt_bytes();
        short.pop();
        assert!(zip::ZipArchive::new(Cursor::new(short.as_slice())).is_err(), "the directory really is unreadable");
        let e = extract(Format::Odt, &short).unwrap();
        assert_eq!(e.pages, extract(Format::Odt, &odt_bytes()).unwrap().pages);
        assert!(e.warnings[0].starts_with("the zip archive's directory is damaged"), "{:?}", e.warnings);
        // The directory's size one byte short (its members still whole).
        let mut off = odt_bytes();
        let end = off.len() - 22;
        let size = u32::from_le_bytes(off[end + 12..end + 16].try_into().unwrap());
        off[end + 12..end + 16].copy_from_slice(&(size - 1).to_le_bytes());
        assert_eq!(extract(Format::Odt, &off).unwrap().pages, extract(Format::Odt, &odt_bytes()).unwrap().pages);
        // The end record's last ten bytes cut: its member count is still there, so an optional
        // member (footnotes) that is not found is known to be absent.
        let mut docx = docx_bytes();
        docx.truncate(docx.len() - 10);
        assert!(extract(Format::Docx, &docx).unwrap().pages[0].contains("Bridge report"));
        // A member a byte short (a real LibreOffice file's thumbnail lost a `\r`): every offset
        // after it is one off; the members after it are found by their headers, and the short one
        // alone is lost (the same damage as tests/data/real/files/tagged.odt).
        let content = "<office:document-content xmlns:office=\"o\" xmlns:text=\"t\"><office:body><office:text>\
                       <text:p>After the damaged thumbnail.</text:p></office:text></office:body></office:document-content>";
        let mut whole = Cursor::new(Vec::new());
        {
            use std::io::Write;
            let mut zip = zip::ZipWriter::new(&mut whole);
            let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
            for (name, data) in [
                ("mimetype", b"application/vnd.oasis.opendocument.text".as_slice()),
                ("Thumbnails/thumbnail.png", b"\x89PNG\r\n\x1a\nsome picture bytes".as_slice()),
                ("content.xml", content.as_bytes()),
            ] {
                zip.start_file(name, stored).unwrap();
                zip.write_all(data).unwrap();
            }
            zip.finish().unwrap();
        }
        let whole = whole.into_inner();
        let cr = whole.windows(3).position(|w| w == b"G\r\n").unwrap() + 1;
        let mut short = whole.clone();
        short.remove(cr);
        assert!(zip::ZipArchive::new(Cursor::new(short.as_slice())).is_err());
        assert_eq!(extract(Format::Odt, &short).unwrap().pages, vec!["After the damaged thumbnail.".to_string()]);
    }

    #[test]
    fn a_damaged_or_foreign_file_gets_its_own_reason() {
        let reason = |f: Format, bytes: &[u8]| extract(f, bytes).unwrap_err().to_string();
        let mut cut = docx_bytes();
        cut.truncate(cut.len() / 2);
        // Cut inside the document's own part: found by its header, and its data said to be cut.
        assert_eq!(reason(Format::Docx, &cut), "damaged Word document: word/document.xml: incomplete deflate stream");
        // Cut before it: not found, and the archive said to be unreadable.
        let mut cut = docx_bytes();
        cut.truncate(40);
        assert!(
            reason(Format::Docx, &cut).starts_with("damaged Word document: the zip archive cannot be read"),
            "{}",
            reason(Format::Docx, &cut)
        );
        assert_eq!(reason(Format::Docx, b"%PDF-1.4 renamed"), "damaged Word document: it is not a zip archive, as the format requires");
        let not_word = zip_of(&[("content.xml", "<x/>")]);
        assert!(reason(Format::Docx, &not_word).contains("it has no word/document.xml"));
        let broken_xml = zip_of(&[("word/document.xml", "<w:document><w:body><w:p></w:body>")]);
        assert!(reason(Format::Docx, &broken_xml).contains("its XML is malformed"), "{}", reason(Format::Docx, &broken_xml));
        assert_eq!(reason(Format::Rtf, b"plain words"), "damaged RTF document: it does not start with {\\rtf");
        let deep = format!("{{\\rtf1 {}", "{".repeat(5000));
        assert!(reason(Format::Rtf, deep.as_bytes()).contains("nest more than 4096 deep"));
        let drm = zip_of(&[
            (
                "META-INF/encryption.xml",
                "<encryption><EncryptedData><CipherReference URI=\"OEBPS/one.xhtml\"/></EncryptedData></encryption>",
            ),
            ("META-INF/container.xml", "<container/>"),
        ]);
        assert!(matches!(extract(Format::Epub, &drm), Err(ExtractError::EncryptedBook)));
        assert!(matches!(extract(Format::Html, b"<html><script>only()</script></html>"), Err(ExtractError::Blank)));
        assert!(matches!(extract(Format::Odt, b""), Err(ExtractError::EmptyFile)));
    }
}
