//! `warpfold summarize` and `warpfold bench-summarize`: documents to summaries with a local chat model.
//!
//! Files are read as `warpfold index` reads them (PDFs in the isolated extraction worker), then
//! every document goes to the model at once: prompts are prefilled packed and decoded batched, and
//! documents longer than a prompt go through map-reduce (see `warpfold-summarize`). With `--db`,
//! summaries are stored in the index by content hash, and a document whose summary by the same
//! model is already there is not summarized again.
//!
//! Every option of the summarizer is a flag here, the repetition controls included (a penalty,
//! no-repeat n-gram blocking, and the stronger pair a summary that loops is written again with);
//! their defaults are `SummarizeOptions::default()`, the one place the app and the server read
//! them from too.
//!
//! The benchmark runs the same documents twice in one process, packed and batched, then one
//! document at a time (each document alone, its prompts one after another), and reports documents
//! per minute and decode tokens per second for both.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use warpfold_index::extract::{extract_file, Isolation};
use warpfold_index::store::Store;
use warpfold_summarize::generate::{BatchOptions, GenerationStats, SamplingParams};
use warpfold_summarize::{CachedSummary, ChatModel, PromptStyle, RetrySettings, RetryStats, SourceText, SummarizeOptions, Summarizer};

use crate::{setup, GlobalOptions};

/// The defaults of every option below: those of the summarize crate, which the app and the server
/// use too.
fn defaults() -> SummarizeOptions {
    SummarizeOptions::default()
}

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// The chat model: a .gguf file, a folder with one, a Hugging Face folder (config.json,
    /// safetensors, tokenizer.json), a pinned model's name (`warpfold models list`), or `fast`
    /// (SmolLM2-135M: quick, but it keeps few facts). Default: the device's, chosen by measurement
    /// (BENCHMARKS.md, summary faithfulness), fetched on first use.
    #[arg(long)]
    pub decoder: Option<PathBuf>,
    #[command(flatten)]
    pub summary: SummaryArgs,
}

/// How summaries are written: `warpfold summarize`, `bench-summarize` and `serve --summarize`.
#[derive(Args, Debug, Clone)]
pub struct SummaryArgs {
    /// Most tokens generated per summary (and per chunk summary of a long document); a summary the
    /// budget ends is cut at its last sentence end.
    #[arg(long, default_value_t = defaults().sampling.max_new_tokens)]
    pub max_tokens: usize,
    /// 0: greedy. Above 0: sample at this temperature.
    #[arg(long, default_value_t = defaults().sampling.temperature)]
    pub temperature: f32,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass.
    #[arg(long, default_value_t = defaults().sampling.top_p)]
    pub top_p: f32,
    /// Seed of the sampler (each document draws its own stream from it).
    #[arg(long, default_value_t = defaults().sampling.seed)]
    pub seed: u64,
    /// Logits of tokens already generated are divided by this (multiplied when negative): above 1,
    /// repetition gets less likely. 1: off.
    #[arg(long, default_value_t = defaults().sampling.repetition_penalty)]
    pub repetition_penalty: f32,
    /// The repetition penalty also covers this many of the prompt's last tokens (0: only what was
    /// generated, so a summary may reuse the document's names and numbers freely).
    #[arg(long, default_value_t = defaults().sampling.penalty_prompt_tokens)]
    pub penalty_prompt_tokens: usize,
    /// A token that would repeat an n-gram of this many tokens already generated is banned. 0: off.
    #[arg(long, default_value_t = defaults().sampling.no_repeat_ngram)]
    pub no_repeat_ngram: usize,
    /// A summary in which 4 words in a row occur 3 times is written again with this repetition
    /// penalty ...
    #[arg(long, default_value_t = defaults().retry.map_or(1.0, |r| r.repetition_penalty))]
    pub retry_repetition_penalty: f32,
    /// ... and this no-repeat n-gram size.
    #[arg(long, default_value_t = defaults().retry.map_or(0, |r| r.no_repeat_ngram))]
    pub retry_no_repeat_ngram: usize,
    /// Keep summaries that loop as they are instead of writing them again.
    #[arg(long, default_value_t = defaults().retry.is_none())]
    pub no_retry: bool,
    /// The prompts' wording: auto (by the model's size), brief (what small models follow best) or
    /// detailed (more facts from models of 1B parameters and up).
    #[arg(long, default_value = "auto")]
    pub prompts: PromptStyle,
    /// Do not quote, under each summary, the document's own sentences that state the figures,
    /// dates and names the summary leaves out ("From the document:").
    #[arg(long, default_value_t = !defaults().key_lines)]
    pub no_key_lines: bool,
    /// Most tokens of document text in one prompt; longer documents are summarized by map-reduce.
    /// 0: by the model and device (whole reports of up to 8,192 tokens for models of 1B parameters
    /// and up on a GPU, 1,536 otherwise)
    #[arg(long, default_value_t = defaults().chunk_tokens)]
    pub chunk_tokens: usize,
    /// Most sequences decoding together. 0: by the device (64 on a GPU, 16 on a CPU)
    #[arg(long, default_value_t = defaults().batch.max_batch)]
    pub max_batch: usize,
    /// Most prompt tokens in one packed prefill.
    #[arg(long, default_value_t = defaults().batch.prefill_tokens)]
    pub prefill_tokens: usize,
}

impl SummaryArgs {
    pub(crate) fn options(&self) -> SummarizeOptions {
        let d = defaults();
        SummarizeOptions {
            sampling: SamplingParams {
                max_new_tokens: self.max_tokens,
                temperature: self.temperature,
                top_p: self.top_p,
                seed: self.seed,
                repetition_penalty: self.repetition_penalty,
                penalty_prompt_tokens: self.penalty_prompt_tokens,
                no_repeat_ngram: self.no_repeat_ngram,
            },
            batch: BatchOptions { max_batch: self.max_batch, prefill_tokens: self.prefill_tokens.max(1), ..d.batch },
            chunk_tokens: self.chunk_tokens,
            prompts: self.prompts,
            key_lines: !self.no_key_lines,
            // The global --vram-budget, set by the command that runs the model.
            vram_budget: None,
            retry: (!self.no_retry).then_some(RetrySettings {
                repetition_penalty: self.retry_repetition_penalty,
                no_repeat_ngram: self.retry_no_repeat_ngram,
            }),
        }
    }
}

#[derive(Args, Debug)]
pub struct SummarizeArgs {
    /// Files and folders to summarize (folders recursively; .pdf, .txt, .md, .docx, .odt, .html, .epub, .rtf).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Store the summaries in this index (built by `warpfold index`), keyed by content hash;
    /// documents already summarized there by the same model are not summarized again.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// One JSON object per document and line: {"path", "summary", "tokens_in", "tokens_out", "seconds"}.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Seconds one PDF may take to extract.
    #[arg(long, default_value_t = 60)]
    pub extract_timeout: u64,
}

#[derive(Args, Debug)]
pub struct BenchSummarizeArgs {
    /// Summarize these instead of the bundled samples.
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Write the JSON report here too.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// A document read for summarizing.
struct Document {
    path: String,
    content_hash: String,
    text: Result<String, String>,
}

fn read_documents(paths: &[PathBuf], timeout: u64) -> Result<Vec<Document>> {
    let collected = warpfold_index::pipeline::collect_files(paths)?;
    let files = collected.files;
    let exe = std::env::current_exe().context("finding the warpfold binary to run extraction workers")?;
    let mut isolation = Isolation::new(exe, vec!["extract-worker".into()]);
    isolation.timeout = Duration::from_secs(timeout.max(1));
    let mut docs = Vec::with_capacity(files.len());
    for file in files {
        let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
        let content_hash = warpfold_index::pipeline::content_hash(&bytes);
        let text = match extract_file(&file, &isolation) {
            Ok(extracted) => {
                let (text, _) = warpfold_index::chunk::join_pages(&extracted.pages);
                if text.trim().is_empty() {
                    Err("no text to summarize (a scan without a text layer?)".to_string())
                } else {
                    Ok(text)
                }
            }
            Err(e) => Err(e.to_string()),
        };
        docs.push(Document { path: file.display().to_string(), content_hash, text });
    }
    // What the walk refused (a link out of the folder, a FIFO, an unreadable folder) is reported
    // with its reason, like a file that could not be read.
    docs.extend(collected.refused.into_iter().map(|r| Document { path: r.path, content_hash: String::new(), text: Err(r.error) }));
    Ok(docs)
}

/// The chat model's file or folder: `--decoder` (a path, or a chat model's name from `warpfold
/// models list`), else the default for the device (see `warpfold_runtime::chat_model`), fetched
/// if missing.
pub fn chat_model_path(global: &GlobalOptions, decoder: Option<&PathBuf>) -> Result<PathBuf> {
    let device = setup::backend_device(global)?;
    let root = setup::models_dir(global);
    Ok(warpfold_runtime::chat_model(decoder.map(PathBuf::as_path), &device, &root, |entry| {
        eprintln!("warpfold: the chat model {} is not in {}; fetching {} with pip...", entry.name, root.display(), entry.source())
    })?)
}

fn load_model(global: &GlobalOptions, args: &ModelArgs) -> Result<(ChatModel, String)> {
    let path = chat_model_path(global, args.decoder.as_ref())?;
    let device = setup::backend_device(global)?;
    let chat = ChatModel::load(&path, &device)?;
    let name = warpfold_summarize::chat::model_name(&path);
    Ok((chat, name))
}

#[derive(Serialize)]
struct DocumentLine<'a> {
    path: &'a str,
    summary: Option<&'a str>,
    tokens_in: u64,
    tokens_out: u64,
    seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    cached: bool,
    /// Summaries of this document (its own, or of its chunks) that looped and were written again.
    #[serde(skip_serializing_if = "is_zero")]
    retried: usize,
    /// What checking the summary against its document found: `{checked, rewritten, removed:
    /// [{sentence, items, kept?}]}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    check: Option<&'a warpfold_summarize::grounding::SummaryCheck>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What the terminal report says of a summary's check, and of its language when the model wrote
/// English for a document in another.
fn check_line(check: Option<&warpfold_summarize::grounding::SummaryCheck>) -> String {
    let line = check_result(check);
    match check.and_then(|c| c.english_instead_of.as_deref()) {
        Some(language) => format!("{line}; written in English: the model did not write {language}"),
        None => line,
    }
}

fn check_result(check: Option<&warpfold_summarize::grounding::SummaryCheck>) -> String {
    match check {
        None | Some(warpfold_summarize::grounding::SummaryCheck { checked: false, .. }) => "not checked against the document".into(),
        Some(c) if c.removed.is_empty() => {
            format!("checked against the document{}", if c.rewritten { ", written again once" } else { "" })
        }
        Some(c) => {
            let items: Vec<String> =
                c.removed.iter().flat_map(|r| r.items.iter().map(|i| warpfold_app::text::for_terminal(i).into_owned())).collect();
            let kept = c.removed.iter().filter(|r| r.kept.is_some()).count();
            let dropped = c.removed.len() - kept;
            let mut fates = Vec::new();
            if dropped > 0 {
                fates.push(format!("{dropped} sentence(s) removed for stating what the document does not"));
            }
            if kept > 0 {
                fates.push(format!("{kept} sentence(s) kept without the currency sign the document never writes"));
            }
            format!("checked against the document; {}: {}", fates.join(", "), items.join(", "))
        }
    }
}

pub fn run(global: &GlobalOptions, args: &SummarizeArgs) -> Result<ExitCode> {
    let mut options = args.model.summary.options();
    options.vram_budget = global.vram_budget;
    options.check().map_err(anyhow::Error::msg)?;
    let docs = read_documents(&args.paths, args.extract_timeout)?;
    if docs.is_empty() {
        bail!("no {} files under {:?}", warpfold_index::extract::SUPPORTED.replace(" and ", " or "), args.paths);
    }
    let store = match &args.db {
        Some(db) => Some(Store::open_existing(db)?),
        None => None,
    };
    let (chat, model_name) = load_model(global, &args.model)?;
    // Summaries already in the index are reused; the rest go to the model together.
    let readable: Vec<usize> = (0..docs.len()).filter(|&i| docs[i].text.is_ok()).collect();
    let sources: Vec<SourceText> = readable
        .iter()
        .map(|&i| SourceText { path: &docs[i].path, content_hash: &docs[i].content_hash, text: docs[i].text.as_deref().expect("filtered") })
        .collect();
    let mut summarizer = Summarizer::new(&chat, options).map_err(anyhow::Error::msg)?;
    let summaries = summarizer.summarize_cached(store.as_ref(), &model_name, &sources, |_, _| {})?;
    let generated = summaries.iter().filter(|c| c.fresh).count();
    let mut cached: Vec<Option<CachedSummary>> = (0..docs.len()).map(|_| None).collect();
    for (&i, c) in readable.iter().zip(summaries) {
        cached[i] = Some(c);
    }
    let mut out = std::io::stdout().lock();
    let mut failed = 0;
    for (d, c) in docs.iter().zip(&cached) {
        let line = match (&d.text, c) {
            (Err(e), _) => {
                failed += 1;
                DocumentLine {
                    path: &d.path,
                    summary: None,
                    tokens_in: 0,
                    tokens_out: 0,
                    seconds: 0.0,
                    error: Some(e),
                    cached: false,
                    retried: 0,
                    check: None,
                }
            }
            (Ok(_), Some(c)) => DocumentLine {
                path: &d.path,
                summary: Some(&c.stored.summary),
                tokens_in: c.stored.tokens_in,
                tokens_out: c.stored.tokens_out,
                seconds: if c.fresh { c.stored.seconds } else { 0.0 },
                error: None,
                cached: !c.fresh,
                retried: c.retried,
                check: c.stored.check.as_ref(),
            },
            (Ok(_), None) => unreachable!("every readable document has a summary. This is a bug."),
        };
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&line)?)?;
        } else {
            writeln!(out, "== {}", warpfold_app::text::for_terminal(line.path))?;
            match (line.summary, line.error) {
                (Some(s), _) => writeln!(
                    out,
                    "{}\n   ({} tokens in, {} out{}; {})\n",
                    s.lines().map(warpfold_app::text::for_terminal).collect::<Vec<_>>().join("\n"),
                    line.tokens_in,
                    line.tokens_out,
                    if line.cached { ", from the index".to_string() } else { format!(", ready at {:.1} s", line.seconds) },
                    check_line(line.check),
                )?,
                (None, Some(e)) => writeln!(out, "not summarized: {}\n", warpfold_app::text::for_terminal(e))?,
                (None, None) => {}
            }
        }
    }
    let s = &summarizer.stats;
    let r = &summarizer.retries;
    eprintln!(
        "summarized {} documents in {:.1} s ({} prompts, {} prompt tokens in {} packed prefills, {} tokens decoded at {:.1} tokens/s, batches up to {}; {} summaries looped, {} written again, {} still looping){}",
        generated,
        summarizer.seconds,
        s.prompts,
        s.prompt_tokens,
        s.prefills,
        s.decode_tokens,
        rate(s.decode_tokens, s.decode_seconds),
        s.max_batch_seen,
        r.flagged,
        r.retried,
        r.still_looping,
        if failed > 0 { format!("; {failed} could not be read") } else { String::new() }
    );
    // As `warpfold index`: the run completed, so 0, unreadable files listed (and in the JSON lines).
    Ok(ExitCode::SUCCESS)
}

fn rate(n: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

#[derive(Serialize)]
struct ModeReport {
    mode: &'static str,
    documents: usize,
    seconds: f64,
    documents_per_minute: f64,
    decode_tokens_per_second: f64,
    /// Generated tokens (all of them, first tokens included) per second of the whole run.
    output_tokens_per_second: f64,
    prefill_tokens_per_second: f64,
    stats: GenerationStats,
    /// Summaries that looped and were written again.
    retries: RetryStats,
    summaries: Vec<String>,
}

#[derive(Serialize)]
struct BenchReport {
    date: String,
    machine: String,
    device: String,
    model: String,
    documents: Vec<String>,
    document_tokens: usize,
    max_tokens: usize,
    max_batch: usize,
    packed: ModeReport,
    one_at_a_time: ModeReport,
    documents_per_minute_ratio: f64,
    decode_tokens_per_second_ratio: f64,
    /// Documents whose greedy summary is the same in both modes.
    identical_summaries: usize,
}

fn mode_report(
    mode: &'static str,
    seconds: f64,
    stats: GenerationStats,
    retries: RetryStats,
    summaries: Vec<String>,
    tokens_out: usize,
) -> ModeReport {
    ModeReport {
        mode,
        documents: summaries.len(),
        seconds,
        documents_per_minute: summaries.len() as f64 * 60.0 / seconds.max(1e-9),
        decode_tokens_per_second: rate(stats.decode_tokens, stats.decode_seconds),
        output_tokens_per_second: tokens_out as f64 / seconds.max(1e-9),
        prefill_tokens_per_second: rate(stats.prompt_tokens, stats.prefill_seconds),
        stats,
        retries,
        summaries,
    }
}

pub fn run_bench(global: &GlobalOptions, args: &BenchSummarizeArgs) -> Result<ExitCode> {
    let mut options = args.model.summary.options();
    options.vram_budget = global.vram_budget;
    options.check().map_err(anyhow::Error::msg)?;
    let samples;
    let paths = if args.paths.is_empty() {
        samples = tempfile::tempdir()?;
        warpfold_index::samples::write_samples(samples.path())?;
        vec![samples.path().to_path_buf()]
    } else {
        args.paths.clone()
    };
    let docs: Vec<Document> = read_documents(&paths, 60)?.into_iter().filter(|d| d.text.is_ok()).collect();
    if docs.is_empty() {
        bail!("no readable documents under {paths:?}");
    }
    let texts: Vec<String> = docs.iter().map(|d| d.text.clone().expect("filtered")).collect();
    let (chat, model_name) = load_model(global, &args.model)?;
    let document_tokens = texts.iter().map(|t| chat.count_tokens(t)).sum();
    eprintln!("bench-summarize: {} documents, {document_tokens} tokens; packed and batched first", texts.len());

    // 1. Packed and batched: every document's prompts in one call per map-reduce level.
    let started = Instant::now();
    let mut s = Summarizer::new(&chat, options.clone()).map_err(anyhow::Error::msg)?;
    let max_batch = s.options.batch.max_batch;
    let packed = s.summarize_documents(&texts)?;
    let packed_seconds = started.elapsed().as_secs_f64();
    let packed_out = packed.iter().map(|r| r.tokens_out).sum();
    let packed_report = mode_report(
        "packed-and-batched",
        packed_seconds,
        s.stats.clone(),
        s.retries,
        packed.into_iter().map(|r| r.summary).collect(),
        packed_out,
    );
    eprintln!("  packed and batched: {packed_seconds:.1} s; one document at a time next");

    // 2. One document at a time, each alone, its prompts one after another.
    let mut alone_opts = options.clone();
    alone_opts.batch.max_batch = 1;
    let started = Instant::now();
    let mut stats = GenerationStats::default();
    let mut retries = RetryStats::default();
    let mut summaries = Vec::new();
    let mut alone_out = 0;
    for t in &texts {
        let mut s = Summarizer::new(&chat, alone_opts.clone()).map_err(anyhow::Error::msg)?;
        let r = s.summarize_documents(std::slice::from_ref(t))?.remove(0);
        alone_out += r.tokens_out;
        summaries.push(r.summary);
        warpfold_summarize::add_stats(&mut stats, &s.stats);
        retries.add(&s.retries);
    }
    let alone_seconds = started.elapsed().as_secs_f64();
    let alone_report = mode_report("one-at-a-time", alone_seconds, stats, retries, summaries, alone_out);

    let identical = packed_report.summaries.iter().zip(&alone_report.summaries).filter(|(a, b)| a == b).count();
    let report = BenchReport {
        date: warpfold_bench::report::today(),
        machine: warpfold_bench::report::machine(),
        device: format!("{:?}", global.device),
        model: model_name,
        documents: docs
            .iter()
            .map(|d| Path::new(&d.path).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default())
            .collect(),
        document_tokens,
        max_tokens: options.sampling.max_new_tokens,
        max_batch,
        documents_per_minute_ratio: packed_report.documents_per_minute / alone_report.documents_per_minute.max(1e-9),
        decode_tokens_per_second_ratio: packed_report.decode_tokens_per_second / alone_report.decode_tokens_per_second.max(1e-9),
        identical_summaries: identical,
        packed: packed_report,
        one_at_a_time: alone_report,
    };
    let json = warpfold_bench::report::save_report(&report, args.out.as_deref())?;
    println!("{json}");
    eprintln!(
        "packed and batched: {:.1} documents/min, {:.1} decode tokens/s; one at a time: {:.1} documents/min, {:.1} decode tokens/s; ratios {:.2}x and {:.2}x; {} of {} summaries identical",
        report.packed.documents_per_minute,
        report.packed.decode_tokens_per_second,
        report.one_at_a_time.documents_per_minute,
        report.one_at_a_time.decode_tokens_per_second,
        report.documents_per_minute_ratio,
        report.decode_tokens_per_second_ratio,
        report.identical_summaries,
        report.packed.documents,
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Parsed {
        #[command(flatten)]
        model: ModelArgs,
    }

    fn parse(args: &[&str]) -> SummarizeOptions {
        Parsed::try_parse_from(std::iter::once("warpfold").chain(args.iter().copied())).unwrap().model.summary.options()
    }

    /// The report line says what happened to each sentence the check took out: removed, or kept
    /// without a currency sign, and which items.
    #[test]
    fn the_check_line_says_what_was_removed_and_what_was_kept() {
        use warpfold_summarize::grounding::{RemovedSentence, SummaryCheck};
        let removed = |items: &[&str], kept: Option<&str>| RemovedSentence {
            sentence: "s".into(),
            items: items.iter().map(|i| i.to_string()).collect(),
            kept: kept.map(str::to_string),
        };
        let check = |removed: Vec<RemovedSentence>| SummaryCheck { checked: true, rewritten: true, removed, ..Default::default() };
        assert_eq!(check_line(Some(&check(vec![]))), "checked against the document, written again once");
        assert_eq!(
            check_line(Some(&check(vec![removed(&["requires"], None)]))),
            "checked against the document; 1 sentence(s) removed for stating what the document does not: requires"
        );
        assert_eq!(
            check_line(Some(&check(vec![removed(&["$9.50"], Some("9.50")), removed(&["1 per month"], None)]))),
            "checked against the document; 1 sentence(s) removed for stating what the document does not, 1 sentence(s) kept \
             without the currency sign the document never writes: $9.50, 1 per month"
        );
        assert_eq!(check_line(None), "not checked against the document");
        let english = SummaryCheck { checked: true, english_instead_of: Some("Russian".into()), ..Default::default() };
        assert_eq!(check_line(Some(&english)), "checked against the document; written in English: the model did not write Russian");
    }

    /// With no flags the options are the summarize crate's defaults (one place for them, which the
    /// app and the server use too); every repetition setting has its flag.
    #[test]
    fn summarize_flags_default_to_the_crate_defaults_and_set_every_repetition_option() {
        assert_eq!(parse(&[]), SummarizeOptions::default());
        let o = parse(&[
            "--repetition-penalty",
            "1.3",
            "--penalty-prompt-tokens",
            "64",
            "--no-repeat-ngram",
            "5",
            "--retry-repetition-penalty",
            "1.6",
            "--retry-no-repeat-ngram",
            "2",
            "--max-tokens",
            "100",
        ]);
        assert_eq!((o.sampling.repetition_penalty, o.sampling.penalty_prompt_tokens, o.sampling.no_repeat_ngram), (1.3, 64, 5));
        assert_eq!(o.retry, Some(RetrySettings { repetition_penalty: 1.6, no_repeat_ngram: 2 }));
        assert_eq!(o.sampling.max_new_tokens, 100);
        assert_eq!(parse(&["--no-retry"]).retry, None);
        assert_eq!(parse(&["--prompts", "detailed"]).prompts, PromptStyle::Detailed);
        assert!(parse(&["--no-repeat-ngram", "1"]).check().is_err());
    }
}
