//! pdf-extract against lopdf's own text extraction (issue 16.4), each as it is and each after
//! warpfold's repairs (crate::pdfpages: the page tree walked cycle-safe, content streams joined),
//! on generated multi-page PDFs with planted sentences in four fonts and encodings, in several
//! page-tree and content-stream layouts.
//!
//! `cargo run --release -p warpfold-index --example pdf_extractors -- [DOCS_PER_LAYOUT] [PAGES] [REPEATS]`
//! (defaults 200, 5 and 3; each time is the fastest of REPEATS runs over the layout's documents). Prints, per layout and extractor: documents read, documents with the
//! right page count, documents with extra (duplicate) pages, planted sentences found on their own
//! page, accented words and € right, and pages per second (one thread, in this process).

use std::time::Instant;

use warpfold_index::extract::{extract_pdf_in_process, normalize_page};
use warpfold_index::pdfgen::{planted_sentence, Contents, Font, Layout, Page, PageTree, PdfDocument, TextBlock};
use warpfold_index::pdfpages;

const FONTS: [Font; 4] = [Font::Helvetica, Font::TimesRoman, Font::Courier, Font::RemappedHelveticaBold];
const WORDS: [&str; 24] = [
    "river", "market", "window", "garden", "letter", "harvest", "engine", "candle", "meadow", "ticket", "pocket", "ladder", "signal",
    "basket", "winter", "button", "forest", "pillow", "rocket", "saddle", "timber", "velvet", "wagon", "zephyr",
];

/// The accented phrase a page carries in its font, if the font has the letters.
fn accents(font: Font) -> &'static str {
    match font {
        Font::Helvetica => "Le café coûte 3 € à Noël.",
        Font::TimesRoman => "Une crème à la française, très légère.",
        _ => "",
    }
}

fn filler(seed: &mut u64, n: usize) -> String {
    (0..n)
        .map(|_| {
            *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            WORDS[(*seed >> 33) as usize % WORDS.len()]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn document(d: usize, pages: usize) -> PdfDocument {
    let mut seed = d as u64 + 1;
    let pages = (0..pages)
        .map(|p| {
            let font = FONTS[(d + p) % FONTS.len()];
            let planted = format!("{} {}", planted_sentence(d % 3, p), accents(font));
            Page {
                blocks: [filler(&mut seed, 60), planted, filler(&mut seed, 60)].into_iter().map(|text| TextBlock { font, text }).collect(),
                image: false,
            }
        })
        .collect();
    PdfDocument { pages, compress: d.is_multiple_of(2), ..Default::default() }
}

type Extractor = fn(&[u8]) -> Result<Vec<String>, String>;

/// pdf-extract as warpfold used it before the repairs: lopdf's page numbering, one page at a time.
fn pdf_extract_as_is(bytes: &[u8]) -> Result<Vec<String>, String> {
    let doc = pdf_extract::Document::load_mem(bytes).map_err(|e| e.to_string())?;
    pdf_extract_pages(&doc)
}

fn pdf_extract_pages(doc: &pdf_extract::Document) -> Result<Vec<String>, String> {
    let mut pages = Vec::new();
    for &number in doc.get_pages().keys() {
        let mut text = String::new();
        let mut output = pdf_extract::PlainTextOutput::new(&mut text);
        pdf_extract::output_doc_page(doc, &mut output, number).map_err(|e| e.to_string())?;
        pages.push(normalize_page(&text));
    }
    Ok(pages)
}

/// warpfold's extraction now: the repairs, then pdf-extract.
fn pdf_extract_repaired(bytes: &[u8]) -> Result<Vec<String>, String> {
    extract_pdf_in_process(bytes).map(|e| e.pages).map_err(|e| e.to_string())
}

fn lopdf_pages(doc: &lopdf::Document) -> Result<Vec<String>, String> {
    doc.get_pages().keys().map(|&n| doc.extract_text(&[n]).map(|t| normalize_page(&t)).map_err(|e| e.to_string())).collect()
}

fn lopdf_as_is(bytes: &[u8]) -> Result<Vec<String>, String> {
    lopdf_pages(&lopdf::Document::load_mem(bytes).map_err(|e| e.to_string())?)
}

fn lopdf_repaired(bytes: &[u8]) -> Result<Vec<String>, String> {
    let mut doc = lopdf::Document::load_mem(bytes).map_err(|e| e.to_string())?;
    pdfpages::repair_page_tree(&mut doc);
    for id in pdfpages::page_ids(&doc) {
        pdfpages::join_page_contents(&mut doc, id);
    }
    lopdf_pages(&doc)
}

#[derive(Default)]
struct Tally {
    read: usize,
    right_count: usize,
    extra_pages: usize,
    planted: usize,
    planted_total: usize,
    accents: usize,
    accents_total: usize,
    seconds: f64,
}

fn norm(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let docs = args.first().copied().unwrap_or(200);
    let pages = args.get(1).copied().unwrap_or(5);
    let repeats = args.get(2).copied().unwrap_or(3).max(1);
    let layouts: [(&str, Layout); 8] = [
        ("flat, one stream", Layout::default()),
        ("nested (fan-out 3), inherited resources", Layout { tree: PageTree::Nested { fanout: 3 }, ..Default::default() }),
        ("cycle back to the root (fan-out 3)", Layout { tree: PageTree::Cycle { fanout: 3 }, ..Default::default() }),
        ("first page listed twice", Layout { tree: PageTree::PageTwice, ..Default::default() }),
        ("3 content streams a page", Layout { contents: Contents::Split(3), ..Default::default() }),
        ("first stream ASCIIHex, text in the second", Layout { contents: Contents::HexBackgroundFirst, ..Default::default() }),
        ("first stream with a stray ], text in the second", Layout { contents: Contents::StrayTokenFirst, ..Default::default() }),
        ("words apart by TJ displacements, no spaces", Layout { kerned_words: true, ..Default::default() }),
    ];
    let extractors: [(&str, Extractor); 4] = [
        ("pdf-extract as is", pdf_extract_as_is),
        ("lopdf as is", lopdf_as_is),
        ("repairs + pdf-extract", pdf_extract_repaired),
        ("repairs + lopdf", lopdf_repaired),
    ];
    println!("{docs} documents of {pages} pages per layout, half of them FlateDecode-compressed; time: the fastest of {repeats} runs");
    println!("| layout | extractor | read | right page count | extra pages | planted on their page | accents and € | pages/s |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut totals: Vec<Tally> = extractors.iter().map(|_| Tally::default()).collect();
    for (name, layout) in layouts {
        let files: Vec<(PdfDocument, Vec<u8>)> = (0..docs)
            .map(|d| {
                let doc = document(d, pages);
                let bytes = doc.to_bytes_with(layout);
                (doc, bytes)
            })
            .collect();
        for (e, (extractor_name, extract)) in extractors.iter().enumerate() {
            let mut t = Tally::default();
            let mut outputs = Vec::new();
            t.seconds = f64::INFINITY;
            for _ in 0..repeats {
                outputs = Vec::with_capacity(files.len());
                let start = Instant::now();
                for (_, bytes) in &files {
                    outputs.push(std::panic::catch_unwind(|| extract(bytes)).unwrap_or_else(|_| Err("panicked".into())));
                }
                t.seconds = t.seconds.min(start.elapsed().as_secs_f64());
            }
            for ((doc, _), out) in files.iter().zip(&outputs) {
                let expected = doc.pages.len();
                t.planted_total += expected;
                t.accents_total += doc.pages.iter().filter(|p| !accents(p.blocks[0].font).is_empty()).count();
                let Ok(got) = out else { continue };
                t.read += 1;
                t.right_count += usize::from(got.len() == expected);
                t.extra_pages += usize::from(got.len() > expected);
                for (p, page) in doc.pages.iter().enumerate() {
                    let text = got.get(p).map(|s| norm(s)).unwrap_or_default();
                    t.planted += usize::from(text.contains(&norm(&page.blocks[1].text.replace(accents(page.blocks[0].font), ""))));
                    let phrase = accents(page.blocks[0].font);
                    t.accents += usize::from(!phrase.is_empty() && text.contains(phrase));
                }
            }
            let pages_per_s = t.planted_total as f64 / t.seconds;
            println!(
                "| {name} | {extractor_name} | {}/{docs} | {} | {} | {}/{} | {}/{} | {pages_per_s:.0} |",
                t.read, t.right_count, t.extra_pages, t.planted, t.planted_total, t.accents, t.accents_total
            );
            let all = &mut totals[e];
            all.read += t.read;
            all.right_count += t.right_count;
            all.extra_pages += t.extra_pages;
            all.planted += t.planted;
            all.planted_total += t.planted_total;
            all.accents += t.accents;
            all.accents_total += t.accents_total;
            all.seconds += t.seconds;
        }
    }
    for ((extractor_name, _), t) in extractors.iter().zip(&totals) {
        println!(
            "| all layouts | {extractor_name} | {}/{} | {} | {} | {}/{} | {}/{} | {:.0} |",
            t.read,
            docs * layouts.len(),
            t.right_count,
            t.extra_pages,
            t.planted,
            t.planted_total,
            t.accents,
            t.accents_total,
            t.planted_total as f64 / t.seconds
        );
    }
}
