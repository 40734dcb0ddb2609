//! Measures a chat model's summaries on the documents of tests/data/facts (everyday documents with
//! known facts; scans read back by OCR first): how many first drafts state a figure, date or name
//! the document does not hold (before the check), how many finished summaries do (after it, by
//! the check and by a cruder independent look), the share of stated facts kept (in the whole summary
//! and in what the model wrote of it, before the lines quoted from the document), mean length, and
//! documents per minute. One JSON line per document and a summary line; BENCHMARKS.md quotes them.
//!
//!     cargo run --release -p warpfold-summarize --example facts -- MODEL.gguf [--cuda] [--ids a,b] [--english] [--out FILE]
//!         [--texts FILE] [--write-texts FILE] [--score FILE [--requote]]
//!
//! `--score FILE` measures summaries written elsewhere (JSON lines `{"id", "summary"}`, e.g. a peer's)
//! with the same yardsticks, without a model: what they state that the document does not hold (as
//! the check sees it, and by the cruder look), the key facts kept, mean length. With `--requote`,
//! the quoted key lines of summaries this example wrote are chosen again by today's
//! `grounding::key_lines`, for the same model text: how a change to the choice moves the facts kept.
//!
//! `--write-texts FILE` writes the documents' source texts (the scans read back by OCR) as JSON
//! lines and stops; `--texts FILE` reads them from there instead of reading the scans again (a
//! machine without Tesseract, such as the GPU machine, summarizes what this one read).

#[path = "../tests/fact_documents/mod.rs"]
mod fact_documents;

use std::io::Write;
use std::time::Instant;

use candle_core::Device;
use warpfold_summarize::grounding::{self, Source};
use warpfold_summarize::{ChatModel, SummarizeOptions, Summarizer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args.first().ok_or("usage: facts MODEL.gguf [--cuda] [--ids a,b] [--english] [--out FILE]")?;
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let device = if args.iter().any(|a| a == "--cuda") { Device::new_cuda(0)? } else { Device::Cpu };
    let mut docs = fact_documents::load(&fact_documents::data_file());
    if let Some(ids) = flag("--ids") {
        let ids: Vec<&str> = ids.split(',').collect();
        docs.retain(|d| ids.contains(&d.id.as_str()));
    }
    if args.iter().any(|a| a == "--english") {
        docs.retain(|d| d.lang == "en");
    }
    let texts: Vec<String> = match flag("--texts") {
        Some(file) => {
            let mut read = std::collections::HashMap::new();
            for line in std::fs::read_to_string(&file)?.lines().filter(|l| !l.trim().is_empty()) {
                let v: serde_json::Value = serde_json::from_str(line)?;
                read.insert(v["id"].as_str().unwrap_or_default().to_string(), v["text"].as_str().unwrap_or_default().to_string());
            }
            docs.iter().map(|d| read.remove(&d.id).ok_or_else(|| format!("{file} has no text for {}", d.id))).collect::<Result<_, _>>()?
        }
        None => docs.iter().map(|d| fact_documents::source_text(d).map_err(|e| format!("{}: {e}", d.id))).collect::<Result<_, _>>()?,
    };
    if let Some(file) = flag("--write-texts") {
        let mut out = std::fs::File::create(file)?;
        for (d, t) in docs.iter().zip(&texts) {
            writeln!(out, "{}", serde_json::json!({ "id": d.id, "text": t }))?;
        }
        return Ok(());
    }
    if let Some(file) = flag("--score") {
        return score(&file, &docs, &texts, args.iter().any(|a| a == "--requote"));
    }
    let chat = ChatModel::load(std::path::Path::new(model), &device)?;
    let mut summarizer = Summarizer::new(&chat, SummarizeOptions::from_vars(|k| std::env::var(k).ok())?)?;
    let started = Instant::now();
    let results = summarizer.summarize_documents(&texts)?;
    let seconds = started.elapsed().as_secs_f64();

    let mut out: Box<dyn Write> = match flag("--out") {
        Some(path) => Box::new(std::fs::File::create(path)?),
        None => Box::new(std::io::stdout()),
    };
    let (mut before, mut after, mut crude_after, mut kept, mut stated, mut words, mut emptied) = (0, 0, 0, 0, 0, 0, 0);
    let mut recall_sum = 0.0;
    // key facts in what the model wrote, before the lines quoted from the document
    let mut kept_written = 0;
    for ((doc, text), r) in docs.iter().zip(&texts).zip(&results) {
        let source = Source::new(text);
        let draft = r.draft.as_deref().unwrap_or(&r.summary);
        let invented: Vec<String> = grounding::check(draft, &source).into_iter().flat_map(|s| s.unsupported).collect();
        let left: Vec<String> = grounding::check(&r.summary, &source).into_iter().flat_map(|s| s.unsupported).collect();
        let crude = fact_documents::unsupported_numbers_and_names(&r.summary, text);
        let facts = doc.key_facts_kept(&r.summary);
        let facts_written = doc.key_facts_kept(grounding::written_part(&r.summary));
        kept_written += facts_written;
        before += usize::from(!invented.is_empty());
        after += usize::from(!left.is_empty());
        crude_after += usize::from(!crude.is_empty());
        emptied += usize::from(r.summary.trim().is_empty());
        kept += facts;
        stated += doc.facts.len();
        recall_sum += facts as f64 / doc.facts.len().max(1) as f64;
        words += r.summary.split_whitespace().count();
        writeln!(
            out,
            "{}",
            serde_json::json!({
                "id": doc.id, "kind": doc.kind, "scan": doc.scan, "chunks": r.chunks,
                "key_facts": facts, "key_facts_written": facts_written, "of": doc.facts.len(),
                "draft_unsupported": invented, "after_check_unsupported": left, "crude_unsupported": crude,
                "rewritten": r.check.rewritten, "removed": r.check.removed,
                "draft": r.draft, "summary": r.summary,
            })
        )?;
    }
    let n = docs.len().max(1) as f64;
    let summary = serde_json::json!({
        "model": model, "device": format!("{:?}", device.location()), "documents": docs.len(), "seconds": seconds,
        "documents_per_minute": docs.len() as f64 / seconds * 60.0,
        "invented_before_check": before as f64 / n, "invented_after_check": after as f64 / n, "crude_after_check": crude_after as f64 / n,
        "key_facts_kept": kept, "key_facts_written": kept_written, "key_facts_stated": stated, "mean_recall": recall_sum / n,
        "mean_words": words as f64 / n, "emptied_by_check": emptied, "rewritten": summarizer.rewritten,
        "decode_tokens": summarizer.stats.decode_tokens, "prompt_tokens": summarizer.stats.prompt_tokens,
    });
    writeln!(out, "{summary}")?;
    eprintln!("{summary:#}");
    Ok(())
}

/// `--score FILE`: the yardsticks above, on summaries written elsewhere; one JSON line per
/// document of the set that FILE summarizes, then the totals.
fn score(file: &str, docs: &[fact_documents::FactDocument], texts: &[String], requote: bool) -> Result<(), Box<dyn std::error::Error>> {
    let mut written = std::collections::HashMap::new();
    for line in std::fs::read_to_string(file)?.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if let (Some(id), Some(summary)) = (v["id"].as_str(), v["summary"].as_str()) {
            written.insert(id.to_string(), summary.to_string());
        }
    }
    let (mut scored, mut invented, mut crude_any, mut kept, mut stated, mut words, mut recall_sum) = (0, 0, 0, 0, 0, 0, 0.0);
    for (doc, text) in docs.iter().zip(texts) {
        let Some(summary) = written.get(&doc.id) else { continue };
        let requoted;
        let summary = if requote {
            requoted = grounding::with_key_lines(text, grounding::written_part(summary));
            &requoted
        } else {
            summary
        };
        let source = Source::new(text);
        let unsupported: Vec<String> = grounding::check(summary, &source).into_iter().flat_map(|s| s.unsupported).collect();
        let crude = fact_documents::unsupported_numbers_and_names(summary, text);
        let facts = doc.key_facts_kept(summary);
        scored += 1;
        invented += usize::from(!unsupported.is_empty());
        crude_any += usize::from(!crude.is_empty());
        kept += facts;
        stated += doc.facts.len();
        recall_sum += facts as f64 / doc.facts.len().max(1) as f64;
        words += summary.split_whitespace().count();
        println!(
            "{}",
            serde_json::json!({ "id": doc.id, "key_facts": facts, "of": doc.facts.len(), "unsupported": unsupported, "crude_unsupported": crude })
        );
    }
    let n = scored.max(1) as f64;
    let totals = serde_json::json!({
        "scored": file, "documents": scored, "invented": invented as f64 / n, "crude": crude_any as f64 / n,
        "key_facts_kept": kept, "key_facts_stated": stated, "mean_recall": recall_sum / n, "mean_words": words as f64 / n,
    });
    println!("{totals}");
    eprintln!("{totals:#}");
    Ok(())
}
