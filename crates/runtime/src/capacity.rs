//! How many tokens one bin holds on a device: `--bin-tokens` when given, else on a GPU the VRAM
//! probe's answer, else the CPU default.
//!
//! Phase 0, the VRAM probe: the memory free after the model loaded, an estimate from the model's
//! bytes per token, then real forwards of synthetic bins (doubling, then bisection), less a 10%
//! margin. A budget caps the memory as if the card had that much (`--vram-budget 8GiB` makes an
//! H200 plan like a gaming card); bins never pass 65,536 tokens nor what the model's kernels can
//! index. Then the throughput knee: the smallest of the sizes timed from there down by halves (not
//! below the model's longest sequence) that runs within 3% of the fastest (the 7B architecture ran
//! as fast in bins of 16,384 as of 65,536 on an H200; a small encoder gains up to the largest).

use candle_core::Device;
use serde::Serialize;
use warpfold_backend::{Backend, BackendError, SequenceTag};
use warpfold_candle::device_memory;
use warpfold_engine::probe::{probe, ProbeConfig, ProbeDevice, ProbeError, ProbeReport, Trial};
use warpfold_engine::tape::{packed_bin, TokenSequence};

use crate::RuntimeError;

/// The bin capacity on a device without a probe.
pub const CPU_BIN_TOKENS: u32 = warpfold_engine::config::DEFAULT_BIN_TOKENS;

/// What the probe found on one device, as the device views show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeSummary {
    pub capacity_tokens: u32,
    /// Memory free for bins after the model loaded (under the budget, if any).
    pub free_bytes: u64,
    pub total_bytes: u64,
    pub budget_bytes: Option<u64>,
    pub bytes_per_token: u64,
    pub estimated_tokens: u32,
    pub largest_ok_tokens: u32,
    /// The largest bin memory allows (`capacity_tokens` is the throughput knee at or below it).
    pub memory_capacity_tokens: u32,
    /// Fraction kept free below the largest bin that ran.
    pub margin: f64,
    /// Forwards the probe ran (memory search and knee).
    pub trials: usize,
    /// The knee's timings: (tokens, tokens per second), largest first.
    pub rates: Vec<(u32, f64)>,
    pub seconds: f64,
}

impl ProbeSummary {
    fn new(report: &ProbeReport, total_bytes: u64, budget_bytes: Option<u64>, seconds: f64) -> ProbeSummary {
        ProbeSummary {
            capacity_tokens: report.capacity_tokens,
            free_bytes: report.free_bytes,
            total_bytes,
            budget_bytes,
            bytes_per_token: report.bytes_per_token,
            estimated_tokens: report.estimated_tokens,
            largest_ok_tokens: report.largest_ok_tokens,
            memory_capacity_tokens: report.memory_capacity_tokens,
            margin: ProbeConfig::default().safety_margin,
            trials: report.forwards,
            rates: report.rates.clone(),
            seconds,
        }
    }
}

/// The capacity of `backend` on `device`: `fixed` if given (checked against what the kernels can
/// index), else the probe's answer on a GPU, else [`CPU_BIN_TOKENS`].
pub fn bin_capacity<B: Backend>(
    backend: &mut B,
    device: &Device,
    fixed: Option<u32>,
    budget: Option<u64>,
    align: u32,
) -> Result<(u32, Option<ProbeSummary>), RuntimeError> {
    let kernel_limit = backend.max_bin_tokens();
    if let Some(tokens) = fixed {
        if tokens as usize > kernel_limit {
            return Err(RuntimeError::Capacity(format!(
                "a bin of {tokens} tokens is more than this model can run in one bin on this device ({kernel_limit} tokens: \
                 its widest activation would pass the 2^32 elements a CUDA kernel can index)"
            )));
        }
        return Ok((tokens, None));
    }
    if !device.is_cuda() {
        return Ok((CPU_BIN_TOKENS, None));
    }
    let started = std::time::Instant::now();
    let report = probe_capacity(backend, device, budget, align).map_err(|e| RuntimeError::Capacity(format!("VRAM probe: {e}")))?;
    tracing::info!(?report, "VRAM probe");
    let total = device_memory(device).map(|(_, total)| total).unwrap_or(0);
    let summary = ProbeSummary::new(&report, total, budget, started.elapsed().as_secs_f64());
    Ok((report.capacity_tokens, Some(summary)))
}

/// The VRAM probe for `backend` on `device` (see the module's docs).
pub fn probe_capacity<B: Backend>(backend: &mut B, device: &Device, budget: Option<u64>, align: u32) -> Result<ProbeReport, ProbeError> {
    let info = backend.info();
    let kernel_limit = backend.max_bin_tokens();
    let bytes_per_token = backend.activation_bytes_per_token();
    let mut probe_device = ModelProbe {
        backend,
        device: device.clone(),
        budget,
        sequence_tokens: info.max_sequence_tokens.clamp(1, 4096),
        pad: info.pad_token_id,
    };
    let free = probe_device.free_bytes().map_err(|e| ProbeError::FreeMemory(e.to_string()))?;
    let config = ProbeConfig {
        bytes_per_token,
        budget_bytes: budget.map(|_| free),
        align: align.max(1),
        max_tokens: (1usize << 16).min(kernel_limit) as u32,
        knee_floor: info.max_sequence_tokens.min(u32::MAX as usize) as u32,
        ..ProbeConfig::default()
    };
    probe(&mut probe_device, &config)
}

/// Runs forwards of synthetic bins for the VRAM probe.
struct ModelProbe<'a, B: Backend> {
    backend: &'a mut B,
    device: Device,
    budget: Option<u64>,
    sequence_tokens: usize,
    pad: u32,
}

impl<B: Backend> ProbeDevice for ModelProbe<'_, B> {
    fn free_bytes(&mut self) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
        let (free, total) = device_memory(&self.device)?;
        // A budget is the whole card's size: what the model already uses counts against it.
        Ok(match self.budget {
            Some(budget) => free.min(budget.saturating_sub(total - free)),
            None => free,
        })
    }

    fn try_tokens(&mut self, tokens: u32) -> Result<std::time::Duration, Trial> {
        let tokens = tokens as usize;
        let lengths: Vec<usize> =
            (0..tokens.div_ceil(self.sequence_tokens)).map(|i| self.sequence_tokens.min(tokens - i * self.sequence_tokens)).collect();
        // The pad id is a real id in every vocabulary (and memory does not depend on the ids).
        let sequences: Vec<Vec<u32>> = lengths.iter().map(|&n| vec![self.pad; n]).collect();
        tracing::info!(tokens, sequences = sequences.len(), "VRAM probe: trying a bin");
        let bin = packed_bin(
            sequences.iter().enumerate().map(|(i, ids)| TokenSequence { tag: SequenceTag { request: 0, index: i as u32 }, ids }),
            1,
            tokens as u32,
            self.pad,
        );
        let started = std::time::Instant::now();
        // The results come back to the host: the time is the device's whole forward.
        match self.backend.embed(&bin) {
            Ok(_) => Ok(started.elapsed()),
            Err(BackendError::OutOfMemory { .. }) => Err(Trial::OutOfMemory),
            Err(e) => Err(Trial::Failed(e.to_string())),
        }
    }
}
