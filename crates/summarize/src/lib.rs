//! warpfold's summarization: a local chat model turns documents into summaries.
//!
//! - [`chat`]: the model (GGUF with quantized weights, or a Hugging Face folder), its tokenizer
//!   (rebuilt from GGUF metadata when no tokenizer.json ships) and its chat template.
//! - [`mapreduce`]: documents longer than a prompt, by chunk summaries and a summary of those.
//! - [`output`]: what is done to each summary the model writes: cut at its last sentence end when
//!   the token budget ran out, and checked for loops; a summary that loops is written again with
//!   stronger repetition settings ([`SummarizeOptions::retry`]).
//! - [`grounding`]: every summary checked against its document: each figure, date and name it
//!   states must be there; one that is not gets the summary written again with a stricter
//!   instruction, and a sentence still stating one is dropped (and kept aside, shown).
//! - [`letter`]: who wrote a letter and to whom, told to the model with it, so it does not take
//!   the name heading the letter for the one who writes.
//! - [`cached`]: summaries kept in the index, by content hash and model, for every front.
//! - [`generate`]: generation's policy over the model's packed prefill and batched decode step:
//!   continuous batching, key/value-cache admission, sampling and repetition controls.
//! - [`Summarizer`]: the joined whole: every prompt of a level goes to [`generate::generate`],
//!   which prefills them packed and decodes them batched.
//!
//! Why a crate of its own: the index and the command line both use it, and it is the only part of
//! warpfold that generates text; the engine's scheduler (bins for forward passes) does not fit a
//! loop of one-token steps, so generation has its own scheduling here, over the model crate's
//! primitives.

pub mod answer;
pub mod cached;
pub mod chat;
pub mod generate;
pub mod grounding;
pub mod letter;
pub mod mapreduce;
pub mod output;
pub mod rerank;

use std::time::Instant;

use crate::generate::{generate, BatchOptions, GenerationStats, SamplingParams};

pub use cached::{CachedError, CachedSummary, SourceText};
pub use chat::{ChatError, ChatFormat, ChatModel};
pub use mapreduce::{DocumentSummary, MapReduceError, Task, TaskKind};

/// What the model is told; short, since a small model follows short instructions best.
pub const SYSTEM_PROMPT: &str = "You are a helpful assistant that writes short, faithful summaries of documents.";

/// How documents are summarized. `Default` holds every default of `warpfold summarize`, the app
/// and the server.
///
/// The repetition defaults were chosen by measurement (the table is in
/// `examples/summary_settings.rs`): with greedy decoding and no control, 4 of 5 generated
/// documents' summaries looped. A penalty of 1.1 with the retry left none, named every subject and
/// kept the names intact. No-repeat n-gram blocking on the first attempt misspelled names the
/// summary repeats (a name of n tokens can be written in full once: "Veltrazine", then
/// "Veltrazin"), so it is kept for the retry, where a loop is certain; penalties of 1.2 and up
/// named the subject less often and wrote run-on sentences ("." and "the" are penalized too once
/// used).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SummarizeOptions {
    pub sampling: SamplingParams,
    pub batch: BatchOptions,
    /// Most tokens of document text in one prompt; longer documents go through map-reduce.
    /// [`AUTO_CHUNK_TOKENS`] (0): by the model and the device ([`chunk_tokens_for`]).
    pub chunk_tokens: usize,
    /// What a summary that loops ([`output::loops`]) is written again with; None: kept as it is.
    pub retry: Option<RetrySettings>,
    /// The prompts' wording (Auto: by the model's size, see [`PromptStyle`]).
    pub prompts: PromptStyle,
    /// Quote under each summary the document's own sentences that state what it leaves out
    /// ([`grounding::key_lines`]; `WARPFOLD_SUMMARY_KEY_LINES=0` turns it off).
    pub key_lines: bool,
    /// The GPU memory the whole process may use (`--vram-budget`, `WARPFOLD_VRAM_BUDGET`: a smaller
    /// card played on a larger one). The cache pool is sized from what a card of this size would
    /// have free now, not from the device's own free memory. None: the device's.
    pub vram_budget: Option<u64>,
}

/// A summary setting that does not parse, or one the summarizer refuses (see
/// [`SummarizeOptions::check`]); the message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OptionsError(pub String);

/// The stronger repetition settings of a second attempt: a higher penalty and a no-repeat n-gram
/// size smaller than the first attempt's (or any, when the first had none).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RetrySettings {
    pub repetition_penalty: f32,
    pub no_repeat_ngram: usize,
}

impl Default for SummarizeOptions {
    fn default() -> Self {
        Self {
            sampling: SamplingParams {
                max_new_tokens: 160,
                repetition_penalty: 1.1,
                penalty_prompt_tokens: 0,
                no_repeat_ngram: 0,
                ..Default::default()
            },
            batch: BatchOptions { max_batch: AUTO_MAX_BATCH, ..BatchOptions::default() },
            chunk_tokens: AUTO_CHUNK_TOKENS,
            retry: Some(RetrySettings { repetition_penalty: 1.3, no_repeat_ngram: 3 }),
            prompts: PromptStyle::Auto,
            key_lines: true,
            vram_budget: None,
        }
    }
}

impl SummarizeOptions {
    /// Refuses settings under which map-reduce might not shrink (a summary must be at most half a
    /// chunk so that every level at least halves the text) and repetition settings that would
    /// encourage repetition or forbid ordinary prose.
    pub fn check(&self) -> Result<(), OptionsError> {
        self.refusal().map_err(OptionsError)
    }

    fn refusal(&self) -> Result<(), String> {
        if self.sampling.max_new_tokens == 0 {
            return Err("max tokens must be at least 1".into());
        }
        if self.chunk_tokens != AUTO_CHUNK_TOKENS && self.chunk_tokens < 2 * self.sampling.max_new_tokens {
            return Err(format!(
                "chunk tokens ({}) must be at least twice max tokens ({}) so that long documents converge",
                self.chunk_tokens, self.sampling.max_new_tokens
            ));
        }
        if !(0.0..=1.0).contains(&self.sampling.top_p) || self.sampling.top_p == 0.0 {
            return Err(format!("top-p must be in (0, 1], not {}", self.sampling.top_p));
        }
        if self.sampling.temperature < 0.0 || !self.sampling.temperature.is_finite() {
            return Err(format!("temperature must be 0 (greedy) or positive, not {}", self.sampling.temperature));
        }
        let retry = self.retry.map(|r| (r.repetition_penalty, r.no_repeat_ngram));
        for (what, penalty, n) in
            [("", self.sampling.repetition_penalty, self.sampling.no_repeat_ngram)].into_iter().chain(retry.map(|(p, n)| ("retry ", p, n)))
        {
            if !(1.0..=10.0).contains(&penalty) {
                return Err(format!("{what}repetition penalty must be in [1, 10] (1: off; below 1 favours repetition), not {penalty}"));
            }
            if n == 1 {
                return Err(format!("{what}no-repeat n-gram must be 0 (off) or at least 2; 1 would forbid every word used once"));
            }
        }
        Ok(())
    }

    /// The defaults with what the settings read by `var` change: `WARPFOLD_SUMMARY_` followed by
    /// the name of the CLI flag in capitals (`WARPFOLD_SUMMARY_REPETITION_PENALTY=1.2`,
    /// `WARPFOLD_SUMMARY_RETRY=0` for `--no-retry`). The desktop app, which has no command line,
    /// reads its options this way; a value that does not parse, or settings [`check`](Self::check)
    /// refuses, are an error naming the variable.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<SummarizeOptions, OptionsError> {
        Self::read_vars(&var).map_err(OptionsError)
    }

    fn read_vars(var: &dyn Fn(&str) -> Option<String>) -> Result<SummarizeOptions, String> {
        fn read<T: std::str::FromStr>(var: &dyn Fn(&str) -> Option<String>, name: &str, into: &mut T) -> Result<(), String>
        where
            T::Err: std::fmt::Display,
        {
            let key = format!("WARPFOLD_SUMMARY_{name}");
            if let Some(text) = var(&key).filter(|t| !t.trim().is_empty()) {
                *into = text.trim().parse().map_err(|e| format!("{key}={text:?}: {e}"))?;
            }
            Ok(())
        }
        let mut o = SummarizeOptions::default();
        let s = &mut o.sampling;
        read(var, "MAX_TOKENS", &mut s.max_new_tokens)?;
        read(var, "TEMPERATURE", &mut s.temperature)?;
        read(var, "TOP_P", &mut s.top_p)?;
        read(var, "SEED", &mut s.seed)?;
        read(var, "REPETITION_PENALTY", &mut s.repetition_penalty)?;
        read(var, "PENALTY_PROMPT_TOKENS", &mut s.penalty_prompt_tokens)?;
        read(var, "NO_REPEAT_NGRAM", &mut s.no_repeat_ngram)?;
        read(var, "CHUNK_TOKENS", &mut o.chunk_tokens)?;
        read(var, "MAX_BATCH", &mut o.batch.max_batch)?;
        read(var, "PREFILL_TOKENS", &mut o.batch.prefill_tokens)?;
        read(var, "PROMPTS", &mut o.prompts)?;
        let mut retry = o.retry.unwrap_or(RetrySettings { repetition_penalty: 1.0, no_repeat_ngram: 0 });
        read(var, "RETRY_REPETITION_PENALTY", &mut retry.repetition_penalty)?;
        read(var, "RETRY_NO_REPEAT_NGRAM", &mut retry.no_repeat_ngram)?;
        let mut retry_on = o.retry.is_some();
        if let Some(text) = var("WARPFOLD_SUMMARY_RETRY").filter(|t| !t.trim().is_empty()) {
            retry_on = on_off(&text).ok_or_else(|| format!("WARPFOLD_SUMMARY_RETRY={text:?}: write 1 (on) or 0 (off)"))?;
        }
        o.retry = retry_on.then_some(retry);
        if let Some(text) = var("WARPFOLD_SUMMARY_KEY_LINES").filter(|t| !t.trim().is_empty()) {
            o.key_lines = on_off(&text).ok_or_else(|| format!("WARPFOLD_SUMMARY_KEY_LINES={text:?}: write 1 (on) or 0 (off)"))?;
        }
        o.batch.prefill_tokens = o.batch.prefill_tokens.max(1);
        o.refusal().map_err(|e| format!("WARPFOLD_SUMMARY_*: {e}"))?;
        Ok(o)
    }

    /// The sampling of a second attempt at a summary that looped.
    pub fn retry_sampling(&self) -> Option<SamplingParams> {
        self.retry.map(|r| SamplingParams {
            repetition_penalty: r.repetition_penalty,
            no_repeat_ngram: r.no_repeat_ngram,
            ..self.sampling.clone()
        })
    }
}

/// A switch's value: 1/true/on/yes or 0/false/off/no, any case.
fn on_off(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

/// Summaries flagged by the loop detector, and what became of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RetryStats {
    /// Summaries (of documents, of chunks, of summaries) that looped.
    pub flagged: usize,
    /// Of those, written again with the retry settings.
    pub retried: usize,
    /// Still looping after the retry (or with retries off).
    pub still_looping: usize,
}

impl RetryStats {
    pub fn add(&mut self, other: &RetryStats) {
        self.flagged += other.flagged;
        self.retried += other.retried;
        self.still_looping += other.still_looping;
    }
}

/// Which wording of the prompts a model gets. Measured on the documents of
/// `tests/summary_quality.rs` (key facts kept of 15, greedy): SmolLM2-135M kept 3 with the brief
/// prompts and 1 with the detailed ones; Qwen2.5-Coder-1.5B kept 3 with the brief ones and 7 with
/// the detailed ones (asking for four to six sentences that start with the subject and then give who,
/// when and the numbers "written exactly as stated"); other wordings gave the 1.5B model 4 (one
/// fact per sentence) and 6 (six to eight sentences), and 9 (3, 4, 2) with [`DETAILED_WHOLE`] for
/// whole documents (2026-12-01). A small model follows a short instruction best; a larger one uses
/// the room. Asked instead for one sentence and then a line per fact, Qwen2.5-Coder-1.5B kept 28 of
/// the 81 key facts of 12 documents of tests/data/facts, against 32 with the detailed wording
/// (2026-12-06): the facts a summary leaves out are quoted from the document instead
/// ([`grounding::key_lines`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptStyle {
    /// Brief for models narrower than [`DETAILED_FROM_HIDDEN_SIZE`], detailed for wider ones.
    Auto,
    Brief,
    Detailed,
}

/// `chunk_tokens` chosen by the model and the device.
pub const AUTO_CHUNK_TOKENS: usize = 0;

/// `batch.max_batch` chosen by the device ([`max_batch_for`]).
pub const AUTO_MAX_BATCH: usize = 0;

/// What a card of `budget` bytes would have free, when the device has `free` of `total`: the
/// memory in use (this process's model, embedder and context, and anything else on the device)
/// counts against the budget as it would on the smaller card.
pub fn within_budget(free: u64, total: u64, budget: Option<u64>) -> u64 {
    match budget {
        Some(b) => b.saturating_sub(total.saturating_sub(free)).min(free),
        None => free,
    }
}

/// Sequences decoding together: 64 on a GPU, 16 on a CPU. A decode step on a GPU costs about the
/// same for 1 sequence as for 64 (the pooled cache reads every sequence in one call, and the
/// weights are read once per step whatever the batch), so more sequences are nearly free tokens;
/// on a CPU a step's matmuls grow with the batch, and 16 already keeps the cores busy.
pub fn max_batch_for(on_gpu: bool) -> usize {
    if on_gpu {
        64
    } else {
        16
    }
}

/// The pieces map-reduce cuts a document into, for a model of `hidden_size` and `context` tokens
/// on a GPU or not. Small models lose track of long inputs and the CPU pays for long prompts'
/// attention, so they get 1,536 tokens (the measurement behind it is in
/// examples/summary_settings.rs). A model of 1B parameters and up on a GPU gets whole reports, up
/// to 8,192 tokens (half its context at most): on 48 generated reports of 400-6,000 words on an
/// H200 (BENCHMARKS.md, issue 15), Qwen2.5-Coder-1.5B kept 66 of 240 known key facts through
/// chunks of 1,536 and map-reduce, and 113-117 when transformers gave it each report whole, with
/// the same wording; every map step is another place to drop a fact.
pub fn chunk_tokens_for(hidden_size: usize, context: usize, on_gpu: bool) -> usize {
    const SMALL: usize = 1536;
    if on_gpu && hidden_size >= DETAILED_FROM_HIDDEN_SIZE {
        (context / 2).clamp(SMALL, 8192)
    } else {
        SMALL
    }
}

/// The hidden size from which [`PromptStyle::Auto`] chooses the detailed prompts (SmolLM2-135M has
/// 576, SmolLM2-360M 960, Qwen2.5-1.5B 1,536, Llama-3.2-1B 2,048).
pub const DETAILED_FROM_HIDDEN_SIZE: usize = 1024;

impl std::str::FromStr for PromptStyle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(PromptStyle::Auto),
            "brief" => Ok(PromptStyle::Brief),
            "detailed" => Ok(PromptStyle::Detailed),
            other => Err(format!("{other:?} is not a prompt style (auto, brief, detailed)")),
        }
    }
}

impl PromptStyle {
    /// The style for a model of `hidden_size` (Auto resolved; the others as they are).
    pub fn for_model(self, hidden_size: usize) -> PromptStyle {
        match self {
            PromptStyle::Auto if hidden_size >= DETAILED_FROM_HIDDEN_SIZE => PromptStyle::Detailed,
            PromptStyle::Auto => PromptStyle::Brief,
            other => other,
        }
    }
}

/// The detailed style's instruction for a whole document. Measured with Qwen2.5-Coder-1.5B on the
/// two whole documents of `tests/summary_quality.rs`: 3 and 4 of 5 key facts, where "four to six
/// sentences ... who was involved, when things happened, and the key numbers and amounts" kept 2
/// and 3; a token budget of 256 instead of 160 changed nothing (the model stops by itself). Mirrored
/// in bench/gpu/peer_summarize.py.
pub const DETAILED_WHOLE: &str = "Summarize the following document in one paragraph. Begin with one sentence on what it is about, \
    then state every name, date, number and amount it gives, each with what it refers to, written exactly as stated";

/// The user message of a task, in `style` (Auto counts as Brief here: [`Summarizer`] resolves it
/// for its model). Each asks for the key facts, and the prompts that see a whole document (or
/// summaries of all of it) ask what it is about: asked only to "summarize", a small model describes
/// the text ("This document is a report ...") and keeps none of the facts a reader looks for. The
/// instruction comes before the text: on chunks holding one key fact each, SmolLM2-135M kept 5 of 6
/// that way and 4 of 6 with the same instruction after the text.
pub fn instruction(task: &Task, style: PromptStyle) -> String {
    let (facts, whole, part, combine) = match style {
        PromptStyle::Detailed => (
            "who was involved, when things happened, and the key numbers and amounts, written exactly as stated",
            DETAILED_WHOLE,
            "in a few sentences. Give its main facts",
            "Write one summary of the whole document in four to six sentences. Start with what it is about, then give its main facts",
        ),
        PromptStyle::Brief | PromptStyle::Auto => (
            "names, numbers, dates and amounts",
            "Summarize the following document in a few sentences. Say what it is about, and keep its key facts",
            "in a few sentences. Keep its key facts",
            "Write one short summary of the whole document: say what it is about, and keep its key facts",
        ),
    };
    let head = match task.kind {
        // The detailed wording names what to keep itself.
        TaskKind::Whole if style == PromptStyle::Detailed => format!("{whole}."),
        TaskKind::Whole => format!("{whole}: {facts}."),
        TaskKind::Part { level: 0, index, of } => {
            format!("Summarize the following text, part {} of {of} of a longer document, {part}: {facts}.", index + 1)
        }
        TaskKind::Part { .. } => format!(
            "The following are summaries of consecutive parts of a longer document. Combine them into a few sentences that keep the key facts: {facts}."
        ),
        TaskKind::Combine => format!("The following are summaries of consecutive parts of one document. {combine}: {facts}."),
    };
    // who wrote a letter and to whom, for a whole one: a small model takes the first name it
    // meets for the one who acts ([`letter`])
    let parties = match task.kind {
        TaskKind::Whole => letter::letter_parties(&task.text).map(|p| p.sentence()).unwrap_or_default(),
        _ => String::new(),
    };
    format!("{head}{parties}{}\n\n{}", in_its_language(task.language), task.text)
}

/// " Write the summary in French.": a document in another language than English is summarized
/// in its own (asked in English, a small model answers in English); nothing for English or for a
/// document whose language is not told apart ([`Task::language`]).
pub fn in_its_language(language: Option<&str>) -> String {
    match language {
        Some(name) => format!(" Write the summary in {name}."),
        None => String::new(),
    }
}

/// The language of `document` (its English name) when `summary` is in English and the document
/// is not: the model was asked for the document's language and wrote English, which the user is
/// told rather than left to wonder ([`grounding::SummaryCheck::english_instead_of`]).
pub fn english_instead_of(document: &str, summary: &str) -> Option<&'static str> {
    let language = language_name(document)?;
    (warpfold_index::language::detect(summary).language == Some("eng")).then_some(language)
}

/// The English name of `text`'s language when it is told apart and is not English.
pub fn language_name(text: &str) -> Option<&'static str> {
    warpfold_index::language::detect(text).language.filter(|l| *l != "eng").and_then(warpfold_index::language::english_name)
}

/// Added to every instruction of the second attempt at a summary that stated a figure, date or
/// name its document does not hold.
pub const GROUNDED: &str = "Use only what the text says. Copy every name, number, amount, date and duration exactly as it is written, \
    with what it applies to (once, per month, per year), and add nothing the text does not say.";

/// [`instruction`] with [`GROUNDED`] added before the text.
pub fn grounded_instruction(task: &Task, style: PromptStyle) -> String {
    let plain = instruction(task, style);
    let head = plain.strip_suffix(task.text.as_str()).unwrap_or(&plain).trim_end();
    format!("{head} {GROUNDED}\n\n{}", task.text)
}

/// A chat model as map-reduce's [`mapreduce::Summarize`], keeping the generator's counters.
pub struct Summarizer<'a> {
    pub chat: &'a ChatModel,
    pub options: SummarizeOptions,
    pub stats: GenerationStats,
    /// Summaries that looped and were retried.
    pub retries: RetryStats,
    /// Seconds spent in the model (tokenizing, generating, detokenizing).
    pub seconds: f64,
    /// Summaries written again because they stated something their document does not.
    pub rewritten: usize,
    started: Instant,
    /// The prompts of a second, grounded attempt ([`GROUNDED`]).
    grounded: bool,
}

impl<'a> Summarizer<'a> {
    /// On a GPU the batch's cache budget is also capped by the memory free after the model loaded
    /// (less 10%), so a batch's key/value caches can grow to their full length without running out.
    pub fn new(chat: &'a ChatModel, mut options: SummarizeOptions) -> Result<Self, OptionsError> {
        options.check()?;
        options.prompts = options.prompts.for_model(chat.model.config.hidden_size);
        if options.chunk_tokens == AUTO_CHUNK_TOKENS {
            let c = &chat.model.config;
            let chosen = chunk_tokens_for(c.hidden_size, c.max_position_embeddings, chat.model.device().is_cuda());
            // Room for map-reduce to converge whatever the summary budget.
            options.chunk_tokens = chosen.max(2 * options.sampling.max_new_tokens);
        }
        if options.batch.max_batch == AUTO_MAX_BATCH {
            options.batch.max_batch = max_batch_for(chat.model.device().is_cuda());
        }
        if let Ok((free, total)) = warpfold_candle::device_memory(chat.model.device()) {
            let free = within_budget(free, total, options.vram_budget);
            let c = &chat.model.config;
            // The cache pool is taken at once, so what the largest prefill needs besides it is
            // set aside first: per token its activations (hidden states, q/k/v, the feed-forward's
            // gate, up and product) and the keys and values of every layer kept until they reach
            // the pool, all bf16. A whole document (`chunk_tokens` and the prompt) runs alone.
            let per_token = 2 * (4 * c.hidden_size + 3 * c.intermediate_size + 2 * c.num_hidden_layers * c.kv_heads() * c.head_dim());
            let largest = options.batch.prefill_tokens.max(options.chunk_tokens + 512);
            let free = free.saturating_sub((largest * per_token) as u64);
            let budget = BatchOptions::kv_tokens_for(free, 0.1, c.num_hidden_layers, c.kv_heads(), c.head_dim(), 2);
            options.batch.kv_tokens = options.batch.kv_tokens.min(budget);
        }
        Ok(Self {
            chat,
            options,
            stats: GenerationStats::default(),
            retries: RetryStats::default(),
            seconds: 0.0,
            rewritten: 0,
            started: Instant::now(),
            grounded: false,
        })
    }

    /// Summarizes documents (their plain text), long ones by map-reduce, and checks each summary
    /// against its document ([`grounding`]): a summary stating a figure, date or name the document
    /// does not hold is written again, all of them together, with [`GROUNDED`] added to every
    /// prompt (the better of the two is kept: fewer unsupported items, the second on a tie); then
    /// each sentence still stating one is dropped and recorded in the summary's check.
    pub fn summarize_documents(&mut self, documents: &[String]) -> Result<Vec<DocumentSummary>, MapReduceError<ChatError>> {
        let chunk = self.options.chunk_tokens;
        let mut out = mapreduce::summarize_documents(self, documents, chunk)?;
        let sources: Vec<grounding::Source> = documents.iter().map(|d| grounding::Source::new(d)).collect();
        let failing: Vec<usize> = (0..out.len()).filter(|&i| !grounding::supported(&out[i].summary, &sources[i])).collect();
        if !failing.is_empty() {
            tracing::info!(
                failing = failing.len(),
                of = out.len(),
                "summaries that state something their document does not are written again, grounded"
            );
            let texts: Vec<String> = failing.iter().map(|&i| documents[i].clone()).collect();
            self.grounded = true;
            let again = mapreduce::summarize_documents(self, &texts, chunk);
            self.grounded = false;
            for (&i, second) in failing.iter().zip(again?) {
                self.rewritten += 1;
                let first = &mut out[i];
                first.draft = Some(first.summary.clone());
                first.check.rewritten = true;
                first.tokens_in += second.tokens_in;
                first.tokens_out += second.tokens_out;
                first.rounds += second.rounds;
                first.retried += second.retried;
                first.seconds = second.seconds;
                if grounding::unsupported_count(&second.summary, &sources[i]) <= grounding::unsupported_count(&first.summary, &sources[i]) {
                    first.summary = second.summary;
                }
            }
        }
        for ((summary, source), document) in out.iter_mut().zip(&sources).zip(documents) {
            let (kept, removed) = grounding::drop_unsupported(&summary.summary, source);
            if !removed.is_empty() {
                summary.draft.get_or_insert_with(|| summary.summary.clone());
                summary.summary = kept;
            }
            summary.check.checked = true;
            summary.check.removed = removed;
            summary.check.english_instead_of = english_instead_of(document, &summary.summary).map(str::to_string);
            if self.options.key_lines {
                summary.summary = grounding::with_key_lines(document, &summary.summary);
            }
        }
        Ok(out)
    }

    /// Generates for every prompt with `sampling`, all together, and returns each one's text (cut
    /// at its last sentence end when the budget ended it), tokens generated and finishing time.
    fn run(&mut self, prompts: &[&[u32]], sampling: &SamplingParams) -> Result<Vec<Attempt>, ChatError> {
        let run_start = self.started;
        let mut finished = vec![0f64; prompts.len()];
        let prompts: Vec<Vec<u32>> = prompts.iter().map(|p| p.to_vec()).collect();
        let (generations, stats) = generate(&self.chat.model, &prompts, &self.chat.stop_ids, sampling, self.options.batch, |r, _| {
            finished[r] = run_start.elapsed().as_secs_f64()
        })
        .map_err(|e| ChatError::Inference(e.to_string()))?;
        add_stats(&mut self.stats, &stats);
        generations
            .into_iter()
            .zip(finished)
            .map(|(g, finished_at)| {
                let text = self.chat.decode(&g.tokens)?;
                let text = if g.stopped { text.trim() } else { output::end_at_sentence(text.trim()) };
                Ok(Attempt { summary: text.to_string(), output_tokens: g.tokens.len(), finished_at })
            })
            .collect()
    }
}

/// One generated summary.
#[derive(Debug, Clone, PartialEq)]
struct Attempt {
    summary: String,
    output_tokens: usize,
    finished_at: f64,
}

/// The summaries of `prompt_tokens.len()` prompts: `run(indices, sampling)` generates those
/// prompts' summaries together; every summary that loops is generated again (all of them in one
/// more call) with the stronger retry settings of `options`, and the second attempt is kept,
/// its tokens counted on top of the first's.
fn summaries_with_retry<E>(
    prompt_tokens: &[usize],
    options: &SummarizeOptions,
    retries: &mut RetryStats,
    mut run: impl FnMut(&[usize], &SamplingParams) -> Result<Vec<Attempt>, E>,
) -> Result<Vec<mapreduce::Done>, E> {
    let all: Vec<usize> = (0..prompt_tokens.len()).collect();
    let mut out: Vec<mapreduce::Done> = run(&all, &options.sampling)?
        .into_iter()
        .zip(prompt_tokens)
        .map(|(a, &p)| mapreduce::Done {
            summary: a.summary,
            prompt_tokens: p,
            output_tokens: a.output_tokens,
            finished_at: a.finished_at,
            retried: false,
        })
        .collect();
    let flagged: Vec<usize> = all.into_iter().filter(|&i| output::loops(&out[i].summary)).collect();
    retries.flagged += flagged.len();
    match options.retry_sampling() {
        Some(stronger) if !flagged.is_empty() => {
            tracing::info!(
                flagged = flagged.len(),
                of = out.len(),
                "summaries that loop are written again with stronger repetition settings"
            );
            for (&i, a) in flagged.iter().zip(run(&flagged, &stronger)?) {
                retries.retried += 1;
                retries.still_looping += usize::from(output::loops(&a.summary));
                let d = &mut out[i];
                d.summary = a.summary;
                d.prompt_tokens += prompt_tokens[i];
                d.output_tokens += a.output_tokens;
                d.finished_at = a.finished_at;
                d.retried = true;
            }
        }
        _ => retries.still_looping += flagged.len(),
    }
    Ok(out)
}

/// Adds one run's generation counters to a total.
pub fn add_stats(total: &mut GenerationStats, s: &GenerationStats) {
    total.prompts += s.prompts;
    total.prompt_tokens += s.prompt_tokens;
    total.prefills += s.prefills;
    total.prefill_seconds += s.prefill_seconds;
    total.decode_tokens += s.decode_tokens;
    total.decode_steps += s.decode_steps;
    total.decode_seconds += s.decode_seconds;
    total.max_batch_seen = total.max_batch_seen.max(s.max_batch_seen);
    total.max_kv_reserved = total.max_kv_reserved.max(s.max_kv_reserved);
}

impl mapreduce::Summarize for Summarizer<'_> {
    type Error = ChatError;

    fn count_tokens(&self, text: &str) -> usize {
        self.chat.count_tokens(text)
    }

    /// Every task's summary, generated together; those that loop are generated again, together,
    /// with the retry settings (see [`summaries_with_retry`]).
    fn summarize(&mut self, tasks: &[Task]) -> Result<Vec<mapreduce::Done>, ChatError> {
        let started = Instant::now();
        let prompts = tasks
            .iter()
            .map(|t| {
                let text = if self.grounded { grounded_instruction(t, self.options.prompts) } else { instruction(t, self.options.prompts) };
                self.chat.encode_chat(SYSTEM_PROMPT, &text)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let lengths: Vec<usize> = prompts.iter().map(Vec::len).collect();
        let options = self.options.clone();
        let mut retries = self.retries;
        let out = summaries_with_retry(&lengths, &options, &mut retries, |which, sampling| {
            let chosen: Vec<&[u32]> = which.iter().map(|&i| prompts[i].as_slice()).collect();
            self.run(&chosen, sampling)
        });
        self.retries = retries;
        self.seconds += started.elapsed().as_secs_f64();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_control_repetition_and_retry_with_stronger_settings() {
        let d = SummarizeOptions::default();
        d.check().unwrap();
        assert!(d.sampling.repetition_penalty > 1.0, "{:?}", d.sampling);
        let retry = d.retry_sampling().expect("retries are on by default");
        assert!(retry.repetition_penalty > d.sampling.repetition_penalty);
        assert!(retry.no_repeat_ngram >= 2, "the retry blocks repeated n-grams");
        assert!(d.sampling.no_repeat_ngram == 0 || retry.no_repeat_ngram < d.sampling.no_repeat_ngram);
        assert_eq!(
            SamplingParams { repetition_penalty: d.sampling.repetition_penalty, no_repeat_ngram: d.sampling.no_repeat_ngram, ..retry },
            d.sampling,
            "only the repetition settings change"
        );
        // Settings that would favour repetition or forbid every repeated word are refused by name.
        let with = |f: &dyn Fn(&mut SummarizeOptions)| {
            let mut o = SummarizeOptions::default();
            f(&mut o);
            o.check().map_err(|e| e.to_string())
        };
        assert!(with(&|o| o.sampling.repetition_penalty = 0.9).unwrap_err().contains("repetition penalty"));
        assert!(with(&|o| o.sampling.repetition_penalty = f32::NAN).is_err());
        assert!(with(&|o| o.sampling.no_repeat_ngram = 1).unwrap_err().contains("no-repeat n-gram"));
        assert!(with(&|o| o.retry = Some(RetrySettings { repetition_penalty: 0.5, no_repeat_ngram: 3 }))
            .unwrap_err()
            .starts_with("retry "));
        with(&|o| {
            o.sampling.repetition_penalty = 1.0;
            o.sampling.no_repeat_ngram = 0;
            o.retry = None;
        })
        .expect("everything off is allowed");
    }

    /// The desktop's settings: each variable changes its option, nothing else moves, and a bad
    /// value is refused naming its variable.
    #[test]
    fn settings_from_variables_change_their_option_and_bad_ones_name_the_variable() {
        let from = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            SummarizeOptions::from_vars(|key| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())).map_err(|e| e.to_string())
        };
        assert_eq!(from(&[]).unwrap(), SummarizeOptions::default());
        let o = from(&[
            ("WARPFOLD_SUMMARY_REPETITION_PENALTY", "1.25"),
            ("WARPFOLD_SUMMARY_NO_REPEAT_NGRAM", "4"),
            ("WARPFOLD_SUMMARY_MAX_TOKENS", " 90 "),
            ("WARPFOLD_SUMMARY_RETRY_NO_REPEAT_NGRAM", "2"),
            ("WARPFOLD_SUMMARY_CHUNK_TOKENS", ""),
        ])
        .unwrap();
        assert_eq!((o.sampling.repetition_penalty, o.sampling.no_repeat_ngram, o.sampling.max_new_tokens), (1.25, 4, 90));
        assert_eq!(o.retry.unwrap().no_repeat_ngram, 2);
        assert_eq!(o.chunk_tokens, SummarizeOptions::default().chunk_tokens, "an empty value keeps the default");
        assert_eq!(from(&[("WARPFOLD_SUMMARY_RETRY", "off")]).unwrap().retry, None);
        let e = from(&[("WARPFOLD_SUMMARY_TEMPERATURE", "warm")]).unwrap_err();
        assert!(e.starts_with("WARPFOLD_SUMMARY_TEMPERATURE=\"warm\""), "{e}");
        assert!(from(&[("WARPFOLD_SUMMARY_RETRY", "maybe")]).unwrap_err().contains("WARPFOLD_SUMMARY_RETRY"));
        assert!(from(&[("WARPFOLD_SUMMARY_NO_REPEAT_NGRAM", "1")]).unwrap_err().contains("no-repeat n-gram"));
    }

    /// Auto picks the wording by the model's width; the brief wording is the one SmolLM2 was
    /// measured with, the detailed one asks for more sentences and exact figures.
    #[test]
    fn whole_reports_go_to_large_models_on_a_gpu_and_chunks_of_1536_to_the_rest() {
        assert_eq!(chunk_tokens_for(576, 8192, true), 1536, "SmolLM2-135M on a GPU");
        assert_eq!(chunk_tokens_for(1536, 32768, false), 1536, "Qwen2.5-1.5B on the CPU");
        assert_eq!(chunk_tokens_for(1536, 32768, true), 8192, "Qwen2.5-1.5B on a GPU: 8,192, its context holds 32k");
        assert_eq!(chunk_tokens_for(2048, 4096, true), 2048, "a large model with a short context: half of it");
        assert_eq!(chunk_tokens_for(2048, 2048, true), 1536, "never below the small models' pieces");
        assert_eq!(SummarizeOptions::default().chunk_tokens, AUTO_CHUNK_TOKENS);
        // The decode batch follows the device the same way, unless it is set.
        assert_eq!(SummarizeOptions::default().batch.max_batch, AUTO_MAX_BATCH);
        assert_eq!((max_batch_for(true), max_batch_for(false)), (64, 16));
        // An 8 GiB card played on a 141 GiB one with 3 GiB in use has 5 GiB free, not 138.
        const GIB: u64 = 1 << 30;
        assert_eq!(within_budget(138 * GIB, 141 * GIB, Some(8 * GIB)), 5 * GIB);
        assert_eq!(within_budget(138 * GIB, 141 * GIB, None), 138 * GIB);
        assert_eq!(within_budget(GIB, 141 * GIB, Some(8 * GIB)), 0, "more in use than the budget: nothing");
        assert_eq!(within_budget(2 * GIB, 4 * GIB, Some(8 * GIB)), 2 * GIB, "a budget above the card changes nothing");
        assert!(SummarizeOptions::default().check().is_ok(), "auto passes the check; the size is checked once chosen");
        let fixed = SummarizeOptions { chunk_tokens: 100, ..Default::default() };
        assert!(fixed.check().unwrap_err().to_string().contains("at least twice max tokens"), "a chosen size is still checked");
    }

    #[test]
    fn prompt_styles_follow_the_model_size_and_differ_in_what_they_ask() {
        assert_eq!(PromptStyle::Auto.for_model(576), PromptStyle::Brief, "SmolLM2-135M");
        assert_eq!(PromptStyle::Auto.for_model(1536), PromptStyle::Detailed, "Qwen2.5-1.5B");
        assert_eq!(PromptStyle::Brief.for_model(4096), PromptStyle::Brief, "a choice is kept");
        assert_eq!("Detailed".parse::<PromptStyle>(), Ok(PromptStyle::Detailed));
        assert!("long".parse::<PromptStyle>().is_err());
        let whole = Task { document: 0, kind: TaskKind::Whole, text: "TEXT".into(), language: None };
        assert_eq!(
            instruction(&whole, PromptStyle::Brief),
            "Summarize the following document in a few sentences. Say what it is about, and keep its key facts: names, numbers, dates and amounts.\n\nTEXT"
        );
        let detailed = instruction(&whole, PromptStyle::Detailed);
        assert!(
            detailed.starts_with(DETAILED_WHOLE)
                && detailed.contains("every name, date, number and amount")
                && detailed.contains("written exactly as stated")
                && detailed.ends_with("\n\nTEXT"),
            "{detailed}"
        );
        // the document's language, as map-reduce tells it from the whole document
        let french = "Le locataire verse un dépôt de garantie de deux mois de loyer avant d'entrer dans le logement.";
        let french = Task { document: 0, kind: TaskKind::Whole, text: french.into(), language: language_name(french) };
        assert!(instruction(&french, PromptStyle::Brief).contains("amounts. Write the summary in French.\n\nLe locataire"));
        // summaries of a Japanese document's parts that came out in English: still Japanese
        let japanese = Task {
            document: 0,
            kind: TaskKind::Combine,
            text: "The tenant pays a deposit of two months' rent.".into(),
            language: language_name("借主は入居前に家賃二か月分の敷金を貸主に支払います。"),
        };
        assert!(instruction(&japanese, PromptStyle::Detailed).contains("Write the summary in Japanese."));
        // a letter's writer and recipient are told before it, in a whole document's prompt
        let letter =
            "Madame Claire Dubois\n12 rue des Lilas\n\nMadame,\n\nJe résilie le bail de l'appartement que je loue depuis 2021.\n\n\
            Veuillez agréer, Madame, mes salutations.\n\nJulien Moreau";
        let told =
            instruction(&Task { document: 0, kind: TaskKind::Whole, text: letter.into(), language: Some("French") }, PromptStyle::Detailed);
        assert!(
            told.contains("as stated. This letter was written by Julien Moreau and is addressed to Claire Dubois. Write the summary in French.\n\nMadame Claire"),
            "{told}"
        );
        let part = Task { document: 0, kind: TaskKind::Part { level: 0, index: 1, of: 3 }, text: "T".into(), language: None };
        assert!(instruction(&part, PromptStyle::Brief)
            .starts_with("Summarize the following text, part 2 of 3 of a longer document, in a few sentences. Keep its key facts"));
        assert_eq!(
            SummarizeOptions::from_vars(|k| (k == "WARPFOLD_SUMMARY_PROMPTS").then(|| "brief".to_string())).unwrap().prompts,
            PromptStyle::Brief
        );
    }

    /// A real Russian manual page (Debian's ls(1)) that the CPU default summarized in English,
    /// though asked for Russian: the check says so; a summary in the document's language, or an
    /// English document's, says nothing.
    #[test]
    fn a_summary_in_english_of_a_document_in_another_language_is_told() {
        let russian = "Выводит информацию о ФАЙЛАХ (текущий каталог по умолчанию). Сортирует записи в алфавитном порядке, \
            если не указан ни --sort, ни один из параметров -cftuvSUX. Аргументы, обязательные для длинных параметров, \
            обязательны и для коротких. -a, --all не скрывать файлы начинающиеся с .";
        let english = "The ls command lists files in a directory and can display information about them, such as their names, \
            sizes and types, sorted by name unless another order is asked for.";
        assert_eq!(english_instead_of(russian, english), Some("Russian"));
        assert_eq!(english_instead_of(russian, "Команда ls выводит информацию о файлах в каталоге и сортирует их по алфавиту."), None);
        assert_eq!(english_instead_of(english, english), None);
    }

    /// Summaries that loop, and only those, are generated again with the retry settings, in one
    /// call; the second attempt is kept and counted.
    #[test]
    fn a_summary_that_loops_is_written_again_with_the_retry_settings() {
        let looping = "The project was a small project that was a small project that was a small project.";
        let options = SummarizeOptions::default();
        let mut calls: Vec<(Vec<usize>, SamplingParams)> = Vec::new();
        let mut retries = RetryStats::default();
        let out = summaries_with_retry(&[100, 200, 300], &options, &mut retries, |which, sampling| {
            calls.push((which.to_vec(), sampling.clone()));
            let first = calls.len() == 1;
            Ok::<_, ()>(
                which
                    .iter()
                    .map(|&i| Attempt {
                        summary: if first && i != 1 { looping.to_string() } else { format!("Summary {i}, attempt {}.", calls.len()) },
                        output_tokens: 10 + i,
                        finished_at: calls.len() as f64,
                    })
                    .collect(),
            )
        })
        .unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0], (vec![0, 1, 2], options.sampling.clone()));
        assert_eq!(calls[1], (vec![0, 2], options.retry_sampling().unwrap()));
        assert_eq!(retries, RetryStats { flagged: 2, retried: 2, still_looping: 0 });
        assert_eq!(out[0].summary, "Summary 0, attempt 2.");
        assert_eq!(out[1].summary, "Summary 1, attempt 1.");
        assert_eq!((out[0].retried, out[1].retried), (true, false));
        // Both attempts' tokens count: what the document cost.
        assert_eq!((out[0].prompt_tokens, out[0].output_tokens, out[0].finished_at), (200, 20, 2.0));
        assert_eq!((out[1].prompt_tokens, out[1].output_tokens, out[1].finished_at), (200, 11, 1.0));

        // Without retries, or when the retry loops too, the loop is counted as left.
        let off = SummarizeOptions { retry: None, ..SummarizeOptions::default() };
        let mut retries = RetryStats::default();
        let mut n = 0;
        let out = summaries_with_retry(&[5], &off, &mut retries, |which, _| {
            n += 1;
            Ok::<_, ()>(which.iter().map(|_| Attempt { summary: looping.into(), output_tokens: 1, finished_at: 0.0 }).collect())
        })
        .unwrap();
        assert_eq!((n, out[0].retried, retries), (1, false, RetryStats { flagged: 1, retried: 0, still_looping: 1 }));
        let mut retries = RetryStats::default();
        summaries_with_retry(&[5], &options, &mut retries, |which, _| {
            Ok::<_, ()>(which.iter().map(|_| Attempt { summary: looping.into(), output_tokens: 1, finished_at: 0.0 }).collect())
        })
        .unwrap();
        assert_eq!(retries, RetryStats { flagged: 1, retried: 1, still_looping: 1 });
    }
}
