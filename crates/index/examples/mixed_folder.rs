//! Writes a mixed folder for the indexing benchmark of issue 16 (BENCHMARKS.md, "a mixed folder"):
//! N documents of each format warpfold reads (PDF, Word, OpenDocument, EPUB, HTML, RTF, text),
//! each of three pages of seeded filler (the same words for every format), so that formats can be
//! compared by documents and tokens per second. With `scans`, each document also comes as a
//! scanned PDF (its three pages typeset at 300 dpi, turned and grainy, JPEG) and a PNG photo of its
//! first page, both read by OCR.
//!
//!   cargo run --release -p warpfold-index --example mixed_folder -- DIR [N] [scans]
//!   ./target/release/warpfold index DIR --db mixed.db --json

use std::path::PathBuf;

use warpfold_index::docgen;
use warpfold_index::pdfgen::{Font, Page, PdfDocument, TextBlock};
use warpfold_index::scangen::{self, Encoding, ScanSettings};
use warpfold_testkit::seeded::{words, Rng};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: mixed_folder DIR [N]"));
    let n: usize = args.next().map_or(20, |s| s.parse().expect("N is a number"));
    let scans = args.next().as_deref() == Some("scans");
    let font = if scans { Some(scangen::load_font().expect("a font for the scans")) } else { None };
    std::fs::create_dir_all(&dir)?;
    let mut rng = Rng::new(16);
    for i in 0..n {
        let pages: Vec<String> = (0..3).map(|_| words(&mut rng, 220)).collect();
        let refs: Vec<&str> = pages.iter().map(String::as_str).collect();
        let paged: Vec<&[&str]> = refs.iter().map(std::slice::from_ref).collect();
        let title = format!("Document {i}");
        std::fs::write(dir.join(format!("doc-{i}.docx")), docgen::docx(&title, &paged))?;
        std::fs::write(dir.join(format!("doc-{i}.odt")), docgen::odt(&title, &paged))?;
        std::fs::write(dir.join(format!("doc-{i}.epub")), docgen::epub(&title, &paged))?;
        std::fs::write(dir.join(format!("doc-{i}.html")), docgen::html(&title, &paged))?;
        std::fs::write(dir.join(format!("doc-{i}.rtf")), docgen::rtf(&title, &paged))?;
        std::fs::write(dir.join(format!("doc-{i}.txt")), pages.join("\n\n"))?;
        let pdf = PdfDocument {
            pages: pages
                .iter()
                .map(|p| Page { blocks: vec![TextBlock { font: Font::Helvetica, text: p.clone() }], image: false })
                .collect(),
            compress: true,
            encrypt_with_unknown_password: false,
        };
        std::fs::write(dir.join(format!("doc-{i}.pdf")), pdf.to_bytes())?;
        if let Some(font) = &font {
            let scanned: Vec<_> = pages
                .iter()
                .enumerate()
                .map(|(p, text)| scangen::scan(&scangen::typeset(font, text, 300).0, &ScanSettings::noisy(300, (i * 3 + p) as u64)))
                .collect();
            std::fs::write(dir.join(format!("doc-{i}-scan.pdf")), scangen::scanned_pdf(&scanned, 300, Encoding::Jpeg { quality: 80 }))?;
            scangen::save_image(&scanned[0], &dir.join(format!("doc-{i}.png"))).map_err(std::io::Error::other)?;
        }
    }
    println!("{} files in {}", if scans { 9 } else { 7 } * n, dir.display());
    Ok(())
}
