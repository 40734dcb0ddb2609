//! Answers to a question from passages of the user's documents: the chat model answers from the
//! numbered passages it is given and cites them inline ("[2]"); each answer is checked like a
//! summary, and says so when the passages do not hold it.
//!
//! Why a closed book of passages and a check: a small model asked a question answers it, from
//! what it half-remembers if the passages do not say. Told to use only the passages and to reply
//! [`NOT_FOUND`] otherwise, it mostly does; what it still invents is what the summaries' check
//! catches ([`grounding`]): every figure, date and name of a sentence must be in the passages that
//! sentence cites (in any passage given, when it cites none). A sentence that fails is dropped and
//! kept aside, so the reader sees what was removed and why.

use candle_core::Result as CandleResult;

use crate::generate::{generate, BatchOptions, SamplingParams};
use crate::grounding::{self, RemovedSentence, Source};
use crate::{ChatError, ChatModel};

/// What the model is told to reply, and what [`Answer::answer`] says, when the passages do not
/// hold the answer.
pub const NOT_FOUND: &str = "Not in your documents.";

pub const SYSTEM_PROMPT: &str = "You answer questions about the user's documents using only the numbered passages you are given.";

/// A passage of a document given to the model as `[n]`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Passage {
    pub path: String,
    /// 1-based.
    pub page: u32,
    pub text: String,
}

/// A passage the answer cites: its number in the prompt, where it is, and its text.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Citation {
    pub n: usize,
    pub path: String,
    pub page: u32,
    pub text: String,
}

/// An answer, the passages it cites, and what its check removed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Answer {
    /// The answer with its citation marks, or [`NOT_FOUND`].
    pub answer: String,
    pub citations: Vec<Citation>,
    /// False when the model found no answer in the passages or every sentence it wrote failed
    /// the check.
    pub answerable: bool,
    /// Sentences dropped for stating a figure, date or name the passages they cite do not hold.
    pub removed: Vec<RemovedSentence>,
    /// What the model wrote, when the check changed it.
    pub draft: Option<String>,
    pub prompt_tokens: usize,
    pub output_tokens: usize,
}

/// The user message: the question, the passages, each numbered with its file and page, then the
/// question again with what to do with it: a small model reads the passages for the question it
/// has seen, and the instruction is the last thing it reads before answering.
pub fn prompt(question: &str, passages: &[Passage]) -> String {
    let question = question.trim();
    let mut out = format!("Question: {question}\n\nPassages from the user's documents:\n\n");
    for (i, p) in passages.iter().enumerate() {
        let name = std::path::Path::new(&p.path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| p.path.clone());
        out.push_str(&format!("[{}] ({name}, page {})\n{}\n\n", i + 1, p.page, p.text.trim()));
    }
    out.push_str(&format!(
        "Question: {question}\n\
         Answer in one or two full sentences. Copy the names, numbers, amounts and dates exactly as the passage writes them, \
         and end each sentence with the number of the passage it comes from in brackets, like [2]. \
         If no passage answers the question, reply: {NOT_FOUND}"
    ));
    out
}

/// Answers `question` from `passages` with `chat`.
pub fn answer(chat: &ChatModel, question: &str, passages: &[Passage], sampling: &SamplingParams) -> Result<Answer, ChatError> {
    Ok(answer_all(chat, &[(question, passages)], sampling)?.pop().expect("one answer per question"))
}

/// Answers every (question, passages) pair with `chat`, all together: the prompts prefilled
/// packed and decoded in one batch, as summaries are.
pub fn answer_all(chat: &ChatModel, asked: &[(&str, &[Passage])], sampling: &SamplingParams) -> Result<Vec<Answer>, ChatError> {
    let mut prompts = Vec::new();
    let mut which = Vec::new();
    for (i, (question, passages)) in asked.iter().enumerate() {
        if !passages.is_empty() {
            prompts.push(chat.encode_chat(SYSTEM_PROMPT, &prompt(question, passages))?);
            which.push(i);
        }
    }
    let mut out: Vec<Answer> = asked.iter().map(|_| not_found(Vec::new(), None, 0, 0)).collect();
    if prompts.is_empty() {
        return Ok(out);
    }
    let run = || -> CandleResult<_> { generate(&chat.model, &prompts, &chat.stop_ids, sampling, BatchOptions::default(), |_, _| {}) };
    let (generations, _) = run().map_err(|e| ChatError::Inference(e.to_string()))?;
    for ((g, i), ids) in generations.into_iter().zip(which).zip(&prompts) {
        let text = chat.decode(&g.tokens)?;
        let text = if g.stopped { text.trim().to_string() } else { crate::output::end_at_sentence(text.trim()).to_string() };
        out[i] = checked(&text, asked[i].1, ids.len(), g.tokens.len());
    }
    Ok(out)
}

/// The model's `text` as an [`Answer`]: a refusal read as one; every other sentence kept only
/// when the passages it cites hold its figures, dates and names.
pub fn checked(text: &str, passages: &[Passage], prompt_tokens: usize, output_tokens: usize) -> Answer {
    if is_refusal(text) {
        return not_found(Vec::new(), None, prompt_tokens, output_tokens);
    }
    let all: String = passages.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n");
    let mut kept = Vec::new();
    let mut removed = Vec::new();
    let mut cited: Vec<usize> = Vec::new();
    for sentence in grounding::sentences(text) {
        // a refusal after an answer ("... [1]. Not in your documents.") adds nothing
        if is_refusal(sentence) {
            continue;
        }
        let (plain, mut marks) = citation_marks(sentence, passages.len());
        // "1.", "Yes": a fragment is not an answer
        if plain.split_whitespace().filter(|w| w.chars().any(char::is_alphanumeric)).count() < 2 {
            continue;
        }
        let source = if marks.is_empty() {
            Source::new(&all)
        } else {
            Source::new(&marks.iter().map(|&n| passages[n - 1].text.as_str()).collect::<Vec<_>>().join("\n"))
        };
        let unsupported = source.unsupported(&plain);
        if unsupported.is_empty() && marks.is_empty() {
            // cited by none: the passage that holds it and shares most of its words
            marks.extend(best_passage(&plain, passages));
        }
        if unsupported.is_empty() {
            for n in marks {
                if !cited.contains(&n) {
                    cited.push(n);
                }
            }
            kept.push(sentence);
        } else {
            removed.push(RemovedSentence { sentence: sentence.to_string(), items: unsupported });
        }
    }
    let draft = (!removed.is_empty()).then(|| text.to_string());
    if kept.is_empty() {
        return not_found(removed, draft, prompt_tokens, output_tokens);
    }
    let citations = cited
        .into_iter()
        .map(|n| {
            let p = &passages[n - 1];
            Citation { n, path: p.path.clone(), page: p.page, text: p.text.clone() }
        })
        .collect();
    Answer { answer: kept.join(" "), citations, answerable: true, removed, draft, prompt_tokens, output_tokens }
}

/// The passage (1-based) that supports every item of `sentence` and holds most of its words.
fn best_passage(sentence: &str, passages: &[Passage]) -> Option<usize> {
    let words: Vec<String> = sentence
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
        .filter(|w| w.chars().count() >= 2)
        .collect();
    passages
        .iter()
        .enumerate()
        .filter(|(_, p)| Source::new(&p.text).unsupported(sentence).is_empty())
        .map(|(i, p)| {
            let text = p.text.to_lowercase();
            (words.iter().filter(|w| text.contains(w.as_str())).count(), i)
        })
        .filter(|&(shared, _)| shared > 0)
        // the most words shared; the better-ranked passage on a tie
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(_, i)| i + 1)
}

fn not_found(removed: Vec<RemovedSentence>, draft: Option<String>, prompt_tokens: usize, output_tokens: usize) -> Answer {
    Answer { answer: NOT_FOUND.to_string(), citations: Vec::new(), answerable: false, removed, draft, prompt_tokens, output_tokens }
}

/// Whether the model said the passages do not hold the answer (in the words it was told to use,
/// or close to them).
fn is_refusal(text: &str) -> bool {
    let t = text.trim().trim_end_matches('.').to_lowercase();
    let wanted = NOT_FOUND.trim_end_matches('.').to_lowercase();
    t == wanted
        || (t.starts_with(&wanted) && t.len() < wanted.len() + 40)
        || t.contains("passages do not contain")
        || t.contains("passages do not mention")
        || t.contains("not mentioned in the passages")
}

/// `sentence` without its citation marks ("[1]", "[1, 3]", "[2][3]"), and the passages they name
/// (1-based, in `1..=count`; other numbers in brackets are left in the text).
fn citation_marks(sentence: &str, count: usize) -> (String, Vec<usize>) {
    let mut plain = String::with_capacity(sentence.len());
    let mut marks = Vec::new();
    let mut rest = sentence;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else { break };
        let inside = &rest[open + 1..close];
        let numbers: Option<Vec<usize>> =
            inside.split([',', ';']).map(|n| n.trim().parse::<usize>().ok().filter(|&n| (1..=count).contains(&n))).collect();
        plain.push_str(&rest[..open]);
        match numbers {
            Some(ns) if !ns.is_empty() => marks.extend(ns.into_iter().filter(|n| !marks.contains(n)).collect::<Vec<_>>()),
            _ => plain.push_str(&rest[open..=close]),
        }
        rest = &rest[close + 1..];
    }
    plain.push_str(rest);
    (plain.split_whitespace().collect::<Vec<_>>().join(" "), marks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passages() -> Vec<Passage> {
        vec![
            Passage { path: "/docs/lease.pdf".into(), page: 2, text: "The tenant pays a one-time security deposit of 2,900 euros.".into() },
            Passage { path: "/docs/invoice.pdf".into(), page: 1, text: "Interest of 1.5% per month accrues after 30 days.".into() },
        ]
    }

    #[test]
    fn the_prompt_numbers_each_passage_with_its_file_and_page() {
        let p = prompt("How much is the deposit?", &passages());
        assert!(p.contains("[1] (lease.pdf, page 2)\nThe tenant pays"), "{p}");
        assert!(p.contains("[2] (invoice.pdf, page 1)\nInterest"), "{p}");
        assert!(p.starts_with("Question: How much is the deposit?"));
        assert!(p.find("[2] (").unwrap() < p.rfind("Question: How much is the deposit?").unwrap());
        assert!(p.ends_with(NOT_FOUND));
    }

    #[test]
    fn citation_marks_name_passages_and_other_brackets_stay() {
        assert_eq!(citation_marks("It is 2,900 euros [1].", 2), ("It is 2,900 euros .".into(), vec![1]));
        assert_eq!(citation_marks("Both [1, 2] and [2][1].", 2), ("Both and .".into(), vec![1, 2]));
        assert_eq!(citation_marks("See clause [7] and [a].", 2), ("See clause [7] and [a].".into(), vec![]));
    }

    #[test]
    fn a_cited_answer_keeps_its_citations_and_an_invented_figure_is_dropped() {
        let a = checked("The deposit is 2,900 euros, paid once [1]. Late interest is 1.5% per month [2].", &passages(), 10, 5);
        assert!(a.answerable);
        assert_eq!(a.citations.iter().map(|c| (c.n, c.page)).collect::<Vec<_>>(), [(1, 2), (2, 1)]);
        assert!(a.removed.is_empty() && a.draft.is_none());

        // the figure is in passage 2, not in passage 1 which the sentence cites
        let a = checked("The deposit is 2,900 euros [1]. Interest is 1.5% per month [1].", &passages(), 10, 5);
        assert_eq!(a.answer, "The deposit is 2,900 euros [1].");
        assert_eq!(a.removed.len(), 1);
        assert_eq!(a.removed[0].items, ["1.5% per month"]);
        assert_eq!(a.citations.len(), 1);

        // a sentence without a mark is checked against every passage, and cites the one holding it
        let a = checked("Interest is 1.5% per month.", &passages(), 10, 5);
        assert!(a.answerable);
        assert_eq!(a.citations.iter().map(|c| c.n).collect::<Vec<_>>(), [2]);
        // a fragment is no answer
        assert!(!checked("1.", &passages(), 10, 5).answerable);
    }

    #[test]
    fn a_refusal_or_an_answer_with_nothing_true_left_is_not_found() {
        for text in ["Not in your documents.", "not in your documents", "The passages do not contain the answer to this question."] {
            let a = checked(text, &passages(), 10, 5);
            assert!(!a.answerable && a.citations.is_empty() && a.removed.is_empty(), "{text}");
            assert_eq!(a.answer, NOT_FOUND);
        }
        let a = checked("The deposit is 3,100 euros [1].", &passages(), 10, 5);
        assert!(!a.answerable);
        assert_eq!(a.answer, NOT_FOUND);
        assert_eq!(a.removed[0].items, ["3,100 euros"]);
        assert!(a.draft.is_some());
        // an answer followed by a refusal keeps the answer
        let a = checked("The deposit is 2,900 euros [1]. Not in your documents.", &passages(), 10, 5);
        assert!(a.answerable);
        assert_eq!(a.answer, "The deposit is 2,900 euros [1].");
    }
}
