//! Issue 13 through the real binary: what `warpfold index` and `warpfold search` read and refuse
//! (links out of a folder, FIFOs, unreadable folders, names that are not UTF-8, huge text files),
//! that no chunk is ever left without its vector, and that a read-only index can be searched.
//! The server's side is in `serve.rs`, the app core's in `crates/app/src/tests.rs`.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::warpfold;

/// Runs `cmd`, killing it (and failing) if it has not finished within `limit`: a bound against
/// hanging forever, not a speed check.
fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{cmd:?} did not finish within {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn json_of(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "failed ({:?}): {stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("printed {stdout:?}: {e}"))
}

fn index_cmd(paths: &[&Path], db: &Path, extra: &[&str]) -> Command {
    let mut cmd = warpfold();
    cmd.arg("index").args(paths).arg("--db").arg(db).arg("--json").args(extra);
    cmd
}

/// The failures (or skipped entries) of a report: file name -> (status, error).
fn entries(report: &Value, key: &str) -> Vec<(String, String, String)> {
    report[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {report:#}"))
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap();
            let name = path.rsplit('/').next().unwrap().to_string();
            (name, f["status"].as_str().unwrap().to_string(), f["error"].as_str().unwrap().to_string())
        })
        .collect()
}

/// A command run as the unprivileged user `nobody` when the tests run as root (whom permissions
/// do not stop), as is when they do not.
fn unprivileged(mut cmd: Command) -> Command {
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        return cmd;
    }
    let mut wrapped = Command::new("setpriv");
    wrapped.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(cmd.get_program()).args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => wrapped.env(key, v),
            None => wrapped.env_remove(key),
        };
    }
    cmd = wrapped;
    cmd
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[test]
fn links_out_of_a_folder_are_skipped_and_fifos_and_bad_names_fail_without_stalling_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let docs = root.join("docs");
    std::fs::create_dir_all(docs.join("inner")).unwrap();
    std::fs::write(docs.join("kestrels.txt"), "Kestrels hover over motorway verges hunting voles.").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", docs.join("x.md")).unwrap();
    std::os::unix::fs::symlink(docs.join("kestrels.txt"), docs.join("inner/same.txt")).unwrap();
    mkfifo(&docs.join("pipe.txt"));
    let (e9, e8) = (docs.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), docs.join(std::ffi::OsStr::from_bytes(b"caf\xe8.txt")));
    std::fs::write(&e9, "first file whose name is Latin-1").unwrap();
    std::fs::write(&e8, "second file whose name is Latin-1").unwrap();
    let named_fifo = root.join("named.txt");
    mkfifo(&named_fifo);

    let db = root.join("i.db");
    let report = json_of(&run_bounded(index_cmd(&[&docs, &named_fifo], &db, &[]), Duration::from_secs(300)));
    assert_eq!(report["documents_indexed"], 1, "only the regular file (its link inside the folder adds nothing): {report:#}");
    let skipped = entries(&report, "skipped");
    assert_eq!(skipped.len(), 1, "{report:#}");
    assert_eq!((skipped[0].0.as_str(), skipped[0].1.as_str()), ("x.md", "skipped"));
    assert!(skipped[0].2.contains("/etc/passwd") && skipped[0].2.contains("not followed"), "{skipped:?}");
    let failures = entries(&report, "failures");
    let mut fifos: Vec<_> = failures.iter().filter(|f| f.2.contains("FIFO")).map(|f| f.0.as_str()).collect();
    fifos.sort();
    assert_eq!(fifos, ["named.txt", "pipe.txt"], "{failures:?}");
    let names: Vec<_> = failures.iter().filter(|f| f.2.contains("not valid UTF-8")).map(|f| f.0.clone()).collect();
    assert_eq!(names.len(), 2, "two names, two failures, not one merged row: {failures:?}");
    assert_ne!(names[0], names[1]);

    // Nothing outside was stored; a second run (with --prune) keeps the one document and says the same.
    let store = warpfold_index::store::Store::open_read_only(&db).unwrap();
    let stored: Vec<String> = store.documents().unwrap().into_iter().map(|d| d.path).collect();
    assert_eq!(stored, [docs.join("kestrels.txt").display().to_string()]);
    drop(store);
    let again = json_of(&run_bounded(index_cmd(&[&docs], &db, &["--prune"]), Duration::from_secs(300)));
    assert_eq!((again["documents_skipped"].as_u64(), again["documents_pruned"].as_u64()), (Some(1), Some(0)), "{again:#}");
    assert_eq!(entries(&again, "failures").iter().filter(|f| f.2.contains("UTF-8")).count(), 2);
}

#[test]
fn an_unreadable_subfolder_is_one_failure_and_a_read_only_index_is_searched() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    set_mode(&root, 0o755);
    let docs = root.join("docs");
    std::fs::create_dir_all(docs.join("locked")).unwrap();
    std::fs::write(docs.join("herons.txt"), "Herons nest in tall reeds along the quiet river bank.").unwrap();
    std::fs::write(docs.join("locked/inside.txt"), "Unreachable words.").unwrap();
    set_mode(&docs.join("locked"), 0o000);
    let out_dir = root.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    set_mode(&out_dir, 0o777);
    let db = out_dir.join("i.db");

    let report = json_of(&run_bounded(unprivileged(index_cmd(&[&docs], &db, &[])), Duration::from_secs(300)));
    set_mode(&docs.join("locked"), 0o755);
    assert_eq!(report["documents_indexed"], 1, "the readable file is indexed: {report:#}");
    let failures = entries(&report, "failures");
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, "locked");
    assert!(failures[0].2.contains("cannot read the folder") && failures[0].2.contains("ermission denied"), "{failures:?}");

    // The index, read-only for whoever searches it (folder and file), answers all the same.
    set_mode(&out_dir, 0o755);
    set_mode(&db, 0o644);
    let _ = std::fs::remove_file(db.with_extension("db-shm"));
    let _ = std::fs::remove_file(db.with_extension("db-wal"));
    let mut search = warpfold();
    search.args(["search", "where do herons nest", "--json", "--db"]).arg(&db);
    let hits = json_of(&run_bounded(unprivileged(search), Duration::from_secs(300)));
    assert!(hits[0]["path"].as_str().unwrap().ends_with("herons.txt"), "{hits:#}");
}

#[test]
fn a_huge_text_file_is_refused_by_size_in_flat_memory() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let huge = root.join("huge.txt");
    {
        // 300 MB on one line, the file that grew the indexer to 18 GB.
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&huge).unwrap());
        let piece = "lorem ipsum dolor sit amet ".repeat(4096);
        while f.get_ref().metadata().unwrap().len() < 300_000_000 {
            f.write_all(piece.as_bytes()).unwrap();
        }
    }
    let small = root.join("small.txt");
    std::fs::write(&small, "A small file about lighthouse keepers.").unwrap();
    let db = root.join("i.db");
    // Under a 4 GiB address-space limit the run must finish: reading and tokenizing the file
    // whole would not fit.
    let mut bounded = Command::new("bash");
    let inner = index_cmd(&[&huge, &small], &db, &[]);
    bounded.arg("-c").arg("ulimit -v 4194304; exec \"$@\"").arg("bash").arg(inner.get_program()).args(inner.get_args());
    for (key, value) in inner.get_envs() {
        if let Some(v) = value {
            bounded.env(key, v);
        }
    }
    let report = json_of(&run_bounded(bounded, Duration::from_secs(300)));
    assert_eq!(report["documents_indexed"], 1, "{report:#}");
    let failures = entries(&report, "failures");
    assert_eq!(failures.len(), 1);
    assert!(failures[0].2.contains("over 64 MiB") && failures[0].2.contains("--max-text-mib"), "{failures:?}");
    std::fs::remove_file(&huge).unwrap();

    // The limit is the user's to set.
    let medium = root.join("medium.txt");
    std::fs::write(&medium, "word ".repeat(500_000)).unwrap();
    let report = json_of(&run_bounded(index_cmd(&[&medium], &db, &["--max-text-mib", "1"]), Duration::from_secs(300)));
    assert!(entries(&report, "failures")[0].2.contains("over 1 MiB"), "{report:#}");
}

/// A Word file of a few hundred kilobytes whose text inflates to 150 MB (each zip member under the
/// 256 MiB member limit): the worker's answer is refused past about 64 MiB of text, so the indexer
/// neither holds it nor embeds 30 million tokens; the file beside it is indexed.
#[test]
fn a_document_whose_text_inflates_past_the_limit_is_refused_not_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let bomb = root.join("bomb.docx");
    let text = "word ".repeat(30_000_000);
    std::fs::write(&bomb, warpfold_index::docgen::docx("Bomb", &[&[text.as_str()]])).unwrap();
    drop(text);
    assert!(std::fs::metadata(&bomb).unwrap().len() < 2 << 20, "small on disk");
    let small = root.join("small.txt");
    std::fs::write(&small, "A small file about lighthouse keepers.").unwrap();
    let report = json_of(&run_bounded(index_cmd(&[&bomb, &small], &root.join("i.db"), &[]), Duration::from_secs(300)));
    assert_eq!(report["documents_indexed"], 1, "{report:#}");
    let failures = entries(&report, "failures");
    assert_eq!(failures.len(), 1, "{report:#}");
    assert!(failures[0].0.ends_with("bomb.docx") && failures[0].2.contains("more than about 64 MiB of text"), "{failures:?}");
}

#[test]
fn no_chunk_is_left_without_its_vector_and_the_check_repairs_an_index_that_lost_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let docs = root.join("docs");
    std::fs::create_dir(&docs).unwrap();
    let moving = "The lighthouse keeper logged every passing ship in a leather-bound book by lamplight.";
    let db = root.join("i.db");
    let check = |db: &Path| {
        json_of(&run_bounded(
            {
                let mut c = warpfold();
                c.args(["index", "--check", "--json", "--db"]).arg(db);
                c
            },
            Duration::from_secs(300),
        ))
    };
    // Many files, each edited so that its text moves to the next file in the same run: whichever
    // order the stages take, a chunk's text loses its vector when its old file commits first.
    for i in 0..12 {
        std::fs::write(docs.join(format!("{i:02}.txt")), format!("{moving} Entry {i}. Filler text about file {i}.")).unwrap();
    }
    json_of(&run_bounded(index_cmd(&[&docs], &db, &["--overlap", "0"]), Duration::from_secs(300)));
    for i in 0..12 {
        let next = (i + 11) % 12; // file i now holds what file i-1 held
        std::fs::write(docs.join(format!("{i:02}.txt")), format!("{moving} Entry {next}. Filler text about file {next}.")).unwrap();
    }
    let report = json_of(&run_bounded(index_cmd(&[&docs], &db, &["--overlap", "0", "--jobs", "2"]), Duration::from_secs(300)));
    assert_eq!(report["documents_indexed"], 12, "{report:#}");
    eprintln!("chunks embedded again at commit: {}", report["chunks_reembedded"]);
    assert_eq!(check(&db)["chunks_without_vectors"], 0, "every chunk kept its vector: {report:#}");

    // An index damaged by hand (a vector deleted): the check embeds it again, and only it.
    {
        let store = warpfold_index::store::Store::open_existing(&db).unwrap();
        let deleted =
            store.connection().execute("DELETE FROM embeddings WHERE text_hash IN (SELECT text_hash FROM embeddings LIMIT 1)", []).unwrap();
        assert_eq!(deleted, 1);
    }
    let repaired = check(&db);
    assert_eq!((repaired["chunks_without_vectors"].as_u64(), repaired["texts_reembedded"].as_u64()), (Some(1), Some(1)), "{repaired:#}");
    assert_eq!(check(&db)["chunks_without_vectors"], 0);
}

#[test]
fn a_parser_panic_is_stored_without_a_backtrace_and_sqlite_errors_are_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let pdf = root.join("panics.pdf");
    std::fs::write(&pdf, crate::index::hostile::panicking_pdf()).unwrap();
    let mut cmd = index_cmd(&[&pdf], &root.join("i.db"), &[]);
    cmd.env("RUST_BACKTRACE", "1");
    let report = json_of(&run_bounded(cmd, Duration::from_secs(300)));
    let failure = &entries(&report, "failures")[0];
    assert!(failure.2.contains("panicked"), "{failure:?}");
    assert!(!failure.2.contains("backtrace") && failure.2.len() < 600, "{failure:?}");

    let garbage = root.join("garbage.db");
    std::fs::write(&garbage, vec![7u8; 8192]).unwrap();
    let out = run_bounded(
        {
            let mut c = warpfold();
            c.args(["search", "anything", "--db"]).arg(&garbage);
            c
        },
        Duration::from_secs(300),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("not a database").count(), 1, "{stderr}");
}

/// The extraction worker reads the open file the indexer checked and hashed, never the path again:
/// a link to another user's private file renamed over the document after it was opened (what a
/// writer of a watched folder can time with inotify), or a FIFO renamed over it, changes nothing.
/// Before, the worker re-opened the path: the private file's text was indexed under the innocent
/// name and hash (6 of 40 tries in a blind loop), and a FIFO blocked the worker for its whole
/// wall-clock limit. The swap here is made deterministically between the open and the worker's
/// start.
#[test]
fn a_link_or_fifo_swapped_in_after_the_check_is_never_what_the_worker_reads() {
    use warpfold_index::docgen;
    use warpfold_index::extract::{extract_opened, Isolation};
    use warpfold_index::files::open_checked;
    let dir = tempfile::tempdir().unwrap();
    let watched = dir.path().join("watched");
    std::fs::create_dir(&watched).unwrap();
    let private = dir.path().join("private.html");
    std::fs::write(&private, docgen::html("Private", &[&["The safe's code is 4711, kept by the owner alone."]])).unwrap();
    let isolation = Isolation::new(env!("CARGO_BIN_EXE_warpfold").into(), vec!["extract-worker".into()]);
    for swap in ["link", "fifo"] {
        let note = watched.join(format!("note-{swap}.html"));
        std::fs::write(&note, docgen::html("Note", &[&["An innocent note about the garden party on Sunday."]])).unwrap();
        let (file, _) = open_checked(&note).unwrap();
        let replacement = watched.join(format!(".swap-{swap}"));
        match swap {
            "link" => std::os::unix::fs::symlink(&private, &replacement).unwrap(),
            _ => {
                let c = std::ffi::CString::new(replacement.as_os_str().as_bytes()).unwrap();
                // SAFETY: a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }
        }
        std::fs::rename(&replacement, &note).unwrap();
        // A worker that opened the FIFO would block until its wall-clock limit and fail.
        let read = extract_opened(&note, &file, &isolation).unwrap_or_else(|e| panic!("{swap}: {e}"));
        let text = read.pages.join("\n");
        assert!(text.contains("garden party") && !text.contains("4711"), "{swap}: {text}");
    }
}

/// `warpfold index --db` anywhere creates the index readable by its owner alone.
#[test]
fn an_index_made_by_the_cli_is_private_to_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("note.txt"), "a private note about the harbour").unwrap();
    let db = dir.path().join("anywhere.db");
    let out = warpfold().arg("index").arg(dir.path().join("note.txt")).arg("--db").arg(&db).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::metadata(&db).unwrap().permissions().mode() & 0o777, 0o600);
}

/// OCR work per document is bounded: a PDF of 25 image pages with `--ocr-max-pages 3` has three
/// pages read and says which were not, and is not read again by the next run (the limit is the
/// file's, not a passing failure). Before, every page of a 5,000-page PDF was rendered and read
/// (about 30 minutes, hours at 15,000).
#[test]
fn ocr_stops_at_the_documents_page_limit_and_says_which_pages_were_not_read() {
    use warpfold_index::pdfgen::{Page, PdfDocument};
    let dir = tempfile::tempdir().unwrap();
    let pdf = dir.path().join("many-pages.pdf");
    std::fs::write(&pdf, PdfDocument { pages: vec![Page::image_only(); 25], ..Default::default() }.to_bytes()).unwrap();
    let db = dir.path().join("i.db");
    let index = || {
        let out = warpfold().arg("index").arg(&pdf).arg("--db").arg(&db).args(["--json", "--ocr-max-pages", "3"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let report = index();
    let error = report["failures"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("OCR stopped after 3 pages") && error.contains("pages 4-25 were not read"), "{report:#}");
    assert_eq!(report["failures"][0]["status"], "no_text");
    assert_eq!(index()["documents_skipped"], 1, "not read again");
}
