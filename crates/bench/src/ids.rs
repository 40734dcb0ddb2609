//! `warpfold corpus`: the benchmark corpora as token ids, so every system scores the same ids.
//!
//! The decoders benchmarked on the GPU carry random weights and no tokenizer, so the ids come from
//! the default model's WordPiece tokenizer (30,522 ids, valid in every decoder vocabulary used).
//! Lengths in tokens follow the word counts of the source project's corpora (stress: 45–130 or
//! 1,820–2,000 words, alternating; production: 50–1,900 words).

use std::io::Write;
use std::process::ExitCode;

use crate::corpus::{generate, CorpusKind};
use anyhow::Result;
use clap::Args;
use warpfold_engine::tokenize::TextEncoder;

use crate::embed::CorpusArg;
use crate::harness::Harness;

#[derive(Args, Debug)]
pub struct CorpusArgs {
    #[arg(long, value_enum, default_value_t = CorpusArg::Stress)]
    pub kind: CorpusArg,
    #[arg(long, default_value_t = 256)]
    pub documents: usize,
    #[arg(long, default_value_t = 20240601)]
    pub seed: u64,
    /// Append one document of this many tokens (0: none), as in the memory-cap benchmark.
    #[arg(long, default_value_t = 0)]
    pub long_document_tokens: usize,
}

pub fn run(harness: &Harness, args: &CorpusArgs) -> Result<ExitCode> {
    let dir = harness.model_dir()?;
    let encoder = TextEncoder::from_file(&dir.tokenizer, usize::MAX)?;
    let kinds = match args.kind {
        CorpusArg::Stress => vec![CorpusKind::Stress],
        CorpusArg::Production => vec![CorpusKind::Production],
        CorpusArg::Both => vec![CorpusKind::Stress, CorpusKind::Production],
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for kind in kinds {
        for text in generate(kind, args.documents, args.seed) {
            let ids = encoder.encode(&text)?;
            writeln!(out, "{}", serde_json::json!({ "ids": ids }))?;
        }
    }
    if args.long_document_tokens > 0 {
        let ids: Vec<u32> = (0..args.long_document_tokens).map(|i| 1000 + (i * 7919 % 29000) as u32).collect();
        writeln!(out, "{}", serde_json::json!({ "ids": ids }))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
