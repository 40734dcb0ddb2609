//! Real files nobody here wrote (tests/data/real: OCRmyPDF's scans and odd PDFs, a damaged
//! LibreOffice document, TeX Live manuals that crash the built-in PDF parser), indexed through the
//! real binary: only blank or text-free files may go without text, each with its reason; scans in
//! JBIG2, CCITT G4 and vector drawings are read by OCR (rendered by Poppler); PDFs the built-in
//! parser panics on are read by Poppler and say so; the damaged .odt is read from its members.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use warpfold_index::store::Store;

use crate::common::{repo, warpfold};

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2).map(str::to_lowercase).collect()
}

/// The share of `truth`'s words (distinct, over two letters) found in `read`.
fn recall(read: &str, truth: &str) -> f64 {
    let have: HashSet<String> = words(read).into_iter().collect();
    let want: HashSet<String> = words(truth).into_iter().collect();
    want.iter().filter(|w| have.contains(*w)).count() as f64 / want.len().max(1) as f64
}

#[test]
fn real_scans_manuals_and_a_damaged_document_are_read_and_only_text_free_files_fail() {
    std::env::set_var("OMP_THREAD_LIMIT", "1");
    let files = repo().join("tests/data/real/files");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("real.db");
    let out = warpfold().arg("index").arg(&files).arg("--db").arg(&db).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let name = |v: &serde_json::Value| PathBuf::from(v["path"].as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned();
    let failures: BTreeMap<String, (String, String)> = report["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (name(f), (f["status"].as_str().unwrap().to_string(), f["error"].as_str().unwrap().to_string())))
        .collect();
    // Only the blank page and the photograph go without text, as no_text with their reasons.
    assert_eq!(failures.keys().collect::<Vec<_>>(), ["lichtenstein.pdf", "no_contents.pdf"], "{failures:#?}");
    assert!(failures.values().all(|(status, _)| status == "no_text"), "{failures:#?}");
    assert!(
        failures["lichtenstein.pdf"].1.contains("OCR found no text it could trust (mean confidence"),
        "{}",
        failures["lichtenstein.pdf"].1
    );
    assert_eq!(report["documents_indexed"], 15, "{report}");
    let warnings: BTreeMap<String, String> = report["warnings"].as_array().unwrap().iter().fold(BTreeMap::new(), |mut all, w| {
        all.entry(name(w)).or_insert_with(String::new).push_str(w["error"].as_str().unwrap());
        all
    });
    for manual in ["pdfpages.pdf", "sample-accsupp.pdf", "coloring-doc.pdf"] {
        assert!(
            warnings[manual].contains("read by Poppler's pdftotext (the built-in parser failed: the PDF parser panicked"),
            "{manual}: {}",
            warnings[manual]
        );
    }
    assert!(warnings["tagged.odt"].starts_with("the zip archive's directory is damaged"), "{}", warnings["tagged.odt"]);
    for scan in ["jbig2.pdf", "linn.pdf", "ccitt.pdf", "kcs.pdf", "c03-29.pdf", "vector.pdf"] {
        assert!(warnings[scan].contains("read by OCR"), "{scan}: {}", warnings[scan]);
    }

    let store = Store::open_read_only(&db).unwrap();
    let text =
        |file: &str| store.document_text(files.join(file).to_str().unwrap()).unwrap().unwrap_or_else(|| panic!("{file} has no text")).1;
    // The JBIG2 and CCITT G4 scans of one brochure page, against the page's own text.
    let truth = std::fs::read_to_string(repo().join("tests/data/real/linn.txt")).unwrap();
    for scan in ["jbig2.pdf", "linn.pdf", "ccitt.pdf"] {
        let r = recall(&text(scan), &truth);
        assert!(r >= 0.9, "{scan}: word recall {r:.3}");
    }
    // A vector drawing of text, rendered by pdftoppm and read.
    assert!(text("vector.pdf").contains("Sample Vector PDF for Testing"), "{}", text("vector.pdf"));
    assert!(text("c03-29.pdf").split_whitespace().count() > 200, "{}", text("c03-29.pdf"));
    // The manuals the built-in parser panics on, read whole by Poppler.
    for (manual, phrase) in [("pdfpages.pdf", "includepdf"), ("sample-accsupp.pdf", "glossar"), ("coloring-doc.pdf", "color")] {
        let body = text(manual);
        assert!(
            body.split_whitespace().count() > 200 && body.to_lowercase().contains(phrase),
            "{manual}: {} words",
            body.split_whitespace().count()
        );
    }
    // The damaged LibreOffice document holds what its own PDF export holds.
    let r = recall(&text("tagged.odt"), &text("tagged.pdf"));
    assert!(r >= 0.9, "tagged.odt against its PDF export: {r:.3}");
    assert!(text("example-chinese.pdf").contains("摘要"));

    // And the scans are found by a question about them.
    let out = warpfold()
        .args(["search", "composition and performance tool for the professional musician", "--db"])
        .arg(&db)
        .arg("--json")
        .output()
        .unwrap();
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hits = hits.as_array().or_else(|| hits["hits"].as_array()).unwrap().clone();
    let top: HashSet<String> = hits.iter().take(3).map(name).collect();
    assert_eq!(top, ["jbig2.pdf", "linn.pdf", "ccitt.pdf"].map(String::from).into_iter().collect(), "{hits:#?}");
}
