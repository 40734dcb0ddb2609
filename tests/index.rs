//! Files to index to search hits, through the real binary: generated PDFs with planted sentences,
//! hostile files, incremental re-indexing, and a run killed with SIGKILL and resumed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use warpfold_bench::corpus::{words, Rng};
use warpfold_engine::embed::Embedder;
use warpfold_engine::{Engine, SchedulerConfig};
use warpfold_index::chunk::{chunk_document, join_pages};
use warpfold_index::pdfgen::{planted_sentence, Font, Page, PdfDocument, TextBlock};
use warpfold_index::search::{hybrid_search, VectorIndex};
use warpfold_index::store::Store;

use crate::common::{assert_same_index, dump_index, load, minilm_dir, warpfold};

fn index_json(paths: &[&Path], db: &Path, extra: &[&str]) -> Value {
    let out = warpfold().arg("index").args(paths).arg("--db").arg(db).arg("--json").args(extra).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "index failed ({:?}): {stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("index --json printed {stdout:?}: {e}"))
}

fn embedder() -> Embedder {
    let (backend, encoder) = load(&minilm_dir());
    Embedder { encoder, engine: Engine::start(backend, SchedulerConfig::default()) }
}

/// A page of seeded filler with `sentence` planted somewhere in the middle.
fn page_with(rng: &mut Rng, sentence: &str, font: Font) -> Page {
    let (n_before, n_after) = (60 + rng.range(0, 120), 60 + rng.range(0, 120));
    let before = words(rng, n_before);
    let after = words(rng, n_after);
    Page {
        blocks: vec![TextBlock { font, text: before }, TextBlock { font, text: sentence.to_string() }, TextBlock { font, text: after }],
        image: false,
    }
}

fn planted_documents(dir: &Path, documents: usize, pages: usize) -> Vec<PathBuf> {
    let fonts = [Font::Helvetica, Font::TimesRoman, Font::Courier, Font::RemappedHelveticaBold];
    let mut rng = Rng::new(7);
    (0..documents)
        .map(|d| {
            let doc = PdfDocument {
                pages: (0..pages).map(|p| page_with(&mut rng, &planted_sentence(d, p), fonts[(d + p) % fonts.len()])).collect(),
                compress: d % 2 == 0,
                ..Default::default()
            };
            let path = dir.join(format!("planted-{d}.pdf"));
            std::fs::write(&path, doc.to_bytes()).unwrap();
            path
        })
        .collect()
}

#[test]
fn chunks_cover_every_token_fit_the_model_and_know_their_pages() {
    let (_, encoder) = load(&minilm_dir());
    let mut rng = Rng::new(3);
    let pages: Vec<String> = (0..5).map(|p| if p == 2 { String::new() } else { words(&mut rng, 150 + 200 * p) }).collect();
    let chunks = chunk_document(&encoder, &pages, 32).unwrap();
    let (text, starts) = join_pages(&pages);
    assert!(chunks.len() > 5, "{} chunks", chunks.len());
    let mut covered = vec![false; text.len()];
    for c in &chunks {
        assert!(c.ids.len() <= 256, "chunk {} has {} tokens", c.ordinal, c.ids.len());
        assert_eq!(c.ids, encoder.encode(&c.text).unwrap(), "ids are the chunk text's own encoding");
        let byte_start = text.char_indices().nth(c.char_start).map(|(b, _)| b).unwrap();
        assert!(text[byte_start..].starts_with(&c.text), "char offsets point at the chunk");
        covered[byte_start..byte_start + c.text.len()].iter_mut().for_each(|x| *x = true);
        let page_of = |b: usize| starts.partition_point(|&s| s <= b) as u32;
        assert_eq!(c.page_start, page_of(byte_start));
        assert_eq!(c.page_end, page_of(byte_start + c.text.len() - 1));
    }
    for (i, ch) in text.char_indices() {
        assert!(ch.is_whitespace() || covered[i], "byte {i} ({ch:?}) is in no chunk");
    }
    let overlapping = chunks.windows(2).filter(|w| w[1].char_start < w[0].char_end).count();
    assert!(overlapping >= chunks.len() / 2, "consecutive chunks overlap ({overlapping} of {})", chunks.len() - 1);
}

#[test]
fn planted_sentences_are_found_on_their_page() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(docs.join("nested")).unwrap();
    let files = planted_documents(&docs, 3, 4);
    std::fs::write(docs.join("nested/notes.md"), "# Notes\n\nThe indigo walrus repaired nine umbrellas beside the canal.\n").unwrap();
    let db = dir.path().join("index.db");
    let report = index_json(&[&docs], &db, &[]);
    assert_eq!(report["documents_total"], 4, "{report}");
    assert_eq!(report["documents_indexed"], 4, "{report}");
    assert_eq!(report["documents_failed"], 0, "{report}");
    assert!(report["chunks"].as_u64().unwrap() >= 12, "{report}");
    for key in ["documents_skipped", "failures", "tokens", "pad_tokens", "bins", "seconds", "tokens_per_second"] {
        assert!(report.get(key).is_some(), "report lacks {key}: {report}");
    }

    let store = Store::open_existing(&db).unwrap();
    let vectors = VectorIndex::load(&store).unwrap();
    let embedder = embedder();
    for (d, file) in files.iter().enumerate() {
        for p in 0..4 {
            let sentence = planted_sentence(d, p);
            let query = sentence.trim_end_matches('.');
            let qv = embedder.embed_query(query).unwrap();
            let hits = hybrid_search(&store, &vectors, query, &qv, 3).unwrap();
            let top = &hits[0];
            assert_eq!(top.path, file.canonicalize().unwrap().display().to_string(), "query {query:?}: {hits:#?}");
            assert_eq!(top.page, p as u32 + 1, "query {query:?}: {hits:#?}");
            assert!(top.text.split_whitespace().collect::<Vec<_>>().join(" ").contains(query), "snippet shows it: {}", top.text);
        }
    }

    // The CLI contract: a JSON array of {path, page, score, text}.
    let out = warpfold().args(["search", "indigo walrus umbrellas", "--db"]).arg(&db).args(["-k", "2", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hits = hits.as_array().unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits[0]["path"].as_str().unwrap().ends_with("nested/notes.md"), "{hits:?}");
    assert_eq!(hits[0]["page"], 1);
    assert!(hits[0]["score"].as_f64().unwrap() > hits[1]["score"].as_f64().unwrap());
    assert!(hits[0]["text"].as_str().unwrap().contains("indigo walrus"));
}

#[test]
fn the_bundled_samples_answer_the_example_query() {
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples");
    let out = warpfold().arg("make-samples").arg(&samples).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let db = dir.path().join("samples.db");
    let report = index_json(&[&samples], &db, &[]);
    assert_eq!((report["documents_indexed"].as_u64(), report["documents_failed"].as_u64()), (Some(8), Some(1)), "{report:#}");
    assert_eq!(report["failures"][0]["status"], "no_text", "the blank scan is reported as such: {report:#}");
    assert!(report["failures"][0]["path"].as_str().unwrap().ends_with("blank-page-scan.pdf"), "{report:#}");
    // The scanned receipt is read by OCR.
    let out = warpfold().args(["search", "mooring rope receipt", "--db"]).arg(&db).args(["-k", "1", "--json"]).output().unwrap();
    let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(hits[0]["path"].as_str().unwrap().ends_with("scans/receipt-scan.pdf"), "{hits:#}");
    assert_eq!(hits[0]["ocr"], true, "{hits:#}");
    let out =
        warpfold().args(["search", warpfold_index::samples::EXAMPLE_QUERY, "--db"]).arg(&db).args(["-k", "3", "--json"]).output().unwrap();
    let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(hits[0]["path"].as_str().unwrap().ends_with("gardening/tomatoes.pdf"), "{hits:#}");
    assert_eq!(hits[0]["page"], 2, "the ripening advice is on page 2: {hits:#}");
    // A paraphrase with none of the document's key words still finds it (the embedding half).
    let out = warpfold().args(["search", "how long does a cup of joe keep me awake", "--db"]).arg(&db).args(["--json"]).output().unwrap();
    let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(hits[0]["path"].as_str().unwrap().ends_with("health/sleep.pdf"), "{hits:#}");
}

/// PDFs that break pdf-extract 0.12.1 / lopdf 0.42 for real (found by reading their source and
/// probing): each must cost only its own file.
pub mod hostile {
    use std::io::Write;

    use warpfold_index::pdfgen::{raw_pdf, raw_stream};

    const CATALOG: &[u8] = b"<< /Type /Catalog /Pages 2 0 R >>";

    /// An unknown simple-font encoding name: pdf-extract `panic!`s ("unexpected encoding").
    pub fn panicking_pdf() -> Vec<u8> {
        raw_pdf(
            &[
                CATALOG.to_vec(),
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>".to_vec(),
                raw_stream("", b"BT /F1 12 Tf 72 720 Td (Hi) Tj ET"),
                b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /FooEncoding >>".to_vec(),
            ],
            "",
        )
    }

    /// A page without /MediaBox whose parent is its own parent: pdf-extract's inherited-attribute
    /// lookup follows /Parent forever (a CPU spin with flat memory in release builds).
    pub fn hanging_pdf() -> Vec<u8> {
        raw_pdf(
            &[
                CATALOG.to_vec(),
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 /Parent 2 0 R >>".to_vec(),
                b"<< /Type /Page /Parent 2 0 R /Resources << >> /Contents 4 0 R >>".to_vec(),
                raw_stream("", b"BT ET"),
            ],
            "",
        )
    }

    /// A form XObject that draws itself: unbounded recursion, the stack overflows and Rust aborts
    /// the process (SIGABRT), which no catch_unwind could stop.
    pub fn stack_overflow_pdf() -> Vec<u8> {
        raw_pdf(
            &[
                CATALOG.to_vec(),
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /X0 5 0 R >> >> /Contents 4 0 R >>"
                    .to_vec(),
                raw_stream("", b"/X0 Do"),
                raw_stream(" /Type /XObject /Subtype /Form /BBox [0 0 10 10]", b"/X0 Do"),
            ],
            "",
        )
    }

    /// A content stream of 1 GiB of spaces behind three FlateDecode layers (under 1 KB on disk):
    /// lopdf inflates it whole.
    pub fn memory_bomb_pdf() -> Vec<u8> {
        let mut inner = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        let block = vec![b' '; 1 << 20];
        for _ in 0..1024 {
            inner.write_all(&block).unwrap();
        }
        let mut data = inner.finish().unwrap();
        for _ in 0..2 {
            let mut layer = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            layer.write_all(&data).unwrap();
            data = layer.finish().unwrap();
        }
        raw_pdf(
            &[
                CATALOG.to_vec(),
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << >> /Contents 4 0 R >>".to_vec(),
                raw_stream(" /Filter [/FlateDecode /FlateDecode /FlateDecode]", &data),
            ],
            "",
        )
    }

    /// A well-formed file whose page tree is empty: it loads, and has nothing to read.
    pub fn pageless_pdf() -> Vec<u8> {
        raw_pdf(&[CATALOG.to_vec(), b"<< /Type /Pages /Kids [] /Count 0 >>".to_vec()], "")
    }
}

/// Text saved in Windows-1252, in UTF-16 with and without a byte-order mark, and in Shift_JIS is
/// indexed and found by its words; each says how it was read.
#[test]
fn word_opendocument_web_pages_e_books_and_rtf_are_indexed_with_their_pages_cited() {
    use warpfold_index::docgen;
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    // Each file: a first page about its subject, the planted sentence on the second page (a web
    // page is one page).
    type Writer = fn(&str, &[&[&str]]) -> Vec<u8>;
    let files: [(&str, &str, &str, Writer); 5] = [
        ("minutes.docx", "Council minutes", "The council approved the new footbridge over the Ouse for 310,000 pounds.", docgen::docx),
        ("survey.odt", "Bird survey", "Volunteers counted forty-two nesting avocets on the salt marsh in May.", docgen::odt),
        ("voyage.epub", "The Voyage", "The schooner Albatross lost her foremast in a squall off Cape Wrath.", docgen::epub),
        ("recipe.html", "Kitchen notes", "Knead the rye dough for twelve minutes and let it rest under a damp cloth.", docgen::html),
        ("lease.rtf", "Tenancy", "The tenant of the mill cottage pays rent on the first Friday of every month.", docgen::rtf),
    ];
    // A first page of filler long enough that the planted sentence's snippet cannot reach back
    // into it.
    let mut rng = Rng::new(11);
    for (name, title, planted, write) in &files {
        let first = words(&mut rng, 220);
        std::fs::write(docs.join(name), write(title, &[&[&first], &[planted]])).unwrap();
    }
    let mut cut = docgen::docx("Broken", &[&["a paragraph"]]);
    cut.truncate(cut.len() / 2);
    std::fs::write(docs.join("half-copied.docx"), cut).unwrap();
    let db = dir.path().join("index.db");
    let report = index_json(&[&docs], &db, &[]);
    assert_eq!((report["documents_indexed"].as_u64(), report["documents_failed"].as_u64()), (Some(5), Some(1)), "{report:#}");
    let failure = &report["failures"][0];
    assert!(failure["path"].as_str().unwrap().ends_with("half-copied.docx"), "{report:#}");
    // Cut inside its document part: that part is found by its own header, and said to be cut.
    assert_eq!(failure["error"].as_str().unwrap(), "damaged Word document: word/document.xml: incomplete deflate stream", "{report:#}");
    for (name, _, planted, _) in &files {
        let out = warpfold().args(["search", planted, "--db"]).arg(&db).args(["-k", "1", "--json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(hits[0]["path"].as_str().unwrap().ends_with(name), "{planted}: {hits:#}");
        let page = if name.ends_with(".html") { 1 } else { 2 };
        assert_eq!(hits[0]["page"], page, "{name}: the planted sentence is on page {page}: {hits:#}");
        assert!(hits[0]["text"].as_str().unwrap().contains(planted), "the text as written: {hits:#}");
    }
}

/// Scans as people have them: PDFs whose pages are one scanned image (JPEG or deflated grey, 150
/// to 300 dpi, turned and grainy), a report whose appendix is a scan, and photos of pages (PNG,
/// JPEG, a two-page TIFF, WebP). OCR makes each planted sentence searchable on its own page, the hit
/// and the document say the page was OCR'd, and a hostile image costs only itself.
#[test]
fn scanned_pages_and_images_are_read_by_ocr_and_found_on_their_page() {
    use warpfold_index::scangen::{self, Encoding, ScanSettings};
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let font = scangen::load_font().unwrap();
    let page = |seed: usize, planted: &str, dpi: u32, noisy: bool| {
        let (clean, _) = scangen::typeset(&font, &scangen::page_text(seed, planted), dpi);
        if noisy {
            scangen::scan(&clean, &ScanSettings::noisy(dpi, seed as u64))
        } else {
            clean
        }
    };
    // (file, planted sentence, page it is on)
    let planted = [
        ("minutes-scan.pdf", "The orchard lease was renewed for nine years at the March meeting.", 1),
        ("minutes-scan.pdf", "A grant of 4,800 pounds paid for the new village hall roof.", 2),
        ("minutes-scan.pdf", "The footpath to Hollow Farm will be closed during the harvest.", 3),
        ("deeds-flate.pdf", "The boundary stone stands eleven yards west of the old mill race.", 1),
        ("report-with-appendix.pdf", "Appendix receipt: the surveyor was paid 612 pounds on 3 May.", 2),
        ("receipt.png", "Two sacks of seed potatoes were sold to the allotment society.", 1),
        ("letter.jpg", "Your appointment at the eye clinic is on the ninth of October.", 1),
        ("fax.tif", "Please send the signed contract back before the end of the week.", 1),
        ("fax.tif", "The second page of the fax confirms the delivery address in Leeds.", 2),
        ("note.webp", "The spare key to the boathouse hangs behind the blue door.", 1),
    ];
    let scans: Vec<_> = planted
        .iter()
        .enumerate()
        .map(|(i, (name, sentence, _))| {
            let (dpi, noisy) = match *name {
                "minutes-scan.pdf" => (200, true),
                "deeds-flate.pdf" => (300, false),
                "letter.jpg" => (150, true),
                _ => (300, true),
            };
            page(i, sentence, dpi, noisy)
        })
        .collect();
    std::fs::write(docs.join("minutes-scan.pdf"), scangen::scanned_pdf(&scans[0..3], 200, Encoding::Jpeg { quality: 80 })).unwrap();
    std::fs::write(docs.join("deeds-flate.pdf"), scangen::scanned_pdf(&scans[3..4], 300, Encoding::Flate)).unwrap();
    let typed = "Survey report for the mill cottage, typed on the first page; the receipt is scanned.";
    std::fs::write(
        docs.join("report-with-appendix.pdf"),
        scangen::text_then_scans_pdf(typed, &scans[4..5], 300, Encoding::Jpeg { quality: 85 }),
    )
    .unwrap();
    scangen::save_image(&scans[5], &docs.join("receipt.png")).unwrap();
    std::fs::write(docs.join("letter.jpg"), scangen::encode_jpeg(&scans[6], 85)).unwrap();
    scangen::save_multipage_tiff(&scans[7..9], &docs.join("fax.tif")).unwrap();
    scangen::save_image(&scans[9], &docs.join("note.webp")).unwrap();
    // Hostile images: a PNG whose header claims 1.6 gigapixels, and a JPEG cut off after its header.
    std::fs::write(docs.join("bomb.png"), scangen::png_claiming(40_000, 40_000)).unwrap();
    let jpeg = scangen::encode_jpeg(&scans[6], 85);
    std::fs::write(docs.join("cut.jpg"), &jpeg[..200]).unwrap();

    let db = dir.path().join("index.db");
    let report = index_json(&[&docs], &db, &[]);
    assert_eq!((report["documents_indexed"].as_u64(), report["documents_failed"].as_u64()), (Some(7), Some(2)), "{report:#}");
    let failures: BTreeMap<String, String> = report["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                Path::new(f["path"].as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned(),
                f["error"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(failures["bomb.png"].contains("1600 megapixels") && failures["bomb.png"].contains("not decoded"), "{failures:#?}");
    assert!(failures["cut.jpg"].starts_with("damaged JPEG image"), "{failures:#?}");
    for (name, sentence, page) in planted {
        let out = warpfold().args(["search", sentence, "--db"]).arg(&db).args(["-k", "1", "--json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(hits[0]["path"].as_str().unwrap().ends_with(name), "{sentence}: {hits:#}");
        assert_eq!(hits[0]["page"], page, "{name}: {sentence:?} is on page {page}: {hits:#}");
        assert_eq!(hits[0]["ocr"], true, "{name}: the hit says its page was read by OCR: {hits:#}");
        let snippet = hits[0]["text"].as_str().unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(snippet.contains(sentence), "read right: {snippet:?} should hold {sentence:?}");
    }
    // The typed first page is not OCR'd, and the document says which pages were.
    let out =
        warpfold().args(["search", "Survey report for the mill cottage", "--db"]).arg(&db).args(["-k", "1", "--json"]).output().unwrap();
    let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((hits[0]["page"].as_u64(), hits[0]["ocr"].as_bool()), (Some(1), Some(false)), "{hits:#}");
    let store = Store::open_existing(&db).unwrap();
    let path = |name: &str| docs.join(name).canonicalize().unwrap().display().to_string();
    assert_eq!(store.ocr_pages(&path("report-with-appendix.pdf")).unwrap(), vec![2]);
    assert_eq!(store.ocr_pages(&path("fax.tif")).unwrap(), vec![1, 2]);
    let detail = store.document_detail(&path("minutes-scan.pdf")).unwrap().unwrap();
    assert_eq!(detail.ocr_pages, vec![1, 2, 3]);
    let note = detail.document.error.unwrap_or_default();
    assert!(note.contains("pages 1-3 read by OCR (Tesseract"), "the engine and its confidence are kept: {note}");
}

/// Under the default OCR setting (`auto`), a two-page French scan is read in English and French,
/// keeping its accents (found by searches for accented words of both pages), and a photo of a
/// page in Russian is read in Russian; each document's notes name the languages the worker used.
#[test]
fn scans_in_french_and_russian_are_read_in_their_language_and_the_notes_say_which() {
    use warpfold_index::scangen::{self, Encoding};
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let font = scangen::load_font().unwrap();
    let french = [
        "Le garçon est allé sur l'île où il a passé tout l'été avec sa famille. Les élèves ont préparé une fête pour la rentrée, et le maître a félicité chacun d'entre eux.",
        "À la fin de la journée, nous sommes rentrés à pied le long de la rivière, où les pêcheurs attendaient déjà le coucher du soleil. La bibliothèque du château a été rénovée l'année dernière.",
    ];
    let pages: Vec<_> = french.iter().map(|text| scangen::typeset(&font, text, 300).0).collect();
    std::fs::write(docs.join("lettre.pdf"), scangen::scanned_pdf(&pages, 300, Encoding::Flate)).unwrap();
    let russian = "В конце дня мы вернулись домой пешком вдоль реки, где рыбаки уже ждали заката. Библиотека открыта до восьми часов вечера, а музей закрыт по понедельникам.";
    scangen::save_image(&scangen::typeset(&font, russian, 300).0, &docs.join("письмо.png")).unwrap();

    let db = dir.path().join("index.db");
    let report = index_json(&[&docs], &db, &[]);
    assert_eq!(report["documents_indexed"].as_u64(), Some(2), "{report:#}");
    let search = |query: &str| -> Value {
        let out = warpfold().args(["search", query, "--db"]).arg(&db).args(["-k", "1", "--json", "--mode", "keyword"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    for (query, name) in [("garçon", "lettre.pdf"), ("pêcheurs", "lettre.pdf"), ("Библиотека", "письмо.png")] {
        let hits = search(query);
        assert!(hits[0]["path"].as_str().is_some_and(|p| p.ends_with(name)), "{query}: {hits:#}");
        assert_eq!(hits[0]["ocr"], true, "{query}: {hits:#}");
        assert!(hits[0]["text"].as_str().unwrap().contains(query), "{query} read as written: {hits:#}");
    }
    let store = Store::open_existing(&db).unwrap();
    let note = |name: &str| {
        let path = docs.join(name).canonicalize().unwrap().display().to_string();
        store.document_detail(&path).unwrap().unwrap().document.error.unwrap_or_default()
    };
    assert!(
        note("lettre.pdf").contains("pages 1-2 read by OCR (Tesseract ") && note("lettre.pdf").contains(" (eng+fra); mean confidence"),
        "{}",
        note("lettre.pdf")
    );
    assert!(note("письмо.png").contains(" (rus+eng); mean confidence"), "{}", note("письмо.png"));
}

#[test]
fn text_in_other_encodings_is_indexed_searchable_and_says_how_it_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let utf16 = |text: &str, bom: bool| -> Vec<u8> {
        let mut out = if bom { vec![0xff, 0xfe] } else { Vec::new() };
        out.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        out
    };
    std::fs::write(
        docs.join("dessert.txt"),
        b"The p\xe2tissier\x92s cr\xe8me br\xfbl\xe9e recipe needs vanilla, sugar and \x93patience\x94.",
    )
    .unwrap();
    std::fs::write(docs.join("ledger.txt"), utf16("The harbour ledger lists forty crates of saffron from Valencia.", true)).unwrap();
    std::fs::write(docs.join("export.txt"), utf16("Export of the lighthouse keeper's log: fog on the third night.", false)).unwrap();
    let db = dir.path().join("index.db");
    let report = index_json(&[&docs], &db, &[]);
    assert_eq!((report["documents_indexed"].as_u64(), report["documents_failed"].as_u64()), (Some(3), Some(0)), "{report:#}");
    let notes: BTreeMap<String, String> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                Path::new(w["path"].as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned(),
                w["error"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(notes["dessert.txt"].contains("windows-1252") && notes["dessert.txt"].contains("guessed"), "{notes:#?}");
    assert!(notes["ledger.txt"].contains("UTF-16LE") && notes["ledger.txt"].contains("byte-order mark"), "{notes:#?}");
    assert!(notes["export.txt"].contains("UTF-16LE") && notes["export.txt"].contains("zero bytes"), "{notes:#?}");
    for (query, file) in
        [("crème brûlée recipe", "dessert.txt"), ("saffron from Valencia", "ledger.txt"), ("lighthouse keeper fog", "export.txt")]
    {
        let out = warpfold().args(["search", query, "--db"]).arg(&db).args(["-k", "1", "--json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(hits[0]["path"].as_str().unwrap().ends_with(file), "{query}: {hits:#}");
    }
    let hits: Value =
        serde_json::from_slice(&warpfold().args(["search", "brûlée", "--db"]).arg(&db).args(["--json"]).output().unwrap().stdout).unwrap();
    assert!(hits[0]["text"].as_str().unwrap().contains("crème brûlée"), "decoded, not mangled: {hits:#}");
}

#[test]
fn every_bad_file_gets_its_own_status_and_the_good_ones_are_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let good = planted_documents(&docs, 2, 2);
    let write = |name: &str, bytes: &[u8]| std::fs::write(docs.join(name), bytes).unwrap();
    write("empty.pdf", b"");
    let mut rng = Rng::new(11);
    write("random.pdf", &(0..4096).map(|_| rng.next_u64() as u8).collect::<Vec<_>>());
    let whole = PdfDocument { pages: vec![Page::text(Font::Helvetica, words(&mut rng, 300)); 3], ..Default::default() }.to_bytes();
    write("truncated.pdf", &whole[..whole.len() / 2]);
    write(
        "encrypted.pdf",
        &PdfDocument { pages: vec![Page::text(Font::Helvetica, "secret")], encrypt_with_unknown_password: true, ..Default::default() }
            .to_bytes(),
    );
    write("scan.pdf", &PdfDocument { pages: vec![Page::image_only(); 2], compress: true, ..Default::default() }.to_bytes());
    write("program.txt", b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00");
    write("blank.md", b"  \n\n ");
    write("panics.pdf", &hostile::panicking_pdf());
    write("hangs.pdf", &hostile::hanging_pdf());
    write("recurses.pdf", &hostile::stack_overflow_pdf());
    write("bomb.pdf", &hostile::memory_bomb_pdf());
    write("pageless.pdf", &hostile::pageless_pdf());

    let db = dir.path().join("index.db");
    let limits = ["--extract-timeout", "5", "--extract-memory-mib", "768"];
    let report = index_json(&[&docs], &db, &limits);
    assert_eq!(report["documents_total"], 14, "{report:#}");
    assert_eq!(report["documents_indexed"], 2, "{report:#}");
    assert_eq!(report["documents_failed"], 12, "{report:#}");
    let failures: BTreeMap<String, (String, String)> = report["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let name = Path::new(f["path"].as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned();
            (name, (f["status"].as_str().unwrap().to_string(), f["error"].as_str().unwrap().to_string()))
        })
        .collect();
    let expect = |name: &str, status: &str, needle: &str| {
        let (s, e) = failures.get(name).unwrap_or_else(|| panic!("{name} is not among the failures: {failures:#?}"));
        assert_eq!(s, status, "{name}: {e}");
        assert!(e.contains(needle), "{name}: expected {needle:?} in {e:?}");
    };
    expect("empty.pdf", "failed", "empty (0 bytes)");
    expect("random.pdf", "failed", "not a PDF");
    expect("truncated.pdf", "failed", "truncated PDF");
    expect("encrypted.pdf", "failed", "needs a password");
    expect("scan.pdf", "no_text", "OCR found no words");
    expect("program.txt", "failed", "not text (a zero byte at offset 7");
    expect("blank.md", "no_text", "no words");
    expect("panics.pdf", "failed", "panicked");
    // Whichever limit fires first: processor time on a quiet machine, the wall clock (four times
    // as long) on one busy enough that the worker mostly waits. Either is a time limit.
    let (status, hang) = &failures["hangs.pdf"];
    assert_eq!(status, "failed", "{hang}");
    assert!(
        hang.contains("longer than 5 s of processor time") || hang.contains("was stopped after 20 s on the clock"),
        "hangs.pdf: {hang}"
    );
    expect("recurses.pdf", "failed", "stack overflow");
    expect("bomb.pdf", "failed", "more than 768 MiB");
    expect("pageless.pdf", "failed", "no pages");

    // The statuses are in the database too, and the good files are searchable.
    let store = Store::open_existing(&db).unwrap();
    let statuses: Vec<(String, String)> = store
        .connection()
        .prepare("SELECT path, status FROM documents ORDER BY path")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(statuses.len(), 14);
    for file in &good {
        let path = file.canonicalize().unwrap().display().to_string();
        assert!(statuses.contains(&(path, "indexed".to_string())), "{statuses:?}");
    }
    // Unchanged failures are not retried (the hang would cost its time limit again)...
    let again = index_json(&[&docs], &db, &limits);
    assert_eq!(again["documents_skipped"], 14, "{again:#}");
    // ...unless asked.
    let retried = index_json(&[&docs.join("scan.pdf")], &db, &["--retry-failed"]);
    assert_eq!(retried["documents_failed"], 1, "{retried:#}");
}

fn long_text_documents(dir: &Path, n: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    for i in 0..n {
        let paragraphs: Vec<String> = (0..6)
            .map(|_| {
                let n = 120 + rng.range(0, 200);
                words(&mut rng, n)
            })
            .collect();
        std::fs::write(dir.join(format!("doc-{i:02}.txt")), paragraphs.join("\n\n")).unwrap();
    }
}

#[test]
fn reindexing_embeds_only_what_changed_and_prune_removes_deleted_files() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    long_text_documents(&docs, 4, 21);
    planted_documents(&docs, 1, 2);
    let db = dir.path().join("index.db");
    let first = index_json(&[&docs], &db, &[]);
    assert_eq!(first["documents_indexed"], 5, "{first:#}");
    let total_chunks = first["chunks"].as_u64().unwrap();

    let again = index_json(&[&docs], &db, &[]);
    assert_eq!((again["documents_skipped"].as_u64(), again["chunks_embedded"].as_u64()), (Some(5), Some(0)), "{again:#}");
    assert_eq!(again["tokens"], 0);

    // Edit the last paragraph of one document: its early chunks keep their text and their vectors.
    let edited = docs.join("doc-02.txt");
    let text = std::fs::read_to_string(&edited).unwrap();
    let cut = text.rfind("\n\n").unwrap();
    std::fs::write(&edited, format!("{}\n\nA brand new closing paragraph about lighthouses and tides.", &text[..cut])).unwrap();
    let store = Store::open_existing(&db).unwrap();
    let chunks_of = |path: &Path| -> i64 {
        store
            .connection()
            .query_row(
                "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path = ?1",
                [path.canonicalize().unwrap().display().to_string()],
                |r| r.get(0),
            )
            .unwrap()
    };
    let before = chunks_of(&edited);
    let after_edit = index_json(&[&docs], &db, &[]);
    assert_eq!((after_edit["documents_indexed"].as_u64(), after_edit["documents_skipped"].as_u64()), (Some(1), Some(4)), "{after_edit:#}");
    let embedded = after_edit["chunks_embedded"].as_u64().unwrap();
    let now = chunks_of(&edited) as u64;
    assert!(embedded >= 1 && embedded < now, "only the changed chunks: {embedded} of {now} (was {before})");
    assert_eq!(after_edit["chunks"].as_u64().unwrap(), now);

    // Delete one file; without --prune it stays, with --prune it goes, with its chunks.
    std::fs::remove_file(docs.join("doc-00.txt")).unwrap();
    let kept = index_json(&[&docs], &db, &[]);
    assert_eq!(kept["documents_pruned"], 0);
    let counts_before = store.counts().unwrap();
    let pruned = index_json(&[&docs], &db, &["--prune"]);
    assert_eq!(pruned["documents_pruned"], 1, "{pruned:#}");
    assert!(pruned["pruned"][0].as_str().unwrap().ends_with("doc-00.txt"));
    let counts_after = store.counts().unwrap();
    assert_eq!(counts_after.documents, counts_before.documents - 1);
    assert!(counts_after.chunks < counts_before.chunks);
    assert_eq!(counts_after.chunks, total_chunks - (counts_before.chunks - counts_after.chunks) + (now - before as u64));
}

#[test]
fn a_killed_run_resumes_to_exactly_the_uninterrupted_index() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    long_text_documents(&docs, 24, 5);
    planted_documents(&docs, 4, 3);
    let total = 28u64;

    let whole_db = dir.path().join("whole.db");
    let whole = index_json(&[&docs], &whole_db, &[]);
    assert_eq!(whole["documents_indexed"].as_u64(), Some(total));

    // Start a run, SIGKILL it once some documents are committed.
    let killed_db = dir.path().join("killed.db");
    let mut child =
        warpfold().arg("index").arg(&docs).arg("--db").arg(&killed_db).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let committed = loop {
        assert!(Instant::now() < deadline, "the run never committed a document");
        if let Ok(store) = Store::open_existing(&killed_db) {
            if let Ok(counts) = store.counts() {
                if counts.documents >= 3 {
                    child.kill().unwrap(); // SIGKILL
                    break counts.documents;
                }
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run finished ({status}) before it could be killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    child.wait().unwrap();
    let at_kill = Store::open_existing(&killed_db).unwrap().counts().unwrap();
    assert!(at_kill.documents < total, "killed mid-way: {committed} committed when killed, {at_kill:?} after");

    let resumed = index_json(&[&docs], &killed_db, &[]);
    assert_eq!(resumed["documents_skipped"].as_u64(), Some(at_kill.documents), "{resumed:#}");
    assert_eq!(resumed["documents_indexed"].as_u64(), Some(total - at_kill.documents), "{resumed:#}");
    assert_same_index(&dump_index(&whole_db), &dump_index(&killed_db));
}

/// A scan indexed with OCR turned off fails for a reason that may pass: the next run with OCR on
/// reads it, without the file changing. A failure of the file itself (the blank scan, once OCR
/// has read it and found nothing) is not tried again.
#[test]
fn a_failure_that_may_pass_is_tried_again_and_one_of_the_file_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples");
    assert!(warpfold().arg("make-samples").arg(&samples).status().unwrap().success());
    let scans = samples.join("scans");
    let db = dir.path().join("i.db");
    let off = index_json(&[&scans], &db, &["--ocr-languages", "off"]);
    assert_eq!(off["documents_indexed"], 0, "{off:#}");
    assert!(off["failures"].as_array().unwrap().iter().all(|f| f["error"].as_str().unwrap().contains("OCR is turned off")), "{off:#}");
    let on = index_json(&[&scans], &db, &[]);
    assert_eq!(on["documents_indexed"], 1, "the receipt is read by OCR now: {on:#}");
    let blank = &on["failures"][0];
    assert!(
        blank["path"].as_str().unwrap().ends_with("blank-page-scan.pdf") && blank["error"].as_str().unwrap().contains("OCR found no words"),
        "{on:#}"
    );
    let again = index_json(&[&scans], &db, &[]);
    assert_eq!(
        (again["documents_indexed"].as_u64(), again["documents_failed"].as_u64()),
        (Some(0), Some(0)),
        "nothing tried again: {again:#}"
    );
}
