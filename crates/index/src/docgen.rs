//! Writes documents in the formats of [`crate::formats`] from pages of paragraphs: a Word document
//! (pages joined by page breaks), an OpenDocument text (by the page breaks its layout records), an
//! EPUB (a chapter per page), a web page and an RTF document (`\page` between pages). For the
//! bundled samples (`warpfold make-samples`) and the tests; like [`crate::pdfgen`], only what
//! reading them needs, written the way office suites and e-book tools write them.

use std::io::{Cursor, Write};

/// A zip archive of `members` (name, content), deflated.
pub fn zip_of(members: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, content) in members {
            zip.start_file(*name, options).expect("writing to memory");
            zip.write_all(content.as_bytes()).expect("writing to memory");
        }
        zip.finish().expect("writing to memory");
    }
    out.into_inner()
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Every page's paragraphs (escaped) through `paragraph(text, starts_a_later_page)`, joined.
fn paragraphs(pages: &[&[&str]], paragraph: impl Fn(&str, bool) -> String) -> String {
    pages
        .iter()
        .enumerate()
        .flat_map(|(i, page)| page.iter().enumerate().map(move |(j, p)| (*p, i > 0 && j == 0)))
        .map(|(p, breaks)| paragraph(&xml_escape(p), breaks))
        .collect()
}

/// A Word document: `title` as a Heading 1, then each page's paragraphs, a page break between pages.
pub fn docx(title: &str, pages: &[&[&str]]) -> Vec<u8> {
    let mut body = format!("<w:p><w:pPr><w:pStyle w:val=\"Heading1\"/></w:pPr><w:r><w:t>{}</w:t></w:r></w:p>", xml_escape(title));
    body.push_str(&paragraphs(pages, |text, breaks| {
        let brk = if breaks { "<w:r><w:br w:type=\"page\"/></w:r>" } else { "" };
        format!("<w:p>{brk}<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>")
    }));
    let document = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>{body}</w:body></w:document>"
    );
    let types = "<?xml version=\"1.0\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Default Extension=\"xml\" ContentType=\"application/xml\"/><Override PartName=\"/word/document.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/></Types>";
    zip_of(&[("[Content_Types].xml", types), ("word/document.xml", &document)])
}

/// An OpenDocument text: `title` as a heading, the pages' paragraphs, a soft page break where
/// each later page starts.
pub fn odt(title: &str, pages: &[&[&str]]) -> Vec<u8> {
    let mut body = format!("<text:h text:outline-level=\"1\">{}</text:h>", xml_escape(title));
    body.push_str(&paragraphs(pages, |text, breaks| {
        format!("<text:p>{}{text}</text:p>", if breaks { "<text:soft-page-break/>" } else { "" })
    }));
    let content = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<office:document-content xmlns:office=\"urn:oasis:names:tc:opendocument:xmlns:office:1.0\" xmlns:text=\"urn:oasis:names:tc:opendocument:xmlns:text:1.0\" office:version=\"1.3\"><office:body><office:text>{body}</office:text></office:body></office:document-content>"
    );
    zip_of(&[("mimetype", "application/vnd.oasis.opendocument.text"), ("content.xml", &content)])
}

/// An EPUB 3: one chapter per page, each headed "Chapter N".
pub fn epub(title: &str, pages: &[&[&str]]) -> Vec<u8> {
    let container = "<?xml version=\"1.0\"?><container version=\"1.0\" xmlns=\"urn:oasis:names:tc:opendocument:xmlns:container\"><rootfiles><rootfile full-path=\"OEBPS/content.opf\" media-type=\"application/oebps-package+xml\"/></rootfiles></container>";
    let chapters: Vec<String> = pages
        .iter()
        .enumerate()
        .map(|(i, page)| {
            let paragraphs: String = page.iter().map(|p| format!("<p>{}</p>", xml_escape(p))).collect();
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><html xmlns=\"http://www.w3.org/1999/xhtml\"><head><title>{t}</title></head><body><h1>Chapter {n}</h1>{paragraphs}</body></html>",
                t = xml_escape(title),
                n = i + 1
            )
        })
        .collect();
    let manifest: String =
        (1..=pages.len()).map(|n| format!("<item id=\"c{n}\" href=\"chapter-{n}.xhtml\" media-type=\"application/xhtml+xml\"/>")).collect();
    let spine: String = (1..=pages.len()).map(|n| format!("<itemref idref=\"c{n}\"/>")).collect();
    let opf = format!(
        "<?xml version=\"1.0\"?><package xmlns=\"http://www.idpf.org/2007/opf\" version=\"3.0\"><metadata xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:title>{}</dc:title></metadata><manifest>{manifest}</manifest><spine>{spine}</spine></package>",
        xml_escape(title)
    );
    let names: Vec<String> = (1..=pages.len()).map(|n| format!("OEBPS/chapter-{n}.xhtml")).collect();
    let mut members: Vec<(&str, &str)> =
        vec![("mimetype", "application/epub+zip"), ("META-INF/container.xml", container), ("OEBPS/content.opf", &opf)];
    members.extend(names.iter().map(String::as_str).zip(chapters.iter().map(String::as_str)));
    zip_of(&members)
}

/// A web page: `title`, then every page's paragraphs (a web page is one page).
pub fn html(title: &str, pages: &[&[&str]]) -> Vec<u8> {
    let paragraphs: String = pages.iter().flat_map(|p| p.iter()).map(|p| format!("<p>{}</p>\n", xml_escape(p))).collect();
    format!("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title><style>body {{ font: 16px serif }}</style></head><body><h1>{t}</h1>\n{paragraphs}</body></html>\n", t = xml_escape(title))
        .into_bytes()
}

/// An RTF document in Windows-1252, characters beyond it as `\u`: `title`, the pages'
/// paragraphs, `\page` between pages.
pub fn rtf(title: &str, pages: &[&[&str]]) -> Vec<u8> {
    fn text(s: &str) -> String {
        let mut out = String::new();
        for c in s.chars() {
            match c {
                '\\' | '{' | '}' => {
                    out.push('\\');
                    out.push(c);
                }
                c if c.is_ascii() => out.push(c),
                c => {
                    let mut utf8 = [0; 4];
                    let (bytes, _, unmappable) = encoding_rs::WINDOWS_1252.encode(c.encode_utf8(&mut utf8));
                    if unmappable || bytes.len() != 1 {
                        out.push_str(&format!("\\u{}?", c as u32 as i16));
                    } else {
                        out.push_str(&format!("\\'{:02x}", bytes[0]));
                    }
                }
            }
        }
        out
    }
    let mut out = format!(
        "{{\\rtf1\\ansi\\ansicpg1252\\deff0{{\\fonttbl{{\\f0\\froman Times New Roman;}}}}\n\\pard\\f0\\fs28 {}\\par\n",
        text(title)
    );
    for (i, page) in pages.iter().enumerate() {
        if i > 0 {
            out.push_str("\\page\n");
        }
        for paragraph in page.iter() {
            out.push_str(&format!("\\fs24 {}\\par\n", text(paragraph)));
        }
    }
    out.push('}');
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use crate::formats::{extract, Format};

    #[test]
    fn every_generated_document_reads_back_page_by_page() {
        let pages: &[&[&str]] = &[&["First page, café & co."], &["Second page: 5 € <exactly>."]];
        for (format, bytes) in [
            (Format::Docx, super::docx("Title", pages)),
            (Format::Odt, super::odt("Title", pages)),
            (Format::Epub, super::epub("Title", pages)),
            (Format::Rtf, super::rtf("Title", pages)),
        ] {
            let e = extract(format, &bytes).unwrap();
            assert_eq!(e.pages.len(), 2, "{format:?}: {:?}", e.pages);
            assert!(e.pages[0].contains("First page, café & co."), "{format:?}: {:?}", e.pages);
            assert!(e.pages[1].contains("Second page: 5 € <exactly>."), "{format:?}: {:?}", e.pages);
        }
        let web = extract(Format::Html, &super::html("Title", pages)).unwrap();
        assert_eq!(web.pages, vec!["Title\nTitle\nFirst page, café & co.\nSecond page: 5 € <exactly>.".to_string()]);
    }
}
