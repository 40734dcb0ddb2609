//! What the UI sees: the state snapshot and the live events (docs/api.md is the contract).

use serde::Serialize;
use warpfold_engine::stats::{BinRecord, StatsSnapshot};

/// A file's place in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueState {
    Waiting,
    Extracting,
    Embedding,
    Done,
    Failed,
    NoText,
    /// Deliberately not read: a symbolic link out of the chosen folder (the reason is its error).
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileState {
    pub path: String,
    pub state: QueueState,
    pub error: Option<String>,
    pub chunks: Option<u64>,
    pub pages: Option<u32>,
    pub updated_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueueCounts {
    pub waiting: u64,
    pub extracting: u64,
    pub embedding: u64,
    pub done: u64,
    pub failed: u64,
    pub no_text: u64,
    pub skipped: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueView {
    pub counts: QueueCounts,
    pub files: Vec<FileState>,
}

/// One bin as a bar: its sequences, alignment padding and free space.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BinView {
    pub id: u64,
    pub at_ms: u64,
    pub capacity: u32,
    pub sequences: Vec<u32>,
    pub aligned: Vec<u32>,
    pub padding: u64,
    pub free: u64,
    pub fill: f64,
}

impl From<&BinRecord> for BinView {
    fn from(r: &BinRecord) -> Self {
        let real: u64 = r.sequences.iter().map(|&n| n as u64).sum();
        let used: u64 = r.aligned.iter().map(|&n| n as u64).sum();
        BinView {
            id: r.id,
            at_ms: r.at_ms,
            capacity: r.capacity,
            sequences: r.sequences.clone(),
            aligned: r.aligned.clone(),
            padding: used - real,
            free: (r.capacity as u64).saturating_sub(used),
            fill: if r.capacity > 0 { used as f64 / r.capacity as f64 } else { 0.0 },
        }
    }
}

/// Rates over the last sampling interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    pub t_ms: u64,
    pub tokens_per_s: f64,
    pub computed_per_s: f64,
    pub padded_equivalent_per_s: f64,
    pub bins_per_s: f64,
    pub queue_depth: u64,
    pub memory_used_bytes: Option<u64>,
}

impl Sample {
    /// The rates between two engine snapshots taken `seconds` apart.
    pub fn between(
        before: &StatsSnapshot,
        after: &StatsSnapshot,
        seconds: f64,
        t_ms: u64,
        queue_depth: u64,
        memory_used_bytes: Option<u64>,
    ) -> Sample {
        let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / seconds.max(1e-6);
        Sample {
            t_ms,
            tokens_per_s: rate(before.real_tokens, after.real_tokens),
            computed_per_s: rate(before.computed_tokens, after.computed_tokens),
            padded_equivalent_per_s: rate(before.padded_equivalent_tokens, after.padded_equivalent_tokens),
            bins_per_s: rate(before.bins, after.bins),
            queue_depth,
            memory_used_bytes,
        }
    }
}

/// What the VRAM probe found (memory free and total, bytes per token, capacity, margin, trials).
pub use warpfold_runtime::ProbeSummary as ProbeView;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceView {
    pub name: String,
    pub kind: String,
    pub bin_tokens: u32,
    pub probe: Option<ProbeView>,
    pub memory_total_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    /// Every device the engine runs on (one engine may drive several GPUs), each with its capacity
    /// and probe.
    pub devices: Vec<warpfold_runtime::DeviceStart>,
    /// Which attention the model runs through: FlashAttention-2 varlen, or the masked path and why
    /// (a CPU, a card older than compute capability 8.0, a head size this build has no kernel for).
    pub attention: String,
}

/// Everything the UI draws, at once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppStateView {
    pub model: String,
    pub device: DeviceView,
    pub folders: Vec<String>,
    pub queue: QueueView,
    pub bins: Vec<BinView>,
    pub samples: Vec<Sample>,
    pub documents: u64,
    pub chunks: u64,
    /// The languages of the index's chunks, most first, and how much the embedding model counts
    /// in each (search in a language it cannot read is by keyword).
    pub languages: Vec<warpfold_index::store::IndexLanguage>,
    /// The chat model and its settings; None: summaries are off.
    pub summaries: Option<crate::summaries::SummaryView>,
    /// Why nothing more is written to the index (it was deleted or replaced while the app ran);
    /// None while indexing goes on.
    pub writes_stopped: Option<String>,
    /// Why indexing is paused for now (the disk is full; it resumes by itself when writes succeed
    /// again); None while it goes on.
    pub writes_paused: Option<String>,
    /// The person paused indexing ([`crate::App::set_paused`]).
    pub paused: bool,
}

/// A live event: `event` names it (the SSE event name / Tauri event name), `data` carries it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum AppEvent {
    Queue(FileState),
    Bin(BinView),
    Sample(Sample),
    Folders(Vec<String>),
    /// A file left the queue and the index (deleted, or renamed away: its new name follows).
    Removed(String),
    /// A document's summary is ready (or could not be made).
    Summary(SummaryEvent),
    /// Nothing more is written to the index, and why ([`AppStateView::writes_stopped`]).
    WritesStopped(String),
    /// Indexing paused (the reason) or resumed (None) ([`AppStateView::writes_paused`]).
    WritesPaused(Option<String>),
    /// What the summarizer is busy with before it can summarize (fetching or loading its model),
    /// or None once it is ready.
    SummarizerStatus(Option<String>),
    /// The person paused indexing (true) or resumed it (false).
    Paused(bool),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryEvent {
    pub path: String,
    pub summary: Option<String>,
    /// What checking it against the document found.
    pub check: Option<warpfold_index::summaries::SummaryCheck>,
    pub error: Option<String>,
}

impl AppEvent {
    pub fn name(&self) -> &'static str {
        match self {
            AppEvent::Queue(_) => "queue",
            AppEvent::Bin(_) => "bin",
            AppEvent::Sample(_) => "sample",
            AppEvent::Folders(_) => "folders",
            AppEvent::Removed(_) => "removed",
            AppEvent::WritesStopped(_) => "writes_stopped",
            AppEvent::WritesPaused(_) => "writes_paused",
            AppEvent::Summary(_) => "summary",
            AppEvent::SummarizerStatus(_) => "summarizer_status",
            AppEvent::Paused(_) => "paused",
        }
    }

    /// The payload alone, as JSON.
    pub fn data_json(&self) -> String {
        match self {
            AppEvent::Queue(x) => serde_json::to_string(x),
            AppEvent::Bin(x) => serde_json::to_string(x),
            AppEvent::Sample(x) => serde_json::to_string(x),
            AppEvent::Folders(x) => serde_json::to_string(x),
            AppEvent::Removed(x) => serde_json::to_string(x),
            AppEvent::Summary(x) => serde_json::to_string(x),
            AppEvent::WritesStopped(x) => serde_json::to_string(x),
            AppEvent::WritesPaused(x) => serde_json::to_string(x),
            AppEvent::SummarizerStatus(x) => serde_json::to_string(x),
            AppEvent::Paused(x) => serde_json::to_string(x),
        }
        .expect("plain data serialises")
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
