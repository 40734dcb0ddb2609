//! Texts in, embeddings out: tokenization in front of the scheduler.
//!
//! Why here and not in the binary: the CLI, the indexer and the HTTP server all embed texts, and all
//! need the same rule that a bad text costs that text only.
//!
//! Texts are embedded as written ([`Embedder::submit_texts`]) or as a [`TextRole`]
//! ([`Embedder::submit_as`], [`Embedder::embed_query`]): then the encoder writes them as the model
//! wants a query or a passage (e5's `query: ` / `passage: `), so search fronts never prefix by hand.

use crate::scheduler::{Cancel, Engine, EngineError, Lane, Ticket};
use crate::tokenize::{TextEncoder, TextError, TextRole};

#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize)]
pub enum EmbedError {
    #[error(transparent)]
    Text(#[from] TextError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

pub struct Embedder {
    pub encoder: TextEncoder,
    pub engine: Engine,
}

/// Texts queued in the engine; texts that failed tokenization already carry their error.
pub struct PendingEmbeds {
    early: Vec<Option<EmbedError>>,
    /// Real tokens of each text that was queued (0 for the others).
    pub tokens: Vec<usize>,
    ticket: Ticket,
}

impl PendingEmbeds {
    pub fn len(&self) -> usize {
        self.early.len()
    }
    pub fn is_empty(&self) -> bool {
        self.early.is_empty()
    }
    /// Cancels the queued texts from anywhere (their caller went away); see [`Ticket::canceller`].
    pub fn canceller(&self) -> Cancel {
        self.ticket.canceller()
    }
    /// Blocks until every text is answered; one result per text, in order.
    pub fn wait(self) -> Vec<Result<Vec<f32>, EmbedError>> {
        let mut queued = self.ticket.wait().into_iter();
        self.early
            .into_iter()
            .map(|early| match early {
                Some(err) => Err(err),
                None => queued.next().expect("one answer per queued text. This is a bug.").map_err(EmbedError::from),
            })
            .collect()
    }
}

impl Embedder {
    /// Tokenizes `texts` as written (in parallel) and queues the good ones; returns without waiting.
    pub fn submit_texts(&self, lane: Lane, texts: &[&str]) -> PendingEmbeds {
        self.submit_encoded(lane, self.encoder.encode_batch(texts))
    }

    /// Like [`submit_texts`](Self::submit_texts), each text written as the model wants a `role`.
    pub fn submit_as(&self, lane: Lane, role: TextRole, texts: &[&str]) -> PendingEmbeds {
        self.submit_encoded(lane, self.encoder.encode_batch_as(role, texts))
    }

    /// The vector of a search query, on the interactive lane, written as the model wants a query.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        self.submit_as(Lane::Interactive, TextRole::Query, &[query]).wait().pop().expect("one answer per text. This is a bug.")
    }

    fn submit_encoded(&self, lane: Lane, encoded: Vec<Result<Vec<u32>, TextError>>) -> PendingEmbeds {
        let mut early = Vec::with_capacity(encoded.len());
        let mut tokens = Vec::with_capacity(encoded.len());
        let mut ids = Vec::with_capacity(encoded.len());
        for encoded in encoded {
            match encoded {
                Ok(v) => {
                    tokens.push(v.len());
                    ids.push(v);
                    early.push(None);
                }
                Err(err) => {
                    tokens.push(0);
                    early.push(Some(err.into()));
                }
            }
        }
        PendingEmbeds { early, tokens, ticket: self.engine.submit(lane, ids) }
    }

    /// One result per text, in order; a failing text leaves the others untouched.
    pub fn embed_texts(&self, lane: Lane, texts: &[&str]) -> Vec<Result<Vec<f32>, EmbedError>> {
        self.submit_texts(lane, texts).wait()
    }
}
