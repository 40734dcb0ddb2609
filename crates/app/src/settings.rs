//! One `Settings` for every front: what a person can set, the one environment variable of each,
//! and why each default is what it is.
//!
//! Why one struct: the command line and the desktop app used to put the engine, the models and
//! OCR together each in its own way, so a variable worked in one front and not in the other. Now
//! both build this struct (the CLI from its flags, whose `env =` names are [`FIELDS`]' own; the
//! desktop from `settings.json` in the data folder, then the environment) and start the app from
//! it through [`crate::launch`]. The environment is read in this module, and nowhere else in the
//! app's library. `docs/settings.md` is [`markdown`]'s output, checked by a test.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use warpfold_candle::switches::{KernelSwitches, MklChoice};
use warpfold_runtime::{CpuPrecision, DeviceSpec, EngineOptions};

/// Everything a person sets, as `settings.json` holds it (every key optional) and as the fronts
/// hand it to [`crate::launch`]. Paths and models left `None` take the defaults [`FIELDS`] gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub data_dir: Option<PathBuf>,
    pub db: Option<PathBuf>,
    pub models_dir: Option<PathBuf>,
    pub model: Option<String>,
    pub chat_model: Option<String>,
    pub summarize: Option<bool>,
    pub device: String,
    pub vram_budget: Option<String>,
    pub bin_tokens: Option<u32>,
    pub align: u32,
    pub cpu_precision: String,
    pub ocr_languages: String,
    pub ocr_max_pages: usize,
    pub ocr_budget_secs: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            data_dir: None,
            db: None,
            models_dir: None,
            model: None,
            chat_model: None,
            summarize: None,
            device: "auto".into(),
            vram_budget: None,
            bin_tokens: None,
            align: 16,
            cpu_precision: "auto".into(),
            ocr_languages: warpfold_index::ocr::DEFAULT_LANGUAGES.into(),
            ocr_max_pages: warpfold_index::extract::DEFAULT_OCR_MAX_PAGES,
            ocr_budget_secs: warpfold_index::extract::DEFAULT_OCR_BUDGET.as_secs(),
        }
    }
}

/// One setting: its key in `settings.json`, its variable, the command line's flag, its default
/// and why.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Field {
    pub key: &'static str,
    pub env: &'static str,
    /// The flag of `warpfold` (global, or `serve`'s) that sets it.
    pub flag: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

/// Every field of [`Settings`], in its order (a test checks that the two agree).
pub const FIELDS: &[Field] = &[
    Field {
        key: "data_dir",
        env: "WARPFOLD_DATA_DIR",
        flag: "serve --data-dir",
        default: "$XDG_DATA_HOME/warpfold (~/.local/share/warpfold)",
        meaning: "Where the index, the watched folders and uploads are kept. The desktop app and `warpfold serve` use the same one, so a \
                  file dropped on the window is found in the browser.",
    },
    Field { key: "db", env: "WARPFOLD_DB", flag: "serve --db", default: "index.db in the data folder", meaning: "The index." },
    Field {
        key: "models_dir",
        env: "WARPFOLD_MODELS_DIR",
        flag: "--models-dir",
        default: "./models in a checkout, else $XDG_DATA_HOME/warpfold/models",
        meaning: "Where models are kept; a pinned model missing there is fetched on first use and checked against its checksum.",
    },
    Field {
        key: "model",
        env: "WARPFOLD_MODEL",
        flag: "--model",
        default: "the index's own; a new index: multilingual-e5-small in a non-English locale, else all-MiniLM-L6-v2",
        meaning: "The embedding model: a pinned model's name or a folder. An index keeps the model it was built with; another pinned \
                  model named for the data folder's index embeds its documents again at the next start (the old index is kept beside it \
                  as index-MODEL.db; the queue shows the progress). e5 reads about 100 languages; MiniLM reads English only but embeds \
                  several times faster on a CPU; all-mpnet-base-v2 reads English better than MiniLM and embeds several times slower \
                  (BENCHMARKS.md).",
    },
    Field {
        key: "chat_model",
        env: "WARPFOLD_CHAT_MODEL",
        flag: "serve --chat-model",
        default: "the device's (docs/models.md), fetched on first use",
        meaning: "The chat model that answers questions and writes summaries: a .gguf, a folder, a pinned model's name, or `fast`.",
    },
    Field {
        key: "summarize",
        env: "WARPFOLD_SUMMARIZE",
        flag: "serve --summarize",
        default: "on in the desktop app, off in `warpfold serve`",
        meaning: "Summarize every document once it is indexed (1/0, true/false). Off, documents are summarized when asked. A server \
                  shares its machine, so it writes only what is asked of it unless told otherwise.",
    },
    Field {
        key: "device",
        env: "WARPFOLD_DEVICE",
        flag: "--device",
        default: "auto",
        meaning: "Where the models run: auto (the GPU when this build and the machine have one, else the CPU), cpu, cuda, cuda:N, a \
                  list (cuda:0,cuda:1) or cuda:all.",
    },
    Field {
        key: "vram_budget",
        env: "WARPFOLD_VRAM_BUDGET",
        flag: "--vram-budget",
        default: "the whole card",
        meaning: "Plan GPU memory as if the card had only this much (e.g. 8GiB): the bins and the chat model's caches stay inside it.",
    },
    Field {
        key: "bin_tokens",
        env: "WARPFOLD_BIN_TOKENS",
        flag: "--bin-tokens",
        default: "4096 on a CPU; on a GPU the VRAM probe's largest bin less 10%",
        meaning: "Tokens in one packed bin. The probe measures the card with real forwards, so most people never set it.",
    },
    Field {
        key: "align",
        env: "WARPFOLD_ALIGN",
        flag: "--align",
        default: "16",
        meaning: "Each packed sequence's length is rounded up to this many tokens (1: off); 16 keeps the GPU's tiles full.",
    },
    Field {
        key: "cpu_precision",
        env: "WARPFOLD_CPU_PRECISION",
        flag: "--cpu-precision",
        default: "auto",
        meaning: "How the CPU encoder multiplies: auto (bf16x3 where MKL runs on AMX, else f32), f32, bf16x3 or bf16.",
    },
    Field {
        key: "ocr_languages",
        env: "WARPFOLD_OCR_LANGUAGES",
        flag: "serve --ocr-languages",
        default: "auto",
        meaning: "The languages OCR reads scans in: auto (each page's own script, with the installed language packs), a list \
                  (eng+deu), or off.",
    },
    Field {
        key: "ocr_max_pages",
        env: "WARPFOLD_OCR_MAX_PAGES",
        flag: "serve --ocr-max-pages",
        default: "1000",
        meaning: "The most pages of one document OCR reads; the document notes the pages it did not reach.",
    },
    Field {
        key: "ocr_budget_secs",
        env: "WARPFOLD_OCR_BUDGET_SECS",
        flag: "serve --ocr-budget-secs",
        default: "1800 (30 minutes)",
        meaning: "The most seconds OCR spends on one document; the document notes the pages it did not reach.",
    },
];

/// Variables outside [`Settings`]: secrets, logging, the summarizer's tuning, and switches kept
/// for measurements and tests. Listed so that `docs/settings.md` names every variable warpfold
/// reads (a test checks the sources against it).
pub const OTHER_VARIABLES: &[(&str, &str)] = &[
    ("WARPFOLD_TOKEN", "`warpfold serve`'s token for clients (else a random one, printed at start; or --token-file)."),
    ("WARPFOLD_LOG", "Log filter (tracing's syntax: warn, info, warpfold_app=debug); default warn."),
    ("WARPFOLD_SUMMARY_*", "The summarizer's tuning, one variable per flag of `warpfold summarize` in capitals (WARPFOLD_SUMMARY_MAX_TOKENS, _TEMPERATURE, _TOP_P, _SEED, _REPETITION_PENALTY, _PENALTY_PROMPT_TOKENS, _NO_REPEAT_NGRAM, _CHUNK_TOKENS, _MAX_BATCH, _PREFILL_TOKENS, _PROMPTS, _RETRY, _RETRY_REPETITION_PENALTY, _RETRY_NO_REPEAT_NGRAM, _KEY_LINES)."),
    ("WARPFOLD_PYTHON", "The Python that fetches pinned models with pip (default python3)."),
    ("WARPFOLD_WEBVIEW_CONSOLE", "Desktop app: copy the web view's console to stdout (for debugging the UI)."),
    ("WARPFOLD_OCR_PAGES, WARPFOLD_OCR_RENDER, WARPFOLD_OCR_PAGE_SECONDS", "Set by warpfold for its extraction workers (the OCR settings above, passed on); not for people."),
    ("WARPFOLD_IN_FLIGHT_BINS", "Measurement: bins the indexer keeps in flight (default 8)."),
    ("WARPFOLD_TOKENIZER", "Measurement: `library` tokenizes with the tokenizers crate alone."),
    ("WARPFOLD_MKL", "Measurement: `off` keeps Intel MKL out of the CPU encoder."),
    ("WARPFOLD_CPU_PANELS, WARPFOLD_CPU_ATTENTION, WARPFOLD_CPU_ENCODER, WARPFOLD_ENCODER_KERNELS, WARPFOLD_DECODE_ATTENTION, WARPFOLD_ATTENTION, WARPFOLD_FA_KERNELS", "Measurement: kernel choices for side-by-side runs (BENCHMARKS.md names them where used)."),
    ("WARPFOLD_PROFILE", "Measurement: `1` times each stage of the CPU encoder."),
    ("WARPFOLD_FAIL_DEVICE", "Test: a device that fails after some bins (failover tests)."),
    ("WARPFOLD_HF_REFERENCE", "Test: folders of reference vectors for the GPU tests."),
    ("WARPFOLD_BIN, WARPFOLD_BUILD, WARPFOLD_FEATURES, WARPFOLD_GPU_KIT, WARPFOLD_GPU_DESKTOP, WARPFOLD_GPU_NAME, WARPFOLD_CUDA_PREFIX, WARPFOLD_REAL_NVCC, WARPFOLD_FA_KERNELS_BUILT, WARPFOLD_PEER_PYTHON", "Scripts: the build, the GPU kit and the benchmarks' peers (scripts/, bench/)."),
];

/// What the settings view shows (`GET /api/settings`, the desktop's `settings` command).
#[derive(Debug, Clone, Serialize)]
pub struct SettingsView {
    /// settings.json, where a save goes.
    pub file: String,
    /// The data folder the app runs on (the index, settings.json, uploads).
    pub data_folder: String,
    /// What it holds now (defaults where it says nothing).
    pub saved: Settings,
    /// What the running app started with: the file, the variables and the flags together.
    pub running: Option<Settings>,
    /// Keys whose variable is set in the app's environment: it wins over the file at every start.
    pub overridden: Vec<&'static str>,
    /// Every setting's variable, flag, default and meaning.
    pub fields: &'static [Field],
    /// Saved settings apply when warpfold starts again.
    pub restart_needed: bool,
    /// The pinned models to choose from: role, size, and whether each is installed.
    pub models: Vec<ModelChoice>,
}

/// A pinned model as the settings view offers it.
#[derive(Debug, Clone, Serialize)]
pub struct ModelChoice {
    pub name: String,
    /// `embedding`, `chat`, ... as the manifest says.
    pub role: String,
    /// Its size on disk once fetched, in bytes, where the manifest knows it.
    pub size_bytes: Option<u64>,
    /// In the models folder now; otherwise fetched on first use.
    pub installed: bool,
    /// Fetched only when chosen by name.
    pub on_demand: bool,
}

/// Every model of the manifest, as the settings view offers them, installed or not in `models_dir`.
pub fn model_choices(models_dir: &Path) -> Vec<ModelChoice> {
    let manifest = warpfold_runtime::models::Manifest::embedded();
    manifest
        .models
        .iter()
        .map(|entry| {
            let installed = warpfold_runtime::models::is_installed(entry, models_dir);
            let on_disk = || {
                let dir = models_dir.join(&entry.name);
                entry.files.keys().map(|f| std::fs::metadata(dir.join(f)).map(|m| m.len()).ok()).sum::<Option<u64>>()
            };
            ModelChoice {
                name: entry.name.clone(),
                role: entry.role.clone(),
                size_bytes: entry.size().or_else(|| installed.then(on_disk).flatten()),
                installed,
                on_demand: entry.on_demand,
            }
        })
        .collect()
}

impl SettingsView {
    /// The view of `saved` (settings.json at `file`) beside the settings the app runs with.
    pub fn new(saved: Settings, running: Option<Settings>, file: &Path) -> SettingsView {
        let data_folder = file.parent().map(|d| d.display().to_string()).unwrap_or_default();
        let overridden = FIELDS.iter().filter(|f| std::env::var_os(f.env).is_some_and(|v| !v.is_empty())).map(|f| f.key).collect();
        // What the next start would run with: the file, then the same variables.
        let planned = saved.clone().with_env().unwrap_or_else(|_| saved.clone());
        let restart_needed = running.as_ref().is_some_and(|running| differs(&planned, running));
        let models = model_choices(&running.as_ref().unwrap_or(&saved).models_dir());
        SettingsView { file: file.display().to_string(), data_folder, saved, running, overridden, fields: FIELDS, restart_needed, models }
    }
}

/// Refuses, in `wanted` against `saved`, a changed folder (`data_dir`, `db`, `models_dir`) or a
/// model named by something other than a pinned model's name (or `fast` for the chat model): what
/// the settings view may not change ([`crate::App::save_settings`]).
pub fn refuse_new_paths(saved: &Settings, wanted: &Settings) -> Result<(), SettingsError> {
    for (key, before, after) in [
        ("data_dir", &saved.data_dir, &wanted.data_dir),
        ("db", &saved.db, &wanted.db),
        ("models_dir", &saved.models_dir, &wanted.models_dir),
    ] {
        if before != after {
            return Err(invalid(key, "a folder is not changed from the app's window: edit settings.json or set the variable"));
        }
    }
    let manifest = warpfold_runtime::models::Manifest::embedded();
    let known = |name: &str, role: &str| manifest.get(name).is_ok_and(|entry| entry.role == role);
    if wanted.model != saved.model {
        if let Some(model) = wanted.model.as_deref().filter(|m| !known(m, "embedding")) {
            return Err(invalid("model", format!("{model:?} is not an embedding model warpfold knows by name (`warpfold models list`)")));
        }
    }
    if wanted.chat_model != saved.chat_model {
        if let Some(model) = wanted.chat_model.as_deref().filter(|m| *m != "fast" && !known(m, "summarization")) {
            return Err(invalid(
                "chat_model",
                format!("{model:?} is not a chat model warpfold knows by name (`warpfold models list`), nor `fast`"),
            ));
        }
    }
    Ok(())
}

/// Whether two settings differ in anything but the paths a front fills in for itself.
fn differs(a: &Settings, b: &Settings) -> bool {
    let plain = |s: &Settings| Settings { data_dir: None, db: None, models_dir: None, ..s.clone() };
    plain(a) != plain(b)
}

/// A setting that does not parse, named with its key and variable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key} ({env}): {message}")]
pub struct SettingsError {
    pub key: &'static str,
    pub env: &'static str,
    pub message: String,
}

fn field(key: &str) -> &'static Field {
    FIELDS.iter().find(|f| f.key == key).expect("every key of Settings is in FIELDS. This is a bug.")
}

fn invalid(key: &str, message: impl Into<String>) -> SettingsError {
    let f = field(key);
    SettingsError { key: f.key, env: f.env, message: message.into() }
}

impl Settings {
    /// These settings with each variable that `var` gives (non-empty) in place of the field.
    pub fn with_vars(mut self, var: impl Fn(&str) -> Option<String>) -> Result<Settings, SettingsError> {
        let get = |key: &str| var(field(key).env).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let number = |key: &str| -> Result<Option<u64>, SettingsError> {
            get(key).map(|v| v.parse::<u64>().map_err(|e| invalid(key, format!("{v:?}: {e}")))).transpose()
        };
        if let Some(v) = get("data_dir") {
            self.data_dir = Some(v.into());
        }
        if let Some(v) = get("db") {
            self.db = Some(v.into());
        }
        if let Some(v) = get("models_dir") {
            self.models_dir = Some(v.into());
        }
        if let Some(v) = get("model") {
            self.model = Some(v);
        }
        if let Some(v) = get("chat_model") {
            self.chat_model = Some(v);
        }
        if let Some(v) = get("summarize") {
            self.summarize = Some(match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "on" | "yes" => true,
                "0" | "false" | "off" | "no" => false,
                _ => return Err(invalid("summarize", format!("{v:?}: write 1 (on) or 0 (off)"))),
            });
        }
        if let Some(v) = get("device") {
            self.device = v;
        }
        if let Some(v) = get("vram_budget") {
            self.vram_budget = Some(v);
        }
        if let Some(v) = number("bin_tokens")? {
            self.bin_tokens = Some(u32::try_from(v).map_err(|e| invalid("bin_tokens", e.to_string()))?);
        }
        if let Some(v) = number("align")? {
            self.align = u32::try_from(v).map_err(|e| invalid("align", e.to_string()))?;
        }
        if let Some(v) = get("cpu_precision") {
            self.cpu_precision = v;
        }
        if let Some(v) = get("ocr_languages") {
            self.ocr_languages = v;
        }
        if let Some(v) = number("ocr_max_pages")? {
            self.ocr_max_pages = v as usize;
        }
        if let Some(v) = number("ocr_budget_secs")? {
            self.ocr_budget_secs = v;
        }
        self.check()?;
        Ok(self)
    }

    /// [`with_vars`](Self::with_vars) over the process's environment.
    pub fn with_env(self) -> Result<Settings, SettingsError> {
        self.with_vars(|key| std::env::var(key).ok())
    }

    /// The settings a person saved in `settings.json` (its other keys, such as the watched
    /// folders, are the app's own); the defaults when there is no file yet. A setting of the wrong
    /// type is an error naming it: the app does not start on settings other than the person's. A
    /// file that is no JSON object at all (cut off by a crash or a full disk) gives the defaults,
    /// said in the log: the app keeps such a file aside when it starts, so nothing in it is lost.
    pub fn from_file(path: &Path) -> Result<Settings, SettingsError> {
        let text = match std::fs::read(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Settings::default()),
            Err(e) => return Err(SettingsError { key: "settings.json", env: "-", message: format!("reading {}: {e}", path.display()) }),
        };
        let file_error =
            |message: String| SettingsError { key: "settings.json", env: "-", message: format!("{}: {message}", path.display()) };
        let map: serde_json::Map<String, serde_json::Value> = match serde_json::from_slice(&text) {
            Ok(map) => map,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "settings.json is not readable as settings: starting with the defaults");
                return Ok(Settings::default());
            }
        };
        let settings: Settings = serde_json::from_value(serde_json::Value::Object(map.clone())).map_err(|e| {
            // serde names the type, not the key: find the key that does not read.
            let bad = map.iter().find(|(k, v)| serde_json::from_value::<Settings>(serde_json::json!({ k.as_str(): v })).is_err());
            match bad {
                Some((key, value)) => file_error(format!("\"{key}\": {value} is not a valid value ({e})")),
                None => file_error(e.to_string()),
            }
        })?;
        settings.check()?;
        Ok(settings)
    }

    /// The desktop app's settings: `settings.json` in the data folder, then the environment.
    pub fn for_desktop() -> Result<Settings, SettingsError> {
        let env = Settings::default().with_env()?;
        let data_dir = env.data_dir();
        let saved = Settings::from_file(&data_dir.join("settings.json"))?;
        saved.with_env()
    }

    /// Refuses values that would only fail later, deep in the start-up.
    pub fn check(&self) -> Result<(), SettingsError> {
        self.device_spec()?;
        self.cpu_precision()?;
        self.vram_budget_bytes()?;
        warpfold_index::ocr::languages_setting(&self.ocr_languages).map_err(|e| invalid("ocr_languages", e.to_string()))?;
        if self.bin_tokens == Some(0) {
            return Err(invalid("bin_tokens", "a bin holds at least one token"));
        }
        Ok(())
    }

    pub fn device_spec(&self) -> Result<DeviceSpec, SettingsError> {
        warpfold_runtime::parse_device(&self.device).map_err(|e| invalid("device", e))
    }

    pub fn cpu_precision(&self) -> Result<CpuPrecision, SettingsError> {
        self.cpu_precision.parse().map_err(|e: String| invalid("cpu_precision", e))
    }

    pub fn vram_budget_bytes(&self) -> Result<Option<u64>, SettingsError> {
        self.vram_budget
            .as_deref()
            .map(|v| warpfold_engine::probe::parse_size(v).map_err(|e| invalid("vram_budget", e.to_string())))
            .transpose()
    }

    /// The data folder: the setting, else the XDG default ([`default_data_dir`]).
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir.clone().unwrap_or_else(default_data_dir)
    }

    /// The index: the setting, else index.db in the data folder.
    pub fn db(&self) -> PathBuf {
        self.db.clone().unwrap_or_else(|| self.data_dir().join("index.db"))
    }

    /// Where models are kept: the setting, else the runtime's default.
    pub fn models_dir(&self) -> PathBuf {
        self.models_dir.clone().unwrap_or_else(default_models_dir)
    }

    /// The engine's options these settings give (packed bins, the adaptive window).
    pub fn engine_options(&self) -> Result<EngineOptions, SettingsError> {
        Ok(EngineOptions {
            device: self.device_spec()?,
            bin_tokens: self.bin_tokens,
            vram_budget: self.vram_budget_bytes()?,
            align: self.align.max(1),
            cpu_precision: self.cpu_precision()?,
            ..EngineOptions::default()
        })
    }

    /// One line per setting, as the fronts print it at start: the value in effect, and where a
    /// default stands, what it resolves to.
    pub fn describe(&self) -> Vec<String> {
        let or = |v: Option<String>, default: &str| v.unwrap_or_else(|| format!("(default) {default}"));
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        vec![
            format!("data_dir = {}", or(path(&self.data_dir), &self.data_dir().display().to_string())),
            format!("db = {}", or(path(&self.db), &self.db().display().to_string())),
            format!("models_dir = {}", or(path(&self.models_dir), &self.models_dir().display().to_string())),
            format!("model = {}", or(self.model.clone(), field("model").default)),
            format!("chat_model = {}", or(self.chat_model.clone(), field("chat_model").default)),
            format!("summarize = {}", or(self.summarize.map(|s| s.to_string()), field("summarize").default)),
            format!("device = {}", self.device),
            format!("vram_budget = {}", or(self.vram_budget.clone(), field("vram_budget").default)),
            format!("bin_tokens = {}", or(self.bin_tokens.map(|b| b.to_string()), field("bin_tokens").default)),
            format!("align = {}", self.align),
            format!("cpu_precision = {}", self.cpu_precision),
            format!("ocr_languages = {}", self.ocr_languages),
            format!("ocr_max_pages = {}", self.ocr_max_pages),
            format!("ocr_budget_secs = {}", self.ocr_budget_secs),
        ]
    }
}

/// The kernel switches the variables `var` gives ask for (docs/settings.md, "Other variables"):
/// for side-by-side measurements; none set, the kernels a person runs.
pub fn kernel_switches(var: impl Fn(&str) -> Option<String>) -> KernelSwitches {
    let get = |key: &str| var(key).map(|v| v.trim().to_string()).unwrap_or_default();
    KernelSwitches {
        mkl: match get("WARPFOLD_MKL").as_str() {
            "" => MklChoice::BesideModel,
            "off" => MklChoice::Off,
            path => MklChoice::At(PathBuf::from(path)),
        },
        mkl_constrained: var("MKL_ENABLE_INSTRUCTIONS").is_some() || var("MKL_CBWR").is_some(),
        cpu_panels: get("WARPFOLD_CPU_PANELS"),
        cpu_attention: get("WARPFOLD_CPU_ATTENTION"),
        cpu_encoder_ops: get("WARPFOLD_CPU_ENCODER") == "ops",
        candle_encoder_ops: get("WARPFOLD_ENCODER_KERNELS") == "candle",
        gathered_decode: get("WARPFOLD_DECODE_ATTENTION") == "gathered",
        profile: get("WARPFOLD_PROFILE") == "1",
    }
}

/// Hands the variables that are no per-app setting to the libraries: the kernel switches, the
/// tokenizer's fast path, Tesseract's `TESSDATA_PREFIX`, the Python that fetches models. A
/// front's first step (extraction workers included), before a model loads.
pub fn apply_environment() {
    let var = |key: &str| std::env::var(key).ok();
    warpfold_candle::switches::set(kernel_switches(var));
    warpfold_engine::tokenize::tokenize_with_library_only(var("WARPFOLD_TOKENIZER").as_deref() == Some("library"));
    warpfold_index::ocr::use_tessdata_prefix(std::env::var_os("TESSDATA_PREFIX").map(PathBuf::from));
    if let Some(python) = var("WARPFOLD_PYTHON").filter(|p| !p.trim().is_empty()) {
        warpfold_runtime::models::fetch_with_python(python);
    }
}

/// `WARPFOLD_IN_FLIGHT_BINS`, a knob for measurements: bins' worth of tokens the indexer keeps
/// between submission and commit (`IndexOptions::in_flight_bins`).
pub fn in_flight_bins() -> u64 {
    std::env::var("WARPFOLD_IN_FLIGHT_BINS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&b| b > 0)
        .unwrap_or(warpfold_index::pipeline::DEFAULT_IN_FLIGHT_BINS)
}

/// The person's locale as POSIX orders its variables (`LC_ALL`, then `LC_MESSAGES`, then `LANG`;
/// the first one set), e.g. `de_DE.UTF-8`: a new index's embedding model is chosen by its
/// language (`warpfold_runtime::embedding_model_for_locale`).
pub fn locale() -> Option<String> {
    ["LC_ALL", "LC_MESSAGES", "LANG"].iter().find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// The data folder when none is set: `$WARPFOLD_DATA_DIR`, else `$XDG_DATA_HOME/warpfold`, else
/// `~/.local/share/warpfold` ([`crate::paths::data_dir_from`]).
pub fn default_data_dir() -> PathBuf {
    crate::paths::data_dir_from(std::env::var_os("WARPFOLD_DATA_DIR"), std::env::var_os("XDG_DATA_HOME"), std::env::var_os("HOME"))
}

/// The person's home folder (`HOME`), for `~` in a folder they type ([`crate::paths::expand_home`]).
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// Where models are kept when no folder is set: `$WARPFOLD_MODELS_DIR`, else ./models in a
/// checkout, else `$XDG_DATA_HOME/warpfold/models` ([`warpfold_runtime::models::models_dir_from`]).
pub fn default_models_dir() -> PathBuf {
    warpfold_runtime::models::models_dir_from(
        std::env::var_os("WARPFOLD_MODELS_DIR"),
        std::env::var_os("XDG_DATA_HOME"),
        std::env::var_os("HOME"),
    )
}

/// `docs/settings.md`: every setting with its key, variable, flag, default and meaning, then the
/// other variables.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Settings\n\n\
         <!-- Generated from crates/app/src/settings.rs (`cargo run -p warpfold -- settings --markdown > docs/settings.md`); \
         a test fails when this file is stale. -->\n\n\
         One set of settings for every front. The desktop app and `warpfold serve` read `settings.json` in the data folder (these \
         keys, all optional, beside the watched folders kept there; the app's Settings dialog writes it), then the variables, then \
         (the command line) the flags, which win. Both print the settings in effect when they start; saved settings apply at the \
         next start.\n\n\
         | key (settings.json) | variable | flag | default | what it does |\n|---|---|---|---|---|\n",
    );
    for f in FIELDS {
        out.push_str(&format!("| `{}` | `{}` | `{}` | {} | {} |\n", f.key, f.env, f.flag, f.default, f.meaning));
    }
    out.push_str("\nAn example `settings.json`:\n\n```json\n");
    let example = Settings { device: "cuda".into(), vram_budget: Some("8GiB".into()), summarize: Some(false), ..Settings::default() };
    let mut value = serde_json::to_value(&example).expect("plain data");
    if let Some(map) = value.as_object_mut() {
        map.retain(|k, _| ["device", "vram_budget", "summarize", "ocr_languages"].contains(&k.as_str()));
    }
    out.push_str(&serde_json::to_string_pretty(&value).expect("plain data"));
    out.push_str("\n```\n\n## Other variables\n\n| variable | what it is for |\n|---|---|\n");
    for (name, meaning) in OTHER_VARIABLES {
        out.push_str(&format!("| `{name}` | {meaning} |\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_choices_say_which_are_installed_and_their_size() {
        let repo_models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models");
        let choices = model_choices(&repo_models);
        let minilm = choices.iter().find(|c| c.name == "all-MiniLM-L6-v2").expect("the default embedding model is offered");
        assert!(minilm.installed, "{repo_models:?} holds it (scripts/test.sh fetches it)");
        assert!(minilm.size_bytes.is_some_and(|b| b > 20_000_000), "{minilm:?}");
        let empty = tempfile::tempdir().unwrap();
        assert!(model_choices(empty.path()).iter().all(|c| !c.installed));
        assert!(model_choices(empty.path()).iter().any(|c| c.role == "summarization"), "chat models are offered too");
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |key| map.get(key).cloned()
    }

    #[test]
    fn fields_name_every_key_of_settings_in_order_each_with_its_own_variable() {
        let keys: Vec<String> = serde_json::to_value(Settings::default()).unwrap().as_object().unwrap().keys().cloned().collect();
        let mut named: Vec<String> = FIELDS.iter().map(|f| f.key.to_string()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        named.sort();
        assert_eq!(named, sorted, "FIELDS and Settings disagree");
        for f in FIELDS {
            assert_eq!(f.env, format!("WARPFOLD_{}", f.key.to_ascii_uppercase()), "one variable per field, named after it");
        }
    }

    #[test]
    fn variables_override_the_file_and_bad_values_name_their_variable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        std::fs::write(&file, r#"{"folders": ["/home/a/docs"], "device": "cpu", "align": 8, "summarize": false}"#).unwrap();
        let saved = Settings::from_file(&file).unwrap();
        assert_eq!((saved.device.as_str(), saved.align, saved.summarize), ("cpu", 8, Some(false)));
        let merged =
            saved.clone().with_vars(vars(&[("WARPFOLD_ALIGN", "32"), ("WARPFOLD_VRAM_BUDGET", "8GiB"), ("WARPFOLD_MODEL", " ")])).unwrap();
        assert_eq!((merged.align, merged.device.as_str(), merged.model.as_deref()), (32, "cpu", None), "an empty variable is unset");
        assert_eq!(merged.vram_budget_bytes().unwrap(), Some(8 << 30));
        let options = merged.engine_options().unwrap();
        assert_eq!((options.device, options.align, options.vram_budget), (DeviceSpec::Cpu, 32, Some(8 << 30)));

        let err = saved.clone().with_vars(vars(&[("WARPFOLD_DEVICE", "gpu7")])).unwrap_err();
        assert_eq!((err.key, err.env), ("device", "WARPFOLD_DEVICE"));
        let err = saved.clone().with_vars(vars(&[("WARPFOLD_BIN_TOKENS", "lots")])).unwrap_err().to_string();
        assert!(err.starts_with("bin_tokens (WARPFOLD_BIN_TOKENS): \"lots\""), "{err}");
        let bf16 = saved.clone().with_vars(vars(&[("WARPFOLD_CPU_PRECISION", "BF16")])).unwrap();
        assert_eq!(bf16.engine_options().unwrap().cpu_precision, CpuPrecision::Bf16);
        let err = saved.clone().with_vars(vars(&[("WARPFOLD_CPU_PRECISION", "fp8")])).unwrap_err().to_string();
        assert!(err.contains("WARPFOLD_CPU_PRECISION") && err.contains("auto, f32, bf16 or bf16x3"), "{err}");
        let err = saved.with_vars(vars(&[("WARPFOLD_SUMMARIZE", "maybe")])).unwrap_err().to_string();
        assert!(err.contains("WARPFOLD_SUMMARIZE") && err.contains("1 (on) or 0 (off)"), "{err}");

        // Cut off mid-write: the defaults (the app keeps the file aside at its start).
        std::fs::write(&file, r#"{"device": "cp"#).unwrap();
        assert_eq!(Settings::from_file(&file).unwrap(), Settings::default());
        std::fs::write(&file, r#"{"align": "sixteen"}"#).unwrap();
        let err = Settings::from_file(&file).unwrap_err().to_string();
        assert!(err.contains("settings.json") && err.contains("align"), "{err}");
        assert_eq!(Settings::from_file(&dir.path().join("none.json")).unwrap(), Settings::default(), "no file: the defaults");
    }

    #[test]
    fn the_defaults_the_table_states_are_the_defaults() {
        let d = Settings::default();
        let stated = |key: &str| field(key).default.split(' ').next().unwrap().to_string();
        assert_eq!(stated("device"), d.device);
        assert_eq!(stated("align"), d.align.to_string());
        assert_eq!(stated("cpu_precision"), d.cpu_precision);
        assert_eq!(stated("ocr_languages"), d.ocr_languages);
        assert_eq!(stated("ocr_max_pages"), d.ocr_max_pages.to_string());
        assert_eq!(stated("ocr_budget_secs"), d.ocr_budget_secs.to_string());
    }

    #[test]
    fn the_effective_settings_say_where_defaults_lead() {
        let settings = Settings { data_dir: Some("/srv/wf".into()), ..Settings::default() };
        let lines = settings.describe();
        assert_eq!(lines.len(), FIELDS.len());
        assert!(lines.contains(&"data_dir = /srv/wf".to_string()));
        assert!(lines.contains(&"db = (default) /srv/wf/index.db".to_string()), "{lines:?}");
        assert!(lines.contains(&"device = auto".to_string()));
    }

    #[test]
    fn docs_settings_md_is_generated_from_the_fields() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/settings.md");
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            written == markdown(),
            "docs/settings.md is stale: run `cargo run --release -p warpfold -- settings --markdown > docs/settings.md`"
        );
    }

    /// Library code outside this module reads no environment: a front hands over what the
    /// variables say (this module's [`apply_environment`], [`Settings::with_env`], a `var` function).
    /// Test code, the front (crates/cli) and build scripts may read it.
    #[test]
    fn no_library_reads_the_environment_but_this_module() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut readers = Vec::new();
        let mut stack = vec![root.join("crates")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    // The front, tests, examples and benches are programs, not the library.
                    if !["cli", "tests", "examples", "benches", "target"].contains(&name.as_str()) {
                        stack.push(path);
                    }
                    continue;
                }
                let skipped = ["build.rs", "tests.rs", "gpu_tests.rs", "test_support.rs"].contains(&name.as_str());
                if skipped || !name.ends_with(".rs") || path.ends_with("crates/app/src/settings.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let library = text.split("#[cfg(test)]\n").next().unwrap_or_default();
                for (n, line) in library.lines().enumerate() {
                    if line.contains("env::var") && !line.trim_start().starts_with("//") {
                        readers.push(format!("{}:{}", path.strip_prefix(&root).unwrap_or(&path).display(), n + 1));
                    }
                }
            }
        }
        assert!(
            readers.is_empty(),
            "library code reading the environment (hand the value over from crates/app/src/settings.rs): {readers:?}"
        );
    }

    #[test]
    fn every_variable_the_sources_read_is_in_the_table() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let documented = markdown();
        let mut missing = std::collections::BTreeSet::new();
        let mut stack = vec![root.join("crates"), root.join("src-tauri/src")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for (i, _) in text.match_indices("\"WARPFOLD_") {
                        let name: String =
                            text[i + 1..].chars().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_').collect();
                        let listed = documented.contains(&format!("`{name}`"))
                            || documented.contains(&format!("{name},"))
                            || documented.contains(&format!(", {name}`"))
                            || name.ends_with('_')
                            || name.starts_with("WARPFOLD_SUMMARY_");
                        if !listed {
                            missing.insert(format!("{name} ({})", path.strip_prefix(&root).unwrap_or(&path).display()));
                        }
                    }
                }
            }
        }
        assert!(missing.is_empty(), "variables read but not in docs/settings.md (FIELDS or OTHER_VARIABLES): {missing:?}");
    }
}
