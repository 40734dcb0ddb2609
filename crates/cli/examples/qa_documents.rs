//! Writes the documents of `warpfold ask`'s test and benchmark into a folder (the long reports as
//! PDFs of several pages) and, beside them, `pages.jsonl`: one line per document with its id, file
//! and pages' text, which bench/qa/score.py reads to find the page that holds each question's fact.
//!
//!     cargo run --release -p warpfold --example qa_documents -- OUT_DIR

#[path = "../../../tests/ask_documents.rs"]
mod ask_documents;

use std::io::Write;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::args().nth(1).ok_or("usage: qa_documents OUT_DIR")?);
    let docs_dir = out.join("docs");
    std::fs::create_dir_all(&docs_dir)?;
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).canonicalize()?;
    let docs = ask_documents::write_documents(&docs_dir, &repo);
    let mut pages = std::fs::File::create(out.join("pages.jsonl"))?;
    for (id, path, texts) in &docs {
        let path = path.canonicalize()?;
        writeln!(pages, "{}", serde_json::json!({ "id": id, "path": path, "pages": texts }))?;
    }
    eprintln!("{} documents in {}, {} pages", docs.len(), docs_dir.display(), docs.iter().map(|d| d.2.len()).sum::<usize>());
    Ok(())
}
