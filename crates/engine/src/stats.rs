//! What the engine counts, for the fronts to show and the benchmarks to measure: counters kept
//! with atomics while bins run ([`EngineStats`], one [`DeviceCounters`] per device), and plain
//! copies of them ([`StatsSnapshot`], [`DeviceSnapshot`]) with one `since` each for "what happened
//! between two snapshots".

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use warpfold_backend::Bin;

/// Counters since start; cheap to read at any time.
#[derive(Debug, Default)]
pub struct EngineStats {
    pub bins: AtomicU64,
    pub sequences: AtomicU64,
    pub real_tokens: AtomicU64,
    pub computed_tokens: AtomicU64,
    pub failed_bins: AtomicU64,
    /// Nanoseconds the backend spent executing bins.
    pub backend_busy_ns: AtomicU64,
    /// Bins laid out by the dispatcher (run, running, or built and waiting for the backend).
    pub bins_built: AtomicU64,
    /// Bins split in two after the device ran out of memory on them.
    pub oom_splits: AtomicU64,
    /// Sequences never run because their request was cancelled (its caller had gone).
    pub cancelled_sequences: AtomicU64,
    /// Sequences submitted and not yet laid out into a bin (queued or planned).
    pub waiting_sequences: AtomicU64,
    /// Nanoseconds devices sat idle waiting for a bin while sequences were waiting: the
    /// dispatcher's own delay, which the adaptive window keeps near zero.
    pub starved_ns: AtomicU64,
    /// The bin capacity learnt from out-of-memory errors (0: none yet): half of the smallest bin
    /// that ran out. It only shrinks during a run, and the dispatcher packs against it.
    pub capacity_limit: AtomicU32,
    /// Of `bins` and `computed_tokens`, those of interactive bins: bins packed at once for a
    /// query are small by design, so the bulk lane's fill (what packing achieves while documents
    /// stream in) is the rest ([`StatsSnapshot::bulk_fill`]).
    pub interactive_bins: AtomicU64,
    pub interactive_computed_tokens: AtomicU64,
    /// Tokens padded batches of the same sequences would have computed (each bin's sequences
    /// padded to its longest): the work packing avoids, for live displays.
    pub padded_equivalent_tokens: AtomicU64,
    /// The most recent bins run (at most [`RECENT_BINS`]), oldest first, for live displays.
    pub recent_bins: Mutex<VecDeque<BinRecord>>,
    /// One entry per device, in the order the engine was given them.
    pub devices: Vec<DeviceCounters>,
}

/// How many bins [`EngineStats::recent_bins`] keeps.
pub const RECENT_BINS: usize = 64;

/// The shape of one bin that ran: what a UI draws as a bar.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BinRecord {
    /// Counts bins run since the engine started, from 1.
    pub id: u64,
    /// When it finished, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The capacity it was packed against.
    pub capacity: u32,
    /// Real tokens of each sequence.
    pub sequences: Vec<u32>,
    /// Each sequence's slot after alignment (`>= sequences[i]`).
    pub aligned: Vec<u32>,
}

impl EngineStats {
    /// The recent bins, oldest first.
    pub fn recent_bins(&self) -> Vec<BinRecord> {
        self.recent_bins.lock().iter().cloned().collect()
    }

    pub(crate) fn record_bin(&self, bin: &Bin) {
        let slots: Vec<(u32, u32)> = (0..bin.num_sequences())
            .map(|i| {
                let (_, slot, real) = bin.slot(i);
                (real as u32, slot as u32)
            })
            .collect();
        let longest = slots.iter().map(|s| s.0).max().unwrap_or(0) as u64;
        self.padded_equivalent_tokens.fetch_add(longest * slots.len() as u64, Ordering::Relaxed);
        let at_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let mut recent = self.recent_bins.lock();
        let id = recent.back().map_or(0, |r| r.id) + 1;
        if recent.len() == RECENT_BINS {
            recent.pop_front();
        }
        recent.push_back(BinRecord {
            id,
            at_ms,
            capacity: bin.capacity,
            sequences: slots.iter().map(|s| s.0).collect(),
            aligned: slots.iter().map(|s| s.1).collect(),
        });
    }
}

/// A counter's growth from an earlier reading of it: what both snapshot types' `since` take,
/// field by field.
trait Counter {
    fn since(&self, earlier: &Self) -> Self;
}

impl Counter for u64 {
    fn since(&self, earlier: &u64) -> u64 {
        self - earlier
    }
}

impl Counter for f64 {
    fn since(&self, earlier: &f64) -> f64 {
        self - earlier
    }
}

/// A clock a device may not keep: known only when both readings are.
impl Counter for Option<f64> {
    fn since(&self, earlier: &Option<f64>) -> Option<f64> {
        self.zip(*earlier).map(|(now, then)| now - then)
    }
}

/// Each device's counters, matched by position (one engine's devices never change order).
impl Counter for Vec<DeviceSnapshot> {
    fn since(&self, earlier: &Self) -> Self {
        self.iter().zip(earlier).map(|(now, then)| now.since(then)).collect()
    }
}

/// `$now` with each listed counter replaced by its growth since `$before`; every other field
/// (state, not a count) is `$now`'s.
macro_rules! counters_since {
    ($now:expr, $before:expr, $($field:ident),+) => {
        Self { $($field: Counter::since(&$now.$field, &$before.$field),)+ ..$now.clone() }
    };
}
/// A plain copy of [`EngineStats`].
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct StatsSnapshot {
    pub bins: u64,
    pub sequences: u64,
    pub real_tokens: u64,
    pub computed_tokens: u64,
    pub failed_bins: u64,
    pub backend_busy_seconds: f64,
    pub oom_splits: u64,
    /// Sequences never run because their request was cancelled.
    pub cancelled_sequences: u64,
    /// Seconds devices sat idle waiting for a bin while sequences were waiting to be packed.
    pub starved_seconds: f64,
    /// The capacity learnt from out-of-memory errors, if any.
    pub capacity_limit: Option<u32>,
    pub padded_equivalent_tokens: u64,
    /// Bins and computed tokens of the interactive lane (included in `bins`, `computed_tokens`).
    pub interactive_bins: u64,
    pub interactive_computed_tokens: u64,
    /// Per device (one entry on a single device).
    pub devices: Vec<DeviceSnapshot>,
}

fn mean_fill(bins: u64, computed: u64, capacity: u32) -> f64 {
    if bins == 0 || capacity == 0 {
        return 0.0;
    }
    computed as f64 / (bins as f64 * f64::from(capacity))
}

impl StatsSnapshot {
    /// Mean share of `capacity` that the bins computed, all lanes (0 when none ran).
    pub fn fill(&self, capacity: u32) -> f64 {
        mean_fill(self.bins, self.computed_tokens, capacity)
    }

    /// Mean share of `capacity` that the bulk lane's bins computed (0 when none ran): the fill
    /// packing reaches on streamed work, without the small bins that answer queries at once.
    pub fn bulk_fill(&self, capacity: u32) -> f64 {
        mean_fill(
            self.bins.saturating_sub(self.interactive_bins),
            self.computed_tokens.saturating_sub(self.interactive_computed_tokens),
            capacity,
        )
    }

    /// The counters accumulated since `before` (both from the same engine); the state fields
    /// (capacity limit, devices' state) are `self`'s.
    pub fn since(&self, before: &StatsSnapshot) -> StatsSnapshot {
        counters_since!(
            self,
            before,
            bins,
            sequences,
            real_tokens,
            computed_tokens,
            failed_bins,
            backend_busy_seconds,
            oom_splits,
            cancelled_sequences,
            starved_seconds,
            padded_equivalent_tokens,
            interactive_bins,
            interactive_computed_tokens,
            devices
        )
    }

    /// The devices' own clocks, summed over devices that keep one (CUDA): (seconds busy on bins,
    /// seconds idle between bins, idle as a percentage of both).
    pub fn device_time(&self) -> Option<(f64, f64, f64)> {
        let timed: Vec<_> = self.devices.iter().filter_map(|d| d.device_busy_seconds.zip(d.device_idle_seconds)).collect();
        if timed.is_empty() {
            return None;
        }
        let (busy, idle) = timed.iter().fold((0.0, 0.0), |(b, i), (db, di)| (b + db, i + di));
        Some((busy, idle, 100.0 * idle / (busy + idle).max(1e-12)))
    }
}

impl EngineStats {
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            bins: self.bins.load(Ordering::Relaxed),
            sequences: self.sequences.load(Ordering::Relaxed),
            real_tokens: self.real_tokens.load(Ordering::Relaxed),
            computed_tokens: self.computed_tokens.load(Ordering::Relaxed),
            failed_bins: self.failed_bins.load(Ordering::Relaxed),
            backend_busy_seconds: self.backend_busy_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            oom_splits: self.oom_splits.load(Ordering::Relaxed),
            cancelled_sequences: self.cancelled_sequences.load(Ordering::Relaxed),
            starved_seconds: self.starved_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            capacity_limit: Some(self.capacity_limit.load(Ordering::Relaxed)).filter(|&c| c > 0),
            padded_equivalent_tokens: self.padded_equivalent_tokens.load(Ordering::Relaxed),
            interactive_bins: self.interactive_bins.load(Ordering::Relaxed),
            interactive_computed_tokens: self.interactive_computed_tokens.load(Ordering::Relaxed),
            devices: self.devices.iter().map(DeviceCounters::snapshot).collect(),
        }
    }
}

/// One device's counters since start.
#[derive(Debug, Default)]
pub struct DeviceCounters {
    pub device: String,
    /// The capacity its bins are packed or cut to (its probe result, or `--bin-tokens`).
    pub bin_tokens: u32,
    /// Capacity learnt from its out-of-memory errors (0: none yet).
    pub capacity_limit: AtomicU32,
    pub alive: AtomicBool,
    pub bins: AtomicU64,
    pub sequences: AtomicU64,
    pub real_tokens: AtomicU64,
    pub computed_tokens: AtomicU64,
    pub busy_ns: AtomicU64,
    /// Backend calls that failed with something other than out-of-memory.
    pub failures: AtomicU64,
    /// Bins (or parts of bins) it took from another device's queue.
    pub stolen: AtomicU64,
    pub oom_splits: AtomicU64,
    /// Predicted cost of the bins it ran, in token-equivalents ([`CostModel`]).
    pub cost_done: AtomicU64,
    /// Its measured rate, seconds per unit of cost, as f64 bits (0: not measured yet).
    pub seconds_per_cost: AtomicU64,
    /// The device's own busy/idle clock, when its backend keeps one (CUDA).
    pub timeline: Option<Arc<warpfold_backend::DeviceTimeline>>,
}

/// A plain copy of [`DeviceCounters`].
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct DeviceSnapshot {
    pub device: String,
    pub bin_tokens: u32,
    pub capacity_limit: Option<u32>,
    pub alive: bool,
    pub bins: u64,
    pub sequences: u64,
    pub real_tokens: u64,
    pub computed_tokens: u64,
    pub busy_seconds: f64,
    pub failures: u64,
    pub stolen: u64,
    pub oom_splits: u64,
    pub cost_done: u64,
    /// Measured speed in token-equivalents per second, once it has run a bin.
    pub cost_per_second: Option<f64>,
    /// On the device's own clock (CUDA events): time spent on bins, from a bin's first input
    /// copy to its results...
    pub device_busy_seconds: Option<f64>,
    /// ...and time idle between one bin's results and the next bin's first copy.
    pub device_idle_seconds: Option<f64>,
}

impl DeviceCounters {
    pub fn new(device: String, bin_tokens: u32) -> Self {
        DeviceCounters { device, bin_tokens, alive: AtomicBool::new(true), ..Default::default() }
    }

    pub fn with_timeline(mut self, timeline: Option<Arc<warpfold_backend::DeviceTimeline>>) -> Self {
        self.timeline = timeline;
        self
    }

    pub fn snapshot(&self) -> DeviceSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let rate = f64::from_bits(load(&self.seconds_per_cost));
        let timeline = self.timeline.as_ref().map(|t| t.totals());
        DeviceSnapshot {
            device: self.device.clone(),
            bin_tokens: self.bin_tokens,
            capacity_limit: Some(self.capacity_limit.load(Ordering::Relaxed)).filter(|&c| c > 0),
            alive: self.alive.load(Ordering::Relaxed),
            bins: load(&self.bins),
            sequences: load(&self.sequences),
            real_tokens: load(&self.real_tokens),
            computed_tokens: load(&self.computed_tokens),
            busy_seconds: load(&self.busy_ns) as f64 * 1e-9,
            failures: load(&self.failures),
            stolen: load(&self.stolen),
            oom_splits: load(&self.oom_splits),
            cost_done: load(&self.cost_done),
            cost_per_second: (rate > 0.0).then(|| 1.0 / rate),
            device_busy_seconds: timeline.map(|t| t.0),
            device_idle_seconds: timeline.map(|t| t.1),
        }
    }
}

impl DeviceSnapshot {
    /// Counters since `before` (for a benchmark that warms up first); the state fields are `self`'s.
    pub fn since(&self, before: &DeviceSnapshot) -> DeviceSnapshot {
        counters_since!(
            self,
            before,
            bins,
            sequences,
            real_tokens,
            computed_tokens,
            busy_seconds,
            failures,
            stolen,
            oom_splits,
            cost_done,
            device_busy_seconds,
            device_idle_seconds
        )
    }
}
