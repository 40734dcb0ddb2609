//! The warpfold desktop app: a window around the web UI (ui/) and the app core (warpfold-app).
//!
//! Why so thin: everything the app does is in `warpfold_app::App`, which `warpfold serve` runs
//! too; a command here only forwards its arguments and returns the app's answer or its typed
//! `AppError` (serialised as `{kind, message}` for the rejected promise). Live state goes out as
//! Tauri events (`queue`, `bin`, `folders`, `removed`, `summary`) and, for the high-rate throughput samples,
//! through the ipc Channel the UI hands to `subscribe_samples`. Files dropped on the window are
//! taken by the Rust side straight from the window event (so the webview never invents a path);
//! the webview may only name paths the user chose (dropped, or inside a watched folder), and a new
//! watched folder is confirmed by the user in a native dialog.
//!
//! PDF extraction runs in worker processes, as in the command line: this binary started with
//! `extract-worker FILE` is that worker.

#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

// The same allocator as the command line's (crates/cli/src/main.rs): candle allocates a buffer per
// tensor op, and the indexer frees on one thread what another allocated; the system allocator pays
// for both (page faults, arena locks) where mimalloc does not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use tauri::ipc::Channel;
use tauri::{DragDropEvent, Emitter, Manager, State, WindowEvent};
use warpfold_app::ask::{AskEvent, AskRequest, Turn};
use warpfold_app::launch::Front;
use warpfold_app::settings::Settings;
use warpfold_app::{App, AppError, AppEvent, AppStateView, DocumentView, Origin, RecvError, Sample, SearchOptions};

mod starting;
use starting::{Slot, Started, StartingView};

/// What the start is busy with (the models it fetches, and how far), or null once the app is there:
/// the UI shows it instead of the app until then ([`starting`]).
#[tauri::command]
fn starting(slot: State<'_, Slot>) -> Option<StartingView> {
    slot.view()
}

#[tauri::command]
fn state(app: Started<'_>) -> AppStateView {
    app.state()
}

/// Watches a folder. The webview may name any path, but only the user chooses a new root: a folder
/// not inside what they already chose is shown to them in a dialog of the desktop's own, which
/// script in the webview can neither see nor answer, and watched only if they say yes.
#[tauri::command(async)]
fn add_folder(window: tauri::WebviewWindow, app: Started<'_>, path: String) -> Result<Vec<String>, AppError> {
    match app.add_folder(&path, Origin::Webview) {
        Err(AppError::PathNotAllowed(_)) => {
            // The real folder is what is shown and what is watched: no `~`, `..` or link to
            // mislead; a folder that cannot be resolved is refused, never shown as typed.
            let home = warpfold_app::settings::home_dir();
            let expanded = warpfold_app::paths::expand_home(&path, home.as_deref()).map_err(AppError::InvalidInput)?;
            let real = std::fs::canonicalize(&expanded)
                .map(|p| p.display().to_string())
                .map_err(|_| AppError::NotFound(format!("{path}: no such folder")))?;
            if confirm_watch(&window, &real)? {
                app.add_folder(&real, Origin::User)
            } else {
                Err(AppError::PathNotAllowed(format!("watching {real} was not confirmed")))
            }
        }
        answer => answer,
    }
}

/// Asks the user whether to watch `folder`, in a modal GTK dialog on the window's main thread.
fn confirm_watch(window: &tauri::WebviewWindow, folder: &str) -> Result<bool, AppError> {
    use gtk::prelude::*;
    let (tx, rx) = std::sync::mpsc::channel();
    let (parent, folder) = (window.clone(), folder.to_string());
    window
        .run_on_main_thread(move || {
            let parent = parent.gtk_window().ok();
            let dialog = gtk::MessageDialog::new(
                parent.as_ref(),
                gtk::DialogFlags::MODAL | gtk::DialogFlags::DESTROY_WITH_PARENT,
                gtk::MessageType::Question,
                gtk::ButtonsType::YesNo,
                &format!("Watch the folder {folder}?"),
            );
            dialog.set_secondary_text(Some("warpfold will index every document in it, now and whenever it changes."));
            let yes = dialog.run() == gtk::ResponseType::Yes;
            dialog.close();
            let _ = tx.send(yes);
        })
        .map_err(|e| AppError::Internal(format!("showing the dialog: {e}")))?;
    rx.recv().map_err(|_| AppError::Internal("the dialog closed without an answer".into()))
}

/// The settings view: settings.json, what the app runs with, the variables that override it.
#[tauri::command(async)]
fn settings(app: Started<'_>) -> Result<warpfold_app::settings::SettingsView, AppError> {
    app.settings_view()
}

/// Saves the settings to settings.json; they apply when the app starts again.
#[tauri::command(async)]
fn save_settings(app: Started<'_>, settings: Settings) -> Result<warpfold_app::settings::SettingsView, AppError> {
    app.save_settings(settings)
}

/// Stops watching a folder; with `forget`, its documents are forgotten for good.
#[tauri::command(async)]
fn remove_folder(app: Started<'_>, path: String, forget: Option<bool>) -> Result<Vec<String>, AppError> {
    app.remove_folder_and(&path, forget.unwrap_or(false)).map(|(folders, _)| folders)
}

/// Forgets documents (or the documents under folders) for good.
#[tauri::command(async)]
fn forget(app: Started<'_>, paths: Vec<String>) -> Result<serde_json::Value, AppError> {
    Ok(serde_json::json!({ "forgotten": app.forget(&paths)? }))
}

/// Pauses indexing (the files being read finish; nothing new starts).
#[tauri::command]
fn pause(app: Started<'_>) -> serde_json::Value {
    serde_json::json!({ "paused": app.set_paused(true) })
}

/// Resumes indexing.
#[tauri::command]
fn resume(app: Started<'_>) -> serde_json::Value {
    serde_json::json!({ "paused": app.set_paused(false) })
}

/// Reads a document, or the documents under a folder, again; only what the user chose.
#[tauri::command(async)]
fn reindex(app: Started<'_>, path: String) -> Result<serde_json::Value, AppError> {
    Ok(serde_json::json!({ "queued": app.reindex(&path, Origin::Webview)? }))
}

/// The document library: filtered, sorted, a page at a time (`GET /api/library`'s query as JSON).
#[tauri::command(async)]
fn library(app: Started<'_>, query: Option<warpfold_app::LibraryQuery>) -> Result<warpfold_app::LibraryView, AppError> {
    app.library(&query.unwrap_or_default())
}

#[tauri::command]
fn add_paths(app: Started<'_>, paths: Vec<String>) -> Result<serde_json::Value, AppError> {
    Ok(serde_json::json!({ "queued": app.add_paths(&paths, Origin::Webview)? }))
}

/// `options`: filters (folder, file types, dates) and the ranking, as `GET /api/search` takes them.
#[tauri::command(async)]
fn search(app: Started<'_>, query: String, k: Option<usize>, options: Option<SearchOptions>) -> Result<serde_json::Value, AppError> {
    Ok(serde_json::json!({ "hits": app.search_with(&query, k.unwrap_or(10), &options.unwrap_or_default())? }))
}

/// Answers a question from the index; what happens to it (its passages, what the model is busy
/// with, the checked answer or an error) comes on `channel`, as POST /api/ask streams it.
#[tauri::command(async)]
fn ask(
    app: Started<'_>,
    question: String,
    passages: Option<usize>,
    earlier: Option<Vec<Turn>>,
    rerank: Option<usize>,
    channel: Channel<AskEvent>,
) -> Result<(), AppError> {
    let request = AskRequest { question, passages, earlier: earlier.unwrap_or_default(), rerank };
    app.ask(request, Box::new(move |event| drop(channel.send(event))))
}

#[tauri::command]
fn document(app: Started<'_>, path: String) -> Result<DocumentView, AppError> {
    app.document(&path)
}

#[tauri::command]
fn open_file(app: Started<'_>, path: String) -> Result<(), AppError> {
    let path = app.openable(&path)?;
    std::process::Command::new("xdg-open")
        .arg(&path)
        .spawn()
        .map(drop)
        .map_err(|e| AppError::Io(format!("opening {} with xdg-open: {e}", path.display())))
}

#[tauri::command]
fn summarize(app: Started<'_>, paths: Vec<String>) -> Result<serde_json::Value, AppError> {
    Ok(serde_json::json!({ "queued": app.summarize(&paths)? }))
}

#[tauri::command]
fn subscribe_samples(app: Started<'_>, channel: Channel<Sample>) {
    let mut events = app.subscribe();
    std::thread::spawn(move || loop {
        match events.blocking_recv() {
            Ok(AppEvent::Sample(sample)) => {
                if channel.send(sample).is_err() {
                    return; // the page went away
                }
            }
            // Falling behind only loses samples; the next one comes half a second later.
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return,
        }
    });
}

/// Starts the app the way `warpfold serve` does ([`warpfold_app::launch`]), from the desktop's
/// settings: `settings.json` in the data folder, then the `WARPFOLD_*` variables
/// (docs/settings.md). Every document is summarized unless the settings say otherwise.
fn start_app() -> Result<App, AppError> {
    let settings = Settings::for_desktop().map_err(|e| AppError::InvalidInput(e.to_string()))?;
    let summary = warpfold_app::summaries::SummarizeOptions::from_vars(|key| std::env::var(key).ok())?;
    let front = Front {
        exe: std::env::current_exe().map_err(|e| AppError::Io(format!("finding this program for extraction workers: {e}")))?,
        summarize_by_default: true,
        summary,
        locale: warpfold_app::settings::locale(),
        wrap_device: None,
        say: &|line| eprintln!("warpfold: {line}"),
    };
    warpfold_app::launch::launch(&settings, front)
}

/// Forwards the app's events to the window (samples go through the Channel instead).
fn forward_events(handle: tauri::AppHandle, app: &App) {
    let mut events = app.subscribe();
    std::thread::spawn(move || loop {
        match events.blocking_recv() {
            Ok(AppEvent::Sample(_)) => {}
            Ok(AppEvent::Queue(file)) => drop(handle.emit("queue", file)),
            Ok(AppEvent::Bin(bin)) => drop(handle.emit("bin", bin)),
            Ok(AppEvent::Folders(folders)) => drop(handle.emit("folders", folders)),
            Ok(AppEvent::Removed(path)) => drop(handle.emit("removed", path)),
            Ok(AppEvent::Summary(summary)) => drop(handle.emit("summary", summary)),
            Ok(AppEvent::WritesStopped(reason)) => drop(handle.emit("writes_stopped", reason)),
            Ok(AppEvent::WritesPaused(reason)) => drop(handle.emit("writes_paused", reason)),
            Ok(AppEvent::SummarizerStatus(status)) => drop(handle.emit("summarizer_status", status)),
            Ok(AppEvent::Paused(paused)) => drop(handle.emit("paused", paused)),
            Err(RecvError::Lagged(_)) => drop(handle.emit("resync", ())),
            Err(_) => return,
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    warpfold_app::settings::apply_environment();
    if args.len() == 3 && args[1] == "extract-worker" {
        std::process::exit(warpfold_index::extract::worker_main(std::path::Path::new(&args[2]), |key| std::env::var(key).ok()));
    }
    // WebKit turns a C/POSIX locale into the language tag "C", which Intl (and so the chart
    // library) rejects: the page would not start. Such a locale says nothing about language.
    let locale = warpfold_app::settings::locale();
    if matches!(locale.as_deref(), None | Some("C") | Some("POSIX") | Some("C.UTF-8") | Some("C.utf8")) {
        std::env::set_var("LC_ALL", "en_US.UTF-8");
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("WARPFOLD_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    tauri::Builder::default()
        .setup(|tauri_app| {
            let handle = tauri_app.handle().clone();
            // A start that fetches models first runs on its own thread, the window showing what
            // it fetches (starting.rs); any other starts here, before the window shows.
            let pending = Settings::for_desktop().map(|s| (starting::pending_fetches(&s), s.models_dir()));
            match pending {
                Ok((fetches, models)) if !fetches.is_empty() => {
                    let names: Vec<&str> = fetches.iter().map(|f| f.name.as_str()).collect();
                    eprintln!(
                        "warpfold: fetching {} into {} before starting; the window shows how far",
                        names.join(" and "),
                        models.display()
                    );
                    tauri_app.manage(Slot::fetching(fetches, models));
                    std::thread::Builder::new()
                        .name("start".into())
                        .spawn(move || match start_app() {
                            Ok(app) => {
                                forward_events(handle.clone(), &app);
                                handle.state::<Slot>().started(app);
                            }
                            Err(e) => {
                                eprintln!("warpfold could not start: {e}");
                                handle.state::<Slot>().failed(e.to_string());
                            }
                        })
                        .map_err(|e| format!("starting warpfold: {e}"))?;
                }
                _ => {
                    let app = start_app().map_err(|e| format!("warpfold could not start: {e}"))?;
                    forward_events(handle, &app);
                    tauri_app.manage(Slot::ready(app));
                }
            }
            #[cfg(target_os = "linux")]
            if std::env::var_os("WARPFOLD_WEBVIEW_CONSOLE").is_some() {
                if let Some(window) = tauri_app.get_webview_window("main") {
                    let _ = window.with_webview(|webview| {
                        use webkit2gtk::{SettingsExt, WebViewExt};
                        if let Some(settings) = webview.inner().settings() {
                            settings.set_enable_write_console_messages_to_stdout(true);
                        }
                    });
                }
            }
            Ok(())
        })
        .on_window_event(|window, event| {
            if let WindowEvent::DragDrop(DragDropEvent::Drop { paths, .. }) = event {
                // Dropped while the first start fetches its models: taken once the app is there.
                window.state::<Slot>().drop_files(paths);
            }
        })
        .invoke_handler(tauri::generate_handler![
            starting,
            state,
            add_folder,
            remove_folder,
            add_paths,
            search,
            ask,
            document,
            open_file,
            summarize,
            settings,
            save_settings,
            forget,
            subscribe_samples,
            pause,
            resume,
            reindex,
            library
        ])
        .run(tauri::generate_context!())
        .expect("the warpfold window");
}
