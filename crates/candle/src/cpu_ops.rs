//! Row kernels of the CPU encoder ([`crate::bert_cpu`]): GELU, softmax, layer norm, bias add.
//!
//! Why: profiling the BERT forward on a 2-core machine showed about a fifth of the time in scalar
//! `erff` (GELU) and `expf` (softmax) calls, one libm call per element. These versions use a
//! polynomial exp (relative error about 2e-7) written as branch-free loops that the compiler
//! vectorises; [`simd_kernel!`] compiles each kernel three times (AVX-512, AVX2 + FMA, portable) and
//! picks one at run time from what the CPU has. They work on one row or one block of rows: the
//! caller splits the work across threads, so a block is still in cache from the matmul before it.

use crate::activation::Activation;

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512;

/// [`exp_approx`]'s range: below `EXP_MIN` e^x is taken at `EXP_MIN` (≈ 1.6e-38), above `EXP_MAX`
/// at `EXP_MAX`.
pub(crate) const EXP_MIN: f32 = -87.0;
pub(crate) const EXP_MAX: f32 = 88.0;
/// ln 2 in two parts (high part exact in f32), for the range reduction x - n·ln2.
pub(crate) const LN2_HI: f32 = 0.693_145_75;
pub(crate) const LN2_LO: f32 = 1.428_606_8e-6;
/// 1.5·2^23: adding it rounds an f32 of magnitude below 2^22 to an integer, which then sits in the
/// low bits of the sum's mantissa.
pub(crate) const ROUND_SHIFT: f32 = 12_582_912.0;
/// Taylor/minimax polynomial of e^r on [-ln2/2, ln2/2], coefficients of r^6 down to r^0 (Horner's
/// order).
pub(crate) const EXP_POLY: [f32; 7] = [0.001_395_833, 0.008_333_452, 0.041_666_41, 0.166_666_67, 0.5, 1.0, 1.0];

/// `v` rounded to the nearest bf16 (ties to even), as its 16 bits: the upper half of an f32. Finite
/// inputs only (the encoder's activations and weights), which is what keeps it branch-free.
#[inline(always)]
pub(crate) fn bf16(v: f32) -> u16 {
    let bits = v.to_bits();
    (bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

/// e^x for |x| up to ~87, branch-free: 2^n · p(r) with x = n·ln2 + r.
#[inline(always)]
pub(crate) fn exp_approx(x: f32) -> f32 {
    let x = x.clamp(EXP_MIN, EXP_MAX);
    // Round to nearest by the shift trick: stays in vector registers, unlike `f32::round`.
    let t = x * std::f32::consts::LOG2_E + ROUND_SHIFT;
    let n = t - ROUND_SHIFT;
    let r = x - n * LN2_HI - n * LN2_LO;
    let c = EXP_POLY;
    let p = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) * r + c[6];
    // 2^n from n's bits in t's mantissa (t's bits minus the shift's are n, exactly): integer lanes.
    // `n as i32` would be a saturating conversion, which the compiler does one lane at a time (it
    // made GELU 6% of a CPU bin's time).
    let bits = t.to_bits().wrapping_sub(ROUND_SHIFT.to_bits()).wrapping_add(127) << 23;
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

/// tanh(x) = 1 - 2 / (e^{2x} + 1), through [`exp_approx`].
#[inline(always)]
fn tanh_approx(x: f32) -> f32 {
    1.0 - 2.0 / (exp_approx(2.0 * x) + 1.0)
}

/// Lanes for the reductions: eight independent accumulators let the compiler use vector registers
/// (a single float accumulator must be summed in order and stays scalar).
const LANES: usize = 16;

/// The sum of `xs` in [`LANES`] independent accumulators.
#[inline(always)]
fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in chunks.by_ref() {
        for (s, &v) in lanes.iter_mut().zip(c) {
            *s += f(v);
        }
    }
    chunks.remainder().iter().map(|&v| f(v)).sum::<f32>() + lanes.iter().sum::<f32>()
}

/// Defines `pub(crate) fn $name(simd: Simd, args...)`: the body compiled for AVX-512, for AVX2 + FMA
/// and portably, the variant chosen by `simd` (from [`simd`]).
macro_rules! simd_kernel {
    ($(#[$meta:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $body:block) => {
        $(#[$meta])*
        pub(crate) fn $name(simd: Simd, $($arg: $ty),*) {
            #[inline(always)]
            fn portable($($arg: $ty),*) $body
            /// # Safety
            /// The CPU must have AVX-512F ([`simd`] checks it).
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f")]
            unsafe fn avx512($($arg: $ty),*) {
                portable($($arg),*)
            }
            /// # Safety
            /// The CPU must have AVX2 and FMA ([`simd`] checks them).
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2($($arg: $ty),*) {
                portable($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            match simd {
                // SAFETY: `simd()` returned these variants only after detecting their instructions.
                Simd::Avx512 => return unsafe { avx512($($arg),*) },
                // SAFETY: as above.
                Simd::Avx2 => return unsafe { avx2($($arg),*) },
                Simd::Portable => {}
            }
            let _ = simd;
            portable($($arg),*)
        }
    };
}

simd_kernel! {
    /// `dst = src` rounded to bf16 ([`bf16`]), lane by lane: the operands of the bf16 products.
    fn to_bf16(src: &[f32], dst: &mut [u16]) {
        assert_eq!(src.len(), dst.len(), "as many bf16s as f32s");
        for (to, &from) in dst.iter_mut().zip(src) {
            *to = bf16(from);
        }
    }
}

/// `v` as two bf16s whose sum is `v` to about 16 significant bits: `v` rounded ([`bf16`]), and what
/// that rounding left (exact in f32) rounded in turn. Relative error at most about 2^-16. Finite
/// inputs below bf16's largest finite value (~3.39e38; the encoder's are far below it).
#[inline(always)]
pub(crate) fn bf16_pair(v: f32) -> (u16, u16) {
    let hi = bf16(v);
    (hi, bf16(v - f32::from_bits(u32::from(hi) << 16)))
}

simd_kernel! {
    /// For each `inputs`-wide row of `src`, a `3 · inputs`-wide row of `dst`: the row's high bf16s
    /// twice, then its low ones ([`bf16_pair`]). Against a weight split the same way and laid out
    /// high, low, high along its inputs, one bf16 product of the tripled width sums
    /// hi·hi + hi·lo + lo·hi: the f32 product to about 16 bits ([`crate::bert::CpuPrecision::Bf16x3`]).
    fn split_bf16x3(src: &[f32], inputs: usize, dst: &mut [u16]) {
        assert_eq!(src.len() * 3, dst.len(), "three bf16s for each f32");
        for (row, out) in src.chunks_exact(inputs).zip(dst.chunks_exact_mut(3 * inputs)) {
            split_row(row.iter().copied(), out);
        }
    }
}

/// `values` (one row) split into `out` as [`split_bf16x3`] lays a row out.
#[inline(always)]
fn split_row(values: impl Iterator<Item = f32>, out: &mut [u16]) {
    let inputs = out.len() / 3;
    let (first, rest) = out.split_at_mut(inputs);
    let (second, low) = rest.split_at_mut(inputs);
    for (((v, a), b), l) in values.zip(first.iter_mut()).zip(second.iter_mut()).zip(low.iter_mut()) {
        let (hi, lo) = bf16_pair(v);
        (*a, *b, *l) = (hi, hi, lo);
    }
}

/// For each `bias.len()`-wide row of `rows`: `act(row + bias)` split into `dst` as
/// [`split_bf16x3`] lays it out. One pass for what the feed-forward does between its two bf16x3
/// products (bias, GELU, split: three passes over the intermediate, 9% of a bin's cycles in
/// `perf`). The exact GELU runs through [`avx512::bias_gelu_erf_split_bf16x3`] where the CPU
/// has AVX-512 and AVX512-BF16 (as AMX's CPUs do), else [`bias_act_then_split`].
pub(crate) fn bias_act_split_bf16x3(simd: Simd, rows: &[f32], bias: &[f32], act: Activation, dst: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if act == Activation::GeluErf && simd == Simd::Avx512 && std::is_x86_feature_detected!("avx512bf16") {
        // SAFETY: AVX-512F (`simd`) and AVX512-BF16, checked.
        return unsafe { avx512::bias_gelu_erf_split_bf16x3(rows, bias, dst) };
    }
    bias_act_then_split(simd, rows, bias, act, dst)
}

simd_kernel! {
    /// [`bias_act_split_bf16x3`] for any activation, compiled from plain Rust.
    fn bias_act_then_split(rows: &[f32], bias: &[f32], act: Activation, dst: &mut [u16]) {
        assert_eq!(rows.len() * 3, dst.len(), "three bf16s for each f32");
        let width = bias.len();
        for (row, out) in rows.chunks_exact(width).zip(dst.chunks_exact_mut(3 * width)) {
            let biased = row.iter().zip(bias).map(|(v, b)| v + b);
            match act {
                Activation::GeluErf => split_row(biased.map(gelu_erf_one), out),
                Activation::GeluTanh => split_row(biased.map(gelu_tanh_one), out),
                Activation::Relu => split_row(biased.map(|v| v.max(0.0)), out),
            }
        }
    }
}

/// GELU, exact (erf) form.
#[inline(always)]
fn gelu_erf_one(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_approx(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU, tanh form.
#[inline(always)]
fn gelu_tanh_one(v: f32) -> f32 {
    const C: f32 = 0.797_884_6; // sqrt(2 / pi)
    0.5 * v * (1.0 + tanh_approx(C * (v + 0.044_715 * v * v * v)))
}

simd_kernel! {
    /// GELU in place, exact (erf) form: BERT's `hidden_act: "gelu"`.
    fn gelu_erf(xs: &mut [f32]) {
        for x in xs.iter_mut() {
            *x = gelu_erf_one(*x);
        }
    }
}

simd_kernel! {
    /// GELU in place, tanh form (`gelu_new`, `gelu_pytorch_tanh`).
    fn gelu_tanh(xs: &mut [f32]) {
        for x in xs.iter_mut() {
            *x = gelu_tanh_one(*x);
        }
    }
}

simd_kernel! {
    /// Each `bias.len()`-wide row of `rows` plus `bias`.
    fn add_bias(rows: &mut [f32], bias: &[f32]) {
        for row in rows.chunks_exact_mut(bias.len()) {
            for (v, b) in row.iter_mut().zip(bias) {
                *v += b;
            }
        }
    }
}

simd_kernel! {
    /// Layer norm of each `gamma.len()`-wide row of `rows`, in place (mean, then the variance around
    /// it: two passes, as `candle_nn::LayerNorm`).
    fn layer_norm(rows: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
        let width = gamma.len() as f32;
        for row in rows.chunks_exact_mut(gamma.len()) {
            let mean = lane_sum(row, |v| v) / width;
            let var = lane_sum(row, |v| (v - mean) * (v - mean)) / width;
            let inv = 1.0 / (var + eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

simd_kernel! {
    /// Softmax of `row[..real]` after multiplying by `scale`; `row[real..]` (pad keys) set to 0 and
    /// never exponentiated.
    fn softmax(row: &mut [f32], real: usize, scale: f32) {
        softmax_row(row, real, scale)
    }
}

simd_kernel! {
    /// For each `real`-wide row of `scores`: e^(scale·s − the row's largest) rounded to bf16 in the
    /// same place of `probs`, and 1 / the row's sum of those (as rounded) in `inv_sums`. The softmax
    /// left unnormalised, for bf16 products whose output rows are scaled by `inv_sums` after.
    fn exp_rows_bf16(scores: &[f32], real: usize, scale: f32, probs: &mut [u16], inv_sums: &mut [f32]) {
        assert_eq!((scores.len(), probs.len()), (inv_sums.len() * real, inv_sums.len() * real), "whole rows");
        for ((row, out), inv) in scores.chunks_exact(real).zip(probs.chunks_exact_mut(real)).zip(inv_sums.iter_mut()) {
            let shift = row_max(row) * scale;
            let exp16 = |v: f32, sum: &mut f32| {
                let p = bf16(exp_approx(v * scale - shift));
                *sum += f32::from_bits(u32::from(p) << 16);
                p
            };
            let mut lane_sum = [0f32; LANES];
            let (mut keys, mut outs) = (row.chunks_exact(LANES), out.chunks_exact_mut(LANES));
            for (c, o) in keys.by_ref().zip(outs.by_ref()) {
                for ((s, &v), p) in lane_sum.iter_mut().zip(c).zip(o.iter_mut()) {
                    *p = exp16(v, s);
                }
            }
            let mut sum = 0f32;
            for (&v, p) in keys.remainder().iter().zip(outs.into_remainder()) {
                *p = exp16(v, &mut sum);
            }
            *inv = 1.0 / (sum + lane_sum.iter().sum::<f32>());
        }
    }
}

/// The largest of `keys` (−∞ for none), through LANES partial maxima the compiler vectorises.
#[inline(always)]
fn row_max(keys: &[f32]) -> f32 {
    let mut lane_max = [f32::NEG_INFINITY; LANES];
    let mut chunks = keys.chunks_exact(LANES);
    for c in chunks.by_ref() {
        for (m, &v) in lane_max.iter_mut().zip(c) {
            *m = if v > *m { v } else { *m };
        }
    }
    let max = chunks.remainder().iter().fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    lane_max.into_iter().fold(max, |max, m| if m > max { m } else { max })
}

#[inline(always)]
fn softmax_row(row: &mut [f32], real: usize, scale: f32) {
    let (keys, pads) = row.split_at_mut(real);
    let shift = row_max(keys) * scale;
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

/// Which compiled variant of a [`simd_kernel!`] runs.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Simd {
    Avx512,
    Avx2,
    Portable,
}

/// The widest instruction set this CPU has, of those the kernels are compiled for.
pub(crate) fn simd() -> Simd {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_with_ties_to_even() {
        let up = |v: f32| f32::from_bits(u32::from(bf16(v)) << 16);
        // Exactly representable values stay; bf16 keeps 8 significant bits.
        for v in [0.0, -0.0, 1.0, -2.5, 0.15625, 1.5 * 2f32.powi(100), -1.5 * 2f32.powi(-126)] {
            assert_eq!(up(v).to_bits(), v.to_bits(), "{v}");
        }
        // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even (1.0); just above it, up.
        assert_eq!(up(1.0 + 2f32.powi(-8)), 1.0);
        assert_eq!(up(1.0 + 2f32.powi(-8) + 2f32.powi(-20)), 1.0 + 2f32.powi(-7));
        // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
        assert_eq!(up(1.0 + 3.0 * 2f32.powi(-8)), 1.0 + 2f32.powi(-6));
        // Half a unit in the last place: relative error at most 2^-8, over a sweep of magnitudes and signs.
        for i in -3000..3000 {
            let v = (i as f32 * 0.37).sin() * 10f32.powi(i % 7 - 3);
            assert!((up(v) - v).abs() <= v.abs() * 2f32.powi(-8), "{v} -> {}", up(v));
        }
    }

    #[test]
    fn bf16_pairs_keep_sixteen_bits_and_rows_split_high_high_low() {
        let up = |b: u16| f32::from_bits(u32::from(b) << 16);
        for i in -3000..3000 {
            let v = (i as f32 * 0.37).sin() * 10f32.powi(i % 7 - 3);
            let (hi, lo) = bf16_pair(v);
            assert_eq!(hi, bf16(v), "the high half is the plain rounding");
            assert!((up(hi) + up(lo) - v).abs() <= v.abs() * 2f32.powi(-16), "{v}: {} + {}", up(hi), up(lo));
        }
        // A value bf16 holds exactly has nothing left over.
        assert_eq!(bf16_pair(-2.5), (bf16(-2.5), 0));
        let src: Vec<f32> = (0..2 * 19).map(|i| (i as f32 * 1.3).cos() * 3.1 + 0.001 * i as f32).collect();
        for simd in [simd(), Simd::Portable] {
            let mut dst = vec![0u16; src.len() * 3];
            split_bf16x3(simd, &src, 19, &mut dst);
            for (row, out) in src.chunks(19).zip(dst.chunks(57)) {
                for (c, &v) in row.iter().enumerate() {
                    let (hi, lo) = bf16_pair(v);
                    assert_eq!((out[c], out[19 + c], out[38 + c]), (hi, hi, lo), "column {c} of {v}");
                }
            }
        }
    }

    #[test]
    fn bias_activation_and_split_in_one_pass_equal_the_three_passes() {
        // Three rows of 37 columns (whole vectors and a remainder), values across GELU's bend and
        // far enough out that erf's exponential underflows.
        let width = 37;
        let rows: Vec<f32> = (0..3 * width).map(|i| (i as f32 * 0.71).sin() * 4.0 * (1.0 + (i % 5 == 0) as i32 as f32 * 3.0)).collect();
        let bias: Vec<f32> = (0..width).map(|i| (i as f32 * 0.3).cos() - 0.2).collect();
        for act in [Activation::GeluErf, Activation::GeluTanh, Activation::Relu] {
            for simd in [simd(), Simd::Portable] {
                let mut separate = rows.clone();
                add_bias(simd, &mut separate, &bias);
                match act {
                    Activation::GeluErf => gelu_erf(simd, &mut separate),
                    Activation::GeluTanh => gelu_tanh(simd, &mut separate),
                    Activation::Relu => separate.iter_mut().for_each(|v| *v = v.max(0.0)),
                }
                let mut want = vec![0u16; 3 * rows.len()];
                split_bf16x3(simd, &separate, width, &mut want);
                let mut got = vec![1u16; 3 * rows.len()];
                bias_act_then_split(simd, &rows, &bias, act, &mut got);
                assert_eq!(got, want, "{act:?}, {simd:?}");
                assert!(want.iter().any(|&b| b != 0), "{act:?}: something to compare");
                // The entry point: the same, except for the exact GELU where its AVX-512 kernel
                // runs (FMAs and a reciprocal estimate where the passes divide): there its own GELU
                // values, within f32 rounding of the passes' over whole vectors (the remainder
                // through the scalar form), split exactly.
                let mut entry = vec![1u16; 3 * rows.len()];
                bias_act_split_bf16x3(simd, &rows, &bias, act, &mut entry);
                #[cfg(target_arch = "x86_64")]
                if act == Activation::GeluErf && simd == Simd::Avx512 && std::is_x86_feature_detected!("avx512bf16") {
                    eprintln!("the AVX-512 GELU kernel runs here");
                    let mut fast = Vec::with_capacity(rows.len());
                    for (row, biased) in rows.chunks(width).zip(separate.chunks(width)) {
                        let mut lanes: Vec<f32> = row.iter().zip(&bias).map(|(v, b)| v + b).collect();
                        let whole = width / 16 * 16;
                        // SAFETY: AVX-512F, checked with AVX512-BF16 above (`simd`).
                        unsafe { avx512::gelu_erf_lanes(&mut lanes[..whole]) };
                        for (c, (&f, &s)) in lanes[..whole].iter().zip(biased).enumerate() {
                            assert!((f - s).abs() <= 1e-6 * s.abs().max(1.0), "column {c}: {f} against {s}");
                        }
                        fast.extend_from_slice(&lanes[..whole]);
                        fast.extend_from_slice(&biased[whole..]);
                    }
                    let mut split = vec![0u16; 3 * rows.len()];
                    split_bf16x3(Simd::Portable, &fast, width, &mut split);
                    assert_eq!(entry, split, "{simd:?}: the kernel's values split");
                    continue;
                }
                assert_eq!(entry, want, "{act:?}, {simd:?}");
            }
        }
    }

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
        for simd in [simd(), Simd::Portable] {
            let mut full = [0.0f32, 1.0, 2.0];
            softmax(simd, &mut full, 3, 0.5);
            assert!((full.iter().sum::<f32>() - 1.0).abs() < 1e-6);
            let e: Vec<f32> = [0.0f32, 0.5, 1.0].iter().map(|d| (d - 1.0f32).exp()).collect();
            let z: f32 = e.iter().sum();
            assert!((full[0] - e[0] / z).abs() < 1e-6 && (full[2] - e[2] / z).abs() < 1e-6);
            let mut padded = [3.0f32, 4.0, 1e30];
            softmax(simd, &mut padded, 2, 0.5);
            assert_eq!(padded[2], 0.0, "pad key has probability 0");
            assert!((padded[0] + padded[1] - 1.0).abs() < 1e-6);
        }
    }

    #[test]
    fn bf16_exp_rows_times_their_inverse_sums_are_the_softmax() {
        // Rows of 37 (two full lanes of 16 and a remainder of 5), with large and negative scores.
        let real = 37;
        let scores: Vec<f32> = (0..3 * real).map(|i| ((i * 7919) % 113) as f32 * 0.61 - 30.0).collect();
        for simd in [simd(), Simd::Portable] {
            let (mut probs, mut inv) = (vec![0u16; scores.len()], vec![0f32; 3]);
            exp_rows_bf16(simd, &scores, real, 0.3, &mut probs, &mut inv);
            for (r, row) in scores.chunks(real).enumerate() {
                let mut reference = row.to_vec();
                softmax(simd, &mut reference, real, 0.3);
                for (c, want) in reference.iter().enumerate() {
                    let got = f32::from_bits(u32::from(probs[r * real + c]) << 16) * inv[r];
                    assert!((got - want).abs() <= want * 2f32.powi(-7) + 1e-7, "row {r}, key {c}: {got} against {want}");
                }
            }
        }
    }

    #[test]
    fn row_kernels_match_their_definitions_on_every_instruction_set() {
        let xs: Vec<f32> = (0..77).map(|i| (i as f32 - 38.0) * 0.17).collect();
        let (gamma, beta): (Vec<f32>, Vec<f32>) = (0..11).map(|i| (1.0 + i as f32 * 0.1, i as f32 * -0.05)).unzip();
        for simd in [simd(), Simd::Avx2, Simd::Portable] {
            if simd == Simd::Avx2 && !(cfg!(target_arch = "x86_64") && self::simd() != Simd::Portable) {
                continue;
            }
            let mut g = xs.clone();
            gelu_tanh(simd, &mut g);
            for (&x, &y) in xs.iter().zip(&g) {
                let want = 0.5 * x * (1.0 + (0.797_884_6 * (x + 0.044_715 * x * x * x)).tanh());
                assert!((y - want).abs() < 1e-5, "gelu_tanh({x}) = {y}, want {want}");
            }
            let mut rows = xs.clone();
            add_bias(simd, &mut rows, &beta);
            layer_norm(simd, &mut rows, &gamma, &beta, 1e-12);
            for (r, row) in rows.chunks_exact(11).enumerate() {
                let src: Vec<f32> = xs[r * 11..r * 11 + 11].iter().zip(&beta).map(|(x, b)| x + b).collect();
                let mean = src.iter().sum::<f32>() / 11.0;
                let sd = (src.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 11.0 + 1e-12).sqrt();
                for i in 0..11 {
                    let want = (src[i] - mean) / sd * gamma[i] + beta[i];
                    assert!((row[i] - want).abs() < 1e-4, "layer norm row {r} col {i}: {} vs {want}", row[i]);
                }
            }
        }
    }
}

/// Where one query head reads its key/value head in a decode step's cache ([`cached_head`]):
/// every cached row is `stride` floats, this head's part of it starts at `offset`.
pub(crate) struct CachedHead<'a> {
    pub(crate) keys: &'a [f32],
    pub(crate) values: &'a [f32],
    pub(crate) stride: usize,
    pub(crate) offset: usize,
    pub(crate) scale: f32,
}

simd_kernel! {
    /// One query head's attention over its sequence's cached keys and values, read in place:
    /// `out = softmax(scale · q·Kᵀ) · V` over the rows `rows` of the cache. `scores` is scratch,
    /// at least `rows.len()` long.
    fn cached_head(q: &[f32], cache: &CachedHead, rows: &[u32], scores: &mut [f32], out: &mut [f32]) {
        let (hd, stride, offset) = (q.len(), cache.stride, cache.offset);
        let mut best = f32::NEG_INFINITY;
        for (s, &row) in scores.iter_mut().zip(rows) {
            let k = &cache.keys[row as usize * stride + offset..][..hd];
            let mut lanes = [0f32; 16];
            for (qc, kc) in q.chunks_exact(16).zip(k.chunks_exact(16)) {
                for i in 0..16 {
                    lanes[i] += qc[i] * kc[i];
                }
            }
            let tail: f32 = q.chunks_exact(16).remainder().iter().zip(k.chunks_exact(16).remainder()).map(|(a, b)| a * b).sum();
            *s = (lanes.iter().sum::<f32>() + tail) * cache.scale;
            best = best.max(*s);
        }
        let mut total = 0f32;
        for s in scores[..rows.len()].iter_mut() {
            *s = (*s - best).exp();
            total += *s;
        }
        out.fill(0.0);
        for (&p, &row) in scores.iter().zip(rows) {
            let v = &cache.values[row as usize * stride + offset..][..hd];
            let p = p / total;
            for (o, &x) in out.iter_mut().zip(v) {
                *o += p * x;
            }
        }
    }
}
