//! BERT-family encoder (all-MiniLM-L6-v2, BGE, GTE, and MPNet through [`crate::mpnet`]) over
//! packed input.
//!
//! Written in the style of a candle-transformers model file, with one difference that matters: the
//! forward takes a flat tape of several sequences (a [`Bin`]) instead of a `(batch, length)` block.
//! Every linear layer runs once over the whole tape, so no work is spent on padding; attention is
//! block-diagonal, computed per slot, so no token ever attends across a document boundary. Pad tokens
//! that round a slot up to its aligned size are masked out of attention (as keys) and out of pooling.
//!
//! Slots of the same size are batched into one attention call. A padded-baseline bin has all slots
//! the same size, so it runs exactly the `(batch, heads, L, L)` masked attention Hugging Face runs;
//! a packed bin runs the same kernel on its (smaller) slots. The packing gain is measured, not assumed.

use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::{layer_norm, linear, Embedding, LayerNorm, LayerNormConfig, Linear, VarBuilder};
use serde::Deserialize;
use warpfold_backend::model_dir::Pooling;
use warpfold_backend::Bin;

use std::sync::Arc;

use crate::activation::Activation;
use crate::bert_cpu::{CpuEncoder, CpuLayer, Gemm, LayerParts};
use crate::mpnet::RelativeBias;
use crate::stage_profile::{self, time as stage};

/// Mirrors the fields of a BERT `config.json` that the forward uses.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: u32,
    #[serde(default = "default_position_type")]
    pub position_embedding_type: String,
    #[serde(default)]
    pub model_type: Option<String>,
    /// MPNet's relative-position buckets ([`crate::mpnet`]); absent from BERT configs.
    #[serde(default)]
    pub relative_attention_num_buckets: Option<usize>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_position_type() -> String {
    "absolute".into()
}

impl Config {
    /// Fails early, with the reason, on configurations this file does not implement.
    pub fn check(&self) -> std::result::Result<(), String> {
        if let Some(t) = &self.model_type {
            if matches!(t.as_str(), "roberta" | "xlm-roberta") {
                // RoBERTa offsets positions by pad_token_id + 1; not implemented, so refuse rather
                // than return wrong vectors.
                return Err(format!("model_type {t:?} (RoBERTa position offsets) is not supported yet"));
            }
            if t == "mpnet" && self.relative_attention_num_buckets.is_none_or(|b| b < 4) {
                return Err("an MPNet config without relative_attention_num_buckets".into());
            }
            if t != "bert" && t != "mpnet" {
                return Err(format!("model_type {t:?} is not a BERT-family encoder"));
            }
        }
        if self.max_position_embeddings <= self.position_offset() {
            return Err(format!("max_position_embeddings {} leaves no position", self.max_position_embeddings));
        }
        if self.position_embedding_type != "absolute" {
            return Err(format!("position_embedding_type {:?} is not supported (only \"absolute\")", self.position_embedding_type));
        }
        if !matches!(self.hidden_act.as_str(), "gelu" | "gelu_new" | "gelu_pytorch_tanh" | "relu") {
            return Err(format!("hidden_act {:?} is not supported", self.hidden_act));
        }
        if self.num_attention_heads == 0 || !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!("hidden_size {} is not a multiple of num_attention_heads {}", self.hidden_size, self.num_attention_heads));
        }
        Ok(())
    }

    /// Whether this is MPNet ([`crate::mpnet`]).
    pub fn is_mpnet(&self) -> bool {
        self.model_type.as_deref() == Some("mpnet")
    }

    /// The position table's row for position 0: MPNet numbers positions from `pad_token_id + 1`.
    pub fn position_offset(&self) -> usize {
        if self.is_mpnet() {
            self.pad_token_id as usize + 1
        } else {
            0
        }
    }

    /// How many positions a sequence can use: the table's rows from [`Self::position_offset`] on.
    pub fn max_positions(&self) -> usize {
        self.max_position_embeddings - self.position_offset()
    }
}

struct Embeddings {
    word: Embedding,
    position: Embedding,
    token_type: Tensor,
    norm: LayerNorm,
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    eps: f64,
}

impl Embeddings {
    fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let h = cfg.hidden_size;
        let word = candle_nn::embedding(cfg.vocab_size, h, vb.pp("word_embeddings"))?;
        // Row `position_offset` is position 0 (a copy, so the CUDA kernel reads it from its start).
        let table = vb.pp("position_embeddings").get((cfg.max_position_embeddings, h), "weight")?;
        let position = Embedding::new(table.narrow(0, cfg.position_offset(), cfg.max_positions())?.copy()?, h);
        // Every token is segment 0: keep row 0 of the token-type table, added by broadcast (MPNet has
        // no such table: zeros).
        let token_type = if cfg.is_mpnet() {
            Tensor::zeros(h, vb.dtype(), vb.device())?
        } else {
            vb.pp("token_type_embeddings").get((cfg.type_vocab_size, h), "weight")?.i(0)?
        };
        let norm = layer_norm(h, LayerNormConfig { eps: cfg.layer_norm_eps, ..Default::default() }, vb.pp("LayerNorm"))?;
        Ok(Self { word, position, token_type, norm, eps: cfg.layer_norm_eps })
    }

    /// (T,) ids and (T,) positions -> (T, H); on CUDA one kernel
    /// ([`crate::encoder_kernels::embed_layer_norm`]) for the gathers, adds and norm.
    fn forward(&self, ids: &Tensor, positions: &Tensor) -> Result<Tensor> {
        #[cfg(feature = "cuda")]
        if ids.device().is_cuda() && encoder_kernels_on() {
            if let Some(bias) = self.norm.bias() {
                let (word, position) = (self.word.embeddings(), self.position.embeddings());
                return crate::encoder_kernels::embed_layer_norm(
                    ids,
                    positions,
                    word,
                    position,
                    &self.token_type,
                    self.norm.weight(),
                    bias,
                    self.eps,
                );
            }
        }
        let x = self.word.forward(ids)?.add(&self.position.forward(positions)?)?;
        self.norm.forward(&x.broadcast_add(&self.token_type)?)
    }
}

struct Layer {
    qkv: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: LayerNorm,
    heads: usize,
    head_dim: usize,
    act: Activation,
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    eps: f64,
    /// What the CUDA flash path adds instead of q/k/v's biases ([`InPlaceBiases`]).
    #[cfg(feature = "flash-attn")]
    in_place: InPlaceBiases,
}

/// A BERT linear layer's bias (every one has one; the fused CUDA kernels take it apart from the matmul).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn bias_of(l: &Linear) -> Result<&Tensor> {
    l.bias().ok_or_else(|| candle_core::Error::Msg("a BERT linear layer without a bias".into()))
}

/// The biases for attention that reads k and v in place from the q/k/v projection (the CUDA flash
/// path), so that no pass copies them out of it:
/// - k's bias is left out: it adds `q·b` to every score of a query, the same for each key, which
///   the softmax over keys cancels;
/// - v's bias moves into the output projection's: the weights of a query's softmax sum to 1, so the
///   attention adds exactly `b` to each row of its output, and `(c + b)·Woᵀ + bo = c·Woᵀ + (Wo·b + bo)`;
/// - q's bias alone is added, in one pass over q's third of the projection.
///
/// Both are the same function in exact arithmetic; in f16 they round differently, which the GPU
/// tests bound against the f32 CPU layers and sentence-transformers' vectors; the unit test
/// `in_place_biases_give_the_same_attention_output` holds the algebra to the plain layer in f32.
#[cfg_attr(not(feature = "flash-attn"), allow(dead_code))]
struct InPlaceBiases {
    q: Tensor,
    attn_out: Tensor,
}

#[cfg_attr(not(feature = "flash-attn"), allow(dead_code))]
impl InPlaceBiases {
    fn new(qkv: &Linear, attn_out: &Linear, h: usize) -> Result<Self> {
        let (qkv_bias, out_bias) = (bias_of(qkv)?, bias_of(attn_out)?);
        let dtype = out_bias.dtype();
        let v_bias = qkv_bias.narrow(0, 2 * h, h)?.to_dtype(DType::F32)?;
        let moved = attn_out.weight().to_dtype(DType::F32)?.matmul(&v_bias.unsqueeze(1)?)?.squeeze(1)?;
        let attn_out = (out_bias.to_dtype(DType::F32)? + moved)?.to_dtype(dtype)?;
        Ok(Self { q: qkv_bias.narrow(0, 0, h)?.contiguous()?, attn_out })
    }
}

impl Layer {
    fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let h = cfg.hidden_size;
        let ln = LayerNormConfig { eps: cfg.layer_norm_eps, ..Default::default() };
        let sa = vb.pp("attention.self");
        // One (3H, H) projection instead of three: a single matmul over the tape.
        let (mut ws, mut bs) = (Vec::new(), Vec::new());
        for name in ["query", "key", "value"] {
            ws.push(sa.pp(name).get((h, h), "weight")?);
            bs.push(sa.pp(name).get(h, "bias")?);
        }
        let qkv = Linear::new(Tensor::cat(&ws, 0)?, Some(Tensor::cat(&bs, 0)?));
        let act = Activation::from_hidden_act(&cfg.hidden_act);
        let attn_out = linear(h, h, vb.pp("attention.output.dense"))?;
        Ok(Self {
            #[cfg(feature = "flash-attn")]
            in_place: InPlaceBiases::new(&qkv, &attn_out, h)?,
            qkv,
            attn_out,
            attn_norm: layer_norm(h, ln, vb.pp("attention.output.LayerNorm"))?,
            intermediate: linear(h, cfg.intermediate_size, vb.pp("intermediate.dense"))?,
            output: linear(cfg.intermediate_size, h, vb.pp("output.dense"))?,
            out_norm: layer_norm(h, ln, vb.pp("output.LayerNorm"))?,
            heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
            act,
            eps: cfg.layer_norm_eps,
        })
    }

    /// (T, H) -> (T, H)
    fn forward(&self, x: &Tensor, slots: &SlotGroups) -> Result<Tensor> {
        #[cfg(feature = "cuda")]
        if x.device().is_cuda() && encoder_kernels_on() {
            return self.forward_cuda(x, slots);
        }
        // 1. (T, H) -> (T, 3H): queries, keys and values for every token of every sequence.
        let qkv = stage("matmul qkv + bias", || self.qkv.forward(x))?;
        // 2. Block-diagonal attention.
        let ctx = match &slots.flash {
            #[cfg(feature = "flash-attn")]
            Some(flash) => {
                let t = qkv.dim(0)?;
                let qkv = qkv.reshape((t, 3, self.heads, self.head_dim))?;
                let (q, k, v) = stage("q/k/v copies", || {
                    Ok((qkv.i((.., 0))?.contiguous()?, qkv.i((.., 1))?.contiguous()?, qkv.i((.., 2))?.contiguous()?))
                })?;
                self.flash_attention(&q, &k, &v, flash)?
            }
            #[cfg(not(feature = "flash-attn"))]
            Some(never) => match *never {},
            None => stage("attention (grouped)", || self.grouped_attention(&qkv, slots))?,
        };
        // 3. Output projection, residual, norm.
        let y = stage("matmul attn_out + bias", || self.attn_out.forward(&ctx))?;
        let y = stage("residual add", || y.add(x))?;
        let x = stage("layer norm", || self.attn_norm.forward(&y))?;
        // 4. Feed-forward, residual, norm.
        let y = stage("matmul ffn_in + bias", || self.intermediate.forward(&x))?;
        let y = stage("activation", || self.act.apply(&y))?;
        let y = stage("matmul ffn_out + bias", || self.output.forward(&y))?;
        let y = stage("residual add", || y.add(&x))?;
        stage("layer norm", || self.out_norm.forward(&y))
    }

    /// The layer on CUDA with the fused kernels of [`crate::encoder_kernels`]: four matmuls without
    /// bias, FlashAttention-2 reading k and v in place with one pass for q's bias (or the grouped
    /// attention), and one kernel for each bias + residual + layer norm and bias + activation.
    /// (T, H) -> (T, H).
    #[cfg(feature = "cuda")]
    fn forward_cuda(&self, x: &Tensor, slots: &SlotGroups) -> Result<Tensor> {
        use crate::encoder_kernels as k;
        fn norm(n: &LayerNorm) -> Result<(&Tensor, &Tensor)> {
            Ok((n.weight(), n.bias().ok_or_else(|| candle_core::Error::Msg("a BERT layer norm without a bias".into()))?))
        }
        let qkv = stage("matmul qkv", || x.matmul(&self.qkv.weight().t()?))?;
        let (ctx, attn_out_bias) = match &slots.flash {
            #[cfg(feature = "flash-attn")]
            Some(flash) => {
                // k and v read in place (strided rows of the projection), q with its bias: see InPlaceBiases.
                let t = qkv.dim(0)?;
                let q = stage("bias of q", || k::bias_columns(&qkv, self.heads * self.head_dim, &self.in_place.q))?;
                let kv = qkv.reshape((t, 3, self.heads, self.head_dim))?;
                let q = q.reshape((t, self.heads, self.head_dim))?;
                (self.flash_attention(&q, &kv.i((.., 1))?, &kv.i((.., 2))?, flash)?, &self.in_place.attn_out)
            }
            #[cfg(not(feature = "flash-attn"))]
            Some(never) => match *never {},
            None => {
                let qkv = stage("bias", || qkv.broadcast_add(bias_of(&self.qkv)?))?;
                (stage("attention (grouped)", || self.grouped_attention(&qkv, slots))?, bias_of(&self.attn_out)?)
            }
        };
        let y = stage("matmul attn_out", || ctx.matmul(&self.attn_out.weight().t()?))?;
        let (g, b) = norm(&self.attn_norm)?;
        let x = stage("bias + residual + layer norm", || k::bias_residual_layer_norm(&y, attn_out_bias, x, g, b, self.eps))?;
        let y = stage("matmul ffn_in", || x.matmul(&self.intermediate.weight().t()?))?;
        let y = stage("bias + activation", || k::bias_act(&y, bias_of(&self.intermediate)?, self.act))?;
        let y = stage("matmul ffn_out", || y.matmul(&self.output.weight().t()?))?;
        let (g, b) = norm(&self.out_norm)?;
        stage("bias + residual + layer norm", || k::bias_residual_layer_norm(&y, bias_of(&self.output)?, &x, g, b, self.eps))
    }

    /// FlashAttention-2's varlen kernel over the whole tape at once (real tokens only, see
    /// [`FlashSlots`]): q, k, v (T, heads, head_dim) -> (T, H).
    #[cfg(feature = "flash-attn")]
    fn flash_attention(&self, q: &Tensor, k: &Tensor, v: &Tensor, flash: &FlashSlots) -> Result<Tensor> {
        let t = q.dim(0)?;
        let scale = 1.0 / (self.head_dim as f32).sqrt();
        let ctx = stage("flash attention", || {
            candle_flash_attn::flash_attn_varlen(
                q,
                k,
                v,
                &flash.cu_seqlens,
                &flash.cu_seqlens,
                flash.max_seqlen,
                flash.max_seqlen,
                scale,
                false,
            )
        })?;
        ctx.reshape((t, self.heads * self.head_dim))
    }

    /// Masked attention, one batched call per run of equal-size slots: (T, 3H) -> (T, H).
    fn grouped_attention(&self, qkv: &Tensor, slots: &SlotGroups) -> Result<Tensor> {
        let h = self.heads * self.head_dim;
        let mut parts = Vec::with_capacity(slots.groups.len());
        for g in &slots.groups {
            let block = qkv.narrow(0, g.start, g.count * g.slot_len)?;
            // (n*s, 3H) -> (n, s, 3, heads, hd) -> three of (n, heads, s, hd)
            let block = block.reshape((g.count, g.slot_len, 3, self.heads, self.head_dim))?;
            let q = block.i((.., .., 0))?.transpose(1, 2)?.contiguous()?;
            let k = block.i((.., .., 1))?.transpose(1, 2)?.contiguous()?;
            let v = block.i((.., .., 2))?.transpose(1, 2)?.contiguous()?;
            let scale = 1.0 / (self.head_dim as f64).sqrt();
            // (n, heads, s, hd) x (n, heads, hd, s) -> (n, heads, s, s)
            let scores = q.matmul(&k.t()?)?;
            let scores = (scores * scale)?;
            let scores = match &g.bias {
                Some(bias) => scores.broadcast_add(bias)?,
                None => scores,
            };
            let scores = match &g.key_mask {
                Some(mask) => scores.broadcast_add(mask)?,
                None => scores,
            };
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            // (n, heads, s, s) x (n, heads, s, hd) -> (n, heads, s, hd) -> (n*s, H)
            let ctx = probs.matmul(&v)?.transpose(1, 2)?.reshape((g.count * g.slot_len, h))?;
            parts.push(ctx);
        }
        if parts.len() == 1 {
            Ok(parts.pop().expect("one part"))
        } else {
            Tensor::cat(&parts, 0)
        }
    }
}

/// Whether CUDA bins run through [`crate::encoder_kernels`] (the default) rather than candle's
/// element-wise ops (`WARPFOLD_ENCODER_KERNELS=candle`, for side-by-side measurements).
#[cfg(feature = "cuda")]
fn encoder_kernels_on() -> bool {
    !crate::switches::get().candle_encoder_ops
}

/// The slot boundaries FlashAttention-2 needs, on the device. The flash path runs on a compacted
/// tape holding only real tokens (see [`BertModel::hidden_states`]), so the kernel's sequences are
/// exactly the real sequences and no pad token is ever attended to.
#[cfg(feature = "flash-attn")]
struct FlashSlots {
    cu_seqlens: Tensor,
    max_seqlen: usize,
}

/// Uninhabited without the `flash-attn` feature, so the flash branch compiles away.
#[cfg(not(feature = "flash-attn"))]
enum FlashSlots {}

/// A run of consecutive slots with the same size, and the key mask for their pad tokens.
struct SlotGroup {
    start: usize,
    count: usize,
    slot_len: usize,
    /// (n, 1, 1, s): 0 for real keys, -inf for pad keys; `None` when no slot of the run has padding.
    key_mask: Option<Tensor>,
    /// (1, heads, s, s): MPNet's relative-position bias ([`crate::mpnet::RelativeBias::block`]).
    bias: Option<Tensor>,
}

struct SlotGroups {
    groups: Vec<SlotGroup>,
    /// Set when attention runs through FlashAttention-2 instead of the groups.
    flash: Option<FlashSlots>,
}

impl SlotGroups {
    /// The runs of `bin`, their key masks in `dtype` (the scores' own: f16 on CUDA), each with its
    /// slots' relative-position bias where the model has one.
    fn new(bin: &Bin, device: &Device, dtype: DType, relative: Option<&RelativeBias>) -> Result<Self> {
        let mut groups: Vec<(usize, usize, usize)> = Vec::new();
        for i in 0..bin.num_sequences() {
            let (start, slot, _) = bin.slot(i);
            match groups.last_mut() {
                Some((_, count, len)) if *len == slot => *count += 1,
                _ => groups.push((start, 1, slot)),
            }
        }
        let mut first_slot = 0;
        let mut out = Vec::with_capacity(groups.len());
        for (start, count, slot_len) in groups {
            let real = &bin.seq_lens[first_slot..first_slot + count];
            first_slot += count;
            let key_mask = if real.iter().all(|&r| r as usize == slot_len) {
                None
            } else {
                let mut mask = vec![0f32; count * slot_len];
                for (n, &r) in real.iter().enumerate() {
                    mask[n * slot_len + r as usize..(n + 1) * slot_len].fill(f32::NEG_INFINITY);
                }
                Some(Tensor::from_vec(mask, (count, 1, 1, slot_len), device)?.to_dtype(dtype)?)
            };
            let bias = relative.map(|r| r.block(slot_len, device, dtype)).transpose()?;
            out.push(SlotGroup { start, count, slot_len, key_mask, bias });
        }
        Ok(Self { groups: out, flash: None })
    }
}

pub struct BertModel {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    pooling: Pooling,
    device: Device,
    dtype: DType,
    pub config: Config,
    /// Pinned double-buffered inputs and results on CUDA (see [`crate::staging`]).
    staging: crate::staging::Staging,
    /// On the CPU, the layers in their fused form ([`crate::bert_cpu`]); `layers` is then empty.
    cpu: Option<CpuEncoder>,
    /// MPNet's relative-position bias, which every layer adds to its scores ([`crate::mpnet`]).
    relative: Option<Arc<RelativeBias>>,
}

impl BertModel {
    pub fn new(cfg: &Config, pooling: Pooling, vb: VarBuilder) -> Result<Self> {
        // Checkpoints differ in prefix: sentence-transformers saves the bare `BertModel`, others keep
        // `bert.` or `model.` in front.
        let vb = ["", "bert", "model"]
            .into_iter()
            .map(|p| if p.is_empty() { vb.clone() } else { vb.pp(p) })
            .find(|v| v.contains_tensor("embeddings.word_embeddings.weight"))
            .ok_or_else(|| {
                candle_core::Error::Msg(
                    "no embeddings.word_embeddings.weight (with or without a bert./model. prefix) in the weights".into(),
                )
            })?;
        let vb = if cfg.is_mpnet() { vb.rename_f(crate::mpnet::bert_name) } else { vb };
        let relative = match cfg.relative_attention_num_buckets.filter(|_| cfg.is_mpnet()) {
            Some(buckets) => {
                let table = vb.pp("encoder.relative_attention_bias").get((buckets, cfg.num_attention_heads), "weight")?;
                Some(Arc::new(RelativeBias::new(&table, cfg.max_positions())?))
            }
            None => None,
        };
        let embeddings = Embeddings::new(cfg, vb.pp("embeddings"))?;
        let layers =
            (0..cfg.num_hidden_layers).map(|i| Layer::new(cfg, vb.pp(format!("encoder.layer.{i}")))).collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embeddings,
            layers,
            pooling,
            device: vb.device().clone(),
            dtype: vb.dtype(),
            config: cfg.clone(),
            staging: Default::default(),
            cpu: None,
            relative,
        })
    }

    /// The model with its layers in the fused CPU form ([`crate::bert_cpu`]), which every CPU bin
    /// then runs through, its matmuls by `gemm`; the candle-op layers are dropped (one copy of the
    /// weights in memory).
    pub(crate) fn fused_for_cpu(mut self, gemm: Gemm) -> Result<Self> {
        if !self.device.is_cpu() || self.dtype != DType::F32 {
            candle_core::bail!("the fused encoder runs f32 weights on the CPU (this model: {:?} on {:?})", self.dtype, self.device);
        }
        let layers = self
            .layers
            .iter()
            .map(|l| {
                CpuLayer::new(
                    LayerParts {
                        qkv: &l.qkv,
                        attn_out: &l.attn_out,
                        attn_norm: &l.attn_norm,
                        intermediate: &l.intermediate,
                        output: &l.output,
                        out_norm: &l.out_norm,
                        act: l.act,
                    },
                    gemm,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        self.cpu = Some(CpuEncoder::new(
            layers,
            self.config.hidden_size,
            self.config.num_attention_heads,
            self.config.layer_norm_eps,
            gemm,
            self.relative.clone(),
        ));
        self.layers.clear();
        Ok(self)
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Whether attention runs through FlashAttention-2: a build with its kernel for this head size
    /// ([`crate::flash`]), a CUDA device and half-precision weights.
    /// MPNet's relative-position bias is one FlashAttention-2 cannot add, so it never does.
    pub fn uses_flash_attention(&self) -> bool {
        self.relative.is_none() && crate::flash::uses_flash(&self.device, self.head_dim(), self.dtype, false)
    }

    /// Which attention its bins run through, in words, for the device views; on the CPU in bf16 or
    /// bf16x3 it says so.
    pub fn attention(&self) -> String {
        let attention = if self.relative.is_some() {
            let place = if self.device.is_cuda() { "" } else { " (CPU)" };
            format!("masked attention per slot with MPNet's relative-position bias{place}")
        } else {
            crate::flash::describe(&self.device, self.head_dim(), self.dtype, false)
        };
        match self.cpu.as_ref().and_then(CpuEncoder::reduced_products) {
            Some(products) => format!("{attention}, products in {products} (MKL)"),
            None => attention,
        }
    }

    /// The attention and, on the CPU, the fused layers' matrix product, in words (for benchmarks).
    pub fn kernels(&self) -> String {
        match &self.cpu {
            Some(cpu) => format!("fused CPU layers: {}", cpu.describe()),
            None => self.attention(),
        }
    }

    fn head_dim(&self) -> usize {
        self.config.hidden_size / self.config.num_attention_heads
    }

    /// The token states of a bin: (T, H). On the flash path the tape is first compacted to the
    /// real tokens (the bin that comes back from [`Self::compact`] says where each sequence is).
    pub fn hidden_states(&self, bin: &Bin) -> Result<Tensor> {
        let staged = self.staging.upload(&self.device, &[&bin.input_ids, &bin.position_ids, &bin.cu_seqlens])?;
        self.hidden_states_staged(bin, &staged[0], &staged[1], &staged[2])
    }

    /// [`Self::hidden_states`] of a bin whose ids, positions and slot boundaries are on the device.
    fn hidden_states_staged(&self, bin: &Bin, ids: &Tensor, positions: &Tensor, cu_seqlens: &Tensor) -> Result<Tensor> {
        #[cfg(feature = "flash-attn")]
        let slots = if self.uses_flash_attention() {
            let max_seqlen = bin.seq_lens.iter().copied().max().unwrap_or(0) as usize;
            SlotGroups { groups: Vec::new(), flash: Some(FlashSlots { cu_seqlens: cu_seqlens.clone(), max_seqlen }) }
        } else {
            self.slot_groups(bin)?
        };
        #[cfg(not(feature = "flash-attn"))]
        let slots = {
            let _ = cu_seqlens;
            self.slot_groups(bin)?
        };
        let mut x = stage("embeddings", || self.embeddings.forward(ids, positions))?;
        if let Some(cpu) = &self.cpu {
            return cpu.forward(bin, &x);
        }
        for layer in &self.layers {
            x = layer.forward(&x, &slots)?;
        }
        Ok(x)
    }

    /// The runs of equal slots of `bin` for the candle-op layers (none for the fused CPU layers,
    /// which find the slots themselves).
    fn slot_groups(&self, bin: &Bin) -> Result<SlotGroups> {
        if self.cpu.is_some() {
            return Ok(SlotGroups { groups: Vec::new(), flash: None });
        }
        SlotGroups::new(bin, &self.device, self.dtype, self.relative.as_deref())
    }

    /// The bin with every pad and alignment token removed: FlashAttention-2's varlen kernel needs
    /// no slot padding, so the flash path computes real tokens only.
    pub fn compact(bin: &Bin) -> Bin {
        let mut out = Bin {
            layout: bin.layout,
            input_ids: Vec::with_capacity(bin.real_tokens()),
            position_ids: Vec::with_capacity(bin.real_tokens()),
            cu_seqlens: Vec::with_capacity(bin.cu_seqlens.len()),
            seq_lens: bin.seq_lens.clone(),
            max_seqlen: bin.seq_lens.iter().copied().max().unwrap_or(0),
            capacity: bin.capacity,
            tags: bin.tags.clone(),
        };
        out.cu_seqlens.push(0);
        for i in 0..bin.num_sequences() {
            let (start, _, real) = bin.slot(i);
            out.input_ids.extend_from_slice(&bin.input_ids[start..start + real]);
            out.position_ids.extend_from_slice(&bin.position_ids[start..start + real]);
            out.cu_seqlens.push(out.input_ids.len() as u32);
        }
        out
    }

    /// One L2-normalised vector per slot: (sequences, H), in f32, on the device ([`Self::fetch`]
    /// brings it back).
    pub fn embed(&self, bin: &Bin) -> Result<Tensor> {
        stage_profile::begin(&self.device);
        let out = self.embed_profiled(bin);
        stage_profile::report(bin, &self.device);
        out
    }

    fn embed_profiled(&self, bin: &Bin) -> Result<Tensor> {
        let compacted;
        let bin = if self.uses_flash_attention() {
            compacted = stage("compact the tape (host)", || Ok(Self::compact(bin)))?;
            &compacted
        } else {
            bin
        };
        // Everything the bin needs on the device, in one upload: the tape, the slot boundaries, and
        // what pooling reads: each sequence's first row and row count for the pooling kernel, or
        // for candle's ops (mean pooling) each real row and the sequence it belongs to.
        let n = bin.num_sequences();
        let kernel_pool = self.pools_with_kernel();
        let (mut first, mut second) = (Vec::new(), Vec::new());
        if kernel_pool {
            for i in 0..n {
                let (start, _, real) = bin.slot(i);
                let len = if self.pooling == Pooling::Cls { real.min(1) } else { real };
                assert!(start + len <= bin.computed_tokens(), "a slot inside the tape");
                first.push(start as u32);
                second.push(len as u32);
            }
        } else if self.pooling == Pooling::Mean {
            // With no pad tokens every row is real: no rows to pick (an empty list says so).
            let padded = bin.real_tokens() != bin.computed_tokens();
            for i in 0..n {
                let (start, _, real) = bin.slot(i);
                if padded {
                    first.extend(start as u32..(start + real) as u32);
                }
                second.extend(std::iter::repeat_n(i as u32, real));
            }
        }
        let staged = stage("upload", || {
            self.staging.upload(&self.device, &[&bin.input_ids, &bin.position_ids, &bin.cu_seqlens, &bin.seq_lens, &first, &second])
        })?;
        let [ids, positions, cu, lens, first, second] = staged.as_slice() else { unreachable!("six parts were uploaded") };
        let x = self.hidden_states_staged(bin, ids, positions, cu)?;
        #[cfg(feature = "cuda")]
        if kernel_pool {
            return stage("pool and normalise", || crate::encoder_kernels::pool_normalize(&x, first, second));
        }
        stage("pool and normalise", || self.pool(&x, n, cu, lens, first, second))
    }

    /// Whether pooling runs through [`crate::encoder_kernels::pool_normalize`]: on CUDA, unless
    /// candle's ops were asked for, for rows it takes.
    fn pools_with_kernel(&self) -> bool {
        #[cfg(feature = "cuda")]
        {
            self.device.is_cuda() && encoder_kernels_on() && self.config.hidden_size <= crate::encoder_kernels::POOL_MAX_WIDTH
        }
        #[cfg(not(feature = "cuda"))]
        false
    }

    /// One L2-normalised f32 row per sequence from the token states `x`.
    fn pool(&self, x: &Tensor, n: usize, cu: &Tensor, lens: &Tensor, rows: &Tensor, segment: &Tensor) -> Result<Tensor> {
        let pooled = match self.pooling {
            Pooling::Cls => x.index_select(&cu.narrow(0, 0, n)?, 0)?,
            Pooling::Mean => {
                // Sum each sequence's real rows into its own output row (a scatter-add on the
                // device), then divide by the lengths: O(T) however many sequences share the bin.
                let real_rows = if rows.dim(0)? == 0 { x.clone() } else { x.index_select(rows, 0)? };
                let real_rows = real_rows.to_dtype(DType::F32)?;
                let sums = Tensor::zeros((n, real_rows.dim(1)?), DType::F32, &self.device)?.index_add(segment, &real_rows, 0)?;
                sums.broadcast_div(&lens.to_dtype(DType::F32)?.reshape((n, 1))?)?
            }
        }
        .to_dtype(DType::F32)?;
        let norm = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        pooled.broadcast_div(&norm)
    }

    /// A result tensor back on the host (through pinned memory on CUDA), flattened.
    pub fn fetch(&self, t: &Tensor) -> Result<Vec<f32>> {
        self.staging.fetch(t)
    }

    /// [`Self::fetch`] queued: the copy runs on the device's stream; [`Self::fetch_wait`] waits.
    pub fn fetch_start(&self, t: &Tensor) -> Result<crate::staging::Fetch> {
        self.staging.fetch_start(t)
    }

    pub fn fetch_wait(&self, fetch: crate::staging::Fetch) -> Result<Vec<f32>> {
        self.staging.fetch_wait(fetch)
    }

    /// The device's busy and idle time between bins (CUDA events; zero on the CPU).
    pub fn timeline(&self) -> std::sync::Arc<warpfold_backend::DeviceTimeline> {
        self.staging.timeline()
    }
}

/// How the CPU encoder multiplies by its weights (the GPU's precision is its own: f16 or f32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CpuPrecision {
    /// The default: [`CpuPrecision::Bf16x3`] where MKL is loaded and its bf16 products run on AMX
    /// ([`crate::mkl::Mkl::bf16_on_amx`]; there it is faster than f32, its vectors within a few
    /// millionths of f32's), else [`CpuPrecision::F32`].
    #[default]
    Auto,
    /// f32 throughout: the vectors of the reference implementation to f32 rounding.
    F32,
    /// The products (the weights' and attention's) with bf16 operands and f32 sums, through Intel
    /// MKL (on AMX tiles where the CPU has them); norms, GELU, residuals and pooling in f32. Faster
    /// where the CPU has AMX or AVX512-BF16; the vectors move by bf16's rounding (BENCHMARKS.md,
    /// the stage profile).
    Bf16,
    /// The weights' products as three bf16 products with f32 sums (each f32 split into a high and a
    /// low bf16: hi·hi + hi·lo + lo·hi, about 16 of f32's 24 bits), through Intel MKL; where AMX's
    /// tiles run, attention's two products the same way on them, else attention in
    /// f32; the softmax, norms, GELU, residuals and pooling in f32. Faster than f32 only where the
    /// CPU has AMX (bf16 products there run at several times the f32 rate); the vectors stay within
    /// about 1e-5 of the f32 ones (BENCHMARKS.md).
    Bf16x3,
}

impl CpuPrecision {
    /// The name `from_str` reads: `auto`, `f32`, `bf16` or `bf16x3`.
    pub fn name(self) -> &'static str {
        match self {
            CpuPrecision::Auto => "auto",
            CpuPrecision::F32 => "f32",
            CpuPrecision::Bf16 => "bf16",
            CpuPrecision::Bf16x3 => "bf16x3",
        }
    }
}

impl std::str::FromStr for CpuPrecision {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(CpuPrecision::Auto),
            "f32" => Ok(CpuPrecision::F32),
            "bf16" => Ok(CpuPrecision::Bf16),
            "bf16x3" => Ok(CpuPrecision::Bf16x3),
            other => Err(format!("{other:?} is not a CPU precision: auto, f32, bf16 or bf16x3")),
        }
    }
}

/// Loads the model from safetensors files: f32, or f16 where FlashAttention-2 will run it. On the
/// CPU the layers run fused ([`crate::bert_cpu`]), with MKL's matmul when it is installed beside the
/// model folder `model_dir` ([`crate::mkl::for_model`]), else [`Gemm::without_mkl`]'s, unless
/// `WARPFOLD_CPU_ENCODER=ops` asks for the candle-op layers (for side-by-side measurements).
/// [`CpuPrecision::Bf16`] and [`CpuPrecision::Bf16x3`] need MKL's bf16 product and fail with the
/// reason where it is missing.
pub fn load(
    cfg: &Config,
    pooling: Pooling,
    weights: &[std::path::PathBuf],
    model_dir: Option<&std::path::Path>,
    device: &Device,
    precision: CpuPrecision,
) -> Result<BertModel> {
    // SAFETY: the files are memory-mapped read-only; warpfold does not modify model files while running.
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(weights, weights_dtype(device), device)? };
    load_from(cfg, pooling, vb, model_dir, precision)
}

/// The dtype [`load`] gives the weights on `device`: f16 where FlashAttention-2 will run them, else f32.
pub fn weights_dtype(device: &Device) -> DType {
    if cfg!(feature = "flash-attn") && device.is_cuda() {
        DType::F16
    } else {
        DType::F32
    }
}

/// [`load`] from weights already under the Hugging Face names in `vb` (in [`weights_dtype`] on their
/// device), for formats other than safetensors (the 4-bit file of [`crate::e5`]).
pub fn load_from(
    cfg: &Config,
    pooling: Pooling,
    vb: VarBuilder,
    model_dir: Option<&std::path::Path>,
    precision: CpuPrecision,
) -> Result<BertModel> {
    let device = vb.device().clone();
    let model = BertModel::new(cfg, pooling, vb)?;
    let ops = crate::switches::get().cpu_encoder_ops;
    if device.is_cpu() && !ops {
        let mkl = crate::mkl::for_model(model_dir);
        let gemm = match (precision, mkl) {
            (CpuPrecision::Auto, Some(mkl)) if mkl.bf16_on_amx() => Gemm::MklBf16x3(mkl),
            (CpuPrecision::F32 | CpuPrecision::Auto, Some(mkl)) => Gemm::Mkl(mkl),
            (CpuPrecision::F32 | CpuPrecision::Auto, None) => Gemm::without_mkl(),
            (CpuPrecision::Bf16, Some(mkl)) if mkl.has_bf16() => Gemm::MklBf16(mkl),
            (CpuPrecision::Bf16x3, Some(mkl)) if mkl.has_bf16() => Gemm::MklBf16x3(mkl),
            (_, Some(mkl)) => candle_core::bail!(
                "{} on the CPU needs Intel MKL's cblas_gemm_bf16bf16f32, which {} lacks; choose the CPU precision f32 or auto",
                precision.name(),
                mkl.path().display()
            ),
            (_, None) => candle_core::bail!(
                "{} on the CPU runs through Intel MKL, which is not loaded here (it is fetched beside the pinned models on \
                 Intel CPUs, or named by WARPFOLD_MKL); choose the CPU precision f32 or auto",
                precision.name()
            ),
        };
        model.fused_for_cpu(gemm)
    } else {
        Ok(model)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cpu_panels::Kernel;

    #[test]
    fn unsupported_configs_fail_early_with_the_reason() {
        let base = r#"{"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,
            "intermediate_size":16,"max_position_embeddings":32}"#;
        let cfg: Config = serde_json::from_str(base).unwrap();
        cfg.check().unwrap();
        let mut bad = cfg.clone();
        bad.position_embedding_type = "relative_key".into();
        assert!(bad.check().unwrap_err().contains("relative_key"));
        let mut bad = cfg.clone();
        bad.num_attention_heads = 3;
        assert!(bad.check().unwrap_err().contains("multiple"));
        let mut bad = cfg.clone();
        bad.model_type = Some("xlm-roberta".into());
        assert!(bad.check().unwrap_err().contains("RoBERTa"));
        let mut bad = cfg;
        bad.model_type = Some("llama".into());
        assert!(bad.check().unwrap_err().contains("llama"));
    }

    #[test]
    fn in_place_biases_give_the_same_attention_output() {
        // The CUDA flash path's attention (k without its bias, v without its bias, the output
        // projection with v's bias moved into its own) against the layer's plain attention, in f32
        // on the CPU: one sequence of 7 tokens, 3 heads of 4, biases as large as the weights.
        let cfg: Config = serde_json::from_value(serde_json::json!({
            "vocab_size": 11, "hidden_size": 12, "num_hidden_layers": 1, "num_attention_heads": 3,
            "intermediate_size": 24, "max_position_embeddings": 16
        }))
        .unwrap();
        let mut weights = random_weights(&cfg);
        for (name, t) in weights.iter_mut() {
            if name.ends_with(".bias") {
                *t = (t.clone() * 10.0).unwrap();
            }
        }
        let layer = Layer::new(&cfg, VarBuilder::from_tensors(weights, DType::F32, &Device::Cpu).pp("encoder.layer.0")).unwrap();
        let (t, h, heads) = (7, 12, 3);
        let x = Tensor::randn(0f32, 1.0, (t, h), &Device::Cpu).unwrap();
        // softmax(q kᵀ / √d) v per head: (T, H) each -> (T, H).
        let attend = |q: &Tensor, k: &Tensor, v: &Tensor| -> Tensor {
            let heads_of = |m: &Tensor| m.reshape((t, heads, h / heads)).unwrap().transpose(0, 1).unwrap().contiguous().unwrap();
            let (q, k, v) = (heads_of(q), heads_of(k), heads_of(v));
            let scores = (q.matmul(&k.t().unwrap()).unwrap() / ((h / heads) as f64).sqrt()).unwrap();
            let p = candle_nn::ops::softmax_last_dim(&scores).unwrap();
            p.matmul(&v).unwrap().transpose(0, 1).unwrap().reshape((t, h)).unwrap()
        };
        let out_proj =
            |ctx: &Tensor, bias: &Tensor| ctx.matmul(&layer.attn_out.weight().t().unwrap()).unwrap().broadcast_add(bias).unwrap();
        let qkv = layer.qkv.forward(&x).unwrap();
        let part = |m: &Tensor, i: usize| m.narrow(1, i * h, h).unwrap();
        let want = out_proj(&attend(&part(&qkv, 0), &part(&qkv, 1), &part(&qkv, 2)), layer.attn_out.bias().unwrap());
        let in_place = InPlaceBiases::new(&layer.qkv, &layer.attn_out, h).unwrap();
        let bare = x.matmul(&layer.qkv.weight().t().unwrap()).unwrap();
        let q = part(&bare, 0).broadcast_add(&in_place.q).unwrap();
        let got = out_proj(&attend(&q, &part(&bare, 1), &part(&bare, 2)), &in_place.attn_out);
        let diff = (got - &want).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        let scale = want.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff <= 1e-5 * scale.max(1.0), "largest difference {diff} (outputs up to {scale})");
    }

    /// Random weights of a small BERT, every tensor the loader reads.
    pub(crate) fn random_weights(cfg: &Config) -> std::collections::HashMap<String, Tensor> {
        let dev = Device::Cpu;
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let rand = |shape: &[usize], mean: f32, sd: f32| Tensor::randn(mean, sd, shape, &dev).unwrap();
        let mut w = std::collections::HashMap::new();
        w.insert("embeddings.word_embeddings.weight".to_string(), rand(&[cfg.vocab_size, h], 0.0, 1.0));
        w.insert("embeddings.position_embeddings.weight".to_string(), rand(&[cfg.max_position_embeddings, h], 0.0, 1.0));
        w.insert("embeddings.token_type_embeddings.weight".to_string(), rand(&[cfg.type_vocab_size, h], 0.0, 1.0));
        let norm = |w: &mut std::collections::HashMap<String, Tensor>, name: String| {
            w.insert(format!("{name}.weight"), rand(&[h], 1.0, 0.1));
            w.insert(format!("{name}.bias"), rand(&[h], 0.0, 0.1));
        };
        norm(&mut w, "embeddings.LayerNorm".into());
        for l in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            for (name, out, inp) in [
                ("attention.self.query", h, h),
                ("attention.self.key", h, h),
                ("attention.self.value", h, h),
                ("attention.output.dense", h, h),
                ("intermediate.dense", i, h),
                ("output.dense", h, i),
            ] {
                let sd = 1.0 / (inp as f32).sqrt();
                w.insert(format!("{p}.{name}.weight"), rand(&[out, inp], 0.0, sd));
                w.insert(format!("{p}.{name}.bias"), rand(&[out], 0.0, 0.1));
            }
            norm(&mut w, format!("{p}.attention.output.LayerNorm"));
            norm(&mut w, format!("{p}.output.LayerNorm"));
        }
        w
    }

    /// A packed bin (slots aligned to 16) of sequences of these lengths, with arbitrary ids.
    pub(crate) fn bin_of_lengths(lengths: &[usize], vocab: u32) -> Bin {
        let seqs: Vec<Vec<u32>> =
            lengths.iter().enumerate().map(|(n, &len)| (0..len as u32).map(|p| (n as u32 * 131 + p * 17 + 1) % vocab).collect()).collect();
        crate::llama::tests::bin_of(&seqs, 16)
    }

    #[test]
    fn fused_cpu_layers_equal_the_candle_op_layers() {
        // Slots of many shapes: full, padded, one token, longer than a row block of the fused path.
        let bin = bin_of_lengths(&[45, 3, 80, 1, 17, 90], 97);
        // Head size 12 takes attention as two products; 32 (MiniLM's) the tiled kernel where the CPU
        // has AVX2 + FMA (`crate::cpu_attention`).
        for (act, hidden, heads) in [("gelu", 48, 4), ("gelu_new", 48, 4), ("relu", 48, 4), ("gelu", 64, 2)] {
            let cfg: Config = serde_json::from_value(serde_json::json!({
                "vocab_size": 97, "hidden_size": hidden, "num_hidden_layers": 3, "num_attention_heads": heads,
                "intermediate_size": 112, "max_position_embeddings": 128, "hidden_act": act
            }))
            .unwrap();
            let vb = VarBuilder::from_tensors(random_weights(&cfg), DType::F32, &Device::Cpu);
            let ops = BertModel::new(&cfg, Pooling::Mean, vb.clone()).unwrap();
            let fused = BertModel::new(&cfg, Pooling::Mean, vb.clone()).unwrap().fused_for_cpu(Gemm::Crate).unwrap();
            let mut models = vec![("gemm crate", fused)];
            // The panels of every kernel this CPU runs (`crate::cpu_panels`).
            for kernel in [Kernel::Avx2, Kernel::Avx512].into_iter().filter(|k| k.runs_here()) {
                let panels = BertModel::new(&cfg, Pooling::Mean, vb.clone()).unwrap().fused_for_cpu(Gemm::Panels(kernel)).unwrap();
                models.push((kernel.name(), panels));
            }
            // MKL too where `warpfold models fetch` installed it in the checkout (always in CI).
            if let Some(mkl) = repo_mkl() {
                models.push(("MKL", BertModel::new(&cfg, Pooling::Mean, vb).unwrap().fused_for_cpu(Gemm::Mkl(mkl)).unwrap()));
            }
            for (_, fused) in &models {
                compare(&ops, fused, &bin, &format!("{act}, head size {}, {}", hidden / heads, fused.kernels()));
            }
        }
    }

    #[test]
    fn bf16_products_keep_the_vectors_within_bf16_rounding_and_bf16x3_within_sixteen_bits() {
        let Some(mkl) = repo_mkl().filter(|mkl| mkl.has_bf16()) else {
            eprintln!("no MKL with cblas_gemm_bf16bf16f32 here: the bf16 comparison is left out");
            return;
        };
        let bin = bin_of_lengths(&[45, 3, 80, 1, 17, 90], 97);
        let cfg: Config = serde_json::from_value(serde_json::json!({
            "vocab_size": 97, "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 2,
            "intermediate_size": 112, "max_position_embeddings": 128, "hidden_act": "gelu"
        }))
        .unwrap();
        let vb = VarBuilder::from_tensors(random_weights(&cfg), DType::F32, &Device::Cpu);
        let f32s = BertModel::new(&cfg, Pooling::Mean, vb.clone()).unwrap().fused_for_cpu(Gemm::Mkl(mkl)).unwrap();
        let bf16 = BertModel::new(&cfg, Pooling::Mean, vb.clone()).unwrap().fused_for_cpu(Gemm::MklBf16(mkl)).unwrap();
        assert!(bf16.kernels().contains("bf16"), "{}", bf16.kernels());
        // The device views (desktop and web UI) read this line to show the bf16 pill.
        assert_eq!(bf16.attention(), "masked attention per slot (CPU), products in bf16 (MKL)");
        assert_eq!(f32s.attention(), "masked attention per slot (CPU)");
        let (worst_cos, largest) = against_f32(&f32s, &bf16, &bin, cfg.hidden_size);
        // The products really ran in bf16 (8 significant bits: the vectors move), and the f32 sums
        // keep the pooled vectors close.
        assert!(largest > 1e-5, "the bf16 path gave the f32 vectors exactly: largest difference {largest}");
        assert!(worst_cos > 0.999, "cosine to the f32 vectors {worst_cos}");

        // bf16x3: the weights' products from split operands, about 16 bits of each f32.
        let x3 = BertModel::new(&cfg, Pooling::Mean, vb).unwrap().fused_for_cpu(Gemm::MklBf16x3(mkl)).unwrap();
        assert!(x3.kernels().contains("bf16x3"), "{}", x3.kernels());
        // Where AMX's tiles run, attention's two products are bf16x3 on them too (among MKL's own
        // tile products on the same threads); elsewhere attention stays f32.
        let f32_tiles_asked = matches!(crate::switches::get().cpu_attention.as_str(), "tiled" | "avx2" | "products");
        let amx = crate::cpu_attention::Tiles::AmxBf16x3.run_here(cfg.hidden_size / cfg.num_attention_heads) && !f32_tiles_asked;
        assert_eq!(x3.kernels().contains("AMX bf16x3 attention"), amx, "{}", x3.kernels());
        assert_eq!(x3.attention(), "masked attention per slot (CPU), products in bf16x3 (MKL)");
        let (worst_x3, largest_x3) = against_f32(&f32s, &x3, &bin, cfg.hidden_size);
        eprintln!("against f32: bf16 cosine {worst_cos}, largest difference {largest}; bf16x3 {worst_x3}, {largest_x3}");
        // Not the f32 products (they moved), but some hundred times closer to them than bf16's.
        assert!(largest_x3 > 0.0, "the bf16x3 path gave the f32 vectors exactly");
        assert!(largest_x3 < largest / 30.0, "bf16x3 largest difference {largest_x3}, bf16's {largest}");
        assert!(largest_x3 < 1e-5, "bf16x3 largest difference {largest_x3}");
        assert!(worst_x3 > 0.999_999, "bf16x3 cosine to the f32 vectors {worst_x3}");
    }

    /// The worst cosine and the largest element difference of `model`'s pooled vectors to `f32s`'
    /// on `bin`.
    fn against_f32(f32s: &BertModel, model: &BertModel, bin: &Bin, hidden: usize) -> (f32, f32) {
        let (a, b) = (f32s.fetch(&f32s.embed(bin).unwrap()).unwrap(), model.fetch(&model.embed(bin).unwrap()).unwrap());
        let (mut worst_cos, mut largest) = (1f32, 0f32);
        for (x, y) in a.chunks(hidden).zip(b.chunks(hidden)) {
            worst_cos = worst_cos.min(x.iter().zip(y).map(|(p, q)| p * q).sum());
            largest = x.iter().zip(y).fold(largest, |m, (p, q)| m.max((p - q).abs()));
        }
        (worst_cos, largest)
    }

    /// MKL from the checkout's models/mkl, opened once; `None` where it is not installed, except in CI
    /// (`CI` set: scripts/test.sh fetches it), where it must be there and open.
    fn repo_mkl() -> Option<&'static crate::mkl::Mkl> {
        static MKL: std::sync::OnceLock<Option<crate::mkl::Mkl>> = std::sync::OnceLock::new();
        MKL.get_or_init(|| {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/mkl").join(crate::mkl::LIBRARY);
            let ci = std::env::var_os("CI").is_some();
            if !path.is_file() && !ci {
                eprintln!("MKL is not installed at {}: the MKL comparison is left out", path.display());
                return None;
            }
            Some(crate::mkl::Mkl::open(&path).unwrap_or_else(|e| panic!("MKL must open in CI: {e}")))
        })
        .as_ref()
    }

    /// The real tokens' states and the pooled vectors of `fused` against `ops` on `bin`.
    fn compare(ops: &BertModel, fused: &BertModel, bin: &Bin, what: &str) {
        {
            let (a, b) = (ops.hidden_states(bin).unwrap(), fused.hidden_states(bin).unwrap());
            let (a, b) = (a.to_vec2::<f32>().unwrap(), b.to_vec2::<f32>().unwrap());
            let mut worst = 0f32;
            for s in 0..bin.num_sequences() {
                let (start, _, real) = bin.slot(s);
                for row in start..start + real {
                    for (x, y) in a[row].iter().zip(&b[row]) {
                        worst = worst.max((x - y).abs());
                    }
                }
            }
            assert!(worst < 1e-4, "{what}: largest difference in a real token's state {worst}");
            let (ea, eb) = (ops.fetch(&ops.embed(bin).unwrap()).unwrap(), fused.fetch(&fused.embed(bin).unwrap()).unwrap());
            let width = ops.config.hidden_size;
            for (n, (x, y)) in ea.chunks(width).zip(eb.chunks(width)).enumerate() {
                let cos: f32 = x.iter().zip(y).map(|(p, q)| p * q).sum();
                assert!(cos > 0.999_999, "{what}: sequence {n} cosine {cos}");
            }
        }
    }
}
