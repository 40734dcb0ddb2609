//! warpfold's engine: everything between "here are some texts" and "run this bin", with no GPU code,
//! no web code and no Tauri in it, so the desktop app, the CLI and the HTTP server share one core.
//!
//! - [`packer`]: First-Fit-Decreasing with alignment, O(n log n).
//! - [`tape`]: lays a planned bin out as one flat tape with cu_seqlens and restarting positions.
//! - [`scheduler`]: the two-lane submission queue, the dispatcher thread and the backend thread.
//! - [`multi`]: one dispatcher over several devices: cost-balanced queues, stealing, failover.
//! - [`tokenize`], [`embed`]: texts to ids and to embeddings, a bad text costing only itself.
//! - [`models`]: the pinned default models, fetched through pip and checked.
//! - [`corpus`]: the seeded benchmark corpora.

pub mod corpus;
pub mod embed;
pub mod models;
pub mod multi;
pub mod packer;
pub mod probe;
pub mod scheduler;
pub mod tape;
pub mod tokenize;

pub use multi::{CostModel, DeviceSnapshot};
pub use scheduler::{Batching, Engine, EngineError, Lane, SchedulerConfig, StatsSnapshot, Window};
pub use warpfold_backend as backend;
