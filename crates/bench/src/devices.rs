//! `warpfold bench --devices-compare`: the first device of `--device` alone, then all of them, in one
//! process, on the same token ids.
//!
//! Why one process and the same ids: the only thing that differs between the two runs is how many
//! devices share the bins, so the ratio measures the spreading and nothing else. The several-device
//! run's answers are checked against the one-device run's, sequence by sequence, and its per-device
//! counters against the number of sequences: with `WARPFOLD_FAIL_DEVICE` set (a device made to fail
//! mid-run), that is the check that no bin was lost or run twice.
//!
//! With `--decoder DIR` the decoder scores the corpus's documents (ids from the default model's
//! tokenizer, as `warpfold corpus` writes them) in windows of at most its positions and the bin, as
//! `warpfold score` does; otherwise the embedding model embeds the corpus's chunks, as `bench` does.

use std::process::ExitCode;

use crate::corpus::{self, CorpusKind};
use anyhow::{ensure, Result};
use candle_core::Device;
use serde::Serialize;
use warpfold_engine::tokenize::TextEncoder;
use warpfold_engine::{Batching, DeviceSnapshot, Engine, EngineError, SchedulerConfig};

use crate::report::{compare, pct, save_report, RunHeader};

use crate::embed::{prepare, timed_run, Answers, BenchArgs, CorpusArg};
use crate::harness::Harness;

#[derive(Serialize, Debug)]
struct DevicesRun {
    devices: Vec<String>,
    sequences: u64,
    real_tokens: u64,
    padding_percent: f64,
    bins: u64,
    seconds: f64,
    tokens_per_second: f64,
    failed_bins: u64,
    per_device: Vec<DeviceSnapshot>,
}

/// The several-device run against the one-device run.
#[derive(Serialize, Debug)]
struct Check {
    sequences: usize,
    answered_ok: usize,
    /// Answered with an error.
    errors: usize,
    /// Never answered (the engine shut down without an answer for them).
    lost: usize,
    /// Sequences the devices ran to the end beyond one per answered sequence.
    ran_twice: i64,
    devices_taken_out: Vec<String>,
    device_failures: u64,
    max_abs_diff_vs_one_device: f64,
    /// Embeddings only.
    min_cosine_vs_one_device: Option<f64>,
    ok: bool,
}

#[derive(Serialize, Debug)]
struct CorpusScaling {
    corpus: &'static str,
    documents: usize,
    sequences: usize,
    real_tokens: usize,
    one_device: DevicesRun,
    all_devices: DevicesRun,
    /// all_devices tokens/s over one_device tokens/s.
    scaling: f64,
    check: Check,
}

#[derive(Serialize, Debug)]
struct Report {
    #[serde(flatten)]
    run: RunHeader,
    model: String,
    devices: usize,
    fail_device: Option<String>,
    corpora: Vec<CorpusScaling>,
}

pub fn run(harness: &Harness, args: &BenchArgs) -> Result<ExitCode> {
    let on = harness.devices()?;
    ensure!(on.len() >= 2, "--devices-compare needs several devices, e.g. --device cuda:0,cuda:1 or --device cuda:all");
    let dir = harness.model_dir()?;
    let config = SchedulerConfig { batching: Batching::Packed, ..harness.scheduler_config() };
    let start = |on: &[Device]| -> Result<Engine> {
        match &args.decoder {
            Some(decoder) => harness.decoder_engine(decoder, on, config.clone()),
            None => harness.embedding_engine(&dir, on, config.clone()),
        }
    };
    let kinds = match args.corpus {
        CorpusArg::Stress => vec![CorpusKind::Stress],
        CorpusArg::Production => vec![CorpusKind::Production],
        CorpusArg::Both => vec![CorpusKind::Stress, CorpusKind::Production],
    };
    let mut model = String::new();
    let mut corpora = Vec::new();
    let mut all_ok = true;
    for kind in kinds {
        let docs = corpus::generate(kind, args.documents, args.seed);
        // The one-device engine first: its bin decides the decoder's windows, used by both runs.
        let one = start(&on[..1])?;
        model = one.info().model.clone();
        let ids = match &args.decoder {
            Some(_) => {
                let encoder = TextEncoder::from_file(&dir.tokenizer, usize::MAX)?;
                let window = one.info().max_sequence_tokens.min(one.config().bin_tokens as usize).max(2);
                let mut ids = Vec::new();
                for doc in &docs {
                    ids.extend(encoder.encode(doc)?.chunks(window).map(<[u32]>::to_vec));
                }
                ids
            }
            None => {
                let encoder = TextEncoder::from_file(&dir.tokenizer, one.info().max_sequence_tokens)?;
                prepare(&encoder, &docs)?.1
            }
        };
        let real_tokens: usize = ids.iter().map(Vec::len).sum();
        eprintln!(
            "bench {} on {} devices: {} documents -> {} sequences, {} tokens",
            kind.name(),
            on.len(),
            docs.len(),
            ids.len(),
            real_tokens
        );
        let (single, one_run) = measure(one, &ids, "1 device")?;
        let (multi, all_run) = measure(start(&on)?, &ids, &format!("{} devices", on.len()))?;
        let check = check(&single, &multi, &all_run, args.decoder.is_none());
        eprintln!(
            "  scaling {:.2}x; check: {} ok, {} errors, {} lost, {} ran twice, taken out {:?}: {}",
            all_run.tokens_per_second / one_run.tokens_per_second,
            check.answered_ok,
            check.errors,
            check.lost,
            check.ran_twice,
            check.devices_taken_out,
            if check.ok { "passed" } else { "FAILED" }
        );
        all_ok &= check.ok;
        corpora.push(CorpusScaling {
            corpus: kind.name(),
            documents: docs.len(),
            sequences: ids.len(),
            real_tokens,
            scaling: all_run.tokens_per_second / one_run.tokens_per_second,
            one_device: one_run,
            all_devices: all_run,
            check,
        });
    }
    let report = Report { model, devices: on.len(), fail_device: harness.fail_device.clone(), run: RunHeader::now(), corpora };
    let json = save_report(&report, args.out.as_deref())?;
    if args.json {
        println!("{json}");
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn measure(engine: Engine, ids: &[Vec<u32>], name: &str) -> Result<(Answers, DevicesRun)> {
    let names: Vec<String> = engine.info().device.split(',').map(str::to_string).collect();
    let (results, seconds, s, _) = timed_run(engine, ids)?;
    let pad = s.computed_tokens - s.real_tokens;
    eprintln!("  {name} ({}): {:.2} s, {:.0} tokens/s", names.join(","), seconds, s.real_tokens as f64 / seconds);
    for d in &s.devices {
        eprintln!(
            "    {}: {} bins, {} tokens, busy {:.2} s, {} failures, {} stolen{}",
            d.device,
            d.bins,
            d.real_tokens,
            d.busy_seconds,
            d.failures,
            d.stolen,
            if d.alive { "" } else { ", taken out" }
        );
    }
    let run = DevicesRun {
        devices: names,
        sequences: s.sequences,
        real_tokens: s.real_tokens,
        padding_percent: pct(pad, s.computed_tokens),
        bins: s.bins,
        seconds,
        tokens_per_second: s.real_tokens as f64 / seconds,
        failed_bins: s.failed_bins,
        per_device: s.devices,
    };
    Ok((results, run))
}

fn check(single: &Answers, multi: &Answers, run: &DevicesRun, embeddings: bool) -> Check {
    let lost = multi.iter().filter(|r| matches!(r, Err(EngineError::ShutDown))).count();
    let errors = multi.iter().filter(|r| r.is_err()).count() - lost;
    let answered_ok = multi.iter().filter(|r| r.is_ok()).count();
    let ran: u64 = run.per_device.iter().map(|d| d.sequences).sum();
    // Compare where both runs answered; the one-device run must have answered everything.
    let (a, b): (Vec<Vec<f32>>, Vec<Vec<f32>>) =
        single.iter().zip(multi).filter_map(|(x, y)| Some((x.as_ref().ok()?.clone(), y.as_ref().ok()?.clone()))).unzip();
    let (diff, cosine) = compare(&a, &b);
    let all_single = single.iter().all(Result::is_ok);
    // Embeddings: unit vectors, same model on another device and in other bins. Decoder: a mean
    // log-likelihood in bf16 (the tolerance of the transformers comparison).
    let close = if embeddings { cosine > 0.999 } else { diff <= 0.05 };
    let ran_twice = ran as i64 - answered_ok as i64;
    Check {
        sequences: multi.len(),
        answered_ok,
        errors,
        lost,
        ran_twice,
        devices_taken_out: run.per_device.iter().filter(|d| !d.alive).map(|d| d.device.clone()).collect(),
        device_failures: run.per_device.iter().map(|d| d.failures).sum(),
        max_abs_diff_vs_one_device: diff,
        min_cosine_vs_one_device: embeddings.then_some(cosine),
        ok: all_single && answered_ok == multi.len() && lost == 0 && ran_twice == 0 && close,
    }
}
