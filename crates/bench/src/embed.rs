//! `warpfold bench`: packed against padded, in one process, on the same token ids.
//!
//! Why one process and the same ids: the only thing that differs between the runs is how sequences
//! are grouped into bins, so the ratio measures packing and nothing else (same model, same kernels,
//! same threads). The optional peer run (sentence-transformers, PyTorch CPU) embeds the same chunk
//! texts from a script in bench/peer/, started from here so all figures come from one run on one machine.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use crate::corpus::{self, CorpusKind};
use crate::report::{compare, pct, peak_rss_mib, reset_peak_rss, save_report, RunHeader};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use warpfold_engine::packer::{aligned_len, pack};
use warpfold_engine::tokenize::TextEncoder;
use warpfold_engine::{Batching, Engine, EngineError, Lane, SchedulerConfig, StatsSnapshot};
use warpfold_runtime::CpuPrecision;

use crate::harness::Harness;

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CorpusArg {
    Stress,
    Production,
    Both,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Which corpus to run.
    #[arg(long, value_enum, default_value_t = CorpusArg::Both)]
    pub corpus: CorpusArg,
    /// Documents per corpus (stress alternates short and long).
    #[arg(long, default_value_t = 64)]
    pub documents: usize,
    #[arg(long, default_value_t = 20240601)]
    pub seed: u64,
    /// Also run sentence-transformers on the same texts (see bench/peer/setup.sh).
    #[arg(long)]
    pub peer: bool,
    /// Python with sentence-transformers for --peer.
    #[arg(long, env = "WARPFOLD_PEER_PYTHON", default_value = "bench/.venv-peer/bin/python")]
    pub peer_python: PathBuf,
    /// Batch sizes the peer runs at, one run each (it sorts texts by length at every size): its
    /// default 32, and a GPU-sized batch such as 256 for the careful user's baseline.
    #[arg(long, value_delimiter = ',', default_value = "32")]
    pub peer_batch: Vec<usize>,
    /// Precisions the peer runs in, at each batch size: f32, and bf16 (the model cast to bfloat16,
    /// as a user would against `--cpu-precision bf16`). The ratio is against its fastest run.
    #[arg(long, value_delimiter = ',', default_value = "f32", value_parser = peer_precision)]
    pub peer_precision: Vec<CpuPrecision>,
    /// With --peer: run warpfold end to end and the peer this many times, taking turns, and
    /// compare their median runs. On a shared machine whose speed drifts during a run (a cloud
    /// VM), one run of each can differ by a third either way; turns and medians keep the drift
    /// out of the ratio, and every round's own ratio is reported too.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub rounds: u32,
    /// Sequences in the packer throughput test.
    #[arg(long, default_value_t = 1_000_000)]
    pub packer_sequences: usize,
    /// Print the JSON report on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run packed on the first device of --device alone, then on all of them, on the same ids in
    /// the same process (e.g. --device cuda:0,cuda:1): the scaling over devices (crates/bench/src/devices.rs).
    #[arg(long)]
    pub devices_compare: bool,
    /// With --devices-compare: run this decoder folder instead of the embedding model (the corpus's
    /// token ids scored in windows, as `warpfold score` does).
    #[arg(long, requires = "devices_compare")]
    pub decoder: Option<PathBuf>,
}

/// A precision the peer can run in: f32 or bf16 (torch has no bf16x3 for it to match).
fn peer_precision(text: &str) -> std::result::Result<CpuPrecision, String> {
    match text.parse()? {
        CpuPrecision::Bf16x3 | CpuPrecision::Auto => {
            Err("the peer runs in f32 or bf16; bf16x3 and auto are warpfold's own (compare them with the f32 peer)".into())
        }
        precision => Ok(precision),
    }
}

#[derive(Serialize, Debug, Clone)]
struct SystemRun {
    system: String,
    sequences: usize,
    real_tokens: u64,
    pad_tokens: u64,
    padding_percent: f64,
    bins: u64,
    seconds: f64,
    tokens_per_second: f64,
    peak_rss_mib: Option<f64>,
    /// Largest |difference| of any embedding component against warpfold packed.
    max_abs_diff_vs_packed: Option<f64>,
    /// Smallest cosine similarity of any embedding against warpfold packed.
    min_cosine_vs_packed: Option<f64>,
    /// On CUDA, the GPU's own clock: idle between bins as a share of the timed run's device time.
    device_idle_percent: Option<f64>,
}

#[derive(Serialize, Debug)]
struct CorpusReport {
    corpus: &'static str,
    documents: usize,
    chunks: usize,
    real_tokens: usize,
    tokenize_seconds: f64,
    /// The chunks' texts to ids on all cores, tokens/s: the encoder as warpfold builds it (BERT's
    /// ASCII path where it applies), and the tokenizers library doing all of it.
    tokenizer_tokens_per_second: f64,
    library_tokenizer_tokens_per_second: f64,
    runs: Vec<SystemRun>,
    packed_over_padded: f64,
    /// Median end-to-end run over the peer's median run at its fastest batch size.
    packed_end_to_end_over_peer: Option<f64>,
    /// The same ratio in each round (`--rounds`), in order.
    round_ratios: Vec<f64>,
}

#[derive(Serialize, Debug)]
struct PackerReport {
    sequences: usize,
    capacity: u32,
    align: u32,
    one_call_seconds: f64,
    one_call_sequences_per_second: f64,
    bins: usize,
    windows_of_16_sequences_per_second: f64,
}

#[derive(Serialize, Debug)]
struct Report {
    #[serde(flatten)]
    run: RunHeader,
    model: String,
    /// How the model's bins run (attention kernel; on the CPU, the fused layers' matmul).
    kernels: String,
    bin_tokens: u32,
    align: u32,
    padded_batch_size: usize,
    corpora: Vec<CorpusReport>,
    packer: PackerReport,
}

pub fn run(harness: &Harness, args: &BenchArgs) -> Result<ExitCode> {
    if args.devices_compare {
        return crate::devices::run(harness, args);
    }
    let dir = harness.model_dir()?;
    let backend = harness.load_encoder(&dir)?;
    let info = warpfold_backend::Backend::info(&backend);
    let kernels = backend.kernels();
    drop(backend);
    // Every run of the bench packs bins of one size, fixed here once.
    let harness = &harness.with_bin_tokens(bench_bin_tokens(harness, &dir)?);
    let encoder = TextEncoder::from_file(&dir.tokenizer, info.max_sequence_tokens)?;
    let library = TextEncoder::from_file(&dir.tokenizer, info.max_sequence_tokens)?.library_only();
    let kinds = match args.corpus {
        CorpusArg::Stress => vec![CorpusKind::Stress],
        CorpusArg::Production => vec![CorpusKind::Production],
        CorpusArg::Both => vec![CorpusKind::Stress, CorpusKind::Production],
    };
    let mut corpora = Vec::new();
    for kind in kinds {
        corpora.push(run_corpus(harness, args, &dir, (&encoder, &library), kind)?);
    }
    let packer = packer_throughput(args.packer_sequences, harness.bin_tokens(), harness.engine.align, args.seed);
    let report = Report {
        run: RunHeader::now(),
        model: info.model.clone(),
        kernels,
        bin_tokens: harness.bin_tokens(),
        align: harness.engine.align,
        padded_batch_size: harness.padded_batch_size,
        corpora,
        packer,
    };
    let json = save_report(&report, args.out.as_deref())?;
    if args.json {
        println!("{json}");
    } else {
        print_table(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// The bin size for every run: `--bin-tokens` when given; on a GPU otherwise what the engine's
/// start-up finds there (the VRAM probe's memory search and throughput knee, run once, as
/// `warpfold embed` would); on the CPU its default.
fn bench_bin_tokens(harness: &Harness, dir: &warpfold_runtime::models::ModelDir) -> Result<u32> {
    if harness.engine.bin_tokens.is_some() || !harness.engine.device.is_cuda() {
        return Ok(harness.bin_tokens());
    }
    let started = harness.start_embedder(dir)?;
    let probed = started.devices.iter().map(|d| d.bin_tokens).min().context("the engine started on no device")?;
    eprintln!("bench: bins of {probed} tokens, as the probe chose (--bin-tokens sets another size)");
    Ok(probed)
}

/// Chunks every document to the model's limit (documents split over all cores, order kept) and
/// tokenizes the chunks.
pub(crate) fn prepare(encoder: &TextEncoder, docs: &[String]) -> Result<(Vec<String>, Vec<Vec<u32>>)> {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let per_thread = docs.len().div_ceil(threads).max(1);
    let parts: Vec<Result<Vec<String>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = docs
            .chunks(per_thread)
            .map(|part| {
                scope.spawn(move || -> Result<Vec<String>> {
                    let mut texts = Vec::new();
                    for doc in part {
                        for c in encoder.chunk(doc)? {
                            texts.push(doc[c.start..c.end].to_string());
                        }
                    }
                    Ok(texts)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("chunking does not panic")).collect()
    });
    let mut texts = Vec::new();
    for part in parts {
        texts.extend(part?);
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids = encoder.encode_batch(&refs).into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok((texts, ids))
}

fn run_corpus(
    harness: &Harness,
    args: &BenchArgs,
    dir: &warpfold_runtime::models::ModelDir,
    (encoder, library): (&TextEncoder, &TextEncoder),
    kind: CorpusKind,
) -> Result<CorpusReport> {
    let docs = corpus::generate(kind, args.documents, args.seed);
    let t0 = Instant::now();
    let (texts, ids) = prepare(encoder, &docs)?;
    let tokenize_seconds = t0.elapsed().as_secs_f64();
    let real_tokens: usize = ids.iter().map(Vec::len).sum();
    eprintln!("bench {}: {} documents -> {} chunks, {} tokens", kind.name(), docs.len(), ids.len(), real_tokens);
    let tokenizer_tokens_per_second = tokenizer_rate(encoder, &texts, &ids)?;
    let library_tokenizer_tokens_per_second = tokenizer_rate(library, &texts, &ids)?;
    eprintln!(
        "  tokenizer, all cores: {tokenizer_tokens_per_second:.0} tokens/s (the tokenizers library alone: {library_tokenizer_tokens_per_second:.0})"
    );

    let packed_cfg = SchedulerConfig { batching: Batching::Packed, ..harness.scheduler_config() };
    let padded_cfg =
        SchedulerConfig { batching: Batching::Padded { batch_size: harness.padded_batch_size.max(1) }, ..harness.scheduler_config() };
    let (mut packed, packed_vecs) = run_engine(harness, dir, "warpfold packed", packed_cfg, &ids)?;
    let (mut padded, padded_vecs) =
        run_engine(harness, dir, &format!("warpfold padded (batch {})", harness.padded_batch_size), padded_cfg, &ids)?;
    let (d, c) = compare(&packed_vecs, &padded_vecs);
    padded.max_abs_diff_vs_packed = Some(d);
    padded.min_cosine_vs_packed = Some(c);
    packed.max_abs_diff_vs_packed = Some(0.0);
    let packed_over_padded = packed.tokens_per_second / padded.tokens_per_second;
    let mut runs = vec![packed.clone(), padded];
    let mut packed_end_to_end_over_peer = None;
    let mut round_ratios = Vec::new();
    if args.peer {
        let device = if harness.engine.device.is_cuda() { "cuda" } else { "cpu" };
        // Taking turns: round r runs warpfold end to end, then the peer at each batch size.
        let setups: Vec<(usize, CpuPrecision)> =
            args.peer_batch.iter().flat_map(|&b| args.peer_precision.iter().map(move |&p| (b, p))).collect();
        let (mut ends, mut peers): (Vec<SystemRun>, Vec<Vec<SystemRun>>) = (Vec::new(), vec![Vec::new(); setups.len()]);
        for _ in 0..args.rounds {
            let e2e = run_end_to_end(harness, dir, encoder, &texts, &packed_vecs)?;
            let mut best = 0f64;
            for (runs, &(batch, precision)) in peers.iter_mut().zip(&setups) {
                let p = run_peer(args, device, (batch, precision), dir, &texts, &packed_vecs, real_tokens)?;
                best = best.max(p.tokens_per_second);
                runs.push(p);
            }
            round_ratios.push(e2e.tokens_per_second / best);
            ends.push(e2e);
        }
        let e2e = median_run(ends);
        let peers: Vec<SystemRun> = peers.into_iter().map(median_run).collect();
        // Against the peer's fastest batch size: the strongest way a user would run it.
        let best = peers.iter().map(|p| p.tokens_per_second).fold(0.0, f64::max);
        packed_end_to_end_over_peer = Some(e2e.tokens_per_second / best);
        runs.push(e2e);
        runs.extend(peers);
    }
    Ok(CorpusReport {
        corpus: kind.name(),
        documents: docs.len(),
        chunks: ids.len(),
        real_tokens,
        tokenize_seconds,
        tokenizer_tokens_per_second,
        library_tokenizer_tokens_per_second,
        runs,
        packed_over_padded,
        packed_end_to_end_over_peer,
        round_ratios,
    })
}

/// Tokens/s of `encoder` turning `texts` into ids on all cores (the fastest of three runs), checked
/// to give `ids`.
fn tokenizer_rate(encoder: &TextEncoder, texts: &[String], ids: &[Vec<u32>]) -> Result<f64> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let tokens: usize = ids.iter().map(Vec::len).sum();
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t0 = Instant::now();
        let got = encoder.encode_batch(&refs);
        best = best.min(t0.elapsed().as_secs_f64());
        if got.into_iter().zip(ids).any(|(g, want)| g.as_ref() != Ok(want)) {
            bail!("the tokenizer gave other ids than those the chunks were embedded with");
        }
    }
    Ok(tokens as f64 / best)
}

/// The run of median speed (the lower middle one of an even count), named with the count.
fn median_run(mut runs: Vec<SystemRun>) -> SystemRun {
    runs.sort_by(|a, b| a.tokens_per_second.total_cmp(&b.tokens_per_second));
    let n = runs.len();
    let mut median = runs.swap_remove((n - 1) / 2);
    if n > 1 {
        median.system = format!("{} (median of {n} runs)", median.system);
    }
    median
}

fn run_engine(
    harness: &Harness,
    dir: &warpfold_runtime::models::ModelDir,
    name: &str,
    config: SchedulerConfig,
    ids: &[Vec<u32>],
) -> Result<(SystemRun, Vec<Vec<f32>>)> {
    let engine = harness.embedding_engine(dir, &harness.devices()?, config)?;
    let (results, seconds, s, peak) = timed_run(engine, ids)?;
    let vecs = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let pad = s.computed_tokens - s.real_tokens;
    eprintln!("  {name}: {:.2} s, {:.0} tokens/s, {:.1}% padding", seconds, s.real_tokens as f64 / seconds, pct(pad, s.computed_tokens));
    Ok((SystemRun::of_engine(name.into(), &s, seconds, peak), vecs))
}

/// Texts to vectors as a user of `warpfold embed` gets them, timed the way the peer is timed (its
/// `encode` tokenizes too): tokenization of each slice of texts, on all cores, overlaps the
/// device's work on the slices before it.
fn run_end_to_end(
    harness: &Harness,
    dir: &warpfold_runtime::models::ModelDir,
    encoder: &TextEncoder,
    texts: &[String],
    packed_vecs: &[Vec<f32>],
) -> Result<SystemRun> {
    const SLICE: usize = 512;
    let config = SchedulerConfig { batching: Batching::Packed, ..harness.scheduler_config() };
    let engine = harness.embedding_engine(dir, &harness.devices()?, config)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // Warm-up, as for the other runs.
    let warm = encoder.encode_batch(&refs[..refs.len().min(16)]).into_iter().collect::<Result<Vec<_>, _>>()?;
    for r in engine.embed(Lane::Bulk, warm) {
        r?;
    }
    let before = engine.stats();
    let started = Instant::now();
    let mut tickets = Vec::new();
    for slice in refs.chunks(SLICE) {
        let ids = encoder.encode_batch(slice).into_iter().collect::<Result<Vec<_>, _>>()?;
        tickets.push(engine.submit(Lane::Bulk, ids));
    }
    let mut vecs = Vec::with_capacity(texts.len());
    for t in tickets {
        for r in t.wait() {
            vecs.push(r?);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let s = engine.shutdown().since(&before);
    let (d, c) = compare(packed_vecs, &vecs);
    eprintln!("  end to end: {:.2} s, {:.0} tokens/s", seconds, s.real_tokens as f64 / seconds);
    let system = format!("warpfold packed, end to end (texts in, tokenized in slices of {SLICE} while the device runs)");
    Ok(SystemRun { max_abs_diff_vs_packed: Some(d), min_cosine_vs_packed: Some(c), ..SystemRun::of_engine(system, &s, seconds, None) })
}

impl SystemRun {
    /// A warpfold run from the engine's counters over `seconds`.
    fn of_engine(system: String, s: &StatsSnapshot, seconds: f64, peak_rss_mib: Option<f64>) -> Self {
        let pad = s.computed_tokens - s.real_tokens;
        SystemRun {
            system,
            sequences: s.sequences as usize,
            real_tokens: s.real_tokens,
            pad_tokens: pad,
            padding_percent: pct(pad, s.computed_tokens),
            bins: s.bins,
            seconds,
            tokens_per_second: s.real_tokens as f64 / seconds,
            peak_rss_mib,
            max_abs_diff_vs_packed: None,
            min_cosine_vs_packed: None,
            device_idle_percent: s.device_time().map(|t| t.2),
        }
    }
}

/// One answer per sequence, in order.
pub(crate) type Answers = Vec<Result<Vec<f32>, EngineError>>;

/// Runs `ids` through `engine` after a warm-up of 16 of them: (answers, seconds, counters of the
/// timed part, peak RSS).
pub(crate) fn timed_run(engine: Engine, ids: &[Vec<u32>]) -> Result<(Answers, f64, StatsSnapshot, Option<f64>)> {
    // Warm-up: first touches of the weights and allocator, not part of the timing.
    let warm: Vec<Vec<u32>> = ids.iter().take(16).cloned().collect();
    for r in engine.embed(Lane::Bulk, warm) {
        r?;
    }
    let before = engine.stats();
    reset_peak_rss();
    let started = Instant::now();
    let results = engine.embed(Lane::Bulk, ids.to_vec());
    let seconds = started.elapsed().as_secs_f64();
    let peak = peak_rss_mib();
    let after = engine.shutdown();
    Ok((results, seconds, after.since(&before), peak))
}

#[derive(serde::Deserialize)]
struct PeerResult {
    system: String,
    seconds: f64,
    tokens: u64,
    padded_tokens: u64,
    batches: u64,
    peak_rss_mib: f64,
    embeddings_file: PathBuf,
}

fn run_peer(
    args: &BenchArgs,
    device: &str,
    (batch, precision): (usize, CpuPrecision),
    dir: &warpfold_runtime::models::ModelDir,
    texts: &[String],
    ours: &[Vec<f32>],
    real_tokens: usize,
) -> Result<SystemRun> {
    if !args.peer_python.exists() {
        bail!("--peer needs sentence-transformers: run `bash bench/peer/setup.sh` first (looked for {})", args.peer_python.display());
    }
    let work = std::env::temp_dir().join(format!("warpfold-peer-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let texts_file = work.join("texts.json");
    std::fs::write(&texts_file, serde_json::to_vec(texts)?)?;
    let script = Path::new("bench/peer/st_embed.py");
    let out = Command::new(&args.peer_python)
        .arg(script)
        .arg("--model")
        .arg(&dir.dir)
        .arg("--texts")
        .arg(&texts_file)
        .arg("--out-dir")
        .arg(&work)
        .arg("--device")
        .arg(device)
        .arg("--batch-size")
        .arg(batch.max(1).to_string())
        .arg("--dtype")
        .arg(precision.name())
        .output()
        .with_context(|| format!("running {} {}", args.peer_python.display(), script.display()))?;
    if !out.status.success() {
        bail!("the sentence-transformers peer failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    let peer: PeerResult = serde_json::from_slice(&out.stdout).context("reading the peer's report")?;
    let bytes = std::fs::read(&peer.embeddings_file)?;
    let floats = warpfold_index::store::decode_vector(&bytes);
    let dim = ours.first().map(Vec::len).unwrap_or(1).max(1);
    let theirs: Vec<Vec<f32>> = floats.chunks(dim).map(<[f32]>::to_vec).collect();
    if theirs.len() != ours.len() {
        bail!("the peer returned {} embeddings for {} texts", theirs.len(), ours.len());
    }
    let (d, c) = compare(ours, &theirs);
    let _ = std::fs::remove_dir_all(&work);
    if peer.tokens as usize != real_tokens {
        eprintln!("  note: the peer counted {} tokens, warpfold {}", peer.tokens, real_tokens);
    }
    let pad = peer.padded_tokens.saturating_sub(peer.tokens);
    eprintln!("  {}: {:.2} s, {:.0} tokens/s", peer.system, peer.seconds, peer.tokens as f64 / peer.seconds);
    Ok(SystemRun {
        system: peer.system,
        sequences: texts.len(),
        real_tokens: peer.tokens,
        pad_tokens: pad,
        padding_percent: pct(pad, peer.padded_tokens),
        bins: peer.batches,
        seconds: peer.seconds,
        tokens_per_second: peer.tokens as f64 / peer.seconds,
        peak_rss_mib: Some(peer.peak_rss_mib),
        max_abs_diff_vs_packed: Some(d),
        min_cosine_vs_packed: Some(c),
        device_idle_percent: None,
    })
}

/// How fast the packer plans bins: one call over many sequences, and the dispatcher's usual windows
/// of 16. Lengths follow the stress corpus's chunk mix (short documents and full 256-token chunks).
fn packer_throughput(n: usize, capacity: u32, align: u32, seed: u64) -> PackerReport {
    let mut rng = corpus::Rng::new(seed);
    let lengths: Vec<u32> = (0..n)
        .map(|_| {
            let len = if rng.range(0, 1) == 0 { rng.range(60, 180) } else { rng.range(200, 256) };
            // Clamped so that any --bin-tokens works: the packer refuses items over the capacity.
            aligned_len(len as u32, align).min(capacity - capacity % align.max(1)).max(1)
        })
        .collect();
    let t = Instant::now();
    let plan = pack(&lengths, capacity).expect("lengths fit the capacity");
    let one_call = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut bins = 0;
    for window in lengths.chunks(16) {
        bins += pack(window, capacity).expect("lengths fit").num_bins();
    }
    let windows = t.elapsed().as_secs_f64();
    std::hint::black_box(bins);
    PackerReport {
        sequences: n,
        capacity,
        align,
        one_call_seconds: one_call,
        one_call_sequences_per_second: n as f64 / one_call,
        bins: plan.num_bins(),
        windows_of_16_sequences_per_second: n as f64 / windows,
    }
}

fn print_table(report: &Report) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "warpfold bench, {} on {}", report.run.date, report.run.machine);
    let _ = writeln!(out, "model {}, bins of {} tokens, align {}", report.model, report.bin_tokens, report.align);
    let _ = writeln!(out, "kernels: {}", report.kernels);
    for c in &report.corpora {
        let _ = writeln!(
            out,
            "\n{} corpus: {} documents, {} chunks, {} real tokens (tokenized in {:.2} s)",
            c.corpus, c.documents, c.chunks, c.real_tokens, c.tokenize_seconds
        );
        let _ = writeln!(
            out,
            "tokenizer on all cores: {:.0} tokens/s (the tokenizers library alone: {:.0})",
            c.tokenizer_tokens_per_second, c.library_tokenizer_tokens_per_second
        );
        let w = c.runs.iter().map(|r| r.system.len()).max().unwrap_or(6);
        let _ = writeln!(
            out,
            "{:<w$} {:>10} {:>10} {:>8} {:>7} {:>8} {:>11} {:>9} {:>9}",
            "system", "real tok", "pad tok", "pad %", "bins", "seconds", "tokens/s", "peak MiB", "min cos"
        );
        for r in &c.runs {
            let _ = writeln!(
                out,
                "{:<w$} {:>10} {:>10} {:>8.1} {:>7} {:>8.2} {:>11.0} {:>9} {:>9}",
                r.system,
                r.real_tokens,
                r.pad_tokens,
                r.padding_percent,
                r.bins,
                r.seconds,
                r.tokens_per_second,
                r.peak_rss_mib.map(|m| format!("{m:.0}")).unwrap_or_else(|| "-".into()),
                r.min_cosine_vs_packed.map(|m| format!("{m:.6}")).unwrap_or_else(|| "-".into()),
            );
        }
        let _ = writeln!(out, "packed / padded tokens/s: {:.2}x", c.packed_over_padded);
        if let Some(r) = c.packed_end_to_end_over_peer {
            let _ = writeln!(out, "packed end to end / sentence-transformers (its fastest batch size) tokens/s: {r:.2}x");
        }
        if c.round_ratios.len() > 1 {
            let each: Vec<String> = c.round_ratios.iter().map(|r| format!("{r:.2}x")).collect();
            let _ = writeln!(out, "  each round, in turn: {}", each.join(", "));
        }
    }
    let p = &report.packer;
    let _ = writeln!(
        out,
        "\npacker: {} sequences into {} bins of {} in {:.3} s = {:.2}M sequences/s (one call); {:.2}M sequences/s in windows of 16",
        p.sequences,
        p.bins,
        p.capacity,
        p.one_call_seconds,
        p.one_call_sequences_per_second / 1e6,
        p.windows_of_16_sequences_per_second / 1e6
    );
}
