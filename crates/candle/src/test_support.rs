//! Test helpers shared by this crate's tests and, with the `test-support` feature, by the crates
//! above it (generation policy in warpfold-summarize): tiny Llama/Qwen2 configurations, seeded
//! random weights under the Hugging Face names, packed bins laid out as the engine lays them.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use warpfold_backend::Bin;

use crate::generate::{KvPool, SeqCache};
use crate::llama::{Config, Family, LlamaModel};

/// Lays sequences out as the engine does: slots rounded up to `align`, pad id 0 at position 0.
pub fn bin_of(seqs: &[Vec<u32>], align: usize) -> Bin {
    Bin::packed(seqs, align, 0)
}
/// xorshift64*: reproducible numbers without a rand dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        bits as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    pub fn tensor(&mut self, shape: &[usize], scale: f32, offset: f32) -> Tensor {
        let n = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| offset + scale * self.next_f32()).collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }
    pub fn ids(&mut self, len: usize, vocab: usize) -> Vec<u32> {
        (0..len).map(|_| ((self.next_f32() + 1.0) * 0.5 * vocab as f32) as u32 % vocab as u32).collect()
    }
}
pub fn tiny_config(extra: &str) -> Config {
    let json = format!(
        r#"{{"hidden_size":64,"intermediate_size":128,"num_hidden_layers":3,"num_attention_heads":4,
            "num_key_value_heads":2,"vocab_size":97,"rms_norm_eps":1e-6,"rope_theta":10000.0,
            "max_position_embeddings":256,{extra}}}"#
    );
    serde_json::from_str(&json).unwrap()
}
/// Random weights under Hugging Face names, large enough that attention is far from uniform.
pub fn random_model(cfg: &Config, seed: u64) -> LlamaModel {
    LlamaModel::new(cfg, VarBuilder::from_tensors(random_weights(cfg, seed), DType::F32, &Device::Cpu)).unwrap()
}
/// Seeded random weights of `cfg` under the Hugging Face names, on the CPU in f32.
pub fn random_weights(cfg: &Config, seed: u64) -> HashMap<String, Tensor> {
    let mut rng = Rng(seed);
    let (h, i, v) = (cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size);
    let (q, kv) = (cfg.num_attention_heads * cfg.head_dim(), cfg.kv_heads() * cfg.head_dim());
    let qwen = cfg.family().unwrap() == Family::Qwen2;
    let mut w = HashMap::new();
    let mut lin = |w: &mut HashMap<String, Tensor>, name: String, out: usize, inp: usize, bias: bool| {
        w.insert(format!("{name}.weight"), rng.tensor(&[out, inp], 1.7 / (inp as f32).sqrt(), 0.0));
        if bias {
            w.insert(format!("{name}.bias"), rng.tensor(&[out], 0.3, 0.0));
        }
    };
    for l in 0..cfg.num_hidden_layers {
        let p = format!("model.layers.{l}");
        lin(&mut w, format!("{p}.self_attn.q_proj"), q, h, qwen || cfg.attention_bias);
        lin(&mut w, format!("{p}.self_attn.k_proj"), kv, h, qwen || cfg.attention_bias);
        lin(&mut w, format!("{p}.self_attn.v_proj"), kv, h, qwen || cfg.attention_bias);
        lin(&mut w, format!("{p}.self_attn.o_proj"), h, q, !qwen && cfg.attention_bias);
        lin(&mut w, format!("{p}.mlp.gate_proj"), i, h, cfg.mlp_bias);
        lin(&mut w, format!("{p}.mlp.up_proj"), i, h, cfg.mlp_bias);
        lin(&mut w, format!("{p}.mlp.down_proj"), h, i, cfg.mlp_bias);
    }
    if !cfg.tie_word_embeddings {
        lin(&mut w, "lm_head".into(), v, h, false);
    }
    let mut rng = Rng(seed ^ 0x9e37_79b9);
    w.insert("model.embed_tokens.weight".into(), rng.tensor(&[v, h], 1.0, 0.0));
    w.insert("model.norm.weight".into(), rng.tensor(&[h], 0.2, 1.0));
    for l in 0..cfg.num_hidden_layers {
        w.insert(format!("model.layers.{l}.input_layernorm.weight"), rng.tensor(&[h], 0.2, 1.0));
        w.insert(format!("model.layers.{l}.post_attention_layernorm.weight"), rng.tensor(&[h], 0.2, 1.0));
    }
    w
}
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}
pub fn variants() -> Vec<(&'static str, Config)> {
    vec![
        ("llama", tiny_config(r#""model_type":"llama""#)),
        ("qwen2 (q/k/v bias, tied head)", tiny_config(r#""model_type":"qwen2","tie_word_embeddings":true"#)),
        (
            "llama3 rope scaling, head_dim 32, attention and mlp bias",
            tiny_config(
                r#""model_type":"llama","head_dim":32,"attention_bias":true,"mlp_bias":true,
                "rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,
                "high_freq_factor":4.0,"original_max_position_embeddings":64}"#,
            ),
        ),
    ]
}

/// Decodes the rest of each sequence of `full` after its prompt (its first `prompt_lens[i]` tokens,
/// already prefilled into `caches`), teacher-forced: each step feeds every live sequence its next
/// true token, all in one batch, and hands `row` the sequence, the position of the token fed, the
/// step's logits for it and its cache after the step. A sequence that has fed its last token
/// leaves the batch, and its cache goes to `finished` (with the pool) at the next step. Returns the
/// number of steps.
pub fn decode_teacher_forced(
    model: &LlamaModel,
    pool: &mut KvPool,
    full: &[Vec<u32>],
    prompt_lens: &[usize],
    caches: &mut [SeqCache],
    mut finished: impl FnMut(&mut KvPool, SeqCache),
    mut row: impl FnMut(usize, usize, Vec<f32>, &SeqCache),
) -> usize {
    let mut step = 0;
    loop {
        for i in (0..full.len()).filter(|&i| prompt_lens[i] + step == full[i].len()) {
            finished(pool, std::mem::take(&mut caches[i]));
        }
        let live: Vec<usize> = (0..full.len()).filter(|&i| prompt_lens[i] + step < full[i].len()).collect();
        if live.is_empty() {
            return step;
        }
        let tokens: Vec<u32> = live.iter().map(|&i| full[i][prompt_lens[i] + step]).collect();
        let mut batch: Vec<SeqCache> = live.iter().map(|&i| std::mem::take(&mut caches[i])).collect();
        let out = model.decode_step(pool, &tokens, &mut batch).unwrap().to_vec2::<f32>().unwrap();
        for ((&i, cache), logits) in live.iter().zip(batch).zip(out) {
            row(i, prompt_lens[i] + step, logits, &cache);
            caches[i] = cache;
        }
        step += 1;
    }
}
