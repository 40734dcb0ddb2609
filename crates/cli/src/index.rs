//! `warpfold index`, `warpfold search`, and the hidden `extract-worker` they rely on.
//!
//! `search` answers one query, or a file of them (`--queries`) with the index and models loaded
//! once: the file form exists so a benchmark runs through this very command
//! (bench/retrieval/warpfold_run.py). Both forms run every query through one function, so a
//! batch ranks exactly as the single query does.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use warpfold_app::text::for_terminal as shown;
use warpfold_index::extract::Isolation;
use warpfold_index::filter::Filter;
use warpfold_index::merge::{merge_indexes, MergeOptions};
use warpfold_index::pipeline::{IndexOptions, IndexReport, Progress};
use warpfold_index::search::{Hit, Ranking, SearchError, SearchOptions, Searcher};
use warpfold_index::shard::Shard;
use warpfold_index::shard_search::ShardSearcher;
use warpfold_index::store::{IndexLanguage, Store};
use warpfold_summarize::ChatModel;

use crate::{setup, summarize, GlobalOptions};

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
    /// Read every file again, indexed or not, changed or not (after new OCR languages, say);
    /// passages whose text is unchanged keep their vectors.
    #[arg(long)]
    pub reread: bool,
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
    /// The languages OCR reads scanned pages and images in: `auto` (each page's own, among the
    /// installed language data), Tesseract's names joined by '+' (e.g. eng+deu; each needs its
    /// language data, Debian's tesseract-ocr-LANG), or `off`. The extraction time limit then holds
    /// per page.
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
    #[arg(required_unless_present = "queries")]
    pub query: Option<String>,
    /// Search every query of this file of JSON lines ({"id": ..., "text": ...}), the index and
    /// models loaded once; prints one JSON line per query, in order: {"id", "hits": [{"path",
    /// "page", "score", "chunk_id", ...}], "search_ms"} (the hits without their texts).
    #[arg(long, conflicts_with = "query", value_name = "FILE")]
    pub queries: Option<PathBuf>,
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
    /// Only passages in this language (ISO 639-3, as `warpfold index` lists the index's: eng, deu, fra, jpn, cmn).
    #[arg(long, value_name = "CODE")]
    pub language: Option<String>,
    /// Rank by score alone, letting one document take any of the first five hits (by default a
    /// document gets at most two of them, and its further hits follow the fifth).
    #[arg(long)]
    pub all_from_document: bool,
    /// Which rankings order the hits: hybrid fuses nearest embeddings, BM25 and exact phrase;
    /// keyword is BM25 alone and semantic nearest embeddings alone, to measure each half.
    #[arg(long, value_enum, default_value_t = Mode::Hybrid)]
    pub mode: Mode,
    /// Rerank this many of the best hits with the chat model (it judges whether each answers the
    /// query, as `ask --rerank` does); the hits after them follow as found. Costs a prefill of
    /// every candidate: cheap on a GPU, about a second a candidate on a laptop CPU.
    #[arg(long, default_value_t = 0, value_name = "CANDIDATES")]
    pub rerank: usize,
    /// The chat model for --rerank (as for `ask --decoder`); default: the device's, fetched on
    /// first use.
    #[arg(long)]
    pub decoder: Option<PathBuf>,
}

/// `search --mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Hybrid,
    Keyword,
    Semantic,
}

impl From<Mode> for Ranking {
    fn from(mode: Mode) -> Ranking {
        match mode {
            Mode::Hybrid => Ranking::Hybrid,
            Mode::Keyword => Ranking::Keyword,
            Mode::Semantic => Ranking::Semantic,
        }
    }
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
                language: self.language.clone(),
            },
        }
    }
}

/// One query of a `--queries` file: its id as given (any JSON value) and its text.
#[derive(Debug, PartialEq)]
struct Query {
    id: serde_json::Value,
    text: String,
}

/// The queries of a file of JSON lines, each {"id": ..., "text": "..."}; blank lines skipped.
fn read_queries(file: &Path) -> Result<Vec<Query>> {
    let text = std::fs::read_to_string(file).with_context(|| file.display().to_string())?;
    let mut queries = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{} line {}", file.display(), i + 1);
        let mut value: serde_json::Value = serde_json::from_str(line).with_context(at)?;
        let Some(query) = value.get("text").and_then(|t| t.as_str()).map(String::from) else {
            bail!("{}: no \"text\" string", at());
        };
        let Some(id) = value.get_mut("id").map(serde_json::Value::take) else { bail!("{}: no \"id\"", at()) };
        queries.push(Query { id, text: query });
    }
    Ok(queries)
}

/// The index `search` reads: one database, or several shards searched as their merge.
enum Opened {
    One(Searcher),
    Shards(ShardSearcher),
}

impl Opened {
    fn open(dbs: &[PathBuf]) -> Result<Opened> {
        Ok(match dbs {
            [db] => Opened::One(Searcher::open(db)?),
            _ => Opened::Shards(ShardSearcher::open(dbs)?),
        })
    }

    fn chunks(&self) -> usize {
        match self {
            Opened::One(s) => s.vectors().len(),
            Opened::Shards(s) => s.vectors().len(),
        }
    }

    fn search<E>(&self, query: &str, k: usize, options: &SearchOptions, ranking: Ranking, embed: E) -> Result<Vec<Hit>, SearchError>
    where
        E: FnOnce(&str) -> Result<Vec<f32>, String>,
    {
        match self {
            Opened::One(s) => s.search_ranked(query, k, options, ranking, embed),
            Opened::Shards(s) => s.search_ranked(query, k, options, ranking, embed),
        }
    }
}

/// A query's hits, each with the chat model's judgement when it was reranked.
struct Found {
    hits: Vec<(Hit, Option<f32>)>,
    search: Duration,
    rerank: Duration,
    judged: usize,
}

/// `items` with the first `scores.len()` of them put in the order of their scores (best first,
/// equal scores in their order), each with its score; the others follow as they were.
fn judged_first<T>(mut items: Vec<T>, scores: &[f32]) -> Vec<(T, Option<f32>)> {
    let rest = items.split_off(scores.len().min(items.len()));
    let judged: Vec<(T, Option<f32>)> = items.into_iter().zip(scores).map(|(item, s)| (item, Some(*s))).collect();
    let mut ranked = warpfold_summarize::rerank::best_first(judged, scores, scores.len());
    ranked.extend(rest.into_iter().map(|item| (item, None)));
    ranked
}

/// The chat model for `--rerank`, found as `ask` finds it, and its name.
fn load_chat(global: &GlobalOptions, decoder: Option<&PathBuf>) -> Result<(ChatModel, String)> {
    let path = summarize::chat_model_path(global, decoder)?;
    let chat = ChatModel::load(&path, &setup::backend_device(global)?)?;
    Ok((chat, warpfold_summarize::chat::model_name(&path)))
}

/// A query's line in the output of `search --queries`.
#[derive(serde::Serialize)]
struct QueryLine<'a> {
    id: &'a serde_json::Value,
    hits: Vec<HitLine<'a>>,
    search_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    rerank_ms: Option<f64>,
}

/// A hit of `search --queries`: where it is and how it ranked, without its texts.
#[derive(serde::Serialize)]
struct HitLine<'a> {
    path: &'a str,
    page: u32,
    ocr: bool,
    score: f64,
    chunk_id: i64,
    char_start: usize,
    char_end: usize,
    cosine: Option<f32>,
    semantic_rank: Option<usize>,
    keyword_rank: Option<usize>,
    /// The chat model's judgement (log P(yes) - log P(no)), for the hits it reranked.
    #[serde(skip_serializing_if = "Option::is_none")]
    relevance: Option<f32>,
}

impl<'a> HitLine<'a> {
    fn of((hit, relevance): &'a (Hit, Option<f32>)) -> HitLine<'a> {
        HitLine {
            path: &hit.path,
            page: hit.page,
            ocr: hit.ocr,
            score: hit.score,
            chunk_id: hit.chunk_id,
            char_start: hit.char_start,
            char_end: hit.char_end,
            cosine: hit.cosine,
            semantic_rank: hit.semantic_rank,
            keyword_rank: hit.keyword_rank,
            relevance: *relevance,
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
    let dir = setup::embedding_model_dir(global, Some(&args.db))?;
    let embedder = setup::embedder_for(global, &dir)?;
    let options = IndexOptions {
        isolation: isolation(args)?,
        jobs: args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)),
        overlap: args.overlap,
        prune: args.prune,
        retry_failed: args.retry_failed,
        reread: args.reread,
        max_text_bytes: args.max_text_mib.saturating_mul(1 << 20),
        in_flight_bins: warpfold_app::settings::in_flight_bins(),
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
    let languages = Store::open_read_only(&args.db).and_then(|s| s.languages()).unwrap_or_default();
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        if let Some(selection) = selection {
            value["shard"] = serde_json::to_value(selection)?;
        }
        value["languages"] = serde_json::to_value(&languages)?;
        println!("{value}");
    } else {
        if let Some(s) = selection {
            println!("shard {}/{}: {} of the {} files found", s.index, s.count, s.files, s.files_all);
        }
        print_report(&report, &args.db);
        if let Some(line) = languages_line(&languages) {
            println!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// "languages: English 80% (eng), German 15% (deu, partly read by the model), ...": what the
/// index holds and where its embedding model helps search.
fn languages_line(languages: &[IndexLanguage]) -> Option<String> {
    let total: u64 = languages.iter().map(|l| l.chunks).sum();
    if total == 0 {
        return None;
    }
    let parts: Vec<String> = languages
        .iter()
        .map(|l| {
            let share = 100.0 * l.chunks as f64 / total as f64;
            let mut notes: Vec<&str> = Vec::new();
            let name = match (&l.name, &l.code) {
                (Some(name), Some(code)) => {
                    notes.push(code);
                    name.as_str()
                }
                _ => "not told apart",
            };
            if l.model_weight <= 0.0 {
                notes.push("searched by keyword: the embedding model does not read it");
            } else if l.model_weight < 1.0 {
                notes.push("partly read by the embedding model");
            }
            let notes = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join(", ")) };
            format!("{name}{notes} {share:.0}%")
        })
        .collect();
    Some(format!("languages: {}", parts.join(", ")))
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
    let queries = match (&args.query, &args.queries) {
        (Some(query), _) => vec![Query { id: serde_json::Value::Null, text: query.clone() }],
        (None, Some(file)) => read_queries(file)?,
        (None, None) => bail!("give a query, or --queries FILE"),
    };
    let dir = setup::embedding_model_dir(global, args.db.first().map(PathBuf::as_path))?;
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
    let embed = |query: &str| embedder.embed_query(query).map_err(|e| e.to_string());
    let options = args.options();
    let index = Opened::open(&args.db)?;
    let loaded = started.elapsed();
    let chat = if args.rerank > 0 { Some(load_chat(global, args.decoder.as_ref())?) } else { None };
    let chat_loaded = started.elapsed() - loaded;
    let search = |query: &str| -> Result<Found> {
        let searching = Instant::now();
        let hits = index.search(query, args.k.max(args.rerank), &options, args.mode.into(), embed)?;
        let search = searching.elapsed();
        let reranking = Instant::now();
        let scores = match &chat {
            Some((chat, _)) => {
                let passages: Vec<&str> = hits.iter().take(args.rerank).map(|h| h.chunk.as_str()).collect();
                warpfold_summarize::rerank::relevance(chat, query, &passages)?
            }
            None => Vec::new(),
        };
        let mut hits = judged_first(hits, &scores);
        hits.truncate(args.k);
        Ok(Found { hits, search, rerank: reranking.elapsed(), judged: scores.len() })
    };
    let reranked = |pairs: usize, seconds: f64| match &chat {
        Some((_, model)) => {
            format!(
                "; reranking {pairs} pairs {seconds:.1} s ({:.2} pairs/s) with {model}, loaded in {:.1} s",
                pairs as f64 / seconds.max(1e-9),
                chat_loaded.as_secs_f64()
            )
        }
        None => String::new(),
    };
    if args.queries.is_some() {
        let mut out = std::io::stdout().lock();
        let (mut searching, mut reranking, mut pairs) = (0.0, 0.0, 0);
        for query in &queries {
            let found = search(&query.text)?;
            let line = QueryLine {
                id: &query.id,
                hits: found.hits.iter().map(HitLine::of).collect(),
                search_ms: found.search.as_secs_f64() * 1e3,
                rerank_ms: chat.is_some().then_some(found.rerank.as_secs_f64() * 1e3),
            };
            serde_json::to_writer(&mut out, &line)?;
            std::io::Write::write_all(&mut out, b"\n")?;
            searching += found.search.as_secs_f64();
            reranking += found.rerank.as_secs_f64();
            pairs += found.judged;
        }
        eprintln!(
            "{} queries over {} chunks: loading {:.0} ms, searching {searching:.1} s ({:.1} ms a query){}",
            queries.len(),
            index.chunks(),
            loaded.as_secs_f64() * 1e3,
            searching * 1e3 / queries.len().max(1) as f64,
            reranked(pairs, reranking)
        );
        return Ok(ExitCode::SUCCESS);
    }
    let found = search(&queries[0].text)?;
    let reranked = reranked(found.judged, found.rerank.as_secs_f64());
    let hits: Vec<Hit> = found.hits.into_iter().map(|(hit, _)| hit).collect();
    if args.json {
        println!("{}", serde_json::to_string(&hits)?);
    } else {
        print_hits(&hits);
        eprintln!(
            "{} chunks searched{}; query {:.1} ms ({}), loading {:.0} ms{reranked}",
            index.chunks(),
            if args.db.len() > 1 { format!(" in {} indexes", args.db.len()) } else { String::new() },
            found.search.as_secs_f64() * 1e3,
            match args.mode {
                Mode::Hybrid => "embedding + cosine + BM25 + fusion",
                Mode::Keyword => "BM25",
                Mode::Semantic => "embedding + cosine",
            },
            loaded.as_secs_f64() * 1e3,
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

/// `warpfold forget PATH... --db FILE`: each path as the index names its documents (the file or
/// folder's real path when it still exists), its documents forgotten for good.
pub fn run_forget(paths: &[PathBuf], db: &Path) -> Result<ExitCode> {
    let mut store = Store::open_existing(db).with_context(|| format!("opening the index {}", db.display()))?;
    let held: Vec<String> = store.documents()?.into_iter().map(|d| d.path).collect();
    let mut documents = Vec::new();
    for path in paths {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.clone()));
        let under: Vec<&String> = held.iter().filter(|d| Path::new(d).starts_with(&real)).collect();
        if under.is_empty() {
            bail!("{}: not a document (or a folder of documents) in {}", path.display(), db.display());
        }
        documents.extend(under.into_iter().cloned());
    }
    documents.sort();
    documents.dedup();
    let forgotten = store.forget_documents(&documents)?;
    for path in &forgotten {
        println!("forgot {path}");
    }
    eprintln!("{} document(s) forgotten; no text of them is left in {}", forgotten.len(), db.display());
    Ok(ExitCode::SUCCESS)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cli, Command};
    use clap::Parser;

    fn search_args(args: &[&str]) -> Result<SearchArgs, clap::Error> {
        let cli = Cli::try_parse_from(["warpfold", "search"].iter().chain(args))?;
        match cli.command {
            Command::Search(args) => Ok(args),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn a_search_takes_a_query_or_a_file_of_them_and_ranks_hybrid_by_default() {
        let one = search_args(&["open a file", "--db", "i.db"]).unwrap();
        assert_eq!((one.query.as_deref(), one.queries.as_ref()), (Some("open a file"), None));
        assert_eq!(Ranking::from(one.mode), Ranking::default(), "the default search is the fused one");
        assert_eq!(Ranking::from(one.mode), Ranking::Hybrid);
        let batch = search_args(&["--queries", "q.jsonl", "--db", "i.db", "--mode", "keyword", "--rerank", "10"]).unwrap();
        assert_eq!((batch.query, batch.queries), (None, Some(PathBuf::from("q.jsonl"))));
        assert_eq!((Ranking::from(batch.mode), batch.rerank), (Ranking::Keyword, 10));
        assert_eq!(Ranking::from(search_args(&["x", "--db", "i.db", "--mode", "semantic"]).unwrap().mode), Ranking::Semantic);
        assert!(search_args(&["x", "--queries", "q.jsonl", "--db", "i.db"]).is_err(), "one or the other");
        assert!(search_args(&["--db", "i.db"]).is_err(), "nothing to search for");
        assert!(search_args(&["x", "--db", "i.db", "--mode", "bm25"]).is_err());
    }

    #[test]
    fn queries_are_read_with_their_ids_as_given() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("q.jsonl");
        std::fs::write(&file, "{\"id\": \"q:open.2\", \"text\": \"open a file\", \"more\": 1}\n\n{\"id\": 7, \"text\": \"\"}\n").unwrap();
        assert_eq!(
            read_queries(&file).unwrap(),
            [
                Query { id: serde_json::json!("q:open.2"), text: "open a file".into() },
                Query { id: serde_json::json!(7), text: String::new() }
            ]
        );
        for (line, error) in [("{\"id\": 1}", "line 2: no \"text\" string"), ("{\"text\": \"t\"}", "line 2: no \"id\""), ("{", "line 2")] {
            std::fs::write(&file, format!("{{\"id\": 0, \"text\": \"t\"}}\n{line}\n")).unwrap();
            let got = format!("{:#}", read_queries(&file).unwrap_err());
            assert!(got.contains(error), "{got}");
        }
    }

    #[test]
    fn reranked_hits_come_first_by_judgement_and_the_others_follow_as_found() {
        let hits = vec!["a", "b", "c", "d", "e"];
        assert_eq!(
            judged_first(hits.clone(), &[0.5, 2.0, 0.5]),
            [("b", Some(2.0)), ("a", Some(0.5)), ("c", Some(0.5)), ("d", None), ("e", None)]
        );
        assert_eq!(judged_first(hits.clone(), &[]), hits.iter().map(|h| (*h, None)).collect::<Vec<_>>());
        assert_eq!(judged_first(vec!["a"], &[1.0]), [("a", Some(1.0))]);
    }
}
