//! Writes a GGUF chat model's tokenizer as a Hugging Face folder's tokenizer.json and
//! tokenizer_config.json (with its chat template), built from the GGUF metadata exactly as
//! `warpfold summarize` builds it. The GPU benchmark pairs them with random weights of the same
//! architecture generated on the GPU machine (which cannot take the 98 MB GGUF along).
//!
//!   cargo run --release -p warpfold-summarize --example export_hf_tokenizer -- MODEL.gguf OUT_DIR

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (gguf, out) = match args.as_slice() {
        [_, gguf, out] => (PathBuf::from(gguf), PathBuf::from(out)),
        _ => return Err("usage: export_hf_tokenizer MODEL.gguf OUT_DIR".into()),
    };
    let file = warpfold_candle::gguf::GgufFile::open(&gguf)?;
    let meta = file.tokenizer_meta()?;
    let tokenizer = warpfold_summarize::chat::tokenizer_from_meta(&meta)?;
    std::fs::create_dir_all(&out)?;
    tokenizer.save(out.join("tokenizer.json"), false).map_err(|e| e.to_string())?;
    let config = serde_json::json!({ "chat_template": meta.chat_template });
    std::fs::write(out.join("tokenizer_config.json"), serde_json::to_vec_pretty(&config)?)?;
    println!("{} tokens -> {}", meta.tokens.len(), out.display());
    Ok(())
}
