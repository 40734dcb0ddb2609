use std::path::PathBuf;

use warpfold_candle::BertBackend;
use warpfold_engine::models::ModelDir;
use warpfold_engine::tokenize::TextEncoder;

/// The real `warpfold` binary, with the test models and quiet logs.
pub fn warpfold() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_warpfold"));
    cmd.env("WARPFOLD_MODELS_DIR", repo().join("models")).env("WARPFOLD_LOG", "off");
    cmd
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The default model as `scripts/test.sh` fetches it.
pub fn minilm_dir() -> ModelDir {
    let dir = repo().join("models/all-MiniLM-L6-v2");
    ModelDir::open(&dir).unwrap_or_else(|e| {
        panic!("{e}\nThe integration tests need the default model: run `bash scripts/test.sh` or `warpfold models fetch`.")
    })
}

pub fn load(dir: &ModelDir) -> (BertBackend, TextEncoder) {
    let backend = BertBackend::load(dir, &candle_core::Device::Cpu).expect("model loads");
    let max = warpfold_backend::Backend::info(&backend).max_sequence_tokens;
    let encoder = TextEncoder::from_file(&dir.tokenizer, max).expect("tokenizer loads");
    (backend, encoder)
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}
