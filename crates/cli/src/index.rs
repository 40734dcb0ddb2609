//! `warpfold index`, `warpfold search`, and the hidden `extract-worker` they rely on.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use warpfold_app::text::for_terminal as shown;
use warpfold_engine::Lane;
use warpfold_index::extract::Isolation;
use warpfold_index::filter::Filter;
use warpfold_index::merge::{merge_indexes, MergeOptions};
use warpfold_index::pipeline::{IndexOptions, IndexReport, Progress};
use warpfold_index::search::{Hit, SearchOptions, Searcher};
use warpfold_index::shard::Shard;
use warpfold_index::shard_search::ShardSearcher;
use warpfold_index::store::Store;

use crate::{setup, GlobalOptions};

#[derive(Args, Debug)]
pub struct IndexArgs {
    /// Files and folders to index (folders recursively; .pdf, .txt, .md, .docx, .odt, .html, .epub, .rtf, and images by OCR:
    /// .png, .jpg, .tif, .webp). Symbolic links in a folder are followed only when their real path stays inside it.
    #[arg(required_unless_present = "check")]
    pub paths: Vec<PathBuf>,
    /// Check the index's integrity first: every chunk whose text has no stored vector is embedded
    /// again (the app does this at every start). With no paths, only the check runs.
    #[arg(long)]
    pub check: bool,
    /// The largest text file read, in MiB (0: no limit); larger ones are recorded as failed.
    #[arg(long, default_value_t = warpfold_index::pipeline::DEFAULT_MAX_TEXT_BYTES >> 20)]
    pub max_text_mib: u64,
    /// The index database (SQLite); created if missing, updated incrementally if not.
    #[arg(long)]
    pub db: PathBuf,
    /// Print one JSON object with the run's report instead of text.
    #[arg(long)]
    pub json: bool,
    /// Remove documents whose file no longer exists.
    #[arg(long)]
    pub prune: bool,
    /// Read again files that failed in an earlier run even if they did not change.
    #[arg(long)]
    pub retry_failed: bool,
    /// Seconds of processor time one PDF may take to extract before it is stopped and recorded as
    /// failed (on the wall clock, four times as long).
    #[arg(long, default_value_t = 60)]
    pub extract_timeout: u64,
    /// Memory (MiB of address space) one PDF's extraction may use.
    #[arg(long, default_value_t = 2048)]
    pub extract_memory_mib: u64,
    /// Parallel extraction and tokenization workers (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Tokens shared by consecutive chunks of a document.
    #[arg(long, default_value_t = 32)]
    pub overlap: usize,
    /// The languages OCR reads scanned pages and images in (Tesseract's names joined by '+', e.g.
    /// eng+deu; each needs its language data, Debian's tesseract-ocr-LANG), or `off`. The
    /// extraction time limit then holds per page.
    #[arg(long, env = "WARPFOLD_OCR_LANGUAGES", default_value = warpfold_index::ocr::DEFAULT_LANGUAGES)]
    pub ocr_languages: String,
    #[command(flatten)]
    pub ocr_limits: OcrLimits,
    /// Index only shard I of N (0 <= I < N): the files whose path, relative to the folder given,
    /// hashes into it; the same files on every run and machine. Give each shard its own --db and
    /// combine them with `warpfold merge` (docs/scale-out.md).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
}

/// How much OCR one document may have (`index` and `serve`).
#[derive(Args, Debug, Clone)]
pub struct OcrLimits {
    /// The most pages of one document read by OCR; the document notes the pages it did not reach.
    #[arg(long, env = "WARPFOLD_OCR_MAX_PAGES", default_value_t = warpfold_index::extract::DEFAULT_OCR_MAX_PAGES)]
    pub ocr_max_pages: usize,
    /// The most seconds OCR spends on one document; the document notes the pages it did not reach.
    #[arg(long, env = "WARPFOLD_OCR_BUDGET_SECS", default_value_t = warpfold_index::extract::DEFAULT_OCR_BUDGET.as_secs())]
    pub ocr_budget_secs: u64,
}

impl OcrLimits {
    pub fn apply(&self, isolation: &mut Isolation) {
        isolation.ocr_max_pages = self.ocr_max_pages;
        isolation.ocr_budget = Duration::from_secs(self.ocr_budget_secs);
    }
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The merged index to write (refused if it exists, unless --force).
    pub out: PathBuf,
    /// The shard indexes (built by `warpfold index --shard I/N`, or any warpfold indexes of one model).
    #[arg(required = true)]
    pub shards: Vec<PathBuf>,
    /// Replace OUT if it exists.
    #[arg(long)]
    pub force: bool,
    /// Merge even if some shards of the split are not given.
    #[arg(long)]
    pub partial: bool,
    /// Print one JSON object with the merge's report instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct SearchArgs {
    /// What to look for, in your own words.
    pub query: String,
    /// The index database built by `warpfold index`; repeat it to search several shard indexes
    /// as one (the same hits as searching their merge).
    #[arg(long, required = true)]
    pub db: Vec<PathBuf>,
    /// How many hits to show.
    #[arg(short = 'k', long, default_value_t = 5)]
    pub k: usize,
    /// Print a JSON array of {"path", "page", "score", "text", "terms", ...}.
    #[arg(long)]
    pub json: bool,
    /// Only documents inside this folder, at any depth.
    #[arg(long, value_name = "DIR")]
    pub folder: Option<PathBuf>,
    /// Only documents of these file types (extensions, any case; repeat it or separate with commas: pdf,md).
    #[arg(long = "type", value_name = "EXT", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Only documents last modified on or after this day (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "DATE", value_parser = warpfold_index::filter::day_start)]
    pub after: Option<i64>,
    /// Only documents last modified before this day (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "DATE", value_parser = warpfold_index::filter::day_start)]
    pub before: Option<i64>,
    /// Rank by score alone, letting one document take any of the first five hits (by default a
    /// document gets at most two of them, and its further hits follow the fifth).
    #[arg(long)]
    pub all_from_document: bool,
}

impl SearchArgs {
    fn options(&self) -> SearchOptions {
        let diversity = SearchOptions::default().per_document_in_top_five;
        SearchOptions {
            per_document_in_top_five: if self.all_from_document { None } else { diversity },
            filter: Filter {
                folder: self.folder.clone(),
                extensions: self.types.clone(),
                modified_from: self.after,
                modified_before: self.before,
            },
        }
    }
}

/// How this binary runs itself as an extraction worker.
fn isolation(args: &IndexArgs) -> Result<Isolation> {
    let exe = std::env::current_exe().context("finding the warpfold binary to run extraction workers")?;
    let mut isolation = Isolation::new(exe, vec!["extract-worker".into()]);
    isolation.timeout = Duration::from_secs(args.extract_timeout.max(1));
    isolation.memory_limit_mib = args.extract_memory_mib;
    isolation.ocr_languages =
        warpfold_index::ocr::languages_setting(&args.ocr_languages).map_err(|e| anyhow::anyhow!("--ocr-languages: {e}"))?;
    args.ocr_limits.apply(&mut isolation);
    Ok(isolation)
}

/// A path as the user would like to read it: relative to the current folder when it is inside it.
/// A document's path for the terminal: relative to the current folder when inside it, control
/// characters escaped (a file name may hold anything but `/` and NUL).
fn display_path(path: &str) -> String {
    let cwd = std::env::current_dir().ok();
    let path = cwd
        .as_deref()
        .and_then(|cwd| Path::new(path).strip_prefix(cwd).ok())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| path.to_string());
    shown(&path).into_owned()
}

pub fn run_index(global: &GlobalOptions, args: &IndexArgs) -> Result<ExitCode> {
    for path in &args.paths {
        if !path.exists() {
            bail!("{}: no such file or folder", path.display());
        }
    }
    if args.shard.is_none() && !args.paths.is_empty() && args.db.exists() {
        warpfold_index::shard::refuse_unsharded_run(&Store::open_read_only(&args.db)?)?;
    }
    let dir = setup::embedding_model_dir(global)?;
    let embedder = setup::embedder_for(global, &dir)?;
    let options = IndexOptions {
        isolation: isolation(args)?,
        jobs: args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)),
        overlap: args.overlap,
        prune: args.prune,
        retry_failed: args.retry_failed,
        max_text_bytes: args.max_text_mib.saturating_mul(1 << 20),
    };
    if args.check {
        let check = warpfold_index::pipeline::repair_missing_vectors(&args.db, &embedder, &dir.name)?;
        if args.json && args.paths.is_empty() {
            println!("{}", serde_json::to_string(&check)?);
        } else {
            eprintln!(
                "check: {} chunk(s) had no vector; {} text(s) embedded again{}",
                check.chunks_without_vectors,
                check.texts_reembedded,
                if check.failures.is_empty() { String::new() } else { format!("; failed: {}", check.failures.join("; ")) }
            );
        }
        if args.paths.is_empty() {
            return Ok(if check.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) });
        }
    }
    let progress = Progress::default();
    let bar = if std::io::stderr().is_terminal() && !args.json {
        let bar = ProgressBar::new(0);
        bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} files [{elapsed}] {msg}")?);
        bar
    } else {
        ProgressBar::hidden()
    };
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let report = std::thread::scope(|scope| {
        let (progress, bar, embedder) = (&progress, &bar, &embedder);
        scope.spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(Duration::from_millis(100)) {
                bar.set_length(progress.files_total.load(Ordering::Relaxed));
                bar.set_position(progress.files_done.load(Ordering::Relaxed));
                let s = embedder.engine.stats();
                bar.set_message(format!("{} chunks embedded, {} tokens", progress.chunks_embedded.load(Ordering::Relaxed), s.real_tokens));
            }
        });
        let report = match args.shard {
            Some(shard) => warpfold_index::shard::index_shard(&args.paths, shard, &args.db, embedder, &dir.name, &options, progress)
                .map(|(report, selection)| (report, Some(selection))),
            None => warpfold_index::index_collected(
                warpfold_index::collect_files(&args.paths)?,
                &args.db,
                embedder,
                &dir.name,
                &options,
                progress,
            )
            .map(|r| (r, None)),
        };
        drop(stop);
        report
    })?;
    let (report, selection) = report;
    bar.finish_and_clear();
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        if let Some(selection) = selection {
            value["shard"] = serde_json::to_value(selection)?;
        }
        println!("{value}");
    } else {
        if let Some(s) = selection {
            println!("shard {}/{}: {} of the {} files found", s.index, s.count, s.files, s.files_all);
        }
        print_report(&report, &args.db);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_merge(args: &MergeArgs) -> Result<ExitCode> {
    let options = MergeOptions { force: args.force, partial: args.partial };
    let report = merge_indexes(&args.out, &args.shards, &options)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{} documents ({} indexed), {} chunks, {} embeddings from {} shard(s){} -> {} ({:.2} s)",
            report.documents,
            report.indexed,
            report.chunks,
            report.embeddings,
            report.shards.len(),
            if report.duplicate_documents > 0 {
                format!("; {} document(s) held by more than one shard kept once (the copy indexed last)", report.duplicate_documents)
            } else {
                String::new()
            },
            report.output,
            report.seconds
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(r: &IndexReport, db: &Path) {
    println!(
        "{} documents: {} indexed, {} unchanged, {} failed{}{} -> {}",
        r.documents_total,
        r.documents_indexed,
        r.documents_skipped,
        r.documents_failed,
        if r.skipped.is_empty() { String::new() } else { format!(", {} skipped", r.skipped.len()) },
        if r.documents_pruned > 0 { format!(", {} pruned", r.documents_pruned) } else { String::new() },
        db.display()
    );
    let padding = if r.tokens + r.pad_tokens > 0 { 100.0 * r.pad_tokens as f64 / (r.tokens + r.pad_tokens) as f64 } else { 0.0 };
    println!(
        "{} chunks written, {} embedded: {} tokens in {} bins ({padding:.1}% alignment padding), {:.2} s, {:.0} tokens/s",
        r.chunks, r.chunks_embedded, r.tokens, r.bins, r.seconds, r.tokens_per_second
    );
    let st = &r.stages;
    println!(
        "time by stage (summed over threads): read {:.2} s, extract {:.2} s, chunk {:.2} s, submit {:.2} s, waiting for embeddings {:.2} s, write {:.2} s ({:.2} s on a core, {} transactions); model busy {:.2} s, bins {:.0}% full on average, device idle with work queued {:.3} s",
        st.read, st.extract, st.chunk, st.submit, st.embed_wait, st.write, st.write_cpu, st.write_transactions, r.backend_busy_seconds, 100.0 * r.mean_bin_fill, r.device_starved_seconds
    );
    if !r.failures.is_empty() {
        println!("not indexed:");
        for f in &r.failures {
            println!("  {}  [{}] {}", display_path(&f.path), f.status, shown(&f.error));
        }
    }
    if !r.warnings.is_empty() {
        println!("indexed with warnings:");
        for w in &r.warnings {
            println!("  {}  {}", display_path(&w.path), shown(&w.error));
        }
    }
    if !r.skipped.is_empty() {
        println!("skipped:");
        for s in &r.skipped {
            println!("  {}  {}", display_path(&s.path), shown(&s.error));
        }
    }
    for p in &r.pruned {
        println!("  pruned {}", display_path(p));
    }
}

pub fn run_search(global: &GlobalOptions, args: &SearchArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let dir = setup::embedding_model_dir(global)?;
    for db in &args.db {
        let store = Store::open_read_only(db).map_err(|e| {
            let display = db.display().to_string();
            if e.to_string().contains(&display) {
                anyhow::Error::from(e)
            } else {
                anyhow::Error::from(e).context(display)
            }
        })?;
        match store.model()? {
            Some((_, dim)) => store.check_model(&dir.name, dim, false)?,
            None if args.db.len() == 1 => {
                bail!("{} holds no documents yet; run `warpfold index PATH... --db {}` first", db.display(), db.display())
            }
            None => {}
        }
    }
    let embedder = setup::embedder_for(global, &dir)?;
    let embed =
        |query: &str| embedder.embed_texts(Lane::Interactive, &[query]).pop().expect("one answer per text").map_err(|e| e.to_string());
    let options = args.options();
    let (hits, chunks, loaded, query_time) = if let [db] = args.db.as_slice() {
        let searcher = Searcher::open(db)?;
        let loaded = started.elapsed();
        let query_started = Instant::now();
        let hits = searcher.search_with(&args.query, args.k, &options, embed)?;
        (hits, searcher.vectors().len(), loaded, query_started.elapsed())
    } else {
        let searcher = ShardSearcher::open(&args.db)?;
        let loaded = started.elapsed();
        let query_started = Instant::now();
        let hits = searcher.search_with(&args.query, args.k, &options, embed)?;
        (hits, searcher.vectors().len(), loaded, query_started.elapsed())
    };
    if args.json {
        println!("{}", serde_json::to_string(&hits)?);
    } else {
        print_hits(&hits);
        eprintln!(
            "{} chunks searched{}; query {:.1} ms (embedding + cosine + BM25 + fusion), loading {:.0} ms",
            chunks,
            if args.db.len() > 1 { format!(" in {} indexes", args.db.len()) } else { String::new() },
            query_time.as_secs_f64() * 1e3,
            loaded.as_secs_f64() * 1e3
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_hits(hits: &[Hit]) {
    if hits.is_empty() {
        println!("no hits");
    }
    for (i, hit) in hits.iter().enumerate() {
        let ocr = if hit.ocr { " (OCR)" } else { "" };
        println!("{}. {}  page {}{ocr}  score {:.4}", i + 1, display_path(&hit.path), hit.page, hit.score);
        println!("   {}", shown(&hit.text));
    }
}

pub fn run_make_samples(dir: &Path) -> Result<ExitCode> {
    let written = warpfold_index::samples::write_samples(dir).with_context(|| format!("writing samples into {}", dir.display()))?;
    println!("wrote {} sample documents into {}", written.len(), dir.display());
    println!(
        "try: warpfold index {} --db samples.db && warpfold search {:?} --db samples.db",
        dir.display(),
        warpfold_index::samples::EXAMPLE_QUERY
    );
    Ok(ExitCode::SUCCESS)
}

