//! Text generation's policy over the decoder's primitives (warpfold-candle's packed prefill and
//! batched decode step): which requests run together, when a waiting prompt joins, how much of the
//! key/value pool each may reserve, and which token each takes.
//!
//! Why continuous batching: decoding runs the linear layers once for every sequence of the batch, so
//! the batch should stay full. A sequence that ends leaves at once and a waiting prompt is
//! prefilled into its place. Each joining request reserves its prompt and whole generation budget
//! in the pool, so the caches' growth during decoding can never pass what the device holds.
//!
//! Sampling draws from each request's own seeded generator, so what a request generates does not
//! depend on which other requests shared its batch.
//!
//! Why repetition controls live here, in [`sample`], and not in a caller: a greedy decoder falls
//! into loops ("a report of a report of a report ...", issue 15) and nothing after the fact can
//! undo a loop that has eaten the token budget; only the choice of each token can. Both controls
//! read nothing but the request's own prompt and generated tokens, so they keep the property above,
//! and both apply to greedy and sampled decoding alike: the repetition penalty (CTRL's, as
//! llama.cpp and transformers define it) makes every token already seen less likely, and
//! no-repeat n-gram blocking (transformers' `no_repeat_ngram_size`) bans outright the one token
//! that would complete an n-gram the generation already holds.

use std::time::Instant;

use candle_core::Result;
use warpfold_candle::generate::{kv_blocks, prompt_bin, KvPool, SeqCache, KV_BLOCK};
use warpfold_candle::llama::LlamaModel;
use warpfold_candle::stage_profile::{self, time as stage};

/// How tokens are chosen.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SamplingParams {
    /// Most tokens generated per request (the stop token included).
    pub max_new_tokens: usize,
    /// 0: greedy (the most likely token). Otherwise logits are divided by it before sampling.
    pub temperature: f32,
    /// Nucleus sampling: the smallest set of tokens whose probability reaches `top_p` (1.0: all).
    pub top_p: f32,
    pub seed: u64,
    /// The logit of every token already in the sequence (each generated token, and the prompt's
    /// last [`penalty_prompt_tokens`](Self::penalty_prompt_tokens)) is divided by this when
    /// positive and multiplied by it when negative, before temperature: either way the token gets
    /// less likely. 1.0: off. Stop tokens are never penalized (a penalty must not keep a sequence
    /// from ending).
    pub repetition_penalty: f32,
    /// How many of the prompt's last tokens the repetition penalty also covers (0: only what was
    /// generated; a summary should be free to reuse the document's names and numbers).
    pub penalty_prompt_tokens: usize,
    /// A token that would complete an n-gram of this many tokens that the generation already
    /// holds is banned (0: off; 1 would ban every generated token). It makes an exact loop
    /// impossible, at a price: a name of n tokens or more can only be written once in full.
    pub no_repeat_ngram: usize,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            max_new_tokens: 256,
            temperature: 0.0,
            top_p: 1.0,
            seed: 0,
            repetition_penalty: 1.0,
            penalty_prompt_tokens: 0,
            no_repeat_ngram: 0,
        }
    }
}

/// How requests share the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BatchOptions {
    /// Most sequences decoding together (1: one request at a time, the baseline).
    pub max_batch: usize,
    /// Most prompt tokens prefilled in one packed forward (a single longer prompt still runs alone).
    pub prefill_tokens: usize,
    /// Most key/value-cache tokens the running sequences may reach together: each sequence reserves
    /// its prompt plus its whole generation budget when it joins, so the caches' growth during
    /// decoding can never pass what the device holds (a single sequence still runs alone).
    pub kv_tokens: usize,
}

impl Default for BatchOptions {
    fn default() -> Self {
        Self { max_batch: 16, prefill_tokens: 4096, kv_tokens: usize::MAX }
    }
}

impl BatchOptions {
    /// The cache tokens that fit in `free_bytes` less a `margin` (0.1: keep 10%) for a model with
    /// `layers` layers of `kv_heads` × `head_dim` keys and values of `dtype_bytes` each.
    pub fn kv_tokens_for(free_bytes: u64, margin: f64, layers: usize, kv_heads: usize, head_dim: usize, dtype_bytes: usize) -> usize {
        let per_token = (2 * layers * kv_heads * head_dim * dtype_bytes).max(1) as f64;
        ((free_bytes as f64 * (1.0 - margin)) / per_token) as usize
    }
}

/// What one request generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// The generated tokens, without the stop token.
    pub tokens: Vec<u32>,
    /// Ended by a stop token (else by `max_new_tokens` or the model's positions).
    pub stopped: bool,
}

/// Counters of one [`generate`] run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct GenerationStats {
    pub prompts: usize,
    pub prompt_tokens: usize,
    /// Packed prefill forwards.
    pub prefills: usize,
    pub prefill_seconds: f64,
    /// Tokens produced by decode steps (each request's first token comes from its prefill).
    pub decode_tokens: usize,
    pub decode_steps: usize,
    pub decode_seconds: f64,
    /// The largest batch a decode step ran.
    pub max_batch_seen: usize,
    /// The most cache tokens the running sequences had reserved at once.
    pub max_kv_reserved: usize,
    /// Seconds from the start of the run to its first token (the end of the first packed prefill):
    /// how long a reader waits before anything can be shown.
    pub first_token_seconds: Option<f64>,
}

/// xorshift64*: a request's own reproducible stream.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, request: usize) -> Self {
        // splitmix64 of (seed, request) so that neighbouring requests get unrelated streams.
        let mut z = seed ^ (request as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What a request's sequence holds when its next token is chosen.
#[derive(Debug, Clone, Copy, Default)]
struct History<'a> {
    prompt: &'a [u32],
    generated: &'a [u32],
    /// Tokens the repetition penalty leaves alone (the stop tokens).
    exempt: &'a [u32],
}

/// Applies the repetition penalty and no-repeat n-gram blocking of `params` to one row of logits,
/// in place. A ban that would leave no token at all is dropped (only possible with a vocabulary
/// smaller than what was generated).
fn apply_repetition_controls(logits: &mut [f32], history: &History, params: &SamplingParams) {
    let vocab = logits.len();
    if params.repetition_penalty != 1.0 && params.repetition_penalty > 0.0 {
        let window = params.penalty_prompt_tokens.min(history.prompt.len());
        let mut seen: Vec<u32> = history.prompt[history.prompt.len() - window..].iter().chain(history.generated).copied().collect();
        seen.sort_unstable();
        seen.dedup();
        for t in seen {
            let i = t as usize;
            if i < vocab && !history.exempt.contains(&t) {
                let x = logits[i];
                logits[i] = if x > 0.0 { x / params.repetition_penalty } else { x * params.repetition_penalty };
            }
        }
    }
    let n = params.no_repeat_ngram;
    let g = history.generated;
    if n > 0 && g.len() + 1 >= n {
        // The n-gram this token would complete starts with the last n - 1 generated tokens; every
        // earlier occurrence of those bans the token that followed it.
        let prefix = &g[g.len() + 1 - n..];
        let mut banned: Vec<u32> = g.windows(n).filter(|w| &w[..n - 1] == prefix).map(|w| w[n - 1]).collect();
        banned.sort_unstable();
        banned.dedup();
        banned.retain(|&t| (t as usize) < vocab);
        if banned.len() < vocab {
            for t in banned {
                logits[t as usize] = f32::NEG_INFINITY;
            }
        }
    }
}

/// Picks the next token from one row of logits, after the repetition controls of `params`.
fn sample(logits: &mut [f32], history: &History, params: &SamplingParams, rng: &mut Rng) -> u32 {
    apply_repetition_controls(logits, history, params);
    let logits = &*logits;
    let argmax = || {
        let mut best = 0;
        for (i, &x) in logits.iter().enumerate() {
            if x > logits[best] {
                best = i;
            }
        }
        best as u32
    };
    if params.temperature <= 0.0 {
        return argmax();
    }
    let t = params.temperature as f64;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let mut probs: Vec<(u32, f64)> = logits.iter().enumerate().map(|(i, &x)| (i as u32, ((x as f64 - max) / t).exp())).collect();
    let z: f64 = probs.iter().map(|p| p.1).sum();
    probs.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Keep the head whose mass reaches top_p (at least one token).
    let top_p = (params.top_p as f64).clamp(0.0, 1.0);
    let mut kept = 0;
    let mut mass = 0.0;
    for p in &probs {
        kept += 1;
        mass += p.1 / z;
        if mass >= top_p {
            break;
        }
    }
    let mut r = rng.next_f64() * mass * z;
    for p in &probs[..kept] {
        r -= p.1;
        if r <= 0.0 {
            return p.0;
        }
    }
    probs[kept - 1].0
}

struct Active {
    request: usize,
    next: u32,
    cache: SeqCache,
    budget: usize,
    /// The cache tokens it reserved when it joined (its prompt and budget, in whole blocks).
    reserved: usize,
}

/// Generates a continuation of every prompt: packed prefill of the prompts that join, batched
/// decode of all that are running, finished ones leaving and waiting ones joining after every
/// step. Results are in request order; `on_done(request, &generation)` is called as each ends.
pub fn generate(
    model: &LlamaModel,
    prompts: &[Vec<u32>],
    stop: &[u32],
    params: &SamplingParams,
    opts: BatchOptions,
    mut on_done: impl FnMut(usize, &Generation),
) -> Result<(Vec<Generation>, GenerationStats)> {
    let max_pos = model.config.max_position_embeddings;
    for (i, p) in prompts.iter().enumerate() {
        if p.is_empty() {
            candle_core::bail!("prompt {i} is empty");
        }
        if p.len() >= max_pos {
            candle_core::bail!("prompt {i} has {} tokens; the model has {max_pos} positions", p.len());
        }
    }
    let run_started = Instant::now();
    let mut stats = GenerationStats { prompts: prompts.len(), ..Default::default() };
    let mut results: Vec<Option<Generation>> = vec![None; prompts.len()];
    let mut outputs: Vec<Vec<u32>> = vec![Vec::new(); prompts.len()];
    let mut rngs: Vec<Rng> = (0..prompts.len()).map(|i| Rng::new(params.seed, i)).collect();
    let mut waiting = 0..prompts.len();
    let mut waiting_next = waiting.next();
    let mut active: Vec<Active> = Vec::new();
    let max_batch = opts.max_batch.max(1);
    // What each request reserves when it joins: its prompt and whole budget, in whole blocks.
    let need = |r: usize| {
        let len = prompts[r].len();
        kv_blocks(len + params.max_new_tokens.min(max_pos - len).max(1)) * KV_BLOCK
    };
    // The pool is taken once, as large as the cache budget or as the largest batch could need,
    // whichever is less (a request larger than the budget runs alone and grows it).
    let mut needs: Vec<usize> = (0..prompts.len()).map(need).collect();
    needs.sort_unstable_by(|a, b| b.cmp(a));
    let most = needs.iter().take(max_batch).sum::<usize>().min(opts.kv_tokens);
    let mut pool = KvPool::with_blocks(model, most / KV_BLOCK)?;
    // WARPFOLD_PROFILE=1: where prefills' and decode steps' time goes, stage by stage (the device
    // synchronized around each stage, so the run itself is slower).
    let profiling = stage_profile::enabled();
    let (mut prefill_times, mut decode_times) = (Vec::new(), Vec::new());
    if profiling {
        stage_profile::take();
    }
    let finish = |request: usize,
                  stopped: bool,
                  outputs: &mut Vec<Vec<u32>>,
                  results: &mut Vec<Option<Generation>>,
                  on_done: &mut dyn FnMut(usize, &Generation)| {
        let g = Generation { tokens: std::mem::take(&mut outputs[request]), stopped };
        on_done(request, &g);
        results[request] = Some(g);
    };
    loop {
        // 1. Join: prompts fill the free places, as many as one packed prefill takes.
        let mut joining = Vec::new();
        let mut tokens = 0;
        let mut reserved: usize = active.iter().map(|a| a.reserved).sum();
        while let Some(r) = waiting_next {
            let len = prompts[r].len();
            let alone = active.is_empty() && joining.is_empty();
            if active.len() + joining.len() >= max_batch
                || (!joining.is_empty() && tokens + len > opts.prefill_tokens)
                || (!alone && reserved + need(r) > opts.kv_tokens)
            {
                break;
            }
            joining.push(r);
            tokens += len;
            reserved += need(r);
            waiting_next = waiting.next();
        }
        stats.max_kv_reserved = stats.max_kv_reserved.max(reserved);
        if !joining.is_empty() {
            let started = Instant::now();
            let refs: Vec<&[u32]> = joining.iter().map(|&r| prompts[r].as_slice()).collect();
            let budgets: Vec<usize> = joining.iter().map(|&r| params.max_new_tokens.min(max_pos - prompts[r].len())).collect();
            let (logits, caches) = model.prefill(&mut pool, &prompt_bin(&refs), &budgets)?;
            let logits = logits.to_vec2::<f32>()?;
            if profiling {
                stage_profile::add(&mut prefill_times, stage_profile::take());
            }
            stats.prefills += 1;
            stats.prompt_tokens += tokens;
            stats.prefill_seconds += started.elapsed().as_secs_f64();
            stats.first_token_seconds.get_or_insert(run_started.elapsed().as_secs_f64());
            for (((r, mut row), cache), budget) in joining.into_iter().zip(logits).zip(caches).zip(budgets) {
                let done = if budget == 0 {
                    Some(false)
                } else {
                    let history = History { prompt: &prompts[r], generated: &outputs[r], exempt: stop };
                    let t = sample(&mut row, &history, params, &mut rngs[r]);
                    if stop.contains(&t) {
                        Some(true)
                    } else {
                        outputs[r].push(t);
                        if budget == 1 {
                            Some(false)
                        } else {
                            active.push(Active { request: r, next: t, cache, budget, reserved: need(r) });
                            continue;
                        }
                    }
                };
                pool.release(cache);
                if let Some(stopped) = done {
                    finish(r, stopped, &mut outputs, &mut results, &mut on_done);
                }
            }
            // Fill every free place before decoding, unless the prefill budget stopped it.
            if active.len() < max_batch && waiting_next.is_some() {
                continue;
            }
        }
        if active.is_empty() {
            if waiting_next.is_none() {
                break;
            }
            continue;
        }
        // 2. One decode step for every running sequence.
        let started = Instant::now();
        let tokens: Vec<u32> = active.iter().map(|a| a.next).collect();
        let mut caches: Vec<SeqCache> = active.iter_mut().map(|a| std::mem::take(&mut a.cache)).collect();
        let logits = model.decode_step(&mut pool, &tokens, &mut caches)?;
        let logits = stage("logits to the host", || logits.to_vec2::<f32>())?;
        if profiling {
            stage_profile::add(&mut decode_times, stage_profile::take());
        }
        for (a, c) in active.iter_mut().zip(caches) {
            a.cache = c;
        }
        stats.decode_steps += 1;
        stats.decode_tokens += active.len();
        stats.max_batch_seen = stats.max_batch_seen.max(active.len());
        stats.decode_seconds += started.elapsed().as_secs_f64();
        // 3. Sample; finished sequences leave and give their blocks back.
        let mut still = Vec::with_capacity(active.len());
        for (mut a, mut row) in active.into_iter().zip(logits) {
            let history = History { prompt: &prompts[a.request], generated: &outputs[a.request], exempt: stop };
            let t = sample(&mut row, &history, params, &mut rngs[a.request]);
            let produced = outputs[a.request].len() + 1;
            let stopped = stop.contains(&t);
            if !stopped {
                outputs[a.request].push(t);
            }
            if stopped || produced >= a.budget {
                finish(a.request, stopped, &mut outputs, &mut results, &mut on_done);
                pool.release(std::mem::take(&mut a.cache));
            } else {
                a.next = t;
                still.push(a);
            }
        }
        active = still;
    }
    if profiling {
        stage_profile::print(&format!("generation prefills ({} prompt tokens)", stats.prompt_tokens), stats.prefills, &prefill_times);
        let mean = stats.decode_tokens as f64 / stats.decode_steps.max(1) as f64;
        stage_profile::print(&format!("generation decode steps (mean batch {mean:.1})"), stats.decode_steps, &decode_times);
    }
    let results = results.into_iter().map(|g| g.expect("every request finishes. This is a bug.")).collect();
    Ok((results, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token chosen from a copy of `logits` for a sequence with nothing generated yet.
    fn fresh(logits: &[f32], params: &SamplingParams, rng: &mut Rng) -> u32 {
        sample(&mut logits.to_vec(), &History::default(), params, rng)
    }

    fn controlled(logits: &[f32], history: &History, params: &SamplingParams) -> Vec<f32> {
        let mut row = logits.to_vec();
        apply_repetition_controls(&mut row, history, params);
        row
    }

    #[test]
    fn greedy_picks_the_largest_logit_and_sampling_respects_top_p() {
        let logits = [0.1f32, 3.0, -1.0, 2.9];
        let greedy = SamplingParams { temperature: 0.0, ..Default::default() };
        assert_eq!(fresh(&logits, &greedy, &mut Rng::new(1, 0)), 1);
        // top_p small: only the most likely token survives, whatever the draw.
        let nucleus = SamplingParams { temperature: 1.0, top_p: 0.1, ..Default::default() };
        let mut rng = Rng::new(7, 3);
        assert!((0..200).all(|_| fresh(&logits, &nucleus, &mut rng) == 1));
        // Probabilities at temperature 1: 0.506, 0.457, 0.028, 0.009 (tokens 1, 3, 0, 2). top_p 0.9
        // keeps tokens 1 and 3 (0.963); top_p 0.99 adds token 0 (0.991); only 1.0 keeps token 2.
        let mut counts = |top_p: f32| {
            let p = SamplingParams { temperature: 1.0, top_p, ..Default::default() };
            let mut seen = [0usize; 4];
            for _ in 0..4000 {
                seen[fresh(&logits, &p, &mut rng) as usize] += 1;
            }
            seen
        };
        let seen = counts(0.9);
        assert!(seen[0] == 0 && seen[2] == 0 && seen[1] > 1500 && seen[3] > 1500, "{seen:?}");
        let seen = counts(0.99);
        assert!(seen[2] == 0 && seen[0] > 30, "{seen:?}");
        let seen = counts(1.0);
        assert!(seen[2] > 5, "{seen:?}");
        let wide = SamplingParams { temperature: 1.0, top_p: 0.99, ..Default::default() };
        // The same seed and request draw the same stream.
        let a: Vec<u32> = {
            let mut r = Rng::new(5, 2);
            (0..20).map(|_| fresh(&logits, &wide, &mut r)).collect()
        };
        let b: Vec<u32> = {
            let mut r = Rng::new(5, 2);
            (0..20).map(|_| fresh(&logits, &wide, &mut r)).collect()
        };
        assert_eq!(a, b);
    }

    /// The penalty as llama.cpp and transformers apply it: a seen token's positive logit divided,
    /// its negative logit multiplied, each seen token once however often it occurred; the prompt
    /// only inside its window; stop tokens never.
    #[test]
    fn the_repetition_penalty_divides_positive_and_multiplies_negative_logits_of_seen_tokens() {
        let logits = [2.0f32, 1.9, -1.0, 0.5, 3.0];
        let params = SamplingParams { repetition_penalty: 2.0, ..Default::default() };
        let generated = [0u32, 2, 0, 0];
        let h = History { prompt: &[4, 3], generated: &generated, exempt: &[] };
        assert_eq!(controlled(&logits, &h, &params), [1.0, 1.9, -2.0, 0.5, 3.0]);
        // A window of one prompt token covers token 3 (the prompt's last), not token 4.
        let windowed = SamplingParams { penalty_prompt_tokens: 1, ..params.clone() };
        assert_eq!(controlled(&logits, &h, &windowed), [1.0, 1.9, -2.0, 0.25, 3.0]);
        let whole = SamplingParams { penalty_prompt_tokens: 99, ..params.clone() };
        assert_eq!(controlled(&logits, &h, &whole), [1.0, 1.9, -2.0, 0.25, 1.5]);
        // Stop tokens keep their logits, so a penalty never keeps a sequence from ending.
        let with_stop = History { exempt: &[4], ..h };
        assert_eq!(controlled(&logits, &with_stop, &whole), [1.0, 1.9, -2.0, 0.25, 3.0]);
        // 1.0 is off.
        let off = SamplingParams { penalty_prompt_tokens: 99, ..Default::default() };
        assert_eq!(controlled(&logits, &h, &off), logits);
        // Greedy: token 0 (2.0) was generated; penalized to 1.0 it loses to token 1 (1.9).
        let greedy = History { prompt: &[], generated: &[0], exempt: &[] };
        assert_eq!(sample(&mut logits[..4].to_vec(), &greedy, &SamplingParams::default(), &mut Rng::new(0, 0)), 0);
        assert_eq!(sample(&mut logits[..4].to_vec(), &greedy, &params, &mut Rng::new(0, 0)), 1);
        // Sampled alike: at temperature 1, token 0 drops from 46% to 24% of the draws.
        let sampled = SamplingParams { temperature: 1.0, ..params.clone() };
        let mut rng = Rng::new(3, 1);
        let zeros = (0..4000).filter(|_| sample(&mut logits[..4].to_vec(), &greedy, &sampled, &mut rng) == 0).count();
        // exp(1) / (exp(1) + exp(1.9) + exp(-1) + exp(0.5)) = 0.238.
        assert!((850..1150).contains(&zeros), "{zeros} of 4000");
    }

    /// A token that would complete an n-gram already generated is banned, greedy and sampled.
    #[test]
    fn no_repeat_ngram_bans_the_token_that_would_repeat_an_ngram() {
        // Token 7 is the most likely; 1 next.
        let logits = [0.0f32, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0];
        // Generated "5 6 7 5 6": a 7 now would repeat the trigram (5, 6, 7).
        let generated = [5u32, 6, 7, 5, 6];
        let h = History { prompt: &[], generated: &generated, exempt: &[] };
        let ngram = |n| SamplingParams { no_repeat_ngram: n, ..Default::default() };
        let banned = |n| {
            controlled(&logits, &h, &ngram(n))
                .iter()
                .enumerate()
                .filter(|(_, x)| **x == f32::NEG_INFINITY)
                .map(|(i, _)| i)
                .collect::<Vec<_>>()
        };
        assert_eq!(banned(3), [7]);
        assert_eq!(banned(2), [7], "the bigram (6, 7)");
        assert_eq!(banned(4), Vec::<usize>::new(), "(7, 5, 6) was never followed by anything");
        assert_eq!(banned(1), [5, 6, 7], "unigrams: every generated token");
        assert_eq!(banned(0), Vec::<usize>::new(), "off");
        assert_eq!(banned(6), Vec::<usize>::new(), "longer than what was generated");
        // Every earlier occurrence of the prefix bans its follower: "3 1 ... 3 2 ... 3" bans 1 and 2.
        let h2 = History { prompt: &[], generated: &[3, 1, 4, 3, 2, 4, 3], exempt: &[] };
        let row = controlled(&logits, &h2, &ngram(2));
        assert!(row[1] == f32::NEG_INFINITY && row[2] == f32::NEG_INFINITY && row[7] == 5.0, "{row:?}");
        // Greedy picks the best token left; sampling never draws a banned one.
        assert_eq!(sample(&mut logits.to_vec(), &h, &SamplingParams::default(), &mut Rng::new(0, 0)), 7);
        assert_eq!(sample(&mut logits.to_vec(), &h, &ngram(3), &mut Rng::new(0, 0)), 1);
        let sampled = SamplingParams { temperature: 1.0, no_repeat_ngram: 3, ..Default::default() };
        let mut rng = Rng::new(9, 0);
        assert!((0..2000).all(|_| sample(&mut logits.to_vec(), &h, &sampled, &mut rng) != 7));
        // The prompt is not the generation: an n-gram that only the prompt holds is allowed.
        let in_prompt = History { prompt: &[5, 6, 7], generated: &[5, 6], exempt: &[] };
        assert_eq!(sample(&mut logits.to_vec(), &in_prompt, &ngram(3), &mut Rng::new(0, 0)), 7);
        // A ban that would leave nothing is dropped rather than picking from nothing.
        let tiny = [1.0f32, 0.5];
        let all = History { prompt: &[], generated: &[0, 1], exempt: &[] };
        assert_eq!(controlled(&tiny, &all, &ngram(1)), tiny);
    }
}

#[cfg(test)]
mod model_tests {
    use super::*;
    use warpfold_candle::test_support::{random_model, variants, Rng as TestRng};

    #[test]
    fn the_cache_budget_bounds_what_runs_together_and_changes_no_output() {
        let (_, cfg) = variants().remove(1);
        let model = random_model(&cfg, 9);
        let mut rng = TestRng(31);
        let prompts: Vec<Vec<u32>> = [5, 17, 9, 30, 8, 12, 3, 21].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
        let params = SamplingParams { max_new_tokens: 10, ..Default::default() };
        let free = BatchOptions { max_batch: 8, prefill_tokens: 4096, kv_tokens: usize::MAX };
        let (unbounded, wide) = generate(&model, &prompts, &[], &params, free, |_, _| {}).unwrap();
        assert_eq!(wide.max_batch_seen, 8);
        // Room for four blocks of 32 at a time: 2 to 4 of these sequences (one needs 2 blocks).
        let tight = BatchOptions { kv_tokens: 4 * KV_BLOCK + 5, ..free };
        let (bounded, stats) = generate(&model, &prompts, &[], &params, tight, |_, _| {}).unwrap();
        assert!(stats.max_kv_reserved <= 4 * KV_BLOCK, "{stats:?}");
        assert!(stats.max_batch_seen >= 2 && stats.max_batch_seen < 8, "{stats:?}");
        assert_eq!(bounded, unbounded, "a budget changes what runs together, never what is generated");
        // A single sequence larger than the budget still runs, alone.
        let (one, stats) = generate(&model, &prompts[3..4], &[], &params, BatchOptions { kv_tokens: 5, ..free }, |_, _| {}).unwrap();
        assert_eq!((one.len(), stats.max_batch_seen), (1, 1));
        // Sized from memory: 2 (k, v) × layers × kv heads × head dim × bytes per value.
        assert_eq!(BatchOptions::kv_tokens_for(1 << 30, 0.0, 30, 3, 64, 2), (1usize << 30) / (2 * 30 * 3 * 64 * 2));
        assert_eq!(BatchOptions::kv_tokens_for(1000, 0.5, 1, 1, 1, 1), 250);
    }

    #[test]
    fn generation_is_the_same_packed_and_batched_as_alone() {
        let (_, cfg) = variants().remove(1);
        let model = random_model(&cfg, 5);
        let mut rng = TestRng(23);
        let prompts: Vec<Vec<u32>> = [5, 17, 1, 30, 8, 12, 3].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
        for params in [
            SamplingParams { max_new_tokens: 12, ..Default::default() },
            SamplingParams { max_new_tokens: 12, temperature: 0.8, top_p: 0.9, seed: 42, ..Default::default() },
            // The repetition controls read only the request's own tokens.
            SamplingParams {
                max_new_tokens: 12,
                repetition_penalty: 1.5,
                penalty_prompt_tokens: 4,
                no_repeat_ngram: 2,
                ..Default::default()
            },
        ] {
            // Three at a time and at most 40 prompt tokens per prefill: sequences join as others end.
            let batched = BatchOptions { max_batch: 3, prefill_tokens: 40, kv_tokens: usize::MAX };
            let stop = [7u32];
            let mut order = Vec::new();
            let (together, stats) = generate(&model, &prompts, &stop, &params, batched, |r, _| order.push(r)).unwrap();
            assert_eq!(stats.max_batch_seen, 3);
            assert!(stats.prefills >= 3, "{stats:?}");
            let mut sorted = order.clone();
            sorted.sort();
            assert_eq!(sorted, (0..prompts.len()).collect::<Vec<_>>(), "every request reported once");
            for (i, p) in prompts.iter().enumerate() {
                let alone = BatchOptions { max_batch: 1, prefill_tokens: 4096, kv_tokens: usize::MAX };
                let (one, _) = generate(&model, std::slice::from_ref(p), &stop, &params, alone, |_, _| {}).unwrap();
                // The alone run is request 0 of its own call: compare with the same seed stream.
                if params.temperature == 0.0 {
                    assert_eq!(together[i], one[0], "prompt {i}");
                }
                assert!(together[i].tokens.len() <= 12);
                assert!(!together[i].tokens.contains(&7));
                assert!(together[i].stopped || together[i].tokens.len() == 12);
            }
            // Sampled: the same call in one-at-a-time mode draws exactly the same tokens.
            let (sequential, _) = generate(
                &model,
                &prompts,
                &stop,
                &params,
                BatchOptions { max_batch: 1, prefill_tokens: 4096, kv_tokens: usize::MAX },
                |_, _| {},
            )
            .unwrap();
            assert_eq!(together, sequential);
        }
    }

    /// Greedy decoding of a random model falls into a loop; with no-repeat n-gram blocking no
    /// n-gram occurs twice in what it generates, and the penalty alone already breaks the loop.
    #[test]
    fn greedy_generation_that_loops_repeats_no_ngram_under_blocking() {
        let (_, cfg) = variants().remove(1);
        let model = random_model(&cfg, 5);
        let mut rng = TestRng(41);
        let prompts: Vec<Vec<u32>> = [6, 11, 3].iter().map(|&l| rng.ids(l, cfg.vocab_size)).collect();
        let opts = BatchOptions { max_batch: 3, prefill_tokens: 4096, kv_tokens: usize::MAX };
        let repeats = |tokens: &[u32], n: usize| {
            let mut grams: Vec<&[u32]> = tokens.windows(n).collect();
            let all = grams.len();
            grams.sort();
            grams.dedup();
            all - grams.len()
        };
        let run = |params: SamplingParams| generate(&model, &prompts, &[], &params, opts, |_, _| {}).unwrap().0;
        let plain = run(SamplingParams { max_new_tokens: 40, ..Default::default() });
        assert!(plain.iter().all(|g| repeats(&g.tokens, 3) > 5), "greedy on random weights loops: {plain:?}");
        for n in [2, 3] {
            let blocked = run(SamplingParams { max_new_tokens: 40, no_repeat_ngram: n, ..Default::default() });
            for g in &blocked {
                assert_eq!(g.tokens.len(), 40);
                assert_eq!(repeats(&g.tokens, n), 0, "n = {n}: {:?}", g.tokens);
            }
        }
        let penalized = run(SamplingParams { max_new_tokens: 40, repetition_penalty: 1.5, ..Default::default() });
        for (p, g) in plain.iter().zip(&penalized) {
            assert!(repeats(&g.tokens, 3) < repeats(&p.tokens, 3), "{:?} vs {:?}", g.tokens, p.tokens);
        }
    }
}
