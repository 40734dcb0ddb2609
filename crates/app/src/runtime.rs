//! The app's engine, started by `warpfold_runtime` like every other front's: this module only
//! turns what the runtime started into the app's device view.

use warpfold_runtime::{DeviceStart, StartedEmbedder};

use crate::DeviceView;

pub use warpfold_runtime::{
    chat_model, default_model, embedding_model_dir, embedding_model_for_index, planned_chat_model, start_embedder, EngineOptions,
    RuntimeError,
};

/// The model the index at `db` was built with, when it exists and holds one (see
/// [`embedding_model_for_index`]); an index that cannot be read says why when it is opened.
pub fn recorded_model(db: &std::path::Path) -> Option<String> {
    if !db.exists() {
        return None;
    }
    let store = warpfold_index::store::Store::open_read_only(db).ok()?;
    store.model().ok().flatten().map(|(name, _)| name)
}

/// The device view of an engine as it started: the first device's name, capacity and probe, and
/// every device the engine runs on, and which attention its model runs through.
pub fn device_view(devices: &[DeviceStart], attention: String) -> DeviceView {
    let first = devices.first().cloned().unwrap_or(DeviceStart {
        name: "cpu".into(),
        kind: "cpu".into(),
        bin_tokens: warpfold_runtime::CPU_BIN_TOKENS,
        probe: None,
        memory_total_bytes: None,
    });
    DeviceView {
        name: first.name,
        kind: first.kind,
        bin_tokens: first.bin_tokens,
        probe: first.probe,
        memory_total_bytes: first.memory_total_bytes,
        memory_used_bytes: None,
        devices: devices.to_vec(),
        attention,
    }
}

/// The parts of a started embedder an [`AppConfig`](crate::AppConfig) takes: the model's name,
/// the device view and the memory reader (the engine itself goes to [`App::start`](crate::App::start)).
pub fn app_parts(started: &mut StartedEmbedder) -> (String, DeviceView, Option<warpfold_runtime::MemoryReader>) {
    let attention = started.embedder.engine.info().attention.clone();
    (started.model.clone(), device_view(&started.devices, attention), started.memory.take())
}

impl From<warpfold_runtime::RuntimeError> for crate::AppError {
    fn from(e: warpfold_runtime::RuntimeError) -> Self {
        crate::AppError::Engine(e.to_string())
    }
}
