//! The one error type of the application layer: what crosses IPC and HTTP.
//!
//! Why an enum with a `kind`: a UI reacts to the kind (a missing document, a path the user never
//! chose, a bad query) and shows the message; both transports serialise it the same way,
//! `{"kind": "...", "message": "..."}`.

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    InvalidInput(String),
    #[error("{0}")]
    PathNotAllowed(String),
    /// More bytes than the limit allows (an upload): HTTP 413.
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    Index(String),
    #[error("{0}")]
    Engine(String),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Internal(String),
}

impl AppError {
    pub fn kind(&self) -> &'static str {
        match self {
            AppError::NotFound(_) => "not_found",
            AppError::InvalidInput(_) => "invalid_input",
            AppError::PathNotAllowed(_) => "path_not_allowed",
            AppError::TooLarge(_) => "too_large",
            AppError::Index(_) => "index",
            AppError::Engine(_) => "engine",
            AppError::Io(_) => "io",
            AppError::Internal(_) => "internal",
        }
    }
}

impl Serialize for AppError {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("AppError", 2)?;
        s.serialize_field("kind", self.kind())?;
        s.serialize_field("message", &self.to_string())?;
        s.end()
    }
}

impl From<warpfold_index::store::StoreError> for AppError {
    fn from(e: warpfold_index::store::StoreError) -> Self {
        AppError::Index(e.to_string())
    }
}

impl From<warpfold_index::pipeline::IndexError> for AppError {
    fn from(e: warpfold_index::pipeline::IndexError) -> Self {
        AppError::Index(e.to_string())
    }
}

impl From<warpfold_summarize::OptionsError> for AppError {
    fn from(e: warpfold_summarize::OptionsError) -> Self {
        AppError::InvalidInput(e.to_string())
    }
}

impl From<std::io::Error> for AppError {
    fn from(e: std::io::Error) -> Self {
        AppError::Io(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_as_kind_and_message() {
        let json = serde_json::to_value(AppError::PathNotAllowed("/etc/passwd was not chosen".into())).unwrap();
        assert_eq!(json, serde_json::json!({"kind": "path_not_allowed", "message": "/etc/passwd was not chosen"}));
    }
}
