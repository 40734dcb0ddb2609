//! Llama-family decoders (Llama 2/3.x, SmolLM2, Qwen2/Qwen2.5) over packed input, for scoring.
//!
//! Why a decoder in an embedding engine: summarization and reranking want, per sequence, how likely a
//! model finds the text (the mean log-likelihood of every token given the ones before it) and the
//! model's final state at the last token. Both come from one forward pass with no generation loop, so
//! they fit the same packed bins the encoder runs: many sequences back to back on one flat tape,
//! positions restarting at 0 in each slot, every linear layer run once over the whole tape.
//!
//! Attention is causal and restricted to each slot's real tokens, so a sequence scores exactly as it
//! would alone. Pad tokens sit at the end of their slot; under a causal mask no real token can see
//! them, which is what lets the CUDA path hand whole slots to FlashAttention-2's varlen kernel
//! (`flash-attn` feature), while the CPU path skips them outright and computes attention in f32 on
//! each slot's real tokens, in query blocks so the score matrix stays small on long slots.
//!
//! Scoring computes logits only for the rows that predict a real next token, in blocks of
//! [`LOGIT_ROWS`], since a 150k-token vocabulary makes a full `(tokens, vocab)` matrix gigabytes; the
//! per-token log-probabilities are averaged per sequence on the device and only one number, plus the
//! last hidden state, per sequence comes back.
//!
//! Weights use the Hugging Face names; configurations this file does not implement (other RoPE
//! scalings, sliding windows, other activations, Qwen3's q/k norms) are refused by [`Config::check`]
//! rather than run with wrong results.

use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Result, Tensor, D};
use candle_nn::{embedding, rms_norm, Embedding, Linear, RmsNorm, VarBuilder};
use serde::Deserialize;
use warpfold_backend::{check_tables, validate_bin, Bin};

use crate::staging::Staging;
use crate::varlen::{varlen_causal_attention, VarlenSlots, ATTN_QUERY_ROWS};

/// Rows of logits computed at once when scoring: 512 rows of a 152k vocabulary are 300 MB in f32.
pub const LOGIT_ROWS: usize = 512;

/// Mirrors the fields of a Llama / Qwen2 `config.json` that the forward uses.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    #[serde(default)]
    pub model_type: Option<String>,
    #[serde(default)]
    pub architectures: Option<Vec<String>>,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    /// Grouped-query attention; `None` means one key/value head per query head.
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    /// `None` means `hidden_size / num_attention_heads`.
    #[serde(default)]
    pub head_dim: Option<usize>,
    #[serde(default = "default_rms_norm_eps")]
    pub rms_norm_eps: f64,
    /// Top-level in transformers 4.x configs; inside `rope_parameters` in 5.x.
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default)]
    pub rope_scaling: Option<RopeScaling>,
    /// transformers 5.x writes `rope_theta` and the scaling here instead.
    #[serde(default)]
    pub rope_parameters: Option<RopeScaling>,
    #[serde(default = "default_max_position_embeddings")]
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Llama: bias on q, k, v and o. Qwen2 ignores it (always q/k/v bias, no o bias).
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub mlp_bias: bool,
    #[serde(default = "default_hidden_act")]
    pub hidden_act: String,
    /// Qwen2's sliding-window attention (off in every released Qwen2.5 checkpoint).
    #[serde(default)]
    pub use_sliding_window: bool,
}

/// `rope_scaling` (transformers 4.x) or `rope_parameters` (5.x).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RopeScaling {
    #[serde(default)]
    pub rope_type: Option<String>,
    /// Older configs spell `rope_type` as `type`.
    #[serde(default, rename = "type")]
    pub legacy_type: Option<String>,
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default)]
    pub factor: Option<f64>,
    #[serde(default)]
    pub low_freq_factor: Option<f64>,
    #[serde(default)]
    pub high_freq_factor: Option<f64>,
    #[serde(default)]
    pub original_max_position_embeddings: Option<usize>,
}

fn default_rms_norm_eps() -> f64 {
    1e-6
}
fn default_max_position_embeddings() -> usize {
    2048
}
fn default_hidden_act() -> String {
    "silu".into()
}

/// Which family's weight layout a checkpoint has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Llama,
    Qwen2,
}

/// Rotary embedding as this file implements it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rope {
    Default { theta: f64 },
    Llama3 { theta: f64, factor: f64, low_freq_factor: f64, high_freq_factor: f64, original_max_positions: usize },
}

impl Config {
    /// Fails early, with the reason, on configurations this file does not implement.
    pub fn check(&self) -> std::result::Result<(), String> {
        self.family()?;
        if self.hidden_act != "silu" {
            return Err(format!("hidden_act {:?} is not supported (only \"silu\")", self.hidden_act));
        }
        if self.use_sliding_window {
            return Err("use_sliding_window: sliding-window attention is not supported".into());
        }
        let heads = self.num_attention_heads;
        let kv = self.kv_heads();
        if heads == 0 || kv == 0 || !heads.is_multiple_of(kv) {
            return Err(format!("num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}"));
        }
        if self.head_dim.is_none() && !self.hidden_size.is_multiple_of(heads) {
            return Err(format!("hidden_size {} is not a multiple of num_attention_heads {heads}", self.hidden_size));
        }
        let hd = self.head_dim();
        if hd == 0 || !hd.is_multiple_of(2) {
            return Err(format!("head_dim {hd} must be even for rotary embeddings"));
        }
        self.rope()?;
        Ok(())
    }

    /// Llama (and SmolLM2, which is Llama) or Qwen2; anything else is refused.
    pub fn family(&self) -> std::result::Result<Family, String> {
        let archs = self.architectures.as_deref().unwrap_or(&[]);
        match self.model_type.as_deref() {
            Some("llama") => Ok(Family::Llama),
            Some("qwen2") => Ok(Family::Qwen2),
            Some("qwen3") => Err("model_type \"qwen3\" (q/k RMS norms) is not supported yet".into()),
            Some(t) => Err(format!("model_type {t:?} is not a Llama or Qwen2 decoder")),
            None if archs.iter().any(|a| a == "LlamaForCausalLM") => Ok(Family::Llama),
            None if archs.iter().any(|a| a == "Qwen2ForCausalLM") => Ok(Family::Qwen2),
            None => Err(format!("neither model_type nor architectures ({archs:?}) names a Llama or Qwen2 decoder")),
        }
    }

    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim.unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    fn rope(&self) -> std::result::Result<Rope, String> {
        let params = self.rope_parameters.as_ref();
        let theta = params.and_then(|p| p.rope_theta).or(self.rope_theta).unwrap_or(10_000.0);
        let Some(s) = self.rope_scaling.as_ref().or(params) else {
            return Ok(Rope::Default { theta });
        };
        match s.rope_type.as_deref().or(s.legacy_type.as_deref()) {
            None | Some("default") => Ok(Rope::Default { theta }),
            Some("llama3") => {
                let need = |v: Option<f64>, name: &str| v.ok_or_else(|| format!("llama3 rope scaling without {name}"));
                let rope = Rope::Llama3 {
                    theta,
                    factor: need(s.factor, "factor")?,
                    low_freq_factor: need(s.low_freq_factor, "low_freq_factor")?,
                    high_freq_factor: need(s.high_freq_factor, "high_freq_factor")?,
                    original_max_positions: s
                        .original_max_position_embeddings
                        .ok_or("llama3 rope scaling without original_max_position_embeddings")?,
                };
                match rope {
                    Rope::Llama3 { factor, low_freq_factor: lo, high_freq_factor: hi, .. } if factor <= 0.0 || lo <= 0.0 || hi <= lo => {
                        Err(format!(
                            "llama3 rope scaling needs factor > 0 and 0 < low_freq_factor < high_freq_factor (got {factor}, {lo}, {hi})"
                        ))
                    }
                    rope => Ok(rope),
                }
            }
            Some(t) => Err(format!("rope scaling {t:?} is not supported (only default and \"llama3\")")),
        }
    }

    /// The rotary inverse frequencies, `head_dim / 2` of them, as Hugging Face computes them.
    fn inv_freq(&self) -> std::result::Result<Vec<f32>, String> {
        let hd = self.head_dim();
        let base = |theta: f64| (0..hd / 2).map(move |i| 1.0 / theta.powf((2 * i) as f64 / hd as f64));
        Ok(match self.rope()? {
            Rope::Default { theta } => base(theta).map(|f| f as f32).collect(),
            Rope::Llama3 { theta, factor, low_freq_factor: lo, high_freq_factor: hi, original_max_positions } => {
                // Llama 3.1's scaling: long wavelengths slowed by `factor`, short ones kept, the band
                // in between interpolated.
                let old = original_max_positions as f64;
                let (low_wavelen, high_wavelen) = (old / lo, old / hi);
                base(theta)
                    .map(|f| {
                        let wavelen = 2.0 * std::f64::consts::PI / f;
                        let f = if wavelen < high_wavelen {
                            f
                        } else if wavelen > low_wavelen {
                            f / factor
                        } else {
                            let smooth = (old / wavelen - lo) / (hi - lo);
                            (1.0 - smooth) * f / factor + smooth * f
                        };
                        f as f32
                    })
                    .collect()
            }
        })
    }
}

/// What scoring returns for one sequence of a bin.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceScore {
    /// Mean over t = 1..len-1 of log p(token_t | tokens_<t). A 1-token sequence has nothing to
    /// predict: 0, with `scored_tokens` 0.
    pub mean_log_likelihood: f32,
    /// Tokens the mean is over: `len - 1`.
    pub scored_tokens: usize,
    /// The final normed hidden state at the sequence's last real token, in f32.
    pub last_hidden: Vec<f32>,
}

/// A bin's scores on their way back from the device (see [`LlamaModel::score_start`]).
pub struct PendingScores {
    fetch: crate::staging::Fetch,
    seq_lens: Vec<u32>,
    hidden_size: usize,
}

/// Rows up to which a dense projection multiplies weights-first (see [`Proj`]'s forward).
const SMALL_BATCH_ROWS: usize = 64;

/// A linear layer whose weight is either a dense tensor (safetensors) or a quantized GGUF tensor
/// (candle's `QMatMul`, which multiplies by the blocks as stored, without dequantizing them).
#[derive(Debug, Clone)]
pub(crate) enum Proj {
    Dense(Linear),
    Quant {
        weight: QMatMul,
        bias: Option<Tensor>,
    },
    /// Projections that could not be fused into one matrix (quantized with different block
    /// types): run one after the other, outputs concatenated on the last dimension.
    Cat(Vec<Proj>),
}

impl Proj {
    /// The product without its bias, and the bias still to add: on CUDA a dense or quantized
    /// projection leaves its bias to the kernel that reads the product next ([`crate::fused::split_qkv`]),
    /// where candle would spend a broadcast pass of its own on it (a third of the q/k/v stage's time
    /// on the 7B). Elsewhere the bias is added here and `None` comes back.
    fn forward_unbiased(&self, x: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
        match self {
            Proj::Dense(l) if x.device().is_cuda() && x.rank() == 2 => Ok((x.matmul(&l.weight().t()?)?, l.bias().cloned())),
            Proj::Quant { weight, bias } if x.device().is_cuda() => Ok((weight.forward(x)?, bias.clone())),
            p => Ok((p.forward(x)?, None)),
        }
    }
}

impl Module for Proj {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            // A few rows (a decode step): W·xᵀ instead of x·Wᵀ. The GEMM packs its right-hand
            // matrix; packing the weights (every byte of the model, every step) cost more than the
            // product itself: 114 ms against 47 ms for a 2-row step of SmolLM2-135M on 2 cores.
            Proj::Dense(l) if x.rank() == 2 && x.dim(0)? <= SMALL_BATCH_ROWS && x.device().is_cpu() => {
                let y = l.weight().matmul(&x.t()?)?.t()?;
                match l.bias() {
                    Some(b) => y.broadcast_add(b),
                    None => Ok(y),
                }
            }
            Proj::Dense(l) => l.forward(x),
            Proj::Quant { weight, bias } => {
                let one_row = match weight {
                    QMatMul::QTensor(q) if x.device().is_cpu() => crate::quant_rows::matmul_one_row(q, x)?,
                    _ => None,
                };
                let y = match one_row {
                    Some(y) => y,
                    None => weight.forward(x)?,
                };
                match bias {
                    Some(b) => y.broadcast_add(b),
                    None => Ok(y),
                }
            }
            Proj::Cat(parts) => {
                let outs = parts.iter().map(|p| p.forward(x)).collect::<Result<Vec<_>>>()?;
                Tensor::cat(&outs, D::Minus1)
            }
        }
    }
}

/// How a checkpoint lays out the two halves that each rotary frequency turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeLayout {
    /// Hugging Face: dimension `i` pairs with `i + hd/2`.
    Half,
    /// llama.cpp's Llama GGUFs: the converter permutes the q and k rows so that dimension `2i`
    /// pairs with `2i + 1`; the dot products q·k are the same once both are rotated this way.
    Interleaved,
}

/// Rotates `x` (T, heads, hd) by the angles of each token's position (`cos`, `sin`: (T, hd/2)).
pub(crate) fn apply_rope(x: &Tensor, cos: &Tensor, sin: &Tensor, layout: RopeLayout) -> Result<Tensor> {
    match layout {
        RopeLayout::Half => candle_nn::rotary_emb::rope_thd(&x.unsqueeze(0)?.contiguous()?, cos, sin)?.squeeze(0),
        RopeLayout::Interleaved => {
            // rope_i wants (B, heads, T, hd): (T, heads, hd) -> (1, heads, T, hd) -> back.
            let x = x.transpose(0, 1)?.unsqueeze(0)?.contiguous()?;
            candle_nn::rotary_emb::rope_i(&x, cos, sin)?.squeeze(0)?.transpose(0, 1)
        }
    }
}

pub(crate) struct DecoderLayer {
    /// q, k and v projections as one (heads + 2·kv_heads)·hd × hidden matmul.
    pub(crate) qkv: Proj,
    pub(crate) o_proj: Proj,
    /// gate and up projections as one 2·intermediate × hidden matmul.
    pub(crate) gate_up: Proj,
    pub(crate) down_proj: Proj,
    pub(crate) input_norm: RmsNorm,
    pub(crate) post_attention_norm: RmsNorm,
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) intermediate: usize,
    pub(crate) rope: RopeLayout,
}

/// Stacks the `names` projections of `vb` into one linear layer (out dims summed).
fn fused_linear(vb: &VarBuilder, names: &[(&str, usize)], in_dim: usize, bias: bool) -> Result<Linear> {
    let mut ws = Vec::with_capacity(names.len());
    let mut bs = Vec::with_capacity(names.len());
    for &(name, out) in names {
        ws.push(vb.pp(name).get((out, in_dim), "weight")?);
        if bias {
            bs.push(vb.pp(name).get(out, "bias")?);
        }
    }
    let bias = if bias { Some(Tensor::cat(&bs, 0)?) } else { None };
    Ok(Linear::new(Tensor::cat(&ws, 0)?, bias))
}

fn linear(in_dim: usize, out_dim: usize, bias: bool, vb: VarBuilder) -> Result<Linear> {
    candle_nn::linear_b(in_dim, out_dim, bias, vb)
}

impl DecoderLayer {
    fn new(cfg: &Config, family: Family, vb: VarBuilder) -> Result<Self> {
        let h = cfg.hidden_size;
        let (heads, kv_heads, hd) = (cfg.num_attention_heads, cfg.kv_heads(), cfg.head_dim());
        let (qkv_bias, o_bias) = match family {
            Family::Qwen2 => (true, false),
            Family::Llama => (cfg.attention_bias, cfg.attention_bias),
        };
        let attn = vb.pp("self_attn");
        let mlp = vb.pp("mlp");
        let i = cfg.intermediate_size;
        Ok(Self {
            qkv: Proj::Dense(fused_linear(
                &attn,
                &[("q_proj", heads * hd), ("k_proj", kv_heads * hd), ("v_proj", kv_heads * hd)],
                h,
                qkv_bias,
            )?),
            o_proj: Proj::Dense(linear(heads * hd, h, o_bias, attn.pp("o_proj"))?),
            gate_up: Proj::Dense(fused_linear(&mlp, &[("gate_proj", i), ("up_proj", i)], h, cfg.mlp_bias)?),
            down_proj: Proj::Dense(linear(i, h, cfg.mlp_bias, mlp.pp("down_proj"))?),
            input_norm: rms_norm(h, cfg.rms_norm_eps, vb.pp("input_layernorm"))?,
            post_attention_norm: rms_norm(h, cfg.rms_norm_eps, vb.pp("post_attention_layernorm"))?,
            heads,
            kv_heads,
            head_dim: hd,
            intermediate: i,
            rope: RopeLayout::Half,
        })
    }

    /// Pre-norm, q, k, v for every token in one matmul, rotary embedding by each token's own
    /// position: (T, H) -> q (T, heads, hd), k and v (T, kv_heads, hd).
    pub(crate) fn qkv(&self, x: &mut Residual, cos: &Tensor, sin: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let normed = x.add_and_norm(&self.input_norm)?;
        let (qkv, bias) = stage("matmul qkv", || self.qkv.forward_unbiased(&normed))?;
        let rotary = crate::fused::Rotary { cos, sin, layout: self.rope };
        stage("bias, rope and q/k/v split", || {
            crate::fused::split_qkv(&qkv, bias.as_ref(), Some(rotary), [self.heads, self.kv_heads, self.head_dim])
        })
    }

    /// Output projection of the attention context (T, heads, hd) into the stream, SwiGLU
    /// feed-forward on the post-attention norm, its output into the stream.
    pub(crate) fn finish(&self, ctx: &Tensor, x: &mut Residual) -> Result<()> {
        let t = ctx.dim(0)?;
        let attn = stage("matmul o_proj", || self.o_proj.forward(&ctx.reshape((t, self.heads * self.head_dim))?))?;
        x.add_later(attn);
        let normed = x.add_and_norm(&self.post_attention_norm)?;
        let gu = stage("matmul gate_up", || self.gate_up.forward(&normed))?;
        let i = self.intermediate;
        let y = stage("silu * up", || crate::fused::silu_mul(&gu, i))?;
        let down = stage("matmul down", || self.down_proj.forward(&y))?;
        x.add_later(down);
        Ok(())
    }

    /// One block over the stream `x` (T, H). `cos`, `sin`: (T, hd/2), the rotary angles of each
    /// token's position. With `kv_out`, the layer's rotated keys and values of the whole tape are pushed there (a
    /// prefill that generation continues from).
    fn forward(
        &self,
        x: &mut Residual,
        cos: &Tensor,
        sin: &Tensor,
        slots: &VarlenSlots,
        kv_out: Option<&mut Vec<(Tensor, Tensor)>>,
    ) -> Result<()> {
        // 1. q, k, v, rotated.
        let (q, k, v) = self.qkv(x, cos, sin)?;
        // 2. Causal attention inside each slot, then the rest of the block.
        let ctx = stage("attention", || varlen_causal_attention(&q, &k, &v, slots, 1.0 / (self.head_dim as f32).sqrt()))?;
        if let Some(out) = kv_out {
            out.push((k, v));
        }
        self.finish(&ctx, x)
    }
}

/// The residual stream between blocks: the sum so far and a block's output not yet added to it.
/// The add waits for the norm that reads the sum next, so that the two are one pass
/// ([`crate::fused::residual_rms_norm`]) instead of an add and a norm.
pub(crate) struct Residual {
    sum: Tensor,
    pending: Option<Tensor>,
}

impl Residual {
    pub(crate) fn new(x: Tensor) -> Self {
        Self { sum: x, pending: None }
    }

    /// `y` joins the stream; added by the next [`Residual::add_and_norm`].
    fn add_later(&mut self, y: Tensor) {
        debug_assert!(self.pending.is_none(), "two block outputs waiting to be added");
        self.pending = Some(y);
    }

    /// Adds what waits and returns the stream's sum normalized by `norm`.
    pub(crate) fn add_and_norm(&mut self, norm: &RmsNorm) -> Result<Tensor> {
        match self.pending.take() {
            Some(y) => {
                let (sum, normed) = stage("residual add + rms_norm", || crate::fused::residual_rms_norm(&self.sum, &y, norm))?;
                self.sum = sum;
                Ok(normed)
            }
            None => stage("rms_norm", || norm.forward(&self.sum)),
        }
    }
}

pub struct LlamaModel {
    pub(crate) embed_tokens: Embedding,
    pub(crate) layers: Vec<DecoderLayer>,
    pub(crate) norm: RmsNorm,
    /// (vocab, hidden); the embedding matrix itself when the checkpoint ties them.
    pub(crate) lm_head: Proj,
    /// (1, hd/2) f32.
    pub(crate) inv_freq: Tensor,
    pub(crate) device: Device,
    pub config: Config,
    /// Pinned double-buffered inputs and results on CUDA (see [`crate::staging`]).
    pub(crate) staging: Staging,
}

impl LlamaModel {
    /// Builds the model from Hugging Face weight names (`model.layers.N.self_attn.q_proj.weight`, …;
    /// a bare `LlamaModel` without the `model.` prefix is accepted too).
    pub fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        cfg.check().map_err(candle_core::Error::Msg)?;
        let family = cfg.family().map_err(candle_core::Error::Msg)?;
        let body = if vb.contains_tensor("model.embed_tokens.weight") { vb.pp("model") } else { vb.clone() };
        let embed_tokens = embedding(cfg.vocab_size, cfg.hidden_size, body.pp("embed_tokens"))?;
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| DecoderLayer::new(cfg, family, body.pp(format!("layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let norm = rms_norm(cfg.hidden_size, cfg.rms_norm_eps, body.pp("norm"))?;
        let lm_head = Proj::Dense(if cfg.tie_word_embeddings {
            Linear::new(embed_tokens.embeddings().clone(), None)
        } else {
            candle_nn::linear_no_bias(cfg.hidden_size, cfg.vocab_size, vb.pp("lm_head"))?
        });
        let inv_freq = inv_freq_tensor(cfg, vb.device())?;
        Ok(Self {
            embed_tokens,
            layers,
            norm,
            lm_head,
            inv_freq,
            device: vb.device().clone(),
            config: cfg.clone(),
            staging: Staging::default(),
        })
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The final normed hidden state of every tape token: (T, hidden), in the model's dtype. Rows of
    /// pad tokens are unspecified.
    pub fn forward_hidden(&self, bin: &Bin) -> Result<Tensor> {
        self.forward_hidden_kv(bin, None)
    }

    /// The activations' dtype (f32 on the CPU, bf16 for flash-attn).
    pub fn dtype(&self) -> DType {
        self.embed_tokens.embeddings().dtype()
    }

    /// Rotary angles of the given positions: (n, 1) x (1, hd/2) -> cos and sin (n, hd/2), computed
    /// in f32 and cast to the model's dtype.
    pub(crate) fn rope_angles(&self, positions: &[u32]) -> Result<(Tensor, Tensor)> {
        self.rope_angles_of(&Tensor::from_slice(positions, positions.len(), &self.device)?)
    }

    /// [`Self::rope_angles`] of positions already on the device (u32, (n,)).
    fn rope_angles_of(&self, positions: &Tensor) -> Result<(Tensor, Tensor)> {
        let dtype = self.dtype();
        let n = positions.dim(0)?;
        let angles = positions.to_dtype(DType::F32)?.reshape((n, 1))?.broadcast_mul(&self.inv_freq)?;
        Ok((angles.cos()?.to_dtype(dtype)?, angles.sin()?.to_dtype(dtype)?))
    }

    /// The device's busy and idle time between bins (CUDA events; zero on the CPU).
    pub fn timeline(&self) -> std::sync::Arc<warpfold_backend::DeviceTimeline> {
        self.staging.timeline()
    }

    /// [`Self::forward_hidden`], optionally keeping every layer's rotated keys and values of the
    /// whole tape (T, kv_heads, hd) in `kv_out`, layer by layer.
    pub(crate) fn forward_hidden_kv(&self, bin: &Bin, kv_out: Option<&mut Vec<(Tensor, Tensor)>>) -> Result<Tensor> {
        self.check_bin(bin)?;
        let staged = self.staging.upload(&self.device, &[&bin.input_ids, &bin.position_ids, &bin.cu_seqlens])?;
        self.forward_staged(bin, &staged[0], &staged[1], &staged[2], kv_out)
    }

    fn check_bin(&self, bin: &Bin) -> Result<()> {
        validate_bin(bin).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        check_tables(bin, self.config.max_position_embeddings, self.config.vocab_size).map_err(candle_core::Error::Msg)
    }

    /// The forward over a bin whose ids, positions and slot boundaries are already on the device.
    fn forward_staged(
        &self,
        bin: &Bin,
        ids: &Tensor,
        positions: &Tensor,
        cu_seqlens: &Tensor,
        mut kv_out: Option<&mut Vec<(Tensor, Tensor)>>,
    ) -> Result<Tensor> {
        // 1. Rotary angles of every token's own position: (T, hd/2).
        let (cos, sin) = self.rope_angles_of(positions)?;
        // 2. Embeddings, the decoder layers over the whole tape, the final norm.
        let slots = VarlenSlots::with_query_rows(bin, cu_seqlens.clone(), &self.device, ATTN_QUERY_ROWS)?;
        stage_profile::begin(&self.device);
        let mut x = Residual::new(stage("embedding", || self.embed_tokens.forward(ids))?);
        for layer in &self.layers {
            layer.forward(&mut x, &cos, &sin, &slots, kv_out.as_deref_mut())?;
        }
        x.add_and_norm(&self.norm)
    }

    /// Mean next-token log-likelihood and last hidden state of every sequence of the bin, in slot order.
    pub fn score(&self, bin: &Bin) -> Result<Vec<SequenceScore>> {
        self.score_in_blocks(bin, self.logit_rows())
    }

    /// Rows of logits per block. On a GPU, larger blocks keep the lm_head matmul efficient and
    /// launch fewer kernels: as many rows as keep one block of logits near 2^28 values (1,765 rows
    /// of a 152k vocabulary).
    fn logit_rows(&self) -> usize {
        if self.device.is_cuda() {
            ((1usize << 28) / self.config.vocab_size.max(1)).clamp(LOGIT_ROWS, 8192)
        } else {
            LOGIT_ROWS
        }
    }

    fn score_in_blocks(&self, bin: &Bin, logit_rows: usize) -> Result<Vec<SequenceScore>> {
        let pending = self.score_start_in_blocks(bin, logit_rows)?;
        self.score_finish(pending)
    }

    /// Queues a bin's scoring on the device and returns without waiting for it (on CUDA; on the
    /// CPU the work is done here): the next bin can be queued behind it.
    pub fn score_start(&self, bin: &Bin) -> Result<PendingScores> {
        self.score_start_in_blocks(bin, self.logit_rows())
    }

    fn score_start_in_blocks(&self, bin: &Bin, logit_rows: usize) -> Result<PendingScores> {
        self.check_bin(bin)?;
        let n = bin.num_sequences();
        // 1. The rows that predict a real token (t-1 predicts t), the tokens they predict, each
        //    row's sequence, each sequence's last row: with the bin itself, one upload.
        let mut rows = Vec::with_capacity(bin.real_tokens());
        let mut targets = Vec::with_capacity(bin.real_tokens());
        let mut segment = Vec::with_capacity(bin.real_tokens());
        let mut last = Vec::with_capacity(n);
        for i in 0..n {
            let (start, _, real) = bin.slot(i);
            rows.extend((start..start + real - 1).map(|r| r as u32));
            targets.extend_from_slice(&bin.input_ids[start + 1..start + real]);
            segment.extend(std::iter::repeat_n(i as u32, real - 1));
            last.push((start + real - 1) as u32);
        }
        let staged = self
            .staging
            .upload(&self.device, &[&bin.input_ids, &bin.position_ids, &bin.cu_seqlens, &rows, &targets, &segment, &last, &bin.seq_lens])?;
        let [ids, positions, cu, rows_t, targets_t, segment_t, last_t, lens_t] = staged.as_slice() else {
            unreachable!("eight parts were uploaded")
        };
        let hidden = self.forward_staged(bin, ids, positions, cu, None)?;
        let hidden_size = hidden.dim(1)?;
        let last_hidden = hidden.index_select(last_t, 0)?.to_dtype(DType::F32)?;
        // 2. log p(target | prefix) per row, logits a block of rows at a time: (b, H) -> (b, V) -> (b,)
        let block = logit_rows.max(1);
        let mut log_probs = Vec::with_capacity(rows.len().div_ceil(block));
        let mut at = 0;
        while at < rows.len() {
            let b = block.min(rows.len() - at);
            let h = hidden.index_select(&rows_t.narrow(0, at, b)?, 0)?;
            let logits = stage("matmul lm_head", || self.lm_head.forward(&h))?;
            let tg = targets_t.narrow(0, at, b)?;
            log_probs.push(stage("log-softmax and gather", || crate::fused::target_log_probs(&logits, &tg))?);
            at += b;
        }
        // 3. Per-sequence means on the device: a scatter-add of each row's log-probability into
        //    its sequence's slot, divided by the counts (O(rows), whatever the number of sequences).
        let counts = (lens_t.to_dtype(DType::F32)? - 1.0)?.clamp(1.0, f64::MAX)?;
        let means = if rows.is_empty() {
            Tensor::zeros(n, DType::F32, &self.device)?
        } else {
            let log_probs = Tensor::cat(&log_probs, 0)?;
            let sums = Tensor::zeros(n, DType::F32, &self.device)?.index_add(segment_t, &log_probs, 0)?;
            (sums / counts)?
        };
        // 4. One copy back, queued: the means, then the last hidden states.
        let fetch = self.staging.fetch_start(&Tensor::cat(&[means.reshape((n, 1))?, last_hidden], 1)?)?;
        // Profiling synchronizes every stage, so the bin's work is all done here: report it now,
        // before a pipelined caller starts the next bin.
        stage_profile::report(bin, &self.device);
        Ok(PendingScores { fetch, seq_lens: bin.seq_lens.clone(), hidden_size })
    }

    /// The scores of a bin [`Self::score_start`] queued, waiting for the device if it is not done.
    pub fn score_finish(&self, pending: PendingScores) -> Result<Vec<SequenceScore>> {
        let out = self.staging.fetch_wait(pending.fetch)?;
        let width = pending.hidden_size + 1;
        if out.len() != pending.seq_lens.len() * width {
            candle_core::bail!("score: {} values back for {} sequences", out.len(), pending.seq_lens.len());
        }
        Ok(pending
            .seq_lens
            .iter()
            .zip(out.chunks(width))
            .map(|(&len, row)| SequenceScore {
                mean_log_likelihood: row[0],
                scored_tokens: len as usize - 1,
                last_hidden: row[1..].to_vec(),
            })
            .collect())
    }
}

use crate::stage_profile::{self, time as stage};

/// The rotary inverse frequencies as a (1, hd/2) f32 tensor.
pub(crate) fn inv_freq_tensor(cfg: &Config, device: &Device) -> Result<Tensor> {
    let inv_freq = cfg.inv_freq().map_err(candle_core::Error::Msg)?;
    Tensor::from_vec(inv_freq, (1, cfg.head_dim() / 2), device)
}

/// Loads the model from safetensors files in `dtype` (f32 on the CPU; bf16 for flash-attn on CUDA).
pub fn load(cfg: &Config, weights: &[std::path::PathBuf], device: &Device, dtype: DType) -> Result<LlamaModel> {
    cfg.check().map_err(candle_core::Error::Msg)?;
    // SAFETY: the files are memory-mapped read-only; warpfold does not modify model files while running.
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(weights, dtype, device)? };
    LlamaModel::new(cfg, vb)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    pub(crate) use crate::test_support::{bin_of, max_abs_diff, random_model, random_weights, tiny_config, variants, Rng};

    /// On the GPU machine (flash-attn builds only; `--ignored`): FlashAttention-2's causal varlen
    /// kernel in bf16 scores each sequence of a packed bin as it scores it alone, and as the f32
    /// CPU path does, within bf16 tolerance.
    #[cfg(feature = "flash-attn")]
    #[test]
    #[ignore = "needs a CUDA GPU: run this test binary on the GPU machine with --ignored"]
    fn gpu_flash_packed_bin_scores_as_alone_and_as_the_cpu() {
        let cuda = Device::new_cuda(0).expect("a CUDA device");
        for (name, cfg) in variants().into_iter().filter(|(_, c)| c.head_dim() % 8 == 0) {
            let weights = random_weights(&cfg, 7);
            let cpu = LlamaModel::new(&cfg, VarBuilder::from_tensors(weights.clone(), DType::F32, &Device::Cpu)).unwrap();
            let gpu = LlamaModel::new(&cfg, VarBuilder::from_tensors(weights, DType::BF16, &cuda)).unwrap();
            let mut rng = Rng(11);
            let seqs: Vec<Vec<u32>> = [1, 7, 33, 50, 129].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
            let packed = bin_of(&seqs, 16);
            let on_gpu = gpu.score(&packed).unwrap();
            let on_cpu = cpu.score(&packed).unwrap();
            for (i, seq) in seqs.iter().enumerate() {
                let alone = gpu.score(&bin_of(std::slice::from_ref(seq), 1)).unwrap().remove(0);
                let (p, a, c) = (on_gpu[i].mean_log_likelihood, alone.mean_log_likelihood, on_cpu[i].mean_log_likelihood);
                assert!((p - a).abs() <= 0.02, "{name}: sequence {i}: packed {p} vs alone {a}");
                assert!((p - c).abs() <= 0.05, "{name}: sequence {i}: gpu bf16 {p} vs cpu f32 {c}");
            }
        }
    }

    #[test]
    fn a_packed_bin_scores_each_sequence_as_if_alone() {
        for (name, cfg) in variants() {
            let model = random_model(&cfg, 7);
            let mut rng = Rng(11);
            let seqs: Vec<Vec<u32>> = [1, 7, 33, 50].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
            let packed = bin_of(&seqs, 16);
            assert!(packed.pad_tokens() > 0);
            let hidden = model.forward_hidden(&packed).unwrap().to_vec2::<f32>().unwrap();
            let scores = model.score(&packed).unwrap();
            for (i, seq) in seqs.iter().enumerate() {
                let alone = bin_of(std::slice::from_ref(seq), 1);
                let alone_hidden = model.forward_hidden(&alone).unwrap().to_vec2::<f32>().unwrap();
                let start = packed.cu_seqlens[i] as usize;
                for t in 0..seq.len() {
                    let d = max_abs_diff(&hidden[start + t], &alone_hidden[t]);
                    assert!(d <= 1e-4, "{name}: sequence {i} token {t}: hidden differs by {d}");
                }
                let alone_score = model.score(&alone).unwrap().remove(0);
                let s = &scores[i];
                assert_eq!(s.scored_tokens, seq.len() - 1, "{name}");
                assert!((s.mean_log_likelihood - alone_score.mean_log_likelihood).abs() <= 1e-4, "{name}: {s:?} vs {alone_score:?}");
                assert!(max_abs_diff(&s.last_hidden, &alone_score.last_hidden) <= 1e-4, "{name}: last hidden");
                assert!(max_abs_diff(&s.last_hidden, &alone_hidden[seq.len() - 1]) <= 1e-4, "{name}: last hidden row");
                if seq.len() == 1 {
                    assert_eq!(s.mean_log_likelihood, 0.0, "{name}: nothing to predict in a 1-token sequence");
                } else {
                    // Random weights are far from uniform: a real, finite, non-trivial likelihood.
                    assert!(s.mean_log_likelihood.is_finite() && s.mean_log_likelihood < 0.0, "{name}: {s:?}");
                    assert!((s.mean_log_likelihood + (cfg.vocab_size as f32).ln()).abs() > 0.05, "{name}: uniform? {s:?}");
                }
            }
        }
    }

    #[test]
    fn pad_token_ids_do_not_change_the_scores() {
        let (_, cfg) = variants().remove(1);
        let model = random_model(&cfg, 3);
        let mut rng = Rng(5);
        let seqs: Vec<Vec<u32>> = [9, 20].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
        let a = bin_of(&seqs, 16);
        let mut b = a.clone();
        for i in 0..b.num_sequences() {
            let (start, slot, real) = b.slot(i);
            for t in start + real..start + slot {
                b.input_ids[t] = 42;
                b.position_ids[t] = 7;
            }
        }
        assert_ne!(a.input_ids, b.input_ids);
        assert_eq!(model.score(&a).unwrap(), model.score(&b).unwrap());
    }

    #[test]
    fn blocked_scoring_matches_a_full_log_softmax() {
        let (_, cfg) = variants().remove(0);
        let model = random_model(&cfg, 21);
        let mut rng = Rng(8);
        let seqs: Vec<Vec<u32>> = [12, 1, 30, 2].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
        let bin = bin_of(&seqs, 16);
        // Blocks of 5 rows cut across sequence boundaries.
        let scores = model.score_in_blocks(&bin, 5).unwrap();
        let hidden = model.forward_hidden(&bin).unwrap();
        let logits = model.lm_head.forward(&hidden).unwrap().to_vec2::<f32>().unwrap();
        for (i, seq) in seqs.iter().enumerate() {
            let start = bin.cu_seqlens[i] as usize;
            let mut sum = 0f64;
            for t in 1..seq.len() {
                let row = &logits[start + t - 1];
                let max = row.iter().copied().fold(f32::MIN, f32::max) as f64;
                let lse = max + row.iter().map(|&x| (x as f64 - max).exp()).sum::<f64>().ln();
                sum += row[seq[t] as usize] as f64 - lse;
            }
            let expected = if seq.len() > 1 { sum / (seq.len() - 1) as f64 } else { 0.0 };
            assert!(
                (scores[i].mean_log_likelihood as f64 - expected).abs() <= 1e-5,
                "{i}: {} vs {expected}",
                scores[i].mean_log_likelihood
            );
        }
    }

    /// Plain per-token reference: softmax(q·k / √d) over keys 0..=t of the same slot, kv head h / rep.
    fn reference_attention(q: &Tensor, k: &Tensor, v: &Tensor, bin: &Bin, scale: f32) -> Vec<Vec<Vec<f32>>> {
        let (q, k, v) = (q.to_vec3::<f32>().unwrap(), k.to_vec3::<f32>().unwrap(), v.to_vec3::<f32>().unwrap());
        let (heads, kv, hd) = (q[0].len(), k[0].len(), q[0][0].len());
        let mut out = vec![vec![vec![0f32; hd]; heads]; q.len()];
        for i in 0..bin.num_sequences() {
            let (start, _, real) = bin.slot(i);
            for t in start..start + real {
                for h in 0..heads {
                    let g = h / (heads / kv);
                    let s: Vec<f32> = (start..=t).map(|j| q[t][h].iter().zip(&k[j][g]).map(|(a, b)| a * b).sum::<f32>() * scale).collect();
                    let m = s.iter().copied().fold(f32::MIN, f32::max);
                    let e: Vec<f32> = s.iter().map(|x| (x - m).exp()).collect();
                    let z: f32 = e.iter().sum();
                    for (j, w) in (start..=t).zip(&e) {
                        for d in 0..hd {
                            out[t][h][d] += w / z * v[j][g][d];
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn blocked_varlen_attention_matches_a_plain_reference() {
        let mut rng = Rng(99);
        let seqs: Vec<Vec<u32>> = [1, 7, 33, 50].iter().map(|&l| vec![0; l]).collect();
        let bin = bin_of(&seqs, 16);
        let t = bin.computed_tokens();
        let (q, k, v) = (rng.tensor(&[t, 6, 8], 2.0, 0.0), rng.tensor(&[t, 2, 8], 2.0, 0.0), rng.tensor(&[t, 2, 8], 1.0, 0.0));
        let expected = reference_attention(&q, &k, &v, &bin, 0.35);
        // Query blocks of 7 rows: several blocks per slot, the last one short.
        for rows in [7, ATTN_QUERY_ROWS] {
            let cu = Tensor::new(bin.cu_seqlens.as_slice(), &Device::Cpu).unwrap();
            let slots = VarlenSlots::with_query_rows(&bin, cu, &Device::Cpu, rows).unwrap();
            let got = varlen_causal_attention(&q, &k, &v, &slots, 0.35).unwrap().to_vec3::<f32>().unwrap();
            for i in 0..bin.num_sequences() {
                let (start, slot, real) = bin.slot(i);
                for tok in start..start + slot {
                    for h in 0..6 {
                        let d = max_abs_diff(&got[tok][h], &expected[tok][h]);
                        assert!(d <= 1e-5, "rows {rows}, token {tok} (real {}), head {h}: {d}", tok < start + real);
                    }
                }
            }
        }
    }

    #[test]
    fn llama3_rope_scaling_keeps_short_waves_and_slows_long_ones() {
        let cfg = variants().remove(2).1;
        let plain = tiny_config(r#""model_type":"llama","head_dim":32"#).inv_freq().unwrap();
        let scaled = cfg.inv_freq().unwrap();
        assert_eq!(plain.len(), 16);
        let wavelen = |f: f32| 2.0 * std::f32::consts::PI / f;
        let (mut kept, mut slowed, mut blended) = (0, 0, 0);
        for (p, s) in plain.iter().zip(&scaled) {
            if wavelen(*p) < 16.0 {
                assert_eq!(p, s);
                kept += 1;
            } else if wavelen(*p) > 64.0 {
                assert!((p / 8.0 - s).abs() <= 1e-7 * p);
                slowed += 1;
            } else {
                assert!(s < p && *s > p / 8.0);
                blended += 1;
            }
        }
        assert!(kept > 0 && slowed > 0 && blended > 0, "{kept} {slowed} {blended}");
    }

    #[test]
    fn unsupported_configs_fail_early_with_the_reason() {
        let ok = tiny_config(r#""model_type":"llama""#);
        ok.check().unwrap();
        let refuse = |extra: &str, why: &str| {
            let err = tiny_config(extra).check().unwrap_err();
            assert!(err.contains(why), "{extra}: {err}");
        };
        refuse(r#""model_type":"llama","hidden_act":"gelu""#, "gelu");
        refuse(r#""model_type":"mistral""#, "mistral");
        refuse(r#""model_type":"qwen3""#, "qwen3");
        refuse(r#""architectures":["GPT2LMHeadModel"]"#, "GPT2LMHeadModel");
        refuse(r#""model_type":"qwen2","use_sliding_window":true"#, "sliding");
        let mut odd_groups = ok.clone();
        odd_groups.num_key_value_heads = Some(3);
        assert!(odd_groups.check().unwrap_err().contains("multiple"));
        refuse(r#""model_type":"llama","rope_scaling":{"type":"yarn","factor":4.0}"#, "yarn");
        refuse(r#""model_type":"llama","rope_scaling":{"rope_type":"dynamic","factor":2.0}"#, "dynamic");
        refuse(r#""model_type":"llama","rope_scaling":{"rope_type":"llama3","factor":8.0}"#, "low_freq_factor");
        let by_arch = tiny_config(r#""architectures":["Qwen2ForCausalLM"]"#);
        assert_eq!(by_arch.family(), Ok(Family::Qwen2));
    }

    #[test]
    fn hub_config_files_parse() {
        // Abridged from Qwen/Qwen2.5-0.5B-Instruct, HuggingFaceTB/SmolLM2-135M and meta-llama/Llama-3.2-1B.
        let qwen = r#"{"architectures":["Qwen2ForCausalLM"],"attention_dropout":0.0,"bos_token_id":151643,
            "eos_token_id":151645,"hidden_act":"silu","hidden_size":896,"initializer_range":0.02,
            "intermediate_size":4864,"max_position_embeddings":32768,"max_window_layers":21,"model_type":"qwen2",
            "num_attention_heads":14,"num_hidden_layers":24,"num_key_value_heads":2,"rms_norm_eps":1e-06,
            "rope_theta":1000000.0,"sliding_window":32768,"tie_word_embeddings":true,"torch_dtype":"bfloat16",
            "use_cache":true,"use_sliding_window":false,"vocab_size":151936,"rope_scaling":null}"#;
        let smol = r#"{"architectures":["LlamaForCausalLM"],"attention_bias":false,"hidden_act":"silu",
            "hidden_size":576,"intermediate_size":1536,"max_position_embeddings":8192,"model_type":"llama",
            "num_attention_heads":9,"num_hidden_layers":30,"num_key_value_heads":3,"pretraining_tp":1,
            "rms_norm_eps":1e-05,"rope_scaling":null,"rope_theta":100000,"tie_word_embeddings":true,"vocab_size":49152}"#;
        let llama = r#"{"architectures":["LlamaForCausalLM"],"attention_bias":false,"bos_token_id":128000,
            "eos_token_id":128001,"head_dim":64,"hidden_act":"silu","hidden_size":2048,"intermediate_size":8192,
            "max_position_embeddings":131072,"mlp_bias":false,"model_type":"llama","num_attention_heads":32,
            "num_hidden_layers":16,"num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_scaling":{"factor":32.0,
            "high_freq_factor":4.0,"low_freq_factor":1.0,"original_max_position_embeddings":8192,"rope_type":"llama3"},
            "rope_theta":500000.0,"tie_word_embeddings":true,"vocab_size":128256}"#;
        for (text, family, hd) in [(qwen, Family::Qwen2, 64), (smol, Family::Llama, 64), (llama, Family::Llama, 64)] {
            let cfg: Config = serde_json::from_str(text).unwrap();
            cfg.check().unwrap();
            assert_eq!(cfg.family(), Ok(family));
            assert_eq!(cfg.head_dim(), hd);
        }
        let llama: Config = serde_json::from_str(llama).unwrap();
        assert!(matches!(llama.rope(), Ok(Rope::Llama3 { theta, factor, .. }) if theta == 500000.0 && factor == 32.0));
        // transformers 5.x moves rope_theta into rope_parameters.
        let v5 = tiny_config(r#""model_type":"qwen2","rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"}"#);
        assert_eq!(v5.rope(), Ok(Rope::Default { theta: 1_000_000.0 }));
    }

    /// tests/fixtures/decoder_reference: tiny random checkpoints saved by Hugging Face transformers,
    /// with the scores transformers computed (tests/fixtures/make_decoder_reference.py).
    #[test]
    fn scores_match_hugging_face_transformers() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/decoder_reference");
        let mut checked = 0;
        let (mut worst_ll, mut worst_hidden) = (0f32, 0f32);
        for name in ["qwen2", "llama3"] {
            let dir = root.join(name);
            let cfg: Config = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
            let model = load(&cfg, &[dir.join("model.safetensors")], &Device::Cpu, DType::F32).unwrap();
            let expected: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
            let cases = expected["sequences"].as_array().unwrap();
            let ids: Vec<Vec<u32>> =
                cases.iter().map(|c| c["input_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()).collect();
            let scores = model.score(&bin_of(&ids, 16)).unwrap();
            for (case, got) in cases.iter().zip(&scores) {
                let want_ll = case["mean_log_likelihood"].as_f64().unwrap() as f32;
                let want_hidden: Vec<f32> = case["last_hidden"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
                assert_eq!(got.scored_tokens, case["scored_tokens"].as_u64().unwrap() as usize, "{name}");
                let d_ll = (got.mean_log_likelihood - want_ll).abs();
                let d_h = max_abs_diff(&got.last_hidden, &want_hidden);
                assert!(
                    d_ll <= 1e-4,
                    "{name}, {} tokens: mean log-likelihood {} vs {want_ll}",
                    got.scored_tokens + 1,
                    got.mean_log_likelihood
                );
                assert!(d_h <= 1e-4, "{name}, {} tokens: last hidden differs by {d_h}", got.scored_tokens + 1);
                (worst_ll, worst_hidden) = (worst_ll.max(d_ll), worst_hidden.max(d_h));
                checked += 1;
            }
        }
        eprintln!("{checked} sequences: max |Δ mean log-likelihood| {worst_ll:e}, max |Δ last hidden| {worst_hidden:e}");
        assert!(checked >= 8, "only {checked} reference sequences");
    }
}
