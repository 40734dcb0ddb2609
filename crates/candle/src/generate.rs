//! Text generation with a Llama-family decoder: packed prefill, batched decode, continuous batching.
//!
//! Why this shape: a prompt's tokens are all known, so its prefill is one more packed forward,
//! the same varlen tape as scoring (several prompts back to back, positions restarting at 0,
//! attention causal inside each), and it leaves each sequence its own key/value cache. Decoding is
//! one token per sequence per step; what makes it cheap is running the linear layers (nearly all
//! of the work and all of the weight reads) once for every sequence of the batch, while attention,
//! which differs per sequence, reads only that sequence's cache. A sequence that ends leaves the
//! batch at once and a waiting prompt is prefilled into its place, so the batch stays full
//! (continuous batching).
//!
//! Caches live in one pool of fixed-size blocks per layer ([`KvPool`]): a sequence takes the blocks
//! its prompt and whole generation budget need when it joins and gives them back when it ends. A
//! step writes the batch's new keys and values with one scatter per layer and reads them through a
//! block table: FA-2's paged (split-KV) kernel on CUDA, one call for the whole batch; elsewhere the
//! rows of each sequence are gathered and attention runs in f32 (on the CPU) or through FA-2's
//! varlen kernel (a CUDA build without the paged kernel).
//!
//! Sampling draws from each request's own seeded generator, so what a request generates does not
//! depend on which other requests shared its batch.
//!
//! Why repetition controls live here, in [`sample`], and not in a caller: a greedy decoder falls
//! into loops ("a report of a report of a report ...", issue 15) and nothing after the fact can
//! undo a loop that has eaten the token budget; only the choice of each token can. Both controls
//! read nothing but the request's own prompt and generated tokens, so they keep the property above,
//! and both apply to greedy and sampled decoding alike: the repetition penalty (CTRL's, as
//! llama.cpp and transformers define it) makes every token already seen less likely, and
//! no-repeat n-gram blocking (transformers' `no_repeat_ngram_size`) bans outright the one token
//! that would complete an n-gram the generation already holds.

use std::time::Instant;

use candle_core::{DType, Device, Module, Result, Tensor};
use warpfold_backend::{Bin, Layout, SequenceTag};

use crate::llama::{LlamaModel, Residual};
use crate::stage_profile::{self, time as stage};

/// Tokens per cache block. candle-flash-attn's paged (split-KV) kernel reads keys in tiles of 32
/// (`run_mha_fwd_splitkv_paged_dispatch`: kBlockN = 32 for every head size) and takes any page size
/// that is a multiple of 32, so a tile never straddles two blocks and a sequence's blocks may lie
/// anywhere in the pool (the pool hands them out in descending order; the gated GPU tests check the
/// kernel through such a table against an f32 attention). A small block wastes at most 31 tokens per
/// sequence.
pub const KV_BLOCK: usize = 32;

/// Every running sequence's keys and values, in one pool of [`KV_BLOCK`]-token blocks per layer.
///
/// Why a pool: decoding writes one key and value per sequence and layer, and reads every
/// sequence's whole cache. With one tensor per sequence that is a copy kernel per sequence and
/// layer and a concatenation of every cache at every step, so a step's time grew with the batch
/// (about 24 ms for 16 sequences of the 1.5B model on an H200, nearly all of it launches). In a
/// pool, one scatter writes the batch's new rows and one attention call reads each sequence's
/// blocks through a block table (FA-2's paged kernel on CUDA), so a step costs the same number of
/// kernels for 1 sequence or 64. Rows are `kv_heads * head_dim` wide; a sequence's position `p`
/// lives in row `blocks[p / KV_BLOCK] * KV_BLOCK + p % KV_BLOCK`.
pub struct KvPool {
    /// Per layer: k and v, each (blocks * KV_BLOCK, kv_heads * head_dim).
    layers: Vec<(Tensor, Tensor)>,
    num_layers: usize,
    free: Vec<u32>,
    blocks: usize,
    kv_heads: usize,
    head_dim: usize,
    dtype: DType,
    device: Device,
    /// Decode steps read the pool through FA-2's paged kernel (else gathered, see [`CacheReads`]).
    pub(crate) paged: bool,
}

/// One sequence's place in a [`KvPool`]: its blocks, in order, and the tokens held.
#[derive(Debug, Default)]
pub struct SeqCache {
    blocks: Vec<u32>,
    pub(crate) len: usize,
}

impl SeqCache {
    /// Tokens held (the position of the next token).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn capacity(&self) -> usize {
        self.blocks.len() * KV_BLOCK
    }

    /// The pool row of position `p`.
    pub(crate) fn row(&self, p: usize) -> u32 {
        self.blocks[p / KV_BLOCK] * KV_BLOCK as u32 + (p % KV_BLOCK) as u32
    }
}

/// Blocks that hold `tokens` tokens.
pub fn kv_blocks(tokens: usize) -> usize {
    tokens.div_ceil(KV_BLOCK)
}

impl KvPool {
    /// An empty pool for `model`'s layers, in its dtype; [`Self::with_blocks`] sizes it at once.
    pub fn new(model: &LlamaModel) -> Self {
        let c = &model.config;
        Self {
            layers: Vec::new(),
            num_layers: c.num_hidden_layers,
            free: Vec::new(),
            blocks: 0,
            kv_heads: c.kv_heads(),
            head_dim: c.head_dim(),
            dtype: model.dtype(),
            device: model.device().clone(),
            paged: paged_allowed() && crate::flash::uses_paged_flash(model.device(), c.head_dim(), model.dtype()),
        }
    }

    /// A pool of `blocks` blocks (allocated now, so a budget is taken once, not by growth).
    pub fn with_blocks(model: &LlamaModel, blocks: usize) -> Result<Self> {
        let mut pool = Self::new(model);
        pool.grow(blocks)?;
        Ok(pool)
    }

    /// Blocks not held by any sequence.
    pub fn free_blocks(&self) -> usize {
        self.free.len()
    }

    pub fn total_blocks(&self) -> usize {
        self.blocks
    }

    fn width(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Adds `more` blocks, keeping what the pool holds (a copy into a larger pool).
    fn grow(&mut self, more: usize) -> Result<()> {
        if more == 0 {
            return Ok(());
        }
        let rows = (self.blocks + more) * KV_BLOCK;
        let (width, dtype, device) = (self.width(), self.dtype, self.device.clone());
        let enlarge = |t: Option<&Tensor>| -> Result<Tensor> {
            let bigger = Tensor::zeros((rows, width), dtype, &device)?;
            if let Some(t) = t {
                bigger.slice_set(t, 0, 0)?;
            }
            Ok(bigger)
        };
        if self.layers.is_empty() {
            self.layers = (0..self.num_layers).map(|_| Ok((enlarge(None)?, enlarge(None)?))).collect::<Result<_>>()?;
        } else {
            for (k, v) in &mut self.layers {
                *k = enlarge(Some(k))?;
                *v = enlarge(Some(v))?;
            }
        }
        self.free.extend((self.blocks..self.blocks + more).rev().map(|b| b as u32));
        self.blocks += more;
        Ok(())
    }

    /// A new sequence's place with room for `tokens` tokens (the pool grows if it must).
    pub fn allocate(&mut self, tokens: usize) -> Result<SeqCache> {
        let need = kv_blocks(tokens.max(1));
        if self.free.len() < need {
            self.grow(need - self.free.len())?;
        }
        let at = self.free.len() - need;
        let blocks = self.free.split_off(at);
        Ok(SeqCache { blocks, len: 0 })
    }

    /// Gives a finished sequence's blocks back.
    pub fn release(&mut self, seq: SeqCache) {
        self.free.extend(seq.blocks);
    }

    /// Writes the keys and values of layer `l` ((n, kv_heads, hd) each) at the pool rows `at`
    /// ((n,) u32).
    pub(crate) fn write(&self, l: usize, at: &Tensor, k: &Tensor, v: &Tensor) -> Result<()> {
        let n = k.dim(0)?;
        let (kp, vp) = &self.layers[l];
        crate::fused::scatter_rows(kp, at, &k.reshape((n, self.width()))?.to_dtype(self.dtype)?.contiguous()?)?;
        crate::fused::scatter_rows(vp, at, &v.reshape((n, self.width()))?.to_dtype(self.dtype)?.contiguous()?)
    }

    /// Pool rows, on the pool's device.
    pub(crate) fn rows(&self, rows: Vec<u32>) -> Result<Tensor> {
        let n = rows.len();
        Tensor::from_vec(rows, n, &self.device)
    }
}

/// A bin of whole prompts, back to back, no alignment (the CPU path reads only real tokens; FA-2
/// takes any lengths).
pub fn prompt_bin(prompts: &[&[u32]]) -> Bin {
    let mut bin = Bin {
        layout: Layout::Packed,
        input_ids: Vec::new(),
        position_ids: Vec::new(),
        cu_seqlens: vec![0],
        seq_lens: Vec::new(),
        max_seqlen: 0,
        capacity: 0,
        tags: Vec::new(),
    };
    for (i, p) in prompts.iter().enumerate() {
        bin.input_ids.extend_from_slice(p);
        bin.position_ids.extend(0..p.len() as u32);
        bin.cu_seqlens.push(bin.input_ids.len() as u32);
        bin.seq_lens.push(p.len() as u32);
        bin.max_seqlen = bin.max_seqlen.max(p.len() as u32);
        bin.tags.push(SequenceTag { request: 0, index: i as u32 });
    }
    bin.capacity = bin.input_ids.len() as u32;
    bin
}

impl LlamaModel {
    /// Runs a packed bin of prompts and returns the logits at each prompt's last token ((n, vocab),
    /// f32) and each prompt's place in `pool`, holding its keys and values, with room for
    /// `reserve[i]` more tokens.
    pub fn prefill(&self, pool: &mut KvPool, bin: &Bin, reserve: &[usize]) -> Result<(Tensor, Vec<SeqCache>)> {
        let n = bin.num_sequences();
        if reserve.len() != n {
            candle_core::bail!("prefill: {} reserves for {n} sequences", reserve.len());
        }
        let mut kv = Vec::with_capacity(self.layers.len());
        let hidden = self.forward_hidden_kv(bin, Some(&mut kv))?;
        // 1. Logits of the last real token of each sequence.
        let last: Vec<u32> = (0..n).map(|i| bin.cu_seqlens[i] + bin.seq_lens[i] - 1).collect();
        let last = hidden.index_select(&Tensor::from_vec(last, n, &self.device)?, 0)?;
        let logits = self.lm_head.forward(&last)?.to_dtype(DType::F32)?;
        // 2. Each sequence's blocks, then every tape row's keys and values to its pool row: one
        //    scatter per layer for the whole bin.
        let mut caches = Vec::with_capacity(n);
        let mut rows = Vec::with_capacity(bin.input_ids.len());
        for (i, &extra) in reserve.iter().enumerate().take(n) {
            let len = bin.seq_lens[i] as usize;
            let mut c = pool.allocate(len + extra.max(1))?;
            rows.extend((0..len).map(|p| c.row(p)));
            c.len = len;
            caches.push(c);
        }
        let at = pool.rows(rows)?;
        for (l, (k, v)) in kv.iter().enumerate() {
            pool.write(l, &at, k, v)?;
        }
        Ok((logits, caches))
    }

    /// One decoding step for a batch: `tokens[b]` is the next token of the sequence whose place in
    /// `pool` is `caches[b]`, at position `caches[b].len()`. Appends to every cache and returns the
    /// logits of the next token, (B, vocab) in f32.
    pub fn decode_step(&self, pool: &mut KvPool, tokens: &[u32], caches: &mut [SeqCache]) -> Result<Tensor> {
        let b = tokens.len();
        if caches.len() != b {
            candle_core::bail!("decode_step: {b} tokens for {} caches", caches.len());
        }
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= self.config.vocab_size) {
            candle_core::bail!("token id {id} is outside the vocabulary of {}", self.config.vocab_size);
        }
        let max_pos = self.config.max_position_embeddings;
        if let Some(c) = caches.iter().find(|c| c.len >= max_pos) {
            candle_core::bail!("a sequence of {} tokens has reached the model's {max_pos} positions", c.len);
        }
        // A sequence that outgrows its blocks takes more (not when it reserved its budget).
        for c in caches.iter_mut() {
            if c.len >= c.capacity() {
                let more = pool.allocate(c.capacity().max(KV_BLOCK))?;
                c.blocks.extend(more.blocks);
            }
        }
        stage_profile::begin(&self.device);
        // Where the new rows go, and what attention reads: the same for every layer.
        let (cos, sin, at, reads, mut x) = stage("step set-up", || {
            let positions: Vec<u32> = caches.iter().map(|c| c.len as u32).collect();
            let (cos, sin) = self.rope_angles(&positions)?;
            let at = pool.rows(caches.iter().map(|c| c.row(c.len)).collect())?;
            let reads = CacheReads::new(pool, caches)?;
            let x = self.embed_tokens.forward(&Tensor::from_slice(tokens, b, &self.device)?)?;
            Ok((cos, sin, at, reads, Residual::new(x)))
        })?;
        for (l, layer) in self.layers.iter().enumerate() {
            // 1. q, k, v of the B new tokens in one matmul: q (B, heads, hd), k and v (B, kv, hd).
            let (q, k, v) = layer.qkv(&mut x, &cos, &sin)?;
            // 2. The new keys and values into the pool, one scatter for the batch.
            stage("cache write", || pool.write(l, &at, &k, &v))?;
            // 3. Each query attends to its own cache, itself included.
            let ctx = stage("attention over the cache", || reads.attend(pool, l, &q, 1.0 / (layer.head_dim as f32).sqrt()))?;
            layer.finish(&ctx, &mut x)?;
        }
        for c in caches.iter_mut() {
            c.len += 1;
        }
        let normed = x.add_and_norm(&self.norm)?;
        stage("lm_head, to f32", || self.lm_head.forward(&normed)?.to_dtype(DType::F32))
    }
}

/// How a decode step's queries read the pool, set up once per step for every layer: FA-2's paged
/// kernel through a block table where this build has it, else the rows of every sequence's keys
/// gathered into one packed tape (FA-2's varlen kernel on CUDA, plain attention on the CPU).
pub(crate) enum CacheReads {
    #[cfg_attr(not(feature = "flash-attn"), allow(dead_code))]
    Paged {
        cu_q: Tensor,
        cu_k: Tensor,
        table: Tensor,
        max_k: usize,
    },
    Gathered {
        rows: Tensor,
        cu_k: Vec<u32>,
        cu_k_t: Option<(Tensor, Tensor)>,
        max_k: usize,
    },
}

/// `WARPFOLD_DECODE_ATTENTION=gathered` sends CUDA decoding through the gathered path even where the
/// paged kernel is built (to compare the two on one machine).
fn paged_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var("WARPFOLD_DECODE_ATTENTION").map(|v| v.trim() != "gathered").unwrap_or(true))
}

impl CacheReads {
    pub(crate) fn new(pool: &KvPool, caches: &[SeqCache]) -> Result<Self> {
        let b = caches.len();
        let device = &pool.device;
        let mut cu_k = vec![0u32];
        for c in caches {
            cu_k.push(cu_k[cu_k.len() - 1] + c.len as u32 + 1);
        }
        let max_k = caches.iter().map(|c| c.len + 1).max().unwrap_or(1);
        if pool.paged {
            let width = caches.iter().map(|c| kv_blocks(c.len + 1)).max().unwrap_or(1);
            let mut table = vec![0u32; b * width];
            for (i, c) in caches.iter().enumerate() {
                let used = kv_blocks(c.len + 1);
                table[i * width..i * width + used].copy_from_slice(&c.blocks[..used]);
            }
            let cu_q: Vec<u32> = (0..=b as u32).collect();
            return Ok(CacheReads::Paged {
                cu_q: Tensor::from_vec(cu_q, b + 1, device)?,
                cu_k: Tensor::from_vec(cu_k, b + 1, device)?,
                table: Tensor::from_vec(table, (b, width), device)?,
                max_k,
            });
        }
        let rows: Vec<u32> = caches.iter().flat_map(|c| (0..=c.len).map(|p| c.row(p))).collect();
        let total = rows.len();
        let flash = crate::flash::uses_flash(device, pool.head_dim, pool.dtype, false);
        let cu_k_t = if flash {
            let cu_q: Vec<u32> = (0..=b as u32).collect();
            Some((Tensor::from_vec(cu_q, b + 1, device)?, Tensor::from_slice(&cu_k, b + 1, device)?))
        } else {
            None
        };
        Ok(CacheReads::Gathered { rows: Tensor::from_vec(rows, total, device)?, cu_k, cu_k_t, max_k })
    }

    /// q (B, heads, hd) against each sequence's keys and values of layer `l`, itself included:
    /// -> (B, heads, hd).
    pub(crate) fn attend(&self, pool: &KvPool, l: usize, q: &Tensor, scale: f32) -> Result<Tensor> {
        let (b, heads, hd) = q.dims3()?;
        let kv = pool.kv_heads;
        let (kp, vp) = &pool.layers[l];
        match self {
            #[cfg(feature = "flash-attn")]
            CacheReads::Paged { cu_q, cu_k, table, max_k } => {
                let shape = (pool.blocks, KV_BLOCK, kv, hd);
                candle_flash_attn::flash_attn_varlen_paged_windowed(
                    &q.contiguous()?,
                    &kp.reshape(shape)?,
                    &vp.reshape(shape)?,
                    cu_q,
                    cu_k,
                    table,
                    None,
                    1,
                    *max_k,
                    scale,
                    None,
                    None,
                    KV_BLOCK,
                    None,
                )
            }
            #[cfg(not(feature = "flash-attn"))]
            CacheReads::Paged { .. } => unreachable!("the paged path is chosen only in flash-attn builds"),
            CacheReads::Gathered { rows, cu_k, cu_k_t, max_k } => {
                let total = rows.dim(0)?;
                let k_all = kp.index_select(rows, 0)?.reshape((total, kv, hd))?;
                let v_all = vp.index_select(rows, 0)?.reshape((total, kv, hd))?;
                #[cfg(feature = "flash-attn")]
                if let Some((cu_q, cu_k_t)) = cu_k_t {
                    return candle_flash_attn::flash_attn_varlen(&q.contiguous()?, &k_all, &v_all, cu_q, cu_k_t, 1, *max_k, scale, false);
                }
                let _ = (cu_k_t, max_k);
                let rep = heads / kv;
                let dtype = q.dtype();
                let mut out = Vec::with_capacity(b);
                for i in 0..b {
                    let (start, keys) = (cu_k[i] as usize, (cu_k[i + 1] - cu_k[i]) as usize);
                    // (1, heads, hd) -> (kv, rep, hd): query head h uses kv head h / rep.
                    let qi = q.narrow(0, i, 1)?.reshape((kv, rep, hd))?.to_dtype(DType::F32)?;
                    let k = k_all.narrow(0, start, keys)?.transpose(0, 1)?.to_dtype(DType::F32)?.contiguous()?;
                    let v = v_all.narrow(0, start, keys)?.transpose(0, 1)?.to_dtype(DType::F32)?.contiguous()?;
                    // (kv, rep, hd) x (kv, hd, keys) -> (kv, rep, keys) -> softmax -> x (kv, keys, hd) -> (kv, rep, hd)
                    let scores = (qi.matmul(&k.t()?)? * scale as f64)?;
                    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
                    out.push(probs.matmul(&v)?.reshape((1, heads, hd))?);
                }
                Tensor::cat(&out, 0)?.to_dtype(dtype)
            }
        }
    }
}

/// How tokens are chosen.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SamplingParams {
    /// Most tokens generated per request (the stop token included).
    pub max_new_tokens: usize,
    /// 0: greedy (the most likely token). Otherwise logits are divided by it before sampling.
    pub temperature: f32,
    /// Nucleus sampling: the smallest set of tokens whose probability reaches `top_p` (1.0: all).
    pub top_p: f32,
    pub seed: u64,
    /// The logit of every token already in the sequence (each generated token, and the prompt's
    /// last [`penalty_prompt_tokens`](Self::penalty_prompt_tokens)) is divided by this when
    /// positive and multiplied by it when negative, before temperature: either way the token gets
    /// less likely. 1.0: off. Stop tokens are never penalized (a penalty must not keep a sequence
    /// from ending).
    pub repetition_penalty: f32,
    /// How many of the prompt's last tokens the repetition penalty also covers (0: only what was
    /// generated; a summary should be free to reuse the document's names and numbers).
    pub penalty_prompt_tokens: usize,
    /// A token that would complete an n-gram of this many tokens that the generation already
    /// holds is banned (0: off; 1 would ban every generated token). It makes an exact loop
    /// impossible, at a price: a name of n tokens or more can only be written once in full.
    pub no_repeat_ngram: usize,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            max_new_tokens: 256,
            temperature: 0.0,
            top_p: 1.0,
            seed: 0,
            repetition_penalty: 1.0,
            penalty_prompt_tokens: 0,
            no_repeat_ngram: 0,
        }
    }
}

/// How requests share the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BatchOptions {
    /// Most sequences decoding together (1: one request at a time, the baseline).
    pub max_batch: usize,
    /// Most prompt tokens prefilled in one packed forward (a single longer prompt still runs alone).
    pub prefill_tokens: usize,
    /// Most key/value-cache tokens the running sequences may reach together: each sequence reserves
    /// its prompt plus its whole generation budget when it joins, so the caches' growth during
    /// decoding can never pass what the device holds (a single sequence still runs alone).
    pub kv_tokens: usize,
}

impl Default for BatchOptions {
    fn default() -> Self {
        Self { max_batch: 16, prefill_tokens: 4096, kv_tokens: usize::MAX }
    }
}

impl BatchOptions {
    /// The cache tokens that fit in `free_bytes` less a `margin` (0.1: keep 10%) for a model with
    /// `layers` layers of `kv_heads` × `head_dim` keys and values of `dtype_bytes` each.
    pub fn kv_tokens_for(free_bytes: u64, margin: f64, layers: usize, kv_heads: usize, head_dim: usize, dtype_bytes: usize) -> usize {
        let per_token = (2 * layers * kv_heads * head_dim * dtype_bytes).max(1) as f64;
        ((free_bytes as f64 * (1.0 - margin)) / per_token) as usize
    }
}

/// What one request generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// The generated tokens, without the stop token.
    pub tokens: Vec<u32>,
    /// Ended by a stop token (else by `max_new_tokens` or the model's positions).
    pub stopped: bool,
}

/// Counters of one [`generate`] run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct GenerationStats {
    pub prompts: usize,
    pub prompt_tokens: usize,
    /// Packed prefill forwards.
    pub prefills: usize,
    pub prefill_seconds: f64,
    /// Tokens produced by decode steps (each request's first token comes from its prefill).
    pub decode_tokens: usize,
    pub decode_steps: usize,
    pub decode_seconds: f64,
    /// The largest batch a decode step ran.
    pub max_batch_seen: usize,
    /// The most cache tokens the running sequences had reserved at once.
    pub max_kv_reserved: usize,
}

/// xorshift64*: a request's own reproducible stream.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, request: usize) -> Self {
        // splitmix64 of (seed, request) so that neighbouring requests get unrelated streams.
        let mut z = seed ^ (request as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What a request's sequence holds when its next token is chosen.
#[derive(Debug, Clone, Copy, Default)]
struct History<'a> {
    prompt: &'a [u32],
    generated: &'a [u32],
    /// Tokens the repetition penalty leaves alone (the stop tokens).
    exempt: &'a [u32],
}

/// Applies the repetition penalty and no-repeat n-gram blocking of `params` to one row of logits,
/// in place. A ban that would leave no token at all is dropped (only possible with a vocabulary
/// smaller than what was generated).
fn apply_repetition_controls(logits: &mut [f32], history: &History, params: &SamplingParams) {
    let vocab = logits.len();
    if params.repetition_penalty != 1.0 && params.repetition_penalty > 0.0 {
        let window = params.penalty_prompt_tokens.min(history.prompt.len());
        let mut seen: Vec<u32> = history.prompt[history.prompt.len() - window..].iter().chain(history.generated).copied().collect();
        seen.sort_unstable();
        seen.dedup();
        for t in seen {
            let i = t as usize;
            if i < vocab && !history.exempt.contains(&t) {
                let x = logits[i];
                logits[i] = if x > 0.0 { x / params.repetition_penalty } else { x * params.repetition_penalty };
            }
        }
    }
    let n = params.no_repeat_ngram;
    let g = history.generated;
    if n > 0 && g.len() + 1 >= n {
        // The n-gram this token would complete starts with the last n - 1 generated tokens; every
        // earlier occurrence of those bans the token that followed it.
        let prefix = &g[g.len() + 1 - n..];
        let mut banned: Vec<u32> = g.windows(n).filter(|w| &w[..n - 1] == prefix).map(|w| w[n - 1]).collect();
        banned.sort_unstable();
        banned.dedup();
        banned.retain(|&t| (t as usize) < vocab);
        if banned.len() < vocab {
            for t in banned {
                logits[t as usize] = f32::NEG_INFINITY;
            }
        }
    }
}

/// Picks the next token from one row of logits, after the repetition controls of `params`.
fn sample(logits: &mut [f32], history: &History, params: &SamplingParams, rng: &mut Rng) -> u32 {
    apply_repetition_controls(logits, history, params);
    let logits = &*logits;
    let argmax = || {
        let mut best = 0;
        for (i, &x) in logits.iter().enumerate() {
            if x > logits[best] {
                best = i;
            }
        }
        best as u32
    };
    if params.temperature <= 0.0 {
        return argmax();
    }
    let t = params.temperature as f64;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let mut probs: Vec<(u32, f64)> = logits.iter().enumerate().map(|(i, &x)| (i as u32, ((x as f64 - max) / t).exp())).collect();
    let z: f64 = probs.iter().map(|p| p.1).sum();
    probs.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Keep the head whose mass reaches top_p (at least one token).
    let top_p = (params.top_p as f64).clamp(0.0, 1.0);
    let mut kept = 0;
    let mut mass = 0.0;
    for p in &probs {
        kept += 1;
        mass += p.1 / z;
        if mass >= top_p {
            break;
        }
    }
    let mut r = rng.next_f64() * mass * z;
    for p in &probs[..kept] {
        r -= p.1;
        if r <= 0.0 {
            return p.0;
        }
    }
    probs[kept - 1].0
}

struct Active {
    request: usize,
    next: u32,
    cache: SeqCache,
    budget: usize,
    /// The cache tokens it reserved when it joined (its prompt and budget, in whole blocks).
    reserved: usize,
}

/// Generates a continuation of every prompt: packed prefill of the prompts that join, batched
/// decode of all that are running, finished ones leaving and waiting ones joining after every
/// step. Results are in request order; `on_done(request, &generation)` is called as each ends.
pub fn generate(
    model: &LlamaModel,
    prompts: &[Vec<u32>],
    stop: &[u32],
    params: &SamplingParams,
    opts: BatchOptions,
    mut on_done: impl FnMut(usize, &Generation),
) -> Result<(Vec<Generation>, GenerationStats)> {
    let max_pos = model.config.max_position_embeddings;
    for (i, p) in prompts.iter().enumerate() {
        if p.is_empty() {
            candle_core::bail!("prompt {i} is empty");
        }
        if p.len() >= max_pos {
            candle_core::bail!("prompt {i} has {} tokens; the model has {max_pos} positions", p.len());
        }
    }
    let mut stats = GenerationStats { prompts: prompts.len(), ..Default::default() };
    let mut results: Vec<Option<Generation>> = vec![None; prompts.len()];
    let mut outputs: Vec<Vec<u32>> = vec![Vec::new(); prompts.len()];
    let mut rngs: Vec<Rng> = (0..prompts.len()).map(|i| Rng::new(params.seed, i)).collect();
    let mut waiting = 0..prompts.len();
    let mut waiting_next = waiting.next();
    let mut active: Vec<Active> = Vec::new();
    let max_batch = opts.max_batch.max(1);
    // What each request reserves when it joins: its prompt and whole budget, in whole blocks.
    let need = |r: usize| {
        let len = prompts[r].len();
        kv_blocks(len + params.max_new_tokens.min(max_pos - len).max(1)) * KV_BLOCK
    };
    // The pool is taken once, as large as the cache budget or as the largest batch could need,
    // whichever is less (a request larger than the budget runs alone and grows it).
    let mut needs: Vec<usize> = (0..prompts.len()).map(need).collect();
    needs.sort_unstable_by(|a, b| b.cmp(a));
    let most = needs.iter().take(max_batch).sum::<usize>().min(opts.kv_tokens);
    let mut pool = KvPool::with_blocks(model, most / KV_BLOCK)?;
    // WARPFOLD_PROFILE=1: where prefills' and decode steps' time goes, stage by stage (the device
    // synchronized around each stage, so the run itself is slower).
    let profiling = stage_profile::enabled();
    let (mut prefill_times, mut decode_times) = (Vec::new(), Vec::new());
    if profiling {
        stage_profile::take();
    }
    let finish = |request: usize,
                  stopped: bool,
                  outputs: &mut Vec<Vec<u32>>,
                  results: &mut Vec<Option<Generation>>,
                  on_done: &mut dyn FnMut(usize, &Generation)| {
        let g = Generation { tokens: std::mem::take(&mut outputs[request]), stopped };
        on_done(request, &g);
        results[request] = Some(g);
    };
    loop {
        // 1. Join: prompts fill the free places, as many as one packed prefill takes.
        let mut joining = Vec::new();
        let mut tokens = 0;
        let mut reserved: usize = active.iter().map(|a| a.reserved).sum();
        while let Some(r) = waiting_next {
            let len = prompts[r].len();
            let alone = active.is_empty() && joining.is_empty();
            if active.len() + joining.len() >= max_batch
                || (!joining.is_empty() && tokens + len > opts.prefill_tokens)
                || (!alone && reserved + need(r) > opts.kv_tokens)
            {
                break;
            }
            joining.push(r);
            tokens += len;
            reserved += need(r);
            waiting_next = waiting.next();
        }
        stats.max_kv_reserved = stats.max_kv_reserved.max(reserved);
        if !joining.is_empty() {
            let started = Instant::now();
            let refs: Vec<&[u32]> = joining.iter().map(|&r| prompts[r].as_slice()).collect();
            let budgets: Vec<usize> = joining.iter().map(|&r| params.max_new_tokens.min(max_pos - prompts[r].len())).collect();
            let (logits, caches) = model.prefill(&mut pool, &prompt_bin(&refs), &budgets)?;
            let logits = logits.to_vec2::<f32>()?;
            if profiling {
                stage_profile::add(&mut prefill_times, stage_profile::take());
            }
            stats.prefills += 1;
            stats.prompt_tokens += tokens;
            stats.prefill_seconds += started.elapsed().as_secs_f64();
            for (((r, mut row), cache), budget) in joining.into_iter().zip(logits).zip(caches).zip(budgets) {
                let done = if budget == 0 {
                    Some(false)
                } else {
                    let history = History { prompt: &prompts[r], generated: &outputs[r], exempt: stop };
                    let t = sample(&mut row, &history, params, &mut rngs[r]);
                    if stop.contains(&t) {
                        Some(true)
                    } else {
                        outputs[r].push(t);
                        if budget == 1 {
                            Some(false)
                        } else {
                            active.push(Active { request: r, next: t, cache, budget, reserved: need(r) });
                            continue;
                        }
                    }
                };
                pool.release(cache);
                if let Some(stopped) = done {
                    finish(r, stopped, &mut outputs, &mut results, &mut on_done);
                }
            }
            // Fill every free place before decoding, unless the prefill budget stopped it.
            if active.len() < max_batch && waiting_next.is_some() {
                continue;
            }
        }
        if active.is_empty() {
            if waiting_next.is_none() {
                break;
            }
            continue;
        }
        // 2. One decode step for every running sequence.
        let started = Instant::now();
        let tokens: Vec<u32> = active.iter().map(|a| a.next).collect();
        let mut caches: Vec<SeqCache> = active.iter_mut().map(|a| std::mem::take(&mut a.cache)).collect();
        let logits = model.decode_step(&mut pool, &tokens, &mut caches)?;
        let logits = stage("logits to the host", || logits.to_vec2::<f32>())?;
        if profiling {
            stage_profile::add(&mut decode_times, stage_profile::take());
        }
        for (a, c) in active.iter_mut().zip(caches) {
            a.cache = c;
        }
        stats.decode_steps += 1;
        stats.decode_tokens += active.len();
        stats.max_batch_seen = stats.max_batch_seen.max(active.len());
        stats.decode_seconds += started.elapsed().as_secs_f64();
        // 3. Sample; finished sequences leave and give their blocks back.
        let mut still = Vec::with_capacity(active.len());
        for (mut a, mut row) in active.into_iter().zip(logits) {
            let history = History { prompt: &prompts[a.request], generated: &outputs[a.request], exempt: stop };
            let t = sample(&mut row, &history, params, &mut rngs[a.request]);
            let produced = outputs[a.request].len() + 1;
            let stopped = stop.contains(&t);
            if !stopped {
                outputs[a.request].push(t);
            }
            if stopped || produced >= a.budget {
                finish(a.request, stopped, &mut outputs, &mut results, &mut on_done);
                pool.release(std::mem::take(&mut a.cache));
            } else {
                a.next = t;
                still.push(a);
            }
        }
        active = still;
    }
    if profiling {
        stage_profile::print(&format!("generation prefills ({} prompt tokens)", stats.prompt_tokens), stats.prefills, &prefill_times);
        let mean = stats.decode_tokens as f64 / stats.decode_steps.max(1) as f64;
        stage_profile::print(&format!("generation decode steps (mean batch {mean:.1})"), stats.decode_steps, &decode_times);
    }
    let results = results.into_iter().map(|g| g.expect("every request finishes. This is a bug.")).collect();
    Ok((results, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token chosen from a copy of `logits` for a sequence with nothing generated yet.
    fn fresh(logits: &[f32], params: &SamplingParams, rng: &mut Rng) -> u32 {
        sample(&mut logits.to_vec(), &History::default(), params, rng)
    }

    fn controlled(logits: &[f32], history: &History, params: &SamplingParams) -> Vec<f32> {
        let mut row = logits.to_vec();
        apply_repetition_controls(&mut row, history, params);
        row
    }

    #[test]
    fn greedy_picks_the_largest_logit_and_sampling_respects_top_p() {
        let logits = [0.1f32, 3.0, -1.0, 2.9];
        let greedy = SamplingParams { temperature: 0.0, ..Default::default() };
        assert_eq!(fresh(&logits, &greedy, &mut Rng::new(1, 0)), 1);
        // top_p small: only the most likely token survives, whatever the draw.
        let nucleus = SamplingParams { temperature: 1.0, top_p: 0.1, ..Default::default() };
        let mut rng = Rng::new(7, 3);
        assert!((0..200).all(|_| fresh(&logits, &nucleus, &mut rng) == 1));
        // Probabilities at temperature 1: 0.506, 0.457, 0.028, 0.009 (tokens 1, 3, 0, 2). top_p 0.9
        // keeps tokens 1 and 3 (0.963); top_p 0.99 adds token 0 (0.991); only 1.0 keeps token 2.
        let mut counts = |top_p: f32| {
            let p = SamplingParams { temperature: 1.0, top_p, ..Default::default() };
            let mut seen = [0usize; 4];
            for _ in 0..4000 {
                seen[fresh(&logits, &p, &mut rng) as usize] += 1;
            }
            seen
        };
        let seen = counts(0.9);
        assert!(seen[0] == 0 && seen[2] == 0 && seen[1] > 1500 && seen[3] > 1500, "{seen:?}");
        let seen = counts(0.99);
        assert!(seen[2] == 0 && seen[0] > 30, "{seen:?}");
        let seen = counts(1.0);
        assert!(seen[2] > 5, "{seen:?}");
        let wide = SamplingParams { temperature: 1.0, top_p: 0.99, ..Default::default() };
        // The same seed and request draw the same stream.
        let a: Vec<u32> = {
            let mut r = Rng::new(5, 2);
            (0..20).map(|_| fresh(&logits, &wide, &mut r)).collect()
        };
        let b: Vec<u32> = {
            let mut r = Rng::new(5, 2);
            (0..20).map(|_| fresh(&logits, &wide, &mut r)).collect()
        };
        assert_eq!(a, b);
    }

    /// The penalty as llama.cpp and transformers apply it: a seen token's positive logit divided,
    /// its negative logit multiplied, each seen token once however often it occurred; the prompt
    /// only inside its window; stop tokens never.
    #[test]
    fn the_repetition_penalty_divides_positive_and_multiplies_negative_logits_of_seen_tokens() {
        let logits = [2.0f32, 1.9, -1.0, 0.5, 3.0];
        let params = SamplingParams { repetition_penalty: 2.0, ..Default::default() };
        let generated = [0u32, 2, 0, 0];
        let h = History { prompt: &[4, 3], generated: &generated, exempt: &[] };
        assert_eq!(controlled(&logits, &h, &params), [1.0, 1.9, -2.0, 0.5, 3.0]);
        // A window of one prompt token covers token 3 (the prompt's last), not token 4.
        let windowed = SamplingParams { penalty_prompt_tokens: 1, ..params.clone() };
        assert_eq!(controlled(&logits, &h, &windowed), [1.0, 1.9, -2.0, 0.25, 3.0]);
        let whole = SamplingParams { penalty_prompt_tokens: 99, ..params.clone() };
        assert_eq!(controlled(&logits, &h, &whole), [1.0, 1.9, -2.0, 0.25, 1.5]);
        // Stop tokens keep their logits, so a penalty never keeps a sequence from ending.
        let with_stop = History { exempt: &[4], ..h };
        assert_eq!(controlled(&logits, &with_stop, &whole), [1.0, 1.9, -2.0, 0.25, 3.0]);
        // 1.0 is off.
        let off = SamplingParams { penalty_prompt_tokens: 99, ..Default::default() };
        assert_eq!(controlled(&logits, &h, &off), logits);
        // Greedy: token 0 (2.0) was generated; penalized to 1.0 it loses to token 1 (1.9).
        let greedy = History { prompt: &[], generated: &[0], exempt: &[] };
        assert_eq!(sample(&mut logits[..4].to_vec(), &greedy, &SamplingParams::default(), &mut Rng::new(0, 0)), 0);
        assert_eq!(sample(&mut logits[..4].to_vec(), &greedy, &params, &mut Rng::new(0, 0)), 1);
        // Sampled alike: at temperature 1, token 0 drops from 46% to 24% of the draws.
        let sampled = SamplingParams { temperature: 1.0, ..params.clone() };
        let mut rng = Rng::new(3, 1);
        let zeros = (0..4000).filter(|_| sample(&mut logits[..4].to_vec(), &greedy, &sampled, &mut rng) == 0).count();
        // exp(1) / (exp(1) + exp(1.9) + exp(-1) + exp(0.5)) = 0.238.
        assert!((850..1150).contains(&zeros), "{zeros} of 4000");
    }

    /// A token that would complete an n-gram already generated is banned, greedy and sampled.
    #[test]
    fn no_repeat_ngram_bans_the_token_that_would_repeat_an_ngram() {
        // Token 7 is the most likely; 1 next.
        let logits = [0.0f32, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0];
        // Generated "5 6 7 5 6": a 7 now would repeat the trigram (5, 6, 7).
        let generated = [5u32, 6, 7, 5, 6];
        let h = History { prompt: &[], generated: &generated, exempt: &[] };
        let ngram = |n| SamplingParams { no_repeat_ngram: n, ..Default::default() };
        let banned = |n| {
            controlled(&logits, &h, &ngram(n))
                .iter()
                .enumerate()
                .filter(|(_, x)| **x == f32::NEG_INFINITY)
                .map(|(i, _)| i)
                .collect::<Vec<_>>()
        };
        assert_eq!(banned(3), [7]);
        assert_eq!(banned(2), [7], "the bigram (6, 7)");
        assert_eq!(banned(4), Vec::<usize>::new(), "(7, 5, 6) was never followed by anything");
        assert_eq!(banned(1), [5, 6, 7], "unigrams: every generated token");
        assert_eq!(banned(0), Vec::<usize>::new(), "off");
        assert_eq!(banned(6), Vec::<usize>::new(), "longer than what was generated");
        // Every earlier occurrence of the prefix bans its follower: "3 1 ... 3 2 ... 3" bans 1 and 2.
        let h2 = History { prompt: &[], generated: &[3, 1, 4, 3, 2, 4, 3], exempt: &[] };
        let row = controlled(&logits, &h2, &ngram(2));
        assert!(row[1] == f32::NEG_INFINITY && row[2] == f32::NEG_INFINITY && row[7] == 5.0, "{row:?}");
        // Greedy picks the best token left; sampling never draws a banned one.
        assert_eq!(sample(&mut logits.to_vec(), &h, &SamplingParams::default(), &mut Rng::new(0, 0)), 7);
        assert_eq!(sample(&mut logits.to_vec(), &h, &ngram(3), &mut Rng::new(0, 0)), 1);
        let sampled = SamplingParams { temperature: 1.0, no_repeat_ngram: 3, ..Default::default() };
        let mut rng = Rng::new(9, 0);
        assert!((0..2000).all(|_| sample(&mut logits.to_vec(), &h, &sampled, &mut rng) != 7));
        // The prompt is not the generation: an n-gram that only the prompt holds is allowed.
        let in_prompt = History { prompt: &[5, 6, 7], generated: &[5, 6], exempt: &[] };
        assert_eq!(sample(&mut logits.to_vec(), &in_prompt, &ngram(3), &mut Rng::new(0, 0)), 7);
        // A ban that would leave nothing is dropped rather than picking from nothing.
        let tiny = [1.0f32, 0.5];
        let all = History { prompt: &[], generated: &[0, 1], exempt: &[] };
        assert_eq!(controlled(&tiny, &all, &ngram(1)), tiny);
    }
}

#[cfg(test)]
mod model_tests {
    use super::*;
    use crate::llama::tests::{bin_of, max_abs_diff, random_model, variants, Rng as TestRng};

    /// Every step's logits, computed from caches, equal the logits of one full forward over the
    /// whole sequence at that row: the cache holds the right keys at the right positions, and each
    /// sequence of the batch reads only its own.
    #[test]
    fn decoding_from_caches_gives_the_logits_of_a_full_forward() {
        for (name, cfg) in variants() {
            let model = random_model(&cfg, 3);
            let mut rng = TestRng(17);
            let full: Vec<Vec<u32>> = [14, 9, 45].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
            let prompt_lens = [6usize, 1, 13];
            let prompts: Vec<&[u32]> = full.iter().zip(prompt_lens).map(|(s, p)| &s[..p]).collect();
            // A pool with a block in use by no one of these, so their blocks are not 0, 1, 2, ...
            let mut pool = KvPool::new(&model);
            let other = pool.allocate(KV_BLOCK).unwrap();
            // Reserve 2 so the third sequence has to take more blocks while decoding (13 + 2 fit
            // one block; it reaches 45 tokens).
            let (logits, mut caches) = model.prefill(&mut pool, &prompt_bin(&prompts), &[2, 2, 2]).unwrap();
            assert_eq!(caches.iter().map(|c| c.blocks.len()).collect::<Vec<_>>(), [1, 1, 1]);
            let logits = logits.to_vec2::<f32>().unwrap();
            let reference: Vec<Vec<Vec<f32>>> = full
                .iter()
                .map(|s| {
                    let h = model.forward_hidden(&bin_of(std::slice::from_ref(s), 1)).unwrap();
                    model.lm_head.forward(&h).unwrap().to_vec2::<f32>().unwrap()
                })
                .collect();
            for (i, row) in logits.iter().enumerate() {
                let d = max_abs_diff(row, &reference[i][prompt_lens[i] - 1]);
                assert!(d <= 1e-4, "{name}: prefill logits of sequence {i} differ by {d}");
            }
            // Decode the rest of each sequence, teacher-forced, all three in one batch while they
            // last; a finished one gives its blocks back at once, and they are taken again.
            let mut step = 0;
            let mut spares = Vec::new();
            loop {
                let live: Vec<usize> = (0..3).filter(|&i| prompt_lens[i] + step < full[i].len()).collect();
                for i in (0..3).filter(|&i| prompt_lens[i] + step == full[i].len()) {
                    pool.release(std::mem::take(&mut caches[i]));
                    spares.push(pool.allocate(1).unwrap());
                }
                if live.is_empty() {
                    break;
                }
                let tokens: Vec<u32> = live.iter().map(|&i| full[i][prompt_lens[i] + step]).collect();
                let mut batch: Vec<SeqCache> = live.iter().map(|&i| std::mem::take(&mut caches[i])).collect();
                let out = model.decode_step(&mut pool, &tokens, &mut batch).unwrap().to_vec2::<f32>().unwrap();
                for ((&i, c), row) in live.iter().zip(batch).zip(out) {
                    let pos = prompt_lens[i] + step;
                    assert_eq!(c.len(), pos + 1);
                    let d = max_abs_diff(&row, &reference[i][pos]);
                    assert!(d <= 1e-4, "{name}: sequence {i}, position {pos}: logits differ by {d}");
                    caches[i] = c;
                }
                step += 1;
            }
            assert!(step >= 32);
            // Every block comes back.
            pool.release(other);
            spares.into_iter().for_each(|c| pool.release(c));
            assert_eq!(pool.free_blocks(), pool.total_blocks(), "{name}");
        }
    }

    #[test]
    fn the_cache_budget_bounds_what_runs_together_and_changes_no_output() {
        let (_, cfg) = variants().remove(1);
        let model = random_model(&cfg, 9);
        let mut rng = TestRng(31);
        let prompts: Vec<Vec<u32>> = [5, 17, 9, 30, 8, 12, 3, 21].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
        let params = SamplingParams { max_new_tokens: 10, ..Default::default() };
        let free = BatchOptions { max_batch: 8, prefill_tokens: 4096, kv_tokens: usize::MAX };
        let (unbounded, wide) = generate(&model, &prompts, &[], &params, free, |_, _| {}).unwrap();
        assert_eq!(wide.max_batch_seen, 8);
        // Room for four blocks of 32 at a time: 2 to 4 of these sequences (one needs 2 blocks).
        let tight = BatchOptions { kv_tokens: 4 * KV_BLOCK + 5, ..free };
        let (bounded, stats) = generate(&model, &prompts, &[], &params, tight, |_, _| {}).unwrap();
        assert!(stats.max_kv_reserved <= 4 * KV_BLOCK, "{stats:?}");
        assert!(stats.max_batch_seen >= 2 && stats.max_batch_seen < 8, "{stats:?}");
        assert_eq!(bounded, unbounded, "a budget changes what runs together, never what is generated");
        // A single sequence larger than the budget still runs, alone.
        let (one, stats) = generate(&model, &prompts[3..4], &[], &params, BatchOptions { kv_tokens: 5, ..free }, |_, _| {}).unwrap();
        assert_eq!((one.len(), stats.max_batch_seen), (1, 1));
        // Sized from memory: 2 (k, v) × layers × kv heads × head dim × bytes per value.
        assert_eq!(BatchOptions::kv_tokens_for(1 << 30, 0.0, 30, 3, 64, 2), (1usize << 30) / (2 * 30 * 3 * 64 * 2));
        assert_eq!(BatchOptions::kv_tokens_for(1000, 0.5, 1, 1, 1, 1), 250);
    }

    #[test]
    fn generation_is_the_same_packed_and_batched_as_alone() {
        let (_, cfg) = variants().remove(1);
        let model = random_model(&cfg, 5);
        let mut rng = TestRng(23);
        let prompts: Vec<Vec<u32>> = [5, 17, 1, 30, 8, 12, 3].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
        for params in [
            SamplingParams { max_new_tokens: 12, ..Default::default() },
            SamplingParams { max_new_tokens: 12, temperature: 0.8, top_p: 0.9, seed: 42, ..Default::default() },
            // The repetition controls read only the request's own tokens.
            SamplingParams {
                max_new_tokens: 12,
                repetition_penalty: 1.5,
                penalty_prompt_tokens: 4,
                no_repeat_ngram: 2,
                ..Default::default()
            },
        ] {
            // Three at a time and at most 40 prompt tokens per prefill: sequences join as others end.
            let batched = BatchOptions { max_batch: 3, prefill_tokens: 40, kv_tokens: usize::MAX };
            let stop = [7u32];
            let mut order = Vec::new();
            let (together, stats) = generate(&model, &prompts, &stop, &params, batched, |r, _| order.push(r)).unwrap();
            assert_eq!(stats.max_batch_seen, 3);
            assert!(stats.prefills >= 3, "{stats:?}");
            let mut sorted = order.clone();
            sorted.sort();
            assert_eq!(sorted, (0..prompts.len()).collect::<Vec<_>>(), "every request reported once");
            for (i, p) in prompts.iter().enumerate() {
                let alone = BatchOptions { max_batch: 1, prefill_tokens: 4096, kv_tokens: usize::MAX };
                let (one, _) = generate(&model, std::slice::from_ref(p), &stop, &params, alone, |_, _| {}).unwrap();
                // The alone run is request 0 of its own call: compare with the same seed stream.
                if params.temperature == 0.0 {
                    assert_eq!(together[i], one[0], "prompt {i}");
                }
                assert!(together[i].tokens.len() <= 12);
                assert!(!together[i].tokens.contains(&7));
                assert!(together[i].stopped || together[i].tokens.len() == 12);
            }
            // Sampled: the same call in one-at-a-time mode draws exactly the same tokens.
            let (sequential, _) = generate(
                &model,
                &prompts,
                &stop,
                &params,
                BatchOptions { max_batch: 1, prefill_tokens: 4096, kv_tokens: usize::MAX },
                |_, _| {},
            )
            .unwrap();
            assert_eq!(together, sequential);
        }
    }

    /// Greedy decoding of a random model falls into a loop; with no-repeat n-gram blocking no
    /// n-gram occurs twice in what it generates, and the penalty alone already breaks the loop.
    #[test]
    fn greedy_generation_that_loops_repeats_no_ngram_under_blocking() {
        let (_, cfg) = variants().remove(1);
        let model = random_model(&cfg, 5);
        let mut rng = TestRng(41);
        let prompts: Vec<Vec<u32>> = [6, 11, 3].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
        let opts = BatchOptions { max_batch: 3, prefill_tokens: 4096, kv_tokens: usize::MAX };
        let repeats = |tokens: &[u32], n: usize| {
            let mut grams: Vec<&[u32]> = tokens.windows(n).collect();
            let all = grams.len();
            grams.sort();
            grams.dedup();
            all - grams.len()
        };
        let run = |params: SamplingParams| generate(&model, &prompts, &[], &params, opts, |_, _| {}).unwrap().0;
        let plain = run(SamplingParams { max_new_tokens: 40, ..Default::default() });
        assert!(plain.iter().all(|g| repeats(&g.tokens, 3) > 5), "greedy on random weights loops: {plain:?}");
        for n in [2, 3] {
            let blocked = run(SamplingParams { max_new_tokens: 40, no_repeat_ngram: n, ..Default::default() });
            for g in &blocked {
                assert_eq!(g.tokens.len(), 40);
                assert_eq!(repeats(&g.tokens, n), 0, "n = {n}: {:?}", g.tokens);
            }
        }
        let penalized = run(SamplingParams { max_new_tokens: 40, repetition_penalty: 1.5, ..Default::default() });
        for (p, g) in plain.iter().zip(&penalized) {
            assert!(repeats(&g.tokens, 3) < repeats(&p.tokens, 3), "{:?} vs {:?}", g.tokens, p.tokens);
        }
    }
}
