//! The chat model as a reranker: for each (question, passage) pair it is asked whether the passage
//! answers the question, and the pair's relevance is how much more it expects "yes" than "no" as
//! the first word of its reply (the logits of the prompt's last token: a prefill, no decoding).
//!
//! Why the chat model: no cross-encoder ships in the package registries this project can reach,
//! and the chat model is already on the machine for answers. Why prefill only: a judgement is one
//! token's logits, so every pair is one sequence of a packed bin, as the embedder packs chunks;
//! nothing is generated and no cache is kept.

use candle_core::{IndexOp, Tensor};
use warpfold_candle::generate::prompt_bin;

use crate::{ChatError, ChatModel};

pub const SYSTEM_PROMPT: &str = "You judge whether a passage of a document answers a question.";

/// The most tokens of a passage the judge reads (a longer one is cut: its start is kept).
pub const PASSAGE_TOKENS: usize = 384;
/// The most prompt tokens packed into one forward.
const BIN_TOKENS: usize = 4096;

/// The user message for one pair.
pub fn prompt(question: &str, passage: &str) -> String {
    format!("Passage:\n{}\n\nQuestion: {}\nDoes the passage answer the question? Reply with yes or no.", passage.trim(), question.trim())
}

/// The vocabulary's spellings of a reply's first word "yes" and "no".
#[derive(Debug, Clone, PartialEq)]
pub struct Verdicts {
    yes: Vec<u32>,
    no: Vec<u32>,
}

impl Verdicts {
    pub fn of(chat: &ChatModel) -> Result<Verdicts, ChatError> {
        let ids = |words: &[&str]| -> Vec<u32> {
            let mut ids: Vec<u32> = words.iter().filter_map(|w| chat.tokenizer.token_to_id(w)).collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        };
        let verdicts = Verdicts { yes: ids(&["yes", "Yes", "YES"]), no: ids(&["no", "No", "NO"]) };
        if verdicts.yes.is_empty() || verdicts.no.is_empty() {
            return Err(ChatError::Inference(
                "the chat model's vocabulary has no single token for \"yes\" or \"no\": it cannot rerank".into(),
            ));
        }
        Ok(verdicts)
    }

    /// log P(yes) - log P(no) from one row of logits (each side summed over its spellings).
    pub fn relevance(&self, logits: &[f32]) -> f32 {
        let side = |ids: &[u32]| {
            let values: Vec<f32> = ids.iter().filter_map(|&i| logits.get(i as usize).copied()).collect();
            let top = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            top + values.iter().map(|v| (v - top).exp()).sum::<f32>().ln()
        };
        side(&self.yes) - side(&self.no)
    }
}

/// How relevant each passage is to `question` (higher: more; comparable across passages of one
/// question), in the passages' order. The pairs are packed into bins of at most 4,096 tokens.
pub fn relevance(chat: &ChatModel, question: &str, passages: &[&str]) -> Result<Vec<f32>, ChatError> {
    let verdicts = Verdicts::of(chat)?;
    let mut prompts = Vec::with_capacity(passages.len());
    for passage in passages {
        prompts.push(chat.encode_chat(SYSTEM_PROMPT, &prompt(question, &cut(chat, passage)?))?);
    }
    let mut scores = Vec::with_capacity(prompts.len());
    for bin in bins(&prompts) {
        let refs: Vec<&[u32]> = bin.iter().map(|&i| prompts[i].as_slice()).collect();
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let logits: Tensor = chat.model.last_logits(&prompt_bin(&refs))?;
            (0..refs.len()).map(|r| logits.i(r)?.to_vec1::<f32>()).collect()
        };
        let rows = run().map_err(|e| ChatError::Inference(e.to_string()))?;
        scores.extend(rows.iter().map(|row| verdicts.relevance(row)));
    }
    Ok(scores)
}

/// How many of a question's best hits the chat model judges when it runs on a GPU and the asker
/// did not say: on the known-item sets, judging the first 10 hits of MiniLM's hybrid search raised
/// nDCG@10 from 0.704 to 0.803 (man pages) and 0.646 to 0.700 (handbook), at 237-411 pairs/s on an
/// H100; `ask --rerank 20` raised answers holding their fact from 71% to 75% there. On a CPU a
/// pair takes about three seconds, so nothing is judged unless asked (BENCHMARKS.md).
pub const ON_GPU: usize = 20;

/// The default number of candidates judged with `chat`: [`ON_GPU`] on a GPU, none on a CPU.
pub fn default_candidates(chat: &ChatModel) -> usize {
    if chat.model.device().is_cuda() {
        ON_GPU
    } else {
        0
    }
}

/// `candidates` (best first by search) judged for `question` by their `text`, the best `keep` of
/// them by the judgement; with one candidate or none, as they are. Also how many pairs were judged.
pub fn best_of<T>(
    chat: &ChatModel,
    question: &str,
    candidates: Vec<T>,
    text: impl Fn(&T) -> &str,
    keep: usize,
) -> Result<(Vec<T>, usize), ChatError> {
    if candidates.len() <= 1 {
        return Ok((candidates, 0));
    }
    let texts: Vec<&str> = candidates.iter().map(&text).collect();
    let scores = relevance(chat, question, &texts)?;
    let judged = scores.len();
    Ok((best_first(candidates, &scores, keep), judged))
}

/// The `keep` items with the highest scores, best first (equal scores keep their order).
pub fn best_first<T>(items: Vec<T>, scores: &[f32], keep: usize) -> Vec<T> {
    let mut scored: Vec<(f32, usize, T)> =
        items.into_iter().enumerate().map(|(i, t)| (scores.get(i).copied().unwrap_or(f32::MIN), i, t)).collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(keep).map(|(_, _, t)| t).collect()
}

/// The passage's first [`PASSAGE_TOKENS`] tokens, as text.
fn cut(chat: &ChatModel, passage: &str) -> Result<String, ChatError> {
    let encoding = chat.tokenizer.encode_fast(passage, false).map_err(|e| ChatError::Inference(format!("tokenizing: {e}")))?;
    if encoding.len() <= PASSAGE_TOKENS {
        return Ok(passage.to_string());
    }
    let end = encoding.get_offsets()[PASSAGE_TOKENS - 1].1;
    Ok(passage[..end.min(passage.len())].to_string())
}

/// The prompts' indices in order, grouped into bins of at most [`BIN_TOKENS`] tokens (a longer
/// prompt alone).
fn bins(prompts: &[Vec<u32>]) -> Vec<Vec<usize>> {
    let mut bins: Vec<Vec<usize>> = Vec::new();
    let mut tokens = 0;
    for (i, p) in prompts.iter().enumerate() {
        match bins.last_mut() {
            Some(bin) if tokens + p.len() <= BIN_TOKENS => bin.push(i),
            _ => {
                bins.push(vec![i]);
                tokens = 0;
            }
        }
        tokens += p.len();
    }
    bins
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relevance_is_how_much_more_yes_than_no() {
        let v = Verdicts { yes: vec![1, 2], no: vec![3] };
        let logits = [0.0, 2.0, 2.0, 1.0];
        // log(e^2 + e^2) - 1 = 1 + ln 2
        assert!((v.relevance(&logits) - (1.0 + 2f32.ln())).abs() < 1e-5);
        let flipped = [0.0, -1.0, -1.0, 3.0];
        assert!(v.relevance(&flipped) < 0.0);
    }

    #[test]
    fn bins_hold_at_most_their_tokens_and_every_prompt_once() {
        let prompts: Vec<Vec<u32>> = [3000, 1000, 200, 5000, 10].iter().map(|&n| vec![0; n]).collect();
        assert_eq!(bins(&prompts), vec![vec![0, 1], vec![2], vec![3], vec![4]]);
        assert!(bins(&[]).is_empty());
    }

    #[test]
    fn the_best_come_first_and_ties_keep_their_order() {
        assert_eq!(best_first(vec!["a", "b", "c", "d"], &[0.5, 2.0, 0.5, -1.0], 3), ["b", "a", "c"]);
        assert_eq!(best_first(vec!["a", "b"], &[1.0, 1.0], 5), ["a", "b"]);
    }

    #[test]
    fn the_prompt_gives_the_passage_then_the_question() {
        let p = prompt(" How deep? ", "\nSow seeds 1 cm deep.\n");
        assert_eq!(p, "Passage:\nSow seeds 1 cm deep.\n\nQuestion: How deep?\nDoes the passage answer the question? Reply with yes or no.");
    }
}
