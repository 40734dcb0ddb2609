//! warpfold's engine: everything between "here are some texts" and "run this bin", with no GPU code,
//! no web code and no Tauri in it, so the desktop app, the CLI and the HTTP server share one core.
//!
//! - [`packer`]: First-Fit-Decreasing with alignment, O(n log n).
//! - [`tape`]: lays a planned bin out as one flat tape with cu_seqlens and restarting positions.
//! - [`scheduler`]: the [`Engine`]: why it is shaped as it is, its start-up and submission.
//! - [`config`], [`error`]: its settings (batching, window, lanes) and what a sequence gets instead
//!   of a vector.
//! - [`queue`]: the two-lane submission queue, tickets and cancellation.
//! - [`dispatcher`]: the thread that packs what is queued into bins, one ahead of the devices.
//! - [`multi`]: one dispatcher over several devices: cost-balanced queues, stealing, failover.
//! - [`stats`]: the counters bins leave behind, and snapshots of them.
//! - [`probe`]: the VRAM probe's search for a bin's capacity and its throughput knee.
//! - [`tokenize`], [`embed`]: texts to ids and to embeddings, a bad text costing only itself;
//!   [`wordpiece`]: BERT's tokenization of ASCII text without the library's per-character bookkeeping.

pub mod config;
pub mod cost;
pub mod dispatcher;
pub mod embed;
pub mod error;
pub mod multi;
pub mod packer;
pub mod probe;
pub mod queue;
pub mod scheduler;
pub mod stats;
pub mod tape;
pub mod tokenize;
pub mod wordpiece;

pub use cost::CostModel;
pub use scheduler::{Batching, Engine, EngineError, Lane, SchedulerConfig, Window};
pub use stats::{DeviceSnapshot, StatsSnapshot};
pub use warpfold_backend as backend;
