//! `warpfold embed`: JSON lines in, JSON lines out, in input order.
//!
//! Input is read in blocks so memory stays flat on any stdin; each block is tokenized and queued while
//! earlier blocks are still being embedded, and answers are written as soon as they are complete, in
//! order. A line that cannot be embedded (not JSON, no "text", invalid UTF-8, empty, too long) gets an
//! `{"error": ..., "line": N}` line of its own and the exit status 1; every other line is answered.

use std::collections::VecDeque;
use std::io::{BufRead, BufWriter, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use warpfold_engine::embed::PendingEmbeds;
use warpfold_engine::Lane;

use crate::{setup, GlobalOptions};

#[derive(Args, Debug)]
pub struct EmbedArgs {
    /// Also write the end-of-run report as one JSON object on stderr.
    #[arg(long)]
    pub json: bool,
}

/// Lines tokenized and queued per block.
const BLOCK_LINES: usize = 512;
/// Blocks queued ahead of the writer: enough to keep the backend fed, bounded so memory stays flat.
const BLOCKS_IN_FLIGHT: usize = 4;

enum Line {
    Text(String),
    Bad(String),
}

fn parse_line(raw: &[u8]) -> Line {
    let Ok(text) = std::str::from_utf8(raw) else {
        return Line::Bad("the line is not valid UTF-8".into());
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => match map.get("text") {
            Some(serde_json::Value::String(s)) => Line::Text(s.clone()),
            Some(_) => Line::Bad("\"text\" must be a string".into()),
            None => Line::Bad("the object has no \"text\" field".into()),
        },
        Ok(_) => Line::Bad("expected a JSON object like {\"text\": \"...\"}".into()),
        Err(e) => Line::Bad(format!("invalid JSON: {e}")),
    }
}

struct Block {
    first_line: usize,
    lines: Vec<Option<String>>,
    pending: PendingEmbeds,
}

pub fn run(global: &GlobalOptions, args: &EmbedArgs) -> Result<ExitCode> {
    let embedder = setup::embedder(global)?;
    let started = Instant::now();
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new_spinner();
        bar.set_style(ProgressStyle::with_template("{spinner} {pos} sequences embedded ({per_sec}) [{elapsed}] {msg}")?);
        bar
    } else {
        ProgressBar::hidden()
    };
    // The bar follows the engine's own counter: answers are written in input order, but FFD spreads
    // a block's texts over many bins, so written lines alone would make the bar stall and jump.
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let embedder = &embedder;
        let bar = &bar;
        scope.spawn(move || {
            // Wakes every 100 ms to redraw, and at once when the run ends (the sender is dropped).
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(Duration::from_millis(100)) {
                let s = embedder.engine.stats();
                bar.set_position(s.sequences);
                bar.set_message(format!("{} bins, {} tokens", s.bins, s.real_tokens));
            }
        });
        let result = embed_all(embedder);
        drop(stop);
        result
    })
    .and_then(|(ok, failed, tokens)| report(&embedder, &bar, args, ok, failed, tokens, started))
}

/// Streams stdin through the engine and writes the answers; returns (embedded, failed, tokens).
fn embed_all(embedder: &warpfold_engine::embed::Embedder) -> Result<(usize, usize, usize)> {
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::new(std::io::stdout().lock());

    let mut raw_lines = stdin.split(b'\n');
    let mut in_flight: VecDeque<Block> = VecDeque::new();
    let (mut ok, mut failed, mut tokens, mut line_no) = (0usize, 0usize, 0usize, 0usize);
    let mut input_done = false;
    while !input_done || !in_flight.is_empty() {
        // Keep up to BLOCKS_IN_FLIGHT blocks queued in the engine.
        while !input_done && in_flight.len() < BLOCKS_IN_FLIGHT {
            let mut lines: Vec<Line> = Vec::with_capacity(BLOCK_LINES);
            for raw in raw_lines.by_ref() {
                let mut raw = raw?;
                if raw.last() == Some(&b'\r') {
                    raw.pop();
                }
                lines.push(parse_line(&raw));
                if lines.len() == BLOCK_LINES {
                    break;
                }
            }
            if lines.len() < BLOCK_LINES {
                input_done = true;
            }
            if lines.is_empty() {
                break;
            }
            let texts: Vec<&str> = lines.iter().filter_map(|l| if let Line::Text(t) = l { Some(t.as_str()) } else { None }).collect();
            let pending = embedder.submit_texts(Lane::Bulk, &texts);
            tokens += pending.tokens.iter().sum::<usize>();
            let first_line = line_no + 1;
            line_no += lines.len();
            let lines = lines.into_iter().map(|l| if let Line::Bad(why) = l { Some(why) } else { None }).collect();
            in_flight.push_back(Block { first_line, lines, pending });
        }
        let Some(block) = in_flight.pop_front() else { break };
        let mut results = block.pending.wait().into_iter();
        for (i, bad) in block.lines.into_iter().enumerate() {
            let line = block.first_line + i;
            let value = match bad.map(Err).unwrap_or_else(|| results.next().expect("a result per text").map_err(|e| e.to_string())) {
                Ok(embedding) => {
                    ok += 1;
                    serde_json::json!({ "embedding": embedding })
                }
                Err(error) => {
                    failed += 1;
                    tracing::warn!(line, %error, "input not embedded");
                    serde_json::json!({ "error": error, "line": line })
                }
            };
            serde_json::to_writer(&mut out, &value)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
    }
    Ok((ok, failed, tokens))
}

fn report(
    embedder: &warpfold_engine::embed::Embedder,
    bar: &ProgressBar,
    args: &EmbedArgs,
    ok: usize,
    failed: usize,
    tokens: usize,
    started: Instant,
) -> Result<ExitCode> {
    bar.finish_and_clear();
    let stats = embedder.engine.stats();
    let seconds = started.elapsed().as_secs_f64();
    let pad = stats.computed_tokens.saturating_sub(stats.real_tokens);
    let report = serde_json::json!({
        "texts": ok + failed, "embedded": ok, "failed": failed,
        "tokens": tokens, "pad_tokens": pad, "bins": stats.bins,
        "padding_percent": 100.0 * pad as f64 / stats.computed_tokens.max(1) as f64,
        "seconds": seconds, "tokens_per_second": tokens as f64 / seconds.max(1e-9),
        "model": embedder.engine.info().model, "device": embedder.engine.info().device,
    });
    if args.json {
        eprintln!("{report}");
    } else {
        eprintln!(
            "warpfold embed: {ok} of {} texts embedded ({failed} failed), {tokens} tokens in {} bins, {:.1}% {}, {:.2} s, {:.0} tokens/s on {}",
            ok + failed,
            stats.bins,
            report["padding_percent"].as_f64().unwrap_or(0.0),
            match embedder.engine.config().batching {
                warpfold_engine::Batching::Packed => format!("alignment tokens (slots rounded up to {})", embedder.engine.config().align),
                warpfold_engine::Batching::Padded { .. } => "padding tokens".to_string(),
            },
            seconds,
            report["tokens_per_second"].as_f64().unwrap_or(0.0),
            embedder.engine.info().device,
        );
    }
    Ok(if failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
