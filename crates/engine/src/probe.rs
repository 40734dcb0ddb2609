//! Phase 0: how many tokens a bin may hold on this device.
//!
//! Why measure instead of computing: activation memory depends on kernels, allocator rounding and
//! workspace sizes no config file states. The probe starts from an estimate (free memory after the
//! model is loaded, divided by the model's bytes per token), then runs real forwards, searching by
//! bisection for the largest bin that does not run out of memory, and keeps a safety margin below
//! it. A memory budget (`--vram-budget`) caps the estimate, so a large card can behave like a
//! small one. The search itself is device-free (see [`ProbeDevice`]) and tested against a fake
//! device here; the CUDA side lives with the models.

use serde::Serialize;

/// What the probe needs from a device with a model loaded.
pub trait ProbeDevice {
    /// Bytes free on the device now (after the model's weights); the error is the device's own
    /// account of why it could not say.
    fn free_bytes(&mut self) -> Result<u64, Box<dyn std::error::Error + Send + Sync>>;
    /// Runs one forward over a bin of `tokens` tokens.
    fn try_tokens(&mut self, tokens: u32) -> Result<(), Trial>;
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
    /// What bins will hold: the largest that ran, less the safety margin, aligned down.
    pub capacity_tokens: u32,
    /// Every forward tried: (tokens, ran).
    pub trials: Vec<(u32, bool)>,
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
            Ok(()) => true,
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
    let capacity = align_down((f64::from(lo) * (1.0 - config.safety_margin)) as u64, align).max(align);
    Ok(ProbeReport {
        free_bytes: free,
        budget_bytes: config.budget_bytes,
        bytes_per_token: config.bytes_per_token,
        estimated_tokens: estimated,
        largest_ok_tokens: lo,
        capacity_tokens: capacity,
        trials,
    })
}

/// Parses sizes like `8GiB`, `512MiB`, `8G`, `1.5GB`, `1000000` (bytes).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.trim().parse().map_err(|_| format!("{text:?} is not a size (try 8GiB or 512MiB)"))?;
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
        other => return Err(format!("unknown size unit {other:?} in {text:?} (use B, KiB, MiB, GiB, TiB)")),
    };
    if value < 0.0 || !value.is_finite() {
        return Err(format!("{text:?} is not a size"));
    }
    Ok((value * scale) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that runs any bin up to `limit` tokens and runs out of memory above it.
    struct Fake {
        free: u64,
        limit: u32,
        calls: u32,
    }

    impl ProbeDevice for Fake {
        fn free_bytes(&mut self) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
            Ok(self.free)
        }
        fn try_tokens(&mut self, tokens: u32) -> Result<(), Trial> {
            self.calls += 1;
            if tokens <= self.limit {
                Ok(())
            } else {
                Err(Trial::OutOfMemory)
            }
        }
    }

    fn config(bytes_per_token: u64) -> ProbeConfig {
        ProbeConfig { bytes_per_token, ..Default::default() }
    }

    #[test]
    fn finds_the_threshold_within_precision_and_keeps_the_margin() {
        // Estimates too high, right, and too low: the search lands just under the true limit.
        for (limit, bytes_per_token) in [(100_000u32, 1u64 << 14), (100_000, 1 << 20), (100_000, 1 << 10), (3_000, 1 << 16)] {
            let mut dev = Fake { free: 80 << 30, limit, calls: 0 };
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
        let mut dev = Fake { free: 80 << 30, limit: 1_000_000, calls: 0 };
        let cfg = ProbeConfig { bytes_per_token: 1 << 16, budget_bytes: Some(8 << 30), ..Default::default() };
        let r = probe(&mut dev, &cfg).unwrap();
        assert_eq!(r.estimated_tokens, (8u64 << 30 >> 16) as u32);
        assert_eq!(r.largest_ok_tokens, r.estimated_tokens, "the budget is the ceiling");
        assert!(r.capacity_tokens < r.estimated_tokens);
    }

    #[test]
    fn a_device_without_room_is_an_error_naming_the_size() {
        let mut dev = Fake { free: 1 << 20, limit: 100, calls: 0 };
        assert_eq!(probe(&mut dev, &config(1 << 10)), Err(ProbeError::TooSmall { tokens: 256 }));
    }

    #[test]
    fn the_engine_ceiling_bounds_the_search() {
        let mut dev = Fake { free: 1 << 40, limit: u32::MAX, calls: 0 };
        let cfg = ProbeConfig { bytes_per_token: 1, max_tokens: 65_536, ..Default::default() };
        let r = probe(&mut dev, &cfg).unwrap();
        assert_eq!(r.largest_ok_tokens, 65_536);
    }

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("8GiB"), Ok(8 << 30));
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("8 potatoes").is_err());
        assert!(parse_size("lots").is_err());
    }
}
