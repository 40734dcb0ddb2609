//! Text out of files: PDF pages with pdf-extract, plain text and Markdown as they are, Word,
//! OpenDocument, HTML, EPUB and RTF through [`crate::formats`].
//!
//! Why a separate process per PDF: pdf-extract (and lopdf under it) panic on many malformed files,
//! can recurse until the stack overflows (which aborts the whole process, uncatchably), and can
//! spin or balloon on hostile input. So every PDF is read by a short-lived worker process (the
//! `warpfold extract-worker` command) under a wall-clock limit and an address-space limit; whatever
//! happens to it becomes that file's recorded error and the run goes on. The other document formats
//! (zip archives, XML, HTML from anywhere) go through the same worker. Text files cannot trip a
//! parser and are read in-process.

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
    #[error("no text layer: none of the {pages} page(s) holds extractable text (a scan or image-only PDF?); OCR is not supported")]
    NoTextLayer { pages: usize },
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
    #[error("cannot read the file: {0}")]
    Io(String),
    #[error("the file is {size_mib} MiB; text files over {limit_mib} MiB are not read (raise the limit with --max-text-mib)")]
    TooLarge { size_mib: String, limit_mib: u64 },
    #[error("the PDF parser panicked: {0}")]
    Panicked(String),
    #[error("extraction took longer than {0} s of processor time and was stopped (raise --extract-timeout for very large files)")]
    TimedOut(u64),
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
            ExtractError::NoTextLayer { .. } | ExtractError::Blank => "no_text",
            _ => "failed",
        }
    }
}

/// The text of one file, page by page (text files are one page).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extracted {
    pub pages: Vec<String>,
    /// Pages that could not be read while the others could: kept with the document so nothing
    /// goes missing silently.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Pdf,
    Text,
    /// Word, OpenDocument, HTML, EPUB, RTF ([`crate::formats`]).
    Document(crate::formats::Format),
}

/// The file types warpfold reads, for messages.
pub const SUPPORTED: &str = ".pdf, .txt, .md, .docx, .odt, .html, .htm, .epub and .rtf";

/// The kind of file by extension, or `None` for files warpfold does not read.
pub fn file_kind(path: &Path) -> Option<FileKind> {
    use crate::formats::Format;
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "pdf" => Some(FileKind::Pdf),
        "txt" | "text" | "md" | "markdown" => Some(FileKind::Text),
        "docx" => Some(FileKind::Document(Format::Docx)),
        "odt" => Some(FileKind::Document(Format::Odt)),
        "html" | "htm" | "xhtml" => Some(FileKind::Document(Format::Html)),
        "epub" => Some(FileKind::Document(Format::Epub)),
        "rtf" => Some(FileKind::Document(Format::Rtf)),
        _ => None,
    }
}

fn describe_start(bytes: &[u8]) -> String {
    let head: String = bytes.iter().take(8).map(|&b| if b.is_ascii_graphic() { b as char } else { '.' }).collect();
    format!("{head:?}")
}

/// Reads a PDF from memory, in this process. Only the extraction worker should call this on
/// untrusted input: it may panic, abort or never return.
pub fn extract_pdf_in_process(bytes: &[u8]) -> Result<Extracted, ExtractError> {
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
    // page listed twice, and loses the text after a content stream it cannot decode or parse:
    // both are repaired in the loaded document first (crate::pdfpages).
    let mut notes: Vec<String> = crate::pdfpages::repair_page_tree(&mut doc).into_iter().collect();
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
    Ok(Extracted { pages, warnings })
}

/// Tidies extracted page text: Unix line ends, no control characters, no trailing spaces, at most
/// one blank line in a row. Words and their order are untouched.
pub fn normalize_page(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.split('\n') {
        let line: String = line.chars().filter(|c| !c.is_control() || *c == '\t').collect();
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
    Ok(Extracted { pages: vec![normalize_page(&decoded.text)], warnings })
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
}

impl Isolation {
    pub fn new(program: PathBuf, args: Vec<String>) -> Self {
        Isolation { program, args, timeout: Duration::from_secs(60), memory_limit_mib: 2048 }
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
        Some(FileKind::Pdf | FileKind::Document(_)) => extract_isolated(path, isolation),
        None => Err(ExtractError::Unsupported(
            path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_else(|| "(no extension)".into()),
        )),
    }
}

/// The extraction worker's whole job: read `path`, extract, print the result as one JSON value on
/// stdout. Returns the process exit code.
pub fn worker_main(path: &Path) -> i32 {
    if let Err(e) = apply_worker_limits() {
        eprintln!("extract-worker: {e}");
        return 4;
    }
    let result = match std::fs::read(path) {
        Ok(bytes) => match file_kind(path) {
            Some(FileKind::Document(format)) => crate::formats::extract(format, &bytes),
            _ => extract_pdf_in_process(&bytes),
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

fn spawn_reader(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

/// Runs the worker on `path` and turns whatever it does into a result for this file.
pub fn extract_isolated(path: &Path, isolation: &Isolation) -> Result<Extracted, ExtractError> {
    let memory_limit = isolation.memory_limit_mib.saturating_mul(1 << 20);
    // The time limit is processor time (RLIMIT_CPU), so a worker that waits for a busy machine (it
    // runs at a low priority beside the indexer's other work) is not stopped for the machine's
    // load; a wall-clock limit of WALL_FACTOR times as long still catches one that blocks.
    let cpu_seconds = isolation.timeout.as_secs().max(1);
    let mut command = worker_command(isolation, cpu_seconds, memory_limit);
    command.args(&isolation.args).arg(path).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // A panic's report is kept as the file's error: its message, never a backtrace.
    command.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
    let mut child = command.spawn().map_err(|e| ExtractError::Worker(format!("cannot start {}: {e}", isolation.program.display())))?;
    let stdout = spawn_reader(child.stdout.take().expect("piped"));
    let stderr = spawn_reader(child.stderr.take().expect("piped"));
    let deadline = Instant::now() + isolation.timeout * WALL_FACTOR;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
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
    let stdout = stdout.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
    match status {
        None => Err(ExtractError::TimedOut(isolation.timeout.as_secs().max(1))),
        Some(status) if status.success() => serde_json::from_slice::<Result<Extracted, ExtractError>>(&stdout)
            .map_err(|e| ExtractError::Worker(format!("unreadable worker output: {e}")))?,
        Some(status) if cpu_limit_reached(status) => Err(ExtractError::TimedOut(cpu_seconds)),
        Some(status) => Err(classify_failure(status, &stderr, isolation.memory_limit_mib)),
    }
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

    #[test]
    fn text_files_in_other_encodings_are_read_and_say_so_and_binary_ones_are_refused() {
        assert_eq!(extract_text_file(b"ok\r\nfine\n").unwrap(), Extracted { pages: vec!["ok\nfine".to_string()], warnings: vec![] });
        let latin1 = extract_text_file(b"caf\xe9 au lait, cr\xe8me br\xfbl\xe9e").unwrap();
        assert_eq!(latin1.pages, vec!["café au lait, crème brûlée".to_string()]);
        assert!(latin1.warnings[0].contains("windows-1252"), "{latin1:?}");
        assert!(matches!(extract_text_file(b"MZ\x90\x00\x03\x00\x00\x00\x04\x00"), Err(ExtractError::Binary(_))));
        assert_eq!(extract_text_file(b""), Err(ExtractError::EmptyFile));
        assert_eq!(extract_text_file(b" \n\t\n"), Err(ExtractError::Blank));
    }

    #[test]
    fn normalizing_keeps_words_and_drops_noise() {
        assert_eq!(normalize_page("\n\nA  b \r\n\n\n\nc\x0c d\u{0}\n\n"), "A  b\n\nc d");
    }

    #[test]
    fn file_kinds_follow_the_extension() {
        assert_eq!(file_kind(Path::new("a/B.PDF")), Some(FileKind::Pdf));
        assert_eq!(file_kind(Path::new("notes.md")), Some(FileKind::Text));
        assert_eq!(file_kind(Path::new("photo.jpg")), None);
        assert_eq!(file_kind(Path::new("Makefile")), None);
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
