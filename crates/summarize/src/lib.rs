//! warpfold's summarization: a local chat model turns documents into summaries.
//!
//! - [`chat`]: the model (GGUF with quantized weights, or a Hugging Face folder), its tokenizer
//!   (rebuilt from GGUF metadata when no tokenizer.json ships) and its chat template.
//! - [`mapreduce`]: documents longer than a prompt, by chunk summaries and a summary of those.
//! - [`Summarizer`]: the two joined: every prompt of a level goes to
//!   [`warpfold_candle::generate::generate`], which prefills them packed and decodes them batched.
//!
//! Why a crate of its own: the index and the command line both use it, and it is the only part of
//! warpfold that generates text; the engine's scheduler (bins for forward passes) does not fit a
//! loop of one-token steps, so generation has its own, in the model crate.

pub mod chat;
pub mod mapreduce;

use std::time::Instant;

use warpfold_candle::generate::{generate, BatchOptions, GenerationStats, SamplingParams};

pub use chat::{ChatError, ChatFormat, ChatModel};
pub use mapreduce::{DocumentSummary, MapReduceError, Task, TaskKind};

/// What the model is told; short, since a small model follows short instructions best.
pub const SYSTEM_PROMPT: &str = "You are a helpful assistant that writes short, faithful summaries of documents.";

/// How documents are summarized.
#[derive(Debug, Clone)]
pub struct SummarizeOptions {
    pub sampling: SamplingParams,
    pub batch: BatchOptions,
    /// Most tokens of document text in one prompt; longer documents go through map-reduce.
    pub chunk_tokens: usize,
}

impl Default for SummarizeOptions {
    fn default() -> Self {
        Self {
            sampling: SamplingParams { max_new_tokens: 160, ..Default::default() },
            batch: BatchOptions::default(),
            chunk_tokens: 1536,
        }
    }
}

impl SummarizeOptions {
    /// Refuses settings under which map-reduce might not shrink: a summary must be at most half a
    /// chunk so that every level at least halves the text.
    pub fn check(&self) -> Result<(), String> {
        if self.sampling.max_new_tokens == 0 {
            return Err("max tokens must be at least 1".into());
        }
        if self.chunk_tokens < 2 * self.sampling.max_new_tokens {
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
        Ok(())
    }
}

/// The user message of a task.
pub fn instruction(task: &Task) -> String {
    match task.kind {
        TaskKind::Whole => format!("Summarize the following document in a few sentences.\n\n{}", task.text),
        TaskKind::Part { level: 0, index, of } => format!(
            "Summarize the following text, part {} of {of} of a longer document, in a few sentences.\n\n{}",
            index + 1,
            task.text
        ),
        TaskKind::Part { .. } => format!(
            "Summarize the following summaries of consecutive parts of a document in a few sentences.\n\n{}",
            task.text
        ),
        TaskKind::Combine => format!(
            "The following are summaries of consecutive parts of one document. Write one short summary of the whole document.\n\n{}",
            task.text
        ),
    }
}

/// A chat model as map-reduce's [`mapreduce::Summarize`], keeping the generator's counters.
pub struct Summarizer<'a> {
    pub chat: &'a ChatModel,
    pub options: SummarizeOptions,
    pub stats: GenerationStats,
    /// Seconds spent in the model (tokenizing, generating, detokenizing).
    pub seconds: f64,
    started: Instant,
}

impl<'a> Summarizer<'a> {
    /// On a GPU the batch's cache budget is also capped by the memory free after the model loaded
    /// (less 10%), so a batch's key/value caches can grow to their full length without running out.
    pub fn new(chat: &'a ChatModel, mut options: SummarizeOptions) -> Result<Self, String> {
        options.check()?;
        if let Ok((free, _)) = warpfold_candle::device_memory(chat.model.device()) {
            let c = &chat.model.config;
            // The caches are bf16 on a GPU.
            let budget = BatchOptions::kv_tokens_for(free, 0.1, c.num_hidden_layers, c.kv_heads(), c.head_dim(), 2);
            options.batch.kv_tokens = options.batch.kv_tokens.min(budget);
        }
        Ok(Self { chat, options, stats: GenerationStats::default(), seconds: 0.0, started: Instant::now() })
    }

    /// Summarizes documents (their plain text), long ones by map-reduce.
    pub fn summarize_documents(&mut self, documents: &[String]) -> Result<Vec<DocumentSummary>, MapReduceError<ChatError>> {
        let chunk = self.options.chunk_tokens;
        mapreduce::summarize_documents(self, documents, chunk)
    }
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
}

impl mapreduce::Summarize for Summarizer<'_> {
    type Error = ChatError;

    fn count_tokens(&self, text: &str) -> usize {
        self.chat.count_tokens(text)
    }

    fn summarize(&mut self, tasks: &[Task]) -> Result<Vec<mapreduce::Done>, ChatError> {
        let started = Instant::now();
        let prompts = tasks
            .iter()
            .map(|t| self.chat.encode_chat(SYSTEM_PROMPT, &instruction(t)))
            .collect::<Result<Vec<_>, _>>()?;
        let run_start = self.started;
        let mut finished = vec![0f64; prompts.len()];
        let (generations, stats) = generate(
            &self.chat.model,
            &prompts,
            &self.chat.stop_ids,
            &self.options.sampling,
            self.options.batch,
            |r, _| finished[r] = run_start.elapsed().as_secs_f64(),
        )
        .map_err(|e| ChatError::Inference(e.to_string()))?;
        add_stats(&mut self.stats, &stats);
        let out = prompts
            .iter()
            .zip(generations)
            .zip(finished)
            .map(|((p, g), finished_at)| {
                Ok(mapreduce::Done {
                    summary: self.chat.decode(&g.tokens)?.trim().to_string(),
                    prompt_tokens: p.len(),
                    output_tokens: g.tokens.len(),
                    finished_at,
                })
            })
            .collect::<Result<Vec<_>, ChatError>>()?;
        self.seconds += started.elapsed().as_secs_f64();
        Ok(out)
    }
}
