//! "Ask your documents" in the app: a question (and the conversation before it) is searched in the
//! index, and the chat model answers it from the best passages with their file and page
//! ([`warpfold_summarize::answer`], the code `warpfold ask` runs too).
//!
//! Why the summarizer's thread answers: the chat model is loaded once and lives on that thread; a
//! second copy would double its memory. Questions go ahead of summaries waiting there (a person is
//! waiting for an answer; a summary can wait seconds), and each question streams what happens to
//! it ([`AskEvent`]): the passages as soon as they are found, what the model is busy with, then
//! the checked answer, so the window and the browser show progress instead of a spinner.

use serde::{Deserialize, Serialize};
use warpfold_index::search::SearchOptions;
pub use warpfold_summarize::answer::Turn;
use warpfold_summarize::answer::{self, Answer, Passage, Question};
use warpfold_summarize::generate::SamplingParams;
use warpfold_summarize::ChatModel;

use crate::{App, AppError};

/// The longest question taken, in characters.
pub const MAX_QUESTION_CHARS: usize = 2_000;
/// The most passages one question is answered from.
pub const MAX_PASSAGES: usize = 8;
/// The most candidates the chat model judges for one question.
pub const MAX_RERANK: usize = 40;
/// The most earlier turns sent with a follow-up (only the last is read), and the longest each part.
pub const MAX_EARLIER_TURNS: usize = 20;
const MAX_TURN_CHARS: usize = 8_000;
/// How many tokens an answer may take.
const ANSWER_TOKENS: usize = 160;

/// A question from the UI or the API.
#[derive(Debug, Clone, Deserialize)]
pub struct AskRequest {
    pub question: String,
    /// How many of the best passages the model reads (default 5).
    #[serde(default)]
    pub passages: Option<usize>,
    /// The conversation so far, oldest first: a follow-up is searched and read with the question
    /// before it.
    #[serde(default)]
    pub earlier: Vec<Turn>,
    /// How many of the best hits the chat model judges first, reading the best `passages` of them
    /// (0: none). Default: 20 where the chat model runs on a GPU, none on a CPU
    /// ([`warpfold_summarize::rerank::default_candidates`]).
    #[serde(default)]
    pub rerank: Option<usize>,
}

impl AskRequest {
    /// The request as asked, or what is wrong with it.
    pub fn checked(self) -> Result<AskRequest, AppError> {
        let question = self.question.trim();
        if question.is_empty() {
            return Err(AppError::InvalidInput("the question is empty".into()));
        }
        if question.chars().count() > MAX_QUESTION_CHARS {
            return Err(AppError::InvalidInput(format!("the question is longer than {MAX_QUESTION_CHARS} characters")));
        }
        if let Some(n) = self.passages {
            if n == 0 || n > MAX_PASSAGES {
                return Err(AppError::InvalidInput(format!("passages must be 1 to {MAX_PASSAGES}, not {n}")));
            }
        }
        if self.rerank.is_some_and(|n| n > MAX_RERANK) {
            return Err(AppError::InvalidInput(format!(
                "at most {MAX_RERANK} candidates are judged, not {}",
                self.rerank.unwrap_or_default()
            )));
        }
        if self.earlier.len() > MAX_EARLIER_TURNS {
            return Err(AppError::InvalidInput(format!("at most {MAX_EARLIER_TURNS} earlier turns are taken")));
        }
        if self.earlier.iter().any(|t| t.question.chars().count() > MAX_TURN_CHARS || t.answer.chars().count() > MAX_TURN_CHARS) {
            return Err(AppError::InvalidInput(format!("an earlier turn is longer than {MAX_TURN_CHARS} characters")));
        }
        Ok(AskRequest { question: question.to_string(), ..self })
    }

    fn passage_count(&self) -> usize {
        self.passages.unwrap_or(5)
    }

    /// How many hits are searched for: the passages read, or the candidates judged when more (the
    /// GPU's default when not said: the chat model's thread decides whether to judge them).
    fn candidate_count(&self) -> usize {
        self.passage_count().max(self.rerank.unwrap_or(warpfold_summarize::rerank::ON_GPU))
    }
}

/// A passage the model reads, as the UI lists it: `[n]`, where it is, and the words around the
/// question's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassageView {
    pub n: usize,
    pub path: String,
    pub page: u32,
    pub snippet: String,
}

/// What happens to a question, in order: `passages`, any number of `status`, then `answer` or
/// `error`, which ends it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AskEvent {
    Passages {
        passages: Vec<PassageView>,
    },
    Status {
        status: String,
    },
    Answer {
        #[serde(flatten)]
        answer: Answer,
        model: String,
        /// Seconds from the question to the model's first token, and to the whole answer.
        first_token_seconds: Option<f64>,
        seconds: f64,
    },
    Error {
        error: AppError,
    },
}

impl AskEvent {
    /// The event's name on a server-sent-event stream.
    pub fn name(&self) -> &'static str {
        match self {
            AskEvent::Passages { .. } => "passages",
            AskEvent::Status { .. } => "status",
            AskEvent::Answer { .. } => "answer",
            AskEvent::Error { .. } => "error",
        }
    }

    /// Whether nothing follows it.
    pub fn ends(&self) -> bool {
        matches!(self, AskEvent::Answer { .. } | AskEvent::Error { .. })
    }
}

/// Where a question's events go (a server-sent-event stream, a Tauri channel).
pub type AskSink = Box<dyn FnMut(AskEvent) + Send>;

/// A question found its passages and waits for the chat model.
pub(crate) struct PendingQuestion {
    request: AskRequest,
    /// The hits found, best first: the passages read are the first of them, or the best of them
    /// by the chat model's judgement.
    passages: Vec<Passage>,
    /// Each passage's snippet, as the asker is shown it.
    snippets: Vec<String>,
    started: std::time::Instant,
    sink: AskSink,
}

impl PendingQuestion {
    pub(crate) fn status(&mut self, status: &str) {
        (self.sink)(AskEvent::Status { status: status.to_string() });
    }

    pub(crate) fn fail(mut self, error: AppError) {
        (self.sink)(AskEvent::Error { error });
    }

    /// Keeps the passages the model reads: the first [`AskRequest::passage_count`] hits, or, when
    /// it judges candidates (asked, or by default on a GPU), the best of them by its judgement,
    /// which the asker is shown again in their new order.
    fn judge(&mut self, model: &ChatModel, name: &str) -> Result<(), warpfold_summarize::ChatError> {
        let keep = self.request.passage_count();
        let candidates = self.request.rerank.unwrap_or_else(|| warpfold_summarize::rerank::default_candidates(model));
        let mut found: Vec<(Passage, String)> =
            std::mem::take(&mut self.passages).into_iter().zip(std::mem::take(&mut self.snippets)).collect();
        if candidates > 0 && found.len() > 1 {
            found.truncate(candidates.max(keep));
            self.status(&format!("judging {} passages with {name}", found.len()));
            // a follow-up is judged with the question before it, as it was searched
            let question = answer::follow_up_query(&self.request.question, &self.request.earlier);
            found = warpfold_summarize::rerank::best_of(model, &question, found, |c| c.0.text.as_str(), keep)?.0;
        }
        found.truncate(keep);
        let judged = candidates > 0;
        (self.passages, self.snippets) = found.into_iter().unzip();
        if !judged {
            return Ok(());
        }
        let views = self
            .passages
            .iter()
            .zip(&self.snippets)
            .enumerate()
            .map(|(i, (p, snippet))| PassageView { n: i + 1, path: p.path.clone(), page: p.page, snippet: snippet.clone() })
            .collect();
        (self.sink)(AskEvent::Passages { passages: views });
        Ok(())
    }
}

impl App {
    /// Answers `request` from the index: finds its passages (reported at once), then hands it to
    /// the chat model's thread, which reports the answer to `sink`. An error before the passages
    /// are found is returned (nothing was sent); after, it ends the events.
    pub fn ask(&self, request: AskRequest, mut sink: AskSink) -> Result<(), AppError> {
        let request = request.checked()?;
        let Some(chat) = &self.inner.chat else {
            return Err(AppError::InvalidInput("answers need the chat model, and this app runs without one (summaries are off)".into()));
        };
        let started = std::time::Instant::now();
        let query = answer::follow_up_query(&request.question, &request.earlier);
        // by score alone: the answer to a question about a long report is often in its third or
        // fourth best passage, which two hits a document in the top five would push out
        let options = SearchOptions { per_document_in_top_five: None, ..SearchOptions::default() };
        let hits = self.search_with(&query, request.candidate_count(), &options)?;
        if hits.is_empty() {
            return Err(AppError::NotFound("nothing is indexed yet: add documents, then ask".into()));
        }
        let passages: Vec<Passage> = hits.iter().map(|h| Passage { path: h.path.clone(), page: h.page, text: h.chunk.clone() }).collect();
        let views = hits.iter().take(request.passage_count()).enumerate().map(|(i, h)| PassageView {
            n: i + 1,
            path: h.path.clone(),
            page: h.page,
            snippet: h.text.clone(),
        });
        sink(AskEvent::Passages { passages: views.collect() });
        let snippets = hits.iter().map(|h| h.text.clone()).collect();
        let question = PendingQuestion { request, passages, snippets, started, sink };
        if let Err(unsent) = chat.send(crate::summaries::ChatJob::Ask(Box::new(question))) {
            let crate::summaries::ChatJob::Ask(question) = unsent.0 else { unreachable!("sent a question") };
            question.fail(AppError::Internal("the chat model's thread has stopped".into()));
        }
        Ok(())
    }

    /// Answers the questions waiting for the chat model, together (their passages prefilled
    /// packed, decoded in one batch); each gets its answer or the error.
    pub(crate) fn answer_questions(&self, model: &ChatModel, name: &str, questions: Vec<PendingQuestion>) {
        let mut judged = Vec::with_capacity(questions.len());
        for mut q in questions {
            match q.judge(model, name) {
                Ok(()) => judged.push(q),
                Err(e) => q.fail(AppError::Engine(format!("the chat model failed to judge the passages: {e}"))),
            }
        }
        let mut questions = judged;
        let passages = questions.iter().map(|q| q.passages.len()).sum::<usize>();
        for q in &mut questions {
            q.status(&format!("reading {} passages with {name}", q.passages.len()));
        }
        let asked: Vec<Question> = questions
            .iter()
            .map(|q| Question { question: &q.request.question, earlier: &q.request.earlier, passages: &q.passages })
            .collect();
        let sampling = SamplingParams { max_new_tokens: ANSWER_TOKENS, ..SamplingParams::default() };
        let began = std::time::Instant::now();
        let answered = answer::answer_questions(model, &asked, &sampling);
        drop(asked);
        match answered {
            Ok((answers, stats)) => {
                tracing::info!(questions = answers.len(), passages, seconds = began.elapsed().as_secs_f64(), "answered");
                for (mut q, answer) in questions.into_iter().zip(answers) {
                    let waited = began.duration_since(q.started).as_secs_f64();
                    let event = AskEvent::Answer {
                        answer,
                        model: name.to_string(),
                        first_token_seconds: stats.first_token_seconds.map(|s| s + waited),
                        seconds: q.started.elapsed().as_secs_f64(),
                    };
                    (q.sink)(event);
                }
            }
            Err(e) => {
                for q in questions {
                    q.fail(AppError::Engine(format!("the chat model failed: {e}")));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(question: &str) -> AskRequest {
        AskRequest { question: question.into(), passages: None, earlier: Vec::new(), rerank: None }
    }

    #[test]
    fn a_question_is_trimmed_and_bad_ones_say_what_is_wrong() {
        assert_eq!(request("  How much is the deposit?\n").checked().unwrap().question, "How much is the deposit?");
        let err = |r: AskRequest| r.checked().unwrap_err().to_string();
        assert_eq!(err(request(" \n ")), "the question is empty");
        assert!(err(request(&"why ".repeat(600))).contains("longer than 2000 characters"));
        assert!(err(AskRequest { passages: Some(0), ..request("q") }).contains("1 to 8, not 0"));
        assert!(err(AskRequest { passages: Some(9), ..request("q") }).contains("1 to 8, not 9"));
        assert!(err(AskRequest { rerank: Some(41), ..request("q") }).contains("at most 40 candidates"));
        assert_eq!(AskRequest { rerank: Some(0), ..request("q") }.candidate_count(), 5, "none judged: the passages read");
        assert_eq!(AskRequest { rerank: Some(12), ..request("q") }.candidate_count(), 12);
        assert_eq!(request("q").candidate_count(), 20, "the chat model's thread decides: enough for a GPU");
        let turn = Turn { question: "q".into(), answer: "a".repeat(MAX_TURN_CHARS + 1) };
        assert!(err(AskRequest { earlier: vec![turn], ..request("q") }).contains("earlier turn is longer"));
        assert_eq!(request("q").passage_count(), 5);
    }

    #[test]
    fn events_carry_their_name_and_the_answer_is_flat() {
        let answer = Answer {
            answer: "The deposit is 2,900 euros [1].".into(),
            citations: Vec::new(),
            answerable: true,
            removed: Vec::new(),
            draft: None,
            prompt_tokens: 10,
            output_tokens: 9,
        };
        let event = AskEvent::Answer { answer, model: "m".into(), first_token_seconds: Some(1.5), seconds: 3.0 };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!((json["event"].as_str(), event.name(), event.ends()), (Some("answer"), "answer", true));
        assert_eq!(json["answer"], "The deposit is 2,900 euros [1].");
        assert_eq!(json["first_token_seconds"], 1.5);
        let error = AskEvent::Error { error: AppError::NotFound("gone".into()) };
        assert_eq!(serde_json::to_value(&error).unwrap()["error"]["kind"], "not_found");
        assert!(!AskEvent::Status { status: "loading".into() }.ends());
    }
}
