//! A chat model: the decoder, its tokenizer and its chat template, loaded from a GGUF file or a
//! Hugging Face folder.
//!
//! Why the tokenizer is rebuilt from GGUF metadata: a GGUF file is meant to be the whole model, and
//! the default one ships without a tokenizer.json. Its `tokenizer.ggml.*` keys hold the byte-level
//! BPE vocabulary and merges; the pre-tokenizer is named (`tokenizer.ggml.pre`) rather than stored,
//! so the few this file knows are spelled out here, and an unknown one is refused instead of
//! tokenizing differently from the model's training. A tokenizer.json beside the file wins.
//!
//! Chat templates are Jinja programs; rather than run one, the two formats the supported families
//! use are recognised in the template text (ChatML for SmolLM2 and Qwen2, Llama 3's header format)
//! and rendered here.

use std::path::{Path, PathBuf};

use candle_core::Device;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};
use warpfold_candle::gguf::{GgufError, GgufFile, TokenizerMeta};
use warpfold_candle::llama::LlamaModel;

/// Why a chat model could not be loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("{path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Template { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Model { path: PathBuf, message: String },
    #[error("{0}")]
    Inference(String),
}

/// The chat formats warpfold renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatFormat {
    /// `<|im_start|>role\n...<|im_end|>\n` (SmolLM2, Qwen2).
    ChatMl,
    /// `<|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>` (Llama 3.x).
    Llama3,
}

impl ChatFormat {
    /// Recognises the format from a Jinja chat template's text.
    pub fn detect(template: &str) -> Option<ChatFormat> {
        if template.contains("<|im_start|>") {
            Some(ChatFormat::ChatMl)
        } else if template.contains("<|start_header_id|>") {
            Some(ChatFormat::Llama3)
        } else {
            None
        }
    }

    /// A system and a user message, then the opening of the assistant's turn.
    pub fn render(self, system: &str, user: &str) -> String {
        match self {
            ChatFormat::ChatMl => {
                format!("<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
            }
            ChatFormat::Llama3 => format!(
                "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>\
                 <|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>\
                 <|start_header_id|>assistant<|end_header_id|>\n\n"
            ),
        }
    }

    /// The tokens that end the assistant's turn.
    pub fn stop_tokens(self) -> &'static [&'static str] {
        match self {
            ChatFormat::ChatMl => &["<|im_end|>", "<|endoftext|>"],
            ChatFormat::Llama3 => &["<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"],
        }
    }
}

/// The split regexes of the pre-tokenizers llama.cpp names (its `llama-vocab.cpp`).
const LLAMA3_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn pre_tokenizer(pre: Option<&str>) -> Result<PreTokenizerWrapper, String> {
    let byte_level = |use_regex: bool| PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, use_regex));
    let split = |re: &str| -> Result<PreTokenizerWrapper, String> {
        let s = Split::new(SplitPattern::Regex(re.into()), SplitDelimiterBehavior::Isolated, false).map_err(|e| e.to_string())?;
        Ok(PreTokenizerWrapper::Split(s))
    };
    match pre.unwrap_or("default") {
        // GPT-2's regex inside ByteLevel.
        "default" | "gpt2" => Ok(byte_level(true)),
        // SmolLM / StarCoder: every digit alone, then GPT-2's regex.
        "smollm" | "starcoder" | "refact" => Ok(PreTokenizerWrapper::Sequence(Sequence::new(vec![
            PreTokenizerWrapper::Digits(Digits::new(true)),
            byte_level(true),
        ]))),
        "llama-bpe" | "llama3" => Ok(PreTokenizerWrapper::Sequence(Sequence::new(vec![split(LLAMA3_SPLIT)?, byte_level(false)]))),
        "qwen2" => Ok(PreTokenizerWrapper::Sequence(Sequence::new(vec![split(QWEN2_SPLIT)?, byte_level(false)]))),
        other => Err(format!(
            "pre-tokenizer {other:?} is not known to warpfold (known: gpt2, smollm, llama-bpe, qwen2); put the model's tokenizer.json beside the file"
        )),
    }
}

/// A byte-level BPE tokenizer from GGUF metadata: vocabulary, merges, the named pre-tokenizer,
/// control and user-defined tokens as special tokens.
pub fn tokenizer_from_meta(meta: &TokenizerMeta) -> Result<Tokenizer, String> {
    if meta.model != "gpt2" {
        return Err(format!(
            "tokenizer model {:?} is not supported from GGUF metadata (only byte-level BPE, \"gpt2\"); put a tokenizer.json beside the file",
            meta.model
        ));
    }
    if meta.merges.is_empty() {
        return Err("tokenizer.ggml.merges is missing or empty".into());
    }
    let vocab: tokenizers::models::bpe::Vocab = meta.tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
    let merges = meta
        .merges
        .iter()
        .map(|m| m.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())).ok_or_else(|| format!("merge {m:?} is not two tokens")))
        .collect::<Result<Vec<_>, _>>()?;
    let bpe = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(|e| format!("building the BPE model: {e}"))?;
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(pre_tokenizer(meta.pre.as_deref())?));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    let specials: Vec<AddedToken> = meta
        .tokens
        .iter()
        .zip(&meta.token_types)
        .filter(|(_, &t)| t == 3 || t == 4)
        .map(|(tok, _)| AddedToken::from(tok.clone(), true))
        .collect();
    tokenizer.add_special_tokens(specials).map_err(|e| format!("adding the special tokens: {e}"))?;
    Ok(tokenizer)
}

/// A decoder ready to chat: weights, tokenizer, template, stop tokens.
pub struct ChatModel {
    pub model: LlamaModel,
    pub tokenizer: Tokenizer,
    pub format: ChatFormat,
    pub stop_ids: Vec<u32>,
    /// The file or folder it came from.
    pub source: PathBuf,
    /// Strings that are special tokens: removed from user text so a document cannot end a turn.
    specials: Vec<String>,
}

/// The name a chat model's summaries are stored and shown under: its file's name without `.gguf`,
/// or its folder's name ("Qwen2.5-Coder-1.5B-Instruct": the dots in it are not an extension).
pub fn model_name(path: &std::path::Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string());
    match name.len().checked_sub(5).filter(|&cut| name.is_char_boundary(cut) && name[cut..].eq_ignore_ascii_case(".gguf")) {
        Some(cut) => name[..cut].to_string(),
        None => name,
    }
}

impl ChatModel {
    /// Loads a `.gguf` file, a folder holding one `.gguf`, or a Hugging Face folder (config.json,
    /// safetensors, tokenizer.json, tokenizer_config.json with a chat template).
    pub fn load(path: &Path, device: &Device) -> Result<ChatModel, ChatError> {
        let gguf = if path.is_dir() { find_gguf(path)? } else { Some(path.to_path_buf()) };
        match gguf {
            Some(file) => Self::load_gguf(&file, device),
            None => Self::load_hf(path, device),
        }
    }

    fn load_gguf(path: &Path, device: &Device) -> Result<ChatModel, ChatError> {
        let file = GgufFile::open(path)?;
        let cfg = file.config()?;
        let beside = path.parent().map(|p| p.join("tokenizer.json")).filter(|p| p.is_file());
        let (tokenizer, template) = match beside {
            Some(json) => {
                let t = Tokenizer::from_file(&json).map_err(|e| ChatError::Tokenizer { path: json.clone(), message: e.to_string() })?;
                let template = file
                    .tokenizer_meta()
                    .ok()
                    .and_then(|m| m.chat_template)
                    .or_else(|| read_hf_template(path.parent().unwrap_or(Path::new("."))));
                (t, template)
            }
            None => {
                let meta = file.tokenizer_meta()?;
                let t = tokenizer_from_meta(&meta).map_err(|message| ChatError::Tokenizer { path: path.to_path_buf(), message })?;
                (t, meta.chat_template)
            }
        };
        let model = file.load(device)?;
        debug_assert_eq!(model.config.vocab_size, cfg.vocab_size);
        Self::assemble(model, tokenizer, template, path)
    }

    fn load_hf(dir: &Path, device: &Device) -> Result<ChatModel, ChatError> {
        let backend = warpfold_candle::DecoderBackend::load(dir, device)
            .map_err(|e| ChatError::Model { path: dir.to_path_buf(), message: e.to_string() })?;
        let json = dir.join("tokenizer.json");
        if !json.is_file() {
            return Err(ChatError::Tokenizer { path: dir.to_path_buf(), message: "no tokenizer: tokenizer.json is missing".into() });
        }
        let tokenizer = Tokenizer::from_file(&json).map_err(|e| ChatError::Tokenizer { path: json.clone(), message: e.to_string() })?;
        Self::assemble(backend.into_model(), tokenizer, read_hf_template(dir), dir)
    }

    fn assemble(model: LlamaModel, tokenizer: Tokenizer, template: Option<String>, source: &Path) -> Result<ChatModel, ChatError> {
        let template = template.ok_or_else(|| ChatError::Template {
            path: source.to_path_buf(),
            message: "no chat template (tokenizer.chat_template in the GGUF, chat_template in tokenizer_config.json)".into(),
        })?;
        let format = ChatFormat::detect(&template).ok_or_else(|| ChatError::Template {
            path: source.to_path_buf(),
            message: "the chat template is neither ChatML nor Llama 3's; warpfold renders only those".into(),
        })?;
        let stop_ids: Vec<u32> = format.stop_tokens().iter().filter_map(|t| tokenizer.token_to_id(t)).collect();
        if stop_ids.is_empty() {
            return Err(ChatError::Template {
                path: source.to_path_buf(),
                message: format!("the vocabulary has none of the stop tokens {:?}", format.stop_tokens()),
            });
        }
        if tokenizer.get_vocab_size(true) > model.config.vocab_size {
            return Err(ChatError::Tokenizer {
                path: source.to_path_buf(),
                message: format!("the tokenizer has {} tokens, the model {}", tokenizer.get_vocab_size(true), model.config.vocab_size),
            });
        }
        let specials = tokenizer.get_added_tokens_decoder().values().filter(|t| t.special).map(|t| t.content.clone()).collect();
        Ok(ChatModel { model, tokenizer, format, stop_ids, source: source.to_path_buf(), specials })
    }

    /// Token count of a plain text (no special tokens).
    pub fn count_tokens(&self, text: &str) -> usize {
        self.tokenizer.encode_fast(text, false).map(|e| e.len()).unwrap_or(usize::MAX)
    }

    /// Removes special-token strings from text a user supplied.
    pub fn neutralize(&self, text: &str) -> String {
        let mut text = text.to_string();
        for s in &self.specials {
            if text.contains(s.as_str()) {
                text = text.replace(s.as_str(), "");
            }
        }
        text
    }

    /// The token ids of a system and a user message in the model's chat format.
    pub fn encode_chat(&self, system: &str, user: &str) -> Result<Vec<u32>, ChatError> {
        let prompt = self.format.render(system, &self.neutralize(user));
        let enc = self.tokenizer.encode_fast(prompt, false).map_err(|e| ChatError::Inference(format!("tokenizing: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String, ChatError> {
        self.tokenizer.decode(ids, true).map_err(|e| ChatError::Inference(format!("detokenizing: {e}")))
    }
}

/// The one `.gguf` in a folder (None when there is none; an error when there are several).
fn find_gguf(dir: &Path) -> Result<Option<PathBuf>, ChatError> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| ChatError::Model { path: dir.to_path_buf(), message: e.to_string() })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("gguf")))
        .collect();
    found.sort();
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        n => Err(ChatError::Model { path: dir.to_path_buf(), message: format!("{n} .gguf files; name the one to use") }),
    }
}

fn read_hf_template(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("tokenizer_config.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("chat_template")?.as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_name_keeps_the_dots_of_its_version() {
        use std::path::Path;
        assert_eq!(model_name(Path::new("models/Qwen2.5-Coder-1.5B-Instruct")), "Qwen2.5-Coder-1.5B-Instruct");
        assert_eq!(model_name(Path::new("m/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")), "qwen2.5-coder-1.5b-instruct-q4_k_m");
        assert_eq!(model_name(Path::new("SmolLM2-135M-Instruct.Q4_1.GGUF")), "SmolLM2-135M-Instruct.Q4_1");
    }

    #[test]
    fn chat_formats_are_recognised_and_rendered() {
        let smol = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
        assert_eq!(ChatFormat::detect(smol), Some(ChatFormat::ChatMl));
        assert_eq!(ChatFormat::detect("{{ '<|start_header_id|>' }}"), Some(ChatFormat::Llama3));
        assert_eq!(ChatFormat::detect("{{ '[INST]' }}"), None);
        assert_eq!(
            ChatFormat::ChatMl.render("S", "U"),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn unknown_pre_tokenizers_and_tokenizer_models_are_refused_by_name() {
        let err = pre_tokenizer(Some("mystery")).unwrap_err();
        assert!(err.contains("mystery") && err.contains("tokenizer.json"), "{err}");
        let meta = TokenizerMeta { model: "llama".into(), tokens: vec!["a".into()], ..Default::default() };
        let err = tokenizer_from_meta(&meta).unwrap_err();
        assert!(err.contains("\"llama\""), "{err}");
        let meta = TokenizerMeta { model: "gpt2".into(), tokens: vec!["a".into()], ..Default::default() };
        assert!(tokenizer_from_meta(&meta).unwrap_err().contains("merges"));
    }
}
