//! `warpfold score`: how likely a decoder finds each text (mean next-token log-likelihood), packed.
//!
//! JSON lines in, one line out per input, in order: `{"text": "..."}` (needs the model folder's
//! tokenizer.json) or `{"ids": [..]}` (token ids as they are; what the benchmarks use, so every
//! system scores the same ids). Out: `{"mean_log_likelihood", "tokens", "perplexity"}`, or
//! `{"error", "line"}` for a line that cannot be scored, and exit status 1 if any could not.
//!
//! A text longer than a bin (or than the model's positions) is never cut: it is scored in
//! consecutive windows that fit, and its mean is over every scored token of every window (the
//! first token of each window has no context in it and is not scored; `tokens` counts them all).

use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use warpfold_engine::tokenize::TextEncoder;
use warpfold_engine::Lane;

use crate::{setup, GlobalOptions};

#[derive(Args, Debug)]
pub struct ScoreArgs {
    /// A Hugging Face decoder folder (Llama, Qwen2, SmolLM2): config.json and *.safetensors, and
    /// tokenizer.json for text input.
    #[arg(long = "decoder")]
    pub decoder: PathBuf,
    /// Also write a report (tokens, bins, padding, seconds) as JSON on stderr.
    #[arg(long)]
    pub json: bool,
}

const BLOCK_LINES: usize = 256;

pub fn run(global: &GlobalOptions, args: &ScoreArgs) -> Result<ExitCode> {
    let on = setup::devices(global)?;
    let engine = setup::decoder_engine(global, &args.decoder, &on, setup::scheduler_config(global))?;
    let max = engine.info().max_sequence_tokens;
    let tokenizer = args.decoder.join("tokenizer.json");
    let encoder = if tokenizer.is_file() { Some(TextEncoder::from_file(&tokenizer, max)?) } else { None };
    // The longest window one sequence may be: the model's positions and the largest bin, whichever
    // is less (with several devices, a smaller one only gets bins it can hold).
    let window = max.min(engine.config().bin_tokens as usize).max(2);
    let started = Instant::now();
    let stdin = std::io::stdin();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut lines = stdin.lock().split(b'\n').enumerate().peekable();
    let mut failed = 0usize;
    while lines.peek().is_some() {
        // One block: parse, queue the good lines, answer every line in order.
        // Each line: the range of windows it was queued as, and its token count.
        let mut answers: Vec<Result<(std::ops::Range<usize>, usize), String>> = Vec::new();
        let mut ids = Vec::new();
        for (first_line, line) in lines.by_ref().take(BLOCK_LINES) {
            let line = line.context("reading stdin")?;
            let parsed = parse(&line, encoder.as_ref());
            answers.push(parsed.map(|seq| {
                let start = ids.len();
                ids.extend(seq.chunks(window).map(<[u32]>::to_vec));
                (start..ids.len(), seq.len())
            }));
            let _ = first_line;
        }
        let results = engine.submit(Lane::Bulk, ids).wait();
        for (i, answer) in answers.into_iter().enumerate() {
            let combined = answer.and_then(|(windows, tokens)| {
                let (mut sum, mut scored) = (0f64, 0f64);
                for r in &results[windows] {
                    let v = r.as_ref().map_err(|e| e.to_string())?;
                    sum += f64::from(v[0]) * f64::from(v[1]);
                    scored += f64::from(v[1]);
                }
                Ok((if scored > 0.0 { sum / scored } else { 0.0 }, tokens))
            });
            let line = match combined {
                Ok((mean, tokens)) => serde_json::json!({
                    "mean_log_likelihood": mean,
                    "tokens": tokens,
                    "perplexity": (-mean).exp(),
                }),
                Err(error) => {
                    failed += 1;
                    serde_json::json!({"error": error, "line": i + 1})
                }
            };
            writeln!(out, "{line}")?;
        }
    }
    out.flush()?;
    let stats = engine.shutdown();
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        let device_time = stats.device_time();
        eprintln!(
            "{}",
            serde_json::json!({
                "sequences": stats.sequences, "real_tokens": stats.real_tokens,
                "pad_tokens": stats.computed_tokens - stats.real_tokens, "bins": stats.bins,
                "seconds": seconds, "tokens_per_second": stats.real_tokens as f64 / seconds,
                "backend_busy_seconds": stats.backend_busy_seconds, "oom_splits": stats.oom_splits,
                "capacity_limit": stats.capacity_limit, "failed": failed,
                "device_busy_seconds": device_time.map(|t| t.0),
                "device_idle_seconds": device_time.map(|t| t.1),
                "device_idle_percent": device_time.map(|t| t.2),
            })
        );
    }
    Ok(if failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn parse(line: &[u8], encoder: Option<&TextEncoder>) -> Result<Vec<u32>, String> {
    let value: serde_json::Value = serde_json::from_slice(line).map_err(|e| format!("invalid JSON: {e}"))?;
    if let Some(ids) = value.get("ids") {
        let ids: Vec<u32> = serde_json::from_value(ids.clone()).map_err(|_| "\"ids\" must be a list of token ids".to_string())?;
        if ids.is_empty() {
            return Err("\"ids\" is empty".into());
        }
        return Ok(ids);
    }
    let Some(text) = value.get("text").and_then(|t| t.as_str()) else {
        return Err("expected {\"text\": \"...\"} or {\"ids\": [...]}".into());
    };
    let encoder = encoder.ok_or("text input needs tokenizer.json in the model folder; pass {\"ids\": [...]} instead")?;
    encoder.encode(text).map_err(|e| e.to_string())
}
