//! Llama-family decoders from GGUF files (llama.cpp's format), with quantized weights.
//!
//! Why GGUF next to safetensors: small instruction-tuned models ship as GGUF with 4-bit weights,
//! a quarter of the bytes a token's forward has to read, which is what bounds decoding speed on a
//! CPU. The linear layers keep their quantized blocks and multiply through candle's `QMatMul`; only
//! the token embedding (a lookup) and the norms are dequantized. On CUDA every weight is
//! dequantized to bf16 so the same FlashAttention-2 path as the safetensors models runs.
//!
//! The configuration comes from the `{arch}.*` metadata keys and the tokenizer's vocabulary,
//! merges and chat template from `tokenizer.*` ([`TokenizerMeta`]); building the tokenizer itself
//! is the caller's business (this crate has no tokenizer dependency).
//!
//! llama.cpp's converter permutes the rows of Llama's q and k projections so that its rotary
//! kernel can rotate adjacent pairs; this file rotates Llama GGUFs the same way
//! ([`RopeLayout::Interleaved`]), which gives the same attention as Hugging Face's half-split
//! rotation on the original rows. Qwen2 GGUFs are not permuted.

use std::borrow::Cow;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{DType, Device, Tensor};
use candle_nn::{Embedding, Linear, RmsNorm};

use crate::llama::{Config, DecoderLayer, Family, LlamaModel, Proj, RopeLayout};

/// Why a GGUF model could not be used; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("{path}: {source}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a readable GGUF file: {message}")]
    Malformed { path: PathBuf, message: String },
    #[error("{path}: GGUF metadata key {key:?} is missing")]
    MissingKey { path: PathBuf, key: String },
    #[error("{path}: GGUF metadata key {key:?}: {message}")]
    BadKey { path: PathBuf, key: String, message: String },
    #[error("{path}: {message}")]
    Unsupported { path: PathBuf, message: String },
    #[error("{path}: tensor {name:?} is missing")]
    MissingTensor { path: PathBuf, name: String },
    #[error("{path}: tensor {name:?}: {message}")]
    Tensor { path: PathBuf, name: String, message: String },
    #[error("{path} has no tokenizer: no tokenizer.ggml.tokens in its metadata and no tokenizer.json beside it")]
    NoTokenizer { path: PathBuf },
}

/// What the GGUF metadata says about the tokenizer (llama.cpp's `tokenizer.ggml.*` keys).
#[derive(Debug, Clone, Default)]
pub struct TokenizerMeta {
    /// `tokenizer.ggml.model`: "gpt2" for byte-level BPE, "llama" for SentencePiece.
    pub model: String,
    /// `tokenizer.ggml.pre`: the pre-tokenizer's name ("smollm", "qwen2", "llama-bpe", ...).
    pub pre: Option<String>,
    pub tokens: Vec<String>,
    /// 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
    pub token_types: Vec<i32>,
    pub merges: Vec<String>,
    pub bos_token_id: Option<u32>,
    pub eos_token_id: Option<u32>,
    pub add_bos_token: bool,
    pub chat_template: Option<String>,
}

/// An opened GGUF file: its header and metadata, tensors read on demand.
pub struct GgufFile {
    pub path: PathBuf,
    pub content: Content,
}

impl GgufFile {
    pub fn open(path: &Path) -> Result<Self, GgufError> {
        let file = File::open(path).map_err(|source| GgufError::Open { path: path.to_path_buf(), source })?;
        let mut reader = BufReader::new(file);
        let content = Content::read(&mut reader).map_err(|e| GgufError::Malformed { path: path.to_path_buf(), message: e.to_string() })?;
        Ok(Self { path: path.to_path_buf(), content })
    }

    fn value(&self, key: &str) -> Result<&Value, GgufError> {
        self.content.metadata.get(key).ok_or_else(|| GgufError::MissingKey { path: self.path.clone(), key: key.into() })
    }

    fn bad(&self, key: &str, e: impl std::fmt::Display) -> GgufError {
        GgufError::BadKey { path: self.path.clone(), key: key.into(), message: e.to_string() }
    }

    fn uint(&self, key: &str) -> Result<usize, GgufError> {
        let v = self.value(key)?;
        as_u64(v).map(|x| x as usize).ok_or_else(|| self.bad(key, format!("expected an integer, found {v:?}")))
    }

    fn opt_uint(&self, key: &str) -> Result<Option<usize>, GgufError> {
        if self.content.metadata.contains_key(key) {
            self.uint(key).map(Some)
        } else {
            Ok(None)
        }
    }

    fn opt_float(&self, key: &str) -> Result<Option<f64>, GgufError> {
        match self.content.metadata.get(key) {
            None => Ok(None),
            Some(Value::F32(x)) => Ok(Some(*x as f64)),
            Some(Value::F64(x)) => Ok(Some(*x)),
            Some(v) => as_u64(v).map(|x| Some(x as f64)).ok_or_else(|| self.bad(key, format!("expected a number, found {v:?}"))),
        }
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, GgufError> {
        match self.content.metadata.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.bad(key, format!("expected a string, found {:?}", v.value_type()))),
        }
    }

    fn opt_strings(&self, key: &str) -> Result<Option<Vec<String>>, GgufError> {
        let Some(v) = self.content.metadata.get(key) else { return Ok(None) };
        let items = v.to_vec().map_err(|e| self.bad(key, e))?;
        items.iter().map(|x| x.to_string().cloned().map_err(|e| self.bad(key, e))).collect::<Result<Vec<_>, _>>().map(Some)
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<String, GgufError> {
        self.opt_string("general.architecture")?
            .ok_or_else(|| GgufError::MissingKey { path: self.path.clone(), key: "general.architecture".into() })
    }

    /// The decoder's configuration, from the `{arch}.*` keys, as a Hugging Face `config.json`
    /// would give it.
    pub fn config(&self) -> Result<Config, GgufError> {
        let arch = self.architecture()?;
        let model_type = match arch.as_str() {
            "llama" => "llama",
            "qwen2" => "qwen2",
            other => {
                return Err(GgufError::Unsupported {
                    path: self.path.clone(),
                    message: format!("architecture {other:?} is not a Llama or Qwen2 decoder"),
                })
            }
        };
        let k = |name: &str| format!("{arch}.{name}");
        if let Some(scaling) = self.opt_string(&k("rope.scaling.type"))? {
            if scaling != "none" {
                return Err(GgufError::Unsupported {
                    path: self.path.clone(),
                    message: format!("rope scaling {scaling:?} is not supported"),
                });
            }
        }
        let heads = self.uint(&k("attention.head_count"))?;
        let hidden = self.uint(&k("embedding_length"))?;
        let vocab = match self.opt_uint(&k("vocab_size"))? {
            Some(v) => v,
            None => self.tensor_shape("token_embd.weight")?.first().copied().unwrap_or(0),
        };
        let head_dim = self.opt_uint(&k("rope.dimension_count"))?.or(self.opt_uint(&k("attention.key_length"))?);
        let json = serde_json::json!({
            "model_type": model_type,
            "vocab_size": vocab,
            "hidden_size": hidden,
            "intermediate_size": self.uint(&k("feed_forward_length"))?,
            "num_hidden_layers": self.uint(&k("block_count"))?,
            "num_attention_heads": heads,
            "num_key_value_heads": self.opt_uint(&k("attention.head_count_kv"))?.unwrap_or(heads),
            "head_dim": head_dim,
            "rms_norm_eps": self.opt_float(&k("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-5),
            "rope_theta": self.opt_float(&k("rope.freq_base"))?.unwrap_or(10_000.0),
            "max_position_embeddings": self.opt_uint(&k("context_length"))?.unwrap_or(2048),
            "tie_word_embeddings": !self.content.tensor_infos.contains_key("output.weight"),
            "attention_bias": model_type == "llama" && self.content.tensor_infos.contains_key("blk.0.attn_q.bias"),
        });
        let cfg: Config = serde_json::from_value(json).map_err(|e| GgufError::Unsupported {
            path: self.path.clone(),
            message: format!("metadata does not make a decoder configuration: {e}"),
        })?;
        cfg.check().map_err(|message| GgufError::Unsupported { path: self.path.clone(), message })?;
        Ok(cfg)
    }

    /// Shape of a tensor, Hugging Face order (out, in).
    fn tensor_shape(&self, name: &str) -> Result<Vec<usize>, GgufError> {
        self.content
            .tensor_infos
            .get(name)
            .map(|t| t.shape.dims().to_vec())
            .ok_or_else(|| GgufError::MissingTensor { path: self.path.clone(), name: name.into() })
    }

    /// The tokenizer's vocabulary, merges, special ids and chat template; `NoTokenizer` when the
    /// file has no vocabulary.
    pub fn tokenizer_meta(&self) -> Result<TokenizerMeta, GgufError> {
        let Some(tokens) = self.opt_strings("tokenizer.ggml.tokens")? else {
            return Err(GgufError::NoTokenizer { path: self.path.clone() });
        };
        let token_types = match self.content.metadata.get("tokenizer.ggml.token_type") {
            None => vec![1; tokens.len()],
            Some(v) => v
                .to_vec()
                .map_err(|e| self.bad("tokenizer.ggml.token_type", e))?
                .iter()
                .map(|x| as_u64(x).map(|t| t as i32).ok_or_else(|| self.bad("tokenizer.ggml.token_type", "not integers")))
                .collect::<Result<_, _>>()?,
        };
        let id = |key: &str| -> Result<Option<u32>, GgufError> { Ok(self.opt_uint(key)?.map(|x| x as u32)) };
        let add_bos_token = matches!(self.content.metadata.get("tokenizer.ggml.add_bos_token"), Some(Value::Bool(true)));
        Ok(TokenizerMeta {
            model: self.opt_string("tokenizer.ggml.model")?.unwrap_or_default(),
            pre: self.opt_string("tokenizer.ggml.pre")?,
            tokens,
            token_types,
            merges: self.opt_strings("tokenizer.ggml.merges")?.unwrap_or_default(),
            bos_token_id: id("tokenizer.ggml.bos_token_id")?,
            eos_token_id: id("tokenizer.ggml.eos_token_id")?,
            add_bos_token,
            chat_template: self.opt_string("tokenizer.chat_template")?,
        })
    }

    /// Loads the model with [`WeightMode::Auto`].
    pub fn load(&self, device: &Device) -> Result<LlamaModel, GgufError> {
        self.load_with(device, WeightMode::Auto)
    }

    /// Loads the model, its linear layers quantized or dense as `mode` says.
    pub fn load_with(&self, device: &Device, mode: WeightMode) -> Result<LlamaModel, GgufError> {
        let cfg = self.config()?;
        let family = cfg.family().map_err(|message| GgufError::Unsupported { path: self.path.clone(), message })?;
        let file = File::open(&self.path).map_err(|source| GgufError::Open { path: self.path.clone(), source })?;
        let mut loader = Loader { file: &self.path, content: &self.content, reader: BufReader::new(file), device, mode };
        let dtype = if device.is_cuda() { DType::BF16 } else { DType::F32 };
        let rope = if family == Family::Llama { RopeLayout::Interleaved } else { RopeLayout::Half };
        let (heads, kv, hd, i) = (cfg.num_attention_heads, cfg.kv_heads(), cfg.head_dim(), cfg.intermediate_size);
        let h = cfg.hidden_size;
        let embed = loader.dequantized("token_embd.weight", &[cfg.vocab_size, h])?;
        let embed = embed.to_dtype(dtype).and_then(|e| e.to_device(device)).map_err(|e| loader.err("token_embd.weight", e))?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for l in 0..cfg.num_hidden_layers {
            let p = |n: &str| format!("blk.{l}.{n}");
            let qkv_bias = family == Family::Qwen2 || cfg.attention_bias;
            let o_bias = family == Family::Llama && cfg.attention_bias;
            layers.push(DecoderLayer {
                qkv: loader.proj(&[(p("attn_q"), heads * hd), (p("attn_k"), kv * hd), (p("attn_v"), kv * hd)], h, qkv_bias, dtype)?,
                o_proj: loader.proj(&[(p("attn_output"), h)], heads * hd, o_bias, dtype)?,
                gate_up: loader.proj(&[(p("ffn_gate"), i), (p("ffn_up"), i)], h, false, dtype)?,
                down_proj: loader.proj(&[(p("ffn_down"), h)], i, false, dtype)?,
                input_norm: loader.norm(&p("attn_norm.weight"), h, cfg.rms_norm_eps, dtype)?,
                post_attention_norm: loader.norm(&p("ffn_norm.weight"), h, cfg.rms_norm_eps, dtype)?,
                heads,
                kv_heads: kv,
                head_dim: hd,
                intermediate: i,
                rope,
            });
        }
        let norm = loader.norm("output_norm.weight", h, cfg.rms_norm_eps, dtype)?;
        let head_name = if cfg.tie_word_embeddings { "token_embd" } else { "output" };
        let lm_head = loader.proj(&[(head_name.to_string(), cfg.vocab_size)], h, false, dtype)?;
        let inv_freq = crate::llama::inv_freq_tensor(&cfg, device).map_err(|e| loader.err("rope", e))?;
        Ok(LlamaModel {
            embed_tokens: Embedding::new(embed, h),
            layers,
            norm,
            lm_head,
            inv_freq,
            device: device.clone(),
            config: cfg,
            staging: Default::default(),
        })
    }
}

/// Whether linear layers keep their quantized blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightMode {
    /// CUDA: dense bf16 (the flash-attn path). CPU: quantized where candle has a SIMD dot product
    /// for the block type (Q4_0, Q8_0, the K-quants), dense f32 for the others (Q4_1, Q5_0, Q5_1),
    /// whose scalar dot product is slower than reading four times the bytes through an f32 GEMM:
    /// measured on SmolLM2-135M Q4_1 on 2 cores, a 1,072-token prefill took 87 s quantized and
    /// 6.4 s dense, and a decode step 370 ms against 90 ms.
    #[default]
    Auto,
    /// Keep every quantized block type quantized (least memory).
    Quantized,
    /// Dequantize everything (f32 on the CPU, bf16 on CUDA).
    Dense,
}

impl WeightMode {
    fn dequantizes(self, dtype: GgmlDType, device: &Device) -> bool {
        match self {
            WeightMode::Dense => true,
            WeightMode::Quantized => false,
            WeightMode::Auto => device.is_cuda() || matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1 | GgmlDType::Q8_1),
        }
    }
}

fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::U8(x) => Some(*x as u64),
        Value::U16(x) => Some(*x as u64),
        Value::U32(x) => Some(*x as u64),
        Value::U64(x) => Some(*x),
        Value::I8(x) if *x >= 0 => Some(*x as u64),
        Value::I16(x) if *x >= 0 => Some(*x as u64),
        Value::I32(x) if *x >= 0 => Some(*x as u64),
        Value::I64(x) if *x >= 0 => Some(*x as u64),
        _ => None,
    }
}

struct Loader<'a> {
    file: &'a Path,
    content: &'a Content,
    reader: BufReader<File>,
    device: &'a Device,
    mode: WeightMode,
}

impl Loader<'_> {
    fn err(&self, name: &str, e: impl std::fmt::Display) -> GgufError {
        GgufError::Tensor { path: self.file.to_path_buf(), name: name.into(), message: e.to_string() }
    }

    /// A tensor, checked against the shape the configuration implies (Hugging Face order).
    fn qtensor(&mut self, name: &str, shape: &[usize]) -> Result<QTensor, GgufError> {
        let Some(info) = self.content.tensor_infos.get(name) else {
            return Err(GgufError::MissingTensor { path: self.file.to_path_buf(), name: name.into() });
        };
        if info.shape.dims() != shape {
            return Err(self.err(name, format!("shape {:?}, the configuration implies {shape:?}", info.shape.dims())));
        }
        // Read to the CPU first: fusing and dequantizing happen there, then the result moves.
        self.content.tensor(&mut self.reader, name, &Device::Cpu).map_err(|e| self.err(name, e))
    }

    fn dequantized(&mut self, name: &str, shape: &[usize]) -> Result<Tensor, GgufError> {
        let q = self.qtensor(name, shape)?;
        q.dequantize(&Device::Cpu).map_err(|e| self.err(name, e))
    }

    fn norm(&mut self, name: &str, h: usize, eps: f64, dtype: DType) -> Result<RmsNorm, GgufError> {
        let w = self.dequantized(name, &[h])?;
        let w = w.to_dtype(dtype).and_then(|w| w.to_device(self.device)).map_err(|e| self.err(name, e))?;
        Ok(RmsNorm::new(w, eps))
    }

    /// The projections `parts` (name without `.weight`, out dim) stacked into one layer: one
    /// quantized matrix when they share a block type (rows of a quantized matrix are independent
    /// runs of blocks, so stacking is concatenating bytes), else run one after the other.
    fn proj(&mut self, parts: &[(String, usize)], in_dim: usize, bias: bool, dtype: DType) -> Result<Proj, GgufError> {
        let mut weights = Vec::with_capacity(parts.len());
        for (name, out) in parts {
            weights.push(self.qtensor(&format!("{name}.weight"), &[*out, in_dim])?);
        }
        let bias = if bias {
            let mut bs = Vec::with_capacity(parts.len());
            for (name, out) in parts {
                bs.push(self.dequantized(&format!("{name}.bias"), &[*out])?);
            }
            let b = Tensor::cat(&bs, 0).and_then(|b| b.to_dtype(dtype)).and_then(|b| b.to_device(self.device));
            Some(b.map_err(|e| self.err(&parts[0].0, e))?)
        } else {
            None
        };
        let first = &parts[0].0;
        let dense_type = matches!(weights[0].dtype(), GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16);
        if dense_type || self.mode.dequantizes(weights[0].dtype(), self.device) {
            let ws = weights.iter().map(|w| w.dequantize(&Device::Cpu)).collect::<candle_core::Result<Vec<_>>>();
            let w = ws
                .and_then(|ws| Tensor::cat(&ws, 0))
                .and_then(|w| w.to_dtype(dtype))
                .and_then(|w| w.to_device(self.device))
                .map_err(|e| self.err(first, e))?;
            return Ok(Proj::Dense(Linear::new(w, bias)));
        }
        let same_type = weights.iter().all(|w| w.dtype() == weights[0].dtype());
        if same_type {
            let total: usize = parts.iter().map(|(_, out)| out).sum();
            let w = if weights.len() == 1 {
                weights.pop().expect("one weight")
            } else {
                let mut bytes = Vec::new();
                for w in &weights {
                    bytes.extend_from_slice(&w.data().map_err(|e| self.err(first, e))?);
                }
                let storage = QStorage::from_data(Cow::Owned(bytes), self.device, weights[0].dtype()).map_err(|e| self.err(first, e))?;
                QTensor::new(storage, (total, in_dim)).map_err(|e| self.err(first, e))?
            };
            let w = QMatMul::from_qtensor(w).map_err(|e| self.err(first, e))?;
            return Ok(Proj::Quant { weight: w, bias });
        }
        // Mixed block types: one layer per part, the bias split back to each.
        let mut out = Vec::with_capacity(parts.len());
        let mut offset = 0;
        for ((name, n), w) in parts.iter().zip(weights) {
            let b = match &bias {
                Some(b) => Some(b.narrow(0, offset, *n).map_err(|e| self.err(name, e))?),
                None => None,
            };
            offset += n;
            out.push(Proj::Quant { weight: QMatMul::from_qtensor(w).map_err(|e| self.err(name, e))?, bias: b });
        }
        Ok(Proj::Cat(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_gguf_is_refused_with_the_reason() {
        let dir = tempdir();
        let path = dir.join("model.gguf");
        std::fs::write(&path, b"<html>not found</html>").unwrap();
        let err = GgufFile::open(&path).err().expect("refused");
        assert!(matches!(err, GgufError::Malformed { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("model.gguf") && msg.contains("not a readable GGUF file"), "{msg}");
        let err = GgufFile::open(&dir.join("absent.gguf")).err().expect("refused");
        assert!(matches!(err, GgufError::Open { .. }), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    pub(crate) fn tempdir() -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!("warpfold-gguf-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

#[cfg(test)]
mod roundtrip_tests {
    use super::tests::tempdir;
    use super::*;
    use crate::llama::tests::{bin_of, max_abs_diff, random_model, random_weights, tiny_config, Rng};
    use candle_core::Module;
    use candle_nn::VarBuilder;

    /// llama.cpp's convert_hf_to_gguf permutation of q/k rows: within each head, the halves
    /// interleave (row i and row i + hd/2 become rows 2i and 2i+1).
    fn permute_rows(w: &Tensor, heads: usize) -> Tensor {
        let dims = w.dims().to_vec();
        let out = dims[0];
        let rest: usize = dims[1..].iter().product();
        let hd = out / heads;
        w.reshape((heads, 2, hd / 2, rest)).unwrap().transpose(1, 2).unwrap().contiguous().unwrap().reshape(dims).unwrap()
    }

    /// Writes a random Hugging Face checkpoint as a GGUF the way llama.cpp's converter names,
    /// permutes and (with `dtype`) quantizes it.
    fn write_gguf(cfg: &Config, weights: &std::collections::HashMap<String, Tensor>, dtype: GgmlDType, with_tokens: bool) -> PathBuf {
        let mut tensors: Vec<(String, QTensor)> = Vec::new();
        let q = |t: &Tensor, dt: GgmlDType| QTensor::quantize(t, dt).unwrap();
        let w = |n: &str| weights[n].clone();
        tensors.push(("token_embd.weight".into(), q(&w("model.embed_tokens.weight"), dtype)));
        tensors.push(("output_norm.weight".into(), q(&w("model.norm.weight"), GgmlDType::F32)));
        for l in 0..cfg.num_hidden_layers {
            let hf = |n: &str| w(&format!("model.layers.{l}.{n}"));
            let g = |n: &str| format!("blk.{l}.{n}");
            tensors.push((g("attn_q.weight"), q(&permute_rows(&hf("self_attn.q_proj.weight"), cfg.num_attention_heads), dtype)));
            tensors.push((g("attn_k.weight"), q(&permute_rows(&hf("self_attn.k_proj.weight"), cfg.kv_heads()), dtype)));
            tensors.push((g("attn_v.weight"), q(&hf("self_attn.v_proj.weight"), dtype)));
            tensors.push((g("attn_output.weight"), q(&hf("self_attn.o_proj.weight"), dtype)));
            tensors.push((g("ffn_gate.weight"), q(&hf("mlp.gate_proj.weight"), dtype)));
            tensors.push((g("ffn_up.weight"), q(&hf("mlp.up_proj.weight"), dtype)));
            tensors.push((g("ffn_down.weight"), q(&hf("mlp.down_proj.weight"), dtype)));
            tensors.push((g("attn_norm.weight"), q(&hf("input_layernorm.weight"), GgmlDType::F32)));
            tensors.push((g("ffn_norm.weight"), q(&hf("post_attention_layernorm.weight"), GgmlDType::F32)));
        }
        let u = |x: usize| Value::U32(x as u32);
        let mut meta: Vec<(&str, Value)> = vec![
            ("general.architecture", Value::String("llama".into())),
            ("llama.block_count", u(cfg.num_hidden_layers)),
            ("llama.context_length", u(cfg.max_position_embeddings)),
            ("llama.embedding_length", u(cfg.hidden_size)),
            ("llama.feed_forward_length", u(cfg.intermediate_size)),
            ("llama.attention.head_count", u(cfg.num_attention_heads)),
            ("llama.attention.head_count_kv", u(cfg.kv_heads())),
            ("llama.rope.freq_base", Value::F32(10_000.0)),
            ("llama.attention.layer_norm_rms_epsilon", Value::F32(cfg.rms_norm_eps as f32)),
            ("llama.vocab_size", u(cfg.vocab_size)),
        ];
        if with_tokens {
            let tokens = (0..cfg.vocab_size).map(|i| Value::String(format!("t{i}"))).collect();
            meta.push(("tokenizer.ggml.model", Value::String("gpt2".into())));
            meta.push(("tokenizer.ggml.tokens", Value::Array(tokens)));
        }
        let dir = tempdir();
        let path = dir.join("tiny.gguf");
        let mut file = std::fs::File::create(&path).unwrap();
        let meta_refs: Vec<(&str, &Value)> = meta.iter().map(|(k, v)| (*k, v)).collect();
        let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        candle_core::quantized::gguf_file::write(&mut file, &meta_refs, &tensor_refs).unwrap();
        path
    }

    fn logits(model: &LlamaModel, seqs: &[Vec<u32>]) -> Vec<Vec<f32>> {
        let h = model.forward_hidden(&bin_of(seqs, 1)).unwrap();
        model.lm_head.forward(&h).unwrap().to_vec2::<f32>().unwrap()
    }

    /// A checkpoint converted the way llama.cpp converts it (q/k rows permuted, GGUF names, tied
    /// head) loads with the configuration read from its metadata and computes the logits of the
    /// Hugging Face layout: exactly in f32 blocks, closely in 8-bit blocks (through QMatMul).
    #[test]
    fn a_llama_cpp_style_gguf_computes_the_hugging_face_logits() {
        let cfg = tiny_config(r#""model_type":"llama","tie_word_embeddings":true"#);
        // Q8_0 blocks are 32 wide: the tiny model's 64/128 dims are multiples of 32.
        let weights = random_weights(&cfg, 9);
        let hf = random_model(&cfg, 9);
        let mut rng = Rng(4);
        let seqs: Vec<Vec<u32>> = [11, 3, 25].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
        let want = logits(&hf, &seqs);
        // vocab 97 is not a multiple of 32, so the embedding/head stay f32; the layers quantize.
        for (dtype, tol) in [(GgmlDType::F32, 1e-6f32), (GgmlDType::Q8_0, 0.05)] {
            let path = write_gguf(&cfg, &weights, dtype, true);
            let file = GgufFile::open(&path).unwrap();
            let got_cfg = file.config().unwrap();
            assert_eq!((got_cfg.hidden_size, got_cfg.num_hidden_layers, got_cfg.kv_heads()), (64, 3, 2));
            assert!(got_cfg.tie_word_embeddings);
            let model = file.load(&Device::Cpu).unwrap();
            if dtype != GgmlDType::F32 {
                assert!(matches!(model.layers[0].qkv, Proj::Quant { .. }), "quantized layers stay quantized");
            }
            let got = logits(&model, &seqs);
            let worst = got.iter().zip(&want).map(|(a, b)| max_abs_diff(a, b)).fold(0.0, f32::max);
            let scale = want.iter().flatten().fold(0f32, |m, x| m.max(x.abs()));
            assert!(worst <= tol * scale, "{dtype:?}: logits differ by {worst} (largest logit {scale})");
            let argmax = |r: &Vec<f32>| r.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
            let agree = got.iter().zip(&want).filter(|(a, b)| argmax(a) == argmax(b)).count();
            assert!(agree * 10 >= want.len() * 9, "{dtype:?}: argmax agrees on {agree} of {}", want.len());
            let _ = std::fs::remove_dir_all(path.parent().unwrap());
        }
        // Q4_1 (no SIMD dot product in candle): dense by default, quantized on request, same logits.
        let path = write_gguf(&cfg, &weights, GgmlDType::Q4_1, true);
        let file = GgufFile::open(&path).unwrap();
        let auto = file.load(&Device::Cpu).unwrap();
        let quant = file.load_with(&Device::Cpu, WeightMode::Quantized).unwrap();
        assert!(matches!(auto.layers[0].qkv, Proj::Dense(_)));
        assert!(matches!(quant.layers[0].qkv, Proj::Quant { .. }));
        let (a, q) = (logits(&auto, &seqs), logits(&quant, &seqs));
        let scale = want.iter().flatten().fold(0f32, |m, x| m.max(x.abs()));
        let worst = a.iter().zip(&q).map(|(x, y)| max_abs_diff(x, y)).fold(0.0, f32::max);
        // The quantized path also rounds the activations to 8 bits.
        assert!(worst <= 0.05 * scale, "Q4_1 dense vs quantized: {worst}");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
        // Without the permutation's matching rotation the logits would differ: the test can fail.
        let plain = {
            let path = write_gguf(&cfg, &weights, GgmlDType::F32, true);
            let mut m = GgufFile::open(&path).unwrap().load(&Device::Cpu).unwrap();
            for l in &mut m.layers {
                l.rope = RopeLayout::Half;
            }
            let _ = std::fs::remove_dir_all(path.parent().unwrap());
            logits(&m, &seqs)
        };
        assert!(plain.iter().zip(&want).map(|(a, b)| max_abs_diff(a, b)).fold(0.0, f32::max) > 1e-2);
        let _ = VarBuilder::zeros(DType::F32, &Device::Cpu);
    }

    #[test]
    fn a_gguf_without_a_vocabulary_says_it_has_no_tokenizer() {
        let cfg = tiny_config(r#""model_type":"llama","tie_word_embeddings":true"#);
        let path = write_gguf(&cfg, &random_weights(&cfg, 1), GgmlDType::F32, false);
        let file = GgufFile::open(&path).unwrap();
        file.config().unwrap();
        let err = file.tokenizer_meta().unwrap_err();
        assert!(matches!(err, GgufError::NoTokenizer { .. }), "{err}");
        assert!(err.to_string().contains("no tokenizer"), "{err}");
        // A truncated copy: header intact, tensor data cut off.
        let bytes = std::fs::read(&path).unwrap();
        let cut = path.with_file_name("cut.gguf");
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let err = match GgufFile::open(&cut) {
            Err(e) => e,
            Ok(f) => f.load(&Device::Cpu).err().expect("a truncated file does not load"),
        };
        let msg = err.to_string();
        assert!(msg.contains("cut.gguf"), "{msg}");
        // A header cut in the middle of the metadata.
        std::fs::write(&cut, &bytes[..200]).unwrap();
        let err = GgufFile::open(&cut).err().expect("refused");
        assert!(matches!(err, GgufError::Malformed { .. }), "{err}");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
