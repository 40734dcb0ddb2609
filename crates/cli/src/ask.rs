//! `warpfold ask`: a question answered from the index with the passages it cites.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use warpfold_engine::Lane;
use warpfold_index::search::Searcher;
use warpfold_index::store::Store;
use warpfold_summarize::answer::{self, Passage};
use warpfold_summarize::generate::SamplingParams;
use warpfold_summarize::ChatModel;

use crate::{setup, summarize, GlobalOptions};

#[derive(Args, Debug, Clone)]
pub struct AskArgs {
    /// The question, in your own words.
    #[arg(required_unless_present = "questions")]
    pub question: Option<String>,
    /// Answer every question of this file of JSON lines ({"question": ..., any other fields kept})
    /// together, batched; prints one JSON line per question.
    #[arg(long, conflicts_with = "question", value_name = "FILE")]
    pub questions: Option<PathBuf>,
    /// The index database built by `warpfold index`.
    #[arg(long)]
    pub db: PathBuf,
    /// How many passages the model reads (the best hits).
    #[arg(long, default_value_t = 5)]
    pub passages: usize,
    /// The chat model (as for `summarize --decoder`); default: the device's, fetched on first use.
    #[arg(long)]
    pub decoder: Option<PathBuf>,
    /// Print one JSON object: {"answer", "citations": [{"n", "path", "page", "text"}], "answerable", "removed", ...}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalOptions, args: &AskArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let asked: Vec<serde_json::Value> = match (&args.question, &args.questions) {
        (Some(q), _) => vec![serde_json::json!({ "question": q })],
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let lines: Result<Vec<serde_json::Value>> = text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, l)| {
                    let v: serde_json::Value =
                        serde_json::from_str(l).map_err(|e| anyhow::anyhow!("{} line {}: {e}", file.display(), i + 1))?;
                    match v.get("question").and_then(|q| q.as_str()) {
                        Some(_) => Ok(v),
                        None => bail!("{} line {}: no \"question\" string", file.display(), i + 1),
                    }
                })
                .collect();
            lines?
        }
        (None, None) => bail!("ask a question, or give --questions FILE"),
    };
    let questions: Vec<&str> = asked.iter().map(|v| v["question"].as_str().unwrap_or_default()).collect();
    if let Some(i) = questions.iter().position(|q| q.trim().is_empty()) {
        bail!("question {} is empty", i + 1);
    }
    let dir = setup::embedding_model_dir(global)?;
    let store = Store::open_read_only(&args.db).map_err(|e| anyhow::Error::from(e).context(args.db.display().to_string()))?;
    match store.model()? {
        Some((_, dim)) => store.check_model(&dir.name, dim, false)?,
        None => bail!("{} holds no documents yet; run `warpfold index PATH... --db {}` first", args.db.display(), args.db.display()),
    }
    let embedder = setup::embedder_for(global, &dir)?;
    let searcher = Searcher::open(&args.db)?;
    let mut passages: Vec<Vec<Passage>> = Vec::with_capacity(questions.len());
    for q in &questions {
        let embed = |q: &str| embedder.embed_texts(Lane::Interactive, &[q]).pop().expect("one answer per text").map_err(|e| e.to_string());
        // the best hits, whichever documents they come from: the answer to a question about a
        // long report is often in its third or fourth best passage
        let hits = searcher.search(q, args.passages.max(1), embed)?;
        passages.push(hits.iter().map(|h| Passage { path: h.path.clone(), page: h.page, text: h.chunk.clone() }).collect());
    }
    let retrieved = started.elapsed().as_secs_f64();

    let path = summarize::chat_model_path(global, args.decoder.as_ref())?;
    let device = setup::backend_device(global)?;
    let chat = ChatModel::load(&path, &device)?;
    let loaded = started.elapsed().as_secs_f64();
    let sampling = SamplingParams { max_new_tokens: 160, ..SamplingParams::default() };
    let pairs: Vec<(&str, &[Passage])> = questions.iter().zip(&passages).map(|(q, p)| (*q, p.as_slice())).collect();
    let answers = answer::answer_all(&chat, &pairs, &sampling)?;
    let seconds = started.elapsed().as_secs_f64();
    let model = warpfold_summarize::chat::model_name(&path);
    if args.json || args.questions.is_some() {
        for ((mut line, a), p) in asked.into_iter().zip(&answers).zip(&passages) {
            let serde_json::Value::Object(fields) = serde_json::to_value(a)? else { unreachable!("an answer is an object") };
            line.as_object_mut().expect("a question line is an object").extend(fields);
            line["model"] = serde_json::json!(model);
            line["passages"] = serde_json::to_value(p)?;
            println!("{line}");
        }
        eprintln!(
            "{} question(s): retrieval {retrieved:.1} s, model load {:.1} s, answers {:.1} s",
            answers.len(),
            loaded - retrieved,
            seconds - loaded
        );
        return Ok(ExitCode::SUCCESS);
    }
    let (a, passages) = (&answers[0], &passages[0]);
    println!("{}", warpfold_app::text::for_terminal(&a.answer));
    if !a.citations.is_empty() {
        println!();
    }
    for c in &a.citations {
        println!("[{}] {}  page {}", c.n, warpfold_app::text::for_terminal(&c.path), c.page);
    }
    for r in &a.removed {
        eprintln!(
            "removed, not in the passages it cites ({}): {}",
            r.items.iter().map(|i| warpfold_app::text::for_terminal(i).into_owned()).collect::<Vec<_>>().join(", "),
            warpfold_app::text::for_terminal(&r.sentence)
        );
    }
    eprintln!(
        "{} passages from {}; retrieval {:.1} s, model load {:.1} s, answer {:.1} s ({} prompt tokens, {} generated)",
        passages.len(),
        args.db.display(),
        retrieved,
        loaded - retrieved,
        seconds - loaded,
        a.prompt_tokens,
        a.output_tokens
    );
    Ok(ExitCode::SUCCESS)
}
