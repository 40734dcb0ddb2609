//! One attention head of one sequence on the CPU, tiled for AVX2 + FMA.
//!
//! Why: through the gemm crate, the fused encoder's attention ([`crate::bert_cpu`]) ran at about a
//! third of the core's FMA peak on a Zen 3 EPYC (head size 32), and much of that time was the
//! softmax: three passes over the L × L scores (max; exponential and sum; scale by 1/sum). Here six
//! query rows at a time go through q·kᵀ, softmax and p·v while their scores are in L1: the q·kᵀ tiles
//! write the scores once, one pass exponentiates and sums them, and 1/sum scales the six output rows
//! instead of the L × L probabilities. On that EPYC, in the encoder's bins of eight 256-token
//! sequences: 66 → 96 GFLOP/s on both cores (BENCHMARKS.md, CPU embeddings).
//!
//! The tiles are 6 rows × 16 columns: twelve 256-bit accumulators, two loads and six broadcasts per
//! step, the shape of a register-blocked matrix product on a 16-register ISA. On AVX-512 they are
//! 12 rows × 32 columns: 24 of the 32 512-bit registers, twice the lanes per instruction (measured:
//! attention was a fifth of a bin's time on a Xeon once the weights' products ran on AMX). Head
//! sizes must be a multiple of 16, of 32 for the AVX-512 tiles ([`tiles_for`]); others (and CPUs
//! without AVX2 + FMA) take the gemm-crate path. The result equals the gemm-crate path to f32
//! rounding (the tests here and in `bert.rs`). The bf16x3 encoder runs the products on AMX's tiles
//! instead where they run ([`amx`]: about 16 bits of each f32, like its weights' products).

#[cfg(target_arch = "x86_64")]
mod amx;

/// Per-thread buffers: kᵀ of one head, and the scores of one block of rows; the AMX tiles' own.
#[derive(Default)]
pub(crate) struct Scratch {
    keys_t: Vec<f32>,
    pub(crate) scores: Vec<f32>,
    #[cfg(target_arch = "x86_64")]
    amx: amx::Staging,
}

/// The register tiles [`head`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tiles {
    /// 6 × 16 in 8-lane registers (AVX2 + FMA); head sizes a multiple of 16.
    Avx2,
    /// 12 × 32 in 16-lane registers (AVX-512F); head sizes a multiple of 32.
    Avx512,
    /// AMX's bf16 tiles with each f32 split in two (bf16x3, about 16 bits: [`amx`]); head sizes a
    /// multiple of 32. Never among [`tiles_for`]'s: only the bf16x3 encoder asks for it.
    AmxBf16x3,
}

impl Tiles {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tiles::Avx2 => "AVX2",
            Tiles::Avx512 => "AVX-512",
            Tiles::AmxBf16x3 => "AMX bf16x3",
        }
    }

    /// Whether these tiles run for head size `head_dim` on this CPU.
    pub(crate) fn run_here(self, head_dim: usize) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Tiles::Avx2 => {
                    head_dim > 0
                        && head_dim.is_multiple_of(16)
                        && std::is_x86_feature_detected!("avx2")
                        && std::is_x86_feature_detected!("fma")
                }
                Tiles::Avx512 => head_dim > 0 && head_dim.is_multiple_of(32) && crate::cpu_ops::simd() == crate::cpu_ops::Simd::Avx512,
                Tiles::AmxBf16x3 => {
                    head_dim > 0
                        && head_dim.is_multiple_of(32)
                        && crate::cpu_ops::simd() == crate::cpu_ops::Simd::Avx512
                        && std::is_x86_feature_detected!("avx512bf16")
                        && amx::ready()
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = head_dim;
            false
        }
    }
}

/// The widest tiles [`head`] runs for head size `head_dim` on this CPU, if any.
pub(crate) fn tiles_for(head_dim: usize) -> Option<Tiles> {
    [Tiles::Avx512, Tiles::Avx2].into_iter().find(|t| t.run_here(head_dim))
}

/// Softmax attention of one head over `len` tokens: `out[i] = Σ_j softmax_j(scale · q_i·k_j) v_j`,
/// rows of q, k and v `ld` floats apart (in place in a q/k/v projection), of `out` `ld_out` apart,
/// each `head_dim` wide.
///
/// # Safety
/// `tiles.run_here(head_dim)` is true; q, k and v each address `len` rows of `head_dim` readable f32s
/// `ld` apart, `out` `len` rows of `head_dim` writable f32s `ld_out` apart, which nothing else reads
/// or writes while this runs.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn head(
    tiles: Tiles,
    q: *const f32,
    k: *const f32,
    v: *const f32,
    ld: usize,
    out: *mut f32,
    ld_out: usize,
    len: usize,
    head_dim: usize,
    scale: f32,
    scratch: &mut Scratch,
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded from the caller's contract, which includes the tiles' instructions.
    unsafe {
        let h = x86::Head { q, k, v, ld, out, ld_out, len, head_dim, scale };
        match tiles {
            Tiles::Avx2 => x86::head(h, scratch),
            Tiles::Avx512 => x86_512::head512(h, scratch),
            Tiles::AmxBf16x3 => amx::head(&h, &mut scratch.amx),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (tiles, q, k, v, ld, out, ld_out, len, head_dim, scale, scratch);
        unreachable!("tiled attention runs only where `Tiles::run_here` said so: x86-64 with AVX2 + FMA")
    }
}

/// The body of a tiled head: kᵀ staged ([`x86::Head::stage`]), then `rows::<MR>` (the calling
/// module's) over each whole block of `MR` query rows and `rows::<R>` over the `R` rows left, for
/// each `R` in the list (every remainder of `MR`).
/// Expands to unsafe calls: the head's contract applies.
#[cfg(target_arch = "x86_64")]
macro_rules! by_row_blocks {
    ($h:ident, $scratch:ident, $mr:ident, $nr:ident, [$($r:literal),*]) => {{
        let padded = $h.stage($mr, $nr, $scratch);
        let (keys_t, scores) = ($scratch.keys_t.as_ptr(), $scratch.scores.as_mut_ptr());
        let mut i = 0;
        // Rows i..i + R < len of q and out; keys_t is head_dim × padded and scores MR × padded,
        // both ours.
        while i + $mr <= $h.len {
            rows::<$mr>(&$h, i, keys_t, padded, scores);
            i += $mr;
        }
        match $h.len - i {
            0 => {}
            $($r => rows::<$r>(&$h, i, keys_t, padded, scores),)*
            _ => unreachable!("fewer than MR rows are left"),
        }
    }};
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::Scratch;
    use crate::cpu_ops::{exp_approx, EXP_MAX, EXP_MIN, EXP_POLY, LN2_HI, LN2_LO, ROUND_SHIFT};
    use crate::cpu_panels::x86::{tile_sums, MR};
    use crate::cpu_panels::NR;

    pub(super) struct Head {
        pub q: *const f32,
        pub k: *const f32,
        pub v: *const f32,
        pub ld: usize,
        pub out: *mut f32,
        pub ld_out: usize,
        pub len: usize,
        pub head_dim: usize,
        pub scale: f32,
    }

    impl Head {
        /// Lays out kᵀ (head_dim × padded, `len` rounded up to whole tiles of `columns`, the columns
        /// past `len` zero) in `scratch` and sizes its scores for `rows` query rows; returns padded.
        ///
        /// # Safety
        /// `k` addresses `len` rows of `head_dim` readable f32s `ld` apart.
        pub(super) unsafe fn stage(&self, rows: usize, columns: usize, scratch: &mut Scratch) -> usize {
            let padded = self.len.div_ceil(columns) * columns;
            let keys_t = &mut scratch.keys_t;
            keys_t.clear();
            keys_t.resize(self.head_dim * padded, 0.0);
            for j in 0..self.len {
                // SAFETY: row j < len of k, head_dim wide (the caller's contract).
                let row = unsafe { std::slice::from_raw_parts(self.k.add(j * self.ld), self.head_dim) };
                for (d, &x) in row.iter().enumerate() {
                    keys_t[d * padded + j] = x;
                }
            }
            scratch.scores.resize(rows * padded, 0.0);
            padded
        }
    }

    /// [`exp_approx`] on eight lanes.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA (its callers enable them).
    #[inline(always)]
    unsafe fn exp8(x: __m256) -> __m256 {
        let x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(EXP_MAX)), _mm256_set1_ps(EXP_MIN));
        let shift = _mm256_set1_ps(ROUND_SHIFT);
        let t = _mm256_fmadd_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E), shift);
        let n = _mm256_sub_ps(t, shift);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
        let mut p = _mm256_set1_ps(EXP_POLY[0]);
        for &c in &EXP_POLY[1..] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
        }
        // n sits in the low mantissa bits of t: t's bits minus the shift's are n, exactly.
        let n = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(shift));
        let two_n = _mm256_slli_epi32::<23>(_mm256_add_epi32(n, _mm256_set1_epi32(127)));
        _mm256_mul_ps(p, _mm256_castsi256_ps(two_n))
    }

    /// `f` folded across the eight lanes of `v`, to one value.
    ///
    /// # Safety
    /// The CPU must have AVX (its callers enable AVX2).
    #[inline(always)]
    unsafe fn horizontal(v: __m256, f: impl Fn(__m128, __m128) -> __m128) -> f32 {
        let m = f(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let m = f(m, _mm_movehl_ps(m, m));
        _mm_cvtss_f32(f(m, _mm_shuffle_ps::<1>(m, m)))
    }

    /// One head's attention with AVX2 tiles.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA, and `h`'s pointers cover the rows and columns [`Head`] says.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn head(h: Head, scratch: &mut Scratch) {
        // SAFETY: the caller's contract.
        unsafe { by_row_blocks!(h, scratch, MR, NR, [1, 2, 3, 4, 5]) }
    }

    /// Query rows `first..first + R`: their scores against every key, softmax, and p·v into `out`.
    ///
    /// # Safety
    /// The CPU has the instructions of the enclosing kernel; rows `first..first + R` exist in `h`
    /// (its pointers cover them as [`Head`] says), `keys_t` holds the keys transposed (`head_dim`
    /// rows of `padded` floats) and `scores` room for `R × padded` floats.
    #[inline(always)]
    unsafe fn rows<const R: usize>(h: &Head, first: usize, keys_t: *const f32, padded: usize, scores: *mut f32) {
        // SAFETY: this function's contract (see its `# Safety`).
        unsafe {
            let q = h.q.add(first * h.ld);
            // scores (R × padded) = q (R × head_dim) · kᵀ (head_dim × padded)
            for col in (0..padded).step_by(NR) {
                let acc = tile_sums::<R>(q, h.ld, keys_t.add(col), padded, h.head_dim);
                for (r, acc) in acc.iter().enumerate() {
                    _mm256_storeu_ps(scores.add(r * padded + col), acc[0]);
                    _mm256_storeu_ps(scores.add(r * padded + col + 8), acc[1]);
                }
            }
            // Each row over its real keys: e^(scale · (s - max)) in place, and 1 / the sum.
            let whole = h.len / 8 * 8;
            let mut inv_sum = [0f32; R];
            for (r, inv_sum) in inv_sum.iter_mut().enumerate() {
                let row = scores.add(r * padded);
                let mut max8 = _mm256_set1_ps(f32::NEG_INFINITY);
                for j in (0..whole).step_by(8) {
                    max8 = _mm256_max_ps(max8, _mm256_loadu_ps(row.add(j)));
                }
                let max = (whole..h.len).fold(horizontal(max8, |a, b| _mm_max_ps(a, b)), |m, j| m.max(*row.add(j)));
                let (scale, shift) = (_mm256_set1_ps(h.scale), _mm256_set1_ps(max * h.scale));
                let mut sum8 = _mm256_setzero_ps();
                for j in (0..whole).step_by(8) {
                    let e = exp8(_mm256_fmsub_ps(_mm256_loadu_ps(row.add(j)), scale, shift));
                    _mm256_storeu_ps(row.add(j), e);
                    sum8 = _mm256_add_ps(sum8, e);
                }
                let mut sum = horizontal(sum8, |a, b| _mm_add_ps(a, b));
                for j in whole..h.len {
                    let e = exp_approx(*row.add(j) * h.scale - max * h.scale);
                    *row.add(j) = e;
                    sum += e;
                }
                *inv_sum = 1.0 / sum;
            }
            // out (R × head_dim) = e (R × len) · v (len × head_dim) / sum, 16 columns at a time.
            let out = h.out.add(first * h.ld_out);
            for col in (0..h.head_dim).step_by(NR) {
                let acc = tile_sums::<R>(scores, padded, h.v.add(col), h.ld, h.len);
                for (r, acc) in acc.iter().enumerate() {
                    let k = _mm256_set1_ps(inv_sum[r]);
                    _mm256_storeu_ps(out.add(r * h.ld_out + col), _mm256_mul_ps(acc[0], k));
                    _mm256_storeu_ps(out.add(r * h.ld_out + col + 8), _mm256_mul_ps(acc[1], k));
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86_512 {
    use std::arch::x86_64::*;

    use super::x86::Head;
    use super::Scratch;
    use crate::cpu_ops::avx512::{exp16, lanes};
    use crate::cpu_panels::x86::{tile_sums512, MR512 as MR, NR512 as NR};

    /// One head's attention with AVX-512 tiles.
    ///
    /// # Safety
    /// The CPU must have AVX-512F, and `h`'s pointers cover the rows and columns `Head` says.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn head512(h: Head, scratch: &mut Scratch) {
        // SAFETY: the caller's contract.
        unsafe { by_row_blocks!(h, scratch, MR, NR, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]) }
    }

    /// Query rows `first..first + R`: their scores against every key, softmax, and p·v into `out`.
    ///
    /// # Safety
    /// The CPU has the instructions of the enclosing kernel; rows `first..first + R` exist in `h`
    /// (its pointers cover them as [`Head`] says), `keys_t` holds the keys transposed (`head_dim`
    /// rows of `padded` floats) and `scores` room for `R × padded` floats.
    #[inline(always)]
    unsafe fn rows<const R: usize>(h: &Head, first: usize, keys_t: *const f32, padded: usize, scores: *mut f32) {
        // SAFETY: this function's contract (see its `# Safety`).
        unsafe {
            let q = h.q.add(first * h.ld);
            // scores (R × padded) = q (R × head_dim) · kᵀ (head_dim × padded)
            for col in (0..padded).step_by(NR) {
                let acc = tile_sums512::<R>(q, (h.ld, 1), keys_t.add(col), padded, h.head_dim);
                for (r, acc) in acc.iter().enumerate() {
                    _mm512_storeu_ps(scores.add(r * padded + col), acc[0]);
                    _mm512_storeu_ps(scores.add(r * padded + col + 16), acc[1]);
                }
            }
            // Each row over its real keys: e^(scale · (s - max)) in place, and 1 / the sum; the
            // last partial vector through a mask.
            let (whole, tail) = (h.len / 16 * 16, lanes(h.len % 16));
            let mut inv_sum = [0f32; R];
            for (r, inv_sum) in inv_sum.iter_mut().enumerate() {
                let row = scores.add(r * padded);
                let mut max16 = _mm512_mask_loadu_ps(_mm512_set1_ps(f32::NEG_INFINITY), tail, row.add(whole));
                for j in (0..whole).step_by(16) {
                    max16 = _mm512_max_ps(max16, _mm512_loadu_ps(row.add(j)));
                }
                let max = _mm512_reduce_max_ps(max16);
                let (scale, shift) = (_mm512_set1_ps(h.scale), _mm512_set1_ps(max * h.scale));
                let mut sum16 = _mm512_setzero_ps();
                for j in (0..whole).step_by(16) {
                    let e = exp16(_mm512_fmsub_ps(_mm512_loadu_ps(row.add(j)), scale, shift));
                    _mm512_storeu_ps(row.add(j), e);
                    sum16 = _mm512_add_ps(sum16, e);
                }
                let e = exp16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(tail, row.add(whole)), scale, shift));
                _mm512_mask_storeu_ps(row.add(whole), tail, e);
                sum16 = _mm512_mask_add_ps(sum16, tail, sum16, e);
                *inv_sum = 1.0 / _mm512_reduce_add_ps(sum16);
            }
            // out (R × head_dim) = e (R × len) · v (len × head_dim) / sum, 32 columns at a time.
            let out = h.out.add(first * h.ld_out);
            for col in (0..h.head_dim).step_by(NR) {
                let acc = tile_sums512::<R>(scores, (padded, 1), h.v.add(col), h.ld, h.len);
                for (r, acc) in acc.iter().enumerate() {
                    let k = _mm512_set1_ps(inv_sum[r]);
                    _mm512_storeu_ps(out.add(r * h.ld_out + col), _mm512_mul_ps(acc[0], k));
                    _mm512_storeu_ps(out.add(r * h.ld_out + col + 16), _mm512_mul_ps(acc[1], k));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attention of one head in f64, the plain way.
    /// `parts`: where q, k and v start in a row of `qkv` (rows `ld` apart).
    fn reference(qkv: &[f32], ld: usize, parts: [usize; 3], len: usize, dh: usize, scale: f64) -> Vec<f64> {
        let at = |row: usize, part: usize, d: usize| qkv[row * ld + parts[part] + d] as f64;
        let mut out = vec![0.0; len * dh];
        for i in 0..len {
            let s: Vec<f64> = (0..len).map(|j| (0..dh).map(|d| at(i, 0, d) * at(j, 1, d)).sum::<f64>() * scale).collect();
            let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
            let z: f64 = e.iter().sum();
            for d in 0..dh {
                out[i * dh + d] = (0..len).map(|j| e[j] * at(j, 2, d)).sum::<f64>() / z;
            }
        }
        out
    }

    #[test]
    fn tiled_head_equals_plain_attention_for_every_row_remainder() {
        if tiles_for(16).is_none() {
            eprintln!("no AVX2 + FMA on this CPU: the tiled kernel is not used here, nothing to test");
            return;
        }
        let mut scratch = Scratch::default();
        // Lengths with every remainder of the 6- and 12-row and 16- and 32-column tiles; head sizes
        // of MiniLM (32), BERT-base (64) and the smallest tile (16); q/k/v of 2 heads side by side,
        // as in a projection. Each kind of tile this CPU runs for the head size.
        if !Tiles::AmxBf16x3.run_here(32) {
            eprintln!("no AMX tiles here: the bf16x3 AMX head is not tested");
        }
        let kinds = |dh: usize| [Tiles::Avx2, Tiles::Avx512, Tiles::AmxBf16x3].into_iter().filter(move |t| t.run_here(dh));
        for (dh, tiles) in [16, 32, 64].into_iter().flat_map(|dh| kinds(dh).map(move |t| (dh, t))) {
            // Rising, then falling: buffers kept from a longer head.
            for len in [1, 2, 5, 6, 7, 11, 12, 13, 15, 16, 17, 22, 23, 31, 32, 33, 100, 257, 100, 33, 5, 1] {
                let heads = 2;
                let ld = 3 * heads * dh;
                // Scores up to ~±20 after scaling, so the max shift and exp's range both matter. A
                // row of NaN after the last: read, it would spoil the results.
                let mut qkv: Vec<f32> = (0..len * ld).map(|i| (((i * 7919 + 13) % 1009) as f32 / 1009.0 - 0.5) * 3.0).collect();
                qkv.resize((len + 1) * ld, f32::NAN);
                #[cfg(target_arch = "x86_64")]
                if tiles == Tiles::AmxBf16x3 {
                    // What the AMX head reads of its staging without writing it first shows too.
                    scratch.amx.poison(1 << 16);
                }
                let scale = 1.0 / (dh as f32).sqrt();
                let head_index = 1;
                let offset = head_index * dh;
                // Layout of this test: [q heads | k heads | v heads] per row, each heads × dh wide.
                let (q, k, v) = (offset, heads * dh + offset, 2 * heads * dh + offset);
                // One row more than the head writes, which must stay NaN.
                let mut out = vec![f32::NAN; (len + 1) * heads * dh];
                // SAFETY: `run_here(dh)` checked above; every row of q, k and v lies in qkv (len rows
                // of ld, and one more), every row of out in out (len rows of heads × dh, and one more).
                unsafe {
                    head(
                        tiles,
                        qkv.as_ptr().add(q),
                        qkv.as_ptr().add(k),
                        qkv.as_ptr().add(v),
                        ld,
                        out.as_mut_ptr().add(offset),
                        heads * dh,
                        len,
                        dh,
                        scale,
                        &mut scratch,
                    )
                };
                let want = reference(&qkv, ld, [q, k, v], len, dh, scale as f64);
                let mut worst = 0f64;
                for i in 0..len {
                    for d in 0..dh {
                        let got = out[i * heads * dh + offset + d] as f64;
                        // A row never written stays NaN: count it as the worst difference.
                        let diff = (got - want[i * dh + d]).abs();
                        worst = if diff.is_nan() { f64::INFINITY } else { worst.max(diff) };
                    }
                    // The other head's columns are never written.
                    assert!(out[i * heads * dh..i * heads * dh + dh].iter().all(|x| x.is_nan()), "head 0 written");
                }
                assert!(out[len * heads * dh..].iter().all(|x| x.is_nan()), "{}: a row past the last written", tiles.name());
                // f32 tiles: f32 rounding. AMX's bf16x3 products keep about 16 bits of each f32 (the
                // outputs here are up to about 1.5, the scores up to about 20).
                let bound = if tiles == Tiles::AmxBf16x3 { 5e-5 } else { 2e-5 };
                assert!(worst < bound, "{} tiles, head size {dh}, {len} tokens: largest difference {worst}", tiles.name());
            }
        }
    }
}
