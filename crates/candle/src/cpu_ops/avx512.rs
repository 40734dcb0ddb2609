//! Sixteen-lane pieces the AVX-512 kernels share (the attention heads of
//! [`crate::cpu_attention`]), and the feed-forward's bias, exact GELU and bf16x3 split written with
//! them.
//!
//! Why the GELU here, when [`super::bias_act_then_split`] is the same thing compiled from plain
//! Rust: the compiler keeps Rust's separate multiplies and adds (no fused multiply-add without
//! being asked) and divides for erf's `1 / (1 + p·|x|)`; on a Xeon a 16-lane division costs about
//! as much as the rest of the GELU (`perf`: 4 `vdivps` and no FMA in that pass, 6.4% of
//! a bf16x3 run). Here the polynomials are FMAs and the reciprocal is `vrcp14ps` with one Newton
//! step (relative error about 2^-28, below f32's rounding).

use std::arch::x86_64::*;

use super::{bf16_pair, gelu_erf_one, EXP_MAX, EXP_MIN, EXP_POLY, LN2_HI, LN2_LO, ROUND_SHIFT};

/// [`super::exp_approx`] on sixteen lanes.
///
/// # Safety
/// The CPU must have AVX-512F (its callers enable it).
#[inline(always)]
pub(crate) unsafe fn exp16(x: __m512) -> __m512 {
    let x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(EXP_MAX)), _mm512_set1_ps(EXP_MIN));
    let shift = _mm512_set1_ps(ROUND_SHIFT);
    let t = _mm512_fmadd_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E), shift);
    let n = _mm512_sub_ps(t, shift);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
    let mut p = _mm512_set1_ps(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    }
    // n sits in the low mantissa bits of t: t's bits minus the shift's are n, exactly.
    let n = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(shift));
    let two_n = _mm512_slli_epi32::<23>(_mm512_add_epi32(n, _mm512_set1_epi32(127)));
    _mm512_mul_ps(p, _mm512_castsi512_ps(two_n))
}

/// The first `n` of 16 lanes.
pub(crate) fn lanes(n: usize) -> __mmask16 {
    ((1u32 << n.min(16)) - 1) as __mmask16
}

/// The high and low bf16s of 16 f32s ([`super::bf16_pair`] on sixteen lanes, with AVX512-BF16's
/// round-to-nearest-even conversion).
///
/// # Safety
/// The CPU must have AVX-512F and AVX512-BF16 (its callers enable them).
#[inline(always)]
pub(crate) unsafe fn split16(x: __m512) -> (__m256i, __m256i) {
    // SAFETY: 16 bf16s and 16 u16s are the same 256 bits.
    let bits = |v: __m256bh| unsafe { std::mem::transmute::<__m256bh, __m256i>(v) };
    let hi = bits(_mm512_cvtneps_pbh(x));
    let back = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(hi)));
    (hi, bits(_mm512_cvtneps_pbh(_mm512_sub_ps(x, back))))
}

/// [`super::gelu_erf_one`] on sixteen lanes: erf after Abramowitz & Stegun 7.1.26 as there, with
/// FMAs and the reciprocal by `vrcp14ps` and a Newton step.
///
/// # Safety
/// The CPU must have AVX-512F (its callers enable it).
#[inline(always)]
unsafe fn gelu_erf16(x: __m512) -> __m512 {
    let u = _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::FRAC_1_SQRT_2));
    // erf is 1 to f32's precision well before |u| = 10; the bound keeps 1 / (1 + p·|u|) finite.
    let a = _mm512_min_ps(_mm512_abs_ps(u), _mm512_set1_ps(10.0));
    let one = _mm512_set1_ps(1.0);
    let d = _mm512_fmadd_ps(a, _mm512_set1_ps(0.327_591_1), one);
    let r = _mm512_rcp14_ps(d);
    let t = _mm512_fmadd_ps(_mm512_fnmadd_ps(d, r, one), r, r);
    let mut p = _mm512_set1_ps(1.061_405_4);
    for c in [-1.453_152_1, 1.421_413_8, -0.284_496_72, 0.254_829_6] {
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c));
    }
    let y = _mm512_fnmadd_ps(_mm512_mul_ps(p, t), exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a)), one);
    // erf takes u's sign, as `copysign` in the scalar form (y can round to a tiny negative at 0).
    let sign = _mm512_and_si512(_mm512_castps_si512(u), _mm512_set1_epi32(i32::MIN));
    let erf = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(_mm512_abs_ps(y)), sign));
    let half = _mm512_mul_ps(x, _mm512_set1_ps(0.5));
    _mm512_fmadd_ps(half, erf, half)
}

/// [`gelu_erf16`] over whole vectors of `xs`, for the tests.
#[cfg(test)]
#[target_feature(enable = "avx512f")]
pub(crate) fn gelu_erf_lanes(xs: &mut [f32]) {
    for chunk in xs.chunks_exact_mut(16) {
        // SAFETY: 16 f32s read and written in place.
        unsafe { _mm512_storeu_ps(chunk.as_mut_ptr(), gelu_erf16(_mm512_loadu_ps(chunk.as_ptr()))) };
    }
}

/// [`super::bias_act_split_bf16x3`] for the exact GELU: for each `bias.len()`-wide row of `rows`,
/// GELU(row + bias) split into `dst` (the row's high bf16s twice, then its low ones).
///
/// # Safety
/// The CPU has AVX-512F and AVX512-BF16.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(crate) unsafe fn bias_gelu_erf_split_bf16x3(rows: &[f32], bias: &[f32], dst: &mut [u16]) {
    assert_eq!(rows.len() * 3, dst.len(), "three bf16s for each f32");
    let width = bias.len();
    let whole = width / 16 * 16;
    for (row, out) in rows.chunks_exact(width).zip(dst.chunks_exact_mut(3 * width)) {
        // SAFETY: columns c..c + 16 ≤ whole ≤ width of the row, the bias and each third of `out`.
        unsafe {
            for c in (0..whole).step_by(16) {
                let x = _mm512_add_ps(_mm512_loadu_ps(row.as_ptr().add(c)), _mm512_loadu_ps(bias.as_ptr().add(c)));
                let (hi, lo) = split16(gelu_erf16(x));
                _mm256_storeu_si256(out.as_mut_ptr().add(c).cast(), hi);
                _mm256_storeu_si256(out.as_mut_ptr().add(width + c).cast(), hi);
                _mm256_storeu_si256(out.as_mut_ptr().add(2 * width + c).cast(), lo);
            }
        }
        for c in whole..width {
            let (hi, lo) = bf16_pair(gelu_erf_one(row[c] + bias[c]));
            (out[c], out[width + c], out[2 * width + c]) = (hi, hi, lo);
        }
    }
}
