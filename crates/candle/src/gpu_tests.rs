//! Tests that need a CUDA GPU (flash-attn builds only, all `#[ignore]`d): CI has no GPU, so they run on
//! the GPU machine from the test binary that `scripts/gpu/build-cuda-tests.sh` packs, with
//! `--ignored gpu_` (`bench/gpu/run-gpu-tests.sh` does it). What they guard: the FA-2 varlen kernel as
//! this crate calls it, against a plain f32 attention written out below; an out-of-memory bin on a
//! real device split and retried by the engine with nothing lost; the decoder's logits, prefill and
//! batched decode, against Hugging Face transformers on the same weights.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use warpfold_backend::{Backend, BackendError, BackendInfo, Bin};

use crate::llama::tests::{bin_of, Rng};
use crate::llama::LlamaModel;
use crate::varlen::{varlen_causal_attention, VarlenSlots};

fn cuda() -> Device {
    Device::new_cuda(0).expect("a CUDA device")
}

/// Softmax attention of one query `q` (hd) over `keys` rows of `k` and `v` ((keys, hd) row-major), in
/// f32, the obvious way.
fn reference_query(q: &[f32], k: &[f32], v: &[f32], keys: usize, hd: usize) -> Vec<f32> {
    let scale = 1.0 / (hd as f32).sqrt();
    let scores: Vec<f32> = (0..keys).map(|j| (0..hd).map(|d| q[d] * k[j * hd + d]).sum::<f32>() * scale).collect();
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f32 = weights.iter().sum();
    let mut out = vec![0f32; hd];
    for (j, w) in weights.iter().enumerate() {
        for d in 0..hd {
            out[d] += w / total * v[j * hd + d];
        }
    }
    out
}

/// Softmax attention of one head over one sequence, in f32: `q`, `k`, `v` are (len, hd) row-major;
/// with `causal`, query `i` sees keys `0..=i`.
fn reference_head(q: &[f32], k: &[f32], v: &[f32], len: usize, hd: usize, causal: bool) -> Vec<f32> {
    (0..len).flat_map(|i| reference_query(&q[i * hd..(i + 1) * hd], k, v, if causal { i + 1 } else { len }, hd)).collect()
}

/// `x` (T, heads, hd) as f32 on the host, rows `start..start + len` of head `h`: (len, hd).
fn head_rows(x: &[Vec<Vec<f32>>], start: usize, len: usize, h: usize) -> Vec<f32> {
    (start..start + len).flat_map(|t| x[t][h].iter().copied()).collect()
}

/// Relative L2 error of `got` against `want`.
fn rel_l2(got: &[f32], want: &[f32]) -> f32 {
    let diff: f32 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
    let norm: f32 = want.iter().map(|b| b * b).sum();
    (diff / norm.max(1e-30)).sqrt()
}

#[test]
#[ignore = "needs a CUDA GPU: run this test binary on the GPU machine with --ignored"]
fn gpu_flash_varlen_attention_matches_a_plain_f32_attention_causal_and_not() {
    let cuda = cuda();
    let lens = [1usize, 7, 33, 129, 300];
    // (heads, kv heads, head size): MiniLM's 12 x 32 (no GQA), SmolLM2's 64 with GQA, Llama's 128.
    for (heads, kv, hd) in [(12usize, 12usize, 32usize), (9, 3, 64), (8, 2, 128)] {
        let seqs: Vec<Vec<u32>> = lens.iter().map(|&l| vec![1; l]).collect();
        // Slots aligned to 16 as the engine lays them out: pad tokens after each sequence.
        let bin = bin_of(&seqs, 16);
        let t = bin.computed_tokens();
        let mut rng = Rng(hd as u64 * 31 + heads as u64);
        // Rounded to bf16 first, so the reference sees exactly what the kernel sees.
        let make = |rng: &mut Rng, h: usize| rng.tensor(&[t, h, hd], 1.5, 0.0).to_dtype(DType::BF16).unwrap();
        let (q, k, v) = (make(&mut rng, heads), make(&mut rng, kv), make(&mut rng, kv));
        let host = |x: &Tensor| x.to_dtype(DType::F32).unwrap().to_vec3::<f32>().unwrap();
        let (qh, kh, vh) = (host(&q), host(&k), host(&v));
        let (qd, kd, vd) = (q.to_device(&cuda).unwrap(), k.to_device(&cuda).unwrap(), v.to_device(&cuda).unwrap());
        let scale = 1.0 / (hd as f32).sqrt();

        // Causal, through the decoder's own entry point (whole slots, pad tokens included).
        let slots = VarlenSlots::from_bin(&bin, &cuda).unwrap();
        let causal = host(&varlen_causal_attention(&qd, &kd, &vd, &slots, scale).unwrap());
        // Not causal, as the encoder calls it: a compacted tape of real tokens only.
        let real: Vec<u32> = (0..bin.num_sequences()).flat_map(|i| bin.cu_seqlens[i]..bin.cu_seqlens[i] + bin.seq_lens[i]).collect();
        let pick = |x: &Tensor| x.index_select(&Tensor::new(real.as_slice(), &cuda).unwrap(), 0).unwrap();
        let mut cu = vec![0u32];
        for &l in &lens {
            cu.push(cu[cu.len() - 1] + l as u32);
        }
        let cu_dev = Tensor::new(cu.as_slice(), &cuda).unwrap();
        let longest = *lens.iter().max().unwrap();
        let full = host(
            &candle_flash_attn::flash_attn_varlen(&pick(&qd), &pick(&kd), &pick(&vd), &cu_dev, &cu_dev, longest, longest, scale, false)
                .unwrap(),
        );

        let mut worst = (0f32, 0f32);
        for (i, &len) in lens.iter().enumerate() {
            let (start, compact) = (bin.cu_seqlens[i] as usize, cu[i] as usize);
            for h in 0..heads {
                let g = h / (heads / kv); // the kv head query head h shares
                let (qs, ks, vs) = (head_rows(&qh, start, len, h), head_rows(&kh, start, len, g), head_rows(&vh, start, len, g));
                let e_causal = rel_l2(&head_rows(&causal, start, len, h), &reference_head(&qs, &ks, &vs, len, hd, true));
                let e_full = rel_l2(&head_rows(&full, compact, len, h), &reference_head(&qs, &ks, &vs, len, hd, false));
                worst = (worst.0.max(e_causal), worst.1.max(e_full));
            }
        }
        eprintln!("heads {heads}, kv {kv}, hd {hd}: worst relative L2 error causal {:.2e}, non-causal {:.2e}", worst.0, worst.1);
        // bf16 output rounding alone is ~2e-3 relative.
        assert!(worst.0 <= 1e-2 && worst.1 <= 1e-2, "heads {heads}, kv {kv}, hd {hd}: {worst:?}");
    }
}

/// The decoder on the GPU as an engine backend that runs out of memory for real on bins above
/// `limit` tokens: it first asks the device for more memory than it has, and reports what the
/// driver answered the way every backend of this crate does.
struct TightDecoder {
    model: LlamaModel,
    limit: usize,
    refused: Arc<AtomicUsize>,
}

impl Backend for TightDecoder {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            model: "tiny llama".into(),
            device: "cuda:0".into(),
            max_sequence_tokens: self.model.config.max_position_embeddings,
            output_dim: 2,
            pad_token_id: 0,
            attention: String::new(),
        }
    }

    fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
        if bin.computed_tokens() > self.limit {
            let (_, total) = crate::device_memory(self.model.device()).map_err(|e| BackendError::Inference(e.to_string()))?;
            let err = Tensor::zeros(2 * total as usize, DType::U8, self.model.device()).err().expect("more than the device has");
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(crate::backend_error(err, bin));
        }
        let scores = self.model.score(bin).map_err(|e| crate::backend_error(e, bin))?;
        Ok(scores.into_iter().map(|s| vec![s.mean_log_likelihood, s.scored_tokens as f32]).collect())
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run this test binary on the GPU machine with --ignored"]
fn gpu_out_of_memory_splits_the_bin_and_retries_with_no_sequence_lost() {
    use warpfold_engine::{Engine, Lane, SchedulerConfig};
    let cuda = cuda();
    let cfg = crate::llama::tests::tiny_config(r#""model_type":"llama""#);
    let weights = crate::llama::tests::random_weights(&cfg, 5);
    let model = LlamaModel::new(&cfg, candle_nn::VarBuilder::from_tensors(weights, DType::BF16, &cuda)).unwrap();
    let mut rng = Rng(3);
    let seqs: Vec<Vec<u32>> = (0..40).map(|i| rng.ids(8 + (i * 37) % 200, cfg.vocab_size)).collect();
    // What each sequence scores alone, on the same device.
    let alone: Vec<f32> = seqs.iter().map(|s| model.score(&bin_of(std::slice::from_ref(s), 16)).unwrap()[0].mean_log_likelihood).collect();

    let refused = Arc::new(AtomicUsize::new(0));
    let backend = TightDecoder { model, limit: 400, refused: refused.clone() };
    let config =
        SchedulerConfig { bin_tokens: 2048, min_sequences: 64, max_wait: std::time::Duration::from_millis(50), ..Default::default() };
    let engine = Engine::start(backend, config);
    let results = engine.embed(Lane::Bulk, seqs.clone());
    let stats = engine.shutdown();
    assert!(refused.load(Ordering::Relaxed) > 0, "no bin was over the limit: the test did not test");
    assert!(stats.oom_splits > 0, "{stats:?}");
    assert_eq!(results.len(), seqs.len());
    for (i, r) in results.iter().enumerate() {
        let v = r.as_ref().unwrap_or_else(|e| panic!("sequence {i} lost: {e}"));
        assert_eq!(v[1] as usize, seqs[i].len() - 1, "sequence {i} answered with another's result");
        assert!((v[0] - alone[i]).abs() <= 0.02, "sequence {i}: {} after the splits vs {} alone", v[0], alone[i]);
    }
    assert!(stats.capacity_limit.is_some_and(|c| c <= 2048), "the capacity adapts: {stats:?}");
    eprintln!(
        "{} bins refused for memory, {} splits, capacity learnt {:?}",
        refused.load(Ordering::Relaxed),
        stats.oom_splits,
        stats.capacity_limit
    );
}

/// The decoders `bench/gpu/hf_logits.py` wrote references for: `WARPFOLD_HF_REFERENCE`, one or more
/// Hugging Face decoder folders (config.json, model.safetensors) separated by `:`; the reference of
/// `DIR` is `DIR-reference.safetensors`.
fn hf_reference_dirs() -> Vec<PathBuf> {
    let dirs = std::env::var("WARPFOLD_HF_REFERENCE")
        .expect("set WARPFOLD_HF_REFERENCE to the folders bench/gpu/hf_logits.py wrote (bench/gpu/run-gpu-tests.sh does)");
    dirs.split(':').filter(|d| !d.is_empty()).map(PathBuf::from).collect()
}

/// Largest absolute difference and the largest absolute reference value.
fn compare(got: &[f32], want: &[f32]) -> (f32, f32) {
    assert_eq!(got.len(), want.len());
    let worst = got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    (worst, want.iter().fold(0f32, |m, b| m.max(b.abs())))
}

fn argmax(x: &[f32]) -> usize {
    x.iter().enumerate().fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| if v > bv { (i, v) } else { (bi, bv) }).0
}

/// Issue 6's GPU check: the logits of the decoder as summarization runs it (a packed prefill of
/// several prompts, then batched decode steps through each sequence's cache) against transformers
/// on the same weights and tokens. transformers' f32 logits are the reference; its own bf16 run
/// says how far bf16 arithmetic alone moves them, and ours (bf16, FA-2) must stay within twice that.
#[test]
#[ignore = "needs a CUDA GPU and references from bench/gpu/hf_logits.py: see bench/gpu/run-gpu-tests.sh"]
fn gpu_decoder_logits_match_transformers_on_the_same_weights() {
    let cuda = cuda();
    for dir in hf_reference_dirs() {
        let model = crate::DecoderBackend::load(&dir, &cuda).expect("the decoder loads").into_model();
        let file = PathBuf::from(format!("{}-reference.safetensors", dir.display()));
        let reference = candle_core::safetensors::load(&file, &Device::Cpu).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let get = |name: String| reference.get(&name).unwrap_or_else(|| panic!("{}: no {name}", dir.display())).clone();
        let n = (0..).take_while(|i| reference.contains_key(&format!("prompt.{i}"))).count();
        assert!(n > 1, "{}: fewer than 2 prompts", dir.display());
        let ids = |name: String| {
            get(name).to_dtype(DType::I64).unwrap().to_vec1::<i64>().unwrap().into_iter().map(|x| x as u32).collect::<Vec<u32>>()
        };
        let prompts: Vec<Vec<u32>> = (0..n).map(|i| ids(format!("prompt.{i}"))).collect();
        let continuations: Vec<Vec<u32>> = (0..n).map(|i| ids(format!("continuation.{i}"))).collect();
        let steps = continuations[0].len();
        assert!(continuations.iter().all(|c| c.len() == steps));
        let f32_ref: Vec<Vec<Vec<f32>>> = (0..n).map(|i| get(format!("logits_f32.{i}")).to_vec2::<f32>().unwrap()).collect();
        let bf16_ref: Vec<Vec<Vec<f32>>> = (0..n).map(|i| get(format!("logits_bf16.{i}")).to_vec2::<f32>().unwrap()).collect();

        // Ours: one packed prefill of every prompt, then `steps` batched decode steps fed the same
        // next tokens as the reference (teacher forcing), so every row compares like with like.
        let refs: Vec<&[u32]> = prompts.iter().map(|p| p.as_slice()).collect();
        let mut pool = crate::generate::KvPool::new(&model);
        let (first, mut caches) = model.prefill(&mut pool, &crate::generate::prompt_bin(&refs), &vec![steps + 1; n]).unwrap();
        let mut ours: Vec<Vec<Vec<f32>>> = first.to_vec2::<f32>().unwrap().into_iter().map(|row| vec![row]).collect();
        for s in 0..steps {
            let tokens: Vec<u32> = continuations.iter().map(|c| c[s]).collect();
            let logits = model.decode_step(&mut pool, &tokens, &mut caches).unwrap().to_vec2::<f32>().unwrap();
            for (i, row) in logits.into_iter().enumerate() {
                ours[i].push(row);
            }
        }
        let (mut worst_ours, mut worst_hf_bf16, mut scale, mut top1_same, mut top1_rows) = (0f32, 0f32, 0f32, 0, 0);
        for i in 0..n {
            for s in 0..=steps {
                let (want, theirs) = (&f32_ref[i][s], &bf16_ref[i][s]);
                let (d_ours, sc) = compare(&ours[i][s], want);
                let (d_theirs, _) = compare(theirs, want);
                worst_ours = worst_ours.max(d_ours);
                worst_hf_bf16 = worst_hf_bf16.max(d_theirs);
                scale = scale.max(sc);
                // Top-1 must agree wherever the reference's margin is wider than our error.
                let best = argmax(want);
                let second = want.iter().enumerate().filter(|&(j, _)| j != best).map(|(_, &v)| v).fold(f32::NEG_INFINITY, f32::max);
                if want[best] - second > 2.0 * d_ours {
                    top1_rows += 1;
                    top1_same += usize::from(argmax(&ours[i][s]) == best);
                }
            }
        }
        eprintln!(
            "{}: {n} prompts ({} tokens) + {steps} decode steps: max |ours - transformers f32| {worst_ours:.4}, max |transformers bf16 - f32| {worst_hf_bf16:.4}, largest logit {scale:.2}; top-1 equal on {top1_same} of {top1_rows} clear rows",
            dir.display(),
            prompts.iter().map(Vec::len).sum::<usize>()
        );
        assert!(worst_ours <= 2.0 * worst_hf_bf16 + 1e-3, "{}: {worst_ours} against bf16's own {worst_hf_bf16}", dir.display());
        assert_eq!(top1_same, top1_rows, "{}", dir.display());
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run this test binary on the GPU machine with --ignored"]
fn gpu_fused_kernels_match_candles_own_ops() {
    let cuda = cuda();
    let mut rng = Rng(17);
    // SwiGLU over a fused gate-up output, rows x (2 x inter), in bf16 and f32: in 16-byte packs
    // (1000 columns), element by element (13 columns), and element by element because the input
    // starts one element past an aligned address (a view at offset 1).
    for (rows, inter, offset) in [(37usize, 1000usize, 0usize), (5, 13, 0), (9, 1000, 1)] {
        let flat = rng.tensor(&[offset + rows * 2 * inter], 4.0, 0.0);
        let gu = flat.narrow(0, offset, rows * 2 * inter).unwrap().reshape((rows, 2 * inter)).unwrap();
        for dtype in [DType::BF16, DType::F32] {
            let host = gu.to_dtype(dtype).unwrap().to_dtype(DType::F32).unwrap();
            let want = crate::fused::silu_mul(&host, inter).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let on = flat.to_dtype(dtype).unwrap().to_device(&cuda).unwrap();
            let on = on.narrow(0, offset, rows * 2 * inter).unwrap().reshape((rows, 2 * inter)).unwrap();
            let got = crate::fused::silu_mul(&on, inter).unwrap();
            let got = got.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let e = rel_l2(&got, &want);
            eprintln!("silu_mul {dtype:?} {rows}x{inter} at offset {offset}: relative L2 error {e:.2e}");
            assert!(e <= if dtype == DType::F32 { 1e-5 } else { 5e-3 }, "{dtype:?} {inter} {offset}: {e}");
        }
    }
    // log p(target) over a Qwen-sized vocabulary and a tiny one.
    for vocab in [152_064usize, 97] {
        let rows = 6;
        let logits = rng.tensor(&[rows, vocab], 12.0, 0.0).to_dtype(DType::BF16).unwrap();
        let targets: Vec<u32> = rng.ids(rows, vocab);
        let tg = Tensor::new(targets.as_slice(), &Device::Cpu).unwrap();
        let want = crate::fused::target_log_probs(&logits.to_dtype(DType::F32).unwrap(), &tg).unwrap().to_vec1::<f32>().unwrap();
        let got = crate::fused::target_log_probs(&logits.to_device(&cuda).unwrap(), &tg.to_device(&cuda).unwrap())
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let worst = got.iter().zip(&want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        eprintln!("target_log_probs, vocab {vocab}: max |diff| {worst:.2e} (values near {:.1})", want[0]);
        assert!(worst <= 1e-3, "vocab {vocab}: {worst}");
    }
    // The q/k/v split (bias added, q and k turned, three contiguous tensors) against candle's ops on
    // the CPU: grouped heads, both rotary layouts, with and without a bias, and without angles (the
    // encoder's use).
    use crate::fused::{split_qkv, Rotary};
    use crate::llama::RopeLayout;
    // Head sizes 64 and 128 take 16-byte packs (except the interleaved layout); 12 (half a head is 6,
    // not a whole pack) takes the per-pair path.
    for (heads, kv, hd) in [(6usize, 2usize, 64usize), (4, 4, 128), (3, 1, 12)] {
        let rows = 45;
        let width = (heads + 2 * kv) * hd;
        let qkv = rng.tensor(&[rows, width], 3.0, 0.0);
        let bias = rng.tensor(&[width], 1.0, 0.0);
        let angles = rng.tensor(&[rows, hd / 2], 6.0, 0.0);
        for dtype in [DType::BF16, DType::F32] {
            let on = |t: &Tensor, d: &Device| t.to_dtype(dtype).unwrap().to_device(d).unwrap();
            let host = |t: &Tensor| t.to_dtype(dtype).unwrap().to_dtype(DType::F32).unwrap();
            let (cos, sin) = (angles.cos().unwrap(), angles.sin().unwrap());
            let (h_cos, h_sin, g_cos, g_sin) = (host(&cos), host(&sin), on(&cos, &cuda), on(&sin, &cuda));
            for layout in [Some(RopeLayout::Half), Some(RopeLayout::Interleaved), None] {
                for with_bias in [true, false] {
                    let h_bias = host(&bias);
                    let g_bias = on(&bias, &cuda);
                    let want = split_qkv(
                        &host(&qkv),
                        with_bias.then_some(&h_bias),
                        layout.map(|layout| Rotary { cos: &h_cos, sin: &h_sin, layout }),
                        [heads, kv, hd],
                    )
                    .unwrap();
                    let got = split_qkv(
                        &on(&qkv, &cuda),
                        with_bias.then_some(&g_bias),
                        layout.map(|layout| Rotary { cos: &g_cos, sin: &g_sin, layout }),
                        [heads, kv, hd],
                    )
                    .unwrap();
                    for (name, g, w) in [("q", &got.0, &want.0), ("k", &got.1, &want.1), ("v", &got.2, &want.2)] {
                        assert_eq!(g.dims(), w.dims(), "{name}");
                        assert!(g.is_contiguous(), "{name}");
                        let flat = |t: &Tensor| t.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
                        let e = rel_l2(&flat(g), &flat(w));
                        let what = format!("split_qkv {dtype:?} {layout:?} bias {with_bias} heads {heads}/{kv} hd {hd}: {name}");
                        eprintln!("{what}: relative L2 error {e:.2e}");
                        assert!(e <= if dtype == DType::F32 { 1e-5 } else { 5e-3 }, "{what}: {e}");
                    }
                }
            }
        }
    }
    // The residual add fused into the RMS norm, at the 7B's width (16-byte packs) and an odd one (per
    // element).
    for width in [3584usize, 77] {
        let rows = 19;
        let (x, y) = (rng.tensor(&[rows, width], 2.0, 0.0), rng.tensor(&[rows, width], 2.0, 0.5));
        let weight = rng.tensor(&[width], 1.0, 1.0);
        for dtype in [DType::BF16, DType::F32] {
            let host = |t: &Tensor| t.to_dtype(dtype).unwrap().to_dtype(DType::F32).unwrap();
            let on = |t: &Tensor| t.to_dtype(dtype).unwrap().to_device(&cuda).unwrap();
            let norm = |w: Tensor| candle_nn::RmsNorm::new(w, 1e-6);
            let want = crate::fused::residual_rms_norm(&host(&x), &host(&y), &norm(host(&weight))).unwrap();
            let got = crate::fused::residual_rms_norm(&on(&x), &on(&y), &norm(on(&weight))).unwrap();
            for (name, g, w) in [("sum", &got.0, &want.0), ("normed", &got.1, &want.1)] {
                let flat = |t: &Tensor| t.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
                let e = rel_l2(&flat(g), &flat(w));
                eprintln!("residual_rms_norm {dtype:?} width {width}: {name} relative L2 error {e:.2e}");
                assert!(e <= if dtype == DType::F32 { 1e-5 } else { 5e-3 }, "{dtype:?} {width} {name}: {e}");
            }
        }
    }
    // The cache pool's row writes: the same rows land in the same places as on the CPU, exactly.
    for dtype in [DType::BF16, DType::F16, DType::F32] {
        let (pool_rows, width, n) = (5000, 256, 3000);
        let src = rng.tensor(&[n, width], 3.0, 0.0).to_dtype(dtype).unwrap();
        let rows: Vec<u32> = (0..n as u32).map(|i| (i * 7 + 3) % pool_rows as u32).collect();
        let rows = Tensor::new(rows.as_slice(), &Device::Cpu).unwrap();
        let host = Tensor::zeros((pool_rows, width), dtype, &Device::Cpu).unwrap();
        crate::fused::scatter_rows(&host, &rows, &src).unwrap();
        let gpu = Tensor::zeros((pool_rows, width), dtype, &cuda).unwrap();
        crate::fused::scatter_rows(&gpu, &rows.to_device(&cuda).unwrap(), &src.to_device(&cuda).unwrap()).unwrap();
        let diff = (host.to_dtype(DType::F32).unwrap() - gpu.to_device(&Device::Cpu).unwrap().to_dtype(DType::F32).unwrap())
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        eprintln!("scatter_rows {dtype:?}: max |gpu - cpu| {diff}");
        assert_eq!(diff, 0.0, "{dtype:?}");
    }
}

/// A decode step's attention through the cache pool, both ways a CUDA build reads it (FA-2's paged
/// split-KV kernel through a block table, and the rows gathered into a varlen tape), against a plain
/// f32 attention of each query over its sequence's keys: head sizes 64 and 128 with grouped queries,
/// sequences of several blocks whose blocks lie out of order and apart in the pool, partial last
/// blocks, and a one-token sequence.
#[test]
#[ignore = "needs a CUDA GPU with FlashAttention-2: see bench/gpu/run-gpu-tests.sh"]
fn gpu_paged_attention_reads_scattered_blocks_like_a_plain_f32_attention() {
    use crate::generate::{CacheReads, KvPool, KV_BLOCK};
    let cuda = cuda();
    for hd in [64usize, 128] {
        let (heads, kv) = (8usize, 2usize);
        let cfg: crate::llama::Config = serde_json::from_str(&format!(
            r#"{{"model_type":"qwen2","hidden_size":{},"intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":{heads},
                "num_key_value_heads":{kv},"head_dim":{hd},"vocab_size":11,"rms_norm_eps":1e-6,"rope_theta":10000.0,
                "max_position_embeddings":4096}}"#,
            heads * hd
        ))
        .unwrap();
        let model =
            LlamaModel::new(&cfg, candle_nn::VarBuilder::from_tensors(crate::llama::tests::random_weights(&cfg, 3), DType::BF16, &cuda))
                .unwrap();
        for paged in [true, false] {
            let mut pool = KvPool::new(&model);
            assert!(!paged || pool.paged, "hd {hd}: this build has FA-2's split-KV kernel");
            pool.paged = paged;
            // Keys held per sequence (the query's own key included): several blocks, a partial last
            // block, exactly one block, one token. Blocks taken between them keep each sequence's
            // blocks apart, and the pool hands a sequence its blocks in descending order.
            let lens = [3 * KV_BLOCK + 7, 1, KV_BLOCK, 5 * KV_BLOCK + 31, 70];
            let mut caches = Vec::new();
            let mut spacers = Vec::new();
            for &len in &lens {
                spacers.push(pool.allocate(KV_BLOCK + 1).unwrap());
                caches.push(pool.allocate(len).unwrap());
            }
            let mut rng = Rng(hd as u64 * 7 + u64::from(paged));
            let mut keys = Vec::new();
            for (c, &len) in caches.iter_mut().zip(&lens) {
                let k = rng.tensor(&[len, kv, hd], 1.5, 0.0).to_dtype(DType::BF16).unwrap();
                let v = rng.tensor(&[len, kv, hd], 1.5, 0.0).to_dtype(DType::BF16).unwrap();
                let at = pool.rows((0..len).map(|p| c.row(p)).collect()).unwrap();
                pool.write(0, &at, &k.to_device(&cuda).unwrap(), &v.to_device(&cuda).unwrap()).unwrap();
                // The step reads `len + 1` keys: the cached ones and the query's own, written last.
                c.len = len - 1;
                let host = |x: &Tensor| x.to_dtype(DType::F32).unwrap().to_vec3::<f32>().unwrap();
                keys.push((host(&k), host(&v)));
            }
            for s in spacers {
                pool.release(s);
            }
            let q = rng.tensor(&[lens.len(), heads, hd], 1.5, 0.0).to_dtype(DType::BF16).unwrap();
            let reads = CacheReads::new(&pool, &caches).unwrap();
            let got = reads.attend(&pool, 0, &q.to_device(&cuda).unwrap(), 1.0 / (hd as f32).sqrt()).unwrap();
            let got = got.to_dtype(DType::F32).unwrap().to_vec3::<f32>().unwrap();
            let qh = q.to_dtype(DType::F32).unwrap().to_vec3::<f32>().unwrap();
            let mut worst = 0f32;
            for (i, (&len, (kh, vh))) in lens.iter().zip(&keys).enumerate() {
                for h in 0..heads {
                    let g = h / (heads / kv);
                    let (ks, vs) = (head_rows(kh, 0, len, g), head_rows(vh, 0, len, g));
                    worst = worst.max(rel_l2(&got[i][h], &reference_query(&qh[i][h], &ks, &vs, len, hd)));
                }
            }
            eprintln!("hd {hd}, paged {paged}: cache attention against a plain f32 attention, worst rel L2 {worst:.2e}");
            // bf16 output rounding alone is ~2e-3 relative (the varlen kernel's test above).
            assert!(worst <= 1e-2, "hd {hd}, paged {paged}: {worst}");
        }
    }
}

/// Decoding on the GPU through the paged cache (FA-2's split-KV kernel reading blocks through a
/// block table) and through the gathered rows gives the logits of a full causal forward of the whole
/// sequence, as closely as bf16 allows: each is held against the same weights run in f32 on the CPU,
/// within twice the error of a bf16 full forward on the GPU. Head sizes 64 and 128 with grouped
/// queries, sequences that outgrow their first blocks, blocks handed out of order, and a batch that
/// shrinks as sequences end.
#[test]
#[ignore = "needs a CUDA GPU with FlashAttention-2: see bench/gpu/run-gpu-tests.sh"]
fn gpu_paged_decode_matches_a_full_forward_and_the_gathered_path() {
    use crate::generate::{prompt_bin, KvPool};
    use candle_core::Module;
    let cuda = cuda();
    for hd in [64usize, 128] {
        let cfg: crate::llama::Config = serde_json::from_str(&format!(
            r#"{{"model_type":"qwen2","hidden_size":256,"intermediate_size":512,"num_hidden_layers":3,"num_attention_heads":4,
                "num_key_value_heads":2,"head_dim":{hd},"vocab_size":211,"rms_norm_eps":1e-6,"rope_theta":10000.0,
                "max_position_embeddings":512}}"#
        ))
        .unwrap();
        let weights = crate::llama::tests::random_weights(&cfg, 5);
        let model = LlamaModel::new(&cfg, candle_nn::VarBuilder::from_tensors(weights.clone(), DType::BF16, &cuda)).unwrap();
        let exact = LlamaModel::new(&cfg, candle_nn::VarBuilder::from_tensors(weights, DType::F32, &Device::Cpu)).unwrap();
        let mut rng = Rng(29);
        let full: Vec<Vec<u32>> = [70usize, 20, 110].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
        let prompt_lens = [37usize, 5, 30];
        let logits = |m: &LlamaModel, s: &[u32]| -> Vec<Vec<f32>> {
            let h = m.forward_hidden(&bin_of(&[s.to_vec()], 1)).unwrap();
            m.lm_head.forward(&h).unwrap().to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap()
        };
        let truth: Vec<Vec<Vec<f32>>> = full.iter().map(|s| logits(&exact, s)).collect();
        // The yardstick: a bf16 full forward on the GPU against the f32 one, over the rows compared.
        let mut bf16_own = 0f32;
        for (i, s) in full.iter().enumerate() {
            let rows = logits(&model, s);
            for p in prompt_lens[i] - 1..s.len() {
                bf16_own = bf16_own.max(rel_l2(&rows[p], &truth[i][p]));
            }
        }
        let mut rows = Vec::new();
        for paged in [true, false] {
            let mut pool = KvPool::new(&model);
            assert!(!paged || pool.paged, "hd {hd}: this build has FA-2's split-KV kernel");
            pool.paged = paged;
            let other = pool.allocate(40).unwrap();
            let prompts: Vec<&[u32]> = full.iter().zip(prompt_lens).map(|(s, p)| &s[..p]).collect();
            let (first, mut caches) = model.prefill(&mut pool, &prompt_bin(&prompts), &[2, 2, 2]).unwrap();
            let mut got: Vec<Vec<Vec<f32>>> = first.to_vec2::<f32>().unwrap().into_iter().map(|r| vec![r]).collect();
            crate::test_support::decode_teacher_forced(
                &model,
                &mut pool,
                &full,
                &prompt_lens,
                &mut caches,
                |_, _| {},
                |i, _, logits, _| got[i].push(logits),
            );
            pool.release(other);
            let mut worst = 0f32;
            for i in 0..3 {
                for (s, row) in got[i].iter().enumerate() {
                    worst = worst.max(rel_l2(row, &truth[i][prompt_lens[i] - 1 + s]));
                }
            }
            eprintln!(
                "hd {hd}, paged {paged}: worst rel L2 against the f32 full forward {worst:.2e} (a bf16 full forward: {bf16_own:.2e})"
            );
            assert!(worst <= 2.0 * bf16_own + 1e-3, "hd {hd}, paged {paged}: {worst} against bf16's own {bf16_own}");
            rows.push(got);
        }
        let (paged, gathered) = (&rows[0], &rows[1]);
        let worst =
            (0..3).flat_map(|i| paged[i].iter().zip(&gathered[i]).map(|(a, b)| rel_l2(a, b)).collect::<Vec<_>>()).fold(0f32, f32::max);
        eprintln!("hd {hd}: paged against gathered, worst rel L2 {worst:.2e}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run this test binary on the GPU machine with --ignored"]
fn gpu_encoder_kernels_give_the_cpu_vectors() {
    // A 2-layer encoder of MiniLM's widths (384, 12 heads of 32: the FA-2 kernel the build has), random
    // weights; f16 on the GPU through encoder_kernels.rs (embeddings, bias + residual + layer norm,
    // bias + GELU, pooling) and FA-2 reading k and v in place (k's bias dropped, v's moved into the
    // output projection's: bert::InPlaceBiases) against the f32 CPU layers, mean and CLS pooling.
    use crate::bert::tests::{bin_of_lengths, random_weights};
    use crate::bert::{BertModel, Config};
    use crate::bert_cpu::Gemm;
    use candle_nn::VarBuilder;
    use warpfold_backend::model_dir::Pooling;
    let cuda = cuda();
    let cfg: Config = serde_json::from_value(serde_json::json!({
        "vocab_size": 97, "hidden_size": 384, "num_hidden_layers": 2, "num_attention_heads": 12,
        "intermediate_size": 1536, "max_position_embeddings": 512
    }))
    .unwrap();
    let weights = random_weights(&cfg);
    let on_gpu: std::collections::HashMap<String, Tensor> =
        weights.iter().map(|(k, v)| (k.clone(), v.to_dtype(DType::F16).unwrap().to_device(&cuda).unwrap())).collect();
    let bin = bin_of_lengths(&[45, 3, 80, 1, 17, 250], 97);
    for pooling in [Pooling::Mean, Pooling::Cls] {
        let cpu = BertModel::new(&cfg, pooling, VarBuilder::from_tensors(weights.clone(), DType::F32, &Device::Cpu))
            .unwrap()
            .fused_for_cpu(Gemm::Crate)
            .unwrap();
        let gpu = BertModel::new(&cfg, pooling, VarBuilder::from_tensors(on_gpu.clone(), DType::F16, &cuda)).unwrap();
        assert!(gpu.uses_flash_attention(), "{}", gpu.attention());
        let want = cpu.fetch(&cpu.embed(&bin).unwrap()).unwrap();
        let got = gpu.fetch(&gpu.embed(&bin).unwrap()).unwrap();
        let mut worst = 1f32;
        for (x, y) in got.chunks(384).zip(want.chunks(384)) {
            worst = worst.min(x.iter().zip(y).map(|(a, b)| a * b).sum::<f32>());
        }
        eprintln!("encoder kernels, {pooling:?} pooling: lowest cosine to the f32 CPU vectors {worst:.6}");
        assert!(worst > 0.9999, "{pooling:?}: cosine {worst}");
    }
    // The element-wise kernels and the embeddings' kernel alone, in 16-byte packs (384 columns) and per element (77), against
    // candle's ops on the CPU in f32 from the same f16 inputs.
    use crate::activation::Activation;
    let mut rng = Rng(23);
    for width in [384usize, 77] {
        let rows = 21;
        let (y, res) = (rng.tensor(&[rows, width], 2.0, 0.0), rng.tensor(&[rows, width], 2.0, 0.3));
        let (bias, gamma, beta) = (rng.tensor(&[width], 1.0, 0.0), rng.tensor(&[width], 0.5, 1.0), rng.tensor(&[width], 0.5, 0.0));
        let on = |t: &Tensor| t.to_dtype(DType::F16).unwrap().to_device(&cuda).unwrap();
        let host = |t: &Tensor| t.to_dtype(DType::F16).unwrap().to_dtype(DType::F32).unwrap();
        let flat = |t: &Tensor| t.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let biased = host(&y).broadcast_add(&host(&bias)).unwrap();
        let want = candle_nn::ops::layer_norm(&(&biased + host(&res)).unwrap(), &host(&gamma), &host(&beta), 1e-12).unwrap();
        let got = crate::encoder_kernels::bias_residual_layer_norm(&on(&y), &on(&bias), &on(&res), &on(&gamma), &on(&beta), 1e-12).unwrap();
        let e = rel_l2(&flat(&got), &flat(&want));
        eprintln!("bias_residual_layer_norm width {width}: relative L2 error {e:.2e}");
        assert!(e <= 5e-3, "layer norm, width {width}: {e}");
        // The embeddings: two gathers, the token-type row and the norm in one kernel; the last id
        // is one past the table and must come out as a row of zeros.
        let (vocab, positions) = (50usize, 20usize);
        let (word, position) = (rng.tensor(&[vocab, width], 1.0, 0.0), rng.tensor(&[positions, width], 0.5, 0.0));
        let mut ids = rng.ids(rows, vocab);
        let pos: Vec<u32> = (0..rows as u32).map(|r| r % positions as u32).collect();
        ids[0] = vocab as u32 - 1;
        let want = {
            let ids_t = Tensor::new(&ids[..], &Device::Cpu).unwrap();
            let pos_t = Tensor::new(&pos[..], &Device::Cpu).unwrap();
            let sum = (host(&word).index_select(&ids_t, 0).unwrap() + host(&position).index_select(&pos_t, 0).unwrap()).unwrap();
            candle_nn::ops::layer_norm(&sum.broadcast_add(&host(&bias)).unwrap(), &host(&gamma), &host(&beta), 1e-12).unwrap()
        };
        ids[rows - 1] = vocab as u32;
        let on_u32 = |v: &[u32]| Tensor::new(v, &cuda).unwrap();
        let got = crate::encoder_kernels::embed_layer_norm(
            &on_u32(&ids),
            &on_u32(&pos),
            &on(&word),
            &on(&position),
            &on(&bias),
            &on(&gamma),
            &on(&beta),
            1e-12,
        )
        .unwrap();
        let (got, want) = (flat(&got), flat(&want));
        let e = rel_l2(&got[..(rows - 1) * width], &want[..(rows - 1) * width]);
        eprintln!("embed_layer_norm width {width}: relative L2 error {e:.2e}");
        assert!(e <= 5e-3, "embeddings, width {width}: {e}");
        assert!(got[(rows - 1) * width..].iter().all(|&v| v == 0.0), "an id past the table gives zeros");
        // q's bias over the first third of a q/k/v projection's rows (rows 3 × width apart).
        let wide = rng.tensor(&[rows, 3 * width], 2.0, 0.0);
        let want = host(&wide).narrow(1, 0, width).unwrap().broadcast_add(&host(&bias)).unwrap();
        let got = crate::encoder_kernels::bias_columns(&on(&wide), width, &on(&bias)).unwrap();
        assert_eq!(got.dims(), &[rows, width]);
        let e = rel_l2(&flat(&got), &flat(&want));
        eprintln!("bias_columns width {width} of {}: relative L2 error {e:.2e}", 3 * width);
        assert!(e <= 5e-3, "bias_columns, width {width}: {e}");
        for (act, want) in [
            (Activation::GeluErf, biased.gelu_erf().unwrap()),
            (Activation::GeluTanh, biased.gelu().unwrap()),
            (Activation::Relu, biased.relu().unwrap()),
        ] {
            let got = crate::encoder_kernels::bias_act(&on(&y), &on(&bias), act).unwrap();
            let e = rel_l2(&flat(&got), &flat(&want));
            eprintln!("bias_act {act:?} width {width}: relative L2 error {e:.2e}");
            assert!(e <= 5e-3, "{act:?}, width {width}: {e}");
        }
    }
}
