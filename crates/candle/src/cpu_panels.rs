//! The CPU encoder's matrix products against its weights, packed once into panels of 16 columns
//! (AVX2) or 32 (AVX-512).
//!
//! Why: the `gemm` crate packs its right-hand matrix again on every call, and the fused layers call
//! it once per block of rows per weight: on a Zen 3 EPYC that packing was 5% of a bin's time. The
//! weights do not change, so here they are packed at load time (the row-major copy is dropped) and
//! each product is a loop of register tiles over them: on that EPYC warpfold's end-to-end rate rose
//! 8–18% over the gemm crate in the same runs (BENCHMARKS.md, CPU
//! embeddings). On AVX-512 CPUs the tile is 12 rows × 32 columns in 24 of the 32 zmm
//! registers; on a 2-core Xeon that is level with the gemm crate's AVX-512 kernels (BENCHMARKS.md,
//! CPU embeddings). MKL, where it is loaded, is used instead of either.
//!
//! Layout: panel `p` of width `w` holds output columns `w·p..w·p + w`; for each input index `i` its
//! `w` weights `W[w·p + lane][i]` are contiguous; the last panel's missing columns are zero.

use crate::cpu_ops::{self, Simd};

/// Output columns per AVX2 panel (and per register tile, [`x86::tile_sums`]): two 8-lane registers.
pub(crate) const NR: usize = 16;

/// The register tile a CPU runs the panels with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// 6 rows × 16 columns in 8-lane registers (AVX2 + FMA).
    Avx2,
    /// 12 rows × 32 columns in 16-lane registers (AVX-512F).
    Avx512,
}

impl Kernel {
    /// The widest kernel this CPU runs, if any (`None` without AVX2 + FMA).
    pub(crate) fn for_this_cpu() -> Option<Self> {
        match cpu_ops::simd() {
            Simd::Avx512 => Some(Kernel::Avx512),
            Simd::Avx2 => Some(Kernel::Avx2),
            Simd::Portable => None,
        }
    }

    /// Whether this CPU has the kernel's instructions.
    pub(crate) fn runs_here(self) -> bool {
        match self {
            Kernel::Avx2 => cpu_ops::simd() != Simd::Portable,
            Kernel::Avx512 => cpu_ops::simd() == Simd::Avx512,
        }
    }

    /// Output columns per panel.
    fn width(self) -> usize {
        match self {
            Kernel::Avx2 => NR,
            Kernel::Avx512 => 2 * NR,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kernel::Avx2 => "AVX2",
            Kernel::Avx512 => "AVX-512",
        }
    }
}

/// A weight (outputs × inputs, row-major as stored) packed into panels for one kernel.
pub(crate) struct Panels {
    data: Vec<f32>,
    inputs: usize,
    outputs: usize,
    kernel: Kernel,
}

impl Panels {
    pub(crate) fn new(weight: &[f32], outputs: usize, inputs: usize, kernel: Kernel) -> Self {
        assert_eq!(weight.len(), outputs * inputs, "weight of {outputs} x {inputs}");
        let w = kernel.width();
        let mut data = vec![0f32; outputs.div_ceil(w) * inputs * w];
        for (o, row) in weight.chunks_exact(inputs.max(1)).enumerate() {
            let (panel, lane) = (o / w, o % w);
            for (i, &x) in row.iter().enumerate() {
                data[(panel * inputs + i) * w + lane] = x;
            }
        }
        Self { data, inputs, outputs, kernel }
    }

    /// `dst += src · Wᵀ` for the `src.len() / inputs` rows of `src` (rows of `dst` `outputs` wide).
    pub(crate) fn accumulate(&self, src: &[f32], dst: &mut [f32]) {
        let rows = src.len() / self.inputs.max(1);
        assert_eq!((src.len(), dst.len()), (rows * self.inputs, rows * self.outputs), "whole rows in and out");
        assert!(self.kernel.runs_here(), "the panels' {} kernel does not run on this CPU", self.kernel.name());
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the kernel's instructions checked above; the lengths of src and dst checked above.
        unsafe {
            match self.kernel {
                Kernel::Avx2 => x86::accumulate(self, rows, src, dst),
                Kernel::Avx512 => x86::accumulate_avx512(self, rows, src, dst),
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::{Panels, NR};

    /// Rows of an AVX-512 register tile: with two accumulators a row, 24 of the 32 zmm registers
    /// (the two panel vectors and the broadcast row value take three more; 14 rows would spill).
    pub(crate) const MR512: usize = 12;
    /// Columns of an AVX-512 panel and tile.
    pub(crate) const NR512: usize = 2 * NR;

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

    /// `dst (rows × outputs) += src (rows × inputs) · w`, in AVX2 tiles.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `src` holds `rows × w.inputs` floats and `dst`
    /// `rows × w.outputs`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn accumulate(w: &Panels, rows: usize, src: &[f32], dst: &mut [f32]) {
        let (k, n) = (w.inputs, w.outputs);
        for panel in 0..n.div_ceil(NR) {
            let b = w.data[panel * k * NR..].as_ptr();
            let (col, width) = (panel * NR, NR.min(n - panel * NR));
            let mut i = 0;
            // SAFETY: (every call) rows i..i + R of src (k wide) and of dst (n wide), columns
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

    /// As [`accumulate`] with 12 × 32 tiles in 16-lane registers. The rows of `src` are first
    /// packed tile by tile, each tile's column `i` as 12 contiguous values: the tile then reads its
    /// row values from one pointer at fixed offsets (no address arithmetic per row in the inner
    /// loop), and the rows after the last whole tile are zero-padded, so one tile shape serves
    /// every row count (the padding rows' sums are dropped).
    ///
    /// # Safety
    /// The CPU must have AVX-512F; `src` holds `rows × w.inputs` floats and `dst` `rows × w.outputs`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn accumulate_avx512(w: &Panels, rows: usize, src: &[f32], dst: &mut [f32]) {
        let (k, n) = (w.inputs, w.outputs);
        let tiles = rows.div_ceil(MR512);
        let mut packed = vec![0f32; tiles * MR512 * k];
        for (r, row) in src.chunks_exact(k.max(1)).enumerate() {
            let tile = &mut packed[r / MR512 * MR512 * k..];
            for (i, &x) in row.iter().enumerate() {
                tile[i * MR512 + r % MR512] = x;
            }
        }
        for panel in 0..n.div_ceil(NR512) {
            let b = w.data[panel * k * NR512..].as_ptr();
            let (col, width) = (panel * NR512, NR512.min(n - panel * NR512));
            for t in 0..tiles {
                let stored = MR512.min(rows - t * MR512);
                // SAFETY: tile t of `packed` holds k × MR512 floats; rows t·MR512.. + stored of dst
                // (n wide), columns col..col + width, lie inside dst (lengths checked by the caller);
                // the panel holds k × NR512 floats.
                unsafe { tile512(packed[t * MR512 * k..].as_ptr(), k, b, dst.as_mut_ptr().add(t * MR512 * n + col), n, stored, width) }
            }
        }
    }

    /// [`tile_sums`] in 16-lane registers, `NR512` columns: `Σ_i a[r·rs + i·cs] · b[i·ldb .. i·ldb +
    /// NR512]` for each row `r < R` over `i < k`, as two sums a row. The panels read `a` packed (rs 1,
    /// cs MR512: fixed offsets, inlined as constants), the tiled attention in place (rs a row's
    /// stride, cs 1).
    ///
    /// # Safety
    /// Inlined into a function with AVX-512F enabled; `a` addresses the `R × k` readable f32s so
    /// described, `b` `k` rows of `NR512` readable f32s `ldb` apart.
    #[inline(always)]
    pub(crate) unsafe fn tile_sums512<const R: usize>(
        a: *const f32,
        (rs, cs): (usize, usize),
        b: *const f32,
        ldb: usize,
        k: usize,
    ) -> [[__m512; 2]; R] {
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        for i in 0..k {
            // SAFETY: row i < k of b and column i < k of rows r < R of a (the caller's contract).
            unsafe {
                let b0 = _mm512_loadu_ps(b.add(i * ldb));
                let b1 = _mm512_loadu_ps(b.add(i * ldb + 16));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*a.add(r * rs + i * cs));
                    acc[0] = _mm512_fmadd_ps(x, b0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(x, b1, acc[1]);
                }
            }
        }
        acc
    }

    /// `c (stored × width) += a (k × MR512, packed) ᵀ · panel (k × NR512)`: the first `stored`
    /// rows and `width ≤ NR512` columns of c written, through masks.
    ///
    /// # Safety
    /// The CPU must have AVX-512F; `a` points at a packed tile of `k × MR512` floats, `panel` at
    /// `k × NR512`, and `c` at `stored` rows `ldc` floats apart, each with `width` floats.
    #[inline(always)]
    unsafe fn tile512(a: *const f32, k: usize, panel: *const f32, c: *mut f32, ldc: usize, stored: usize, width: usize) {
        // SAFETY: the packed tile holds k × MR512 floats and the panel k × NR512 (the caller's).
        let acc = unsafe { tile_sums512::<MR512>(a, (1, MR512), panel, NR512, k) };
        let lanes = |n: usize| -> __mmask16 { ((1u32 << n.min(16)) - 1) as __mmask16 };
        let (m0, m1) = (lanes(width), lanes(width.saturating_sub(16)));
        for (r, acc) in acc.iter().enumerate().take(stored) {
            // SAFETY: row r < stored of c, its first `width` columns (masked lanes are not touched).
            unsafe {
                let c = c.add(r * ldc);
                _mm512_mask_storeu_ps(c, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c), acc[0]));
                // Past the row's end when width ≤ 16: no lane of m1 is set then, nothing is read.
                let c1 = c.wrapping_add(16);
                _mm512_mask_storeu_ps(c1, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c1), acc[1]));
            }
        }
    }

    /// `c (R × width) += a (R × k) · panel (k × NR)`, `width ≤ NR` columns of c written.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `a` points at `R` rows of `k` floats, `panel` at `k × NR`
    /// floats, and `c` at `R` rows `ldc` floats apart, each with `width` floats.
    #[inline(always)]
    unsafe fn tile<const R: usize>(a: *const f32, k: usize, panel: *const f32, c: *mut f32, ldc: usize, width: usize) {
        // SAFETY: this function's contract.
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
        let kernels: Vec<Kernel> = [Kernel::Avx2, Kernel::Avx512].into_iter().filter(|k| k.runs_here()).collect();
        if kernels.is_empty() {
            eprintln!("this CPU has neither AVX2 + FMA nor AVX-512: the panels are not used here, nothing to test");
            return;
        }
        // Rows with every remainder of 6 and of 12, widths with and without a partial last panel
        // (of 16 and of 32 columns).
        for kernel in kernels {
            for (outputs, inputs) in [(16, 8), (48, 40), (20, 7), (1152, 384), (3, 33), (40, 5), (64, 17)] {
                for rows in [1, 5, 6, 7, 11, 12, 13, 25, 64] {
                    let w: Vec<f32> = (0..outputs * inputs).map(|i| ((i * 104_729 % 997) as f32 / 997.0 - 0.5) * 0.2).collect();
                    let x: Vec<f32> = (0..rows * inputs).map(|i| (i * 7919 % 1000) as f32 / 1000.0 - 0.5).collect();
                    let residual: Vec<f32> = (0..rows * outputs).map(|i| (i % 11) as f32 * 0.1).collect();
                    let mut got = residual.clone();
                    Panels::new(&w, outputs, inputs, kernel).accumulate(&x, &mut got);
                    for r in 0..rows {
                        for o in 0..outputs {
                            let want = residual[r * outputs + o] as f64
                                + (0..inputs).map(|i| x[r * inputs + i] as f64 * w[o * inputs + i] as f64).sum::<f64>();
                            let diff = (got[r * outputs + o] as f64 - want).abs();
                            assert!(
                                diff < 1e-4,
                                "{kernel:?}, {rows} x {inputs} -> {outputs}: row {r} column {o}: {} vs {want}",
                                got[r * outputs + o]
                            );
                        }
                    }
                }
            }
        }
    }
}
