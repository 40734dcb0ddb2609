//! How a user's document is handed to a browser that asked to open it (`GET /api/file`).
//!
//! Why the app decides and not the server: the answer depends on what the indexer knows of the
//! file. A text is sent as the indexer read it (a Windows-1252 note would show as mojibake if sent
//! as UTF-8, and a browser guesses worse than chardetng), so it is decoded here with the same
//! [`warpfold_index::text::decode`] and sent as UTF-8. PDFs and images are shown inline (the
//! browser has viewers for them); Office files and EPUB, which no browser shows, are offered as
//! downloads with their own type, so the person's system opens them, never as a page of ZIP bytes.
//! The server adds what makes any of this safe to show: a sandboxing CSP and `nosniff`.

use std::io::Read;
use std::path::Path;

use warpfold_index::extract::{file_kind, FileKind};
use warpfold_index::formats::Format;
use warpfold_index::ocr::ImageFormat;

/// Texts larger than this are offered as a download as they are, not decoded in memory.
/// The indexer's own limit: a text it would not read is not decoded here either.
pub const MAX_DECODED_TEXT: u64 = warpfold_index::pipeline::DEFAULT_MAX_TEXT_BYTES;

/// A document ready to send.
pub struct ServedFile {
    /// The `Content-Type`, with the charset for texts.
    pub content_type: &'static str,
    /// Offered as a download (`Content-Disposition: attachment`) rather than shown.
    pub download: bool,
    pub body: ServedBody,
}

pub enum ServedBody {
    /// The file as it is on disk, this many bytes of it (streamed from the checked handle).
    File(std::fs::File, u64),
    /// Bytes already read: a text decoded the way the indexer read it (UTF-8), or a file that
    /// turned out not to be text, as it is.
    Bytes(Vec<u8>),
}

/// How a file of this name is sent: its type, and whether it is offered as a download.
pub fn content_type_of(path: &Path) -> (&'static str, bool) {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).unwrap_or_default();
    match file_kind(path) {
        Some(FileKind::Pdf) => ("application/pdf", false),
        Some(FileKind::Text) => match ext.as_str() {
            "md" | "markdown" => ("text/markdown; charset=utf-8", false),
            // Shown as text: browsers download text/csv rather than show it, and a browser's JSON
            // viewer is script, which the sandbox forbids.
            _ => ("text/plain; charset=utf-8", false),
        },
        Some(FileKind::Image(format)) => match format {
            ImageFormat::Png => ("image/png", false),
            ImageFormat::Jpeg => ("image/jpeg", false),
            ImageFormat::WebP => ("image/webp", false),
            // No browser but Safari shows TIFF: the system's viewer does.
            ImageFormat::Tiff => ("image/tiff", true),
        },
        Some(FileKind::Document(format)) => match format {
            // Shown with no script and no request (the sandbox), as the page it is.
            Format::Html => ("text/html; charset=utf-8", false),
            Format::Docx => ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", true),
            Format::Odt => ("application/vnd.oasis.opendocument.text", true),
            Format::Epub => ("application/epub+zip", true),
            Format::Rtf => ("application/rtf", true),
        },
        None => ("application/octet-stream", true),
    }
}

/// Prepares `file` (of `size` bytes, at `path`) to be sent: texts and HTML decoded as the indexer
/// reads them, everything else as it is.
pub fn serve(path: &Path, mut file: std::fs::File, size: u64) -> std::io::Result<ServedFile> {
    let (content_type, download) = content_type_of(path);
    let text = content_type.ends_with("charset=utf-8");
    if !text || size > MAX_DECODED_TEXT {
        // A text too large to decode here goes as it is, for the system to open.
        let (content_type, download) = if text { ("application/octet-stream", true) } else { (content_type, download) };
        return Ok(ServedFile { content_type, download, body: ServedBody::File(file, size) });
    }
    // One text read and decoded at a time (up to 64 MiB, and its decoded copy): many requests
    // at once wait their turn instead of each holding its own copies.
    static DECODING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = DECODING.lock().unwrap_or_else(|e| e.into_inner());
    let mut bytes = Vec::with_capacity(size as usize);
    file.by_ref().take(size).read_to_end(&mut bytes)?;
    Ok(match warpfold_index::text::decode(&bytes) {
        Ok(decoded) => ServedFile { content_type, download, body: ServedBody::Bytes(decoded.text.into_bytes()) },
        // Not text after all (a program renamed .txt): offered as it is, never shown.
        Err(_) => ServedFile { content_type: "application/octet-stream", download: true, body: ServedBody::Bytes(bytes) },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn served(name: &str, bytes: &[u8]) -> (ServedFile, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let served = serve(&path, file, bytes.len() as u64).unwrap();
        let body = match &served.body {
            ServedBody::Bytes(b) => b.clone(),
            ServedBody::File(f, n) => {
                let mut out = Vec::new();
                f.try_clone().unwrap().take(*n).read_to_end(&mut out).unwrap();
                out
            }
        };
        (served, body)
    }

    #[test]
    fn a_windows_1252_text_is_sent_as_the_utf8_the_indexer_read() {
        // "Café à côté, 12 € net" in Windows-1252: é = E9, à = E0, ô = F4, € = 80.
        let bytes = b"Caf\xe9 \xe0 c\xf4t\xe9, 12 \x80 net. R\xe9sum\xe9 de la r\xe9union.";
        let (served, body) = served("note.txt", bytes);
        assert_eq!(served.content_type, "text/plain; charset=utf-8");
        assert!(!served.download);
        assert_eq!(String::from_utf8(body).unwrap(), "Café à côté, 12 € net. Résumé de la réunion.");
    }

    #[test]
    fn office_files_and_epub_are_downloads_of_their_own_type_and_images_and_pdfs_show() {
        let zip = b"PK\x03\x04 not really a zip";
        for (name, kind) in [
            ("letter.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
            ("letter.odt", "application/vnd.oasis.opendocument.text"),
            ("book.epub", "application/epub+zip"),
        ] {
            let (served, body) = served(name, zip);
            assert_eq!((served.content_type, served.download), (kind, true), "{name}");
            assert_eq!(body, zip, "{name} is sent as it is");
        }
        assert_eq!(content_type_of(Path::new("/d/scan.PNG")), ("image/png", false));
        assert_eq!(content_type_of(Path::new("/d/photo.jpeg")), ("image/jpeg", false));
        assert_eq!(content_type_of(Path::new("/d/fax.tif")), ("image/tiff", true));
        assert_eq!(content_type_of(Path::new("/d/report.pdf")), ("application/pdf", false));
        assert_eq!(content_type_of(Path::new("/d/table.csv")), ("text/plain; charset=utf-8", false), "shown, not downloaded");
        assert_eq!(content_type_of(Path::new("/d/unknown.bin")), ("application/octet-stream", true));
    }

    #[test]
    fn a_program_renamed_txt_is_offered_as_bytes_never_shown_as_text() {
        let elf = b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00";
        let (served, body) = served("notes.txt", elf);
        assert_eq!((served.content_type, served.download), ("application/octet-stream", true));
        assert_eq!(body, elf);
    }
}
