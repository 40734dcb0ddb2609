//! The scheduler's settings: how sequences are grouped into bins (packed or the padded baseline),
//! when bulk work is packed (the adaptive window or the source project's fixed one), the lanes a
//! request can take, and the bin's size and alignment.

use std::time::Duration;

use crate::cost::CostModel;

/// How sequences are grouped into bins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Batching {
    /// First-Fit-Decreasing into bins of `bin_tokens`, each slot aligned.
    Packed,
    /// The baseline: `batch_size` sequences in arrival order, padded to the longest.
    Padded { batch_size: usize },
}

/// Which lane a request goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Latency first: packed ahead of every bulk bin not yet handed to the backend.
    Interactive,
    /// Throughput first: waits to share bins.
    Bulk,
}

/// When bulk work is packed into bins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// Full bins while the devices are busy: bulk work is packed once a bin's worth is queued, or
    /// as soon as a device would otherwise idle (then whatever is queued). A device never waits
    /// while work is queued, and bins fill whenever the device, not the producer, is the bottleneck.
    Adaptive,
    /// The source project's trigger: `min_sequences` pending or the oldest waited `max_wait`,
    /// whatever the devices are doing (kept for comparison: it ships small bins to a busy device).
    Fixed,
}

/// The scheduler's settings.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SchedulerConfig {
    pub batching: Batching,
    /// Token capacity of one packed bin.
    pub bin_tokens: u32,
    /// Alignment quantum for slot lengths; 1 turns alignment off.
    pub align: u32,
    /// When bulk work is packed (interactive work is packed at once, always).
    pub window: Window,
    /// [`Window::Fixed`]: pack as soon as this many sequences are pending...
    pub min_sequences: usize,
    /// ...or once the oldest pending one has waited this long. With [`Window::Adaptive`], how long
    /// the last, partly filled bin of a round may be re-opened for new arrivals.
    pub max_wait: Duration,
    /// How a bin's cost is predicted when several devices share the work.
    pub cost: CostModel,
}

/// A bin's capacity where nothing measured one: on a CPU the bin size only bounds memory (no probe
/// is needed), and 4096 tokens keeps every matmul large enough to run at full speed. The one
/// definition; a GPU's comes from the VRAM probe.
pub const DEFAULT_BIN_TOKENS: u32 = 4096;

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            batching: Batching::Packed,
            bin_tokens: DEFAULT_BIN_TOKENS,
            // Tensor cores work on 16-wide tiles.
            align: 16,
            window: Window::Adaptive,
            // The source project's trigger (Window::Fixed): 16 sequences or 5 ms.
            min_sequences: 16,
            max_wait: Duration::from_millis(5),
            cost: CostModel::default(),
        }
    }
}
