//! Answers to a question from passages of the user's documents: the chat model reads each passage
//! for the question, answers from it or says it does not say, and the first passage (best first)
//! that answers gives the answer and its citation ("[2]": file and page); each answer is checked
//! like a summary, and says so when no passage holds it.
//!
//! Why passages one by one, a closed book and a check: a small model asked a question answers it,
//! from what it half-remembers if the passages do not say, and given five passages at once it
//! misses the one that answers. Told to use only one passage and to reply [`NOT_FOUND`] otherwise,
//! it mostly does; what it still invents is what the summaries' check catches ([`grounding`]):
//! every figure, date and name of a sentence must be in the passage it cites (or the question). A
//! sentence that fails is dropped and kept aside, so the reader sees what was removed and why.

use candle_core::Result as CandleResult;

use crate::generate::{generate, BatchOptions, GenerationStats, SamplingParams};
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

/// The user message for one passage: the passage numbered `n` with its file and page, then the
/// question and what to do with it (the question also before the passage made the model answer
/// "not in your documents" for every passage of the lease whose deposit it was asked). One passage
/// at a time: asked about five
/// at once, Qwen2.5-Coder-1.5B answered "not in your documents" for 3 of 6 questions whose answer
/// was in the second passage; a small model reads one passage for the question well, and the
/// passages of a question are prefilled packed and decoded together, so reading them apart costs
/// little more than reading them in one prompt.
pub fn prompt(question: &str, passage: &Passage, n: usize) -> String {
    prompt_after(question, &[], passage, n)
}

/// An earlier question of the conversation and the answer it got (its citation marks included).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Turn {
    pub question: String,
    pub answer: String,
}

/// What a follow-up is searched with: the last earlier question and this one ("and when is it
/// due?" alone finds nothing; with "How much is the deposit?" before it, it finds the lease).
pub fn follow_up_query(question: &str, earlier: &[Turn]) -> String {
    match earlier.last() {
        Some(turn) => format!("{} {}", turn.question.trim(), question.trim()),
        None => question.trim().to_string(),
    }
}

/// [`prompt`] for a follow-up: the last earlier question and its answer come before the question,
/// so "it" and "that" can be read.
pub fn prompt_after(question: &str, earlier: &[Turn], passage: &Passage, n: usize) -> String {
    let question = question.trim();
    let name =
        std::path::Path::new(&passage.path).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| passage.path.clone());
    let context = match earlier.last() {
        Some(turn) => format!("Earlier question: {}\nEarlier answer: {}\n", turn.question.trim(), without_marks(&turn.answer)),
        None => String::new(),
    };
    format!(
        "Passage [{n}] ({name}, page {}):\n{}\n\n{context}Question: {question}\n\
         Answer the question from the passage in one or two full sentences. Copy the names, numbers, amounts \
         and dates exactly as the passage writes them, and end each sentence with [{n}]. \
         If the passage does not say, reply only: {NOT_FOUND}{}",
        passage.page,
        passage.text.trim(),
        in_the_questions_language(question, &passage.text)
    )
}

/// " Otherwise answer in Russian.": a question asked in another language than English is answered
/// in it ([`warpfold_index::language::question_language`]: a short Latin-script question's
/// language is not guessed, and it gets no such request).
fn in_the_questions_language(question: &str, passage: &str) -> String {
    warpfold_index::language::question_language(question, passage)
        .filter(|l| *l != "eng")
        .and_then(warpfold_index::language::english_name)
        .map(|name| format!(" Otherwise answer in {name}."))
        .unwrap_or_default()
}

/// Answers `question` from `passages` (best first) with `chat`.
pub fn answer(chat: &ChatModel, question: &str, passages: &[Passage], sampling: &SamplingParams) -> Result<Answer, ChatError> {
    Ok(answer_all(chat, &[(question, passages)], sampling)?.pop().expect("one answer per question"))
}

/// Answers every (question, passages) pair with `chat`, all together: each passage is read for its
/// question in a prompt of its own, every prompt prefilled packed and decoded in one batch, as
/// summaries are. A question's answer is the first passage's (best first) that answers it and
/// whose answer passes the check against that passage.
pub fn answer_all(chat: &ChatModel, asked: &[(&str, &[Passage])], sampling: &SamplingParams) -> Result<Vec<Answer>, ChatError> {
    let asked: Vec<Question> = asked.iter().map(|(question, passages)| Question { question, earlier: &[], passages }).collect();
    Ok(answer_questions(chat, &asked, sampling)?.0)
}

/// A question to answer: its words, the conversation before it, and the passages found for it.
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    pub question: &'a str,
    pub earlier: &'a [Turn],
    pub passages: &'a [Passage],
}

/// [`answer_all`] for questions that may follow earlier ones, with the run's counters (its
/// `first_token_seconds` is how long a reader waits for the first word).
///
/// On a CPU each question's best passage is read first, alone, and the other passages only for
/// the questions it does not answer. Why: the answer is the first passage (best first) that
/// answers, and the best one usually does; reading all five together made a reader wait for five
/// prompts' prefill (about 1,900 tokens, 30 s on two cores) when one (about 400) held the answer.
/// The answers are the same either way. A GPU reads all passages at once: its prefill of five is
/// as quick as of one.
pub fn answer_questions(
    chat: &ChatModel,
    asked: &[Question],
    sampling: &SamplingParams,
) -> Result<(Vec<Answer>, GenerationStats), ChatError> {
    let best_first = chat.model.device().is_cpu();
    let mut readings: Vec<Vec<Reading>> = asked.iter().map(|_| Vec::new()).collect();
    let mut stats = GenerationStats::default();
    let first: Vec<(usize, usize)> = asked
        .iter()
        .enumerate()
        .flat_map(|(i, q)| (0..if best_first { q.passages.len().min(1) } else { q.passages.len() }).map(move |j| (i, j)))
        .collect();
    read(chat, asked, &first, sampling, &mut readings, &mut stats)?;
    if best_first {
        let rest: Vec<(usize, usize)> = asked
            .iter()
            .enumerate()
            .filter(|&(i, q)| !answer_of(&readings[i], q).answerable)
            .flat_map(|(i, q)| (1..q.passages.len()).map(move |j| (i, j)))
            .collect();
        read(chat, asked, &rest, sampling, &mut readings, &mut stats)?;
    }
    let answers = readings.iter().zip(asked).map(|(r, q)| answer_of(r, q)).collect();
    Ok((answers, stats))
}

/// A question's answer from the readings of its passages so far ([`chosen`]).
fn answer_of(readings: &[Reading], q: &Question) -> Answer {
    // what the conversation said before may be said again ("the deposit" of the last answer)
    let said = q.earlier.last().map(|t| format!("{}\n{}\n{}", t.question, without_marks(&t.answer), q.question));
    chosen(readings, said.as_deref().unwrap_or(q.question), q.passages)
}

/// Reads each (question, passage) of `pairs` in a prompt of its own, all prefilled packed and
/// decoded in one batch, adding the readings to `readings` and the run to `stats` (the first run's
/// first token is the reader's).
fn read(
    chat: &ChatModel,
    asked: &[Question],
    pairs: &[(usize, usize)],
    sampling: &SamplingParams,
    readings: &mut [Vec<Reading>],
    stats: &mut GenerationStats,
) -> Result<(), ChatError> {
    if pairs.is_empty() {
        return Ok(());
    }
    let prompts = pairs
        .iter()
        .map(|&(i, j)| {
            let q = &asked[i];
            chat.encode_chat(SYSTEM_PROMPT, &prompt_after(q.question, q.earlier, &q.passages[j], j + 1))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let run = || -> CandleResult<_> { generate(&chat.model, &prompts, &chat.stop_ids, sampling, BatchOptions::default(), |_, _| {}) };
    let (generations, run_stats) = run().map_err(|e| ChatError::Inference(e.to_string()))?;
    let earlier_seconds = stats.prefill_seconds + stats.decode_seconds;
    crate::add_stats(stats, &run_stats);
    if stats.first_token_seconds.is_none() {
        stats.first_token_seconds = run_stats.first_token_seconds.map(|s| s + earlier_seconds);
    }
    for ((g, &(i, j)), ids) in generations.into_iter().zip(pairs).zip(&prompts) {
        let text = chat.decode(&g.tokens)?;
        let text = if g.stopped { text.trim().to_string() } else { crate::output::end_at_sentence(text.trim()).to_string() };
        tracing::debug!(question = i, passage = j + 1, %text, "read");
        readings[i].push(Reading { passage: j, text, prompt_tokens: ids.len(), output_tokens: g.tokens.len() });
    }
    Ok(())
}

/// What the model wrote about one passage.
#[derive(Debug, Clone)]
pub struct Reading {
    /// 0-based, in the question's passages.
    pub passage: usize,
    pub text: String,
    pub prompt_tokens: usize,
    pub output_tokens: usize,
}

/// A question's answer from its readings: the first (best passage first) that answers and keeps a
/// sentence through the check, citing that passage; [`NOT_FOUND`] when none does, with what the
/// check removed from every reading.
pub fn chosen(readings: &[Reading], question: &str, passages: &[Passage]) -> Answer {
    let prompt_tokens = readings.iter().map(|r| r.prompt_tokens).sum();
    let output_tokens = readings.iter().map(|r| r.output_tokens).sum();
    let mut removed_all = Vec::new();
    let mut drafts = Vec::new();
    let mut ordered: Vec<&Reading> = readings.iter().collect();
    ordered.sort_by_key(|r| r.passage);
    for r in ordered {
        let Some(passage) = passages.get(r.passage) else { continue };
        let (kept, removed) = checked(&r.text, question, passage, r.passage + 1);
        if !removed.is_empty() {
            drafts.push(r.text.clone());
        }
        if let Some(answer) = kept {
            let draft = (!removed.is_empty()).then(|| r.text.clone());
            let citation = Citation { n: r.passage + 1, path: passage.path.clone(), page: passage.page, text: passage.text.clone() };
            return Answer { answer, citations: vec![citation], answerable: true, removed, draft, prompt_tokens, output_tokens };
        }
        removed_all.extend(removed);
    }
    let draft = (!drafts.is_empty()).then(|| drafts.join("\n"));
    not_found(removed_all, draft, prompt_tokens, output_tokens)
}

/// The model's `text` about `passage` (numbered `n`): None when it is a refusal or nothing is left;
/// otherwise its sentences that state only what the passage holds (or the question: "Brightwater
/// paid 27 million" from a passage that says "we paid"), each ending with its mark `[n]`. The
/// sentences that state more are returned with what they state.
pub fn checked(text: &str, question: &str, passage: &Passage, n: usize) -> (Option<String>, Vec<RemovedSentence>) {
    if is_refusal(text) {
        return (None, Vec::new());
    }
    let source = Source::new(&format!("{question}\n{}", passage.text));
    let mut kept = Vec::new();
    let mut removed = Vec::new();
    for sentence in grounding::sentences(text) {
        // a refusal after an answer ("... [1]. Not in your documents.") adds nothing
        if is_refusal(sentence) {
            continue;
        }
        let plain = without_marks(sentence);
        // "1.", "Yes": a fragment is not an answer
        if plain.split_whitespace().filter(|w| w.chars().any(char::is_alphanumeric)).count() < 2 {
            continue;
        }
        let unsupported = source.unsupported(&plain);
        if unsupported.is_empty() {
            kept.push(with_mark(&plain, n));
        } else {
            removed.push(RemovedSentence { sentence: sentence.to_string(), items: unsupported, kept: None });
        }
    }
    ((!kept.is_empty()).then(|| kept.join(" ")), removed)
}

/// `sentence` with its citation marks ("[1]", "[1, 3]") removed and its spaces collapsed; other
/// brackets ("clause [a]") stay.
fn without_marks(sentence: &str) -> String {
    let mut plain = String::with_capacity(sentence.len());
    let mut rest = sentence;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else { break };
        let inside = &rest[open + 1..close];
        let mark = !inside.trim().is_empty() && inside.split([',', ';']).all(|n| n.trim().parse::<usize>().is_ok());
        plain.push_str(&rest[..open]);
        if !mark {
            plain.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    plain.push_str(rest);
    let plain = plain.split_whitespace().collect::<Vec<_>>().join(" ");
    // "2,900 euros ." → "2,900 euros."
    plain.replace(" .", ".").replace(" ,", ",")
}

/// `sentence` ending with `[n]` before its stop.
fn with_mark(sentence: &str, n: usize) -> String {
    match sentence.strip_suffix(['.', '!', '?']) {
        Some(head) => format!("{head} [{n}]{}", &sentence[head.len()..]),
        None => format!("{sentence} [{n}]"),
    }
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_question_in_another_language_asks_for_an_answer_in_it() {
        let russian = "Ежемесячная арендная плата составляет 45 000 рублей. Квартира сдаётся Ивану Петрову с 1 февраля 2026 года.";
        assert_eq!(in_the_questions_language("How much is the deposit for the flat on Mill Lane?", "The deposit is 1,800 pounds."), "");
        assert_eq!(
            in_the_questions_language("Сколько стоит аренда квартиры на улице Пушкина в месяц?", russian),
            " Otherwise answer in Russian."
        );
        assert_eq!(
            in_the_questions_language("山田花子さんの部屋の家賃はいくらですか？", "家賃は月額9万8千円です。"),
            " Otherwise answer in Japanese."
        );
        assert_eq!(
            in_the_questions_language("王芳租的公寓月租金是多少？", "月租金为6500元，押金为两个月租金。"),
            " Otherwise answer in Chinese."
        );
        let passage = Passage { path: "/a/bail.txt".into(), page: 1, text: "Le dépôt de garantie est de 1 700 euros.".into() };
        let asked = prompt("Quel est le montant du dépôt de garantie pour le logement de la rue des Lilas ?", &passage, 1);
        assert!(asked.ends_with("Otherwise answer in French."), "{asked}");
    }

    use super::*;

    fn passages() -> Vec<Passage> {
        vec![
            Passage { path: "/docs/lease.pdf".into(), page: 2, text: "The tenant pays a one-time security deposit of 2,900 euros.".into() },
            Passage { path: "/docs/invoice.pdf".into(), page: 1, text: "Interest of 1.5% per month accrues after 30 days.".into() },
        ]
    }

    #[test]
    fn the_prompt_numbers_its_passage_with_its_file_and_page() {
        let p = prompt("How much is the deposit?", &passages()[0], 3);
        assert!(p.starts_with("Passage [3] (lease.pdf, page 2):\nThe tenant pays"), "{p}");
        assert!(p.contains("\n\nQuestion: How much is the deposit?\n"), "{p}");
        assert!(p.contains("end each sentence with [3]") && p.ends_with(NOT_FOUND));
    }

    #[test]
    fn a_follow_up_is_searched_and_read_with_the_question_before_it() {
        let earlier = [Turn { question: "How much is the deposit?".into(), answer: "The deposit is 2,900 euros [1].".into() }];
        assert_eq!(follow_up_query(" When is it due? ", &earlier), "How much is the deposit? When is it due?");
        assert_eq!(follow_up_query("When is it due?", &[]), "When is it due?");
        let p = prompt_after("When is it due?", &earlier, &passages()[0], 1);
        assert!(
            p.contains(
                "\n\nEarlier question: How much is the deposit?\nEarlier answer: The deposit is 2,900 euros.\nQuestion: When is it due?\n"
            ),
            "{p}"
        );
        assert_eq!(prompt_after("Q?", &[], &passages()[0], 1), prompt("Q?", &passages()[0], 1));
    }

    #[test]
    fn marks_are_read_off_and_other_brackets_stay() {
        assert_eq!(without_marks("It is 2,900 euros [1]."), "It is 2,900 euros.");
        assert_eq!(without_marks("Both [1, 2] and [2][1]."), "Both and.");
        assert_eq!(without_marks("See clause [7a] and [a]."), "See clause [7a] and [a].");
        assert_eq!(with_mark("It is 2,900 euros.", 2), "It is 2,900 euros [2].");
        assert_eq!(with_mark("It is 2,900 euros", 2), "It is 2,900 euros [2]");
    }

    const Q: &str = "What do Anna Berg's lease and invoice say?";

    fn reading(passage: usize, text: &str) -> Reading {
        Reading { passage, text: text.into(), prompt_tokens: 10, output_tokens: 5 }
    }

    #[test]
    fn the_first_passage_that_answers_gives_the_answer_and_its_citation() {
        let ps = passages();
        let a = chosen(&[reading(1, "Interest is 1.5% per month after 30 days [2]."), reading(0, "Not in your documents.")], Q, &ps);
        assert!(a.answerable);
        assert_eq!(a.answer, "Interest is 1.5% per month after 30 days [2].");
        assert_eq!(a.citations.iter().map(|c| (c.n, c.page)).collect::<Vec<_>>(), [(2, 1)]);
        assert_eq!((a.prompt_tokens, a.output_tokens), (20, 10));

        // a name of the question may be said; the better passage answers first; an unmarked
        // sentence gets its passage's mark
        let a =
            chosen(&[reading(0, "Anna Berg's deposit is 2,900 euros, paid once."), reading(1, "Interest is 1.5% per month [2].")], Q, &ps);
        assert_eq!(a.answer, "Anna Berg's deposit is 2,900 euros, paid once [1].");
        assert_eq!(a.citations[0].path, "/docs/lease.pdf");
    }

    #[test]
    fn an_invented_figure_is_dropped_and_the_next_passage_is_asked() {
        let ps = passages();
        // the first reading invents a figure its passage does not hold: dropped, and kept aside
        let a = chosen(&[reading(0, "The deposit is 3,100 euros [1]."), reading(1, "Late interest is 1.5% per month [2].")], Q, &ps);
        assert_eq!(a.answer, "Late interest is 1.5% per month [2].");
        assert!(a.removed.is_empty(), "what the chosen reading removed: none");
        // a sentence of the chosen reading that fails goes; the rest stays
        let a = chosen(&[reading(0, "The deposit is 2,900 euros [1]. Interest is 4% per month [1].")], Q, &ps);
        assert_eq!(a.answer, "The deposit is 2,900 euros [1].");
        assert_eq!(a.removed[0].items, ["4% per month"]);
        assert!(a.draft.is_some());
    }

    #[test]
    fn a_refusal_or_an_answer_with_nothing_true_left_is_not_found() {
        let ps = passages();
        for text in ["Not in your documents.", "not in your documents", "The passages do not contain the answer to this question.", "1."] {
            let a = chosen(&[reading(0, text), reading(1, "Not in your documents.")], Q, &ps);
            assert!(!a.answerable && a.citations.is_empty() && a.removed.is_empty(), "{text}");
            assert_eq!(a.answer, NOT_FOUND);
        }
        let a = chosen(&[reading(0, "The deposit is 3,100 euros [1]."), reading(1, "Not in your documents.")], Q, &ps);
        assert!(!a.answerable);
        assert_eq!(a.removed[0].items, ["3,100 euros"]);
        assert!(a.draft.is_some());
        // an answer followed by a refusal keeps the answer
        let a = chosen(&[reading(0, "The deposit is 2,900 euros [1]. Not in your documents.")], Q, &ps);
        assert_eq!(a.answer, "The deposit is 2,900 euros [1].");
        assert!(chosen(&[], Q, &ps).answer == NOT_FOUND);
    }
}
