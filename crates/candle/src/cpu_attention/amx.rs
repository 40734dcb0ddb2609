//! One attention head on AMX's tile units, in bf16x3.
//!
//! Why: once the weights' products ran as bf16x3 on AMX, attention was the largest
//! part of a bin's time left in f32 (16% of a default run's cycles on a 2-core Xeon, against the
//! products' 57%), and most of it was its two products, q·kᵀ and p·v, on the AVX-512 FMA units. A
//! `tdpbf16ps` multiplies a 16 × 32 bf16 tile by a 32 × 16 one into 16 × 16 f32 sums; three of them
//! per block, on the same split as the weights' products ([`crate::cpu_ops::bf16_pair`]: each f32 as
//! a high and a low bf16, hi·hi + hi·lo + lo·hi, about 16 of f32's 24 bits), do the work of about
//! 256 cycles of AVX-512 FMAs in 48. The softmax between the products (max, exponential, sum) stays
//! f32 on AVX-512, as do the scale and 1/sum.
//!
//! Layout: q is split once per head into rows of high and of low bf16s (a tile: 16 query rows × 32
//! of the head's columns); k and v are split and staged in the pair-interleaved layout AMX's
//! right-hand tiles take (row p holds the pairs of reduction indices 2p and 2p+1 of 16 columns).
//! Each step of 32 query rows (two tiles, so each of k's tiles loaded serves two products) writes
//! its scores against every key (keys padded to 32: scores of the padding are masked out of the
//! softmax, and v's padded rows are zero), turns them into split probabilities, and multiplies
//! those by v's tiles; the 16 × 32 output tiles are scaled by 1/sum into `out`. On the Xeon
//! measured, a tile load took about half a `tdpbf16ps` and did not overlap with them, hence the
//! two-tile steps.
//!
//! All eight tile registers are 16 rows of 64 bytes; the configuration is loaded at the start of a
//! head and released at its end. This assumes what MKL's own tile kernels on the same threads do:
//! load their configuration on every call (a kernel that kept one across calls would fault on the
//! released tiles rather than compute with ours; the bf16x3 encoder's test runs both in turn).
//!
//! Only [`crate::bert_cpu`]'s bf16x3 encoder uses it, where [`ready`] says the tiles run; the f32
//! encoder keeps the AVX-512 tiles, whose results equal f32 products to rounding.

use std::arch::asm;
use std::arch::x86_64::*;

use super::x86::Head;
use crate::cpu_ops::avx512::{lanes, split16};
use crate::cpu_ops::{EXP_POLY, LN2_HI, LN2_LO};

/// Whether AMX's bf16 tiles run in this process: the CPU has them (AMX-BF16, and AMX-TILE for the
/// loads, stores and configuration, which a hypervisor could mask apart) and the OS keeps their
/// state ([`crate::mkl::amx_bf16`]), and Linux granted this process the tile data (asked once).
pub(crate) fn ready() -> bool {
    static READY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *READY.get_or_init(|| {
        const AMX_TILE: u32 = 1 << 24;
        crate::mkl::amx_bf16() && std::arch::x86_64::__cpuid_count(7, 0).edx & AMX_TILE != 0 && request_tile_data()
    })
}

/// Linux hands out AMX's 8 KiB of tile state only to processes that ask for it
/// (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`); without it a tile instruction faults.
#[cfg(target_os = "linux")]
fn request_tile_data() -> bool {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: this arch_prctl only asks the kernel for a permission; it reads and writes no memory.
    unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn request_tile_data() -> bool {
    false
}

/// The tile configuration: palette 1, all eight tiles 16 rows of 64 bytes.
#[repr(C, align(64))]
struct Config([u8; 64]);

const CONFIG: Config = {
    let mut c = [0u8; 64];
    c[0] = 1;
    let mut t = 0;
    while t < 8 {
        c[16 + 2 * t] = 64;
        c[48 + t] = 16;
        t += 1;
    }
    Config(c)
};

/// Rows of a tile, and columns of an f32 result tile.
const ROWS: usize = 16;
/// bf16s in a tile row: the reduction step of one `tdpbf16ps`.
const DEPTH: usize = 32;
/// bf16s in one tile (16 rows of 64 bytes).
const TILE: usize = ROWS * DEPTH;
/// Query rows per step: two tiles' worth, so each of k's tiles loaded serves two products.
const STEP: usize = 2 * ROWS;

/// Per-thread buffers of one head: split q, k and v, one step's scores, probabilities and output.
/// Nothing is cleared between heads: what a head reads it wrote first, except padding, which only
/// reaches results that are dropped (q's rows past the real ones: score and output rows never
/// stored; the probability rows past them in a last step: output rows never stored; k's keys past
/// the real ones: scores masked out of the softmax) or is written as zeros (v's rows past the real
/// keys, against probabilities of exactly zero).
#[derive(Default)]
pub(crate) struct Staging {
    /// q's rows (padded to 32), high bf16s then low ones, `head_dim` wide.
    q: Vec<u16>,
    /// k as right-hand tiles of q·kᵀ: [high, low][32-column chunk][16-key block][pair][key][2].
    k: Vec<u16>,
    /// v as right-hand tiles of p·v: [high, low][32-column group][32-key block][16-column half][pair][column][2].
    v: Vec<u16>,
    /// 32 × keys (padded to 32) scores.
    scores: Vec<f32>,
    /// e^(scale · (s − max)) split: 32 × keys high bf16s, then low ones.
    probs: Vec<u16>,
    /// One 16 × 32 output tile.
    out: Vec<f32>,
}

#[cfg(test)]
impl Staging {
    /// Every buffer `len` long and NaN (as bf16s: 0x7fc0): what a head reads that it did not write
    /// shows in the tests.
    pub(super) fn poison(&mut self, len: usize) {
        for buf in [&mut self.q, &mut self.k, &mut self.v, &mut self.probs] {
            buf.clear();
            buf.resize(len, 0x7fc0);
        }
        for buf in [&mut self.scores, &mut self.out] {
            buf.clear();
            buf.resize(len, f32::NAN);
        }
    }
}

/// Tile instructions on fixed registers (Intel syntax; loads and stores take a base and a byte
/// stride between rows).
macro_rules! tile {
    (load $t:literal, $ptr:expr, $stride:expr) => {
        asm!(concat!("tileloadd tmm", $t, ", [{p} + {s}*1]"), p = in(reg) $ptr, s = in(reg) $stride, options(nostack, readonly))
    };
    (store $t:literal, $ptr:expr, $stride:expr) => {
        asm!(concat!("tilestored [{p} + {s}*1], tmm", $t), p = in(reg) $ptr, s = in(reg) $stride, options(nostack))
    };
    (zero $t:literal) => {
        asm!(concat!("tilezero tmm", $t), options(nostack, nomem))
    };
    (dot $c:literal, $a:literal, $b:literal) => {
        asm!(concat!("tdpbf16ps tmm", $c, ", tmm", $a, ", tmm", $b), options(nostack, nomem))
    };
}

/// Two accumulator tiles each take the split product of their own pair of tiles:
/// `c: a_hi, a_lo x b_hi, b_lo` adds a_hi·b_hi + a_hi·b_lo + a_lo·b_hi to tile c (bf16x3; a_lo·b_lo
/// is left out), the two accumulators' instructions interleaved.
macro_rules! split_products {
    ($c0:literal: $ah0:literal, $al0:literal x $bh0:literal, $bl0:literal; $c1:literal: $ah1:literal, $al1:literal x $bh1:literal, $bl1:literal) => {
        tile!(dot $c0, $ah0, $bh0);
        tile!(dot $c1, $ah1, $bh1);
        tile!(dot $c0, $ah0, $bl0);
        tile!(dot $c1, $ah1, $bl1);
        tile!(dot $c0, $al0, $bh0);
        tile!(dot $c1, $al1, $bh1);
    };
}

/// e^x on sixteen lanes for x ≤ 0 (scores less their row's largest): 2^n · p(r) with x = n·ln2 + r,
/// the power of two by `vscalefps`, which takes any n (so no clamping: far below, the result is 0).
///
/// # Safety
/// The CPU must have AVX-512F (its callers enable it).
#[inline(always)]
unsafe fn exp16_nonpositive(x: __m512) -> __m512 {
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_mul_ps(
        x,
        _mm512_set1_ps(std::f32::consts::LOG2_E),
    ));
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
    let mut p = _mm512_set1_ps(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    }
    _mm512_scalef_ps(p, n)
}

/// Softmax attention of one head ([`super::head`]'s contract), its products on AMX tiles in bf16x3.
///
/// # Safety
/// [`super::head`]'s, with `Tiles::AmxBf16x3.run_here(head_dim)` true (AVX-512F, AVX512-BF16,
/// [`ready`], `head_dim` a multiple of 32).
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn head(h: &Head, st: &mut Staging) {
    let (len, dh) = (h.len, h.head_dim);
    let rows_padded = len.div_ceil(STEP) * STEP;
    let keys = len.div_ceil(DEPTH) * DEPTH;
    let (chunks, key_blocks, value_blocks) = (dh / DEPTH, keys / ROWS, keys / DEPTH);
    let q_half = rows_padded * dh;
    let k_half = chunks * key_blocks * TILE;
    let v_half = chunks * value_blocks * 2 * TILE;
    // `resize` keeps what earlier heads wrote: see `Staging`.
    st.q.resize(st.q.len().max(2 * q_half), 0);
    st.k.resize(st.k.len().max(2 * k_half), 0);
    st.v.resize(st.v.len().max(2 * v_half), 0);
    st.scores.resize(st.scores.len().max(STEP * keys), 0.0);
    st.probs.resize(st.probs.len().max(2 * STEP * keys), 0);
    st.out.resize(ROWS * DEPTH, 0.0);
    let (q_hi, q_lo) = (st.q.as_mut_ptr(), st.q.as_mut_ptr().wrapping_add(q_half));
    let (k_hi, k_lo) = (st.k.as_mut_ptr(), st.k.as_mut_ptr().wrapping_add(k_half));
    let (v_hi, v_lo) = (st.v.as_mut_ptr(), st.v.as_mut_ptr().wrapping_add(v_half));
    let scores = st.scores.as_mut_ptr();
    let (p_hi, p_lo) = (st.probs.as_mut_ptr(), st.probs.as_mut_ptr().wrapping_add(STEP * keys));
    let out_tile = st.out.as_mut_ptr();
    let (q_stride, score_stride, prob_stride, tile_stride) = (dh * 2, keys * 4, keys * 2, 64usize);
    // SAFETY: reads of q, k and v: rows < len, head_dim wide, `ld` apart (the caller's contract);
    // every write below stays inside the buffer it names, sized above (q: rows_padded rows; k and
    // v: whole tiles; scores and probabilities: 32 rows of keys; the output tile 16 × 32), and every
    // tile load reads 16 rows of 64 bytes inside one of them. `ready()` (the caller's contract)
    // means the tile instructions run in this process; the configuration is ours from the load to
    // the release.
    unsafe {
        // q: each row split in place.
        for i in 0..len {
            for d in (0..dh).step_by(ROWS) {
                let (hi, lo) = split16(_mm512_loadu_ps(h.q.add(i * h.ld + d)));
                _mm256_storeu_si256(q_hi.add(i * dh + d).cast(), hi);
                _mm256_storeu_si256(q_lo.add(i * dh + d).cast(), lo);
            }
        }
        // k: a key's 32 columns of a chunk are column `key % 16` of its block's tile, as 16 pairs
        // one tile row (64 bytes) apart.
        let rows_apart = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
        for i in 0..len {
            for chunk in 0..chunks {
                let src = h.k.add(i * h.ld + chunk * DEPTH);
                let (h0, l0) = split16(_mm512_loadu_ps(src));
                let (h1, l1) = split16(_mm512_loadu_ps(src.add(ROWS)));
                let at = (chunk * key_blocks + i / ROWS) * TILE + i % ROWS * 2;
                _mm512_i32scatter_epi32::<4>(k_hi.add(at).cast(), rows_apart, _mm512_inserti64x4::<1>(_mm512_castsi256_si512(h0), h1));
                _mm512_i32scatter_epi32::<4>(k_lo.add(at).cast(), rows_apart, _mm512_inserti64x4::<1>(_mm512_castsi256_si512(l0), l1));
            }
        }
        // v: keys 2·pair and 2·pair + 1 of 16 columns interleaved in one tile row; zero past len.
        let value_row = |key: usize, column: usize| {
            if key < len {
                split16(_mm512_loadu_ps(h.v.add(key * h.ld + column)))
            } else {
                (_mm256_setzero_si256(), _mm256_setzero_si256())
            }
        };
        let interleave =
            |a: __m256i, b: __m256i| _mm512_or_si512(_mm512_cvtepu16_epi32(a), _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(b)));
        for key in (0..keys).step_by(2) {
            let (block, pair) = (key / DEPTH, key % DEPTH / 2);
            for column in (0..dh).step_by(ROWS) {
                let ((ha, la), (hb, lb)) = (value_row(key, column), value_row(key + 1, column));
                let at = ((column / DEPTH * value_blocks + block) * 2 + column % DEPTH / ROWS) * TILE + pair * DEPTH;
                _mm512_storeu_si512(v_hi.add(at).cast(), interleave(ha, hb));
                _mm512_storeu_si512(v_lo.add(at).cast(), interleave(la, lb));
            }
        }
        asm!("ldtilecfg [{}]", in(reg) CONFIG.0.as_ptr(), options(nostack, readonly));
        for first in (0..len).step_by(STEP) {
            let rows = (len - first).min(STEP);
            // scores (32 × keys) = q (32 × dh) · kᵀ, a 16-key block at a time: two accumulators
            // (the two query tiles), each taking hi·hi, hi·lo and lo·hi.
            let q_tiles = |chunk: usize| {
                let at = first * dh + chunk * DEPTH;
                tile!(load 2, q_hi.add(at), q_stride);
                tile!(load 3, q_lo.add(at), q_stride);
                tile!(load 4, q_hi.add(at + ROWS * dh), q_stride);
                tile!(load 5, q_lo.add(at + ROWS * dh), q_stride);
            };
            if chunks == 1 {
                q_tiles(0);
            }
            for block in 0..key_blocks {
                tile!(zero 0);
                tile!(zero 1);
                for chunk in 0..chunks {
                    if chunks > 1 {
                        q_tiles(chunk);
                    }
                    let at = (chunk * key_blocks + block) * TILE;
                    tile!(load 6, k_hi.add(at), tile_stride);
                    tile!(load 7, k_lo.add(at), tile_stride);
                    split_products!(0: 2, 3 x 6, 7; 1: 4, 5 x 6, 7);
                }
                tile!(store 0, scores.add(block * ROWS), score_stride);
                tile!(store 1, scores.add(ROWS * keys + block * ROWS), score_stride);
            }
            // Each real row over its real keys: e^(scale · (s − max)) split into the probability
            // tiles (zero past the real keys), and 1 / the sum of the exponentials.
            let (whole, tail) = (len / ROWS * ROWS, lanes(len % ROWS));
            let mut inv_sum = [0f32; STEP];
            for (r, inv_sum) in inv_sum.iter_mut().enumerate().take(rows) {
                let s = scores.add(r * keys);
                let mut max16 = _mm512_mask_loadu_ps(_mm512_set1_ps(f32::NEG_INFINITY), tail, s.add(whole));
                for j in (0..whole).step_by(ROWS) {
                    max16 = _mm512_max_ps(max16, _mm512_loadu_ps(s.add(j)));
                }
                let max = _mm512_reduce_max_ps(max16);
                let (scale, shift) = (_mm512_set1_ps(h.scale), _mm512_set1_ps(max * h.scale));
                let mut sum16 = _mm512_setzero_ps();
                for j in (0..keys).step_by(ROWS) {
                    let real = if j < whole {
                        0xffff
                    } else if j == whole {
                        tail
                    } else {
                        0
                    };
                    let e = _mm512_maskz_mov_ps(real, exp16_nonpositive(_mm512_fmsub_ps(_mm512_loadu_ps(s.add(j)), scale, shift)));
                    sum16 = _mm512_add_ps(sum16, e);
                    let (hi, lo) = split16(e);
                    _mm256_storeu_si256(p_hi.add(r * keys + j).cast(), hi);
                    _mm256_storeu_si256(p_lo.add(r * keys + j).cast(), lo);
                }
                *inv_sum = 1.0 / _mm512_reduce_add_ps(sum16);
            }
            // out (16 × 32 per query tile and group of the head's columns) = p (16 × keys) · v,
            // 32 keys a step.
            for tile_rows in (0..rows).step_by(ROWS) {
                let (p_hi, p_lo) = (p_hi.add(tile_rows * keys), p_lo.add(tile_rows * keys));
                for group in 0..chunks {
                    tile!(zero 0);
                    tile!(zero 1);
                    for block in 0..value_blocks {
                        tile!(load 2, p_hi.add(block * DEPTH), prob_stride);
                        tile!(load 3, p_lo.add(block * DEPTH), prob_stride);
                        let at = (group * value_blocks + block) * 2 * TILE;
                        tile!(load 4, v_hi.add(at), tile_stride);
                        tile!(load 5, v_hi.add(at + TILE), tile_stride);
                        tile!(load 6, v_lo.add(at), tile_stride);
                        tile!(load 7, v_lo.add(at + TILE), tile_stride);
                        split_products!(0: 2, 3 x 4, 6; 1: 2, 3 x 5, 7);
                    }
                    tile!(store 0, out_tile, DEPTH * 4);
                    tile!(store 1, out_tile.add(ROWS), DEPTH * 4);
                    for r in 0..(rows - tile_rows).min(ROWS) {
                        let dst = h.out.add((first + tile_rows + r) * h.ld_out + group * DEPTH);
                        let k = _mm512_set1_ps(inv_sum[tile_rows + r]);
                        _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_loadu_ps(out_tile.add(r * DEPTH)), k));
                        _mm512_storeu_ps(dst.add(ROWS), _mm512_mul_ps(_mm512_loadu_ps(out_tile.add(r * DEPTH + ROWS)), k));
                    }
                }
            }
        }
        asm!("tilerelease", options(nostack, nomem));
    }
}
