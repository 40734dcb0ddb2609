//! The documents and questions of `warpfold ask`'s test and benchmark: the documents of
//! tests/data/facts written as files (the four long reports as PDFs of several pages, the rest as
//! text), the questions of tests/data/qa, and how an answer is compared with a question's keys.
//! Shared by tests/ask.rs and crates/cli/examples/qa_documents.rs (`#[path]`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use warpfold_index::pdfgen::{Font, Page, PdfDocument, TextBlock};

#[derive(serde::Deserialize)]
pub struct FactDocument {
    pub id: String,
    pub text: String,
}

#[derive(serde::Deserialize, serde::Serialize)]
pub struct Question {
    pub id: String,
    pub doc: Option<String>,
    pub question: String,
    pub answer_keys: Vec<String>,
    pub evidence: Option<String>,
    pub answerable: bool,
}

/// Words per page of the reports' PDFs.
pub const PAGE_WORDS: usize = 450;

pub fn lines<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// `text` as Helvetica writes it: letters it has no code for lose their accent ("ń" → "n").
pub fn helvetica(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    text.chars()
        .map(|c| {
            if Font::Helvetica.can_encode(&c.to_string()) {
                c.to_string()
            } else {
                c.to_string().nfkd().filter(|d| d.is_ascii()).collect()
            }
        })
        .collect()
}

/// A report as pages of about [`PAGE_WORDS`] words, whole paragraphs each.
pub fn pages(text: &str) -> Vec<Vec<String>> {
    let mut pages: Vec<Vec<String>> = vec![Vec::new()];
    let mut words = 0;
    for paragraph in text.split('\n').map(str::trim).filter(|p| !p.is_empty()) {
        if words >= PAGE_WORDS {
            pages.push(Vec::new());
            words = 0;
        }
        words += paragraph.split_whitespace().count();
        pages.last_mut().expect("a page").push(paragraph.to_string());
    }
    pages
}

pub fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lower case, thousands commas between digits removed: how the set's keys are written.
pub fn normalized(text: &str) -> String {
    let lower = squeeze(&text.to_lowercase());
    let chars: Vec<char> = lower.chars().collect();
    chars
        .iter()
        .enumerate()
        .filter(|&(i, &c)| !(c == ',' && i > 0 && chars[i - 1].is_ascii_digit() && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit())))
        .map(|(_, c)| c)
        .collect()
}

/// Writes the documents into `dir` (reports as PDFs) and returns, for each document, its id, its
/// file and its pages' text.
pub fn write_documents(dir: &Path, repo: &Path) -> Vec<(String, PathBuf, Vec<String>)> {
    let docs: Vec<FactDocument> = lines(&repo.join("tests/data/facts/documents.jsonl"));
    let mut out = Vec::new();
    for d in docs {
        if d.id.starts_with("report-") {
            let laid = pages(&helvetica(&d.text));
            let pdf = PdfDocument {
                pages: laid
                    .iter()
                    .map(|ps| Page {
                        blocks: ps.iter().map(|p| TextBlock { font: Font::Helvetica, text: p.clone() }).collect(),
                        image: false,
                    })
                    .collect(),
                compress: true,
                encrypt_with_unknown_password: false,
            };
            let path = dir.join(format!("{}.pdf", d.id));
            std::fs::write(&path, pdf.to_bytes()).unwrap();
            out.push((d.id, path, laid.iter().map(|ps| ps.join("\n")).collect()));
        } else {
            let path = dir.join(format!("{}.txt", d.id));
            std::fs::write(&path, &d.text).unwrap();
            out.push((d.id, path, vec![d.text]));
        }
    }
    out
}

/// The 1-based page of `pages` that holds `evidence` (compared as Helvetica wrote it, spaces
/// collapsed).
pub fn page_of(pages: &[String], evidence: &str) -> Option<usize> {
    let evidence = squeeze(&helvetica(evidence));
    pages.iter().position(|p| squeeze(p).contains(&evidence)).map(|i| i + 1)
}
