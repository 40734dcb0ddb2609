//! MPNet (all-mpnet-base-v2): what it adds to the BERT encoder of [`crate::bert`].
//!
//! Why not a model file of its own: MPNet's encoder is BERT's layer for layer (q/k/v and output
//! projections, post-norm, GELU feed-forward, mean pooling in sentence-transformers), so it runs
//! through [`crate::bert::BertModel`] with everything that already has: packed bins, the fused CPU
//! layers, the CUDA kernels and pooling. Three things differ, and this file holds them:
//! - **Names.** Its checkpoint says `attention.attn.q` where BERT says `attention.self.query`, and
//!   so on ([`bert_name`] maps BERT's names onto MPNet's, so the BERT loader reads its weights).
//! - **Positions.** Like RoBERTa it numbers positions from `padding_idx + 1 = 2`, and it has no
//!   token-type table. The loader drops the first two rows of the position table, so the packer's
//!   0-based positions index it as BERT's do ([`crate::bert::Config::position_offset`]).
//! - **A relative-position bias.** Every layer adds, before the softmax, one learned value per head
//!   and per bucket of the distance between key and query (32 buckets: exact up to 7 either way,
//!   then logarithmic up to 128). [`RelativeBias`] turns the `(buckets, heads)` table into a row per
//!   head and distance once at load, so a query row's biases are one slice. FlashAttention-2's
//!   varlen kernel takes no such bias, so an MPNet bin runs the masked attention per slot on CUDA
//!   and the two-product attention on the CPU, both with the bias added to the scores.

use std::collections::HashMap;
use std::sync::Mutex;

use candle_core::{DType, Device, Result, Tensor};

/// The distance at which the buckets stop growing: every key 128 or more tokens away shares one.
const MAX_DISTANCE: i64 = 128;

/// The bucket of the distance `relative = key - query`, as MPNet computes it: half the buckets for
/// keys after the query, half for keys before (the query itself is bucket 0); in each half,
/// distances below a quarter of the buckets have one each, longer ones share logarithmic buckets up
/// to [`MAX_DISTANCE`]. The logarithm is taken in f32, as MPNet's (PyTorch's) is, so a distance on a
/// bucket's edge falls on the same side.
pub fn relative_bucket(relative: i64, buckets: usize) -> usize {
    let half = (buckets / 2) as i64;
    let n = -relative;
    let mut bucket = if n < 0 { half } else { 0 };
    let n = n.abs();
    let exact = half / 2;
    bucket += if n < exact {
        n
    } else {
        let log = (n as f32 / exact as f32).ln() / (MAX_DISTANCE as f32 / exact as f32).ln();
        (exact + (log * (half - exact) as f32) as i64).min(half - 1)
    };
    bucket as usize
}

/// MPNet's bias table, laid out per head and distance for the attention loops.
pub struct RelativeBias {
    heads: usize,
    /// The longest sequence the rows cover (the model's positions).
    max_len: usize,
    /// Per head, `2·max_len − 1` values: entry `max_len − 1 + (key − query)`.
    rows: Vec<f32>,
    /// [`Self::block`]s made so far, by slot length: a model's bins reuse a few dozen slot sizes
    /// (multiples of the packer's alignment), so each is uploaded once, not once per bin.
    blocks: Mutex<HashMap<usize, Tensor>>,
}

impl RelativeBias {
    /// From the checkpoint's `(buckets, heads)` table, for sequences of up to `max_len` tokens.
    pub fn new(table: &Tensor, max_len: usize) -> Result<Self> {
        let (buckets, heads) = table.dims2()?;
        let table = table.to_dtype(DType::F32)?.to_vec2::<f32>()?;
        let width = 2 * max_len - 1;
        let mut rows = vec![0f32; heads * width];
        for offset in 0..width {
            let bucket = relative_bucket(offset as i64 - (max_len as i64 - 1), buckets);
            for (head, &value) in table[bucket].iter().enumerate() {
                rows[head * width + offset] = value;
            }
        }
        Ok(Self { heads, max_len, rows, blocks: Mutex::default() })
    }

    pub fn heads(&self) -> usize {
        self.heads
    }

    /// The biases of query `query` against keys `0..len` for `head`.
    pub fn row(&self, head: usize, query: usize, len: usize) -> &[f32] {
        assert!(len <= self.max_len && query < len && head < self.heads, "a row inside the table");
        let width = 2 * self.max_len - 1;
        let start = head * width + self.max_len - 1 - query;
        &self.rows[start..start + len]
    }

    /// `(1, heads, len, len)` on `device` in `dtype`, added to a slot's scores. Kept once made: a
    /// model (one device, one dtype) owns its bias.
    pub fn block(&self, len: usize, device: &Device, dtype: DType) -> Result<Tensor> {
        let mut blocks = self.blocks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(block) = blocks.get(&len).filter(|b| b.dtype() == dtype && b.device().same_device(device)) {
            return Ok(block.clone());
        }
        let mut values = Vec::with_capacity(self.heads * len * len);
        for head in 0..self.heads {
            for query in 0..len {
                values.extend_from_slice(self.row(head, query, len));
            }
        }
        let block = Tensor::from_vec(values, (1, self.heads, len, len), device)?.to_dtype(dtype)?;
        blocks.insert(len, block.clone());
        Ok(block)
    }
}

/// MPNet's name for the weight BERT's loader asks for by `name` (unchanged where they agree).
pub fn bert_name(name: &str) -> String {
    const MAP: [(&str, &str); 6] = [
        ("attention.self.query.", "attention.attn.q."),
        ("attention.self.key.", "attention.attn.k."),
        ("attention.self.value.", "attention.attn.v."),
        ("attention.output.dense.", "attention.attn.o."),
        ("attention.output.LayerNorm.", "attention.LayerNorm."),
        ("embeddings.token_type_embeddings.", "embeddings.token_type_embeddings_absent_in_mpnet."),
    ];
    for (bert, mpnet) in MAP {
        if let Some(at) = name.find(bert) {
            return format!("{}{mpnet}{}", &name[..at], &name[at + bert.len()..]);
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_near_the_query_and_logarithmic_beyond() {
        // Some of the values PyTorch's MPNetEncoder.relative_position_bucket gives, key − query →
        // bucket (tests/mpnet.rs checks every distance of a 384-token sequence against them).
        let expected: [(i64, usize); 23] = [
            (0, 0),
            (-1, 1),
            (-7, 7),
            (-8, 8),
            (-11, 8),
            (-12, 9),
            (-16, 10),
            (-22, 10),
            (-32, 12),
            (-45, 12),
            (-64, 14),
            (-127, 15),
            (-128, 15),
            (-383, 15),
            (1, 17),
            (7, 23),
            (8, 24),
            (15, 25),
            (16, 26),
            (31, 27),
            (32, 28),
            (128, 31),
            (383, 31),
        ];
        for (relative, bucket) in expected {
            assert_eq!(relative_bucket(relative, 32), bucket, "distance {relative}");
        }
    }

    #[test]
    fn a_row_is_the_bias_of_each_key_for_one_query() {
        // Two heads, 32 buckets: head 0's bias is the bucket's number, head 1's its negative.
        let table: Vec<f32> = (0..32).flat_map(|b| [b as f32, -(b as f32)]).collect();
        let table = Tensor::from_vec(table, (32, 2), &Device::Cpu).unwrap();
        let bias = RelativeBias::new(&table, 16).unwrap();
        let row = bias.row(0, 3, 6);
        let want: Vec<f32> = (0..6).map(|key| relative_bucket(key - 3, 32) as f32).collect();
        assert_eq!(row, want.as_slice());
        assert_eq!(bias.row(1, 0, 2), &[-0.0, -(relative_bucket(1, 32) as f32)]);
        let block = bias.block(4, &Device::Cpu, DType::F32).unwrap().squeeze(0).unwrap().to_vec3::<f32>().unwrap();
        assert_eq!(block.len(), 2);
        assert_eq!(block[0][2], bias.row(0, 2, 4).to_vec());
        assert_eq!(block[1][3], bias.row(1, 3, 4).to_vec());
    }

    #[test]
    fn bert_names_become_mpnet_names() {
        assert_eq!(bert_name("encoder.layer.3.attention.self.query.weight"), "encoder.layer.3.attention.attn.q.weight");
        assert_eq!(bert_name("encoder.layer.11.attention.output.dense.bias"), "encoder.layer.11.attention.attn.o.bias");
        assert_eq!(bert_name("encoder.layer.0.attention.output.LayerNorm.weight"), "encoder.layer.0.attention.LayerNorm.weight");
        assert_eq!(bert_name("encoder.layer.0.output.LayerNorm.weight"), "encoder.layer.0.output.LayerNorm.weight");
        assert_eq!(bert_name("embeddings.word_embeddings.weight"), "embeddings.word_embeddings.weight");
    }
}
