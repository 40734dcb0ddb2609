//! Attention over a packed tape: each token attends causally to the real tokens of its own slot
//! and to nothing across slots. On CUDA with flash-attn it is FlashAttention-2's varlen kernel
//! (`cu_seqlens` straight from the bin); elsewhere, and for head sizes FA-2 was not built for, a
//! masked attention in f32 per slot, in blocks of query rows so that a long slot's score matrix
//! stays bounded.

use candle_core::{DType, Device, Result, Tensor};
use warpfold_backend::Bin;

/// Query rows per attention block on the non-flash path: bounds the score matrix of a slot of `L`
/// tokens to `heads × 512 × L` floats instead of `heads × L × L`.
pub(crate) const ATTN_QUERY_ROWS: usize = 512;

/// The slot layout of a bin as attention needs it, built once per forward and shared by every layer.
pub struct VarlenSlots {
    cu_seqlens: Vec<u32>,
    seq_lens: Vec<u32>,
    /// Query rows per attention block (non-flash path).
    query_rows: usize,
    /// (query_rows, query_rows): 0 on and below the diagonal, -inf above; the mask of the diagonal
    /// block of every query block (non-flash path only). Keys before the block are all visible.
    causal_block: Option<Tensor>,
    /// `cu_seqlens` on the device, as the varlen kernel wants it.
    #[cfg(feature = "flash-attn")]
    cu_seqlens_dev: Tensor,
    #[cfg(feature = "flash-attn")]
    max_seqlen: usize,
}

impl VarlenSlots {
    pub fn from_bin(bin: &Bin, device: &Device) -> Result<Self> {
        let cu = Tensor::from_slice(&bin.cu_seqlens, bin.cu_seqlens.len(), device)?;
        Self::with_query_rows(bin, cu, device, ATTN_QUERY_ROWS)
    }

    /// `cu_seqlens`: the bin's slot boundaries already on `device` (u32).
    pub(crate) fn with_query_rows(bin: &Bin, cu_seqlens: Tensor, device: &Device, query_rows: usize) -> Result<Self> {
        let longest = bin.seq_lens.iter().copied().max().unwrap_or(1) as usize;
        let b = query_rows.min(longest).max(1);
        // The flash path needs no mask: do not build (and copy to the device) one it never reads.
        let flash = cfg!(feature = "flash-attn") && device.is_cuda();
        let causal_block = if flash { None } else { Some(causal_mask(b, device)?) };
        #[cfg(not(feature = "flash-attn"))]
        let _ = cu_seqlens;
        Ok(Self {
            cu_seqlens: bin.cu_seqlens.clone(),
            seq_lens: bin.seq_lens.clone(),
            query_rows: b,
            causal_block,
            #[cfg(feature = "flash-attn")]
            cu_seqlens_dev: cu_seqlens,
            #[cfg(feature = "flash-attn")]
            max_seqlen: bin.max_seqlen as usize,
        })
    }

    /// The diagonal block's mask: built with the slots, or here on the rare flash-build path
    /// that falls back to this attention (head sizes FA-2 refuses).
    fn causal_block(&self, device: &Device) -> Result<Tensor> {
        match &self.causal_block {
            Some(m) => Ok(m.clone()),
            None => causal_mask(self.query_rows, device),
        }
    }
}

/// (b, b): 0 on and below the diagonal, -inf above.
fn causal_mask(b: usize, device: &Device) -> Result<Tensor> {
    let mask: Vec<f32> = (0..b * b).map(|i| if i % b > i / b { f32::NEG_INFINITY } else { 0.0 }).collect();
    Tensor::from_vec(mask, (b, b), device)
}

/// Causal attention restricted to each slot: `q` (T, heads, hd), `k` and `v` (T, kv_heads, hd) ->
/// (T, heads, hd). A token attends to the real tokens of its own slot up to itself; the rows of pad
/// tokens are zero (non-flash path) or unspecified (flash path) and must not be read.
pub fn varlen_causal_attention(q: &Tensor, k: &Tensor, v: &Tensor, slots: &VarlenSlots, softmax_scale: f32) -> Result<Tensor> {
    // FA-2 takes head sizes that are multiples of 8, up to 256; others take the generic path.
    #[cfg(feature = "flash-attn")]
    if crate::flash::uses_flash(q.device(), q.dim(2)?, q.dtype(), true) {
        // Whole slots, pad tokens included: they sit after the real tokens, so the causal mask keeps
        // them out of every real token's view. The kernel handles GQA itself.
        return candle_flash_attn::flash_attn_varlen(
            q,
            k,
            v,
            &slots.cu_seqlens_dev,
            &slots.cu_seqlens_dev,
            slots.max_seqlen,
            slots.max_seqlen,
            softmax_scale,
            true,
        );
    }

    let dtype = q.dtype();
    let (t, heads, hd) = q.dims3()?;
    let kv = k.dim(1)?;
    let rep = heads / kv;
    let (q, k, v) = (q.to_dtype(DType::F32)?, k.to_dtype(DType::F32)?, v.to_dtype(DType::F32)?);
    let causal_block = slots.causal_block(q.device())?;
    let mut parts = Vec::new();
    for (i, &real) in slots.seq_lens.iter().enumerate() {
        let start = slots.cu_seqlens[i] as usize;
        let slot_len = slots.cu_seqlens[i + 1] as usize - start;
        let real = real as usize;
        // 1. The slot's real tokens only. Query heads are grouped by the kv head they share
        //    (head h uses kv head h / rep, as Hugging Face's repeat_kv), so GQA needs no copy of k, v.
        // (r, heads, hd) -> (r, kv, rep, hd) -> (kv, rep, r, hd)
        let qs = q.narrow(0, start, real)?.reshape((real, kv, rep, hd))?.permute((1, 2, 0, 3))?.contiguous()?;
        // (r, kv, hd) -> (kv, r, hd)
        let ks = k.narrow(0, start, real)?.transpose(0, 1)?.contiguous()?;
        let vs = v.narrow(0, start, real)?.transpose(0, 1)?.contiguous()?;
        // 2. Query blocks: block [q0, q0+b) sees keys [0, q0+b); only its last b keys need the mask.
        let mut q0 = 0;
        while q0 < real {
            let b = slots.query_rows.min(real - q0);
            let keys = q0 + b;
            // (kv, rep, b, hd) -> (kv, rep*b, hd)
            let qb = qs.narrow(2, q0, b)?.reshape((kv, rep * b, hd))?;
            let kb = ks.narrow(1, 0, keys)?.contiguous()?;
            let vb = vs.narrow(1, 0, keys)?.contiguous()?;
            // (kv, rep*b, hd) x (kv, hd, keys) -> (kv, rep, b, keys)
            let scores = (qb.matmul(&kb.t()?)? * softmax_scale as f64)?.reshape((kv, rep, b, keys))?;
            let diag = causal_block.narrow(0, 0, b)?.narrow(1, 0, b)?;
            let mask = if q0 == 0 { diag } else { Tensor::cat(&[&Tensor::zeros((b, q0), DType::F32, q.device())?, &diag], 1)? };
            let probs = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(&mask)?)?;
            // (kv, rep*b, keys) x (kv, keys, hd) -> (kv, rep, b, hd) -> (b, kv, rep, hd) -> (b, heads, hd)
            let ctx = probs.reshape((kv, rep * b, keys))?.matmul(&vb)?.reshape((kv, rep, b, hd))?;
            parts.push(ctx.permute((2, 0, 1, 3))?.reshape((b, heads, hd))?);
            q0 += b;
        }
        if real < slot_len {
            parts.push(Tensor::zeros((slot_len - real, heads, hd), DType::F32, q.device())?);
        }
    }
    let out = Tensor::cat(&parts, 0)?;
    debug_assert_eq!(out.dim(0)?, t, "attention covers the whole tape. This is a bug.");
    out.to_dtype(dtype)
}
