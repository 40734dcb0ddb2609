//! `warpfold ask`: a question answered from the index with the passages it cites.
//!
//! The work itself ([`AskIndex`], [`ChatSlot`], [`answer`]) is shared with `warpfold mcp`, whose
//! `ask` tool must answer exactly as this command does; only reading questions and printing
//! answers belong to the command.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use warpfold_engine::embed::Embedder;
use warpfold_index::search::{Hit, SearchOptions, Searcher};
use warpfold_index::store::Store;
use warpfold_summarize::answer::{self, Answer, Passage};
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
    /// Rerank this many of the best hits with the chat model (it judges whether each answers the
    /// question) and read the best `--passages` of them; 0: read the best hits as found. Costs a
    /// prefill of every candidate: cheap on a GPU, about a second a candidate on a laptop CPU.
    /// Default: as the app asks, 20 on a GPU and none on a CPU.
    #[arg(long, value_name = "CANDIDATES")]
    pub rerank: Option<usize>,
    /// Print one JSON object: {"answer", "citations": [{"n", "path", "page", "text"}], "answerable", "removed", ...}.
    #[arg(long)]
    pub json: bool,
}

/// How many tokens an answer may take.
const ANSWER_TOKENS: usize = 160;

/// An index opened for searching and asking: checked to be built with the embedding model the
/// options name (vectors of another model would not compare), its vectors in memory, that model
/// loaded to embed queries.
pub struct AskIndex {
    searcher: Searcher,
    embedder: Arc<Embedder>,
    model: String,
}

impl AskIndex {
    /// Loads the embedding model the global options name and opens `db` with it.
    pub fn open(global: &GlobalOptions, db: &Path) -> Result<AskIndex> {
        let dir = setup::embedding_model_dir(global, Some(db))?;
        check_index(db, &dir.name)?;
        let embedder = setup::embedder_for(global, &dir)?;
        Ok(AskIndex { searcher: Searcher::open(db)?, embedder, model: dir.name })
    }

    /// `db` opened again with the model already loaded: what changed in the index since is seen.
    pub fn reopen(&self, db: &Path) -> Result<AskIndex> {
        check_index(db, &self.model)?;
        Ok(AskIndex { searcher: Searcher::open(db)?, embedder: Arc::clone(&self.embedder), model: self.model.clone() })
    }

    pub fn searcher(&self) -> &Searcher {
        &self.searcher
    }

    /// The `k` best hits for `query`, as `warpfold search` finds them: semantic and keyword
    /// rankings fused, ranked and filtered as `options` say.
    pub fn search(&self, query: &str, k: usize, options: &SearchOptions) -> Result<Vec<Hit>> {
        let embed = |q: &str| self.embedder.embed_query(q).map_err(|e| e.to_string());
        Ok(self.searcher.search_with(query, k, options, embed)?)
    }

    /// The passages a question is answered from: the best hits, whichever documents they come
    /// from (no limit per document: the answer to a question about a long report is often in its
    /// third or fourth best passage).
    fn passages(&self, question: &str, count: usize) -> Result<Vec<Passage>> {
        let hits = self.search(question, count.max(1), &answer_search())?;
        Ok(hits.into_iter().map(|h| Passage { path: h.path, page: h.page, text: h.chunk }).collect())
    }
}

/// How passages for an answer are searched: by score alone. Two hits a document in the top five
/// (the search box's default) cost the QA set one passage that held its answer (79 → 78 of 83).
pub fn answer_search() -> SearchOptions {
    SearchOptions { per_document_in_top_five: None, ..SearchOptions::default() }
}

/// Refuses an index that is missing, empty, or built with another embedding model than `model`.
fn check_index(db: &Path, model: &str) -> Result<()> {
    let store = Store::open_read_only(db).map_err(|e| anyhow::Error::from(e).context(db.display().to_string()))?;
    match store.model()? {
        Some((_, dim)) => Ok(store.check_model(model, dim, false)?),
        None => bail!("{} holds no documents yet; run `warpfold index PATH... --db {}` first", db.display(), db.display()),
    }
}

/// What to do when the chat model is not on this machine yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingModel {
    /// Fetch it with pip (a terminal shows the wait on stderr).
    Fetch,
    /// Refuse, naming the command that fetches it: a client that waits on a tool call would
    /// give up long before a gigabyte arrives.
    Refuse,
}

/// The chat model, loaded on first use and kept: loading takes seconds, answering a question
/// with it about as long again.
pub struct ChatSlot {
    global: GlobalOptions,
    decoder: Option<PathBuf>,
    missing: MissingModel,
    loaded: Option<(ChatModel, String)>,
}

impl ChatSlot {
    /// `decoder` as `ask --decoder` takes it; None: the device's default chat model.
    pub fn new(global: &GlobalOptions, decoder: Option<PathBuf>, missing: MissingModel) -> ChatSlot {
        ChatSlot { global: global.clone(), decoder, missing, loaded: None }
    }

    /// The model and its name, loaded now if it was not yet.
    fn get(&mut self) -> Result<&(ChatModel, String)> {
        if self.loaded.is_none() {
            let path = self.path()?;
            let device = setup::backend_device(&self.global)?;
            let chat = ChatModel::load(&path, &device)?;
            self.loaded = Some((chat, warpfold_summarize::chat::model_name(&path)));
        }
        Ok(self.loaded.as_ref().expect("loaded above"))
    }

    fn path(&self) -> Result<PathBuf> {
        if self.missing == MissingModel::Fetch {
            return summarize::chat_model_path(&self.global, self.decoder.as_ref());
        }
        let device = setup::backend_device(&self.global)?;
        let root = setup::models_dir(&self.global);
        match warpfold_runtime::planned_chat_model(self.decoder.as_deref(), &device, &root)? {
            (path, None) => Ok(path),
            (_, Some(entry)) => bail!(
                "the chat model {} is not installed in {}; fetch it with `warpfold models fetch {}`{}, then ask again",
                entry.name,
                root.display(),
                entry.name,
                entry.size().map(|b| format!(" ({:.1} GB)", b as f64 / 1e9)).unwrap_or_default()
            ),
        }
    }
}

/// Questions answered, with what each was answered from and where the time went.
pub struct Answered {
    /// One per question, in order.
    pub answers: Vec<Answer>,
    /// The passages each question was answered from.
    pub passages: Vec<Vec<Passage>>,
    /// The chat model's name.
    pub model: String,
    pub retrieval: Duration,
    /// Zero when the model was loaded before.
    pub model_load: Duration,
    /// Judging the candidates (zero without reranking), and how many pairs were judged.
    pub reranking: Duration,
    pub reranked_pairs: usize,
    pub answering: Duration,
    /// From the start of answering to the model's first token.
    pub first_token: Option<Duration>,
}

/// Answers `questions` from the index: the best `passages` hits of each are found (with `rerank`
/// above zero: that many candidates, the best `passages` of them by the chat model's judgement;
/// `None`: the device's default, [`warpfold_summarize::rerank::default_candidates`], as in the
/// app), then the chat model (loaded on first use) reads them all together, batched.
pub fn answer(index: &AskIndex, chat: &mut ChatSlot, questions: &[&str], passages: usize, rerank: Option<usize>) -> Result<Answered> {
    let started = Instant::now();
    // The device's default is known once the model is loaded: then it is loaded first.
    let rerank = match rerank {
        Some(candidates) => candidates,
        None => warpfold_summarize::rerank::default_candidates(&chat.get()?.0),
    };
    let mut model_load = started.elapsed();
    let searching = Instant::now();
    let candidates = passages.max(rerank);
    let mut found: Vec<Vec<Passage>> = questions.iter().map(|q| index.passages(q, candidates)).collect::<Result<_>>()?;
    let retrieval = searching.elapsed();
    let loading = Instant::now();
    let (chat, model) = chat.get()?;
    model_load += loading.elapsed();
    let mut reranked_pairs = 0;
    if rerank > 0 {
        for (question, candidates) in questions.iter().zip(&mut found) {
            let (best, judged) =
                warpfold_summarize::rerank::best_of(chat, question, std::mem::take(candidates), |p| p.text.as_str(), passages)?;
            reranked_pairs += judged;
            *candidates = best;
        }
    }
    let reranking = started.elapsed() - retrieval - model_load;
    let sampling = SamplingParams { max_new_tokens: ANSWER_TOKENS, ..SamplingParams::default() };
    let asked: Vec<answer::Question> =
        questions.iter().zip(&found).map(|(q, p)| answer::Question { question: q, earlier: &[], passages: p }).collect();
    let (answers, stats) = answer::answer_questions(chat, &asked, &sampling)?;
    let answering = started.elapsed() - retrieval - model_load - reranking;
    let first_token = stats.first_token_seconds.map(Duration::from_secs_f64);
    Ok(Answered {
        answers,
        passages: found,
        model: model.clone(),
        retrieval,
        model_load,
        reranking,
        reranked_pairs,
        answering,
        first_token,
    })
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
    let index = AskIndex::open(global, &args.db)?;
    let opened = started.elapsed();
    let mut chat = ChatSlot::new(global, args.decoder.clone(), MissingModel::Fetch);
    let answered = answer(&index, &mut chat, &questions, args.passages, args.rerank)?;
    let Answered { answers, passages, model, retrieval, model_load, answering, .. } = &answered;
    // retrieval as the user waits for it: opening the index and loading the embedding model too
    let retrieved = (opened + *retrieval).as_secs_f64();
    let (model_load, answering) = (model_load.as_secs_f64(), answering.as_secs_f64());
    let first_token = answered.first_token.map(|d| format!(", first token after {:.1} s", d.as_secs_f64())).unwrap_or_default();
    let reranked = match answered.reranked_pairs {
        0 => String::new(),
        pairs => format!(", reranking {pairs} pairs {:.1} s", answered.reranking.as_secs_f64()),
    };
    if args.json || args.questions.is_some() {
        for ((mut line, a), p) in asked.into_iter().zip(answers).zip(passages) {
            let serde_json::Value::Object(fields) = serde_json::to_value(a)? else { unreachable!("an answer is an object") };
            line.as_object_mut().expect("a question line is an object").extend(fields);
            line["model"] = serde_json::json!(model);
            line["passages"] = serde_json::to_value(p)?;
            println!("{line}");
        }
        eprintln!(
            "{} question(s): retrieval {retrieved:.1} s, model load {model_load:.1} s{reranked}, answers {answering:.1} s{first_token}",
            answers.len()
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
        "{} passages from {}; retrieval {:.1} s, model load {:.1} s{reranked}, answer {:.1} s{first_token} ({} prompt tokens, {} generated)",
        passages.len(),
        args.db.display(),
        retrieved,
        model_load,
        answering,
        a.prompt_tokens,
        a.output_tokens
    );
    Ok(ExitCode::SUCCESS)
}
