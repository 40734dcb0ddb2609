//! The app against real files and the real default model (CPU): watched folders, restarts,
//! drops, paths the user never chose.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use warpfold_candle::DeviceChoice;
use warpfold_index::extract::Isolation;
use warpfold_index::pipeline::IndexOptions;

use super::*;
use crate::runtime::{load_model, LoadedModel};

fn model() -> LoadedModel {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/all-MiniLM-L6-v2");
    assert!(dir.is_dir(), "{} is missing: run `warpfold models fetch` (scripts/test.sh does)", dir.display());
    load_model(&dir, DeviceChoice::Cpu, warpfold_engine::SchedulerConfig::default()).expect("the default model loads")
}

fn start(data: &Path, loaded: &LoadedModel) -> App {
    let config = AppConfig {
        db: data.join("index.db"),
        data_dir: data.to_path_buf(),
        model: loaded.model.clone(),
        // Text files only here: no PDF worker process is needed.
        index_options: IndexOptions {
            isolation: Isolation::new(PathBuf::from("/nonexistent-worker"), vec![]),
            jobs: 1,
            overlap: 32,
            prune: false,
            retry_failed: false,
        },
        settle: Duration::from_millis(600),
        sample_every: Duration::from_millis(100),
        device: loaded.device.clone(),
        memory: None,
        summaries: None,
    };
    App::start(config, Arc::clone(&loaded.embedder)).expect("the app starts")
}

/// Waits (at most a minute: a bound against hanging, not a speed check) for `what` to hold.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "gave up waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn indexed(app: &App) -> Vec<String> {
    let store = Store::open_existing(&app.inner.config.db).unwrap();
    store.documents().unwrap().into_iter().map(|d| d.path).collect()
}

fn chunk_text(app: &App, path: &Path) -> Option<String> {
    let store = Store::open_existing(&app.inner.config.db).unwrap();
    let detail = store.document_detail(&path.display().to_string()).unwrap()?;
    Some(detail.chunks.iter().map(|c| c.text.as_str()).collect::<Vec<_>>().join(" "))
}

fn state_of(app: &App, path: &Path) -> Option<QueueState> {
    app.inner.board.get(&path.display().to_string()).map(|f| f.state)
}

/// Every queue event for `path` received so far.
fn events_for(rx: &mut broadcast::Receiver<AppEvent>, seen: &mut Vec<AppEvent>, path: &Path) -> Vec<QueueState> {
    while let Ok(event) = rx.try_recv() {
        seen.push(event);
    }
    let path = path.display().to_string();
    seen.iter().filter_map(|e| match e { AppEvent::Queue(f) if f.path == path => Some(f.state), _ => None }).collect()
}

#[test]
fn a_watched_folder_is_followed_through_create_slow_append_rename_and_delete() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(watched.path()).unwrap();
    let app = start(data.path(), &loaded);
    let mut rx = app.subscribe();
    let mut seen = Vec::new();
    assert_eq!(app.add_folder(&root.display().to_string()).unwrap(), vec![root.display().to_string()]);
    assert_eq!(app.add_folder(&root.display().to_string()).unwrap().len(), 1, "adding twice watches once");

    // Created: indexed, searchable.
    let a = root.join("alpha.txt");
    std::fs::write(&a, "Herons nest in tall reeds along the quiet river bank.").unwrap();
    eventually("alpha.txt indexed", || state_of(&app, &a) == Some(QueueState::Done));
    let hits = app.search("where do herons nest", 3).unwrap();
    assert_eq!(hits[0].path, a.display().to_string());

    // Slowly appended (a copy in progress): read once, whole.
    let b = root.join("notes").join("beta.md");
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    let mut expected = String::new();
    for i in 0..8 {
        let line = format!("Line {i} of a slow copy about lighthouse keepers.\n");
        expected.push_str(&line);
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&b).unwrap();
        std::io::Write::write_all(&mut f, line.as_bytes()).unwrap();
        drop(f);
        std::thread::sleep(Duration::from_millis(200));
    }
    std::fs::OpenOptions::new().append(true).open(&b).unwrap();
    let tail = "The last line names the zanzibarquokka.\n";
    std::io::Write::write_all(&mut std::fs::OpenOptions::new().append(true).open(&b).unwrap(), tail.as_bytes()).unwrap();
    expected.push_str(tail);
    eventually("beta.md indexed", || state_of(&app, &b) == Some(QueueState::Done));
    let text = chunk_text(&app, &b).expect("beta.md is in the index");
    assert!(text.contains("zanzibarquokka") && text.contains("Line 0"), "the whole file was read: {text}");
    let b_states = events_for(&mut rx, &mut seen, &b);
    assert_eq!(b_states.iter().filter(|s| **s == QueueState::Extracting).count(), 1, "read exactly once, after the writes settled: {b_states:?}");

    // Renamed: the entries move, nothing is read again.
    let c = root.join("gamma.txt");
    std::fs::rename(&a, &c).unwrap();
    eventually("the rename followed", || indexed(&app).contains(&c.display().to_string()) && !indexed(&app).contains(&a.display().to_string()));
    assert!(events_for(&mut rx, &mut seen, &c).iter().all(|s| *s != QueueState::Extracting), "a renamed file is not extracted again");
    assert_eq!(app.search("where do herons nest", 3).unwrap()[0].path, c.display().to_string());
    assert!(app.document(&c.display().to_string()).unwrap().detail.is_some());

    // Deleted: it leaves the index and the queue.
    std::fs::remove_file(&c).unwrap();
    eventually("the deletion followed", || !indexed(&app).contains(&c.display().to_string()));
    eventually("the queue forgot it", || state_of(&app, &c).is_none());
    assert!(app.search("where do herons nest", 3).unwrap().iter().all(|h| h.path != c.display().to_string()));
    app.stop();
}

#[test]
fn a_restart_catches_up_with_changes_made_while_closed() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(watched.path()).unwrap();
    let (x, y, z) = (root.join("x.txt"), root.join("y.txt"), root.join("z.txt"));
    std::fs::write(&x, "The x file is about glaciers and ice.").unwrap();
    std::fs::write(&y, "The y file is about volcanoes and lava.").unwrap();
    std::fs::write(&z, "The z file is about deserts and dunes.").unwrap();
    {
        let app = start(data.path(), &loaded);
        app.add_folder(&root.display().to_string()).unwrap();
        eventually("three files indexed", || indexed(&app).len() == 3 && [&x, &y, &z].iter().all(|p| state_of(&app, p) == Some(QueueState::Done)));
        app.stop();
    }
    // While closed: delete x, rename y, edit z, add w.
    std::fs::remove_file(&x).unwrap();
    let y2 = root.join("y-renamed.txt");
    std::fs::rename(&y, &y2).unwrap();
    std::fs::write(&z, "The z file now speaks of rainforests and orchids.").unwrap();
    let w = root.join("w.txt");
    std::fs::write(&w, "A new w file about coral reefs.").unwrap();

    let app = start(data.path(), &loaded);
    assert_eq!(app.folders(), vec![root.display().to_string()], "the watched folder persisted");
    let mut want = vec![w.display().to_string(), y2.display().to_string(), z.display().to_string()];
    want.sort();
    eventually("the index caught up", || {
        indexed(&app) == want && chunk_text(&app, &z).is_some_and(|t| t.contains("orchids")) && state_of(&app, &w) == Some(QueueState::Done)
    });
    assert!(chunk_text(&app, &y2).unwrap().contains("volcanoes"), "the renamed file kept its entries");
    assert!(state_of(&app, &x).is_none(), "the deleted file left the queue");
    app.stop();
}

#[test]
fn the_webview_may_only_name_paths_the_user_chose() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "not for the webview").unwrap();
    let app = start(data.path(), &loaded);
    let path = secret.display().to_string();
    let err = app.add_paths(&[path.clone()], Origin::Webview).unwrap_err();
    assert_eq!(err.kind(), "path_not_allowed", "{err}");
    assert_eq!(app.document(&path).unwrap_err().kind(), "path_not_allowed");
    assert_eq!(app.file_bytes("/etc/passwd").unwrap_err().kind(), "path_not_allowed");
    assert_eq!(app.add_paths(&["/no/such/file.pdf".into()], Origin::User).unwrap_err().kind(), "not_found");
    // Once dropped on the window it is the user's choice.
    app.choose(&[secret.clone()]);
    assert_eq!(app.add_paths(&[path.clone()], Origin::Webview).unwrap(), 1);
    let canonical = std::fs::canonicalize(&secret).unwrap();
    eventually("the dropped file indexed", || state_of(&app, &canonical) == Some(QueueState::Done));
    assert_eq!(app.file_bytes(&canonical.display().to_string()).unwrap(), b"not for the webview");
    // Uploads land in the inbox, whatever path the name pretends.
    let stored = app.upload("../../etc/evil.txt", b"uploaded words about kestrels").unwrap();
    assert_eq!(Path::new(&stored).parent().unwrap(), std::fs::canonicalize(data.path().join("inbox")).unwrap());
    assert_eq!(app.upload("tool.exe", b"x").unwrap_err().kind(), "invalid_input");
    eventually("the upload indexed", || state_of(&app, Path::new(&stored)) == Some(QueueState::Done));
    let state = app.state();
    assert!(!state.bins.is_empty(), "the bins that ran are shown");
    let bin = &state.bins[0];
    assert_eq!(bin.padding + bin.sequences.iter().map(|&n| n as u64).sum::<u64>(), bin.aligned.iter().map(|&n| n as u64).sum::<u64>());
    assert!(bin.fill > 0.0 && bin.fill <= 1.0 && bin.free < bin.capacity as u64);
    eventually("a sample with throughput", || app.state().samples.iter().any(|s| s.tokens_per_s > 0.0 && s.padded_equivalent_per_s >= s.tokens_per_s));
    app.stop();
}
