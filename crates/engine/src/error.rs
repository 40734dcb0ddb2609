//! The engine's error: what a sequence gets instead of an embedding. Every sequence is answered,
//! with a vector or with one of these, never dropped.

use warpfold_backend::BackendError;

/// Why a sequence got no embedding.
#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize)]
pub enum EngineError {
    #[error("the sequence is empty")]
    EmptySequence,
    #[error("the sequence has {tokens} tokens ({aligned} after alignment), more than a bin holds ({capacity}); chunk it")]
    SequenceTooLong { tokens: usize, aligned: usize, capacity: usize },
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("the engine has shut down")]
    ShutDown,
    #[error("the request was cancelled before this sequence ran")]
    Cancelled,
}
