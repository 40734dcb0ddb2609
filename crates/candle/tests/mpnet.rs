//! all-mpnet-base-v2 on the BERT encoder, against sentence-transformers.
//!
//! `tests/data/mpnet_reference.json` holds, for ten texts (one word to 332 tokens, past the
//! distance where MPNet's position buckets stop growing), the token ids and the normalised vectors
//! sentence-transformers 6.3 gives on the CPU in f32, and PyTorch's position bucket for every
//! distance of a 384-token sequence (made by bench/mpnet/reference.py). The model is on demand:
//! scripts/test.sh fetches it (`warpfold models fetch all-mpnet-base-v2`); elsewhere these tests say
//! it is missing and pass, except in CI (`CI` set), where it must be there.

use std::path::PathBuf;

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use serde::Deserialize;
use warpfold_backend::model_dir::{ModelDir, Pooling};
use warpfold_backend::{Backend, Bin};
use warpfold_candle::bert::{self, BertModel, CpuPrecision};
use warpfold_candle::mpnet::relative_bucket;
use warpfold_candle::BertBackend;

#[derive(Deserialize)]
struct Reference {
    max_seq_length: usize,
    buckets: Buckets,
    texts: Vec<ReferenceText>,
}

#[derive(Deserialize)]
struct Buckets {
    distances: Vec<i64>,
    buckets: Vec<usize>,
}

#[derive(Deserialize)]
struct ReferenceText {
    text: String,
    ids: Vec<u32>,
    vector: Vec<f32>,
}

fn reference() -> Reference {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/mpnet_reference.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The installed model's folder, or `None` (with the reason on stderr) where it is not installed
/// outside CI.
fn model_dir() -> Option<ModelDir> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/all-mpnet-base-v2");
    if !dir.join("model.safetensors").is_file() {
        assert!(std::env::var_os("CI").is_none(), "{} is missing in CI: scripts/test.sh fetches it", dir.display());
        eprintln!("all-mpnet-base-v2 is not installed at {}: run `warpfold models fetch all-mpnet-base-v2`", dir.display());
        return None;
    }
    Some(ModelDir::open(&dir).unwrap())
}

fn tokenizer(dir: &ModelDir) -> tokenizers::Tokenizer {
    let mut t = tokenizers::Tokenizer::from_file(&dir.tokenizer).unwrap();
    t.with_truncation(None).unwrap();
    t.with_padding(None);
    t
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
fn position_buckets_are_pytorchs_for_every_distance_of_a_long_sequence() {
    let buckets = reference().buckets;
    assert_eq!(buckets.distances.len(), 767);
    for (&distance, &bucket) in buckets.distances.iter().zip(&buckets.buckets) {
        assert_eq!(relative_bucket(distance, 32), bucket, "distance {distance}");
    }
}

#[test]
fn the_folder_reads_as_mpnet_with_mean_pooling_and_384_tokens() {
    let Some(dir) = model_dir() else { return };
    assert_eq!((dir.pooling, dir.max_seq_length, dir.name.as_str()), (Pooling::Mean, Some(384), "all-mpnet-base-v2"));
    let backend = BertBackend::load(&dir, &Device::Cpu, CpuPrecision::F32).unwrap();
    let info = backend.info();
    assert_eq!((info.output_dim, info.max_sequence_tokens, info.pad_token_id), (768, 384, 1));
    assert!(info.attention.contains("relative-position bias"), "{}", info.attention);
    assert_eq!(reference().max_seq_length, 384);
}

/// Packed as the engine packs a bin on the CPU: slots rounded up to 16 tokens with the pad id.
fn packed(seqs: &[Vec<u32>]) -> Bin {
    Bin::packed(seqs, 16, 1)
}

#[test]
fn token_ids_and_packed_vectors_match_sentence_transformers() {
    let Some(dir) = model_dir() else { return };
    let reference = reference();
    let tokenizer = tokenizer(&dir);
    let mut seqs = Vec::new();
    for t in &reference.texts {
        let ids = tokenizer.encode_fast(t.text.as_str(), true).unwrap().get_ids().to_vec();
        assert_eq!(ids, t.ids, "{:?}", t.text);
        seqs.push(ids);
    }
    // All ten in one bin, through the fused CPU layers the app runs.
    let mut backend = BertBackend::load(&dir, &Device::Cpu, CpuPrecision::F32).unwrap();
    let vectors = backend.embed(&packed(&seqs)).unwrap();
    for (t, v) in reference.texts.iter().zip(&vectors) {
        let cos = cosine(v, &t.vector);
        eprintln!("fused CPU layers: cosine {cos:.6} ({} tokens) {:.40?}", t.ids.len(), t.text);
        assert!(cos >= 0.9999, "cosine {cos} with sentence-transformers' vector for {:?}", t.text);
    }
}

/// The layers CUDA runs (masked attention per run of equal slots, with the bias and the pad keys'
/// mask as tensors), here on the CPU with the weights in `dtype`: every text's cosine with
/// sentence-transformers' vector is at least `min`.
fn candle_op_layers_agree(dtype: DType, min: f32) {
    let Some(dir) = model_dir() else { return };
    let reference = reference();
    let cfg: bert::Config = serde_json::from_str(&std::fs::read_to_string(&dir.config).unwrap()).unwrap();
    cfg.check().unwrap();
    // SAFETY: the weights are memory-mapped read-only and not changed while the test runs.
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&dir.weights, dtype, &Device::Cpu).unwrap() };
    let model = BertModel::new(&cfg, dir.pooling, vb).unwrap();
    let tokenizer = tokenizer(&dir);
    let seqs: Vec<Vec<u32>> =
        reference.texts.iter().map(|t| tokenizer.encode_fast(t.text.as_str(), true).unwrap().get_ids().to_vec()).collect();
    let bin = packed(&seqs);
    assert!(bin.real_tokens() < bin.computed_tokens(), "slots with pad keys to mask");
    let flat = model.fetch(&model.embed(&bin).unwrap()).unwrap();
    for (t, v) in reference.texts.iter().zip(flat.chunks(768)) {
        let cos = cosine(v, &t.vector);
        assert!(cos >= min, "candle-op layers in {dtype:?}: cosine {cos} for {:?}", t.text);
    }
}

#[test]
fn the_candle_op_layers_give_the_same_vectors() {
    candle_op_layers_agree(DType::F32, 0.9999);
}

#[test]
fn the_candle_op_layers_run_in_half_precision_as_on_a_gpu() {
    // CUDA runs MPNet in f16 (FlashAttention-2 cannot add its bias, so its scores, mask and bias
    // are candle tensors of the weights' type).
    candle_op_layers_agree(DType::F16, 0.999);
}
