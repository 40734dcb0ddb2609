//! A local model folder in the Hugging Face layout, as both sides of the seam read it.
//!
//! Why here: the scheduler side needs the tokenizer and the model's limits, the model side needs the
//! config, the weights and the pooling; both describe the same folder, so they share one reader.

use std::path::{Path, PathBuf};

/// How the token states of one sequence become its vector (sentence-transformers' `1_Pooling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    Mean,
    Cls,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelDirError {
    #[error("model folder {dir}: {what} is missing")]
    Missing { dir: PathBuf, what: String },
    #[error("{path}: {message}")]
    Unreadable { path: PathBuf, message: String },
}

/// A local model folder in the Hugging Face layout.
#[derive(Debug, Clone)]
pub struct ModelDir {
    pub dir: PathBuf,
    pub name: String,
    pub config: PathBuf,
    pub tokenizer: PathBuf,
    pub weights: Vec<PathBuf>,
    /// sentence-transformers' pooling mode (mean when the folder does not say).
    pub pooling: Pooling,
    /// sentence-transformers' `max_seq_length`, when the folder has one.
    pub max_seq_length: Option<usize>,
}

impl ModelDir {
    /// Reads a folder holding config.json, tokenizer.json and model.safetensors (or shards).
    pub fn open(dir: &Path) -> Result<ModelDir, ModelDirError> {
        let missing = |what: &str| ModelDirError::Missing { dir: dir.to_path_buf(), what: what.into() };
        if !dir.is_dir() {
            return Err(missing("the folder itself"));
        }
        let config = dir.join("config.json");
        if !config.is_file() {
            return Err(missing("config.json"));
        }
        let tokenizer = dir.join("tokenizer.json");
        if !tokenizer.is_file() {
            return Err(missing("tokenizer.json"));
        }
        let mut weights: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| ModelDirError::Unreadable { path: dir.to_path_buf(), message: e.to_string() })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
            .collect();
        weights.sort();
        if weights.is_empty() {
            return Err(missing("model.safetensors"));
        }
        let pooling = read_json(&dir.join("1_Pooling/config.json"))?
            .map(|v| if v["pooling_mode_cls_token"].as_bool() == Some(true) { Pooling::Cls } else { Pooling::Mean })
            .unwrap_or(Pooling::Mean);
        let max_seq_length =
            read_json(&dir.join("sentence_bert_config.json"))?.and_then(|v| v["max_seq_length"].as_u64()).map(|n| n as usize);
        let name = dir
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| dir.display().to_string());
        Ok(ModelDir { dir: dir.to_path_buf(), name, config, tokenizer, weights, pooling, max_seq_length })
    }
}

fn read_json(path: &Path) -> Result<Option<serde_json::Value>, ModelDirError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| ModelDirError::Unreadable { path: path.to_path_buf(), message: e.to_string() })?;
    serde_json::from_str(&text).map(Some).map_err(|e| ModelDirError::Unreadable { path: path.to_path_buf(), message: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_without_weights_names_what_is_missing() {
        let dir = std::env::temp_dir().join(format!("warpfold-modeldir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), "{}").unwrap();
        std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
        let err = ModelDir::open(&dir).unwrap_err().to_string();
        assert!(err.contains("model.safetensors"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
