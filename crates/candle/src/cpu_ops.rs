//! CPU kernels for the two element-wise steps that dominate an encoder after the matmuls.
//!
//! Why: profiling the BERT forward on a 2-core machine showed about a fifth of the time in scalar
//! `erff` (GELU) and `expf` (softmax) calls, one libm call per element. These versions use a
//! polynomial exp (relative error about 2e-7) written as branch-free loops that the compiler
//! vectorises (AVX2 + FMA chosen at run time), and split rows across threads. AVX-512 is used where the CPU has it. The masked softmax
//! also applies the scale and the key mask of each slot in the same pass, and never exponentiates a
//! pad key. On other devices the model uses candle's own ops.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape};
use rayon::prelude::*;

/// e^x for |x| up to ~87, branch-free: 2^n · p(r) with x = n·ln2 + r.
#[inline(always)]
fn exp_approx(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // Round to nearest by the 1.5·2^23 trick: stays in vector registers, unlike `f32::round`.
    const SHIFT: f32 = 12_582_912.0;
    let n = (x * std::f32::consts::LOG2_E + SHIFT) - SHIFT;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    // Taylor/minimax polynomial of e^r on [-ln2/2, ln2/2].
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (0.166_666_67 + r * (0.041_666_41 + r * (0.008_333_452 + r * 0.001_395_833)))));
    let bits = ((n as i32 + 127) as u32) << 23;
    p * f32::from_bits(bits)
}

/// erf(x) after Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7).
#[inline(always)]
fn erf_approx(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let y = 1.0 - (((((1.061_405_4 * t - 1.453_152_1) * t) + 1.421_413_8) * t - 0.284_496_72) * t + 0.254_829_6) * t * exp_approx(-a * a);
    y.copysign(x)
}

#[inline(always)]
fn gelu_erf_slice(xs: &mut [f32]) {
    for x in xs.iter_mut() {
        *x = 0.5 * *x * (1.0 + erf_approx(*x * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// Lanes for the reductions: eight independent accumulators let the compiler use vector registers
/// (a single float accumulator must be summed in order and stays scalar).
const LANES: usize = 16;

#[inline(always)]
fn softmax_row(row: &mut [f32], real: usize, scale: f32) {
    let (keys, pads) = row.split_at_mut(real);
    let mut lane_max = [f32::NEG_INFINITY; LANES];
    let mut chunks = keys.chunks_exact(LANES);
    for c in chunks.by_ref() {
        for (m, &v) in lane_max.iter_mut().zip(c) {
            *m = if v > *m { v } else { *m };
        }
    }
    let mut max = chunks.remainder().iter().fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    for m in lane_max {
        max = if m > max { m } else { max };
    }
    let shift = max * scale;
    let mut lane_sum = [0f32; LANES];
    let mut chunks = keys.chunks_exact_mut(LANES);
    for c in chunks.by_ref() {
        for (s, v) in lane_sum.iter_mut().zip(c.iter_mut()) {
            *v = exp_approx(*v * scale - shift);
            *s += *v;
        }
    }
    let mut sum: f32 = 0.0;
    for v in chunks.into_remainder() {
        *v = exp_approx(*v * scale - shift);
        sum += *v;
    }
    sum += lane_sum.iter().sum::<f32>();
    let inv = 1.0 / sum;
    for v in keys.iter_mut() {
        *v *= inv;
    }
    pads.fill(0.0);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gelu_erf_avx512(xs: &mut [f32]) {
    gelu_erf_slice(xs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn softmax_row_avx512(row: &mut [f32], real: usize, scale: f32) {
    softmax_row(row, real, scale)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_erf_avx2(xs: &mut [f32]) {
    gelu_erf_slice(xs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn softmax_row_avx2(row: &mut [f32], real: usize, scale: f32) {
    softmax_row(row, real, scale)
}

#[derive(Clone, Copy, PartialEq)]
enum Simd {
    Avx512,
    Avx2,
    Portable,
}

fn simd() -> Simd {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return Simd::Avx512;
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return Simd::Avx2;
        }
    }
    Simd::Portable
}

fn gelu_erf_dispatch(simd: Simd, xs: &mut [f32]) {
    // Safety: each variant runs only where `simd()` found its instructions.
    #[cfg(target_arch = "x86_64")]
    match simd {
        Simd::Avx512 => return unsafe { gelu_erf_avx512(xs) },
        Simd::Avx2 => return unsafe { gelu_erf_avx2(xs) },
        Simd::Portable => {}
    }
    let _ = simd;
    gelu_erf_slice(xs)
}

fn softmax_row_dispatch(simd: Simd, row: &mut [f32], real: usize, scale: f32) {
    // Safety: each variant runs only where `simd()` found its instructions.
    #[cfg(target_arch = "x86_64")]
    match simd {
        Simd::Avx512 => return unsafe { softmax_row_avx512(row, real, scale) },
        Simd::Avx2 => return unsafe { softmax_row_avx2(row, real, scale) },
        Simd::Portable => {}
    }
    let _ = simd;
    softmax_row(row, real, scale)
}

fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("{op}: only f32 is implemented on the CPU");
    };
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => candle_core::bail!("{op}: input must be contiguous"),
    }
}

/// Rows handed to one thread at a time: large enough to amortise the hand-off.
const ROWS_PER_TASK: usize = 64;

/// GELU with the exact (erf) form, as BERT's `hidden_act: "gelu"`.
pub struct GeluErf;

impl CustomOp1 for GeluErf {
    fn name(&self) -> &'static str {
        "warpfold-gelu-erf"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let mut out = contiguous_f32(storage, layout, self.name())?.to_vec();
        let simd = simd();
        out.par_chunks_mut(16 * 1024).for_each(|chunk| gelu_erf_dispatch(simd, chunk));
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// Softmax over the last dimension of `(n, heads, s, s)` attention scores, after multiplying by
/// `scale`, where only the first `real_lens[i]` keys of slot `i` count; pad keys get probability 0.
pub struct MaskedSoftmax {
    pub scale: f32,
    pub heads: usize,
    pub real_lens: Vec<u32>,
}

impl CustomOp1 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "warpfold-masked-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let dims = layout.shape().dims();
        let &[n, heads, s, s2] = dims else {
            candle_core::bail!("{}: expected (n, heads, s, s), got {dims:?}", self.name());
        };
        if s != s2 || heads != self.heads || n != self.real_lens.len() {
            candle_core::bail!("{}: shape {dims:?} does not match {} slots of {} heads", self.name(), self.real_lens.len(), self.heads);
        }
        let mut out = contiguous_f32(storage, layout, self.name())?.to_vec();
        let rows_per_slot = heads * s;
        let simd = simd();
        out.par_chunks_mut(s * ROWS_PER_TASK).enumerate().for_each(|(task, block)| {
            for (j, row) in block.chunks_mut(s).enumerate() {
                let row_index = task * ROWS_PER_TASK + j;
                let real = self.real_lens[row_index / rows_per_slot] as usize;
                softmax_row_dispatch(simd, row, real, self.scale);
            }
        });
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_erf_approximations_match_libm() {
        let mut worst_exp = 0f32;
        let mut worst_erf = 0f32;
        for i in -8000..=8000 {
            let x = i as f32 * 0.01;
            worst_exp = worst_exp.max(((exp_approx(x) - x.exp()) / x.exp()).abs());
            let erf_ref = libm_erf(x as f64) as f32;
            worst_erf = worst_erf.max((erf_approx(x) - erf_ref).abs());
        }
        assert!(worst_exp < 1e-6, "exp relative error {worst_exp}");
        assert!(worst_erf < 5e-7, "erf absolute error {worst_erf}");
    }

    /// erf by its Taylor series (f64), accurate far beyond f32 for |x| <= 3 and clamped beyond.
    fn libm_erf(x: f64) -> f64 {
        if x.abs() > 4.0 {
            return x.signum();
        }
        let mut sum = 0.0;
        let mut term = x;
        for n in 0..200 {
            sum += term / (2 * n + 1) as f64;
            term *= -x * x / (n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn masked_softmax_ignores_pad_keys_and_rows_sum_to_one() {
        use candle_core::{Device, Tensor};
        let scores = Tensor::arange(0f32, 2.0 * 1.0 * 3.0 * 3.0, &Device::Cpu).unwrap().reshape((2, 1, 3, 3)).unwrap();
        let op = MaskedSoftmax { scale: 0.5, heads: 1, real_lens: vec![3, 2] };
        let flat: Vec<f32> = scores.apply_op1_no_bwd(&op).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        for row in flat.chunks(3).take(3) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
            let e: Vec<f32> = [0.0f32, 0.5, 1.0].iter().map(|d| (d - 1.0f32).exp()).collect();
            let z: f32 = e.iter().sum();
            assert!((row[0] - e[0] / z).abs() < 1e-6 && (row[2] - e[2] / z).abs() < 1e-6);
        }
        for row in flat.chunks(3).skip(3) {
            assert_eq!(row[2], 0.0, "pad key has probability 0");
            assert!((row[0] + row[1] - 1.0).abs() < 1e-6);
        }
    }
}
