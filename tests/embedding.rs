//! The embedding path on the real model: packing must not change any result, and the results must
//! be sentence-transformers' own.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use warpfold_backend::{Backend, SequenceTag};
use warpfold_bench::corpus::{self, words, CorpusKind, Rng};
use warpfold_engine::embed::Embedder;
use warpfold_engine::tape::{packed_bin, padded_bin, TokenSequence};
use warpfold_engine::tokenize::TextEncoder;
use warpfold_engine::{Batching, Engine, Lane, SchedulerConfig};
use warpfold_runtime::models::ModelDir;

use crate::common::{cosine, load, max_abs_diff, minilm_dir, repo};

/// Texts from 1 to ~250 tokens: short queries next to full chunks, the mix packing must survive.
fn varied_texts() -> Vec<String> {
    let mut rng = Rng::new(7);
    let mut texts: Vec<String> = [1, 2, 5, 13, 30, 64, 100, 150, 180].iter().map(|&n| words(&mut rng, n)).collect();
    texts.extend((0..15).map(|_| {
        let n = rng.range(1, 185);
        words(&mut rng, n)
    }));
    texts.push("Hello world".into());
    texts
}

fn check_packed_equals_alone(dir: &ModelDir, texts: &[String]) {
    let (mut backend, encoder) = load(dir);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids: Vec<Vec<u32>> = encoder.encode_batch(&refs).into_iter().map(Result::unwrap).collect();
    let pad = backend.info().pad_token_id;
    let seqs = |range: std::ops::Range<usize>| {
        let start = range.start;
        ids[range].iter().enumerate().map(move |(i, ids)| TokenSequence { tag: SequenceTag { request: 0, index: (start + i) as u32 }, ids })
    };

    let alone: Vec<Vec<f32>> =
        (0..ids.len()).map(|i| backend.embed(&packed_bin(seqs(i..i + 1), 16, 1 << 16, pad)).unwrap().remove(0)).collect();
    // Everything in one packed bin, aligned to 16, then unaligned.
    for align in [16, 1] {
        let mixed = backend.embed(&packed_bin(seqs(0..ids.len()), align, 1 << 16, pad)).unwrap();
        for (i, (m, a)) in mixed.iter().zip(&alone).enumerate() {
            let d = max_abs_diff(m, a);
            assert!(d <= 1e-5, "text {i} ({} tokens), align {align}: packed differs from alone by {d}", ids[i].len());
        }
    }
    // The padded baseline, in batches of 8.
    for start in (0..ids.len()).step_by(8) {
        let end = (start + 8).min(ids.len());
        let padded = backend.embed(&padded_bin(seqs(start..end), pad)).unwrap();
        for (i, p) in (start..end).zip(&padded) {
            let d = max_abs_diff(p, &alone[i]);
            assert!(d <= 1e-5, "text {i}: padded differs from alone by {d}");
        }
    }
}

#[test]
fn each_text_embeds_the_same_alone_packed_and_padded() {
    check_packed_equals_alone(&minilm_dir(), &varied_texts());
}

#[test]
fn the_scheduler_path_gives_the_same_vectors_packed_and_padded() {
    let dir = minilm_dir();
    let texts = varied_texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let run = |batching| {
        let (backend, encoder) = load(&dir);
        let cfg = SchedulerConfig { batching, bin_tokens: 1024, ..Default::default() };
        let embedder = Embedder { encoder, engine: Engine::start(backend, cfg) };
        embedder.embed_texts(Lane::Bulk, &refs).into_iter().map(Result::unwrap).collect::<Vec<_>>()
    };
    let packed = run(Batching::Packed);
    let padded = run(Batching::Padded { batch_size: 8 });
    for (i, (a, b)) in packed.iter().zip(&padded).enumerate() {
        assert!(max_abs_diff(a, b) <= 1e-5, "text {i}");
    }
}

#[test]
fn embeddings_match_sentence_transformers() {
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("tests/fixtures/minilm_reference.json")).unwrap()).unwrap();
    let items = fixture["items"].as_array().unwrap();
    assert!(items.len() >= 20);
    let texts: Vec<&str> = items.iter().map(|i| i["text"].as_str().unwrap()).collect();
    let (backend, encoder) = load(&minilm_dir());
    let embedder = Embedder { encoder, engine: Engine::start(backend, SchedulerConfig::default()) };
    let ours = embedder.embed_texts(Lane::Bulk, &texts);
    // A search query goes through its own path (the interactive lane, written as a query): the
    // same vector.
    let query = embedder.embed_query(texts[0]).unwrap();
    let reference: Vec<f32> = items[0]["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
    assert!(cosine(&query, &reference) >= 0.9999, "a query's vector: cosine {}", cosine(&query, &reference));
    for (item, ours) in items.iter().zip(ours) {
        let reference: Vec<f32> = item["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
        let ours = ours.unwrap();
        let c = cosine(&ours, &reference);
        assert!(c >= 0.9999, "{:?}: cosine {c} against sentence-transformers", item["text"]);
    }
}

#[test]
fn over_long_text_is_an_error_naming_its_length_and_others_still_embed() {
    let (backend, encoder) = load(&minilm_dir());
    let embedder = Embedder { encoder, engine: Engine::start(backend, SchedulerConfig::default()) };
    let long = words(&mut Rng::new(3), 400);
    let results = embedder.embed_texts(Lane::Bulk, &["first", &long, "", "last"]);
    assert_eq!(results[0].as_ref().unwrap().len(), 384);
    let err = results[1].as_ref().unwrap_err().to_string();
    assert!(err.contains("at most 256") && err.contains("tokens long"), "{err}");
    assert_eq!(results[2].as_ref().unwrap_err().to_string(), "the text is empty");
    assert_eq!(results[3].as_ref().unwrap().len(), 384);
}

#[test]
fn a_token_id_past_the_vocabulary_is_an_error_naming_it() {
    // The device's gathers read the row an id names (one kernel for the embeddings on CUDA): an id
    // past the table must be refused before any device work, not read outside it.
    let (mut backend, _) = load(&minilm_dir());
    let (good, bad) = ([101u32, 7592, 102], [101u32, 30_522, 102]);
    let tag = |index| SequenceTag { request: 0, index };
    let seqs = [TokenSequence { tag: tag(0), ids: &good }, TokenSequence { tag: tag(1), ids: &bad }];
    let err = backend.embed(&packed_bin(seqs.iter().cloned(), 16, 1 << 10, 0)).unwrap_err().to_string();
    assert!(err.contains("token id 30522") && err.contains("vocabulary of 30522"), "{err}");
    assert_eq!(backend.embed(&packed_bin(seqs[..1].iter().cloned(), 16, 1 << 10, 0)).unwrap()[0].len(), 384);
}

/// Writes a small random BERT in the layout BGE/GTE checkpoints use: a `bert.` prefix on every
/// weight, CLS pooling, a 512-position limit and no sentence-transformers max_seq_length.
fn write_bge_style_model(dir: &Path) {
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    let (h, inter, layers, vocab) = (64usize, 128usize, 2usize, 30522usize);
    std::fs::write(
        dir.join("config.json"),
        serde_json::json!({
            "architectures": ["BertModel"], "model_type": "bert", "vocab_size": vocab, "hidden_size": h,
            "num_hidden_layers": layers, "num_attention_heads": 4, "intermediate_size": inter,
            "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2,
            "layer_norm_eps": 1e-12, "pad_token_id": 0, "position_embedding_type": "absolute"
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("1_Pooling/config.json"), r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#).unwrap();
    std::fs::copy(minilm_dir().tokenizer, dir.join("tokenizer.json")).unwrap();
    let dev = Device::Cpu;
    let rand = |shape: &[usize]| Tensor::randn(0f32, 0.05, shape, &dev).unwrap().to_dtype(DType::F32).unwrap();
    let mut t = std::collections::HashMap::new();
    t.insert("bert.embeddings.word_embeddings.weight".to_string(), rand(&[vocab, h]));
    t.insert("bert.embeddings.position_embeddings.weight".into(), rand(&[512, h]));
    t.insert("bert.embeddings.token_type_embeddings.weight".into(), rand(&[2, h]));
    t.insert("bert.embeddings.LayerNorm.weight".into(), Tensor::ones(h, DType::F32, &dev).unwrap());
    t.insert("bert.embeddings.LayerNorm.bias".into(), Tensor::zeros(h, DType::F32, &dev).unwrap());
    for l in 0..layers {
        let p = format!("bert.encoder.layer.{l}");
        for (name, out, inp) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", inter, h),
            ("output.dense", h, inter),
        ] {
            t.insert(format!("{p}.{name}.weight"), rand(&[out, inp]));
            t.insert(format!("{p}.{name}.bias"), rand(&[out]));
        }
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
            t.insert(format!("{p}.{norm}.weight"), Tensor::ones(h, DType::F32, &dev).unwrap());
            t.insert(format!("{p}.{norm}.bias"), Tensor::zeros(h, DType::F32, &dev).unwrap());
        }
    }
    candle_core::safetensors::save(&t, dir.join("model.safetensors")).unwrap();
}

#[test]
fn a_bge_style_checkpoint_loads_and_packs_exactly() {
    let dir = std::env::temp_dir().join(format!("warpfold-bge-{}", std::process::id()));
    write_bge_style_model(&dir);
    let model = ModelDir::open(&dir).unwrap();
    assert_eq!(model.pooling, warpfold_candle::Pooling::Cls);
    assert_eq!(model.max_seq_length, None);
    let (backend, _) = load(&model);
    assert_eq!(backend.info().max_sequence_tokens, 512);
    assert_eq!(backend.info().output_dim, 64);
    check_packed_equals_alone(&model, &varied_texts());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The library alone, and the encoder as warpfold builds it (BERT's ASCII path here, the library
/// for the rest), on the default model's tokenizer and its limit of 256 tokens.
fn both_tokenizers() -> (TextEncoder, TextEncoder) {
    let dir = minilm_dir();
    let ours = TextEncoder::from_file(&dir.tokenizer, 256).unwrap();
    assert!(ours.has_fast_path(), "all-MiniLM-L6-v2's tokenizer is BERT's: the ASCII path must be on");
    (ours, TextEncoder::from_file(&dir.tokenizer, 256).unwrap().library_only())
}

fn assert_same_ids(ours: &TextEncoder, library: &TextEncoder, texts: &[String]) {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (fast, slow) = (ours.encode_batch(&refs), library.encode_batch(&refs));
    for ((text, f), s) in texts.iter().zip(fast).zip(slow) {
        assert_eq!(f, s, "ids differ for {text:?}");
    }
}

#[test]
fn the_ascii_wordpiece_gives_the_library_ids_on_both_benchmark_corpora() {
    let (ours, library) = both_tokenizers();
    for kind in [CorpusKind::Stress, CorpusKind::Production] {
        let texts: Vec<String> = corpus::generate(kind, 48, 11)
            .iter()
            .flat_map(|doc| library.chunk(doc).unwrap().into_iter().map(move |c| doc[c.start..c.end].to_string()))
            .collect();
        assert!(texts.len() > 100, "{} chunks", texts.len());
        assert_same_ids(&ours, &library, &texts);
    }
}

#[test]
fn the_ascii_wordpiece_gives_the_library_ids_on_every_kind_of_character() {
    // Each fragment is something the fast path treats in its own way: words in and out of the
    // vocabulary, a word past WordPiece's 100 characters, punctuation, control characters (dropped,
    // joining their neighbours; \x0b and \x0c are controls, not spaces), ASCII and Unicode spaces,
    // accents composed and combining, CJK, ligatures, emoji, the replacement character, special
    // tokens' strings in any case (and with the Kelvin sign, which lowercases to `k`), the
    // continuing-subword prefix itself.
    #[rustfmt::skip]
    let fragments = [
        "the", "Tokenization", "UNAFFABLE", "qzxqvj", "x", "42", "3.14", "e-mail", "don't", "##ing", "#", "...", "(a)", "[", "]",
        "\u{1}", "\u{b}", "\u{c}", "\u{7f}", "\0", "a\u{1}b", " ", "  ", "\t", "\n", "\r\n", "\u{a0}", "\u{2003}", "\u{3000}",
        "café", "CAFE\u{301}", "naïve", "Ärger", "中文字", "ﬁnd", "😀", "\u{fffd}", "\u{200b}", "’s", "—", "[SEP]", "[cls]",
        "x[MASK]y", "[UNK]", "<s>", "ß", "İstanbul", "ǅ", "[Sep]", "a[pAd]b", "[UN\u{212a}]",
    ];
    let long = "a".repeat(101);
    let mut rng = Rng::new(17);
    let mut texts: Vec<String> = fragments.iter().map(|f| format!("{f} word{f}word")).collect();
    texts.push(format!("before {long} after {}", "b".repeat(100)));
    for _ in 0..3000 {
        let n = rng.range(1, 24);
        let text: String = (0..n)
            .map(|_| match rng.range(0, 3) {
                0 => fragments[rng.range(0, fragments.len() - 1)],
                1 => " ",
                _ => ["word", "Packing", "gpu", "zebra", "ANTI", "disestablishment"][rng.range(0, 5)],
            })
            .collect();
        texts.push(text);
    }
    let (ours, library) = both_tokenizers();
    assert_same_ids(&ours, &library, &texts);
}
