//! Text people have, in every script: chunking arbitrary Unicode with the real tokenizer, and a
//! smoke corpus (Latin with diacritics, Greek, Cyrillic, Arabic, Hebrew, Devanagari, CJK, Hangul,
//! emoji, PDF ligatures) indexed and searched through the real binary as .txt, .html, .docx and PDF.

use proptest::prelude::*;
use warpfold_index::chunk::{chunk_document, join_pages};

use crate::common::minilm_dir;

fn encoder() -> &'static warpfold_engine::tokenize::TextEncoder {
    static ENCODER: std::sync::OnceLock<warpfold_engine::tokenize::TextEncoder> = std::sync::OnceLock::new();
    ENCODER.get_or_init(|| {
        let dir = minilm_dir();
        warpfold_engine::tokenize::TextEncoder::from_file(&dir.tokenizer, 64).expect("tokenizer loads")
    })
}

/// Whether the tokenizer gives `c` no token of its own (whitespace, zero-width and format
/// characters, a combining mark its normalizer strips): chunks need not cover it.
fn silent(c: char) -> bool {
    let encoder = encoder();
    c.is_whitespace() || encoder.encode(&c.to_string()).is_ok_and(|ids| ids.len() <= encoder.special_tokens())
}

proptest! {
    #![proptest_config(warpfold_testkit::cases(10_000))]

    /// Chunks of text in every script (64-token chunks, so most documents make several): each
    /// chunk's character offsets select exactly its text from the joined pages, consecutive
    /// chunks overlap or touch with only whitespace between, together they cover every
    /// character that has a token, each encodes within the model's limit, and its pages are those
    /// its first and last characters lie on.
    #[test]
    fn chunks_of_text_in_every_script_cover_it_at_character_offsets(
        pages in proptest::collection::vec(warpfold_testkit::text(80), 1..4),
        overlap in 0usize..8,
    ) {
        let encoder = encoder();
        let (joined, starts) = join_pages(&pages);
        let chars: Vec<char> = joined.chars().collect();
        let chunks = chunk_document(encoder, &pages, overlap).expect("chunking never fails on text");
        let mut covered = 0usize;
        for chunk in &chunks {
            prop_assert!(chunk.char_start <= chunk.char_end && chunk.char_end <= chars.len());
            let selected: String = chars[chunk.char_start..chunk.char_end].iter().collect();
            prop_assert_eq!(&selected, &chunk.text);
            prop_assert!(chunk.ids.len() <= encoder.max_tokens());
            prop_assert!(chars[covered.min(chunk.char_start)..chunk.char_start].iter().all(|&c| silent(c)), "a gap holds only what has no token");
            covered = covered.max(chunk.char_end);
            let byte = joined.char_indices().nth(chunk.char_start).map_or(joined.len(), |(b, _)| b);
            let page = starts.partition_point(|&s| s <= byte).max(1) as u32;
            prop_assert_eq!(chunk.page_start, page);
            prop_assert!(chunk.page_end >= chunk.page_start && chunk.page_end as usize <= pages.len());
        }
        prop_assert!(chars[covered..].iter().all(|&c| silent(c)), "after the last chunk only what has no token");
    }
}

/// One sentence per script, with the query a speaker of it would type. The CJK queries are
/// whole runs of characters: finding a word inside a run by keyword is the multilingual issue's.
const SCRIPTS: &[(&str, &str, &str)] = &[
    (
        "french",
        "Les charges locatives\u{a0}: 312,40\u{a0}€ par mois\u{a0}; révisées selon l'indice de référence des loyers.",
        "charges locatives",
    ),
    ("german", "Die Größe der Straße beträgt 1\u{202f}250 Meter, sagt das Bauamt.", "Größe der Straße"),
    ("greek", "Η ελληνική γλώσσα έχει μακρά και πλούσια ιστορία.", "ελληνική γλώσσα"),
    ("russian", "Квартира в Москве стоит дорого, пишет газета.", "Квартира в Москве"),
    ("arabic", "مرحبا بكم في المكتبة الوطنية الكبيرة", "المكتبة الوطنية"),
    ("hebrew", "שלום לכם בספרייה הלאומית הגדולה", "בספרייה הלאומית"),
    ("hindi", "हिन्दी भाषा भारत में बोली जाती है", "हिन्दी भाषा"),
    ("japanese", "東京都の人口は約千四百万人です。", "東京都の人口は約千四百万人です"),
    ("chinese", "北京的交通网络非常发达。", "北京的交通网络非常发达"),
    ("korean", "한국어 문서를 빠르게 검색합니다.", "한국어 문서를"),
    ("emoji", "Der Bericht 👩\u{200d}👩\u{200d}👧 wurde 👍🏽 genehmigt 🇫🇷 heute.", "Bericht genehmigt"),
    ("ligatures", "The ﬁnancial oﬃce reviewed the ﬂow of ﬁles.", "financial office"),
];

/// The font each script is set in, in the generated PDFs: DejaVu Sans, Droid Sans Fallback (Han,
/// Kana), Lohit Devanagari, Baekmuk Dotum (Hangul); install-deps.sh installs them.
fn pdf_font(script: &str) -> usize {
    match script {
        "japanese" | "chinese" => 1,
        "hindi" => 2,
        "korean" => 3,
        _ => 0,
    }
}

fn percent_encoded(text: &str) -> String {
    text.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

/// The smoke corpus: every script as .txt, .html, .docx and a PDF with embedded fonts (emoji not in
/// the PDF: no font here draws them). Indexed by the real binary, every file is read, and every
/// query finds its script's four files first, by the CLI and by the server's API; nothing
/// answers 5xx.
#[test]
fn a_corpus_in_every_script_is_indexed_and_each_query_finds_its_own_files() {
    use warpfold_index::docgen;
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let fonts: Vec<Vec<u8>> = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
        "/usr/share/fonts/truetype/lohit-devanagari/Lohit-Devanagari.ttf",
        "/usr/share/fonts/truetype/baekmuk/dotum.ttf",
    ]
    .iter()
    .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e} (install-deps.sh installs the fonts)")))
    .collect();
    let font_refs: Vec<&[u8]> = fonts.iter().map(Vec::as_slice).collect();
    for (script, sentence, _) in SCRIPTS {
        let page: &[&str] = &[sentence, "Второй абзац. Second paragraph. 第二段落。"];
        std::fs::write(docs.join(format!("{script}.txt")), page.join("\n\n")).unwrap();
        std::fs::write(docs.join(format!("{script}.html")), docgen::html(script, &[page])).unwrap();
        std::fs::write(docs.join(format!("{script}.docx")), docgen::docx(script, &[page])).unwrap();
        if *script != "emoji" {
            let lines = vec![(pdf_font(script), sentence.to_string())];
            let pdf = warpfold_index::pdfgen::embedded_font_pdf(&font_refs, &[lines]).unwrap();
            std::fs::write(docs.join(format!("{script}.pdf")), pdf).unwrap();
        }
    }
    let db = dir.path().join("i.db");
    let out = crate::common::warpfold().arg("index").arg(&docs).arg("--db").arg(&db).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["documents_failed"], 0, "{report}");
    assert_eq!(report["documents_indexed"].as_u64(), Some(SCRIPTS.len() as u64 * 4 - 1), "{report}");
    let server = crate::serve::start(&["--db", db.to_str().unwrap(), "--data-dir", dir.path().join("data").to_str().unwrap()]);
    for (script, _, query) in SCRIPTS {
        let formats = if *script == "emoji" { 3 } else { 4 };
        let out = crate::common::warpfold().args(["search", query, "--db"]).arg(&db).args(["--json", "-k", "10"]).output().unwrap();
        assert!(out.status.success(), "{query}: {}", String::from_utf8_lossy(&out.stderr));
        let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let hits = hits.as_array().or_else(|| hits["hits"].as_array()).expect("hits").clone();
        let names: Vec<String> = hits
            .iter()
            .map(|h| std::path::Path::new(h["path"].as_str().unwrap()).file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        let shown: Vec<String> = hits.iter().map(|h| format!("{} {:?}", h["path"], h["chunk"].as_str().unwrap_or_default())).collect();
        assert!(names[..formats].iter().all(|n| n == script), "{query:?}: {names:?}\n{}", shown.join("\n"));
        for hit in &hits {
            let (text, chunk) = (hit["text"].as_str().unwrap(), hit["chunk"].as_str().unwrap());
            let inner = text.trim_start_matches('…').trim_end_matches('…');
            assert!(inner.split(' ').all(|w| chunk.contains(w)), "the snippet is the chunk's words: {text:?}");
        }
        let (status, body) =
            crate::serve::request(&server.addr, "GET", &format!("/api/search?q={}&k=10", percent_encoded(query)), Some("s3cret"), None);
        assert_eq!(status, 200, "{query}: {body}");
        let api: serde_json::Value = serde_json::from_str(&body).unwrap();
        let first = api["hits"][0]["path"].as_str().unwrap_or_default();
        assert!(first.contains(&format!("/{script}.")), "{query:?} by the API: {first}");
    }
    // Summaries of every script (the default chat model, a short budget): each document gets a
    // summary or its reason, nothing panics.
    let texts: Vec<std::path::PathBuf> = SCRIPTS.iter().map(|(script, _, _)| docs.join(format!("{script}.txt"))).collect();
    let out = crate::common::warpfold().arg("summarize").args(&texts).args(["--json", "--max-tokens", "16"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), SCRIPTS.len());
    assert!(lines.iter().all(|l| l["summary"].is_string() || l["error"].is_string()), "{lines:#?}");
}

/// A file name holding a terminal escape is printed escaped by the CLI's report (before: raw, so
/// `ESC[2J` cleared the screen).
#[test]
fn file_names_with_control_characters_are_escaped_in_the_terminal_report() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("\u{1b}[2Jreport.pdf"), b"not a pdf at all").unwrap();
    let out = crate::common::warpfold().arg("index").arg(&docs).arg("--db").arg(dir.path().join("i.db")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\\u{1b}[2Jreport.pdf"), "{stdout}");
    assert!(!stdout.contains('\u{1b}'), "{stdout:?}");
}
