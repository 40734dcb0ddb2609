//! Kernel choices kept for side-by-side measurements, handed over once by the front.
//!
//! Why not read from the environment here: a library that reads variables behaves differently in
//! each program that links it, and nobody can see which switches it took. The front (the command
//! line, the desktop app) reads them in its one settings module (`warpfold_app::settings`, which
//! lists them in docs/settings.md) and calls [`set`] before a model loads; a program that calls
//! nothing gets the defaults, the kernels a person runs.

use std::path::PathBuf;
use std::sync::OnceLock;

/// Where Intel MKL comes from (`WARPFOLD_MKL`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum MklChoice {
    /// The `mkl` folder beside the model's folder, on an Intel CPU, when it is installed.
    #[default]
    BesideModel,
    /// Never (`off`).
    Off,
    /// This library, or this folder's, on any CPU.
    At(PathBuf),
}

/// Every switch; the default is what runs without any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelSwitches {
    pub mkl: MklChoice,
    /// `MKL_ENABLE_INSTRUCTIONS` or `MKL_CBWR` is set: MKL may be held to older instructions, where
    /// three bf16 products cost more than one f32 product, so `auto` precision keeps f32.
    pub mkl_constrained: bool,
    /// `WARPFOLD_CPU_PANELS`: `off` (the gemm crate) or `avx2` (the AVX2 panels on an AVX-512 CPU).
    pub cpu_panels: String,
    /// `WARPFOLD_CPU_ATTENTION`: `products`, `tiled` or `avx2` (f32 attention of those kinds).
    pub cpu_attention: String,
    /// `WARPFOLD_CPU_ENCODER=ops`: the candle-op layers instead of the fused CPU encoder.
    pub cpu_encoder_ops: bool,
    /// `WARPFOLD_ENCODER_KERNELS=candle`: candle's element-wise ops on CUDA, not warpfold's kernels.
    pub candle_encoder_ops: bool,
    /// `WARPFOLD_DECODE_ATTENTION=gathered`: CUDA decoding through the gathered path, not the paged kernel.
    pub gathered_decode: bool,
    /// `WARPFOLD_PROFILE=1`: time each stage of a bin (`crate::stage_profile`).
    pub profile: bool,
}

static SWITCHES: OnceLock<KernelSwitches> = OnceLock::new();

/// Hands the switches over; the first call wins (models already loaded keep their kernels).
/// Returns whether these were taken.
pub fn set(switches: KernelSwitches) -> bool {
    SWITCHES.set(switches).is_ok()
}

/// The switches in effect: those [`set`] took, else the defaults.
pub fn get() -> &'static KernelSwitches {
    SWITCHES.get_or_init(KernelSwitches::default)
}
