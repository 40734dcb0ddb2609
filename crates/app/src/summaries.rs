//! Summaries made by the app: the documents it indexes (when asked, or every one when
//! `auto_summarize` is on) go to a local chat model on a thread of their own.
//!
//! Why a thread and a queue: a summary takes seconds where indexing takes milliseconds per chunk,
//! so summarizing must never hold up the index; and documents that arrive together are summarized
//! together (their prompts prefilled packed, decoded in one batch), which is what makes it fast.
//! The model loads on first use. Summaries are stored in the index by content hash and model, so a
//! document summarized once is never summarized again, whatever its path.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use candle_core::Device;
use crossbeam_channel::Receiver;
use warpfold_index::store::Store;
use warpfold_index::summaries::StoredSummary;
pub use warpfold_summarize::SummarizeOptions;
use warpfold_summarize::{ChatModel, Summarizer};

use crate::events::SummaryEvent;
use crate::{App, AppEvent};

/// Where the chat model is and where it runs.
#[derive(Debug, Clone)]
pub struct SummaryConfig {
    /// A .gguf file, a folder holding one, or a Hugging Face folder.
    pub model: PathBuf,
    pub device: Device,
    /// Summarize every document once it is indexed.
    pub auto: bool,
    /// Decoding, repetition controls, map-reduce chunking (the CLI's flags, or the desktop's
    /// `WARPFOLD_SUMMARY_*` settings).
    pub options: SummarizeOptions,
}

impl SummaryConfig {
    /// The name summaries are stored under and the device view shows: the model file's stem.
    pub fn model_name(&self) -> String {
        self.model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// What the UI shows about summaries: which model, where, and with which settings.
    pub fn view(&self) -> SummaryView {
        SummaryView {
            model: self.model_name(),
            file: self.model.display().to_string(),
            device: match self.device.location() {
                candle_core::DeviceLocation::Cpu => "cpu".into(),
                candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
                other => format!("{other:?}"),
            },
            auto: self.auto,
            options: self.options.clone(),
        }
    }
}

/// Summaries as the state view shows them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SummaryView {
    pub model: String,
    pub file: String,
    pub device: String,
    pub auto: bool,
    pub options: SummarizeOptions,
}

impl App {
    pub(crate) fn run_summarizer(&self, config: SummaryConfig, paths: Receiver<String>) {
        let mut chat: Option<(ChatModel, String)> = None;
        while let Ok(first) = paths.recv() {
            let mut batch = vec![first];
            batch.extend(paths.try_iter());
            batch.sort();
            batch.dedup();
            if chat.is_none() {
                match ChatModel::load(&config.model, &config.device) {
                    Ok(model) => chat = Some((model, config.model_name())),
                    Err(e) => {
                        for path in batch {
                            self.publish_summary(path, None, Some(format!("the chat model did not load: {e}")));
                        }
                        continue;
                    }
                }
            }
            let (model, name) = chat.as_ref().expect("loaded");
            if let Err(e) = self.summarize_batch(model, name, &config.options, &batch) {
                for path in batch {
                    self.publish_summary(path, None, Some(e.clone()));
                }
            }
        }
    }

    fn summarize_batch(&self, model: &ChatModel, name: &str, options: &SummarizeOptions, paths: &[String]) -> Result<(), String> {
        let store = Store::open_existing(&self.inner.config.db).map_err(|e| e.to_string())?;
        let mut todo = Vec::new();
        for path in paths {
            match store.document_text(path).map_err(|e| e.to_string())? {
                Some((hash, text)) => match store.summary(&hash, name).map_err(|e| e.to_string())? {
                    Some(done) => self.publish_summary(path.clone(), Some(done.summary), None),
                    None => todo.push((path.clone(), hash, text)),
                },
                None => self.publish_summary(path.clone(), None, Some(format!("{path} has no indexed text to summarize"))),
            }
        }
        if todo.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = todo.iter().map(|(_, _, text)| text.clone()).collect();
        let mut summarizer = Summarizer::new(model, options.clone())?;
        let results = summarizer.summarize_documents(&texts).map_err(|e| e.to_string())?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        for ((path, hash, _), r) in todo.into_iter().zip(results) {
            let stored = StoredSummary {
                content_hash: hash,
                model: name.to_string(),
                path: path.clone(),
                summary: r.summary.clone(),
                tokens_in: r.tokens_in as u64,
                tokens_out: r.tokens_out as u64,
                seconds: r.seconds,
                created_at: now,
            };
            store.put_summary(&stored).map_err(|e| e.to_string())?;
            self.publish_summary(path, Some(r.summary), None);
        }
        Ok(())
    }

    fn publish_summary(&self, path: String, summary: Option<String>, error: Option<String>) {
        if let Some(e) = &error {
            tracing::warn!(path, error = %e, "summary");
        }
        let _ = self.inner.events.send(AppEvent::Summary(SummaryEvent { path, summary, error }));
    }
}
