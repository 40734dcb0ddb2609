//! The CPU encoder's matrix products against its weights, packed once into 16-column panels, for
//! CPUs whose widest vectors are AVX2's.
//!
//! Why: the `gemm` crate packs its right-hand matrix again on every call, and the fused layers call
//! it once per block of rows per weight: on a Zen 3 EPYC that packing was 5% of a bin's time. The
//! weights do not change, so here they are packed at load time (the row-major copy is dropped) and
//! each product is a loop of 6 × 16 register tiles over them: on that EPYC warpfold's end-to-end
//! rate rose 8–18% over the gemm crate in the same runs (BENCHMARKS.md, "CPU: attention tiled, the
//! weights in panels ... session 17"). On AVX-512 CPUs the gemm crate's 512-bit kernels stay (twice
//! the width), as does MKL where it is used.
//!
//! Layout: panel `p` holds output columns `16p..16p + 16`; for each input index `i` its 16 weights
//! `W[16p + lane][i]` are contiguous; the last panel's missing columns are zero.

/// Output columns per panel (and per register tile, [`x86::tile_sums`]): two 8-lane registers.
pub(crate) const NR: usize = 16;

/// Whether this CPU's widest vectors are AVX2 (with FMA): where the panels run instead of the gemm
/// crate's kernels.
pub(crate) fn suits_this_cpu() -> bool {
    crate::cpu_ops::simd() == crate::cpu_ops::Simd::Avx2
}

/// A weight (outputs × inputs, row-major as stored) packed into panels.
pub(crate) struct Panels {
    data: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

impl Panels {
    pub(crate) fn new(weight: &[f32], outputs: usize, inputs: usize) -> Self {
        assert_eq!(weight.len(), outputs * inputs, "weight of {outputs} x {inputs}");
        let mut data = vec![0f32; outputs.div_ceil(NR) * inputs * NR];
        for (o, row) in weight.chunks_exact(inputs.max(1)).enumerate() {
            let (panel, lane) = (o / NR, o % NR);
            for (i, &w) in row.iter().enumerate() {
                data[(panel * inputs + i) * NR + lane] = w;
            }
        }
        Self { data, inputs, outputs }
    }

    /// `dst += src · Wᵀ` for the `src.len() / inputs` rows of `src` (rows of `dst` `outputs` wide).
    pub(crate) fn accumulate(&self, src: &[f32], dst: &mut [f32]) {
        let rows = src.len() / self.inputs.max(1);
        assert_eq!((src.len(), dst.len()), (rows * self.inputs, rows * self.outputs), "whole rows in and out");
        assert!(suits_this_cpu(), "the panels' kernel needs AVX2 + FMA");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 + FMA checked above; the lengths of src and dst checked above.
        unsafe {
            x86::accumulate(self, rows, src, dst)
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::{Panels, NR};

    /// Rows of a register tile: with two accumulators a row, twelve of AVX2's sixteen registers.
    pub(crate) const MR: usize = 6;

    /// The register tile that the panels' products and the tiled attention
    /// ([`crate::cpu_attention`]) share: `Σ_i a[r·lda + i] · b[i·ldb .. i·ldb + NR]` for each row
    /// `r < R` over `i < k`, as two 8-lane sums a row; each caller stores them its own way.
    ///
    /// # Safety
    /// Inlined into a function with AVX2 + FMA enabled; `a` addresses `R` rows of `k` readable f32s
    /// `lda` apart, `b` `k` rows of `NR` readable f32s `ldb` apart.
    #[inline(always)]
    pub(crate) unsafe fn tile_sums<const R: usize>(a: *const f32, lda: usize, b: *const f32, ldb: usize, k: usize) -> [[__m256; 2]; R] {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for i in 0..k {
            // SAFETY: row i < k of b and column i < k of rows r < R of a (the caller's contract).
            unsafe {
                let b0 = _mm256_loadu_ps(b.add(i * ldb));
                let b1 = _mm256_loadu_ps(b.add(i * ldb + 8));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm256_broadcast_ss(&*a.add(r * lda + i));
                    acc[0] = _mm256_fmadd_ps(x, b0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(x, b1, acc[1]);
                }
            }
        }
        acc
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn accumulate(w: &Panels, rows: usize, src: &[f32], dst: &mut [f32]) {
        let (k, n) = (w.inputs, w.outputs);
        for panel in 0..n.div_ceil(NR) {
            let b = w.data[panel * k * NR..].as_ptr();
            let (col, width) = (panel * NR, NR.min(n - panel * NR));
            let mut i = 0;
            // SAFETY (every call): rows i..i + R of src (k wide) and of dst (n wide), columns
            // col..col + width of dst, all inside the slices (lengths checked by the caller); the
            // panel holds k × NR floats.
            unsafe {
                while i + MR <= rows {
                    tile::<MR>(src.as_ptr().add(i * k), k, b, dst.as_mut_ptr().add(i * n + col), n, width);
                    i += MR;
                }
                let (a, c) = (src.as_ptr().add(i * k), dst.as_mut_ptr().add(i * n + col));
                match rows - i {
                    0 => {}
                    1 => tile::<1>(a, k, b, c, n, width),
                    2 => tile::<2>(a, k, b, c, n, width),
                    3 => tile::<3>(a, k, b, c, n, width),
                    4 => tile::<4>(a, k, b, c, n, width),
                    _ => tile::<5>(a, k, b, c, n, width),
                }
            }
        }
    }

    /// `c (R × width) += a (R × k) · panel (k × NR)`, `width ≤ NR` columns of c written.
    #[inline(always)]
    unsafe fn tile<const R: usize>(a: *const f32, k: usize, panel: *const f32, c: *mut f32, ldc: usize, width: usize) {
        unsafe {
            let acc = tile_sums::<R>(a, k, panel, NR, k);
            for (r, acc) in acc.iter().enumerate() {
                let c = c.add(r * ldc);
                if width == NR {
                    _mm256_storeu_ps(c, _mm256_add_ps(_mm256_loadu_ps(c), acc[0]));
                    _mm256_storeu_ps(c.add(8), _mm256_add_ps(_mm256_loadu_ps(c.add(8)), acc[1]));
                } else {
                    // The last panel of a width that is not a multiple of 16: only its columns.
                    let mut sums = [0f32; NR];
                    _mm256_storeu_ps(sums.as_mut_ptr(), acc[0]);
                    _mm256_storeu_ps(sums.as_mut_ptr().add(8), acc[1]);
                    for (j, s) in sums.iter().take(width).enumerate() {
                        *c.add(j) += s;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_equal_the_plain_product_for_every_tile_remainder() {
        if !suits_this_cpu() {
            eprintln!("this CPU's widest vectors are not AVX2: the panels are not used here, nothing to test");
            return;
        }
        // Rows with every remainder of 6, widths with and without a partial last panel.
        for (outputs, inputs) in [(16, 8), (48, 40), (20, 7), (1152, 384), (3, 33)] {
            for rows in [1, 5, 6, 7, 13, 64] {
                let w: Vec<f32> = (0..outputs * inputs).map(|i| ((i * 104_729 % 997) as f32 / 997.0 - 0.5) * 0.2).collect();
                let x: Vec<f32> = (0..rows * inputs).map(|i| (i * 7919 % 1000) as f32 / 1000.0 - 0.5).collect();
                let residual: Vec<f32> = (0..rows * outputs).map(|i| (i % 11) as f32 * 0.1).collect();
                let mut got = residual.clone();
                Panels::new(&w, outputs, inputs).accumulate(&x, &mut got);
                for r in 0..rows {
                    for o in 0..outputs {
                        let want = residual[r * outputs + o] as f64
                            + (0..inputs).map(|i| x[r * inputs + i] as f64 * w[o * inputs + i] as f64).sum::<f64>();
                        let diff = (got[r * outputs + o] as f64 - want).abs();
                        assert!(diff < 1e-4, "{rows} x {inputs} -> {outputs}: row {r} column {o}: {} vs {want}", got[r * outputs + o]);
                    }
                }
            }
        }
    }
}
