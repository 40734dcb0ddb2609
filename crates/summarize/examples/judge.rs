//! Can the chat model judge whether a statement is true to a document? The measurement behind an
//! entailment check for the statements the figure/date/name check cannot see ("seeds are sown
//! directly"). For each document of tests/data/facts it asks, for each of the document's stated
//! facts (true) and traps (false), "is this statement true according to the document?", all
//! prompts prefilled packed and decoded batched, greedy, and counts how often the model says yes to
//! a true one and no to a false one.
//!
//! It also runs the deterministic check (`grounding`) on every statement, true and false, of every
//! document (scans included, on their OCR'd text): how many traps it catches, how many true
//! statements it flags.
//!
//!     cargo run --release -p warpfold-summarize --example judge -- MODEL.gguf [--limit N] [--cuda]
//!     cargo run --release -p warpfold-summarize --example judge -- --check-only

#[path = "../tests/fact_documents/mod.rs"]
mod fact_documents;

use std::time::Instant;

use candle_core::Device;
use warpfold_summarize::generate::{generate, BatchOptions, SamplingParams};
use warpfold_summarize::ChatModel;

const SYSTEM: &str = "You check statements against a document. You answer with one word: Yes or No.";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    check_statements()?;
    if args.iter().any(|a| a == "--check-only") {
        return Ok(());
    }
    let model = args.first().ok_or("usage: judge MODEL.gguf [--limit N] [--cuda]")?;
    let limit: usize = args.iter().position(|a| a == "--limit").and_then(|i| args.get(i + 1)).map_or(Ok(usize::MAX), |n| n.parse())?;
    let device = if args.iter().any(|a| a == "--cuda") { Device::new_cuda(0)? } else { Device::Cpu };
    let docs: Vec<_> = fact_documents::load(&fact_documents::data_file())
        .into_iter()
        .filter(|d| !d.scan && d.text.split_whitespace().count() < 600)
        .take(limit)
        .collect();
    let chat = ChatModel::load(std::path::Path::new(model), &device)?;
    let mut prompts = Vec::new();
    let mut truth = Vec::new();
    for d in &docs {
        let statements =
            d.facts.iter().map(|f| (f.statement.as_str(), true)).chain(d.traps.iter().map(|t| (t.false_statement.as_str(), false)));
        for (statement, true_) in statements {
            let user = format!(
                "Document:\n{}\n\nStatement: {statement}\n\nIs the statement true according to the document? Answer Yes or No.",
                d.text
            );
            prompts.push(chat.encode_chat(SYSTEM, &user)?);
            truth.push((d.id.clone(), statement.to_string(), true_));
        }
    }
    let sampling = SamplingParams { max_new_tokens: 2, ..SamplingParams::default() };
    let started = Instant::now();
    let (generations, stats) =
        generate(&chat.model, &prompts, &chat.stop_ids, &sampling, BatchOptions { max_batch: 16, ..BatchOptions::default() }, |_, _| {})?;
    let seconds = started.elapsed().as_secs_f64();
    let (mut true_yes, mut trues, mut false_no, mut falses, mut unclear) = (0, 0, 0, 0, 0);
    for (g, (id, statement, true_)) in generations.iter().zip(&truth) {
        let answer = chat.decode(&g.tokens)?.trim().to_lowercase();
        let yes = answer.starts_with("yes");
        let no = answer.starts_with("no");
        unclear += usize::from(!yes && !no);
        if *true_ {
            trues += 1;
            true_yes += usize::from(yes);
        } else {
            falses += 1;
            false_no += usize::from(no);
            println!("{id}\ttrap\t{}\t{statement}", if no { "rejected" } else { "ACCEPTED" });
        }
    }
    eprintln!(
        "{} documents, {} statements in {seconds:.1} s ({} prompt tokens): true statements accepted {true_yes} of {trues}, false ones rejected {false_no} of {falses}, unclear answers {unclear}",
        docs.len(),
        truth.len(),
        stats.prompt_tokens
    );
    Ok(())
}

/// The deterministic check on every stated fact (true) and trap (false) of the set.
fn check_statements() -> Result<(), Box<dyn std::error::Error>> {
    use warpfold_summarize::grounding::Source;
    let (mut traps, mut caught, mut facts, mut flagged) = (0, 0, 0, 0);
    for d in fact_documents::load(&fact_documents::data_file()) {
        let source = Source::new(&fact_documents::source_text(&d)?);
        for f in &d.facts {
            facts += 1;
            let items = source.unsupported(&f.statement);
            if !items.is_empty() {
                flagged += 1;
                println!("{}	fact	FLAGGED {items:?}	{}", d.id, f.statement);
            }
        }
        for t in &d.traps {
            traps += 1;
            let items = source.unsupported(&t.false_statement);
            caught += usize::from(!items.is_empty());
            println!(
                "{}	trap	{}	{}",
                d.id,
                if items.is_empty() { "missed".to_string() } else { format!("caught {items:?}") },
                t.false_statement
            );
        }
    }
    eprintln!("the check: traps caught {caught} of {traps}; true statements flagged {flagged} of {facts}");
    Ok(())
}
