//! Poppler's command-line tools, where installed (Debian: poppler-utils): `pdftoppm` renders a page
//! for OCR, `pdftotext` reads the text of a PDF the built-in parser cannot.
//!
//! Why the document goes in on stdin, never by path: the extraction worker reads the bytes that
//! were hashed, and a second open of the path could meet a different file (a link or a FIFO
//! swapped in since). Why the output comes back on stdout: `pdftoppm FILE -` does not mean
//! stdout — Poppler takes `-` as an output *root* and writes `./-.pgm` into the current folder —
//! so the root is omitted, which is what writes to stdout. Each tool dies with the worker
//! (PR_SET_PDEATHSIG), so the worker's time limit bounds it too.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// Where a Poppler tool is installed, if it is.
pub fn program(name: &str) -> Option<std::path::PathBuf> {
    ["/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"].into_iter().map(|dir| Path::new(dir).join(name)).find(|p| p.is_file())
}

/// The most a tool may write: a 300 dpi grey page of 150 megapixels, with room for its header.
const MAX_OUTPUT: u64 = crate::ocr::MAX_PIXELS + 4096;

/// Runs Poppler's `name` with `args` (the input named `-`), `pdf` on its stdin; its stdout, at most
/// [`MAX_OUTPUT`] bytes. A tool that is not installed, fails or writes too much is an error that
/// says which.
pub fn run(name: &str, args: &[&str], pdf: &[u8]) -> Result<Vec<u8>, String> {
    let Some(path) = program(name) else {
        return Err(format!("Poppler's {name} is not installed (Debian: apt install poppler-utils)"));
    };
    let mut command = Command::new(path);
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    #[cfg(target_os = "linux")]
    // SAFETY: prctl between fork and exec, on the child alone; no allocation.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| format!("{name}: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = child.stdout.take().expect("piped");
    // Written from a second thread: a tool may start writing before it has read everything.
    let (written, output) = std::thread::scope(|scope| {
        let writer = scope.spawn(move || {
            let result = stdin.write_all(pdf);
            drop(stdin);
            result
        });
        let mut output = Vec::new();
        let read = (&mut stdout).take(MAX_OUTPUT + 1).read_to_end(&mut output);
        (writer.join().expect("the writer does not panic"), read.map(|_| output))
    });
    let output = output.map_err(|e| format!("{name}: reading its output: {e}"));
    if output.as_ref().is_ok_and(|o| o.len() as u64 > MAX_OUTPUT) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("{name} wrote more than {} MB", MAX_OUTPUT / 1_000_000));
    }
    let status = child.wait().map_err(|e| format!("{name}: {e}"))?;
    if !status.success() {
        return Err(format!("{name} failed ({status})"));
    }
    // A tool that exits early may close its stdin unread: only its status tells.
    let _ = written;
    output
}

/// The text of each page of `pdf` as `pdftotext` reads it (its layout-free reading order), page
/// breaks from its form feeds.
pub fn pdftotext_pages(pdf: &[u8]) -> Result<Vec<String>, String> {
    let out = run("pdftotext", &["-enc", "UTF-8", "-", "-"], pdf)?;
    let text = String::from_utf8_lossy(&out);
    let mut pages: Vec<String> = text.split('\u{c}').map(str::to_string).collect();
    // pdftotext ends the last page with a form feed too.
    if pages.len() > 1 && pages.last().is_some_and(|p| p.trim().is_empty()) {
        pages.pop();
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdftotext_reads_a_pdf_from_stdin_page_by_page() {
        if program("pdftotext").is_none() {
            eprintln!("skipped: Poppler's pdftotext is not installed");
            return;
        }
        use crate::pdfgen::{Font, Page, PdfDocument};
        let pages = vec![Page::text(Font::Helvetica, "heron lantern one"), Page::text(Font::Courier, "violet second page")];
        let pdf = PdfDocument { pages, compress: true, ..Default::default() }.to_bytes();
        let pages = pdftotext_pages(&pdf).unwrap();
        assert_eq!(pages.len(), 2, "{pages:?}");
        assert!(pages[0].contains("heron lantern one") && pages[1].contains("violet second page"), "{pages:?}");
        assert!(run("pdftotext", &["-", "-"], b"not a pdf").is_err());
    }
}
