//! Phase 0: how many tokens a bin may hold on this device.
//!
//! Why measure instead of computing: activation memory depends on kernels, allocator rounding and
//! workspace sizes no config file states. The probe starts from an estimate (free memory after the
//! model is loaded, divided by the model's bytes per token), then runs real forwards, searching by
//! bisection for the largest bin that does not run out of memory, and keeps a safety margin below
//! it. A memory budget (`--vram-budget`) caps the estimate, so a large card can behave like a
//! small one. The search itself is device-free (see [`ProbeDevice`]) and tested against a fake
//! device here; the CUDA side lives with the models.
//!
//! The largest bin that fits is not always the fastest: a 7B decoder ran as fast in bins of 16,384
//! tokens as of 65,536 on an H200 (with 8.6 GiB less memory), while a small encoder keeps gaining
//! up to the largest. So the probe then times forwards from the largest bin down by halves (never
//! below the longest sequence the model takes, so that no sequence it accepts is refused for the
//! bin's size) and keeps the smallest whose throughput is within a tolerance of the best: the
//! throughput knee. Memory left over stays free for the rest of the machine (a game, a browser).

use std::time::Duration;

use serde::Serialize;

/// What the probe needs from a device with a model loaded.
pub trait ProbeDevice {
    /// Bytes free on the device now (after the model's weights); the error is the device's own
    /// account of why it could not say.
    fn free_bytes(&mut self) -> Result<u64, Box<dyn std::error::Error + Send + Sync>>;
    /// Runs one forward over a bin of `tokens` tokens and says how long it took, results back on
    /// the host.
    fn try_tokens(&mut self, tokens: u32) -> Result<Duration, Trial>;
}

/// How a probe forward failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trial {
    /// The bin did not fit in memory: the search goes lower.
    OutOfMemory,
    /// Any other failure, which stops the probe.
    Failed(String),
}

#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// Estimated activation bytes per token of a bin (from the model's config).
    pub bytes_per_token: u64,
    /// Cap on the memory bins may use, in bytes (a smaller card's size, minus what the model takes).
    pub budget_bytes: Option<u64>,
    /// Fraction kept free below the largest bin that ran (0.10 = 10%).
    pub safety_margin: f64,
    /// Bins are multiples of this many tokens.
    pub align: u32,
    /// The smallest bin worth running; below it the probe fails.
    pub min_tokens: u32,
    /// Never probe above this (the engine's own limit on a bin).
    pub max_tokens: u32,
    /// Stop bisecting when the bracket is narrower than this fraction of its lower end.
    pub precision: f64,
    /// The throughput knee: the smallest timed bin whose tokens/s are within this fraction of the
    /// best timed bin's. `None`: bins are the largest that fits, untimed.
    pub knee_tolerance: Option<f64>,
    /// The knee never goes below this many tokens (the longest sequence the model takes).
    pub knee_floor: u32,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            bytes_per_token: 1 << 16,
            budget_bytes: None,
            safety_margin: 0.10,
            align: 16,
            min_tokens: 256,
            max_tokens: 1 << 21,
            precision: 0.02,
            knee_tolerance: Some(0.03),
            knee_floor: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeReport {
    pub free_bytes: u64,
    pub budget_bytes: Option<u64>,
    pub bytes_per_token: u64,
    /// Tokens the estimate allows before any forward ran.
    pub estimated_tokens: u32,
    /// The largest bin that ran.
    pub largest_ok_tokens: u32,
    /// The largest bin memory allows: the largest that ran, less the safety margin, aligned down.
    pub memory_capacity_tokens: u32,
    /// What bins will hold: the throughput knee at or below `memory_capacity_tokens` (that itself
    /// when there is no knee to look for).
    pub capacity_tokens: u32,
    /// Every forward of the memory search: (tokens, ran).
    pub trials: Vec<(u32, bool)>,
    /// The knee's timings: (tokens, tokens per second of the faster of two forwards), largest first.
    /// Empty when there was no choice to make (the floor at or above memory's capacity).
    pub rates: Vec<(u32, f64)>,
    /// Every forward the probe ran, memory search and knee together.
    pub forwards: usize,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot read the device's free memory: {0}")]
    FreeMemory(String),
    #[error("even a bin of {tokens} tokens runs out of memory: the model leaves too little room on this device")]
    TooSmall { tokens: u32 },
    #[error("a probe forward of {tokens} tokens failed: {message}")]
    Forward { tokens: u32, message: String },
}

fn align_down(tokens: u64, align: u32) -> u32 {
    let a = u64::from(align.max(1));
    ((tokens / a) * a).min(u64::from(u32::MAX)) as u32
}

/// Finds the bin capacity for `device` (see the module docs).
pub fn probe(device: &mut impl ProbeDevice, config: &ProbeConfig) -> Result<ProbeReport, ProbeError> {
    let free = device.free_bytes().map_err(|e| ProbeError::FreeMemory(e.to_string()))?;
    let usable = config.budget_bytes.map_or(free, |b| b.min(free));
    let align = config.align.max(1);
    let estimated = align_down(usable / config.bytes_per_token.max(1), align).min(config.max_tokens);
    let mut trials = Vec::new();
    let mut run = |tokens: u32, trials: &mut Vec<(u32, bool)>| -> Result<bool, ProbeError> {
        let ok = match device.try_tokens(tokens) {
            Ok(_) => true,
            Err(Trial::OutOfMemory) => false,
            Err(Trial::Failed(message)) => return Err(ProbeError::Forward { tokens, message }),
        };
        trials.push((tokens, ok));
        Ok(ok)
    };
    let floor = align_down(u64::from(config.min_tokens), align).max(align);
    if !run(floor, &mut trials)? {
        return Err(ProbeError::TooSmall { tokens: floor });
    }
    // Bracket [lo ran, hi did not or is the ceiling]: the estimate first, then doubling or halving.
    // A budget caps the ceiling at the estimate: above it a bigger card would succeed, but the
    // budget says the memory is not there.
    let ceiling = if config.budget_bytes.is_some() { estimated.max(floor) } else { config.max_tokens.max(floor) };
    let (mut lo, mut hi);
    let start = estimated.clamp(floor, ceiling);
    if run(start, &mut trials)? {
        lo = start;
        hi = ceiling;
        // Grow until something fails or the ceiling is reached.
        while lo < ceiling {
            let next = align_down(u64::from(lo) * 2, align).min(ceiling);
            if run(next, &mut trials)? {
                lo = next;
            } else {
                hi = next;
                break;
            }
        }
    } else {
        lo = floor;
        hi = start;
    }
    // Bisect while the bracket is wide; `hi` never ran (unless it is the ceiling and `lo` reached it).
    while lo < hi && f64::from(hi - lo) > (f64::from(lo) * config.precision).max(f64::from(align)) {
        let mid = align_down((u64::from(lo) + u64::from(hi)) / 2, align);
        if mid <= lo {
            break;
        }
        if run(mid, &mut trials)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let memory_capacity = align_down((f64::from(lo) * (1.0 - config.safety_margin)) as u64, align).max(align);
    let knee = match config.knee_tolerance {
        Some(tolerance) => throughput_knee(device, memory_capacity, config.knee_floor, align, tolerance)?,
        None => Knee { tokens: memory_capacity, rates: Vec::new(), forwards: 0 },
    };
    Ok(ProbeReport {
        free_bytes: free,
        budget_bytes: config.budget_bytes,
        bytes_per_token: config.bytes_per_token,
        estimated_tokens: estimated,
        largest_ok_tokens: lo,
        memory_capacity_tokens: memory_capacity,
        capacity_tokens: knee.tokens,
        forwards: trials.len() + knee.forwards,
        trials,
        rates: knee.rates,
    })
}

/// Bin sizes timed for the knee: at most this many, the largest first, each by half.
const KNEE_SIZES: usize = 6;

/// Times bins from `largest` down by halves (not below `floor`, which is timed itself when the
/// halves pass it) and returns the smallest whose throughput is within `tolerance` of the best,
/// with every size's rate. A size that runs out of memory now (fragmentation) is left out; if
/// none ran, the largest stands. With a single candidate (the floor at or above `largest`) nothing
/// is timed: there is no choice to make.
fn throughput_knee(device: &mut impl ProbeDevice, largest: u32, floor: u32, align: u32, tolerance: f64) -> Result<Knee, ProbeError> {
    let floor = floor.div_ceil(align).saturating_mul(align).clamp(align, largest);
    let mut sizes = vec![largest];
    while sizes.len() < KNEE_SIZES {
        let half = align_down(u64::from(*sizes.last().expect("one size")) / 2, align);
        if half < floor {
            if *sizes.last().expect("one size") > floor {
                sizes.push(floor);
            }
            break;
        }
        sizes.push(half);
    }
    if sizes.len() < 2 {
        return Ok(Knee { tokens: largest, rates: Vec::new(), forwards: 0 });
    }
    let mut rates = Vec::with_capacity(sizes.len());
    let mut forwards = 0;
    for tokens in sizes {
        let mut fastest: Option<Duration> = None;
        for _ in 0..2 {
            forwards += 1;
            match device.try_tokens(tokens) {
                Ok(took) => fastest = Some(fastest.map_or(took, |f| f.min(took))),
                Err(Trial::OutOfMemory) => break,
                Err(Trial::Failed(message)) => return Err(ProbeError::Forward { tokens, message }),
            }
        }
        if let Some(took) = fastest {
            rates.push((tokens, f64::from(tokens) / took.as_secs_f64().max(1e-9)));
        }
    }
    let best = rates.iter().map(|&(_, rate)| rate).fold(0.0, f64::max);
    let tokens = rates.iter().filter(|&&(_, rate)| rate >= best * (1.0 - tolerance)).map(|&(tokens, _)| tokens).min().unwrap_or(largest);
    Ok(Knee { tokens, rates, forwards })
}

/// What the knee search found: the bin size kept, the timings behind it and the forwards it ran.
struct Knee {
    tokens: u32,
    rates: Vec<(u32, f64)>,
    forwards: usize,
}

/// Why a text is not a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("{0:?} is not a size (try 8GiB or 512MiB)")]
    NotASize(String),
    #[error("unknown size unit {unit:?} in {text:?} (use B, KiB, MiB, GiB, TiB)")]
    UnknownUnit { unit: String, text: String },
}

/// Parses sizes like `8GiB`, `512MiB`, `8G`, `1.5GB`, `1000000` (bytes).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let not_a_size = || SizeError::NotASize(text.to_string());
    let value: f64 = number.trim().parse().map_err(|_| not_a_size())?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "kb" => 1e3,
        "m" | "mib" => 1024.0 * 1024.0,
        "mb" => 1e6,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "gb" => 1e9,
        "t" | "tib" => 1024f64.powi(4),
        "tb" => 1e12,
        other => return Err(SizeError::UnknownUnit { unit: other.to_string(), text: text.to_string() }),
    };
    if value < 0.0 || !value.is_finite() {
        return Err(not_a_size());
    }
    Ok((value * scale) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that runs any bin up to `limit` tokens and runs out of memory above it, at the
    /// throughput `speed` gives for a bin's size (tokens per second).
    struct Fake {
        free: u64,
        limit: u32,
        calls: u32,
        speed: fn(u32) -> f64,
    }

    /// Faster with every larger bin (a small encoder).
    fn rising(tokens: u32) -> f64 {
        1e6 * f64::from(tokens) / (f64::from(tokens) + 2_000.0)
    }

    /// Level from 16k tokens on, a little slower at the largest (a 7B decoder on an H200).
    fn levelling(tokens: u32) -> f64 {
        match tokens {
            t if t < 4_096 => 20_000.0,
            t if t < 16_384 => 30_000.0,
            t if t < 40_000 => 34_000.0,
            _ => 33_500.0,
        }
    }

    fn fake(free: u64, limit: u32) -> Fake {
        Fake { free, limit, calls: 0, speed: rising }
    }

    impl ProbeDevice for Fake {
        fn free_bytes(&mut self) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
            Ok(self.free)
        }
        fn try_tokens(&mut self, tokens: u32) -> Result<Duration, Trial> {
            self.calls += 1;
            if tokens <= self.limit {
                Ok(Duration::from_secs_f64(f64::from(tokens) / (self.speed)(tokens)))
            } else {
                Err(Trial::OutOfMemory)
            }
        }
    }

    /// The memory search alone.
    fn config(bytes_per_token: u64) -> ProbeConfig {
        ProbeConfig { bytes_per_token, knee_tolerance: None, ..Default::default() }
    }

    #[test]
    fn finds_the_threshold_within_precision_and_keeps_the_margin() {
        // Estimates too high, right, and too low: the search lands just under the true limit.
        for (limit, bytes_per_token) in [(100_000u32, 1u64 << 14), (100_000, 1 << 20), (100_000, 1 << 10), (3_000, 1 << 16)] {
            let mut dev = fake(80 << 30, limit);
            let r = probe(&mut dev, &config(bytes_per_token)).unwrap();
            assert!(r.largest_ok_tokens <= limit, "{r:?}");
            assert!(f64::from(r.largest_ok_tokens) >= f64::from(limit) * 0.97 - 16.0, "within precision: {r:?}");
            assert_eq!(r.capacity_tokens % 16, 0);
            assert!(
                r.capacity_tokens <= (f64::from(r.largest_ok_tokens) * 0.9) as u32
                    && r.capacity_tokens + 16 > (f64::from(r.largest_ok_tokens) * 0.9) as u32 - 16
            );
            assert!(r.trials.iter().all(|&(t, ok)| ok == (t <= limit)), "every trial's outcome is the device's");
            assert!(dev.calls <= 30, "bisection, not a linear walk: {} forwards", dev.calls);
        }
    }

    #[test]
    fn a_budget_caps_the_capacity_below_what_the_device_could_run() {
        let mut dev = fake(80 << 30, 1_000_000);
        let cfg = ProbeConfig { budget_bytes: Some(8 << 30), ..config(1 << 16) };
        let r = probe(&mut dev, &cfg).unwrap();
        assert_eq!(r.estimated_tokens, (8u64 << 30 >> 16) as u32);
        assert_eq!(r.largest_ok_tokens, r.estimated_tokens, "the budget is the ceiling");
        assert!(r.capacity_tokens < r.estimated_tokens);
    }

    #[test]
    fn a_device_without_room_is_an_error_naming_the_size() {
        let mut dev = fake(1 << 20, 100);
        assert_eq!(probe(&mut dev, &config(1 << 10)), Err(ProbeError::TooSmall { tokens: 256 }));
    }

    #[test]
    fn the_engine_ceiling_bounds_the_search() {
        let mut dev = fake(1 << 40, u32::MAX);
        let cfg = ProbeConfig { max_tokens: 65_536, ..config(1) };
        let r = probe(&mut dev, &cfg).unwrap();
        assert_eq!(r.largest_ok_tokens, 65_536);
    }

    #[test]
    fn the_knee_is_the_smallest_bin_as_fast_as_the_best_and_never_below_the_floor() {
        let knee = |speed: fn(u32) -> f64, floor: u32| {
            let mut dev = Fake { speed, ..fake(80 << 30, 70_000) };
            let cfg = ProbeConfig { knee_floor: floor, max_tokens: 65_536, ..ProbeConfig::default() };
            let report = probe(&mut dev, &cfg).unwrap();
            assert_eq!(report.forwards, dev.calls as usize, "the report counts every forward it ran");
            report
        };
        // A decoder that levels off: 58,976 (the margin below 65,536), 29,488, then 14,744 is slower.
        let r = knee(levelling, 0);
        assert_eq!(r.memory_capacity_tokens, 58_976);
        assert_eq!(r.rates.iter().map(|&(t, _)| t).collect::<Vec<_>>(), [58_976, 29_488, 14_736, 7_360, 3_680, 1_840]);
        assert_eq!(r.capacity_tokens, 29_488, "{r:?}");
        assert_eq!(r.forwards, r.trials.len() + 2 * KNEE_SIZES);
        // Its longest sequence (32,768 tokens) must fit: the floor is timed and the knee stays at it.
        let r = knee(levelling, 32_768);
        assert_eq!(r.rates.iter().map(|&(t, _)| t).collect::<Vec<_>>(), [58_976, 32_768]);
        assert_eq!(r.capacity_tokens, 32_768);
        // A floor above what memory allows leaves the largest bin, and with no choice to make
        // nothing is timed.
        let r = knee(levelling, 100_000);
        assert_eq!((r.capacity_tokens, r.rates.len(), r.forwards), (58_976, 0, r.trials.len()));
        // An encoder that keeps gaining: the largest bin.
        let r = knee(rising, 512);
        assert_eq!(r.capacity_tokens, r.memory_capacity_tokens);
        assert_eq!(r.rates.len(), KNEE_SIZES);
        assert!(r.rates.windows(2).all(|w| w[0].1 > w[1].1), "rates as measured: {:?}", r.rates);
        // Without a tolerance the bins are the largest that fits, and nothing is timed.
        let mut dev = Fake { speed: levelling, ..fake(80 << 30, 70_000) };
        let r = probe(&mut dev, &ProbeConfig { max_tokens: 65_536, ..config(1 << 16) }).unwrap();
        assert_eq!((r.capacity_tokens, r.rates.len()), (58_976, 0));
    }

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("8GiB"), Ok(8 << 30));
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("8 potatoes"), Err(SizeError::UnknownUnit { unit: "potatoes".into(), text: "8 potatoes".into() }));
        assert_eq!(parse_size("lots"), Err(SizeError::NotASize("lots".into())));
        assert_eq!(parse_size("-1GiB"), Err(SizeError::NotASize("-1GiB".into())));
    }
}
