//! The BERT encoder's layers on the CPU, fused by rows.
//!
//! Why: on a 2-core Intel Xeon the candle-op forward spent about half of a bin's time outside the
//! matmuls (BENCHMARKS.md, issue 17): contiguous copies of q, k and v, zero-filled fresh buffers,
//! a separate pass each for bias, residual, GELU and layer norm, and a thread barrier after every
//! op. Every step of a BERT layer except attention is row-local, so here a layer is two parallel
//! phases over buffers allocated once per bin:
//! 1. attention, one task per (sequence, head), reading q, k and v in place from the (T, 3H)
//!    projection through strides (no copies), over the real tokens only (pad rows stay zero);
//! 2. everything else, one task per block of rows, while the block is in cache: output projection,
//!    bias, residual and layer norm; feed-forward, bias and GELU; second projection, bias, residual
//!    and layer norm; and the next layer's q/k/v projection.
//!
//! Attention runs through the tiled AVX-512 or AVX2 + FMA kernel of [`crate::cpu_attention`] where the CPU has
//! it and the head size is a multiple of 16, else as two matrix products and a softmax; with bf16x3
//! products on a CPU with AMX, its products run as bf16x3 on the tiles too.
//!
//! In f32 the matmuls are Intel MKL's `sgemm` where it is installed on an Intel CPU ([`crate::mkl`]), else
//! the weights packed once into AVX2 or AVX-512 panels ([`crate::cpu_panels`]), else (no AVX2) the
//! `gemm` crate's kernels; the row kernels are [`crate::cpu_ops`]. The result equals the candle-op
//! forward ([`crate::bert::BertModel`] on other devices) to f32 rounding: the tests compare the two.
//!
//! Where MKL's bf16 products run on AMX, the default runs the weights' products as bf16x3
//! ([`Gemm::MklBf16x3`]: each f32 split into two bf16s, three bf16 products with f32 sums, about 16
//! bits of each f32), attention's on AMX's tiles the same way, and the feed-forward's bias, GELU and
//! split in one pass: 1.53-1.80× sentence-transformers on a 2-core Xeon against 1.23-1.29× with
//! `sgemm` (BENCHMARKS.md). Opt-in, the products (the weights' and attention's) run with
//! plain bf16 operands and f32 sums ([`Gemm::MklBf16`]): on that Xeon 2.4× MKL's f32 rate, the vectors
//! within cosine 0.99996 of f32 ones.

use candle_core::{Result, Tensor};
use candle_nn::{LayerNorm, Linear};
use rayon::prelude::*;
use warpfold_backend::Bin;

use crate::activation::Activation;
use crate::cpu_attention;
use crate::cpu_ops::{self, Simd};
use crate::cpu_panels::{Kernel, Panels};
use crate::mkl::{Mkl, PackedBf16};
use crate::mpnet::RelativeBias;
use crate::stage_profile::time as stage;

/// Rows per task of the row phase: large enough for the matmul to run at speed (the `gemm` crate
/// packs the weights again on every call, so it wants more rows), small enough that a block and its
/// feed-forward intermediate stay in cache. Measured on a 2-core Xeon, stress corpus: MKL 128 rows
/// 6,471 tokens/s, 256 6,180, 512 5,638; the gemm crate 64 rows 4,167, 128 4,868, 256 5,981, 512
/// 5,832-6,362, 1024 5,520. The panels on a 2-core Zen 3 EPYC (no packing per call): 96, 128 and 256
/// rows within 1% of each other (6,929-7,009 tokens/s). MKL's bf16 products on a Xeon
/// with AMX: 256 rows about 5% under 128 and 512 in the stage profile's timed ms.
fn rows_per_task(gemm: Gemm) -> usize {
    match gemm {
        Gemm::Mkl(_) => 128,
        Gemm::MklBf16(_) | Gemm::MklBf16x3(_) | Gemm::Crate | Gemm::Panels(_) => 256,
    }
}

thread_local! {
    /// A task's rows rounded to bf16 for [`Gemm::MklBf16`]'s products, or split for
    /// [`Gemm::MklBf16x3`]'s (kept between calls).
    static BF16_ROWS: std::cell::RefCell<Vec<u16>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A linear layer's weight and bias.
struct Dense {
    weight: Weight,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

/// A weight as the layer's [`Gemm`] reads it.
enum Weight {
    /// Out × in, row-major, as stored.
    Rows(Vec<f32>),
    /// Packed into panels at load ([`Gemm::Panels`]).
    Panels(Panels),
    /// Rounded to bf16 and packed by MKL at load ([`Gemm::MklBf16`]); for [`Gemm::MklBf16x3`] each
    /// row split into high and low bf16s laid out high, low, high ([`cpu_ops::split_bf16x3`]'s
    /// partner), three times as wide.
    Bf16(PackedBf16),
}

impl Dense {
    fn new(linear: &Linear, gemm: Gemm) -> Result<Self> {
        let (outputs, inputs) = linear.weight().dims2()?;
        let rows = linear.weight().flatten_all()?.to_vec1::<f32>()?;
        let weight = match gemm {
            Gemm::Panels(kernel) => Weight::Panels(Panels::new(&rows, outputs, inputs, kernel)),
            Gemm::MklBf16(mkl) => Weight::Bf16(mkl.pack_bf16(&rows.iter().map(|&v| cpu_ops::bf16(v)).collect::<Vec<_>>(), outputs, inputs)),
            Gemm::MklBf16x3(mkl) => {
                let mut split = Vec::with_capacity(3 * rows.len());
                for row in rows.chunks_exact(inputs) {
                    let (high, low): (Vec<u16>, Vec<u16>) = row.iter().map(|&v| cpu_ops::bf16_pair(v)).unzip();
                    split.extend_from_slice(&high);
                    split.extend_from_slice(&low);
                    split.extend_from_slice(&high);
                }
                Weight::Bf16(mkl.pack_bf16(&split, outputs, 3 * inputs))
            }
            Gemm::Mkl(_) | Gemm::Crate => Weight::Rows(rows),
        };
        let bias = match linear.bias() {
            Some(b) => b.to_vec1::<f32>()?,
            None => vec![0.0; outputs],
        };
        Ok(Self { weight, bias, inputs, outputs })
    }

    /// `dst = src · Wᵀ + b` for the `src.len() / inputs` rows of `src` (dst rows `outputs` wide).
    fn forward_into(&self, gemm: Gemm, src: &[f32], dst: &mut [f32]) {
        for row in dst.chunks_exact_mut(self.outputs) {
            row.copy_from_slice(&self.bias);
        }
        self.multiply(gemm, src, dst, true);
    }

    /// `dst += src · Wᵀ + b`: the residual already in `dst`.
    fn add_into(&self, gemm: Gemm, simd: Simd, src: &[f32], dst: &mut [f32]) {
        cpu_ops::add_bias(simd, dst, &self.bias);
        self.multiply(gemm, src, dst, true);
    }

    /// `dst (+)= src · Wᵀ`, without the bias.
    fn multiply(&self, gemm: Gemm, src: &[f32], dst: &mut [f32], accumulate: bool) {
        let rows = src.len() / self.inputs;
        assert_eq!((src.len(), dst.len()), (rows * self.inputs, rows * self.outputs), "whole rows in and out");
        match &self.weight {
            Weight::Panels(panels) => {
                if !accumulate {
                    dst.fill(0.0);
                }
                panels.accumulate(src, dst)
            }
            Weight::Bf16(_) => BF16_ROWS.with_borrow_mut(|operand| match gemm {
                Gemm::MklBf16(mkl) => {
                    operand.resize(src.len(), 0);
                    cpu_ops::to_bf16(cpu_ops::simd(), src, operand);
                    self.multiply_bf16(mkl, operand, dst, accumulate);
                }
                Gemm::MklBf16x3(mkl) => {
                    operand.resize(3 * src.len(), 0);
                    cpu_ops::split_bf16x3(cpu_ops::simd(), src, self.inputs, operand);
                    self.multiply_bf16(mkl, operand, dst, accumulate);
                }
                _ => unreachable!("bf16 weights are made only for Gemm::MklBf16 and Gemm::MklBf16x3"),
            }),
            // SAFETY: `src` holds rows × inputs, `dst` rows × outputs (checked above) and `weight`
            // outputs × inputs contiguous f32s; `dst` is a distinct, exclusive borrow.
            Weight::Rows(weight) => unsafe {
                gemm.run(
                    (rows, self.outputs, self.inputs),
                    (src.as_ptr(), self.inputs),
                    (weight.as_ptr(), self.inputs, true),
                    (dst.as_mut_ptr(), self.outputs),
                    accumulate,
                )
            },
        }
    }

    /// `dst (+)= operand · Wᵀ` for a bf16 weight, `operand` holding the rows as the weight's
    /// product reads them (rounded for [`Gemm::MklBf16`], split for [`Gemm::MklBf16x3`]).
    fn multiply_bf16(&self, mkl: &Mkl, operand: &[u16], dst: &mut [f32], accumulate: bool) {
        let Weight::Bf16(weight) = &self.weight else { unreachable!("bf16 products only for bf16 weights") };
        let (width, rows) = (weight.inputs(), dst.len() / self.outputs);
        assert_eq!((operand.len(), dst.len()), (rows * width, rows * self.outputs), "whole rows of the packed width in, of outputs out");
        // SAFETY: `operand` holds rows × `width` bf16s, the width `weight` was packed for, and `dst`
        // rows × outputs f32s (checked), a distinct, exclusive borrow; the bf16 gemms are chosen
        // only where the runtime has the product.
        unsafe { mkl.gemm_bf16_packed(rows, (operand.as_ptr(), width), weight, (dst.as_mut_ptr(), self.outputs), accumulate) }
    }
}

/// The matrix product the fused layers call: MKL's where it is loaded ([`crate::mkl`]), else the
/// `gemm` crate's kernels, or for the weights' products their panels ([`crate::cpu_panels`]).
#[derive(Clone, Copy)]
pub(crate) enum Gemm {
    Mkl(&'static Mkl),
    Crate,
    /// Weights packed into panels at load for the kernel; other products (attention's, where it
    /// is not tiled) through the gemm crate.
    Panels(Kernel),
    /// Opt-in bf16 ([`crate::bert::CpuPrecision::Bf16`]): the weights' products with bf16 operands and
    /// f32 sums through MKL (on AMX where the CPU has it), attention's through
    /// [`Attention::Bf16Products`]; norms, GELU, residuals and the softmax's sums in f32.
    MklBf16(&'static Mkl),
    /// [`crate::bert::CpuPrecision::Bf16x3`]: the weights' products as one bf16 product of three
    /// times the width (each f32 operand split into high and low bf16s: hi·hi + hi·lo + lo·hi, f32
    /// sums), about 16 bits of the f32 product; attention's products the same way on AMX's tiles
    /// where they run ([`cpu_attention::Tiles::AmxBf16x3`]), else attention in f32 as with
    /// [`Gemm::Mkl`].
    MklBf16x3(&'static Mkl),
}

impl Gemm {
    /// Without MKL: the panels for this CPU's widest kernel, unless `WARPFOLD_CPU_PANELS` asks for
    /// the gemm crate (`off`) or the AVX2 panels on an AVX-512 CPU (`avx2`), for side-by-side
    /// measurements.
    pub(crate) fn without_mkl() -> Self {
        let asked = crate::switches::get().cpu_panels.as_str();
        match (asked, Kernel::for_this_cpu()) {
            ("off", _) | (_, None) => Gemm::Crate,
            ("avx2", Some(_)) => Gemm::Panels(Kernel::Avx2),
            (_, Some(kernel)) => Gemm::Panels(kernel),
        }
    }

    pub(crate) fn describe(self) -> String {
        match self {
            Gemm::Mkl(mkl) => format!("MKL sgemm ({})", mkl.path().display()),
            Gemm::MklBf16(mkl) => format!("MKL bf16 products of f32 sums ({})", mkl.path().display()),
            Gemm::MklBf16x3(mkl) => format!("MKL bf16x3 products (f32 split into two bf16s, f32 sums) ({})", mkl.path().display()),
            Gemm::Crate => "gemm crate".into(),
            Gemm::Panels(kernel) => format!("weights in {} panels packed at load", kernel.name()),
        }
    }

    /// `c (m × n, row stride ldc) = a (m × k, row stride lda) · op(b) [+ c]` on this thread, where
    /// `op(b)` is `b` (k × n, row stride ldb) or, with `b_transposed`, `bᵀ` for `b` (n × k).
    ///
    /// # Safety
    /// As [`Mkl::gemm`]: the matrices lie in live allocations as described, `c` overlaps neither
    /// input, and no other thread uses the part of `c` written here.
    unsafe fn run(
        self,
        (m, n, k): (usize, usize, usize),
        (a, lda): (*const f32, usize),
        (b, ldb, b_transposed): (*const f32, usize, bool),
        (c, ldc): (*mut f32, usize),
        accumulate: bool,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        match self {
            // SAFETY: forwarded from the caller's contract.
            Gemm::Mkl(mkl) | Gemm::MklBf16(mkl) | Gemm::MklBf16x3(mkl) => unsafe {
                mkl.gemm((m, n, k), (a, lda), (b, ldb, b_transposed), (c, ldc), accumulate)
            },
            Gemm::Crate | Gemm::Panels(_) => {
                let (b_rs, b_cs) = if b_transposed { (1, ldb as isize) } else { (ldb as isize, 1) };
                // SAFETY: forwarded from the caller's contract; gemm takes (column, row) strides.
                unsafe {
                    gemm::gemm(
                        m,
                        n,
                        k,
                        c,
                        1,
                        ldc as isize,
                        accumulate,
                        a,
                        1,
                        lda as isize,
                        b,
                        b_cs,
                        b_rs,
                        1.0,
                        1.0,
                        false,
                        false,
                        false,
                        gemm::Parallelism::None,
                    )
                }
            }
        }
    }
}

/// A pointer that tasks writing disjoint parts of one buffer can share.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: used only where each task writes a region no other task reads or writes (see callers).
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

impl Norm {
    fn new(norm: &LayerNorm) -> Result<Self> {
        let gamma = norm.weight().to_vec1::<f32>()?;
        let beta = match norm.bias() {
            Some(b) => b.to_vec1::<f32>()?,
            None => vec![0.0; gamma.len()],
        };
        Ok(Self { gamma, beta })
    }
}

/// One encoder layer's weights, as the fused forward reads them.
pub(crate) struct CpuLayer {
    qkv: Dense,
    attn_out: Dense,
    attn_norm: Norm,
    intermediate: Dense,
    output: Dense,
    out_norm: Norm,
    act: Activation,
}

/// The parts of a candle layer the fused layer is made from.
pub(crate) struct LayerParts<'a> {
    pub qkv: &'a Linear,
    pub attn_out: &'a Linear,
    pub attn_norm: &'a LayerNorm,
    pub intermediate: &'a Linear,
    pub output: &'a Linear,
    pub out_norm: &'a LayerNorm,
    pub act: Activation,
}

impl CpuLayer {
    /// The layer with its weights as `gemm` reads them.
    pub(crate) fn new(p: LayerParts, gemm: Gemm) -> Result<Self> {
        Ok(Self {
            qkv: Dense::new(p.qkv, gemm)?,
            attn_out: Dense::new(p.attn_out, gemm)?,
            attn_norm: Norm::new(p.attn_norm)?,
            intermediate: Dense::new(p.intermediate, gemm)?,
            output: Dense::new(p.output, gemm)?,
            out_norm: Norm::new(p.out_norm)?,
            act: p.act,
        })
    }
}

/// How a head's attention is computed.
#[derive(Clone, Copy)]
enum Attention {
    /// [`cpu_attention::head`] on these tiles.
    Tiled(cpu_attention::Tiles),
    /// q·kᵀ and p·v through [`Gemm`], the softmax between them by [`cpu_ops::softmax`].
    Products,
    /// As `Products`, with q, k, v and the probabilities rounded to bf16 and both products through
    /// MKL's bf16 product ([`Gemm::MklBf16`] only): on AMX the products leave the f32 FMA units.
    Bf16Products(&'static Mkl),
}

impl Attention {
    /// With bf16 products, attention's products in bf16 too; with bf16x3 products, AMX's tiles in
    /// bf16x3 where they run; else the widest f32 tiled kernel that runs for `head_dim`.
    /// `WARPFOLD_CPU_ATTENTION=products` (`tiled`, `avx2`) asks for the f32 products (the widest
    /// f32 tiles, the AVX2 tiles where they run) instead, for side-by-side measurements.
    fn for_head(head_dim: usize, gemm: Gemm) -> Self {
        let asked = crate::switches::get().cpu_attention.clone();
        let tiles = match asked.as_str() {
            "avx2" => Some(cpu_attention::Tiles::Avx2).filter(|t| t.run_here(head_dim)),
            _ => cpu_attention::tiles_for(head_dim),
        };
        // Attention's products at the weights' precision unless f32 tiles are asked for.
        let reduced = asked != "tiled" && asked != "avx2";
        let amx = cpu_attention::Tiles::AmxBf16x3;
        match (asked.as_str(), gemm, tiles) {
            ("products", _, _) => Attention::Products,
            (_, Gemm::MklBf16(mkl), _) if reduced => Attention::Bf16Products(mkl),
            (_, Gemm::MklBf16x3(_), _) if reduced && amx.run_here(head_dim) => Attention::Tiled(amx),
            (_, _, Some(tiles)) => Attention::Tiled(tiles),
            _ => Attention::Products,
        }
    }
}

/// The encoder's layers in the fused CPU form (the embeddings stay candle ops: one gather and one
/// layer norm per bin).
pub(crate) struct CpuEncoder {
    layers: Vec<CpuLayer>,
    hidden: usize,
    heads: usize,
    eps: f32,
    gemm: Gemm,
    attention: Attention,
    /// MPNet's relative-position bias, added to every score ([`crate::mpnet`]); with it, attention
    /// runs as two products (the tiled kernels add no bias).
    relative: Option<std::sync::Arc<RelativeBias>>,
    /// A bin's q/k/v, context and bf16 q/k/v buffers, kept between bins: fresh ones cost page
    /// faults and the kernel's zeroing of their pages (6% of a bf16 run's cycles in `perf`).
    buffers: std::sync::Mutex<Buffers>,
}

#[derive(Default)]
struct Buffers {
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    qkv16: Vec<u16>,
}

impl CpuEncoder {
    pub(crate) fn new(
        layers: Vec<CpuLayer>,
        hidden: usize,
        heads: usize,
        eps: f64,
        gemm: Gemm,
        relative: Option<std::sync::Arc<RelativeBias>>,
    ) -> Self {
        let attention = if relative.is_some() { Attention::Products } else { Attention::for_head(hidden / heads, gemm) };
        Self { layers, hidden, heads, eps: eps as f32, gemm, attention, relative, buffers: Default::default() }
    }

    /// How the products run where not in f32: `bf16` ([`Gemm::MklBf16`]) or `bf16x3`
    /// ([`Gemm::MklBf16x3`]).
    pub(crate) fn reduced_products(&self) -> Option<&'static str> {
        match self.gemm {
            Gemm::MklBf16(_) => Some("bf16"),
            Gemm::MklBf16x3(_) => Some("bf16x3"),
            Gemm::Mkl(_) | Gemm::Crate | Gemm::Panels(_) => None,
        }
    }

    /// The attention kernel and the matrix product, in words.
    pub(crate) fn describe(&self) -> String {
        let attention = match self.attention {
            Attention::Tiled(tiles) => format!("tiled {} attention", tiles.name()),
            Attention::Products => "attention as two products".into(),
            Attention::Bf16Products(_) => "attention as two bf16 products".into(),
        };
        format!("{attention} per sequence and head over its real tokens, {}", self.gemm.describe())
    }

    /// The layers over a bin's embedded tape `(T, H)`: `(T, H)` token states. Rows of pad tokens
    /// are computed like any row but never attended to.
    pub(crate) fn forward(&self, bin: &Bin, embedded: &Tensor) -> Result<Tensor> {
        let (t, h) = embedded.dims2()?;
        if h != self.hidden || t != bin.input_ids.len() {
            candle_core::bail!("fused encoder: tape of {t} x {h}, expected {} x {}", bin.input_ids.len(), self.hidden);
        }
        let (simd, gemm) = (cpu_ops::simd(), self.gemm);
        let rows = rows_per_task(gemm);
        let mut x = embedded.flatten_all()?.to_vec1::<f32>()?;
        let Some(first) = self.layers.first() else {
            return Tensor::from_vec(x, (t, h), embedded.device());
        };
        let mut buffers = self.buffers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Buffers { qkv, ctx, qkv16 } = &mut *buffers;
        // Every row of q/k/v is written by the projections before it is read.
        qkv.resize(t * 3 * h, 0.0);
        // Pad rows of the context are never written: zero from here on.
        ctx.clear();
        ctx.resize(t * h, 0.0);
        // q, k and v rounded to bf16 for attention's bf16 products (resized where they run).
        stage("q/k/v projection (first layer)", || {
            x.par_chunks(rows * h).zip(qkv.par_chunks_mut(rows * 3 * h)).for_each(|(x, qkv)| first.qkv.forward_into(gemm, x, qkv));
            Ok(())
        })?;
        for (i, layer) in self.layers.iter().enumerate() {
            stage("attention", || {
                if let Attention::Bf16Products(_) = self.attention {
                    qkv16.resize(qkv.len(), 0);
                    qkv16
                        .par_chunks_mut(rows * 3 * h)
                        .zip(qkv.par_chunks(rows * 3 * h))
                        .for_each(|(to, from)| cpu_ops::to_bf16(simd, from, to));
                }
                self.attention(simd, bin, qkv, qkv16, ctx);
                Ok(())
            })?;
            let next = self.layers.get(i + 1);
            let width = layer.intermediate.outputs;
            stage("projections, feed-forward, norms", || {
                x.par_chunks_mut(rows * h).zip(qkv.par_chunks_mut(rows * 3 * h)).zip(ctx.par_chunks(rows * h)).for_each_init(
                    Vec::new,
                    |inter, ((x, qkv), ctx)| {
                        let block_rows = x.len() / h;
                        layer.attn_out.add_into(gemm, simd, ctx, x);
                        cpu_ops::layer_norm(simd, x, &layer.attn_norm.gamma, &layer.attn_norm.beta, self.eps);
                        inter.resize(block_rows * width, 0.0);
                        if let Gemm::MklBf16x3(mkl) = gemm {
                            // The intermediate's bias, activation and the split for the second
                            // product in one pass (MKL writes the product instead of adding it).
                            layer.intermediate.multiply(gemm, x, inter, false);
                            BF16_ROWS.with_borrow_mut(|operand| {
                                operand.resize(3 * inter.len(), 0);
                                cpu_ops::bias_act_split_bf16x3(simd, inter, &layer.intermediate.bias, layer.act, operand);
                                cpu_ops::add_bias(simd, x, &layer.output.bias);
                                layer.output.multiply_bf16(mkl, operand, x, true);
                            });
                        } else {
                            layer.intermediate.forward_into(gemm, x, inter);
                            match layer.act {
                                Activation::GeluErf => cpu_ops::gelu_erf(simd, inter),
                                Activation::GeluTanh => cpu_ops::gelu_tanh(simd, inter),
                                Activation::Relu => inter.iter_mut().for_each(|v| *v = v.max(0.0)),
                            }
                            layer.output.add_into(gemm, simd, inter, x);
                        }
                        cpu_ops::layer_norm(simd, x, &layer.out_norm.gamma, &layer.out_norm.beta, self.eps);
                        if let Some(next) = next {
                            next.qkv.forward_into(gemm, x, qkv);
                        }
                    },
                );
                Ok(())
            })?;
        }
        Tensor::from_vec(x, (t, h), embedded.device())
    }

    /// Block-diagonal attention over the real tokens of each slot: `ctx` rows of real tokens are
    /// overwritten, pad rows left as they are.
    /// `qkv16` is `qkv` rounded to bf16 for [`Attention::Bf16Products`] (unread otherwise).
    fn attention(&self, simd: Simd, bin: &Bin, qkv: &[f32], qkv16: &[u16], ctx: &mut [f32]) {
        let h = self.hidden;
        let dh = h / self.heads;
        let scale = 1.0 / (dh as f32).sqrt();
        let tasks: Vec<(usize, usize, usize)> = (0..bin.num_sequences())
            .flat_map(|s| {
                let (start, _, real) = bin.slot(s);
                (0..self.heads).map(move |head| (start, real, head))
            })
            .filter(|&(_, real, _)| real > 0)
            .collect();
        let qkv_ptr = Shared(qkv.as_ptr().cast_mut());
        let ctx_ptr = Shared(ctx.as_mut_ptr());
        let (qkv_len, ctx_len) = (qkv.len(), ctx.len());
        if let Attention::Bf16Products(_) = self.attention {
            assert_eq!(qkv16.len(), qkv_len, "q, k and v in bf16 beside the f32 ones");
        }
        tasks.par_iter().for_each_init(cpu_attention::Scratch::default, |scratch, &(start, real, head)| {
            let (qkv_ptr, ctx_ptr) = (qkv_ptr, ctx_ptr);
            assert!((start + real) * 3 * h <= qkv_len && (start + real) * h <= ctx_len, "slot inside the tape");
            // SAFETY: every offset below addresses rows start..start + real (checked against both
            // buffers above, and `qkv16` is as long as `qkv` where read) and columns of this head;
            // `qkv` and `qkv16` are only read; each task writes the
            // (rows of its slot) × (columns of its head) block of `ctx`, which no other task
            // touches, and its own scratch.
            unsafe {
                let q = qkv_ptr.0.add(start * 3 * h + head * dh).cast_const();
                let k = q.add(h);
                let v = q.add(2 * h);
                let out = ctx_ptr.0.add(start * h + head * dh);
                match self.attention {
                    // `Tiled` was chosen only where its tiles run for `dh`.
                    Attention::Tiled(tiles) => cpu_attention::head(tiles, q, k, v, 3 * h, out, h, real, dh, scale, scratch),
                    Attention::Products => {
                        let scores = &mut scratch.scores;
                        scores.resize(real * real, 0.0);
                        // scores (real × real) = Q (real × dh) · Kᵀ
                        self.gemm.run((real, real, dh), (q, 3 * h), (k, 3 * h, true), (scores.as_mut_ptr(), real), false);
                        for (query, row) in scores.chunks_exact_mut(real).enumerate() {
                            if let Some(relative) = &self.relative {
                                // softmax(scale · (s + b / scale)) = softmax(scale · s + b).
                                for (s, b) in row.iter_mut().zip(relative.row(head, query, real)) {
                                    *s += b / scale;
                                }
                            }
                            cpu_ops::softmax(simd, row, real, scale);
                        }
                        // ctx (real × dh) = P (real × real) · V (real × dh)
                        self.gemm.run((real, dh, real), (scores.as_ptr(), real), (v, 3 * h, false), (out, h), false);
                    }
                    Attention::Bf16Products(mkl) => {
                        let q16 = qkv16.as_ptr().add(start * 3 * h + head * dh);
                        let (k16, v16) = (q16.add(h), q16.add(2 * h));
                        let scores = &mut scratch.scores;
                        scores.resize(real * real, 0.0);
                        mkl.gemm_bf16((real, real, dh), (q16, 3 * h), (k16, 3 * h, true), (scores.as_mut_ptr(), real), false);
                        // P unnormalised in bf16; the output rows scaled by 1 / each row's sum after.
                        let mut inv_sums = vec![0f32; real];
                        BF16_ROWS.with_borrow_mut(|probs| {
                            probs.resize(scores.len(), 0);
                            cpu_ops::exp_rows_bf16(simd, scores, real, scale, probs, &mut inv_sums);
                            mkl.gemm_bf16((real, dh, real), (probs.as_ptr(), real), (v16, 3 * h, false), (out, h), false);
                        });
                        for (r, inv) in inv_sums.into_iter().enumerate() {
                            std::slice::from_raw_parts_mut(out.add(r * h), dh).iter_mut().for_each(|o| *o *= inv);
                        }
                    }
                }
            }
        });
    }
}
