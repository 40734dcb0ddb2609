use std::path::PathBuf;

use warpfold_candle::BertBackend;
use warpfold_engine::tokenize::TextEncoder;
use warpfold_runtime::models::ModelDir;

/// The real `warpfold` binary, with the test models and quiet logs.
pub fn warpfold() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_warpfold"));
    cmd.env("WARPFOLD_MODELS_DIR", repo().join("models")).env("WARPFOLD_LOG", "off");
    cmd
}

/// The repository's root (the test binary is the `warpfold` package's, in crates/cli).
pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).canonicalize().expect("the repository's root")
}

/// The default model as `scripts/test.sh` fetches it.
pub fn minilm_dir() -> ModelDir {
    let dir = repo().join("models/all-MiniLM-L6-v2");
    ModelDir::open(&dir).unwrap_or_else(|e| {
        panic!("{e}\nThe integration tests need the default model: run `bash scripts/test.sh` or `warpfold models fetch`.")
    })
}

pub fn load(dir: &ModelDir) -> (BertBackend, TextEncoder) {
    let backend = BertBackend::load(dir, &candle_core::Device::Cpu, warpfold_candle::bert::CpuPrecision::F32).expect("model loads");
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

/// A whole index's chunks: (path, ordinal) -> (text, first page, last page, char start, char end,
/// vector), read with every chunk's embedding.
pub type IndexDump = std::collections::BTreeMap<(String, i64), (String, i64, i64, i64, i64, Vec<f32>)>;

pub fn dump_index(db: &std::path::Path) -> IndexDump {
    let store = warpfold_index::store::Store::open_read_only(db).unwrap();
    let mut stmt = store
        .connection()
        .prepare(
            "SELECT d.path, c.ordinal, c.text, c.page_start, c.page_end, c.char_start, c.char_end, e.vector
             FROM chunks c JOIN documents d ON d.id = c.document_id JOIN embeddings e ON e.text_hash = c.text_hash",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                (r.get::<_, String>(0)?, r.get(1)?),
                (r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, warpfold_index::store::decode_vector(&r.get::<_, Vec<u8>>(7)?)),
            ))
        })
        .unwrap()
        .collect::<Result<IndexDump, _>>()
        .unwrap();
    let chunks: i64 = store.connection().query_row("SELECT count(*) FROM chunks", [], |r| r.get(0)).unwrap();
    assert_eq!(chunks as usize, rows.len(), "every chunk has exactly one embedding row");
    rows
}

/// The same chunks in the same places, and every vector within 1e-5.
pub fn assert_same_index(a: &IndexDump, b: &IndexDump) {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    let mut worst = 0f32;
    for (key, va) in a {
        let vb = &b[key];
        assert_eq!((&va.0, va.1, va.2, va.3, va.4), (&vb.0, vb.1, vb.2, vb.3, vb.4), "{key:?}");
        worst = worst.max(max_abs_diff(&va.5, &vb.5));
    }
    assert!(worst < 1e-5, "largest vector difference {worst}");
}
