//! The app against real files and the real default model (CPU): watched folders, restarts,
//! drops, paths the user never chose.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use warpfold_index::extract::Isolation;
use warpfold_index::pipeline::IndexOptions;

use super::*;
use crate::runtime::{device_view, start_embedder, EngineOptions};
use warpfold_engine::embed::Embedder;
use warpfold_runtime::models::ModelDir;

/// The default model on the CPU, started the way every front starts it.
struct LoadedModel {
    embedder: Arc<Embedder>,
    model: String,
    device: DeviceView,
}

fn model() -> LoadedModel {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/all-MiniLM-L6-v2");
    assert!(dir.is_dir(), "{} is missing: run `warpfold models fetch` (scripts/test.sh does)", dir.display());
    let started = start_embedder(&EngineOptions::default(), &ModelDir::open(&dir).unwrap()).expect("the default model loads");
    LoadedModel {
        device: device_view(&started.devices, started.embedder.engine.info().attention.clone()),
        model: started.model,
        embedder: started.embedder,
    }
}

fn start(data: &Path, loaded: &LoadedModel) -> App {
    start_at_home(data, loaded, None)
}

/// [`start`] for a person whose home folder is `home`.
fn start_at_home(data: &Path, loaded: &LoadedModel, home: Option<PathBuf>) -> App {
    start_settling(data, loaded, home, Duration::from_millis(600))
}

/// [`start_at_home`] with watched files read once they have been quiet for `settle`.
fn start_settling(data: &Path, loaded: &LoadedModel, home: Option<PathBuf>, settle: Duration) -> App {
    let config = AppConfig {
        db: data.join("index.db"),
        data_dir: data.to_path_buf(),
        model: loaded.model.clone(),
        // Text files only here: no PDF worker process is needed.
        index_options: IndexOptions::new(Isolation::new(PathBuf::from("/nonexistent-worker"), vec![])),
        settle,
        sample_every: Duration::from_millis(100),
        device: loaded.device.clone(),
        memory: None,
        summaries: None,
        settings: None,
        home,
    };
    App::start(config, Arc::clone(&loaded.embedder)).expect("the app starts")
}

/// A started app watching a new, empty folder: the app, the folder (canonical), and the temporary
/// folders to keep until the test ends (the data folder and the watched one).
fn watching_a_new_folder(loaded: &LoadedModel) -> (App, PathBuf, [tempfile::TempDir; 2]) {
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(watched.path()).unwrap();
    let app = start(data.path(), loaded);
    app.add_folder(&root.display().to_string(), Origin::User).unwrap();
    (app, root, [data, watched])
}

/// A document's bytes as the server streams them ([`App::open_document`]).
fn read_document(app: &App, path: &str) -> Result<Vec<u8>, AppError> {
    use std::io::Read;
    let (mut file, size) = app.open_document(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).unwrap();
    assert_eq!(bytes.len() as u64, size);
    Ok(bytes)
}

/// Waits for `what` to hold, at most three minutes: a bound against hanging, not a speed check (a
/// machine shared with benchmarks once took over a minute to embed and write a dozen notes).
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(180);
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
    seen.iter()
        .filter_map(|e| match e {
            AppEvent::Queue(f) if f.path == path => Some(f.state),
            _ => None,
        })
        .collect()
}

/// Paused, a dropped file waits on the queue and nothing is written; resumed, it is indexed. Added
/// again unchanged it is not read again, but a re-index reads it (and a folder's files) again.
#[test]
fn indexing_pauses_and_resumes_and_a_reindex_reads_an_unchanged_file_again() {
    let loaded = model();
    let (data, folder) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let root = std::fs::canonicalize(folder.path()).unwrap();
    let app = start(data.path(), &loaded);
    let mut rx = app.subscribe();
    let mut seen = Vec::new();
    let a = root.join("keepers.txt");
    std::fs::write(&a, "Lighthouse keepers log the weather at dawn and again at dusk.").unwrap();
    let a_text = a.display().to_string();

    assert!(app.set_paused(true));
    assert!(app.state().paused);
    app.add_paths(std::slice::from_ref(&a_text), Origin::User).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(state_of(&app, &a), Some(QueueState::Waiting), "a paused app starts no file");
    assert!(indexed(&app).is_empty());
    assert!(!app.set_paused(false));
    eventually("keepers.txt indexed once resumed", || state_of(&app, &a) == Some(QueueState::Done));
    let _ = events_for(&mut rx, &mut seen, &a);
    assert!(seen.contains(&AppEvent::Paused(true)) && seen.contains(&AppEvent::Paused(false)), "{seen:?}");

    let read_again = |rx: &mut broadcast::Receiver<AppEvent>, seen: &mut Vec<AppEvent>, queue: &dyn Fn()| {
        let before = events_for(rx, seen, &a).len();
        queue();
        eventually("keepers.txt done again", || state_of(&app, &a) == Some(QueueState::Done));
        events_for(rx, seen, &a)[before..].contains(&QueueState::Extracting)
    };
    assert!(!read_again(&mut rx, &mut seen, &|| assert_eq!(app.add_paths(std::slice::from_ref(&a_text), Origin::User).unwrap(), 1)));
    assert!(read_again(&mut rx, &mut seen, &|| assert_eq!(app.reindex(&a_text, Origin::User).unwrap(), 1)));
    assert!(read_again(&mut rx, &mut seen, &|| assert_eq!(app.reindex(&root.display().to_string(), Origin::User).unwrap(), 1)));
    assert_eq!(app.search("when do lighthouse keepers log the weather", 1).unwrap()[0].path, a_text);

    // What the webview names must be what the user chose; an empty folder has nothing to read.
    let elsewhere = tempfile::tempdir().unwrap();
    assert_eq!(app.reindex(&elsewhere.path().display().to_string(), Origin::Webview).unwrap_err().kind(), "path_not_allowed");
    let error = app.reindex(&elsewhere.path().display().to_string(), Origin::User).unwrap_err();
    assert!(error.to_string().contains("no file warpfold reads is there"), "{error}");
}

/// Hidden files and folders inside a watched folder, which its walk leaves alone, are not named
/// into the index by the webview either (before: `reindex` or `add_paths` of
/// `WATCHED/.config/token.json` indexed it, and `document` then handed its text to the script).
#[test]
fn the_webview_may_not_name_a_hidden_file_inside_a_watched_folder_into_the_index() {
    let loaded = model();
    let (app, root, _dirs) = watching_a_new_folder(&loaded);
    let hidden = root.join(".config");
    std::fs::create_dir(&hidden).unwrap();
    std::fs::write(hidden.join("token.json"), r#"{"token": "Pelicanmarmot"}"#).unwrap();
    for path in [hidden.clone(), hidden.join("token.json")] {
        let path = path.display().to_string();
        assert_eq!(app.reindex(&path, Origin::Webview).unwrap_err().kind(), "path_not_allowed", "{path}");
        assert_eq!(app.add_paths(std::slice::from_ref(&path), Origin::Webview).unwrap_err().kind(), "path_not_allowed", "{path}");
    }
    app.stop();
}

/// A folder typed as a person types it: `~/…` is their home folder (before: "os error 2"), a
/// missing one says so in words, and `~name` is refused with what to give.
#[test]
fn a_typed_folder_under_the_tilde_is_watched_and_a_missing_one_says_so() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let home_path = std::fs::canonicalize(home.path()).unwrap();
    std::fs::create_dir(home_path.join("Letters")).unwrap();
    let app = start_at_home(data.path(), &loaded, Some(home_path.clone()));
    let folders = app.add_folder("~/Letters", Origin::User).unwrap();
    assert_eq!(folders, vec![home_path.join("Letters").display().to_string()]);
    let missing = app.add_folder("~/Lettres", Origin::User).unwrap_err();
    assert_eq!((missing.kind(), missing.to_string().ends_with("Lettres: no such folder")), ("not_found", true), "{missing}");
    let other = app.add_folder("~bob/Letters", Origin::User).unwrap_err();
    assert!(other.to_string().contains("only ~ (your home folder) is expanded; give the full path"), "{other}");
}

#[test]
fn a_watched_folder_is_followed_through_create_slow_append_rename_and_delete() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(watched.path()).unwrap();
    // The slow copy below writes every 200 ms; a writer held up for longer than the settle time
    // looks finished, as it would to the app, so the settle time leaves a busy machine 2.8 s.
    let app = start_settling(data.path(), &loaded, None, Duration::from_secs(3));
    let mut rx = app.subscribe();
    let mut seen = Vec::new();
    assert_eq!(app.add_folder(&root.display().to_string(), Origin::User).unwrap(), vec![root.display().to_string()]);
    assert_eq!(app.add_folder(&root.display().to_string(), Origin::User).unwrap().len(), 1, "adding twice watches once");

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
    assert_eq!(
        b_states.iter().filter(|s| **s == QueueState::Extracting).count(),
        1,
        "read exactly once, after the writes settled: {b_states:?}"
    );

    // Renamed: the entries move, nothing is read again.
    let c = root.join("gamma.txt");
    std::fs::rename(&a, &c).unwrap();
    eventually("the rename followed", || {
        indexed(&app).contains(&c.display().to_string()) && !indexed(&app).contains(&a.display().to_string())
    });
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
        app.add_folder(&root.display().to_string(), Origin::User).unwrap();
        eventually("three files indexed", || {
            indexed(&app).len() == 3 && [&x, &y, &z].iter().all(|p| state_of(&app, p) == Some(QueueState::Done))
        });
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
    let err = app.add_paths(std::slice::from_ref(&path), Origin::Webview).unwrap_err();
    assert_eq!(err.kind(), "path_not_allowed", "{err}");
    assert_eq!(app.document(&path).unwrap_err().kind(), "path_not_allowed");
    assert_eq!(read_document(&app, "/etc/passwd").unwrap_err().kind(), "path_not_allowed");
    assert_eq!(app.add_paths(&["/no/such/file.pdf".into()], Origin::User).unwrap_err().kind(), "not_found");
    // Not even the user (a token holder of `warpfold serve`) has the whole disk or /proc indexed.
    for tree in ["/", "/proc/self", "/sys"] {
        let e = app.add_paths(&[tree.into()], Origin::User).unwrap_err();
        assert!(e.kind() == "invalid_input" && e.to_string().contains("indexing"), "{tree}: {e}");
    }
    // From the webview a missing path is refused like one that exists: nothing to probe the disk with.
    let missing = outside.path().join("no-such.txt").display().to_string();
    let refusals = [app.add_paths(std::slice::from_ref(&missing), Origin::Webview).unwrap_err(), err];
    assert_eq!(refusals[0].kind(), "path_not_allowed", "{}", refusals[0]);
    assert_eq!(refusals[0].to_string().replacen(&missing, "P", 1), refusals[1].to_string().replacen(&path, "P", 1));
    // Once dropped on the window it is the user's choice.
    app.choose(std::slice::from_ref(&secret));
    assert_eq!(app.add_paths(std::slice::from_ref(&path), Origin::Webview).unwrap(), 1);
    let canonical = std::fs::canonicalize(&secret).unwrap();
    eventually("the dropped file indexed", || state_of(&app, &canonical) == Some(QueueState::Done));
    assert_eq!(read_document(&app, &canonical.display().to_string()).unwrap(), b"not for the webview");
    // Uploads land in the inbox; a name that pretends to be a path is refused.
    assert_eq!(app.upload("../../etc/evil.txt", &b"x"[..], 1 << 20).unwrap_err().kind(), "invalid_input");
    let stored = app.upload("evil.txt", &b"uploaded words about kestrels"[..], 1 << 20).unwrap();
    assert_eq!(Path::new(&stored).parent().unwrap(), std::fs::canonicalize(data.path().join("inbox")).unwrap());
    assert_eq!(app.upload("tool.exe", &b"x"[..], 1 << 20).unwrap_err().kind(), "invalid_input");
    eventually("the upload indexed", || state_of(&app, Path::new(&stored)) == Some(QueueState::Done));
    let state = app.state();
    assert!(!state.bins.is_empty(), "the bins that ran are shown");
    let bin = &state.bins[0];
    assert_eq!(bin.padding + bin.sequences.iter().map(|&n| n as u64).sum::<u64>(), bin.aligned.iter().map(|&n| n as u64).sum::<u64>());
    assert!(bin.fill > 0.0 && bin.fill <= 1.0 && bin.free < bin.capacity as u64);
    eventually("a sample with throughput", || {
        app.state().samples.iter().any(|s| s.tokens_per_s > 0.0 && s.padded_equivalent_per_s >= s.tokens_per_s)
    });
    app.stop();
}

/// Runs `work` on another thread and waits for it at most a minute (a bound against hanging).
fn bounded<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("{what} did not return: it hangs"))
}

fn mkfifo(path: &Path) {
    assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
}

#[test]
fn paths_that_climb_or_link_out_of_a_chosen_folder_are_refused_alike_whether_or_not_they_exist() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(watched.path()).unwrap();
    std::fs::write(root.join("notes.txt"), "Notes about kestrels and voles.").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("x.md")).unwrap();
    let app = start(data.path(), &loaded);
    app.add_folder(&root.display().to_string(), Origin::User).unwrap();
    let link = root.join("x.md");
    eventually("the link recorded as skipped", || state_of(&app, &link) == Some(QueueState::Skipped));
    let reason = app.inner.board.get(&link.display().to_string()).unwrap().error.unwrap();
    assert!(reason.contains("/etc/passwd") && reason.contains("not followed"), "{reason}");
    eventually("notes.txt indexed", || state_of(&app, &root.join("notes.txt")) == Some(QueueState::Done));
    assert!(indexed(&app).iter().all(|p| !p.contains("passwd") && !p.ends_with("x.md")), "{:?}", indexed(&app));

    let climbing = format!("{}/../../../../../../etc/passwd", root.display());
    let climbing_to_nothing = format!("{}/../../../../../../etc/no-such-file", root.display());
    for path in
        [climbing.as_str(), climbing_to_nothing.as_str(), link.to_str().unwrap(), "/etc/passwd", "/etc/no-such-file", "relative.txt"]
    {
        let errors = [read_document(&app, path).unwrap_err(), app.document(path).unwrap_err(), app.openable(path).unwrap_err()];
        for e in errors {
            assert_eq!(e.kind(), "path_not_allowed", "{path}: {e}");
            assert_eq!(e.to_string(), format!("{path} is not a file warpfold was given"), "the refusal says nothing about existence");
        }
    }
    // What the user chose still reads.
    assert_eq!(read_document(&app, &root.join("notes.txt").display().to_string()).unwrap(), b"Notes about kestrels and voles.");
    app.stop();
}

#[test]
fn the_watcher_follows_no_links_refuses_system_trees_and_a_fifo_does_not_stall_the_queue() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let (root, outside) = (base.join("watched"), base.join("outside"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink("/sys", root.join("sys")).unwrap();
    let app = start(data.path(), &loaded);
    for folder in ["/", "/sys", "/proc/self", "/dev"] {
        assert_eq!(app.add_folder(folder, Origin::User).unwrap_err().kind(), "invalid_input", "{folder} must be refused");
    }
    let watching = app.clone();
    let folder = root.display().to_string();
    bounded("add_folder on a folder with a link to /sys", move || watching.add_folder(&folder, Origin::User).unwrap());
    let reading = app.clone();
    bounded("the state while watching", move || reading.state());

    // Written behind the link to a folder outside: not seen. A FIFO inside: refused, and the
    // file written after it is still read.
    std::fs::write(outside.join("beyond.txt"), "Words about meteorites beyond the watched folder.").unwrap();
    mkfifo(&root.join("pipe.txt"));
    std::thread::sleep(Duration::from_millis(300));
    let after = root.join("after.txt");
    std::fs::write(&after, "Written after the pipe: badgers dig setts in woodland.").unwrap();
    eventually("after.txt indexed behind the FIFO", || state_of(&app, &after) == Some(QueueState::Done));
    let pipe = root.join("pipe.txt");
    eventually("the FIFO recorded as failed", || state_of(&app, &pipe) == Some(QueueState::Failed));
    assert!(app.inner.board.get(&pipe.display().to_string()).unwrap().error.unwrap().contains("FIFO"));
    let on_board: Vec<String> = app.state().queue.files.iter().map(|f| f.path.clone()).collect();
    assert!(on_board.iter().all(|p| !p.contains("beyond")), "nothing was read through the link: {on_board:?}");
    assert!(app.search("meteorites beyond the watched folder", 5).unwrap().iter().all(|h| !h.path.contains("beyond")));
    app.stop();
}

#[test]
fn the_app_embeds_at_start_what_lost_its_vector() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(watched.path()).unwrap();
    let file = root.join("otters.txt");
    std::fs::write(&file, "Otters crack shellfish open on flat stones at low tide.").unwrap();
    {
        let app = start(data.path(), &loaded);
        app.add_folder(&root.display().to_string(), Origin::User).unwrap();
        eventually("otters.txt indexed", || state_of(&app, &file) == Some(QueueState::Done));
        app.stop();
    }
    let db = data.path().join("index.db");
    let store = Store::open_existing(&db).unwrap();
    assert_eq!(store.connection().execute("DELETE FROM embeddings", []).unwrap(), 1);
    assert_eq!(store.chunks_without_vectors().unwrap().len(), 1);
    drop(store);
    let app = start(data.path(), &loaded);
    eventually("the chunk has its vector again", || Store::open_existing(&db).unwrap().chunks_without_vectors().unwrap().is_empty());
    eventually("and search finds it by meaning", || {
        app.search("animals using tools by the sea", 1).is_ok_and(|h| h.first().is_some_and(|h| h.path == file.display().to_string()))
    });
    app.stop();
}

#[test]
fn the_webview_may_watch_only_folders_inside_what_the_user_chose() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let (watched, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let root = std::fs::canonicalize(watched.path()).unwrap();
    let elsewhere = std::fs::canonicalize(outside.path()).unwrap();
    std::fs::write(elsewhere.join("secret.txt"), "Private notes about a surprise party.").unwrap();
    let app = start(data.path(), &loaded);
    // A folder the user never chose, and one that does not exist, are refused alike.
    let (real, missing) = (elsewhere.display().to_string(), elsewhere.join("no-such").display().to_string());
    let refused = [app.add_folder(&real, Origin::Webview).unwrap_err(), app.add_folder(&missing, Origin::Webview).unwrap_err()];
    for e in &refused {
        assert_eq!(e.kind(), "path_not_allowed", "{e}");
    }
    assert_eq!(refused[0].to_string().replacen(&real, "P", 1), refused[1].to_string().replacen(&missing, "P", 1));
    assert!(app.folders().is_empty() && !data.path().join("settings.json").exists(), "nothing was saved");
    let secret = elsewhere.join("secret.txt").display().to_string();
    assert_eq!(app.openable(&secret).unwrap_err().kind(), "path_not_allowed");
    // Once the user watches a folder, the webview may watch one inside it.
    app.add_folder(&root.display().to_string(), Origin::User).unwrap();
    std::fs::create_dir(root.join("inner")).unwrap();
    let inner = root.join("inner").display().to_string();
    assert_eq!(app.add_folder(&inner, Origin::Webview).unwrap(), vec![root.display().to_string(), inner]);
    app.stop();
}

#[test]
fn only_documents_the_app_holds_are_handed_out_or_opened() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(watched.path()).unwrap();
    let notes = root.join("notes.txt");
    std::fs::write(&notes, "Notes about herons fishing in the shallows.").unwrap();
    let app = start(data.path(), &loaded);
    app.add_folder(&root.display().to_string(), Origin::User).unwrap();
    eventually("notes.txt indexed", || state_of(&app, &notes) == Some(QueueState::Done));
    // Written into the watched folder by someone else: not a document (the watcher does not index
    // a .desktop file), so neither opened in the system viewer nor handed out.
    let payload = root.join("payload.desktop");
    std::fs::write(&payload, "[Desktop Entry]\nExec=sh -c 'echo owned'\n").unwrap();
    let payload = payload.display().to_string();
    for e in [app.openable(&payload).unwrap_err(), app.open_document(&payload).unwrap_err()] {
        assert_eq!(e.kind(), "path_not_allowed", "{e}");
    }
    assert_eq!(app.openable(&notes.display().to_string()).unwrap(), notes);
    assert_eq!(read_document(&app, &notes.display().to_string()).unwrap(), b"Notes about herons fishing in the shallows.");
    app.stop();
}

#[test]
fn a_watched_folder_replaced_by_a_link_while_closed_is_not_followed() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let (watched, outside) = (base.join("watched"), base.join("outside"));
    std::fs::create_dir_all(&watched).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(watched.join("public.txt"), "A public note about lighthouses.").unwrap();
    std::fs::write(outside.join("secret.txt"), "A secret note about the vault combination.").unwrap();
    {
        let app = start(data.path(), &loaded);
        app.add_folder(&watched.display().to_string(), Origin::User).unwrap();
        eventually("public.txt indexed", || state_of(&app, &watched.join("public.txt")) == Some(QueueState::Done));
        app.stop();
    }
    // While closed, someone who can write the folder's parent swaps the folder for a link.
    std::fs::rename(&watched, base.join("moved-away")).unwrap();
    std::os::unix::fs::symlink(&outside, &watched).unwrap();
    let app = start(data.path(), &loaded);
    let secret = watched.join("secret.txt").display().to_string();
    let real_secret = outside.join("secret.txt").display().to_string();
    for path in [&secret, &real_secret] {
        assert_eq!(app.document(path).unwrap_err().kind(), "path_not_allowed", "{path}");
        assert_eq!(app.open_document(path).unwrap_err().kind(), "path_not_allowed", "{path}");
    }
    // Give the start-up scan and the indexer time to have done anything they would do.
    std::thread::sleep(Duration::from_secs(2));
    assert!(indexed(&app).iter().all(|p| !p.contains("secret")), "{:?}", indexed(&app));
    assert!(app.state().queue.files.iter().all(|f| !f.path.contains("secret")), "nothing of the link's target was queued");
    app.stop();
}

/// This process's peak resident memory (VmHWM), in bytes.
fn peak_resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn the_catch_up_at_start_hashes_only_possible_renames_and_never_reads_a_huge_file_whole() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(watched.path()).unwrap();
    let small = root.join("small.txt");
    std::fs::write(&small, "A small note about wrens.").unwrap();
    {
        let app = start(data.path(), &loaded);
        app.add_folder(&root.display().to_string(), Origin::User).unwrap();
        eventually("small.txt indexed", || state_of(&app, &small) == Some(QueueState::Done));
        app.stop();
    }
    // While closed: small.txt is renamed, and a 3 GiB file (sparse: no disk) appears.
    let renamed = root.join("wrens.txt");
    std::fs::rename(&small, &renamed).unwrap();
    let big = root.join("big.txt");
    std::fs::File::create(&big).unwrap().set_len(3 << 30).unwrap();
    let app = start(data.path(), &loaded);
    eventually("big.txt failed on its size", || state_of(&app, &big) == Some(QueueState::Failed));
    eventually("the rename is caught up with", || {
        let docs = indexed(&app);
        docs.contains(&renamed.display().to_string()) && !docs.contains(&small.display().to_string())
    });
    assert!(chunk_text(&app, &renamed).is_some_and(|t| t.contains("wrens")), "the renamed file kept its entries");
    let reason = app.inner.board.get(&big.display().to_string()).unwrap().error.unwrap();
    assert!(reason.contains("64 MiB"), "{reason}");
    let peak = peak_resident_bytes();
    assert!(peak < 2 << 30, "the file was read into memory: peak {} MiB", peak >> 20);
    app.stop();
}

#[test]
fn unreadable_settings_are_kept_aside_and_two_apps_on_one_data_folder_keep_each_others_folders() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Cut off mid-write by an older version or a full disk: not valid JSON.
    let torn = br#"{"folders": ["/home/me/Docu"#;
    std::fs::write(data.path().join("settings.json"), torn).unwrap();
    let app = start(data.path(), &loaded);
    assert!(app.folders().is_empty());
    let aside: Vec<PathBuf> = std::fs::read_dir(data.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("settings.json.unreadable-"))
        .collect();
    assert_eq!(aside.len(), 1, "the unreadable settings were kept");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), torn);
    // The desktop app and `warpfold serve` on one data folder: each saves the other's folder too.
    let other = start(data.path(), &loaded);
    let (a, b) = (std::fs::canonicalize(first.path()).unwrap(), std::fs::canonicalize(second.path()).unwrap());
    app.add_folder(&a.display().to_string(), Origin::User).unwrap();
    other.add_folder(&b.display().to_string(), Origin::User).unwrap();
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(data.path().join("settings.json")).unwrap()).unwrap();
    let mut want = vec![a.display().to_string(), b.display().to_string()];
    want.sort();
    assert_eq!(saved["folders"], serde_json::json!(want));
    // Removing one keeps the other, and the person's settings in the same file stay as they were.
    let mut with_settings = saved.clone();
    with_settings["device"] = serde_json::json!("cpu");
    with_settings["vram_budget"] = serde_json::json!("8GiB");
    std::fs::write(data.path().join("settings.json"), serde_json::to_vec(&with_settings).unwrap()).unwrap();
    app.remove_folder(&a.display().to_string()).unwrap();
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(data.path().join("settings.json")).unwrap()).unwrap();
    assert_eq!(saved["folders"], serde_json::json!([b.display().to_string()]));
    assert_eq!((&saved["device"], &saved["vram_budget"]), (&serde_json::json!("cpu"), &serde_json::json!("8GiB")));
    let settings = crate::settings::Settings::from_file(&data.path().join("settings.json")).unwrap();
    assert_eq!((settings.device.as_str(), settings.vram_budget.as_deref()), ("cpu", Some("8GiB")));
    assert_eq!(std::fs::read(&aside[0]).unwrap(), torn, "still kept");
    // A settings file that cannot be read at all (here a link loop: ELOOP; EACCES and EIO alike,
    // which root, running the tests, cannot be made to meet) is kept aside too, not taken for
    // empty and overwritten by the next save.
    let looped = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("settings.json", looped.path().join("settings.json")).unwrap();
    let third = start(looped.path(), &loaded);
    assert!(third.folders().is_empty());
    let kept = std::fs::read_dir(looped.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned());
    assert_eq!(kept.filter(|n| n.starts_with("settings.json.unreadable-")).count(), 1);
    third.stop();
    other.stop();
    app.stop();
}

#[test]
fn a_drive_that_is_not_mounted_at_start_keeps_its_documents() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(watched.path()).unwrap();
    let drive = root.join("drive");
    std::fs::create_dir(&drive).unwrap();
    let (on_drive, beside) = (drive.join("atlas.txt"), root.join("notes.txt"));
    std::fs::write(&on_drive, "An atlas of the river deltas of Asia.").unwrap();
    std::fs::write(&beside, "Notes about a week of walking in the hills.").unwrap();
    {
        let app = start(data.path(), &loaded);
        app.add_folder(&root.display().to_string(), Origin::User).unwrap();
        eventually("both indexed", || indexed(&app).len() == 2);
        app.stop();
    }
    // While closed: the drive is not mounted (its mount point an empty folder), and the notes are
    // deleted for real.
    std::fs::remove_file(&on_drive).unwrap();
    std::fs::remove_file(&beside).unwrap();
    let app = start(data.path(), &loaded);
    eventually("the deleted notes left the index", || !indexed(&app).contains(&beside.display().to_string()));
    assert_eq!(indexed(&app), vec![on_drive.display().to_string()], "the unmounted drive's document kept its entries");
    assert!(chunk_text(&app, &on_drive).is_some_and(|t| t.contains("river deltas")));
    app.stop();
}

#[test]
fn a_file_renamed_to_what_a_scan_would_not_read_leaves_the_index() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(watched.path()).unwrap();
    let (a, b, c) = (root.join("a.txt"), root.join("b.txt"), root.join("c.txt"));
    std::fs::write(&a, "A note about kingfishers diving.").unwrap();
    std::fs::write(&b, "A note about herons waiting.").unwrap();
    std::fs::write(&c, "A note about dippers walking under water.").unwrap();
    let app = start(data.path(), &loaded);
    app.add_folder(&root.display().to_string(), Origin::User).unwrap();
    eventually("three indexed", || indexed(&app).len() == 3);
    std::fs::create_dir(root.join(".hidden")).unwrap();
    std::fs::rename(&a, root.join("a.txt.bak")).unwrap();
    std::fs::rename(&b, root.join(".hidden/b.txt")).unwrap();
    let c2 = root.join("c-renamed.txt");
    std::fs::rename(&c, &c2).unwrap();
    eventually("only the plain rename is followed", || indexed(&app) == vec![c2.display().to_string()]);
    assert!(chunk_text(&app, &c2).is_some_and(|t| t.contains("dippers")));
    app.stop();
}

/// The data folder, the index with its -wal and -shm, and the inbox are readable by their owner
/// alone: they hold every indexed document's text. Before, they were created 0755/0644 (umask
/// 022) and another local user could read every chunk.
#[test]
fn the_data_folder_index_and_inbox_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    let loaded = model();
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data").join("warpfold");
    let app = start(&data, &loaded);
    app.upload("note.txt", "a private note about the harbour".as_bytes(), 1 << 20).unwrap();
    eventually("the upload indexed", || indexed(&app).iter().any(|p| p.ends_with("note.txt")));
    let mode = |p: &Path| std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700, "the data folder");
    assert_eq!(mode(&data.join("inbox")), 0o700, "the inbox");
    for file in ["index.db", "index.db-wal", "index.db-shm"] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    assert_eq!(warpfold_index::store::readable_by_others(&data.join("index.db")), None);
    drop(app);
    std::fs::set_permissions(data.join("index.db"), std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(warpfold_index::store::readable_by_others(&data.join("index.db")).is_some_and(|w| w.contains("chmod 600")));
}

/// One folder named 120,000 times in one request (by its path and by a `..` detour) is resolved
/// and queued once; more than [`MAX_PATHS_AT_ONCE`] different paths are refused with the reason.
/// Before, each copy was resolved and walked.
#[test]
fn a_folder_named_many_times_at_once_is_queued_once() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let docs = tempfile::tempdir().unwrap();
    for i in 0..3 {
        std::fs::write(docs.path().join(format!("n{i}.txt")), format!("note number {i} about herons")).unwrap();
    }
    let app = start(data.path(), &loaded);
    let folder = docs.path().display().to_string();
    let detour = format!("{folder}/../{}", docs.path().file_name().unwrap().to_string_lossy());
    let mut paths = vec![folder; 120_000];
    paths.push(detour);
    assert_eq!(app.add_paths(&paths, Origin::User).unwrap(), 3);
    let many: Vec<String> = (0..MAX_PATHS_AT_ONCE + 1).map(|i| format!("{}/n{i}.txt", docs.path().display())).collect();
    let err = app.add_paths(&many, Origin::User).unwrap_err();
    assert!(err.kind() == "invalid_input" && err.to_string().contains("at most 10000"), "{err}");
}

/// Files written into hidden folders of a watched folder (`.ssh/notes.txt`, `.git/sub/later.md`)
/// are not indexed: the watcher follows the walk's rule on the whole way from the folder, not only
/// on the file's own name. Before, both were indexed (and kept across restarts).
#[test]
fn the_watcher_skips_files_inside_hidden_folders_as_the_walk_does() {
    let loaded = model();
    let (app, root, _folders) = watching_a_new_folder(&loaded);
    std::fs::create_dir_all(root.join(".ssh")).unwrap();
    std::fs::create_dir_all(root.join(".git/sub")).unwrap();
    std::fs::write(root.join(".ssh/notes.txt"), "the private key's passphrase is in the drawer").unwrap();
    std::fs::write(root.join(".git/sub/later.md"), "a note inside the repository's own folder").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let visible = root.join("visible.txt");
    std::fs::write(&visible, "a plain note about the garden").unwrap();
    eventually("visible.txt indexed", || state_of(&app, &visible) == Some(QueueState::Done));
    // The hidden files' events came first; give a late batch its settle time too.
    std::thread::sleep(Duration::from_millis(1500));
    let docs = indexed(&app);
    assert_eq!(docs, vec![visible.display().to_string()], "only the visible file");
    assert!(app.search("private key passphrase drawer", 5).unwrap().iter().all(|h| !h.path.contains(".ssh")));
}

/// A file whose modification time lies an hour in the future (a camera or another machine with a
/// wrong clock) is indexed once it stops changing, and so is an edit that keeps such a time.
/// Before, it never "settled" by the clock: retried every settle period forever, never indexed,
/// and an edited one kept its old text.
#[test]
fn files_with_a_modification_time_in_the_future_are_indexed_once_they_stop_changing() {
    let loaded = model();
    let (app, root, _folders) = watching_a_new_folder(&loaded);
    let future = std::time::SystemTime::now() + Duration::from_secs(3600);
    let note = root.join("from-the-camera.txt");
    std::fs::write(&note, "Flamingos wade in the salt pans at dawn.").unwrap();
    std::fs::File::options().write(true).open(&note).unwrap().set_modified(future).unwrap();
    eventually("the future-dated file indexed", || state_of(&app, &note) == Some(QueueState::Done));
    assert!(chunk_text(&app, &note).unwrap().contains("Flamingos"));
    std::fs::write(&note, "Pelicans fish together in the shallow lagoon.").unwrap();
    std::fs::File::options().write(true).open(&note).unwrap().set_modified(future + Duration::from_secs(60)).unwrap();
    eventually("the edit indexed", || chunk_text(&app, &note).is_some_and(|t| t.contains("Pelicans")));
}

/// A watched folder renamed away keeps its documents; renamed back, it is caught up with (a file
/// written while it was away is indexed) and followed again. Replaced by a new folder of the same
/// name (a drive mounted again: a new inode, whose old watch the kernel dropped), it is watched
/// again and its files indexed. Before: every document left the index when the folder went, and
/// after it came back only files written later were indexed until a restart; a remounted drive
/// was no longer watched.
#[test]
fn a_watched_folder_renamed_away_and_back_or_remounted_keeps_its_documents_and_is_followed_again() {
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let parent = tempfile::tempdir().unwrap();
    let parent = std::fs::canonicalize(parent.path()).unwrap();
    let root = parent.join("Documents");
    std::fs::create_dir(&root).unwrap();
    let names = ["a.txt", "b.txt", "c.txt"];
    for (i, name) in names.iter().enumerate() {
        std::fs::write(root.join(name), format!("Note {i} about the lighthouse keeper's logbook.")).unwrap();
    }
    let app = start(data.path(), &loaded);
    app.add_folder(&root.display().to_string(), Origin::User).unwrap();
    let all_indexed = |app: &App, files: &[PathBuf]| files.iter().all(|f| state_of(app, f) == Some(QueueState::Done));
    let first: Vec<PathBuf> = names.iter().map(|n| root.join(n)).collect();
    eventually("the three notes indexed", || all_indexed(&app, &first));

    // Renamed away: the documents stay (their files are elsewhere for now).
    let away = parent.join("Documents-away");
    std::fs::rename(&root, &away).unwrap();
    std::fs::write(away.join("while-away.txt"), "Written while the folder was away: the tide tables.").unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(indexed(&app).len(), 3, "the documents stay while the folder is away");
    // Back: caught up with, and followed again.
    std::fs::rename(&away, &root).unwrap();
    let caught_up = root.join("while-away.txt");
    eventually("the file written while away indexed", || state_of(&app, &caught_up) == Some(QueueState::Done));
    let later = root.join("after-return.txt");
    std::fs::write(&later, "Written after the folder came back: the fog signal.").unwrap();
    eventually("a file written after the return indexed", || state_of(&app, &later) == Some(QueueState::Done));
    assert_eq!(indexed(&app).len(), 5);

    // A new folder of the same name (a drive mounted again).
    std::fs::rename(&root, parent.join("old-drive")).unwrap();
    std::fs::create_dir(&root).unwrap();
    let remounted = root.join("on-the-new-drive.txt");
    std::fs::write(&remounted, "A note on the remounted drive about the keeper's cat.").unwrap();
    eventually("the remounted folder's file indexed", || state_of(&app, &remounted) == Some(QueueState::Done));
    let written_later = root.join("written-later.txt");
    std::fs::write(&written_later, "Written into the remounted folder later: the lamp's oil.").unwrap();
    eventually("the remounted folder watched again", || state_of(&app, &written_later) == Some(QueueState::Done));
}

/// The index deleted under the running app: nothing more is written (before, the next write made
/// a new, empty index: the queue said done and search found nothing), and the state and an event
/// say why. Replaced by another file (junk here): the same, instead of files staying "waiting"
/// forever with the reason only in the log.
#[test]
fn an_index_deleted_or_replaced_under_the_app_is_not_written_and_the_app_says_why() {
    let loaded = model();
    for how in ["deleted", "replaced"] {
        let data = tempfile::tempdir().unwrap();
        let docs = tempfile::tempdir().unwrap();
        let app = start(data.path(), &loaded);
        let mut events = app.subscribe();
        let first = docs.path().join("first.txt");
        std::fs::write(&first, "the first note about otters").unwrap();
        app.add_paths(&[first.display().to_string()], Origin::User).unwrap();
        eventually("the first note indexed", || indexed(&app).len() == 1);
        let db = data.path().join("index.db");
        for file in ["index.db", "index.db-wal", "index.db-shm"] {
            let _ = std::fs::remove_file(data.path().join(file));
        }
        if how == "replaced" {
            std::fs::write(&db, b"not an index at all").unwrap();
        }
        let second = docs.path().join("second.txt");
        std::fs::write(&second, "the second note about beavers").unwrap();
        app.add_paths(&[second.display().to_string()], Origin::User).unwrap();
        eventually("the app says writes stopped", || app.state().writes_stopped.is_some());
        let reason = app.state().writes_stopped.unwrap();
        assert!(reason.contains(&format!("was {how}")) && reason.contains("nothing more is written"), "{reason}");
        match how {
            "deleted" => assert!(!db.exists(), "no new, empty index was made"),
            _ => assert_eq!(std::fs::read(&db).unwrap(), b"not an index at all", "the other file is left alone"),
        }
        let mut said = false;
        while let Ok(event) = events.try_recv() {
            said |= matches!(event, AppEvent::WritesStopped(ref r) if r == &reason);
        }
        assert!(said, "an event says so");
        app.stop();
    }
}

/// A small file system that holds the index: when it fills, the run stops reading files, the
/// files not written go back to waiting (not failed), and the state and an event say indexing is
/// paused; when space is freed, it resumes by itself and every file is indexed. Before: the run
/// extracted and embedded every remaining file, each then failed, and nothing was retried until a
/// restart. Needs to mount a tmpfs (root, as the test machines run); skipped where it cannot.
#[test]
fn a_full_disk_pauses_indexing_visibly_and_it_resumes_when_space_is_freed() {
    let loaded = model();
    let root = tempfile::tempdir().unwrap();
    let small = root.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = std::process::Command::new("mount").args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"]).arg(&small).status();
    if !mounted.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(small.clone());
    let data = small.join("data");
    let app = start(&data, &loaded);
    // Leave about 80 KB free: a few documents' worth.
    let filler = small.join("filler");
    let free = |p: &Path| -> u64 {
        let out = std::process::Command::new("df").args(["-B1", "--output=avail"]).arg(p).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap().trim().parse().unwrap()
    };
    std::fs::write(&filler, vec![1u8; (free(&small) - 80_000) as usize]).unwrap();
    let docs = tempfile::tempdir().unwrap();
    let mut rng = 7u64;
    let mut words = || {
        (0..300)
            .map(|_| {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                format!("w{}", rng >> 40)
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let files: Vec<PathBuf> = (0..12).map(|i| docs.path().join(format!("note-{i:02}.txt"))).collect();
    for file in &files {
        std::fs::write(file, words()).unwrap();
    }
    app.add_paths(&[docs.path().display().to_string()], Origin::User).unwrap();
    eventually("indexing paused for want of space", || app.state().writes_paused.is_some());
    let reason = app.state().writes_paused.unwrap();
    assert!(reason.contains("full") && reason.contains("resumes by itself"), "{reason}");
    assert!(files.iter().all(|f| state_of(&app, f) != Some(QueueState::Failed)), "files not written wait; none is failed");
    std::fs::remove_file(&filler).unwrap();
    eventually("indexing resumed and every file done", || {
        app.state().writes_paused.is_none() && files.iter().all(|f| state_of(&app, f) == Some(QueueState::Done))
    });
    assert_eq!(indexed(&app).len(), files.len());
    app.stop();
}

#[test]
fn the_settings_view_saves_checked_values_keeps_the_folders_and_refuses_new_paths() {
    use crate::settings::{Settings, FIELDS};
    let loaded = model();
    let data = tempfile::tempdir().unwrap();
    let watched = tempfile::tempdir().unwrap();
    let app = start(data.path(), &loaded);
    let view = app.settings_view().unwrap();
    assert_eq!((view.saved.clone(), view.fields.len(), view.restart_needed), (Settings::default(), FIELDS.len(), false));
    assert!(view.file.ends_with("settings.json"));
    let folder = std::fs::canonicalize(watched.path()).unwrap().display().to_string();
    app.add_folder(&folder, Origin::User).unwrap();
    let file = data.path().join("settings.json");
    let read = || -> serde_json::Value { serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap() };

    // Saved: the values, beside the watched folder.
    let wanted = Settings {
        device: "cpu".into(),
        ocr_languages: "eng+deu".into(),
        summarize: Some(false),
        model: Some("multilingual-e5-small".into()),
        ..Settings::default()
    };
    let view = app.save_settings(wanted.clone()).unwrap();
    assert_eq!(view.saved, wanted);
    let saved = read();
    assert_eq!((&saved["device"], &saved["ocr_languages"], &saved["summarize"]), (&"cpu".into(), &"eng+deu".into(), &false.into()));
    assert_eq!(saved["folders"], serde_json::json!([folder]), "the watched folders stay");
    assert!(saved.get("chat_model").is_none(), "an unset setting is left out, not written as null");
    assert_eq!(Settings::from_file(&file).unwrap(), wanted);

    // Refused, naming the setting, and nothing written.
    let before = std::fs::read(&file).unwrap();
    let err = app.save_settings(Settings { device: "gpu7".into(), ..wanted.clone() }).unwrap_err();
    assert!(matches!(&err, AppError::InvalidInput(m) if m.contains("WARPFOLD_DEVICE")), "{err}");
    let err = app.save_settings(Settings { data_dir: Some("/etc".into()), ..wanted.clone() }).unwrap_err();
    assert!(matches!(&err, AppError::PathNotAllowed(m) if m.contains("data_dir")), "{err}");
    let err = app.save_settings(Settings { chat_model: Some("/home/someone/model.gguf".into()), ..wanted.clone() }).unwrap_err();
    assert!(matches!(&err, AppError::PathNotAllowed(m) if m.contains("chat_model")), "{err}");
    let err = app.save_settings(Settings { model: Some("SmolLM2-135M-Instruct".into()), ..wanted.clone() }).unwrap_err();
    assert!(matches!(&err, AppError::PathNotAllowed(m) if m.contains("not an embedding model")), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), before, "a refused save writes nothing");

    // A chat model by its pinned name, or `fast`, is taken.
    assert_eq!(
        app.save_settings(Settings { chat_model: Some("fast".into()), ..wanted.clone() }).unwrap().saved.chat_model.as_deref(),
        Some("fast")
    );
    app.stop();
}

#[test]
fn a_folder_removed_with_its_documents_leaves_no_text_of_them_in_the_index() {
    let loaded = model();
    let (app, root, _dirs) = watching_a_new_folder(&loaded);
    let secret = root.join("secret.txt");
    std::fs::write(&secret, "The vault code is Pelicanmarmot 90210, kept in the blue ledger.").unwrap();
    std::fs::write(root.join("tides.txt"), "Tide tables for the harbour, printed every spring.").unwrap();
    eventually("both files indexed", || indexed(&app).len() == 2);
    let secret_path = secret.display().to_string();
    // Inside a watched folder: refused, the next scan would read it again.
    let err = app.forget(std::slice::from_ref(&secret_path)).unwrap_err();
    assert!(matches!(&err, AppError::InvalidInput(m) if m.contains("watched folder")), "{err}");
    assert_eq!(indexed(&app).len(), 2);
    // A folder's documents are not forgotten by naming it (the web view could name `/`), only by
    // letting the folder go.
    let err = app.forget(&["/".to_string()]).unwrap_err();
    assert!(matches!(err, AppError::NotFound(_)), "{err}");
    assert_eq!(indexed(&app).len(), 2);
    // The folder let go of with its documents, while a re-index of it is on its way: none left,
    // no byte of their text in the file (the run waits for the forget or the forget for the run,
    // and a re-index does not read back what the app no longer holds).
    assert_eq!(app.reindex(&root.display().to_string(), Origin::User).unwrap(), 2);
    // and a catch-up scan of it queued (as a start or a re-armed watch queues one)
    app.inner.jobs.send(crate::Job::Scan(root.clone())).unwrap();
    let (folders, forgotten) = app.remove_folder_and(&root.display().to_string(), true).unwrap();
    assert!(folders.is_empty());
    assert_eq!(forgotten.len(), 2, "{forgotten:?}");
    // A file dropped after it is indexed after the re-index job: once it is, that job has run.
    let later = tempfile::tempdir().unwrap();
    let marker = std::fs::canonicalize(later.path()).unwrap().join("marker.txt");
    std::fs::write(&marker, "A marker note, indexed after the re-index job.").unwrap();
    app.add_paths(&[marker.display().to_string()], Origin::User).unwrap();
    eventually("the marker indexed", || state_of(&app, &marker) == Some(QueueState::Done));
    assert_eq!(indexed(&app), vec![marker.display().to_string()]);
    assert!(app.search("Pelicanmarmot", 5).unwrap().iter().all(|hit| hit.path != secret_path));
    assert!(app.inner.board.get(&secret_path).is_none(), "it left the queue too");
    let db = &app.inner.config.db;
    let mut bytes = std::fs::read(db).unwrap();
    bytes.extend(std::fs::read(db.with_extension("db-wal")).unwrap_or_default());
    let text = String::from_utf8_lossy(&bytes).to_lowercase();
    for word in ["pelicanmarmot", "90210", "vault", "secret.txt"] {
        assert!(!text.contains(word), "{word:?} is still in the index file");
    }
    // Forgetting what is not held says so.
    let err = app.forget(&[secret_path]).unwrap_err();
    assert!(matches!(err, AppError::NotFound(_)), "{err}");
    app.stop();
}
