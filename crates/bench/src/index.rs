//! `warpfold bench-index`: end-to-end indexing throughput on generated PDFs, and search latency on
//! a large index.
//!
//! Indexing is measured as a user meets it: files on disk to a committed index, extraction (a
//! worker process per PDF) included. Search is measured on an index of `--search-chunks` chunks
//! whose texts are generated and whose vectors are random unit vectors: embedding 100k real chunks
//! would take the CPU most of an hour, and the cost of a query (one pass over every vector, BM25
//! over the FTS5 table, fusion, reading the hits) does not depend on what the vectors say. The
//! query itself is embedded by the real model, through the interactive lane.
//!
//! The search index's texts follow Zipf's law over a 50,000-word vocabulary, as natural text does:
//! BM25's cost is the length of the query words' posting lists, so a small uniform vocabulary
//! (where every word is in 40% of the chunks) would measure a corpus nobody has. Queries take 3 to
//! 6 words of rank 50 to 20,000: the content words people search by.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use crate::corpus::{words, Rng};
use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use warpfold_index::chunk::{text_hash, DocumentChunk};
use warpfold_index::extract::{extract_file, Isolation};
use warpfold_index::pdfgen::{Font, Page, PdfDocument, TextBlock};
use warpfold_index::pipeline::{IndexOptions, IndexReport, Progress};
use warpfold_index::search::Searcher;
use warpfold_index::store::{DocumentRecord, Store};

use crate::harness::Harness;
use crate::report::{save_report, RunHeader};

#[derive(Args, Debug)]
pub struct BenchIndexArgs {
    /// Generated PDFs to index (0 = skip the indexing benchmark).
    #[arg(long, default_value_t = 200)]
    pub pdfs: usize,
    /// Chunks in the search benchmark's index (0 = skip it).
    #[arg(long, default_value_t = 100_000)]
    pub search_chunks: usize,
    /// Queries timed in the search benchmark.
    #[arg(long, default_value_t = 50)]
    pub queries: usize,
    #[arg(long, default_value_t = 20261130)]
    pub seed: u64,
    /// Where to keep the generated files and databases (default: a fresh temporary folder).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Print the JSON report on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Serialize, Debug)]
struct IndexingReport {
    pdfs: usize,
    pages: usize,
    pdf_megabytes: f64,
    jobs: usize,
    /// Extraction alone (same workers, same isolation), to show how much of the run it is.
    extraction_only_seconds: f64,
    run: IndexReport,
    /// A second run over the unchanged files: hashing and skipping only.
    unchanged_rerun_seconds: f64,
}

#[derive(Serialize, Debug)]
struct SearchReport {
    chunks: usize,
    dimension: usize,
    build_seconds: f64,
    /// Opening the index and reading every vector into memory (once per process).
    load_seconds: f64,
    queries: usize,
    /// Whole query: embedding + cosine over all vectors, in parallel with BM25 + phrase; fusion;
    /// reading the hits.
    median_ms: f64,
    p95_ms: f64,
    /// The parts, medians.
    embed_median_ms: f64,
    cosine_median_ms: f64,
    keyword_median_ms: f64,
}

#[derive(Serialize, Debug)]
struct Report {
    #[serde(flatten)]
    run: RunHeader,
    model: String,
    indexing: Option<IndexingReport>,
    search: Option<SearchReport>,
}

/// Pseudo-words ("kalomen", "tirsa", ...) with Zipf frequencies: word of rank r has weight 1/r.
struct ZipfVocabulary {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl ZipfVocabulary {
    fn new(size: usize, rng: &mut Rng) -> Self {
        const SYLLABLES: [&str; 24] = [
            "ka", "lo", "men", "ti", "ra", "sa", "vel", "do", "ri", "an", "pe", "tor", "mi", "qua", "zen", "bu", "lis", "ne", "gor", "fa",
            "chi", "dus", "wen", "ost",
        ];
        let mut seen = std::collections::HashSet::new();
        let mut words = Vec::with_capacity(size);
        while words.len() < size {
            let n = 2 + rng.range(0, 2);
            let word: String = (0..n).map(|_| SYLLABLES[rng.range(0, SYLLABLES.len() - 1)]).collect();
            if seen.insert(word.clone()) {
                words.push(word);
            }
        }
        let mut total = 0.0;
        let cumulative = (1..=size)
            .map(|r| {
                total += 1.0 / r as f64;
                total
            })
            .collect();
        ZipfVocabulary { words, cumulative }
    }

    fn sample(&self, rng: &mut Rng) -> &str {
        let total = *self.cumulative.last().expect("not empty");
        let x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
        &self.words[self.cumulative.partition_point(|&c| c < x).min(self.words.len() - 1)]
    }

    fn text(&self, rng: &mut Rng, n: usize) -> String {
        (0..n).map(|_| self.sample(rng)).collect::<Vec<_>>().join(" ")
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// PDFs of 1 to 6 pages of seeded text in the four generated fonts, half of them compressed.
fn generate_pdfs(dir: &Path, n: usize, seed: u64) -> Result<(usize, u64)> {
    std::fs::create_dir_all(dir)?;
    let fonts = [Font::Helvetica, Font::TimesRoman, Font::Courier, Font::RemappedHelveticaBold];
    let mut rng = Rng::new(seed);
    let (mut pages_total, mut bytes) = (0, 0u64);
    for i in 0..n {
        let pages: Vec<Page> = (0..1 + rng.range(0, 6))
            .map(|p| {
                let count = 250 + rng.range(0, 250);
                Page { blocks: vec![TextBlock { font: fonts[(i + p) % 4], text: words(&mut rng, count) }], image: false }
            })
            .collect();
        pages_total += pages.len();
        let pdf = PdfDocument { pages, compress: i % 2 == 0, ..Default::default() }.to_bytes();
        bytes += pdf.len() as u64;
        std::fs::write(dir.join(format!("doc-{i:05}.pdf")), pdf)?;
    }
    Ok((pages_total, bytes))
}

fn bench_indexing(harness: &Harness, args: &BenchIndexArgs, work: &Path) -> Result<IndexingReport> {
    let docs = work.join("pdfs");
    let (pages, bytes) = generate_pdfs(&docs, args.pdfs, args.seed)?;
    let exe = std::env::current_exe()?;
    let options = IndexOptions {
        jobs: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2),
        ..IndexOptions::new(Isolation::new(exe, vec!["extract-worker".into()]))
    };
    // Extraction alone, with the same parallelism.
    let files: Vec<PathBuf> = warpfold_index::pipeline::collect_files(std::slice::from_ref(&docs))?.files;
    let started = Instant::now();
    std::thread::scope(|scope| {
        for part in files.chunks(files.len().div_ceil(options.jobs).max(1)) {
            let isolation = &options.isolation;
            scope.spawn(move || part.iter().filter(|f| extract_file(f, isolation).is_ok()).count());
        }
    });
    let extraction_only_seconds = started.elapsed().as_secs_f64();

    let dir = harness.model_dir()?;
    let embedder = harness.embedder(&dir)?;
    let db = work.join("bench-index.db");
    let _ = std::fs::remove_file(&db);
    eprintln!("bench-index: indexing {} PDFs ({pages} pages, {:.1} MB)...", args.pdfs, bytes as f64 / 1e6);
    let index = || -> Result<IndexReport> {
        let files = warpfold_index::collect_files(std::slice::from_ref(&docs))?;
        Ok(warpfold_index::index_collected(files, &db, &embedder, &dir.name, &options, &Progress::default())?)
    };
    let run = index()?;
    let started = Instant::now();
    let rerun = index()?;
    let unchanged_rerun_seconds = started.elapsed().as_secs_f64();
    anyhow::ensure!(rerun.documents_skipped == args.pdfs as u64, "the re-run should skip every file: {rerun:?}");
    Ok(IndexingReport {
        pdfs: args.pdfs,
        pages,
        pdf_megabytes: bytes as f64 / 1e6,
        jobs: options.jobs,
        extraction_only_seconds,
        run,
        unchanged_rerun_seconds,
    })
}

fn bench_search(harness: &Harness, args: &BenchIndexArgs, work: &Path) -> Result<SearchReport> {
    let dir = harness.model_dir()?;
    let embedder = harness.embedder(&dir)?;
    let dim = embedder.engine.info().output_dim;
    let db = work.join("bench-search.db");
    let _ = std::fs::remove_file(&db);
    let mut store = Store::open(&db, &dir.name, dim)?;
    let mut rng = Rng::new(args.seed ^ 0x5eed);
    let vocabulary = ZipfVocabulary::new(50_000, &mut rng);
    let started = Instant::now();
    eprintln!("bench-index: building a {}-chunk index...", args.search_chunks);
    let per_document = 100;
    for d in 0..args.search_chunks.div_ceil(per_document) {
        let n = per_document.min(args.search_chunks - d * per_document);
        let mut chunks = Vec::with_capacity(n);
        let mut embeddings = Vec::with_capacity(n);
        for ordinal in 0..n {
            let count = 150 + rng.range(0, 60);
            let text = vocabulary.text(&mut rng, count);
            let hash = text_hash(&text);
            let vector: Vec<f32> = (0..dim).map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5).collect();
            embeddings.push((hash, vector));
            let char_end = text.chars().count();
            chunks.push(DocumentChunk {
                ordinal,
                text,
                text_hash: hash,
                ids: Vec::new(),
                page_start: 1,
                page_end: 1,
                page_breaks: Vec::new(),
                char_start: 0,
                char_end,
            });
        }
        let record = DocumentRecord {
            path: format!("/bench/synthetic-{d:05}.txt"),
            content_hash: format!("{d}"),
            size: 0,
            mtime: 0,
            status: "indexed",
            error: None,
            pages: Vec::new(),
            ocr_pages: Vec::new(),
            chunks,
        };
        store.commit_document(&record, &embeddings)?;
    }
    let build_seconds = started.elapsed().as_secs_f64();
    drop(store);

    let started = Instant::now();
    let searcher = Searcher::open(&db)?;
    let load_seconds = started.elapsed().as_secs_f64();
    let (store, vectors) = (searcher.store(), searcher.vectors());
    let (mut total, mut embed, mut cosine, mut keyword) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.queries {
        let count = 3 + rng.range(0, 3);
        let query: Vec<&str> = (0..count).map(|_| vocabulary.words[rng.range(50, 20_000)].as_str()).collect();
        let query = query.join(" ");
        let t0 = Instant::now();
        let hits = searcher.search(&query, 10, |q| embedder.embed_query(q).map_err(|e| e.to_string()))?;
        let t2 = Instant::now();
        anyhow::ensure!(!hits.is_empty(), "a query found nothing");
        // The parts again, one at a time, for the breakdown.
        let t0p = Instant::now();
        let qv = embedder.embed_query(&query).context("embedding the query")?;
        let t1 = Instant::now();
        let t3 = Instant::now();
        std::hint::black_box(vectors.top(&qv, 50));
        let t4 = Instant::now();
        std::hint::black_box(store.keyword_search(&query, 50)?);
        std::hint::black_box(store.phrase_search(&query, 50)?);
        let t5 = Instant::now();
        total.push((t2 - t0).as_secs_f64() * 1e3);
        embed.push((t1 - t0p).as_secs_f64() * 1e3);
        cosine.push((t4 - t3).as_secs_f64() * 1e3);
        keyword.push((t5 - t4).as_secs_f64() * 1e3);
    }
    for v in [&mut total, &mut embed, &mut cosine, &mut keyword] {
        v.sort_by(f64::total_cmp);
    }
    Ok(SearchReport {
        chunks: vectors.len(),
        dimension: dim,
        build_seconds,
        load_seconds,
        queries: args.queries,
        median_ms: percentile(&total, 0.5),
        p95_ms: percentile(&total, 0.95),
        embed_median_ms: percentile(&embed, 0.5),
        cosine_median_ms: percentile(&cosine, 0.5),
        keyword_median_ms: percentile(&keyword, 0.5),
    })
}

pub fn run(harness: &Harness, args: &BenchIndexArgs) -> Result<ExitCode> {
    let temp;
    let work = match &args.work_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.clone()
        }
        None => {
            temp = tempfile::tempdir()?;
            temp.path().to_path_buf()
        }
    };
    let indexing = if args.pdfs > 0 { Some(bench_indexing(harness, args, &work)?) } else { None };
    let search = if args.search_chunks > 0 { Some(bench_search(harness, args, &work)?) } else { None };
    let report = Report { run: RunHeader::now(), model: harness.model_dir()?.name, indexing, search };
    let json = save_report(&report, args.out.as_deref())?;
    if args.json {
        println!("{json}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("warpfold bench-index  {}  {}", report.run.date, report.run.machine);
    if let Some(i) = &report.indexing {
        let r = &i.run;
        println!(
            "indexing: {} PDFs ({} pages, {:.1} MB), {} workers: {:.2} s = {:.1} documents/s, {:.0} tokens/s ({} chunks, {} tokens, {} bins, {:.1}% padding)",
            i.pdfs,
            i.pages,
            i.pdf_megabytes,
            i.jobs,
            r.seconds,
            r.documents_per_second,
            r.tokens_per_second,
            r.chunks,
            r.tokens,
            r.bins,
            100.0 * r.pad_tokens as f64 / (r.tokens + r.pad_tokens).max(1) as f64
        );
        println!(
            "          model busy {:.0}% of the run; extraction alone {:.2} s ({:.0}% of the run); unchanged re-run {:.2} s",
            100.0 * r.backend_busy_seconds / r.seconds,
            i.extraction_only_seconds,
            100.0 * i.extraction_only_seconds / r.seconds,
            i.unchanged_rerun_seconds
        );
    }
    if let Some(s) = &report.search {
        println!(
            "search: {} chunks x {} dims (built in {:.1} s, loaded in {:.2} s); {} queries: median {:.1} ms, p95 {:.1} ms (embed {:.1}, cosine {:.1}, BM25+phrase {:.1} ms medians)",
            s.chunks, s.dimension, s.build_seconds, s.load_seconds, s.queries, s.median_ms, s.p95_ms, s.embed_median_ms, s.cosine_median_ms, s.keyword_median_ms
        );
    }
    Ok(ExitCode::SUCCESS)
}
