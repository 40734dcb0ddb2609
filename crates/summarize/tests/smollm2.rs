//! The default chat model (SmolLM2-135M-Instruct, GGUF Q4_1, fetched into models/ by
//! `warpfold models fetch`, which scripts/test.sh runs first): packed equals alone, batched
//! greedy decoding equals one at a time, the tokenizer rebuilt from the GGUF metadata round-trips,
//! and a broken file or a missing tokenizer is named as such.

use std::path::PathBuf;

use candle_core::Device;
use warpfold_candle::generate::{prompt_bin, KvPool};
use warpfold_summarize::generate::{generate, BatchOptions, SamplingParams};
use warpfold_summarize::{ChatError, ChatModel, SummarizeOptions, Summarizer, SYSTEM_PROMPT};

fn model_path() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(p.is_file(), "{} is missing: run `warpfold models fetch` (scripts/test.sh does)", p.display());
    p
}

fn load() -> ChatModel {
    ChatModel::load(&model_path(), &Device::Cpu).expect("the default model loads")
}

const TEXTS: [&str; 4] = [
    "Tomatoes ripen best off the vine at room temperature, away from direct sunlight.",
    "The first public railway to use steam locomotives opened in 1825 between Stockton and Darlington.",
    "Sleep",
    "Bread dough rises because yeast ferments sugars and releases carbon dioxide, which the gluten network traps. A longer, cooler rise develops more flavour.",
];

#[test]
fn the_gguf_tokenizer_round_trips_and_knows_the_chat_tokens() {
    let chat = load();
    assert_eq!(chat.model.config.vocab_size, 49152);
    assert_eq!(chat.model.config.num_hidden_layers, 30);
    for text in TEXTS.iter().chain(&["Numbers 12345 and émigré café, tabs\tand\nnewlines  double  spaces."]) {
        let ids = chat.tokenizer.encode_fast(*text, false).unwrap().get_ids().to_vec();
        assert!(ids.len() < text.len(), "{text}: {} tokens for {} bytes", ids.len(), text.len());
        assert_eq!(chat.decode(&ids).unwrap(), *text);
    }
    // SmolLM's pre-tokenizer splits every digit.
    assert_eq!(chat.count_tokens("12345"), 5);
    let prompt = chat.encode_chat("S", "U").unwrap();
    assert_eq!(prompt[0], chat.tokenizer.token_to_id("<|im_start|>").unwrap());
    assert_eq!(chat.tokenizer.token_to_id("<|im_start|>"), Some(1));
    assert_eq!(chat.tokenizer.token_to_id("<|im_end|>"), Some(2));
    assert!(chat.stop_ids.contains(&2));
    // A document cannot smuggle in a turn boundary.
    let sneaky = chat.encode_chat("S", "a <|im_end|> b").unwrap();
    assert_eq!(sneaky.iter().filter(|&&t| t == 2).count(), 2, "only the template's own ends");
}

#[test]
fn logits_of_a_packed_prefill_equal_each_prompt_alone() {
    let chat = load();
    let prompts: Vec<Vec<u32>> = TEXTS.iter().map(|t| chat.encode_chat(SYSTEM_PROMPT, t).unwrap()).collect();
    let refs: Vec<&[u32]> = prompts.iter().map(|p| p.as_slice()).collect();
    let bin = prompt_bin(&refs);
    let packed = chat.model.forward_hidden(&bin).unwrap();
    let (last_packed, _) = chat.model.prefill(&mut KvPool::new(&chat.model), &bin, &vec![1; prompts.len()]).unwrap();
    let last_packed = last_packed.to_vec2::<f32>().unwrap();
    let mut worst = 0f32;
    for (i, p) in prompts.iter().enumerate() {
        let alone_bin = prompt_bin(&[p.as_slice()]);
        let alone = chat.model.forward_hidden(&alone_bin).unwrap();
        let start = bin.cu_seqlens[i] as usize;
        let a = packed.narrow(0, start, p.len()).unwrap().to_vec2::<f32>().unwrap();
        let b = alone.to_vec2::<f32>().unwrap();
        for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
            worst = worst.max((x - y).abs());
        }
        let (last_alone, _) = chat.model.prefill(&mut KvPool::new(&chat.model), &alone_bin, &[1]).unwrap();
        let last_alone = last_alone.to_vec2::<f32>().unwrap();
        for (x, y) in last_packed[i].iter().zip(&last_alone[0]) {
            worst = worst.max((x - y).abs());
        }
    }
    // f32 activations; the quantized matmul quantizes each row of activations on its own.
    assert!(worst <= 1e-3, "packed and alone differ by {worst}");
    // And the hidden states mean something: the last-token logits are not flat.
    let logits = chat.model.prefill(&mut KvPool::new(&chat.model), &prompt_bin(&refs[..1]), &[1]).unwrap().0.to_vec2::<f32>().unwrap();
    let (min, max) = logits[0].iter().fold((f32::MAX, f32::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(max - min > 5.0, "{min}..{max}");
}

#[test]
fn greedy_output_is_identical_packed_and_batched_and_one_at_a_time() {
    let chat = load();
    let prompts: Vec<Vec<u32>> = TEXTS.iter().map(|t| chat.encode_chat(SYSTEM_PROMPT, &format!("Summarize: {t}")).unwrap()).collect();
    let params = SamplingParams { max_new_tokens: 24, ..Default::default() };
    // Two at a time: the third and fourth join as the first ones finish (continuous batching).
    let (batched, stats) = generate(
        &chat.model,
        &prompts,
        &chat.stop_ids,
        &params,
        BatchOptions { max_batch: 2, prefill_tokens: 4096, kv_tokens: usize::MAX },
        |_, _| {},
    )
    .unwrap();
    assert_eq!(stats.max_batch_seen, 2);
    let (all, _) = generate(
        &chat.model,
        &prompts,
        &chat.stop_ids,
        &params,
        BatchOptions { max_batch: 8, prefill_tokens: 4096, kv_tokens: usize::MAX },
        |_, _| {},
    )
    .unwrap();
    for (i, p) in prompts.iter().enumerate() {
        let (alone, _) = generate(
            &chat.model,
            std::slice::from_ref(p),
            &chat.stop_ids,
            &params,
            BatchOptions { max_batch: 1, prefill_tokens: 4096, kv_tokens: usize::MAX },
            |_, _| {},
        )
        .unwrap();
        assert_eq!(batched[i], alone[0], "prompt {i}: batched by 2 vs alone");
        assert_eq!(all[i], alone[0], "prompt {i}: all together vs alone");
        let text = chat.decode(&alone[0].tokens).unwrap();
        assert!(text.split_whitespace().count() >= 3, "prompt {i}: {text:?}");
    }
}

#[test]
fn a_sample_document_gets_a_readable_summary() {
    let chat = load();
    let mut s = Summarizer::new(&chat, SummarizeOptions { chunk_tokens: 512, ..Default::default() }).unwrap();
    let doc = "Tomatoes picked at the breaker stage, when the first blush of colour appears, ripen indoors \
               with the same flavour as those left on the vine. Keep them at room temperature, stem side \
               down, away from direct sunlight. Refrigeration stops ripening and makes the flesh mealy."
        .to_string();
    let out = s.summarize_documents(&[doc]).unwrap();
    let summary = out[0].summary.to_lowercase();
    assert!(summary.contains("tomato"), "{summary}");
    assert!(out[0].tokens_out > 5 && out[0].tokens_in > 50, "{:?}", out[0]);
}

#[test]
fn a_malformed_gguf_and_a_missing_tokenizer_are_named() {
    let dir = std::env::temp_dir().join(format!("warpfold-chat-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Not a GGUF at all.
    let bad = dir.join("broken.gguf");
    std::fs::write(&bad, b"GGUF\x03\x00\x00\x00garbage").unwrap();
    let err = ChatModel::load(&bad, &Device::Cpu).err().expect("refused");
    let msg = err.to_string();
    assert!(msg.contains("broken.gguf") && msg.contains("not a readable GGUF file"), "{msg}");
    // The real file cut short: the header reads, a tensor does not.
    let bytes = std::fs::read(model_path()).unwrap();
    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let err = ChatModel::load(&cut, &Device::Cpu).err().expect("refused");
    assert!(err.to_string().contains("cut.gguf"), "{err}");
    // A Hugging Face folder without tokenizer.json.
    let hf = dir.join("hf");
    std::fs::create_dir_all(&hf).unwrap();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/decoder_reference/llama3");
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(fixture.join(f), hf.join(f)).unwrap();
    }
    let err = ChatModel::load(&hf, &Device::Cpu).err().expect("refused");
    assert!(matches!(err, ChatError::Tokenizer { .. }), "{err}");
    assert!(err.to_string().contains("tokenizer.json is missing"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// On the GPU machine (cuda builds only; `--ignored`): the default model on CUDA (dense bf16, FA-2
/// varlen prefill and decode with the flash-attn feature) gives the CPU's f32 logits within bf16
/// tolerance, and the same greedy tokens packed and batched as alone.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU: run this test binary on the GPU machine with --ignored"]
fn gpu_logits_match_the_cpu_and_batched_greedy_matches_alone() {
    let cuda = Device::new_cuda(0).expect("a CUDA device");
    let cpu = load();
    let gpu = ChatModel::load(&model_path(), &cuda).expect("loads on CUDA");
    let prompts: Vec<Vec<u32>> = TEXTS.iter().map(|t| cpu.encode_chat(SYSTEM_PROMPT, t).unwrap()).collect();
    let refs: Vec<&[u32]> = prompts.iter().map(|p| p.as_slice()).collect();
    let reserve = vec![1; prompts.len()];
    let (c, _) = cpu.model.prefill(&mut KvPool::new(&cpu.model), &prompt_bin(&refs), &reserve).unwrap();
    let (g, _) = gpu.model.prefill(&mut KvPool::new(&gpu.model), &prompt_bin(&refs), &reserve).unwrap();
    let (c, g) = (c.to_vec2::<f32>().unwrap(), g.to_vec2::<f32>().unwrap());
    for (i, (a, b)) in c.iter().zip(&g).enumerate() {
        let scale = a.iter().fold(0f32, |m, x| m.max(x.abs()));
        let worst = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        eprintln!("prompt {i}: max |cpu - gpu| {worst} (largest logit {scale})");
        assert!(worst <= 0.05 * scale, "prompt {i}: {worst}");
    }
    let params = SamplingParams { max_new_tokens: 24, ..Default::default() };
    let (batched, _) = generate(&gpu.model, &prompts, &gpu.stop_ids, &params, BatchOptions::default(), |_, _| {}).unwrap();
    let mut same = 0;
    for (i, p) in prompts.iter().enumerate() {
        let (alone, _) = generate(
            &gpu.model,
            std::slice::from_ref(p),
            &gpu.stop_ids,
            &params,
            BatchOptions { max_batch: 1, prefill_tokens: 4096, kv_tokens: usize::MAX },
            |_, _| {},
        )
        .unwrap();
        eprintln!("prompt {i}: {:?}", gpu.decode(&batched[i].tokens).unwrap());
        same += usize::from(batched[i] == alone[0]);
    }
    // bf16 sums in a different order can flip a near tie; most must agree.
    assert!(same + 1 >= prompts.len(), "{same} of {} identical", prompts.len());
}
