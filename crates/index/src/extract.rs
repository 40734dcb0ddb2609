//! Text out of files: PDF pages with pdf-extract, plain text and Markdown as they are, Word,
//! OpenDocument, HTML, EPUB and RTF through [`crate::formats`], scanned pages and images through
//! OCR ([`crate::ocr`]).
//!
//! Why a separate process per PDF: pdf-extract (and lopdf under it) panic on many malformed files,
//! can recurse until the stack overflows (which aborts the whole process, uncatchably), and can
//! spin or balloon on hostile input. So every PDF is read by a short-lived worker process (the
//! `warpfold extract-worker` command) under a wall-clock limit and an address-space limit; whatever
//! happens to it becomes that file's recorded error and the run goes on. The other document formats
//! (zip archives, XML, HTML from anywhere) go through the same worker. Text files cannot trip a
//! parser and are read in-process.
//!
//! Pages without a text layer (scans) and image files are read by OCR in a second pass, by workers
//! that read a batch of pages each and report every page as they finish it: a page whose image
//! hangs, crashes the decoder or needs too much memory costs that page (its reason is kept as a
//! warning of the document), the worker is started again after it, and the other pages are read.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Why a file gave no text. Each variant names one cause, so a user knows what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum ExtractError {
    #[error("the file is empty (0 bytes)")]
    EmptyFile,
    #[error("not a PDF: the file does not start with %PDF- (it starts with {0})")]
    NotPdf(String),
    #[error("encrypted PDF: it needs a password to open (warpfold only opens PDFs with an empty user password)")]
    Encrypted,
    #[error("truncated PDF (no %%EOF marker at the end; was the download or copy cut short?): {0}")]
    Truncated(String),
    #[error("malformed PDF: {0}")]
    Malformed(String),
    #[error("no text: none of the {pages} page(s) holds extractable text, and OCR found no words on them")]
    NoTextLayer { pages: usize },
    #[error("no text layer on the {pages} page(s) (a scan?), and OCR could not read them: {reason}")]
    OcrUnavailable { pages: usize, reason: String },
    #[error("no text: OCR found no text it could use on the {pages} page(s): {reason}")]
    OcrNoise { pages: usize, reason: String },
    #[error("{0}")]
    ImageTooLarge(String),
    #[error("the file holds no words, only whitespace")]
    Blank,
    #[error("the file is not text ({0})")]
    Binary(String),
    #[error("unsupported file type {0:?} (warpfold reads {SUPPORTED})")]
    Unsupported(String),
    #[error("damaged {format}: {reason}")]
    Damaged { format: String, reason: String },
    #[error("encrypted e-book (DRM): its chapters cannot be read without the seller's key")]
    EncryptedBook,
    #[error("encrypted {0}, or an older binary format under its name: it is an OLE compound file, not the zip archive the format is, and needs a password (or the program that made it) to open")]
    EncryptedOffice(String),
    #[error("cannot read the file: {0}")]
    Io(String),
    #[error("the file is {size_mib} MiB; text files over {limit_mib} MiB are not read (raise the limit with --max-text-mib)")]
    TooLarge { size_mib: String, limit_mib: u64 },
    #[error(
        "the document holds more than about {limit_mib} MiB of text and is not indexed (a decompression bomb, or hundreds of books' worth)"
    )]
    TextTooLarge { limit_mib: u64 },
    #[error("the PDF parser panicked: {0}")]
    Panicked(String),
    #[error("extraction took longer than {0} s of processor time and was stopped (raise --extract-timeout for very large files)")]
    TimedOut(u64),
    #[error("extraction was stopped after {0} s on the clock without finishing, mostly waiting rather than computing (a file that makes the parser block, or a machine too busy)")]
    StoppedWaiting(u64),
    #[error("extraction needed more than {0} MiB of memory and was stopped (raise --extract-memory-mib)")]
    OutOfMemory(u64),
    #[error("the extraction process crashed: {0}")]
    Crashed(String),
    #[error("the extraction worker could not run: {0}")]
    Worker(String),
}

impl ExtractError {
    /// The document status this error is recorded with: a file without a text layer is not broken,
    /// it just has nothing to index, and says so separately.
    pub fn status(&self) -> &'static str {
        match self {
            ExtractError::NoTextLayer { .. }
            | ExtractError::OcrUnavailable { .. }
            | ExtractError::OcrNoise { .. }
            | ExtractError::Blank => "no_text",
            _ => "failed",
        }
    }
}

/// Is a stored failure (its message) one that may pass without the file changing, so that the next
/// run tries the file again: OCR that was missing or turned off, a worker that could not start, an
/// embedding the engine could not make? Failures about the file itself (damaged, encrypted, too
/// large, a parser that crashed or ran out of time) are not tried again until the file changes
/// (or `warpfold index --retry-failed`).
pub fn may_pass(error: &str) -> bool {
    let ocr = error.starts_with("no text layer on the") && error.contains("and OCR could not read them:");
    ocr || error.starts_with("the extraction worker could not run:") || error.starts_with("embedding failed:")
}

/// The text of one file, page by page (text files are one page).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extracted {
    pub pages: Vec<String>,
    /// Pages that could not be read while the others could: kept with the document so nothing
    /// goes missing silently.
    pub warnings: Vec<String>,
    /// The pages (1-based) whose text was read by OCR from their image.
    #[serde(default)]
    pub ocr_pages: Vec<u32>,
    /// How many OCR worker processes read its pages: one per document, parsing it once, unless a
    /// page crashed or stopped one (the next starts after that page).
    #[serde(skip)]
    pub ocr_workers: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Pdf,
    Text,
    /// Word, OpenDocument, HTML, EPUB, RTF ([`crate::formats`]).
    Document(crate::formats::Format),
    /// PNG, JPEG, TIFF, WebP: read by OCR.
    Image(crate::ocr::ImageFormat),
}

/// The file types warpfold reads, for messages.
pub const SUPPORTED: &str =
    ".pdf, .txt, .md, .csv, .tsv, .json, .docx, .odt, .html, .htm, .epub, .rtf and images (.png, .jpg, .tif, .webp) by OCR";

/// The kind of file by extension, or `None` for files warpfold does not read.
pub fn file_kind(path: &Path) -> Option<FileKind> {
    use crate::formats::Format;
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "pdf" => Some(FileKind::Pdf),
        // Tables and data are text too: a CSV export or a JSON file is read and searched as written.
        "txt" | "text" | "md" | "markdown" | "csv" | "tsv" | "json" => Some(FileKind::Text),
        "docx" => Some(FileKind::Document(Format::Docx)),
        "odt" => Some(FileKind::Document(Format::Odt)),
        "html" | "htm" | "xhtml" => Some(FileKind::Document(Format::Html)),
        "epub" => Some(FileKind::Document(Format::Epub)),
        "rtf" => Some(FileKind::Document(Format::Rtf)),
        other => crate::ocr::ImageFormat::from_extension(other).map(FileKind::Image),
    }
}

fn describe_start(bytes: &[u8]) -> String {
    let head: String = bytes.iter().take(8).map(|&b| if b.is_ascii_graphic() { b as char } else { '.' }).collect();
    format!("{head:?}")
}

/// A PDF opened as every reader of it here must see it: checked, loaded, decrypted with the empty
/// password, its page tree repaired (so that text extraction and OCR number pages alike). Returns
/// whether the file ends in %%EOF and the repair's note, if any.
fn open_pdf(bytes: &[u8]) -> Result<(pdf_extract::Document, bool, Option<String>), ExtractError> {
    if bytes.is_empty() {
        return Err(ExtractError::EmptyFile);
    }
    let head = &bytes[..bytes.len().min(1024)];
    if !head.windows(5).any(|w| w == b"%PDF-") {
        return Err(ExtractError::NotPdf(describe_start(bytes)));
    }
    let tail = &bytes[bytes.len().saturating_sub(2048)..];
    let has_eof = tail.windows(5).any(|w| w == b"%%EOF");
    let mut doc = match pdf_extract::Document::load_mem(bytes) {
        Ok(doc) => doc,
        Err(e) if !has_eof => return Err(ExtractError::Truncated(e.to_string())),
        Err(pdf_extract::Error::Decryption(_)) => return Err(ExtractError::Encrypted),
        Err(e) => return Err(ExtractError::Malformed(e.to_string())),
    };
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Err(ExtractError::Encrypted);
    }
    // pdf-extract numbers pages with lopdf's page-tree walk, which goes round a cycle and repeats a
    // page listed twice: repaired in the loaded document first (crate::pdfpages).
    let note = crate::pdfpages::repair_page_tree(&mut doc);
    Ok((doc, has_eof, note))
}

/// Reads a PDF from memory, in this process. Only the extraction worker should call this on
/// untrusted input: it may panic, abort or never return.
pub fn extract_pdf_in_process(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    let (mut doc, has_eof, note) = open_pdf(bytes)?;
    // pdf-extract loses the text after a content stream it cannot decode or parse: each page's
    // streams are joined first (crate::pdfpages).
    let mut notes: Vec<String> = note.into_iter().collect();
    let page_ids = doc.get_pages();
    if page_ids.is_empty() {
        return Err(if has_eof {
            ExtractError::Malformed("the document has no pages".into())
        } else {
            ExtractError::Truncated("no pages could be found".into())
        });
    }
    for (&number, &id) in &page_ids {
        if let Some(note) = crate::pdfpages::join_page_contents(&mut doc, id) {
            notes.push(format!("page {number}: {note}"));
        }
    }
    let mut pages = Vec::with_capacity(page_ids.len());
    let mut warnings = Vec::new();
    let mut first_error = None;
    for &number in page_ids.keys() {
        let mut text = String::new();
        let result = {
            let mut output = pdf_extract::PlainTextOutput::new(&mut text);
            pdf_extract::output_doc_page(&doc, &mut output, number)
        };
        if let Err(e) = result {
            warnings.push(format!("page {number}: {e}"));
            first_error.get_or_insert_with(|| format!("page {number}: {e}"));
            text.clear();
        }
        pages.push(text);
    }
    if warnings.len() == pages.len() {
        let msg = first_error.unwrap_or_default();
        return Err(if has_eof { ExtractError::Malformed(msg) } else { ExtractError::Truncated(msg) });
    }
    for page in &mut pages {
        *page = normalize_page(page);
    }
    if pages.iter().all(|p| p.trim().is_empty()) {
        return Err(ExtractError::NoTextLayer { pages: pages.len() });
    }
    warnings.extend(notes);
    if !has_eof {
        warnings.push("the file has no %%EOF marker (truncated?); the pages that could be read were kept".into());
    }
    Ok(Extracted { pages, warnings, ocr_pages: Vec::new(), ocr_workers: 0 })
}

/// Average words a page below which a PDF's text is checked against Poppler's: a typeset page
/// holds 300-600, a slide 20-80; fewer means the built-in parser may have missed text (fonts it
/// cannot map, content it cannot parse).
const FEW_WORDS_PER_PAGE: usize = 40;

fn word_count(pages: &[String]) -> usize {
    pages.iter().map(|p| p.split_whitespace().count()).sum()
}

/// What the worker reads a PDF with: the built-in parser (pdf-extract), falling back to Poppler's
/// `pdftotext` on the same bytes when it panics, calls the file malformed or truncated, finds no
/// text, or finds far fewer words than Poppler does on a page-poor reading. Whichever extractor
/// read the document is recorded in its warnings when it is Poppler. Poppler is the fallback, not
/// the default: where both read, the built-in parser's words match Poppler's (median recall 0.99
/// on real manuals, BENCHMARKS.md) without a second process.
pub fn extract_pdf_with_fallback(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    let own = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| extract_pdf_in_process(bytes))).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        Err(ExtractError::Panicked(message))
    });
    let reason = match &own {
        Ok(read) if word_count(&read.pages) >= FEW_WORDS_PER_PAGE * read.pages.len() => return own,
        Ok(read) => format!("the built-in parser found only {} words on {} page(s)", word_count(&read.pages), read.pages.len()),
        Err(
            e @ (ExtractError::Panicked(_) | ExtractError::Malformed(_) | ExtractError::Truncated(_) | ExtractError::NoTextLayer { .. }),
        ) => {
            format!("the built-in parser failed: {e}")
        }
        Err(_) => return own,
    };
    let Ok(poppler) = crate::poppler::pdftotext_pages(bytes) else { return own };
    let poppler: Vec<String> = poppler.iter().map(|p| normalize_page(p)).collect();
    let (theirs, ours) = (word_count(&poppler), own.as_ref().map_or(0, |read| word_count(&read.pages)));
    // Poppler's reading replaces ours only when it holds clearly more words (a page-poor document
    // both read alike keeps the built-in reading and its warnings).
    if theirs == 0 || theirs < ours * 3 / 2 + 10 {
        return own;
    }
    let mut warnings = vec![format!("read by Poppler's pdftotext ({reason})")];
    if let Ok(read) = own {
        warnings.extend(read.warnings);
    }
    Ok(Extracted { pages: poppler, warnings, ocr_pages: Vec::new(), ocr_workers: 0 })
}

/// Tidies extracted page text: Unix line ends, no control characters, no trailing spaces, at most
/// one blank line in a row, ligatures spelt out. Words and their order are untouched.
pub fn normalize_page(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.split('\n') {
        let mut line: String = line.chars().filter(|c| !c.is_control() || *c == '\t').collect();
        // Typesetters' ligatures (ﬁ, ﬂ, ﬀ, ﬃ, ﬄ, ﬅ, ﬆ) as their letters: "ﬁnancial" is found as
        // "financial" by keyword and by the model's tokenizer alike.
        if line.contains(|c: char| ('\u{fb00}'..='\u{fb06}').contains(&c)) {
            line = line.chars().fold(String::with_capacity(line.len()), |mut out, c| {
                out.push_str(match c {
                    '\u{fb00}' => "ff",
                    '\u{fb01}' => "fi",
                    '\u{fb02}' => "fl",
                    '\u{fb03}' => "ffi",
                    '\u{fb04}' => "ffl",
                    '\u{fb05}' | '\u{fb06}' => "st",
                    _ => {
                        out.push(c);
                        return out;
                    }
                });
                out
            });
        }
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 || out.is_empty() {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

/// Reads a text or Markdown file as one page.
pub fn extract_text_file(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    if bytes.is_empty() {
        return Err(ExtractError::EmptyFile);
    }
    let decoded = crate::text::decode(bytes)?;
    if decoded.text.trim().is_empty() {
        return Err(ExtractError::Blank);
    }
    let warnings = decoded.note().into_iter().collect();
    Ok(Extracted { pages: vec![normalize_page(&decoded.text)], warnings, ocr_pages: Vec::new(), ocr_workers: 0 })
}

/// How PDF workers are started and bounded.
#[derive(Debug, Clone)]
pub struct Isolation {
    /// The program to run, with `args` before the file path: normally the `warpfold` binary
    /// itself and `["extract-worker"]`.
    pub program: PathBuf,
    pub args: Vec<String>,
    pub timeout: Duration,
    /// Address-space limit of the worker, in MiB (0 = none).
    pub memory_limit_mib: u64,
    /// The languages OCR reads scanned pages and images in: `auto` (each page's, among the
    /// installed packs: [`crate::ocr::Reader`]) or Tesseract's names (`eng`, `eng+deu`); `None`
    /// turns OCR off. For OCR, `timeout` is per page.
    pub ocr_languages: Option<String>,
    /// The most pages of one document read by OCR; the rest are noted as not read.
    pub ocr_max_pages: usize,
    /// The most time OCR spends on one document (over all its workers); the pages it did not reach
    /// are noted as not read.
    pub ocr_budget: Duration,
}

/// Pages of one document read by OCR by default: a long scanned book (500 pages) with room;
/// 5,000 blank pages are not a book.
pub const DEFAULT_OCR_MAX_PAGES: usize = 1_000;
/// OCR time one document may take by default: a 1,000-page scan at about a second a page.
pub const DEFAULT_OCR_BUDGET: Duration = Duration::from_secs(30 * 60);

impl Isolation {
    pub fn new(program: PathBuf, args: Vec<String>) -> Self {
        Isolation {
            program,
            args,
            timeout: Duration::from_secs(60),
            memory_limit_mib: 2048,
            ocr_languages: Some(crate::ocr::DEFAULT_LANGUAGES.to_string()),
            ocr_max_pages: DEFAULT_OCR_MAX_PAGES,
            ocr_budget: DEFAULT_OCR_BUDGET,
        }
    }
}

/// Reads one file: text files here, PDFs in an isolated worker.
pub fn extract_file(path: &Path, isolation: &Isolation) -> Result<Extracted, ExtractError> {
    match file_kind(path) {
        Some(FileKind::Text) => {
            let (bytes, _) = crate::files::read_checked(path, crate::pipeline::DEFAULT_MAX_TEXT_BYTES).map_err(|e| match e {
                crate::files::ReadError::TooLarge { size_mib, limit_mib } => {
                    ExtractError::TooLarge { size_mib: format!("{size_mib:.1}"), limit_mib }
                }
                other => ExtractError::Io(other.to_string()),
            })?;
            extract_text_file(&bytes)
        }
        Some(FileKind::Pdf | FileKind::Document(_) | FileKind::Image(_)) => extract_isolated(path, isolation),
        None => Err(ExtractError::Unsupported(
            path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_else(|| "(no extension)".into()),
        )),
    }
}

/// The document a worker was handed: its stdin, the indexer's checked open file (never the path,
/// which may name something else by now).
fn read_stdin() -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin().lock().read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The extraction worker's whole job: read the document on stdin (`path` names its kind), extract,
/// print the result as one JSON value on stdout. Returns the process exit code. Started with [`OCR_PAGES_VARIABLE`] set, it reads those
/// pages by OCR instead ([`ocr_worker`]). `var` reads the worker's environment, where the parent
/// put its orders ([`ocr_command`]): the front passes it, as the library reads no variables.
pub fn worker_main(path: &Path, var: impl Fn(&str) -> Option<String>) -> i32 {
    if let Err(e) = apply_worker_limits() {
        eprintln!("extract-worker: {e}");
        return 4;
    }
    if let Some(pages) = var(OCR_PAGES_VARIABLE) {
        return ocr_worker(path, &pages, &var);
    }
    let result = match read_stdin() {
        Ok(bytes) => match file_kind(path) {
            Some(FileKind::Document(format)) => crate::formats::extract(format, &bytes),
            // An image is all scan: its pages are counted (and its size checked) here, and read by OCR.
            Some(FileKind::Image(format)) => match crate::ocr::image_pages(&bytes, format) {
                Ok(pages) => Err(ExtractError::NoTextLayer { pages }),
                Err(e) => Err(image_error(format, e)),
            },
            _ => extract_pdf_with_fallback(&bytes),
        },
        Err(e) => Err(ExtractError::Io(e.to_string())),
    };
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    match serde_json::to_writer(&mut lock, &result) {
        Ok(()) => 0,
        Err(_) => 3,
    }
}

fn image_error(format: crate::ocr::ImageFormat, error: crate::ocr::ImageError) -> ExtractError {
    match error {
        crate::ocr::ImageError::TooLarge { .. } => ExtractError::ImageTooLarge(error.to_string()),
        crate::ocr::ImageError::Damaged(reason) => ExtractError::Damaged { format: format.name().into(), reason },
    }
}

/// Set in an OCR worker's environment: the pages it reads, as `3,4,7`.
const OCR_PAGES_VARIABLE: &str = "WARPFOLD_OCR_PAGES";
/// Set in an OCR worker's environment: the OCR setting (`auto`, or Tesseract's languages).
const OCR_LANGUAGES_VARIABLE: &str = "WARPFOLD_OCR_LANGUAGES";
/// Set to 0 in an OCR worker's environment: pages that are not a picture are skipped rather than
/// rendered (the document has a text layer elsewhere; a blank page of it is just blank).
const OCR_RENDER_VARIABLE: &str = "WARPFOLD_OCR_RENDER";
/// The mean word confidence (Tesseract's, 0-100) below which a page's OCR is taken for noise:
/// measured on real files, printed and scanned text reads at 69-95 (a fax-grade scanner's page at
/// 69), a photograph with no text at 21.
const MIN_OCR_CONFIDENCE: i32 = 40;
/// What a page read below [`MIN_OCR_CONFIDENCE`] is noted with.
const NOISE_NOTE: &str = "OCR found no text it could trust";
/// Set in an OCR worker's environment: the processor seconds each page may take.
const OCR_PAGE_SECONDS_VARIABLE: &str = "WARPFOLD_OCR_PAGE_SECONDS";

/// One line of an OCR worker's output.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OcrLine {
    Page {
        page: u32,
        result: Result<crate::ocr::OcrPage, String>,
    },
    /// Tesseract could not start: no page will be read.
    Unavailable(String),
    Done {
        engine: String,
    },
}

/// Reads `pages` (1-based, comma-separated) of the PDF or image at `path` by OCR, writing one JSON
/// line per page as soon as it is read, then a `done` line.
fn ocr_worker(path: &Path, pages: &str, var: &dyn Fn(&str) -> Option<String>) -> i32 {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut say = |line: &OcrLine| -> bool {
        serde_json::to_writer(&mut out, line).is_ok() && out.write_all(b"\n").and_then(|_| out.flush()).is_ok()
    };
    let pages: Vec<u32> = pages.split(',').filter_map(|p| p.trim().parse().ok()).filter(|p| *p > 0).collect();
    let languages = var(OCR_LANGUAGES_VARIABLE).unwrap_or_else(|| crate::ocr::DEFAULT_LANGUAGES.into());
    let render = var(OCR_RENDER_VARIABLE).is_none_or(|v| v != "0");
    let mut reader = match crate::ocr::Reader::new(&languages) {
        Ok(engine) => engine,
        Err(reason) => return if say(&OcrLine::Unavailable(reason)) { 0 } else { 3 },
    };
    let bytes = match read_stdin() {
        Ok(bytes) => bytes,
        Err(e) => return if say(&OcrLine::Unavailable(format!("cannot read the file: {e}"))) { 0 } else { 3 },
    };
    let page_seconds: u64 = var(OCR_PAGE_SECONDS_VARIABLE).and_then(|v| v.parse().ok()).unwrap_or(0);
    let source = match file_kind(path) {
        Some(FileKind::Image(format)) => PageSource::Image(format),
        _ => match open_pdf(&bytes) {
            Ok((doc, _, _)) => {
                let ids = doc.get_pages();
                PageSource::Pdf(Box::new(doc), ids)
            }
            Err(e) => return if say(&OcrLine::Unavailable(format!("the PDF cannot be opened again for OCR: {e}"))) { 0 } else { 3 },
        },
    };
    for page in pages {
        // Each page its own processor time: the soft limit moves to what is used now plus the
        // page's share (SIGXCPU past it, which the indexer reports for this page).
        if page_seconds > 0 {
            cpu_limit_from_now(page_seconds);
        }
        let image = match &source {
            PageSource::Image(format) => {
                crate::ocr::image_page(&bytes, *format, page as usize).map(|i| Some((i, 300))).map_err(|e| e.to_string())
            }
            PageSource::Pdf(doc, ids) => match ids.get(&page) {
                None => Err(format!("the PDF has no page {page}")),
                Some(&id) if !render && !crate::ocr::page_has_image(doc, id) => Ok(None),
                Some(&id) => crate::ocr::pdf_page_image(doc, &bytes, page, id).map(Some),
            },
        };
        let result = match image {
            // A blank page (no ink to speak of) costs no OCR: most of a scanner's blank pages, and
            // a PDF of thousands of them.
            Ok(Some((image, _))) if crate::ocr::blank(&image) => Ok(crate::ocr::OcrPage { text: String::new(), confidence: 0 }),
            Ok(Some((image, dpi))) => reader.read(&image, dpi),
            Ok(None) => Ok(crate::ocr::OcrPage { text: String::new(), confidence: 0 }),
            Err(e) => Err(e),
        };
        if !say(&OcrLine::Page { page, result }) {
            return 3;
        }
    }
    if say(&OcrLine::Done { engine: reader.describe() }) {
        0
    } else {
        3
    }
}

/// Sets this process's soft processor-time limit to what it has used so far plus `seconds` (never
/// past the hard limit its starter set).
fn cpu_limit_from_now(seconds: u64) {
    #[cfg(target_os = "linux")]
    // SAFETY: getrusage, getrlimit and setrlimit on this process, with structs they fill.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 || libc::getrlimit(libc::RLIMIT_CPU, &mut limit) != 0 {
            return;
        }
        // Whole seconds used, rounded up: the limit counts seconds.
        let used = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + 1) as u64;
        let soft = used.saturating_add(seconds);
        limit.rlim_cur = if limit.rlim_max == libc::RLIM_INFINITY { soft as _ } else { soft.min(limit.rlim_max as u64) as _ };
        libc::setrlimit(libc::RLIMIT_CPU, &limit);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = seconds;
}

enum PageSource {
    /// The document and its pages' objects by number (boxed: a parsed document is large).
    Pdf(Box<pdf_extract::Document>, std::collections::BTreeMap<u32, lopdf::ObjectId>),
    Image(crate::ocr::ImageFormat),
}

/// What the worker does first: it dies with the indexer (and is gone at once if the indexer
/// already is). Its limits were set before it started (see [`worker_command`]).
fn apply_worker_limits() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl and getppid on this process.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() == 1 {
            return Err("the indexer that started this worker is gone".into());
        }
    }
    // The sandbox last: no writes, no network, reads of the system only (crate::sandbox).
    match crate::sandbox::restrict(&crate::sandbox::worker_readable())? {
        crate::sandbox::Enforced::NoNewPrivsOnly => eprintln!("extract-worker: no Landlock in this kernel; running without its sandbox"),
        crate::sandbox::Enforced::Full | crate::sandbox::Enforced::Partial => {}
    }
    Ok(())
}

/// util-linux's `prlimit`, which sets a program's limits and then runs it.
fn prlimit_program() -> Option<&'static Path> {
    static FOUND: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| ["/usr/bin/prlimit", "/bin/prlimit"].iter().map(PathBuf::from).find(|p| p.is_file())).as_deref()
}

/// The command that runs the worker under its limits: no core dumps, `cpu_seconds` of processor
/// time (RLIMIT_CPU) and `memory_limit` bytes of address space (RLIMIT_AS; 0: none), in force from
/// the worker's first instruction.
///
/// Why through `prlimit` when there is one: setting the limits in a `pre_exec` hook makes the
/// spawn a fork() of the indexer, which copies the page tables of a process that holds a CUDA
/// context (tens of GiB of mappings) and stalls its other threads while it does: the device
/// thread and the writer lost several milliseconds per PDF on a GPU (BENCHMARKS.md). Without a
/// hook the spawn is a posix_spawn (vfork), which copies nothing, and `prlimit` sets the limits
/// before it runs the worker. Without `prlimit` (it is in util-linux, on every common Linux
/// system) the hook is the fallback.
fn worker_command(isolation: &Isolation, cpu_seconds: u64, memory_limit: u64) -> Command {
    if let Some(prlimit) = prlimit_program() {
        let mut command = Command::new(prlimit);
        command.arg("--core=0:0").arg(format!("--cpu={cpu_seconds}:{}", cpu_seconds + 1));
        if memory_limit > 0 {
            command.arg(format!("--as={memory_limit}:{memory_limit}"));
        }
        command.arg("--").arg(&isolation.program);
        return command;
    }
    let mut command = Command::new(&isolation.program);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe calls (setrlimit) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                libc::setrlimit(libc::RLIMIT_CORE, &no_core);
                let cpu = libc::rlimit { rlim_cur: cpu_seconds as _, rlim_max: (cpu_seconds + 1) as _ };
                libc::setrlimit(libc::RLIMIT_CPU, &cpu);
                if memory_limit > 0 {
                    let limit = libc::rlimit { rlim_cur: memory_limit as _, rlim_max: memory_limit as _ };
                    libc::setrlimit(libc::RLIMIT_AS, &limit);
                }
                Ok(())
            });
        }
    }
    command
}

/// Reads a pipe to its end on a thread of its own; `last_read`, when given, is set to the
/// milliseconds since `started` each time something arrives (how a stalled worker is noticed).
///
/// At most `limit` bytes are kept (the first ones): past it the rest is read and dropped (the worker is not left
/// blocked on a full pipe), and the answer says so with `true`.
fn spawn_reader(
    mut pipe: impl Read + Send + 'static,
    started: Instant,
    last_read: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    limit: usize,
) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut over = false;
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) | Err(_) => return (buf, over),
                Ok(n) => {
                    if over || buf.len() + n > limit {
                        over = true;
                    } else {
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    if let Some(last) = &last_read {
                        last.store(started.elapsed().as_millis() as u64, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        }
    })
}

/// The most a worker may answer with: the text of a document (as JSON) of up to about 64 MiB, the
/// limit text files are read under. A document whose text is larger (a decompression bomb in a Word
/// or EPUB file passes the per-member limit many times over) is refused, so one file cannot fill
/// the indexer's memory.
const MAX_WORKER_OUTPUT: usize = 128 << 20;
/// Of a worker's error output, what is kept (a panic's message, an allocator's complaint).
const MAX_WORKER_STDERR: usize = 1 << 20;

/// What a worker did: its exit status (`None`: stopped at the wall-clock limit) and its output.
struct WorkerRun {
    status: Option<ExitStatus>,
    /// How long it ran before it ended or was stopped.
    stopped_after: Duration,
    stdout: Vec<u8>,
    stderr: String,
}

/// Runs the worker on `path` with `env` added to its environment, under `cpu_seconds` of processor
/// time (and four times that on the wall clock, or until `deadline` when that is sooner) and the
/// isolation's memory limit. With `stall`, a worker that writes nothing for that long is stopped
/// too (an OCR worker reports every page).
fn run_worker(
    path: &Path,
    file: &std::fs::File,
    isolation: &Isolation,
    env: &[(&str, String)],
    cpu_seconds: u64,
    stall: Option<Duration>,
    deadline: Option<Instant>,
) -> Result<WorkerRun, ExtractError> {
    use std::io::Seek;
    let memory_limit = isolation.memory_limit_mib.saturating_mul(1 << 20);
    let mut command = worker_command(isolation, cpu_seconds, memory_limit);
    // The document on stdin: the checked open file, from its start (a duplicate shares the offset,
    // and the workers for one document run one after the other).
    let mut input = file.try_clone().map_err(|e| ExtractError::Io(e.to_string()))?;
    input.rewind().map_err(|e| ExtractError::Io(e.to_string()))?;
    command.args(&isolation.args).arg(path).stdin(Stdio::from(input)).stdout(Stdio::piped()).stderr(Stdio::piped());
    // A panic's report is kept as the file's error: its message, never a backtrace.
    command.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE").env_remove(OCR_PAGES_VARIABLE);
    // Workers run side by side, one per core: Tesseract's own threads would only compete.
    command.env("OMP_THREAD_LIMIT", "1");
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().map_err(|e| ExtractError::Worker(format!("cannot start {}: {e}", isolation.program.display())))?;
    let started = Instant::now();
    let last_output = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stdout = spawn_reader(child.stdout.take().expect("piped"), started, Some(last_output.clone()), MAX_WORKER_OUTPUT);
    let stderr = spawn_reader(child.stderr.take().expect("piped"), started, None, MAX_WORKER_STDERR);
    let wall = started + Duration::from_secs(cpu_seconds) * WALL_FACTOR;
    let deadline = deadline.map_or(wall, |d| d.min(wall));
    let stalled = || {
        stall.is_some_and(|stall| {
            let last = Duration::from_millis(last_output.load(std::sync::atomic::Ordering::Relaxed));
            started.elapsed().saturating_sub(last) > stall
        })
    };
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline || stalled() => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => return Err(ExtractError::Worker(e.to_string())),
        }
    };
    let (stdout, too_much) = stdout.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr.join().unwrap_or_default().0).into_owned();
    if too_much {
        return Err(ExtractError::TextTooLarge { limit_mib: (MAX_WORKER_OUTPUT >> 21) as u64 });
    }
    Ok(WorkerRun { status, stopped_after: started.elapsed(), stdout, stderr })
}

/// Why a worker that did not finish cleanly stopped.
fn worker_failure(run: &WorkerRun, cpu_seconds: u64, isolation: &Isolation) -> ExtractError {
    match run.status {
        // Stopped by the wall clock (or for writing nothing): it had not used its processor time.
        None => ExtractError::StoppedWaiting(run.stopped_after.as_secs()),
        Some(status) if cpu_limit_reached(status) => ExtractError::TimedOut(cpu_seconds),
        Some(status) => classify_failure(status, &run.stderr, isolation.memory_limit_mib),
    }
}

/// Opens `path` as [`crate::files::open_checked`] does and extracts it ([`extract_opened`]).
pub fn extract_isolated(path: &Path, isolation: &Isolation) -> Result<Extracted, ExtractError> {
    let (file, _) = crate::files::open_checked(path).map_err(|e| ExtractError::Io(e.to_string()))?;
    extract_opened(path, &file, isolation)
}

/// Runs the worker on the document open as `file` (its path names its kind) and turns whatever it
/// does into a result for this file; pages without text (and image files) then go through OCR.
///
/// Why the open file and not the path: the caller checked and hashed what `file` holds; a second
/// open of the path may meet something else, a link to another user's private file or a FIFO
/// renamed over it in between. Every worker for the document, OCR's too, reads this same open
/// file on its stdin, from its start.
pub fn extract_opened(path: &Path, file: &std::fs::File, isolation: &Isolation) -> Result<Extracted, ExtractError> {
    // The time limit is processor time (RLIMIT_CPU), so a worker that waits for a busy machine (it
    // runs at a low priority beside the indexer's other work) is not stopped for the machine's
    // load; a wall-clock limit of WALL_FACTOR times as long still catches one that blocks.
    let cpu_seconds = isolation.timeout.as_secs().max(1);
    let run = run_worker(path, file, isolation, &[], cpu_seconds, None, None)?;
    let result = match run.status {
        Some(status) if status.success() => serde_json::from_slice::<Result<Extracted, ExtractError>>(&run.stdout)
            .map_err(|e| ExtractError::Worker(format!("unreadable worker output: {e}")))?,
        _ => return Err(worker_failure(&run, cpu_seconds, isolation)),
    };
    let scannable = matches!(file_kind(path), Some(FileKind::Pdf | FileKind::Image(_)));
    match (result, isolation.ocr_languages.as_deref()) {
        (Err(ExtractError::NoTextLayer { pages }), None) if scannable => {
            Err(ExtractError::OcrUnavailable { pages, reason: "OCR is turned off".into() })
        }
        (Err(ExtractError::NoTextLayer { pages }), Some(languages)) if scannable => {
            let mut extracted =
                Extracted { pages: vec![String::new(); pages], warnings: Vec::new(), ocr_pages: Vec::new(), ocr_workers: 0 };
            let wanted: Vec<u32> = (1..=pages as u32).collect();
            if let Err(reason) = ocr_into(path, file, isolation, languages, &wanted, true, &mut extracted) {
                return Err(ExtractError::OcrUnavailable { pages, reason });
            }
            if extracted.pages.iter().all(|p| p.trim().is_empty()) {
                // Every page's reason is kept: a user sees why each scan gave nothing.
                // Noise, or the document's OCR limits reached: the file's, not a passing failure.
                let noise = |w: &String| w.contains(NOISE_NOTE) || w.starts_with("OCR stopped after");
                return Err(match extracted.warnings.is_empty() {
                    true => ExtractError::NoTextLayer { pages },
                    // Noise is the file's, not a passing failure: it is not read again next run.
                    false if extracted.warnings.iter().all(noise) => {
                        ExtractError::OcrNoise { pages, reason: extracted.warnings.join("; ") }
                    }
                    false => ExtractError::OcrUnavailable { pages, reason: extracted.warnings.join("; ") },
                });
            }
            Ok(extracted)
        }
        (Ok(mut extracted), Some(languages)) if scannable => {
            let blank: Vec<u32> =
                (1..=extracted.pages.len() as u32).filter(|&p| extracted.pages[p as usize - 1].trim().is_empty()).collect();
            if !blank.is_empty() {
                if let Err(reason) = ocr_into(path, file, isolation, languages, &blank, false, &mut extracted) {
                    extracted.warnings.push(format!("{} page(s) without text were not read by OCR: {reason}", blank.len()));
                }
            }
            Ok(extracted)
        }
        (other, _) => other,
    }
}

/// Reads `wanted` pages by OCR into `extracted` (their text, `ocr_pages`, a note naming the engine
/// and the mean confidence, and a warning for each page that could not be read). `render`: pages
/// that are not a picture are rendered (else left blank). Errs only when OCR cannot run at all.
#[allow(clippy::too_many_arguments)]
fn ocr_into(
    path: &Path,
    file: &std::fs::File,
    isolation: &Isolation,
    languages: &str,
    wanted: &[u32],
    render: bool,
    extracted: &mut Extracted,
) -> Result<(), String> {
    // Each worker names the languages its pages were read in; a document read by several (after a
    // page that stopped one) names all of theirs.
    let mut engines: Vec<String> = Vec::new();
    let mut confidences = Vec::new();
    let capped = wanted.len().min(isolation.ocr_max_pages);
    let mut remaining = wanted[..capped].to_vec();
    let started = Instant::now();
    while !remaining.is_empty() {
        if started.elapsed() >= isolation.ocr_budget {
            extracted.warnings.push(format!(
                "OCR stopped after {} s, the time one document may take (--ocr-budget-secs): pages {} were not read",
                isolation.ocr_budget.as_secs(),
                page_list(&remaining)
            ));
            break;
        }
        // One worker for every page left, so the document is parsed once (another starts only
        // after a page that stopped one). Each page has its own processor time (the worker moves
        // its soft limit page by page), the whole run the sum, and no page may go more than
        // WALL_FACTOR times its limit on the clock without an answer; the document's OCR budget
        // bounds the run too.
        let batch = remaining.clone();
        let page_seconds = isolation.timeout.as_secs().max(1);
        let cpu_seconds = page_seconds * (batch.len() as u64 + 1);
        let list = batch.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let env = [
            (OCR_PAGES_VARIABLE, list),
            (OCR_LANGUAGES_VARIABLE, languages.to_string()),
            (OCR_RENDER_VARIABLE, if render { "1" } else { "0" }.to_string()),
            (OCR_PAGE_SECONDS_VARIABLE, page_seconds.to_string()),
        ];
        let stall = Duration::from_secs(page_seconds) * WALL_FACTOR;
        let deadline = started + isolation.ocr_budget;
        extracted.ocr_workers += 1;
        let run = run_worker(path, file, isolation, &env, cpu_seconds, Some(stall), Some(deadline)).map_err(|e| e.to_string())?;
        let mut answered = Vec::new();
        let mut done = false;
        for line in run.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice::<OcrLine>(line) {
                Ok(OcrLine::Page { page, result }) => {
                    answered.push(page);
                    let Some(slot) = extracted.pages.get_mut(page as usize - 1) else { continue };
                    match result {
                        // A photograph or a drawing gives Tesseract marks it reads as letters, at
                        // low confidence: noise that would be found by search, not text.
                        Ok(read) if !read.text.trim().is_empty() && read.confidence < MIN_OCR_CONFIDENCE => {
                            extracted.warnings.push(format!(
                                "page {page}: {NOISE_NOTE} (mean confidence {}%, below {MIN_OCR_CONFIDENCE}%)",
                                read.confidence
                            ));
                        }
                        Ok(read) if !read.text.trim().is_empty() => {
                            *slot = read.text;
                            extracted.ocr_pages.push(page);
                            confidences.push(read.confidence);
                        }
                        Ok(_) => {}
                        Err(reason) => extracted.warnings.push(format!("page {page}: OCR could not read it: {reason}")),
                    }
                }
                Ok(OcrLine::Unavailable(reason)) => return Err(reason),
                Ok(OcrLine::Done { engine }) => {
                    if !engines.contains(&engine) {
                        engines.push(engine);
                    }
                    done = true;
                }
                // A line cut short by the worker's death: the page it was for is the one that failed.
                Err(_) => {}
            }
        }
        remaining.retain(|p| !answered.contains(p));
        if !done && run.status.is_some_and(|s| s.success()) {
            return Err("the OCR worker stopped without finishing".into());
        }
        if done {
            // A worker that finished answers every page it was given; one it skipped is not asked again.
            for page in batch.iter().filter(|p| !answered.contains(p)) {
                extracted.warnings.push(format!("page {page}: the OCR worker gave no answer for it"));
            }
            remaining.retain(|p| !batch.contains(p));
            continue;
        }
        if run.status.is_none() && started.elapsed() >= isolation.ocr_budget {
            continue; // the document's budget, said once at the loop's top
        }
        // The first page not answered stopped the worker: it keeps the reason, the rest go on.
        let failure = worker_failure(&run, cpu_seconds, isolation);
        if let Some(&culprit) = remaining.first() {
            extracted.warnings.push(format!("page {culprit}: OCR stopped: {}", ocr_failure_text(&failure, isolation)));
            remaining.remove(0);
        }
    }
    if capped < wanted.len() {
        extracted.warnings.push(format!(
            "OCR stopped after {capped} pages, the most one document may have read (--ocr-max-pages): pages {} were not read",
            page_list(&wanted[capped..])
        ));
    }
    extracted.ocr_pages.sort_unstable();
    if !extracted.ocr_pages.is_empty() {
        let mean = confidences.iter().map(|&c| c as f64).sum::<f64>() / confidences.len() as f64;
        extracted.warnings.push(format!(
            "{} read by OCR ({}; mean confidence {mean:.0}%)",
            page_list(&extracted.ocr_pages),
            if engines.is_empty() { "Tesseract".to_string() } else { engines.join(", ") }
        ));
    }
    Ok(())
}

/// A worker failure said per page: the time limit is per page for OCR.
fn ocr_failure_text(failure: &ExtractError, isolation: &Isolation) -> String {
    match failure {
        ExtractError::TimedOut(_) => format!("it took longer than {} s of processor time", isolation.timeout.as_secs().max(1)),
        ExtractError::StoppedWaiting(_) => {
            format!(
                "it did not finish within {} s on the clock, mostly waiting rather than computing",
                isolation.timeout.as_secs().max(1) * WALL_FACTOR as u64
            )
        }
        other => other.to_string(),
    }
}

/// "page 3", "pages 1-4, 7".
fn page_list(pages: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &p in pages {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == p => *end = p,
            _ => runs.push((p, p)),
        }
    }
    let text: Vec<String> = runs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    format!("{} {}", if pages.len() == 1 { "page" } else { "pages" }, text.join(", "))
}

/// How many times the processor-time limit a worker may take on the wall clock.
const WALL_FACTOR: u32 = 4;

/// Was the worker stopped for its processor time (SIGXCPU at the soft limit, SIGKILL at the hard)?
fn cpu_limit_reached(status: ExitStatus) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        return status.signal() == Some(libc::SIGXCPU);
    }
    #[allow(unreachable_code)]
    false
}

/// At most `max` bytes of `text` (at a character boundary), with an ellipsis when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// What a worker that did not exit cleanly went through, from its status and its last words.
fn classify_failure(status: ExitStatus, stderr: &str, memory_limit_mib: u64) -> ExtractError {
    if stderr.contains("memory allocation of") || stderr.contains("out of memory") {
        return ExtractError::OutOfMemory(memory_limit_mib);
    }
    if stderr.contains("has overflowed its stack") {
        return ExtractError::Crashed("stack overflow in the PDF parser (deeply nested or cyclic structure)".into());
    }
    if status.code() == Some(101) {
        // Rust's panic report: "thread 'main' panicked at FILE:LINE:COL:\nMESSAGE\nnote: ...".
        let message = stderr
            .lines()
            .skip_while(|l| !l.contains("panicked at"))
            .skip(1)
            .take_while(|l| !l.starts_with("note:") && !l.starts_with("stack backtrace:"))
            .collect::<Vec<_>>()
            .join(" ");
        let location = stderr.lines().find(|l| l.contains("panicked at")).unwrap_or("").trim();
        let message = if message.is_empty() { location.to_string() } else { message };
        return ExtractError::Panicked(shorten(&message, 500));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let name = match signal {
                libc::SIGSEGV => "SIGSEGV",
                libc::SIGABRT => "SIGABRT",
                libc::SIGKILL => "SIGKILL",
                libc::SIGBUS => "SIGBUS",
                _ => "a signal",
            };
            return ExtractError::Crashed(format!("killed by {name} ({signal})"));
        }
    }
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
    ExtractError::Crashed(format!("exit status {}: {last}", status.code().unwrap_or(-1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The failures tried again are told apart by their messages: these are the real ones.
    #[test]
    fn failures_that_may_pass_are_told_from_failures_of_the_file() {
        let passing = [
            ExtractError::OcrUnavailable { pages: 2, reason: "OCR is turned off".into() },
            ExtractError::OcrUnavailable { pages: 1, reason: "Tesseract is not installed".into() },
            ExtractError::Worker("cannot start /opt/warpfold: No such file or directory".into()),
        ];
        for e in passing {
            assert!(may_pass(&e.to_string()), "{e}");
        }
        assert!(may_pass("embedding failed: the engine stopped"));
        let lasting = [
            ExtractError::NotPdf("GIF89a".into()),
            ExtractError::TimedOut(60),
            ExtractError::StoppedWaiting(240),
            ExtractError::OutOfMemory(2048),
            ExtractError::NoTextLayer { pages: 1 },
            ExtractError::TextTooLarge { limit_mib: 64 },
            ExtractError::TooLarge { size_mib: "70.0".into(), limit_mib: 64 },
        ];
        for e in lasting {
            assert!(!may_pass(&e.to_string()), "{e}");
        }
    }
    use crate::pdfgen::{Font, Page, PdfDocument};

    #[test]
    fn pages_come_back_in_order_with_their_text() {
        let doc = PdfDocument {
            pages: vec![
                Page::text(Font::Helvetica, "First page speaks of café prices in €."),
                Page::text(Font::TimesRoman, "Second page: crème à la française."),
                Page::text(Font::Courier, "Third page, typewriter text 1234."),
                Page::text(Font::RemappedHelveticaBold, "Fourth page uses remapped letters."),
            ],
            compress: true,
            ..Default::default()
        };
        let out = extract_pdf_in_process(&doc.to_bytes()).expect("extracts");
        assert_eq!(out.pages.len(), 4);
        let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(norm(&out.pages[0]).contains("First page speaks of café prices in €."), "{:?}", out.pages[0]);
        assert!(norm(&out.pages[1]).contains("crème à la française"), "{:?}", out.pages[1]);
        assert!(norm(&out.pages[2]).contains("typewriter text 1234"), "{:?}", out.pages[2]);
        assert!(norm(&out.pages[3]).contains("Fourth page uses remapped letters."), "{:?}", out.pages[3]);
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    }

    #[test]
    fn each_bad_input_has_its_own_error() {
        assert_eq!(extract_pdf_in_process(b""), Err(ExtractError::EmptyFile));
        assert!(matches!(extract_pdf_in_process(b"\x89PNG\r\n\x1a\nrest"), Err(ExtractError::NotPdf(_))));
        let image = PdfDocument { pages: vec![Page::image_only(), Page::image_only()], ..Default::default() };
        assert_eq!(extract_pdf_in_process(&image.to_bytes()), Err(ExtractError::NoTextLayer { pages: 2 }));
        let locked =
            PdfDocument { pages: vec![Page::text(Font::Helvetica, "secret")], encrypt_with_unknown_password: true, ..Default::default() };
        assert_eq!(extract_pdf_in_process(&locked.to_bytes()), Err(ExtractError::Encrypted));
        let good = PdfDocument { pages: vec![Page::text(Font::Helvetica, "some text"); 3], ..Default::default() };
        let bytes = good.to_bytes();
        let cut = &bytes[..bytes.len() / 2];
        assert!(matches!(extract_pdf_in_process(cut), Err(ExtractError::Truncated(_))), "{:?}", extract_pdf_in_process(cut));
    }

    proptest::proptest! {
        #![proptest_config(warpfold_testkit::cases(10_000))]

        /// A message cut for storage is a prefix of the message at a character boundary, within
        /// the limit, and says it was cut.
        #[test]
        fn a_shortened_message_is_a_prefix_cut_at_a_character_boundary(text in warpfold_testkit::text(60), max in 0usize..200) {
            let short = shorten(&text, max);
            if text.len() <= max {
                proptest::prop_assert_eq!(short, text);
            } else {
                let kept = short.strip_suffix('…').expect("a cut message ends with …");
                proptest::prop_assert!(kept.len() <= max && text.starts_with(kept));
                proptest::prop_assert!(max - kept.len() < 4, "at most one character short of the limit");
            }
        }
    }

    /// A font whose ToUnicode map has a six-byte range target (a three-letter ligature): real
    /// LaTeX manuals have them, and pdf-extract's CMap parser panics on them ("bad length of
    /// hexstring"), which lost whole documents. Poppler reads the same bytes.
    fn ligature_cmap_pdf(text: &str) -> Vec<u8> {
        use crate::pdfgen::{raw_pdf, raw_stream};
        let cmap = "/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n1 begincodespacerange <00> <FF> endcodespacerange\n\
                    1 beginbfrange <01> <01> <006600660069> endbfrange\nendcmap CMapName currentdict /CMap defineresource pop end end";
        raw_pdf(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_vec(),
                raw_stream("", format!("BT /F1 11 Tf 72 700 Td ({text}) Tj ET").as_bytes()),
                b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding /ToUnicode 6 0 R >>".to_vec(),
                raw_stream("", cmap.as_bytes()),
            ],
            "",
        )
    }

    #[test]
    fn a_pdf_the_built_in_parser_panics_on_is_read_by_poppler_and_says_so() {
        let text = "The beamer user guide explains frames overlays themes and the handout mode in detail";
        let pdf = ligature_cmap_pdf(text);
        let own = std::panic::catch_unwind(|| extract_pdf_in_process(&pdf));
        assert!(own.is_err(), "the built-in parser panics on this file: {own:?}");
        let read = extract_pdf_with_fallback(&pdf).expect("Poppler reads it");
        assert!(read.pages[0].split_whitespace().collect::<Vec<_>>().join(" ").contains(text), "{:?}", read.pages);
        assert!(
            read.warnings[0].starts_with("read by Poppler's pdftotext (the built-in parser failed: the PDF parser panicked"),
            "{:?}",
            read.warnings
        );
        // Where the built-in parser reads, it stays the reader, and nothing is noted.
        let doc = PdfDocument { pages: vec![Page::text(Font::Helvetica, "plain words on a page ".repeat(20))], ..Default::default() };
        assert!(extract_pdf_with_fallback(&doc.to_bytes()).unwrap().warnings.is_empty());
        // What neither reads keeps its own reason.
        assert_eq!(extract_pdf_with_fallback(b"%PDF-1.4 nothing"), extract_pdf_in_process(b"%PDF-1.4 nothing"));
        let image = PdfDocument { pages: vec![Page::image_only()], ..Default::default() };
        assert_eq!(extract_pdf_with_fallback(&image.to_bytes()), Err(ExtractError::NoTextLayer { pages: 1 }));
    }

    #[test]
    fn text_files_in_other_encodings_are_read_and_say_so_and_binary_ones_are_refused() {
        assert_eq!(
            extract_text_file(b"ok\r\nfine\n").unwrap(),
            Extracted { pages: vec!["ok\nfine".to_string()], warnings: vec![], ocr_pages: vec![], ocr_workers: 0 }
        );
        let latin1 = extract_text_file(b"caf\xe9 au lait, cr\xe8me br\xfbl\xe9e").unwrap();
        assert_eq!(latin1.pages, vec!["café au lait, crème brûlée".to_string()]);
        assert!(latin1.warnings[0].contains("windows-1252"), "{latin1:?}");
        assert!(matches!(extract_text_file(b"MZ\x90\x00\x03\x00\x00\x00\x04\x00"), Err(ExtractError::Binary(_))));
        assert_eq!(extract_text_file(b""), Err(ExtractError::EmptyFile));
        assert_eq!(extract_text_file(b" \n\t\n"), Err(ExtractError::Blank));
    }

    /// A stand-in worker (a shell script speaking the worker's protocol) whose OCR crashes on page
    /// 3, spins on page 4 and blocks on page 5 of a 6-page scan: those pages keep their reasons, the
    /// worker is started again after each, and pages 1, 2 and 6 are read. One whose OCR cannot start makes
    /// the document `no_text` with that reason.
    #[test]
    fn a_page_that_crashes_or_hangs_ocr_costs_only_that_page() {
        let dir = tempfile::tempdir().unwrap();
        let scan = dir.path().join("scan.pdf");
        std::fs::write(&scan, b"%PDF-1.4 stand-in").unwrap();
        let worker = |name: &str, ocr: &str| {
            let script = dir.path().join(name);
            let body = format!(
                "if [ -z \"$WARPFOLD_OCR_PAGES\" ]; then printf '{{\"Err\":{{\"kind\":\"no_text_layer\",\"detail\":{{\"pages\":6}}}}}}'; exit 0; fi\n{ocr}"
            );
            std::fs::write(&script, body).unwrap();
            let mut isolation = Isolation::new(PathBuf::from("/bin/sh"), vec![script.display().to_string()]);
            isolation.timeout = Duration::from_secs(1);
            isolation
        };
        let flaky = worker(
            "flaky.sh",
            r#"for p in $(echo "$WARPFOLD_OCR_PAGES" | tr ',' ' '); do
                 case $p in 3) kill -SEGV $$ ;; 4) while :; do :; done ;; 5) exec sleep 60 ;; esac
                 printf '{"page":{"page":%s,"result":{"Ok":{"text":"words of page %s","confidence":90}}}}
' $p $p
               done
               printf '{"done":{"engine":"Stand-in OCR"}}
'"#,
        );
        let out = extract_isolated(&scan, &flaky).expect("three of six pages read");
        assert_eq!(out.pages, ["words of page 1", "words of page 2", "", "", "", "words of page 6"]);
        assert_eq!(out.ocr_pages, [1, 2, 6]);
        assert!(
            out.warnings[0].starts_with("page 3: OCR stopped: the extraction process crashed: killed by SIGSEGV"),
            "{:?}",
            out.warnings
        );
        // Spinning: stopped by whichever limit fires first, its processor time (a quiet machine)
        // or the wall clock (a machine so busy that the spinner mostly waits for a core).
        let spun = &out.warnings[1];
        assert!(
            spun.starts_with("page 4: OCR stopped: it took longer than 1 s")
                || spun.starts_with("page 4: OCR stopped: it did not finish within 4 s"),
            "{:?}",
            out.warnings
        );
        // Blocked, not spinning: stopped for writing nothing for four times the per-page limit.
        assert!(out.warnings[2].starts_with("page 5: OCR stopped: it did not finish within 4 s on the clock"), "{:?}", out.warnings);
        assert_eq!(out.warnings[3], "pages 1-2, 6 read by OCR (Stand-in OCR; mean confidence 90%)");
        let missing = worker(
            "missing.sh",
            r#"printf '{"unavailable":"Tesseract is not installed: install it"}
'"#,
        );
        let err = extract_isolated(&scan, &missing).unwrap_err();
        assert_eq!(err, ExtractError::OcrUnavailable { pages: 6, reason: "Tesseract is not installed: install it".into() });
        assert_eq!(err.status(), "no_text");
        let mut off = missing.clone();
        off.ocr_languages = None;
        assert!(extract_isolated(&scan, &off).unwrap_err().to_string().ends_with("OCR is turned off"));
    }

    /// One OCR worker reads every page of a document, so the PDF is parsed once, each page with its
    /// own processor time; the document's OCR budget stops the worker mid-run and names the pages
    /// not read. Before, a worker was started (and the whole PDF parsed) for every 8 pages, and
    /// the budget was looked at only between them.
    #[test]
    fn one_ocr_worker_reads_all_pages_and_the_budget_stops_it_mid_run() {
        let dir = tempfile::tempdir().unwrap();
        let scan = dir.path().join("scan.pdf");
        std::fs::write(&scan, b"%PDF-1.4 stand-in").unwrap();
        let starts = dir.path().join("starts");
        let worker = |name: &str, slow_from: u32| {
            let script = dir.path().join(name);
            let body = format!(
                r#"if [ -z "$WARPFOLD_OCR_PAGES" ]; then printf '{{"Err":{{"kind":"no_text_layer","detail":{{"pages":20}}}}}}'; exit 0; fi
echo "$WARPFOLD_OCR_PAGES $WARPFOLD_OCR_PAGE_SECONDS" >> {starts}
for p in $(echo "$WARPFOLD_OCR_PAGES" | tr ',' ' '); do
  [ $p -ge {slow_from} ] && sleep 1
  printf '{{"page":{{"page":%s,"result":{{"Ok":{{"text":"words of page %s","confidence":90}}}}}}}}
' $p $p
done
printf '{{"done":{{"engine":"Stand-in OCR"}}}}
'"#,
                starts = starts.display()
            );
            std::fs::write(&script, body).unwrap();
            let mut isolation = Isolation::new(PathBuf::from("/bin/sh"), vec![script.display().to_string()]);
            isolation.timeout = Duration::from_secs(3);
            isolation
        };
        let out = extract_isolated(&scan, &worker("fast.sh", 99)).unwrap();
        assert_eq!(out.ocr_pages, (1..=20).collect::<Vec<u32>>());
        assert_eq!(out.ocr_workers, 1);
        let started = std::fs::read_to_string(&starts).unwrap();
        let pages: Vec<String> = (1..=20).map(|p| p.to_string()).collect();
        assert_eq!(started, format!("{} 3\n", pages.join(",")), "one worker, given every page and each page's seconds");

        // Pages 5 on take a second each; the budget of 3 s stops the worker after a few of them.
        std::fs::remove_file(&starts).unwrap();
        let mut slow = worker("slow.sh", 5);
        slow.ocr_budget = Duration::from_secs(3);
        // How many pages fit in the budget depends on the machine's load (none, on one so busy
        // that the worker did not get to run): whatever was read is a prefix, and the rest is named.
        let (read, stop) = match extract_isolated(&scan, &slow) {
            Ok(out) => {
                assert_eq!(out.ocr_workers, 1, "{:?}", out.warnings);
                let stop = out.warnings.iter().find(|w| w.starts_with("OCR stopped after 3 s")).cloned();
                (out.ocr_pages, stop.unwrap_or_else(|| panic!("{:?}", out.warnings)))
            }
            Err(e) => (Vec::new(), e.to_string()),
        };
        let last = read.last().copied().unwrap_or(0);
        assert!(last < 20 && read == (1..=last).collect::<Vec<u32>>(), "{read:?}");
        let rest = if last == 19 { "page 20".to_string() } else { format!("pages {}-20", last + 1) };
        assert!(stop.contains("OCR stopped after 3 s") && stop.contains(&format!("{rest} were not read")), "{stop}");
    }

    #[test]
    fn normalizing_keeps_words_and_drops_noise() {
        assert_eq!(normalize_page("\n\nA  b \r\n\n\n\nc\x0c d\u{0}\n\n"), "A  b\n\nc d");
        assert_eq!(normalize_page("the ﬁnancial e\u{fb00}ect of ﬂow, o\u{fb03}ce"), "the financial effect of flow, office");
    }

    #[test]
    fn file_kinds_follow_the_extension() {
        assert_eq!(file_kind(Path::new("a/B.PDF")), Some(FileKind::Pdf));
        assert_eq!(file_kind(Path::new("notes.md")), Some(FileKind::Text));
        assert_eq!(file_kind(Path::new("photo.JPG")), Some(FileKind::Image(crate::ocr::ImageFormat::Jpeg)));
        assert_eq!(file_kind(Path::new("scan.tiff")), Some(FileKind::Image(crate::ocr::ImageFormat::Tiff)));
        assert_eq!(file_kind(Path::new("clip.gif")), None);
        assert_eq!(file_kind(Path::new("Makefile")), None);
        // Tables and data exports are read as text, not skipped in silence.
        for name in ["budget.CSV", "export.tsv", "contacts.json"] {
            assert_eq!(file_kind(Path::new(name)), Some(FileKind::Text), "{name}");
        }
    }

    #[test]
    fn a_csv_in_windows_1252_is_read_as_text_with_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("budget.csv");
        std::fs::write(&path, b"poste;montant\r\nd\xe9p\xf4t de garantie;1700 \x80\r\nloyer;850 \x80\r\n").unwrap();
        let extracted = extract_file(&path, &Isolation::new(PathBuf::from("unused: a text is read here"), vec![])).unwrap();
        assert!(extracted.pages[0].contains("dépôt de garantie;1700 €"), "{:?}", extracted.pages);
        assert!(extracted.pages[0].contains("loyer;850 €"), "{:?}", extracted.pages);
    }

    /// `n` pages, each with its planted sentence (and accented words and a € on the Helvetica and
    /// Times pages) in the four fonts in turn, for the page-tree and content-stream tests.
    fn planted_pages(n: usize) -> Vec<Page> {
        let fonts = [Font::Helvetica, Font::TimesRoman, Font::Courier, Font::RemappedHelveticaBold];
        (0..n)
            .map(|p| {
                let font = fonts[p % fonts.len()];
                let extra = match font {
                    Font::Helvetica => " Le café coûte 3 €.",
                    Font::TimesRoman => " Une crème à la française.",
                    _ => "",
                };
                Page::text(font, format!("{}{extra}", crate::pdfgen::planted_sentence(0, p)))
            })
            .collect()
    }

    fn assert_planted_on_their_pages(out: &Extracted, n: usize) {
        let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(out.pages.len(), n, "{:#?}", out.pages);
        for (p, page) in out.pages.iter().enumerate() {
            assert!(norm(page).contains(&crate::pdfgen::planted_sentence(0, p)), "page {}: {page:?}", p + 1);
            match p % 4 {
                0 => assert!(norm(page).contains("Le café coûte 3 €."), "page {}: {page:?}", p + 1),
                1 => assert!(norm(page).contains("Une crème à la française."), "page {}: {page:?}", p + 1),
                _ => {}
            }
        }
    }

    #[test]
    fn a_page_tree_cycle_or_a_page_listed_twice_gives_each_page_once_on_its_own_number() {
        use crate::pdfgen::{Layout, PageTree};
        for tree in [PageTree::Cycle { fanout: 2 }, PageTree::Cycle { fanout: 3 }, PageTree::Cycle { fanout: 8 }, PageTree::PageTwice] {
            for compress in [false, true] {
                let doc = PdfDocument { pages: planted_pages(7), compress, ..Default::default() };
                let out = extract_pdf_in_process(&doc.to_bytes_with(Layout { tree, ..Default::default() }))
                    .unwrap_or_else(|e| panic!("{tree:?}: {e}"));
                assert_planted_on_their_pages(&out, 7);
                assert!(out.warnings.iter().any(|w| w.contains("page tree")), "{tree:?}: {:?}", out.warnings);
            }
        }
    }

    #[test]
    fn nested_page_trees_with_inherited_resources_read_as_they_are() {
        use crate::pdfgen::{Layout, PageTree};
        for fanout in [2, 3, 10] {
            let doc = PdfDocument { pages: planted_pages(9), compress: true, ..Default::default() };
            let layout = Layout { tree: PageTree::Nested { fanout }, ..Default::default() };
            let out = extract_pdf_in_process(&doc.to_bytes_with(layout)).unwrap();
            assert_planted_on_their_pages(&out, 9);
            assert!(out.warnings.is_empty(), "{:?}", out.warnings);
        }
    }

    #[test]
    fn text_in_a_later_content_stream_is_read_after_one_that_cannot_be_decoded_or_parsed() {
        use crate::pdfgen::{Contents, Layout, PageTree};
        for contents in [Contents::HexBackgroundFirst, Contents::StrayTokenFirst, Contents::Split(1), Contents::Split(3)] {
            for tree in [PageTree::Flat, PageTree::Cycle { fanout: 2 }] {
                for compress in [false, true] {
                    let doc = PdfDocument { pages: planted_pages(5), compress, ..Default::default() };
                    let out = extract_pdf_in_process(&doc.to_bytes_with(Layout { tree, contents, ..Default::default() }))
                        .unwrap_or_else(|e| panic!("{contents:?} {tree:?} compress {compress}: {e}"));
                    assert_planted_on_their_pages(&out, 5);
                }
            }
        }
        // A first stream in a filter nobody decodes is left out with a note; the text after it stays.
        use crate::pdfgen::{raw_pdf, raw_stream};
        let bytes = raw_pdf(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents [5 0 R 6 0 R] >>"
                    .to_vec(),
                b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_vec(),
                raw_stream(" /Filter /JBIG2Decode", b"\x97\x4a\x42\x32"),
                raw_stream("", b"BT /F1 10 Tf 56 740 Td (After the odd stream) Tj ET"),
            ],
            "",
        );
        let out = extract_pdf_in_process(&bytes).unwrap();
        assert!(out.pages[0].contains("After the odd stream"), "{out:?}");
        assert!(out.warnings.iter().any(|w| w.contains("page 1: content stream 1 of 2: unsupported filter /JBIG2Decode")), "{out:?}");
    }
}
