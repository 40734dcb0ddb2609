//! The measurement behind the repetition defaults of `SummarizeOptions`: generated multi-page
//! documents whose subject and five key facts are known (tests/known_documents) are summarized
//! under several settings, and for each this prints loops (the detector's flags, before and after
//! retries), key facts kept, whether the subject is named, how much is copied from the opening,
//! and decode tokens per second.
//!
//!   cargo run --release -p warpfold-summarize --example summary_settings -- \
//!       [--model FILE.gguf] [--words 4500,6500,9000,500,1000] [--max-tokens 160] \
//!       [--chunk-tokens 1536] [--out summaries.jsonl] [--write DIR] \
//!       NAME:PENALTY:NGRAM[:RETRY_PENALTY/RETRY_NGRAM] ...
//!
//! `--write DIR` only writes the documents as .txt files (to run `warpfold summarize` on them, or a
//! peer), `known-0.txt`, `known-1.txt`, ...; `--score FILE.jsonl` scores summaries of them made
//! elsewhere (lines of `{"path": ".../known-I.txt", "summary": ...}`, as `warpfold summarize --json`
//! writes) with the same checks, for the same `--words` and `--seeds`. `--seeds 7,101,9 --words
//! 250,450,950` are the documents of tests/summary_quality.rs; the default seeds are 100, 101, ...
//!
//! `--write DIR --pdf` writes each document as `known-I.pdf` instead, in pages of about
//! `--page-words` words (default 290; the page count is the document's `--words` over that,
//! rounded, at least 1; the text is shared evenly among them, pages breaking at sentence ends), with warpfold-index's PDF writer; it prints each
//! document's pages and words and the totals, and with `--model FILE.gguf` also its tokens (the
//! model's own tokenizer, the document's text alone). `--score` takes the paths of either kind
//! (`.../known-I.pdf` as well as `.../known-I.txt`). bench/gpu/e2e-words.txt holds the `--words`
//! of the 200 PDFs of the end-to-end GPU benchmark (bench/gpu/pack-drop-pdfs.sh).
//!
//! Measured 2026-12-01 on the 2-core build machine, shared with other builds (load 3-6, so seconds
//! and tokens/s are noisy to ±15%), SmolLM2-135M-Instruct Q4_1 on the CPU, greedy, 160 tokens,
//! chunks of 1,536, the prompts of this version. `pP`: repetition penalty P; `nN`: no-repeat
//! n-gram N; `+retry`: summaries that loop written again with penalty 1.3 and n-gram 3 (1.4/3
//! after p1.2). Key facts per document, in order.
//!
//! Three map-reduce documents of 5,407, 7,690 and 10,837 tokens and two of 604 and 1,269
//! (`--words 4500,6500,9000,500,1000`):
//!
//! | setting | final summaries looping | summaries flagged / retried / still looping | key facts kept | subject named | decode tokens/s | seconds |
//! | --- | ---: | ---: | ---: | ---: | ---: | ---: |
//! | off (today's decoding) | 4 of 5 | 45 / 0 / 45 | 0+0+0+1+1 = 2 of 25 | 3 of 5 | 36.6 | 376 |
//! | retry only | 0 of 5 | 39 / 39 / 0 | 0+0+0+1+0 = 1 of 25 | 5 of 5 | 37.3 | 642 |
//! | p1.1 | 1 of 5 | 4 / 0 / 4 | 0+0+0+1+1 = 2 of 25 | 4 of 5 | 33.6 | 397 |
//! | p1.2 | 0 of 5 | 0 / 0 / 0 | 0+0+0+1+0 = 1 of 25 | 3 of 5 | 37.3 | 361 |
//! | n4 | 2 of 5 | 9 / 0 / 9 | 0+0+0+3+2 = 5 of 25 | 4 of 5 | 37.4 | 359 |
//! | n3 | 0 of 5 | 0 / 0 / 0 | 0+0+0+0+1 = 1 of 25 | 4 of 5 | 35.0 | 403 |
//! | p1.1n4+retry | 0 of 5 | 0 / 0 / 0 | 0+0+0+1+0 = 1 of 25 | 5 of 5 | 34.8 | 348 |
//! | p1.2n3+retry | 0 of 5 | 0 / 0 / 0 | 0+0+1+2+0 = 3 of 25 | 5 of 5 | 34.5 | 318 |
//! | **p1.1+retry (the default)** | **0 of 5** | 3 / 3 / 0 | 0+0+0+1+1 = 2 of 25 | **5 of 5** | 32.9 | 393 |
//!
//! Six documents of 507-804 tokens (`--words 400,450,500,550,600,650`):
//!
//! | setting | final summaries looping | key facts kept | subject named | decode tokens/s | seconds |
//! | --- | ---: | ---: | ---: | ---: | ---: |
//! | off | 5 of 6 | 1+3+0+0+0+0 = 4 of 30 | 6 of 6 | 25.7 | 57 |
//! | p1.1 | 0 of 6 | 0+2+0+0+0+0 = 2 of 30 | 6 of 6 | 26.2 | 58 |
//! | n4 | 0 of 6 | 1+3+0+0+0+0 = 4 of 30 | 5 of 6 | 29.7 | 49 |
//! | n3 | 0 of 6 | 0+2+0+0+1+0 = 3 of 30 | 5 of 6 | 24.2 | 64 |
//! | p1.05n4+retry | 0 of 6 | 0+2+0+0+1+0 = 3 of 30 | 5 of 6 | 25.0 | 62 |
//! | p1.1n4+retry | 0 of 6 | 1+2+0+0+0+0 = 3 of 30 | 6 of 6 | 23.7 | 58 |
//! | p1.2n4+retry | 0 of 6 | 0+3+0+0+0+0 = 3 of 30 | 6 of 6 | 24.2 | 58 |
//! | **p1.1+retry (the default)** | **0 of 6** | 0+2+0+0+0+0 = 2 of 30 | **6 of 6** | 28.4 | 53 |
//!
//! No setting copied the opening (at most 0.31 of a summary's 6-grams). What decided: every
//! setting with a control and the retry ends the loops, and key facts are few under all of them
//! (the model loses the facts of the middle pages at the map step, whatever the decoding; the
//! differences, 1-5 of 25, are within noise). Two things are not noise: no-repeat n-gram blocking
//! on the first attempt misspells names the summary repeats (a name of n tokens can be written
//! once: "Veltrazine", then "Veltrazin"; 9 such misspellings under n4 and under p1.1n4+retry on
//! the long documents, 6-8 on the short ones, none under p1.1+retry), and penalties of 1.2 and up
//! name the subject less often (3 of 5 under p1.2) and write run-on sentences, because "." and
//! "the" are penalized too once used. So the default is the mildest penalty that, with the retry,
//! left no loop: 1.1, n-gram blocking only in the retry.

#[path = "../tests/known_documents/mod.rs"]
mod known_documents;

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use candle_core::Device;
use warpfold_summarize::mapreduce::{self, Done, Summarize, Task};
use warpfold_summarize::{output, ChatError, ChatModel, RetrySettings, SummarizeOptions, Summarizer};

/// The summarizer, recording every task and what came of it (to see where facts are lost).
struct Recording<'a> {
    inner: Summarizer<'a>,
    tasks: Vec<(Task, Done)>,
}

impl Summarize for Recording<'_> {
    type Error = ChatError;
    fn count_tokens(&self, text: &str) -> usize {
        self.inner.count_tokens(text)
    }
    fn summarize(&mut self, tasks: &[Task]) -> Result<Vec<Done>, ChatError> {
        let done = self.inner.summarize(tasks)?;
        self.tasks.extend(tasks.iter().cloned().zip(done.iter().cloned()));
        Ok(done)
    }
}

struct Setting {
    name: String,
    penalty: f32,
    ngram: usize,
    retry: Option<RetrySettings>,
}

fn parse_setting(s: &str) -> Result<Setting, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || format!("{s:?}: expected NAME:PENALTY:NGRAM[:RETRY_PENALTY/RETRY_NGRAM]");
    if parts.len() < 3 || parts.len() > 4 {
        return Err(bad());
    }
    let retry = match parts.get(3) {
        None | Some(&"-") => None,
        Some(r) => {
            let (p, n) = r.split_once('/').ok_or_else(bad)?;
            Some(RetrySettings { repetition_penalty: p.parse().map_err(|_| bad())?, no_repeat_ngram: n.parse().map_err(|_| bad())? })
        }
    };
    Ok(Setting { name: parts[0].into(), penalty: parts[1].parse().map_err(|_| bad())?, ngram: parts[2].parse().map_err(|_| bad())?, retry })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
    let mut words = vec![4000usize, 5500, 7500];
    let mut max_tokens = SummarizeOptions::default().sampling.max_new_tokens;
    let mut chunk_tokens = SummarizeOptions::default().chunk_tokens;
    let mut out: Option<PathBuf> = None;
    let mut write: Option<PathBuf> = None;
    let mut score: Option<PathBuf> = None;
    let mut seeds: Option<Vec<u64>> = None;
    let mut pdf = false;
    let mut page_words = 290usize;
    let mut model_given = false;
    let mut settings = Vec::new();
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--model" => {
                model = value()?.into();
                model_given = true;
            }
            "--pdf" => pdf = true,
            "--page-words" => page_words = value()?.parse()?,
            "--words" => words = value()?.split(',').map(|w| w.parse()).collect::<Result<_, _>>()?,
            "--max-tokens" => max_tokens = value()?.parse()?,
            "--chunk-tokens" => chunk_tokens = value()?.parse()?,
            "--out" => out = Some(value()?.into()),
            "--write" => write = Some(value()?.into()),
            "--score" => score = Some(value()?.into()),
            "--seeds" => seeds = Some(value()?.split(',').map(|w| w.parse()).collect::<Result<_, _>>()?),
            s => settings.push(parse_setting(s)?),
        }
    }
    let seed = |i: usize| seeds.as_ref().map_or(100 + i as u64, |s| s[i % s.len()]);
    let docs: Vec<known_documents::KnownDocument> =
        words.iter().enumerate().map(|(i, &w)| known_documents::document(i, w, seed(i))).collect();
    if let Some(file) = score {
        return score_file(&docs, &file);
    }
    if let Some(dir) = write {
        std::fs::create_dir_all(&dir)?;
        if pdf {
            return write_pdfs(&docs, &words, &dir, page_words, model_given.then_some(model.as_path()));
        }
        for (i, d) in docs.iter().enumerate() {
            std::fs::write(dir.join(format!("known-{i}.txt")), &d.text)?;
        }
        return Ok(());
    }
    let chat = ChatModel::load(&model, &Device::Cpu)?;
    let texts: Vec<String> = docs.iter().map(|d| d.text.clone()).collect();
    let tokens: Vec<usize> = texts.iter().map(|t| chat.count_tokens(t)).collect();
    eprintln!("documents: {tokens:?} tokens; chunks of {chunk_tokens}, summaries of at most {max_tokens} tokens");
    let mut log = match &out {
        Some(p) => Some(std::fs::OpenOptions::new().create(true).append(true).open(p)?),
        None => None,
    };
    println!("| setting | final summaries looping | summaries flagged / retried / still looping | key facts kept | subject named | copied from opening | decode tokens/s | seconds |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for s in &settings {
        let mut options = SummarizeOptions { chunk_tokens, retry: s.retry, key_lines: false, ..Default::default() };
        options.sampling.max_new_tokens = max_tokens;
        options.sampling.repetition_penalty = s.penalty;
        options.sampling.no_repeat_ngram = s.ngram;
        let started = Instant::now();
        let mut recording = Recording { inner: Summarizer::new(&chat, options)?, tasks: Vec::new() };
        let results = mapreduce::summarize_documents(&mut recording, &texts, chunk_tokens)?;
        let summarizer = &recording.inner;
        let seconds = started.elapsed().as_secs_f64();
        let mut looping = 0;
        let mut facts = Vec::new();
        let mut named = 0;
        let mut copied = Vec::new();
        for (d, r) in docs.iter().zip(&results) {
            looping += usize::from(output::loops(&r.summary));
            let kept = d.facts_in(&r.summary);
            named += usize::from(d.names_subject(&r.summary));
            copied.push(format!("{:.2}", d.copied_from_opening(&r.summary)));
            if let Some(f) = log.as_mut() {
                let line = serde_json::json!({
                    "setting": s.name, "document": d.title, "document_tokens": r.document_tokens, "chunks": r.chunks,
                    "summary": r.summary, "facts": kept, "loops": output::loops(&r.summary),
                    "repeated": output::repeated_ngram(&r.summary, 4, 2), "retried": r.retried, "tokens_out": r.tokens_out,
                });
                writeln!(f, "{line}")?;
            }
            facts.push(kept.len());
        }
        if let Some(f) = log.as_mut() {
            for (t, done) in &recording.tasks {
                let d = &docs[t.document];
                let line = serde_json::json!({
                    "setting": s.name, "task": format!("{:?}", t.kind), "document": d.title,
                    "facts_in_text": d.facts_in(&t.text), "facts_in_summary": d.facts_in(&done.summary),
                    "summary": done.summary, "retried": done.retried, "tokens_out": done.output_tokens,
                });
                writeln!(f, "{line}")?;
            }
        }
        let st = &summarizer.stats;
        let rt = &summarizer.retries;
        println!(
            "| {} | {looping} of {} | {} / {} / {} | {} = {} of {} | {named} of {} | {} | {:.1} | {seconds:.0} |",
            s.name,
            docs.len(),
            rt.flagged,
            rt.retried,
            rt.still_looping,
            facts.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(" + "),
            facts.iter().sum::<usize>(),
            5 * docs.len(),
            docs.len(),
            copied.join(", "),
            st.decode_tokens as f64 / st.decode_seconds.max(1e-9),
        );
        std::io::stdout().flush()?;
    }
    Ok(())
}

/// A document's text cut into `pages` pages of about equal words, each ending at a sentence end
/// (a line ending a heading or a paragraph counts): each page a list of paragraphs.
fn paginate(text: &str, pages: usize) -> Vec<Vec<String>> {
    // Paragraphs as lists of sentences ("word word." units), in order.
    let paragraphs: Vec<Vec<String>> = text
        .split("\n\n")
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.split_inclusive(". ").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
        .collect();
    let total: usize = paragraphs.iter().flatten().map(|s| s.split_whitespace().count()).sum();
    let pages = pages.max(1);
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    let mut done = 0usize;
    for paragraph in &paragraphs {
        let mut current = String::new();
        for sentence in paragraph {
            // A page ends once its share of the words is in, unless it is the last page.
            if out.len() < pages && done >= total * out.len() / pages {
                if !current.is_empty() {
                    out.last_mut().expect("a page").push(std::mem::take(&mut current));
                }
                out.push(Vec::new());
            }
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(sentence);
            done += sentence.split_whitespace().count();
        }
        if !current.is_empty() {
            out.last_mut().expect("a page").push(current);
        }
    }
    out
}

/// `--write DIR --pdf`: each document as known-I.pdf, in pages of about `page_words` words.
fn write_pdfs(
    docs: &[known_documents::KnownDocument],
    asked: &[usize],
    dir: &std::path::Path,
    page_words: usize,
    model: Option<&std::path::Path>,
) -> Result<(), Box<dyn std::error::Error>> {
    use warpfold_index::pdfgen::{Font, Page, PdfDocument, TextBlock};
    let tokenizer = match model {
        Some(path) => {
            let file = warpfold_candle::gguf::GgufFile::open(path)?;
            Some(warpfold_summarize::chat::tokenizer_from_meta(&file.tokenizer_meta()?)?)
        }
        None => None,
    };
    let (mut all_pages, mut all_words, mut all_tokens) = (0usize, 0usize, 0usize);
    for (i, d) in docs.iter().enumerate() {
        let words = d.text.split_whitespace().count();
        let pages = ((asked[i] as f64 / page_words.max(1) as f64).round() as usize).max(1);
        let laid = paginate(&d.text, pages);
        assert_eq!(laid.len(), pages, "document {i}: {pages} pages asked, {} laid out", laid.len());
        let pdf = PdfDocument {
            pages: laid
                .into_iter()
                .map(|paragraphs| Page {
                    blocks: paragraphs.into_iter().map(|text| TextBlock { font: Font::Helvetica, text }).collect(),
                    image: false,
                })
                .collect(),
            compress: true,
            encrypt_with_unknown_password: false,
        };
        if let Some(bad) = d.text.chars().find(|&c| !c.is_whitespace() && !Font::Helvetica.can_encode(&c.to_string())) {
            return Err(format!("document {i}: {bad:?} cannot be written in Helvetica").into());
        }
        std::fs::write(dir.join(format!("known-{i}.pdf")), pdf.to_bytes())?;
        let tokens = match &tokenizer {
            Some(t) => t.encode(d.text.as_str(), false).map_err(|e| e.to_string())?.len(),
            None => 0,
        };
        println!(
            "known-{i}.pdf: {pages} pages, {words} words{}",
            if tokenizer.is_some() { format!(", {tokens} tokens") } else { String::new() }
        );
        all_pages += pages;
        all_words += words;
        all_tokens += tokens;
    }
    println!(
        "total: {} documents, {all_pages} pages, {all_words} words{} -> {}",
        docs.len(),
        if tokenizer.is_some() { format!(", {all_tokens} tokens (text alone; each prompt adds the instruction)") } else { String::new() },
        dir.display()
    );
    Ok(())
}

/// Scores summaries made elsewhere of the documents `--write` wrote, and prints one line per
/// document and the totals.
fn score_file(docs: &[known_documents::KnownDocument], file: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let (mut facts, mut named, mut looping, mut scored, mut copied_max) = (0, 0, 0, 0, 0.0f64);
    for line in std::fs::read_to_string(file)?.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let path = v["path"].as_str().ok_or("a line without a path")?;
        let summary = v["summary"].as_str().ok_or("a line without a summary")?;
        let index: usize = std::path::Path::new(path)
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.strip_prefix("known-"))
            .and_then(|i| i.parse().ok())
            .ok_or_else(|| format!("{path}: not a known-I.txt or known-I.pdf"))?;
        let d = docs.get(index).ok_or_else(|| format!("{path}: no document {index} for these --words"))?;
        let kept = d.facts_in(summary);
        let copied = d.copied_from_opening(summary);
        println!(
            "known-{index}: {} of 5 key facts {kept:?}, subject named {}, loops {}, copied from the opening {copied:.2}",
            kept.len(),
            d.names_subject(summary),
            output::loops(summary)
        );
        facts += kept.len();
        named += usize::from(d.names_subject(summary));
        looping += usize::from(output::loops(summary));
        copied_max = copied_max.max(copied);
        scored += 1;
    }
    println!(
        "{}: {scored} summaries; key facts {facts} of {} ({:.1} per document); subject named {named}; looping {looping}; most copied from an opening {copied_max:.2}",
        file.display(),
        5 * scored,
        facts as f64 / scored.max(1) as f64
    );
    Ok(())
}
