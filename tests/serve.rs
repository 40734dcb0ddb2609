//! `warpfold serve` as a client sees it: the token guard, the OpenAI-compatible embeddings, search
//! over an index, metrics; the Host guard, upload names and limits, concurrent uploads, cancelled
//! embeddings, the shared data folder.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{cosine, load, minilm_dir, warpfold};
use warpfold_index::store::Store;

/// The server, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn start(extra: &[&str]) -> Server {
    let mut command = warpfold();
    command.args(["serve", "--addr", "127.0.0.1:0", "--token", "s3cret"]).args(extra);
    launch(command, 1).0
}

/// Runs a `warpfold serve` command line: the server and the first `lines` lines it printed (the
/// address first; the token next when it chose one).
fn launch(mut command: Command, lines: usize) -> (Server, Vec<String>) {
    let mut child = command.env_remove("WARPFOLD_TOKEN").stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let printed: Vec<String> = (0..lines)
        .map(|_| {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            line
        })
        .collect();
    let first = &printed[0];
    let addr =
        first.trim().rsplit("http://").next().filter(|_| first.contains("http://")).unwrap_or_else(|| panic!("no address in {first:?}"));
    (Server { child, addr: addr.to_string() }, printed)
}

/// One HTTP/1.1 request; (status, body).
pub(crate) fn request(addr: &str, method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    req.push_str(body.unwrap_or(""));
    stream.write_all(req.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

#[test]
fn the_server_guards_with_its_token_embeds_like_the_engine_and_searches() {
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples");
    assert!(warpfold().arg("make-samples").arg(&samples).output().unwrap().status.success());
    let db = dir.path().join("samples.db");
    assert!(warpfold().arg("index").arg(&samples).arg("--db").arg(&db).output().unwrap().status.success());
    let data = dir.path().join("data");
    let server = start(&["--db", db.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let addr = server.addr.as_str();

    // No token, a wrong token: 401 on every route.
    for path in ["/api/status", "/metrics", "/api/search?q=tomatoes", "/api/state", "/api/events", "/api/file?path=/etc/passwd"] {
        assert_eq!(request(addr, "GET", path, None, None).0, 401, "{path} without a token");
        assert_eq!(request(addr, "GET", path, Some("nope"), None).0, 401, "{path} with a wrong token");
    }
    assert_eq!(request(addr, "POST", "/v1/embeddings", None, Some(r#"{"input": "x"}"#)).0, 401);

    // OpenAI-compatible embeddings, the same vectors the engine gives.
    let (status, body) =
        request(addr, "POST", "/v1/embeddings", Some("s3cret"), Some(r#"{"input": ["The first text.", "Another one here."]}"#));
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["object"], "list");
    assert_eq!(v["model"], "all-MiniLM-L6-v2");
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 4);
    let (backend, encoder) = load(&minilm_dir());
    let engine = warpfold_engine::Engine::start(backend, warpfold_engine::SchedulerConfig::default());
    let direct = engine
        .embed(warpfold_engine::Lane::Bulk, vec![encoder.encode("The first text.").unwrap(), encoder.encode("Another one here.").unwrap()]);
    for (i, d) in direct.iter().enumerate() {
        let served: Vec<f32> = serde_json::from_value(v["data"][i]["embedding"].clone()).unwrap();
        assert_eq!(v["data"][i]["index"], i);
        assert!(cosine(&served, d.as_ref().unwrap()) > 0.99999);
    }
    // Bad input is a 400 with a message, not a crash.
    let (status, body) = request(addr, "POST", "/v1/embeddings", Some("s3cret"), Some(r#"{"input": 42}"#));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("input"));
    let (status, _) = request(addr, "POST", "/v1/embeddings", Some("s3cret"), Some(r#"{"input": "x", "model": "other"}"#));
    assert_eq!(status, 400);

    // Search over the index.
    let (status, body) = request(addr, "GET", "/api/search?q=pick%20tomatoes%20ripen%20indoors&k=2", Some("s3cret"), None);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let hits = &v["hits"];
    assert!(hits[0]["path"].as_str().unwrap().ends_with("tomatoes.pdf"), "{hits:#}");
    assert_eq!(hits[0]["page"], 2);
    assert_eq!(hits.as_array().unwrap().len(), 2, "k is taken beside the filters");
    let (status, body) = request(addr, "GET", "/api/search?q=tomatoes&k=3&all_from_document=true&type=pdf", Some("s3cret"), None);
    assert_eq!(status, 200, "{body}");
    // the words the search matched, stop words left out ("pick", "tomatoes"... not "when")
    let terms: Vec<&str> = hits[0]["terms"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert!(terms.contains(&"picked") || terms.contains(&"tomato"), "{terms:?}");

    // Filters act before the best hits are cut: by type, by folder, by date.
    let paths = |query: &str| -> Vec<String> {
        let (status, body) =
            request(addr, "GET", &format!("/api/search?q=pick%20tomatoes%20ripen%20indoors&k=5{query}"), Some("s3cret"), None);
        assert_eq!(status, 200, "{query}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["hits"].as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap().to_string()).collect()
    };
    let texts = paths("&type=txt,md");
    assert!(!texts.is_empty() && texts.iter().all(|p| p.ends_with(".txt") || p.ends_with(".md")), "{texts:?}");
    let gardening = samples.join("gardening").canonicalize().unwrap();
    let inside = paths(&format!("&folder={}", gardening.display()));
    assert!(!inside.is_empty() && inside.iter().all(|p| p.starts_with(gardening.to_str().unwrap())), "{inside:?}");
    assert!(paths("&after=2999-01-01").is_empty(), "nothing is modified in the future");
    assert!(!paths("&before=2999-01-01").is_empty());
    let (status, body) = request(addr, "GET", "/api/search?q=tomatoes&after=yesterday", Some("s3cret"), None);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("after") && body.contains("YYYY-MM-DD"), "{body}");

    let (status, body) = request(addr, "GET", "/metrics", Some("s3cret"), None);
    assert_eq!(status, 200);
    let bins: f64 = body.lines().find_map(|l| l.strip_prefix("warpfold_bins_total ")).unwrap_or_else(|| panic!("{body}")).parse().unwrap();
    assert!(bins >= 2.0, "the embeddings and the search query ran: {body}");
}

#[test]
fn the_server_listens_on_loopback_by_default() {
    let out = warpfold().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("[default: 127.0.0.1:8787]"), "{help}");
}

fn request_bytes(addr: &str, method: &str, path: &str, token: &str, body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

#[test]
fn the_app_api_takes_uploads_and_folders_streams_events_and_guards_paths() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = start(&["--db", dir.path().join("i.db").to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let addr = server.addr.as_str();

    // Events first, so the upload's queue and bin events are on the stream.
    let mut events = TcpStream::connect(addr).unwrap();
    events.write_all(format!("GET /api/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer s3cret\r\n\r\n").as_bytes()).unwrap();
    events.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();

    // The UI's files are public; the API is not.
    let (status, page) = request(addr, "GET", "/", None, None);
    assert_eq!(status, 200);
    assert!(page.contains("<html") || page.contains("<!doctype") || page.contains("<!DOCTYPE"), "{page}");

    let (status, body) =
        request_bytes(addr, "POST", "/api/upload?name=kestrels.txt", "s3cret", b"Kestrels hover over motorway verges hunting voles.");
    assert_eq!(status, 200, "{body}");
    let uploaded: Value = serde_json::from_str(&body).unwrap();
    let path = uploaded["path"].as_str().unwrap().to_string();
    assert!(path.starts_with(std::fs::canonicalize(&data).unwrap().to_str().unwrap()), "{path}");
    let (status, body) = request_bytes(addr, "POST", "/api/upload?name=..%2Fescape.txt", "s3cret", b"x");
    assert_eq!(status, 400, "{body}");

    // The event stream reports the upload through the queue to done.
    let mut seen = String::new();
    let mut reader = BufReader::new(events);
    while !(seen.contains("event: queue") && seen.contains("\"state\":\"done\"") && seen.contains("event: bin")) {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the event stream ended: {seen}");
        seen.push_str(&line);
    }
    let (status, body) = request(addr, "GET", "/api/state", Some("s3cret"), None);
    assert_eq!(status, 200);
    let state: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(state["queue"]["counts"]["done"], 1, "{state:#}");
    assert!(state["bins"][0]["sequences"].as_array().is_some_and(|s| !s.is_empty()), "{state:#}");
    let (status, body) = request(addr, "GET", "/api/search?q=birds%20hunting%20voles", Some("s3cret"), None);
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["hits"][0]["path"], path.as_str());

    // Files warpfold was given can be read back; others cannot.
    let (status, body) = request(addr, "GET", &format!("/api/file?path={path}"), Some("s3cret"), None);
    assert_eq!((status, body.as_str()), (200, "Kestrels hover over motorway verges hunting voles."));
    let (status, body) = request(addr, "GET", "/api/file?path=/etc/passwd", Some("s3cret"), None);
    assert_eq!(status, 403, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["kind"], "path_not_allowed");
    let (status, body) = request(addr, "GET", &format!("/api/document?path={path}"), Some("s3cret"), None);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("motorway verges"), "{body}");

    // Without --summarize documents are summarized when asked, but only documents the app holds.
    let (status, body) = request(addr, "POST", "/api/summarize", Some("s3cret"), Some(r#"{"paths": ["/etc/passwd"]}"#));
    assert_eq!(status, 403, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["kind"], "path_not_allowed");

    // Watched folders: a missing one is a 404 with its reason; a real one is saved and listed.
    let (status, body) = request(addr, "POST", "/api/folders", Some("s3cret"), Some(r#"{"path": "/no/such/folder"}"#));
    assert_eq!(status, 404, "{body}");
    let folder = dir.path().join("watched");
    std::fs::create_dir(&folder).unwrap();
    let (status, body) = request(addr, "POST", "/api/folders", Some("s3cret"), Some(&format!(r#"{{"path": "{}"}}"#, folder.display())));
    assert_eq!(status, 200, "{body}");
    assert!(std::fs::read_to_string(data.join("settings.json")).unwrap().contains("watched"));
}

#[test]
fn with_summarize_the_server_summarizes_what_is_dropped_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = start(&[
        "--db",
        dir.path().join("i.db").to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--summarize",
        // the small model: this test is about the plumbing (tests/facts.rs judges the default's summaries)
        "--chat-model",
        "fast",
        "--repetition-penalty",
        "1.15",
        "--no-repeat-ngram",
        "6",
    ]);
    let addr = server.addr.as_str();
    // The state says which model summarizes, where, and with the settings given.
    let (status, body) = request(addr, "GET", "/api/state", Some("s3cret"), None);
    assert_eq!(status, 200, "{body}");
    let summaries = &serde_json::from_str::<Value>(&body).unwrap()["summaries"];
    assert_eq!(summaries["model"], "SmolLM2-135M-Instruct", "{summaries:#}");
    assert_eq!(summaries["device"], "cpu");
    assert_eq!(summaries["options"]["sampling"]["no_repeat_ngram"], 6);
    assert!((summaries["options"]["sampling"]["repetition_penalty"].as_f64().unwrap() - 1.15).abs() < 1e-6, "{summaries:#}");
    assert!(summaries["options"]["retry"]["no_repeat_ngram"].as_u64().is_some(), "retries are on by default: {summaries:#}");
    let mut events = TcpStream::connect(addr).unwrap();
    events.write_all(format!("GET /api/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer s3cret\r\n\r\n").as_bytes()).unwrap();
    events.set_read_timeout(Some(std::time::Duration::from_secs(300))).unwrap();
    let text = "Tomatoes need six to eight hours of sun a day. Plant them deep, water at the base two or three \
                times a week, and pick them when they start to colour; they ripen indoors on a windowsill.";
    let (status, body) = request_bytes(addr, "POST", "/api/upload?name=tomatoes.txt", "s3cret", text.as_bytes());
    assert_eq!(status, 200, "{body}");
    let path = serde_json::from_str::<Value>(&body).unwrap()["path"].as_str().unwrap().to_string();

    // Indexed, then summarized on its own (auto), announced by a `summary` event.
    let mut reader = BufReader::new(events);
    let mut seen = String::new();
    while !seen.contains("event: summary") || !seen.ends_with("\n\n") {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the event stream ended: {seen}");
        seen.push_str(&line);
    }
    let (status, body) = request(addr, "GET", &format!("/api/document?path={path}"), Some("s3cret"), None);
    assert_eq!(status, 200, "{body}");
    let doc: Value = serde_json::from_str(&body).unwrap();
    let summary = doc["summary"].as_str().unwrap_or_else(|| panic!("no summary: {doc:#}"));
    assert!(summary.split_whitespace().count() >= 5, "{summary}");
    assert!(summary.to_lowercase().contains("tomato"), "a summary of this text names its subject: {summary}");
    // Checked against the document: whatever it states is there (or was taken out, and listed).
    assert_eq!(doc["summary_state"], "ready", "{doc:#}");
    assert_eq!(doc["summary_check"]["checked"], true, "{doc:#}");
    assert!(seen.contains("\"check\":{\"checked\":true"), "the summary event carries the check: {seen}");
    // Asking again answers from the index (the same text is never summarized twice).
    let (status, body) = request(addr, "POST", "/api/summarize", Some("s3cret"), Some(&format!(r#"{{"paths": ["{path}"]}}"#)));
    assert_eq!((status, serde_json::from_str::<Value>(&body).unwrap()["queued"].as_u64()), (200, Some(1)), "{body}");
}

/// A document indexed without --summarize (or waiting when the server stopped) says it is summarized
/// when asked, and is summarized when the server starts again with --summarize. Before: "No summary
/// yet" whether or not one would come, and documents indexed before a restart were never summarized.
#[test]
fn documents_without_a_summary_are_summarized_after_a_restart_and_say_when_not_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (db, data) = (dir.path().join("i.db"), dir.path().join("data"));
    let args = |extra: &[&str]| {
        let mut a = vec!["--db".to_string(), db.display().to_string(), "--data-dir".to_string(), data.display().to_string()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let server = start(&args(&[]).iter().map(String::as_str).collect::<Vec<_>>());
    let text = "The allotment society meets on 3 May 2026 in the village hall. Plots cost 40 pounds a year.";
    let (status, body) = request_bytes(&server.addr, "POST", "/api/upload?name=allotment.txt", "s3cret", text.as_bytes());
    assert_eq!(status, 200, "{body}");
    let path = serde_json::from_str::<Value>(&body).unwrap()["path"].as_str().unwrap().to_string();
    let document = |addr: &str| {
        let (status, body) = request(addr, "GET", &format!("/api/document?path={path}"), Some("s3cret"), None);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()
    };
    eventually("the upload is indexed", || document(&server.addr)["detail"]["status"] == "indexed");
    assert_eq!(document(&server.addr)["summary_state"], "not_asked");
    drop(server);

    let server = start(&args(&["--summarize", "--chat-model", "fast"]).iter().map(String::as_str).collect::<Vec<_>>());
    let mut events = TcpStream::connect(&server.addr).unwrap();
    events
        .write_all(format!("GET /api/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer s3cret\r\n\r\n", server.addr).as_bytes())
        .unwrap();
    events.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
    let mut reader = BufReader::new(events);
    let mut seen = String::new();
    // Already summarized before the stream opened, or announced on it.
    while document(&server.addr)["summary_state"] != "ready" {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the event stream ended: {seen}");
        seen.push_str(&line);
    }
    let doc = document(&server.addr);
    assert!(
        doc["summary"].as_str().is_some_and(|s| !s.trim().is_empty() || !doc["summary_check"]["removed"].as_array().unwrap().is_empty()),
        "{doc:#}"
    );
    assert_eq!(doc["summary_check"]["checked"], true, "{doc:#}");
}

/// Summary settings that would forbid ordinary prose keep the server from starting, saying why;
/// without --summarize the chat model still answers and summarizes when asked, not by itself.
#[test]
fn the_server_refuses_bad_summary_settings_and_summarizes_only_when_asked_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let out = warpfold()
        .args(["serve", "--addr", "127.0.0.1:0", "--token", "s3cret", "--summarize", "--no-repeat-ngram", "1"])
        .args(["--db", dir.path().join("i.db").to_str().unwrap(), "--data-dir", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("summary settings") && stderr.contains("no-repeat n-gram"), "{stderr}");
    let (server, _dir) = fresh(&[]);
    let (status, body) = request(&server.addr, "GET", "/api/state", Some("s3cret"), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["summaries"]["auto"], false, "{body}");
}

/// Sends `head` (request line and headers, no blank line) and `body`; (status, body). A server
/// that answers before reading everything may reset the connection: what arrived still counts.
fn raw(addr: &str, head: &str, body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let _ = stream.write_all(format!("{head}\r\nConnection: close\r\n\r\n").as_bytes()).and_then(|()| stream.write_all(body));
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    parse_response(&response)
}

fn parse_response(response: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(response);
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no HTTP response: {text:?}"));
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

/// One value of /metrics, if the server reports it.
fn metric(addr: &str, name: &str) -> Option<f64> {
    let (status, body) = request(addr, "GET", "/metrics", Some("s3cret"), None);
    assert_eq!(status, 200, "{body}");
    body.lines().find_map(|l| l.strip_prefix(&format!("warpfold_{name} "))).map(|v| v.parse().unwrap())
}

/// Waits (at most a minute: a bound against hanging, not a speed check) for `what` to hold.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "gave up waiting for: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A server on a fresh data folder (dropped after the server: keep both).
fn fresh(extra: &[&str]) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (db, data) = (dir.path().join("i.db"), dir.path().join("data"));
    let mut args = vec!["--db", db.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
    args.extend_from_slice(extra);
    (start(&args), dir)
}

/// `n` bytes unique to `seed`, and not UTF-8 (so the indexer refuses them at once instead of embedding a megabyte).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut bytes: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    bytes[0] = 0xFF;
    bytes
}

#[test]
fn concurrent_uploads_of_one_name_each_keep_their_own_bytes() {
    let (server, dir) = fresh(&[]);
    let addr = server.addr.as_str();
    let bodies: Vec<Vec<u8>> = (0..30).map(|i| noise(i, 1_000_000 + i as usize)).collect();
    let answers: Vec<(u16, String)> = std::thread::scope(|s| {
        let handles: Vec<_> =
            bodies.iter().map(|b| s.spawn(move || request_bytes(addr, "POST", "/api/upload?name=big.txt", "s3cret", b))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut paths = std::collections::HashSet::new();
    let inbox = std::fs::canonicalize(dir.path().join("data/inbox")).unwrap();
    for ((status, body), sent) in answers.iter().zip(&bodies) {
        assert_eq!(*status, 200, "{body}");
        let path = serde_json::from_str::<Value>(body).unwrap()["path"].as_str().unwrap().to_string();
        assert!(Path::new(&path).starts_with(&inbox), "{path}");
        assert!(std::fs::read(&path).unwrap() == *sent, "{path} holds another request's bytes");
        paths.insert(path);
    }
    assert_eq!(paths.len(), 30, "every upload got a file of its own: {paths:?}");
}

#[test]
fn an_upload_over_the_limit_answers_413_naming_the_limit() {
    let (server, _dir) = fresh(&["--max-upload-mib", "1"]);
    let addr = server.addr.as_str();
    // Declared too large (as curl sends a large file: `Expect: 100-continue`): refused before the
    // body is sent. A server that asks for the body gets it.
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let length = (1 << 20) + 1;
    write!(stream, "POST /api/upload?name=big.txt HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer s3cret\r\nContent-Length: {length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n").unwrap();
    let mut first = [0u8; 12];
    stream.read_exact(&mut first).unwrap();
    if first.starts_with(b"HTTP/1.1 100") {
        stream.write_all(&noise(1, length)).unwrap();
    }
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    let (status, body) = parse_response(&[&first[..], &rest].concat());
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("1 MiB"), "{body}");
    // Streamed without a declared length: cut off at the limit.
    let chunk = noise(2, (1 << 20) + 1);
    let chunked = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n0\r\n\r\n"].concat();
    let (status, body) = raw(
        addr,
        &format!("POST /api/upload?name=big.txt HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer s3cret\r\nTransfer-Encoding: chunked"),
        &chunked,
    );
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("1 MiB"), "{body}");
    // Exactly the limit is taken.
    let (status, body) = request_bytes(addr, "POST", "/api/upload?name=big.txt", "s3cret", &noise(3, 1 << 20));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn upload_names_must_be_plain_file_names_without_control_or_direction_characters() {
    let (server, dir) = fresh(&[]);
    let addr = server.addr.as_str();
    let long = format!("{}.txt", "a".repeat(252));
    let refused = [
        "nul%00byte.txt",
        long.as_str(),
        "line%0Abreak.txt",
        "bell%07.txt",
        "del%7F.txt",
        "invoice%E2%80%AEfdp.txt",
        "isolate%E2%81%A6.txt",
        "..%2Fescape.txt",
        "back%5Cslash.txt",
        ".hidden.txt",
        "..",
        ".",
    ];
    for name in refused {
        let (status, body) = request_bytes(addr, "POST", &format!("/api/upload?name={name}"), "s3cret", b"some words");
        assert_eq!(status, 400, "{name}: {body}");
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["kind"], "invalid_input", "{name}: {body}");
    }
    let stored: Vec<_> =
        std::fs::read_dir(dir.path().join("data/inbox")).map(|d| d.map(|e| e.unwrap().file_name()).collect()).unwrap_or_default();
    assert!(stored.is_empty(), "nothing refused was stored: {stored:?}");
    for name in ["report..final.txt", &long[1..]] {
        let (status, body) = request_bytes(addr, "POST", &format!("/api/upload?name={name}"), "s3cret", b"some words");
        assert_eq!(status, 200, "{name}: {body}");
        assert!(serde_json::from_str::<Value>(&body).unwrap()["path"].as_str().unwrap().ends_with(&format!("/{name}")), "{body}");
    }
}

#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let (server, _dir) = fresh(&[]);
    let addr = server.addr.as_str();
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let (status, body) = raw(addr, &format!("GET /api/status HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {scheme} s3cret"), b"");
        assert_eq!(status, 200, "{scheme}: {body}");
    }
    let (status, _) = raw(addr, &format!("GET /api/status HTTP/1.1\r\nHost: {addr}\r\nAuthorization: bearer wrong"), b"");
    assert_eq!(status, 401);
}

#[test]
fn embeddings_come_as_base64_little_endian_floats_when_asked() {
    let (server, _dir) = fresh(&[]);
    let addr = server.addr.as_str();
    let embed = |format: &str| {
        let (status, body) =
            request(addr, "POST", "/v1/embeddings", Some("s3cret"), Some(&format!(r#"{{"input": ["Kestrels hover."]{format}}}"#)));
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["data"][0]["embedding"].clone()
    };
    let floats: Vec<f32> = serde_json::from_value(embed("")).unwrap();
    let explicit: Vec<f32> = serde_json::from_value(embed(r#", "encoding_format": "float""#)).unwrap();
    assert!(cosine(&explicit, &floats) > 0.99999, "\"float\" is the default");
    use base64::Engine as _;
    let encoded = embed(r#", "encoding_format": "base64""#);
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(encoded.as_str().unwrap_or_else(|| panic!("not a string: {encoded}"))).unwrap();
    let decoded: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    assert_eq!(decoded.len(), floats.len());
    assert!(cosine(&decoded, &floats) > 0.99999);
    let (status, body) = request(addr, "POST", "/v1/embeddings", Some("s3cret"), Some(r#"{"input": "x", "encoding_format": "int8"}"#));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("encoding_format"), "{body}");
}

#[test]
fn embeddings_take_at_most_2048_inputs() {
    let (server, _dir) = fresh(&[]);
    let addr = server.addr.as_str();
    let inputs = serde_json::json!({ "input": vec!["x"; 2049] }).to_string();
    let (status, body) = request(addr, "POST", "/v1/embeddings", Some("s3cret"), Some(&inputs));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("2049") && body.contains("at most 2048"), "{body}");
    assert_eq!(metric(addr, "sequences_total"), Some(0.0), "nothing was embedded");
}

#[test]
fn an_embeddings_request_whose_client_hangs_up_is_cancelled() {
    let (server, _dir) = fresh(&[]);
    let addr = server.addr.as_str();
    let words = "kestrels hover over motorway verges hunting voles while traffic passes below them";
    let sent = 2000;
    // About 200 tokens each (the model takes at most 256): some 100 bins of work.
    let inputs: Vec<String> = (0..sent).map(|i| format!("{i} {}", [words; 12].join(" "))).collect();
    let body = serde_json::json!({ "input": inputs }).to_string();
    let mut client = TcpStream::connect(addr).unwrap();
    write!(client, "POST /v1/embeddings HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer s3cret\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    // Once the work has begun, the client goes away. (One that leaves before its inputs are even
    // queued costs nothing: hyper drops the handler while it still reads the body.)
    eventually("the request's first bins ran", || metric(addr, "sequences_total").unwrap() > 0.0);
    drop(client);
    let settled = || {
        let ran = metric(addr, "sequences_total").unwrap();
        let cancelled = metric(addr, "cancelled_sequences_total").expect("the server counts cancelled sequences");
        (ran, cancelled)
    };
    eventually("every sequence ran or was cancelled", || {
        let (ran, cancelled) = settled();
        ran + cancelled >= sent as f64
    });
    let (ran, cancelled) = settled();
    assert!(cancelled > 0.0 && ran < sent as f64, "ran {ran}, cancelled {cancelled} of {sent}");
    assert_eq!(ran + cancelled, sent as f64);
}

#[test]
fn hosts_other_than_ip_addresses_localhost_and_allowed_names_get_421() {
    let (server, _dir) = fresh(&["--allow-host", "warpfold.lan"]);
    let addr = server.addr.as_str();
    let port = addr.rsplit(':').next().unwrap();
    let get = |host: &str, path: &str| raw(addr, &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer s3cret"), b"");
    for path in ["/", "/index.html", "/app.js", "/app.css", "/api/status", "/metrics"] {
        for host in [format!("evil.example:{port}"), "evil.example".into(), format!("localhost.evil.example:{port}")] {
            let (status, body) = get(&host, path);
            assert_eq!(status, 421, "{host}{path}: {body}");
            assert!(body.contains("--allow-host"), "{body}");
        }
        for host in [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
            format!("warpfold.lan:{port}"),
            "WARPFOLD.LAN".into(),
        ] {
            assert_eq!(get(&host, path).0, 200, "{host}{path}");
        }
    }
    let (status, _) = raw(addr, "GET / HTTP/1.0", b"");
    assert_eq!(status, 421, "no Host at all");
}

#[test]
fn the_server_uses_the_shared_data_folder_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let (home, xdg, chosen) = (dir.path().join("home"), dir.path().join("xdg"), dir.path().join("chosen"));
    let upload_to = |env: &[(&str, &Path)]| {
        let mut command = warpfold();
        command.args(["serve", "--addr", "127.0.0.1:0", "--token", "s3cret"]).env_remove("WARPFOLD_DATA_DIR").env("HOME", &home);
        for (name, value) in env {
            command.env(name, value);
        }
        let (server, _) = launch(command, 1);
        let (status, body) = request_bytes(&server.addr, "POST", "/api/upload?name=notes.txt", "s3cret", b"Some notes.");
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["path"].as_str().unwrap().to_string()
    };
    // WARPFOLD_DATA_DIR, as for the desktop app: the index and the uploads live there.
    let path = upload_to(&[("WARPFOLD_DATA_DIR", &chosen), ("XDG_DATA_HOME", &xdg)]);
    assert!(Path::new(&path).starts_with(std::fs::canonicalize(&chosen).unwrap()), "{path}");
    assert!(chosen.join("index.db").is_file());
    // Otherwise the XDG data folder.
    let path = upload_to(&[("XDG_DATA_HOME", &xdg)]);
    assert!(Path::new(&path).starts_with(std::fs::canonicalize(xdg.join("warpfold")).unwrap()), "{path}");
}

#[test]
fn without_dev_urandom_the_token_is_still_random() {
    // /dev/null over /dev/urandom in a mount namespace of its own (needs root, as CI runs).
    let probe = Command::new("unshare").args(["-m", "sh", "-c", "mount --bind /dev/null /dev/urandom"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: `unshare -m` with a bind mount is not permitted here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new("unshare");
    command
        .args([
            "-m",
            "sh",
            "-c",
            r#"mount --bind /dev/null /dev/urandom && exec "$@""#,
            "sh",
            env!("CARGO_BIN_EXE_warpfold"),
            "serve",
            "--addr",
            "127.0.0.1:0",
        ])
        .arg("--db")
        .arg(dir.path().join("i.db"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .envs(warpfold().get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))));
    let (server, printed) = launch(command, 2);
    let token =
        printed[1].strip_prefix("token: ").and_then(|t| t.split_whitespace().next()).unwrap_or_else(|| panic!("no token in {printed:?}"));
    assert_eq!(token.len(), 48, "{token}");
    assert!(token.bytes().all(|c| c.is_ascii_hexdigit()) && token.bytes().any(|c| c != b'0'), "{token}");
    assert_eq!(request(&server.addr, "GET", "/api/status", Some(token), None).0, 200);
}

/// The server's peak resident memory (VmHWM), in bytes.
fn peak_resident_bytes(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn a_huge_file_is_streamed_to_the_browser_in_flat_memory_and_only_documents_are_handed_out() {
    let (server, dir) = fresh(&[]);
    let addr = server.addr.as_str();
    let folder = dir.path().join("watched");
    std::fs::create_dir(&folder).unwrap();
    let folder = std::fs::canonicalize(&folder).unwrap();
    // 3 GiB (sparse: no disk), over the indexer's text limit: a document that failed, which the
    // user may still open.
    let big = folder.join("big.txt");
    std::fs::File::create(&big).unwrap().set_len(3 << 30).unwrap();
    let (status, body) = request(addr, "POST", "/api/folders", Some("s3cret"), Some(&format!(r#"{{"path": "{}"}}"#, folder.display())));
    assert_eq!(status, 200, "{body}");
    eventually("big.txt failed on its size", || {
        let (_, body) = request(addr, "GET", "/api/state", Some("s3cret"), None);
        body.contains("big.txt") && body.contains("64 MiB")
    });
    let mut stream = TcpStream::connect(addr).unwrap();
    let head = format!(
        "GET /api/file?path={} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer s3cret\r\nConnection: close\r\n\r\n",
        big.display()
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut headers = String::new();
    while !headers.ends_with("\r\n\r\n") {
        assert!(reader.read_line(&mut headers).unwrap() > 0, "{headers}");
    }
    assert!(headers.starts_with("HTTP/1.1 200"), "{headers}");
    assert!(headers.to_ascii_lowercase().contains("content-length: 3221225472"), "{headers}");
    let mut received = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        received += n as u64;
    }
    assert_eq!(received, 3 << 30);
    let peak = peak_resident_bytes(&server);
    assert!(peak < 1 << 30, "the file was held in memory: the server's peak was {} MiB", peak >> 20);

    // A file in the watched folder that is not a document (never indexed) is not handed out.
    std::fs::write(folder.join("payload.desktop"), "[Desktop Entry]\nExec=true\n").unwrap();
    let (status, body) =
        request(addr, "GET", &format!("/api/file?path={}", folder.join("payload.desktop").display()), Some("s3cret"), None);
    assert_eq!(status, 403, "{body}");
}

/// The whole answer, headers and body, of one request.
fn full_response(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer s3cret\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    String::from_utf8_lossy(&response).to_lowercase()
}

/// API answers are never stored by the browser (search hits and documents are the user's text)
/// nor sniffed; a document opened by its address is sandboxed and named as its file. Before: no
/// `Cache-Control: no-store`, no `nosniff`, no CSP or `Content-Disposition` on /api/file.
#[test]
fn api_answers_are_not_stored_and_a_document_is_served_sandboxed_under_its_name() {
    let (server, _dir) = fresh(&[]);
    let addr = server.addr.as_str();
    let (status, stored) = request_bytes(addr, "POST", "/api/upload?name=r%C3%A9sum%C3%A9.txt", "s3cret", b"notes about the harbour");
    assert_eq!(status, 200, "{stored}");
    let path: String = serde_json::from_str::<serde_json::Value>(&stored).unwrap()["path"].as_str().unwrap().to_string();
    for route in ["/api/state", "/api/search?q=harbour", "/api/status", "/api/file?path=nowhere"] {
        let answer = full_response(addr, route);
        assert!(
            answer.contains("cache-control: no-store\r\n") && answer.contains("x-content-type-options: nosniff\r\n"),
            "{route}: {answer}"
        );
    }
    let encoded: String =
        path.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
    let file = full_response(addr, &format!("/api/file?path={encoded}"));
    assert!(file.starts_with("http/1.1 200"), "{file}");
    assert!(file.contains("content-security-policy: sandbox; default-src 'none'"), "{file}");
    assert!(file.contains("content-disposition: inline; filename*=utf-8''r%c3%a9sum%c3%a9.txt\r\n"), "{file}");

    // Each format as a browser can take it: a Windows-1252 note decoded as the indexer read it
    // (before: sent as UTF-8, so "Caf\u{fffd}"), a Word file offered as a download of its own type
    // (before: text/plain, a page of ZIP bytes), never sniffed.
    let served = |name: &str, bytes: &[u8]| {
        let (status, stored) = request_bytes(addr, "POST", &format!("/api/upload?name={name}"), "s3cret", bytes);
        assert_eq!(status, 200, "{stored}");
        let path = serde_json::from_str::<serde_json::Value>(&stored).unwrap()["path"].as_str().unwrap().to_string();
        let encoded: String =
            path.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
        full_response(addr, &format!("/api/file?path={encoded}"))
    };
    let note = served("lettre.txt", b"Caf\xe9 \xe0 c\xf4t\xe9 : 12 \x80 par mois, r\xe9sum\xe9 de la r\xe9union du 3 mars.");
    assert!(note.contains("content-type: text/plain; charset=utf-8\r\n"), "{note}");
    assert!(note.ends_with("café à côté : 12 € par mois, résumé de la réunion du 3 mars."), "{note}");
    let word = served("offer.docx", b"PK\x03\x04\x14\x00 a Word file cut short");
    assert!(word.contains("content-type: application/vnd.openxmlformats-officedocument.wordprocessingml.document\r\n"), "{word}");
    assert!(word.contains("content-disposition: attachment; filename*=utf-8''offer.docx\r\n"), "{word}");
    assert!(word.contains("x-content-type-options: nosniff\r\n") && word.contains("content-security-policy: sandbox;"), "{word}");
}

/// The token from a file (first line), so it is not in the process list; given with --token, a
/// warning says it is visible there.
#[test]
fn the_token_can_come_from_a_file_and_one_on_the_command_line_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "from-a-file\n").unwrap();
    let (db, data) = (dir.path().join("i.db"), dir.path().join("data"));
    let mut command = warpfold();
    command.args(["serve", "--addr", "127.0.0.1:0", "--token-file"]).arg(&file).arg("--db").arg(&db).arg("--data-dir").arg(&data);
    let (server, _) = launch(command, 1);
    assert_eq!(request(&server.addr, "GET", "/api/state", Some("from-a-file"), None).0, 200);
    assert_eq!(request(&server.addr, "GET", "/api/state", Some("s3cret"), None).0, 401);
    drop(server);
    let mut command = warpfold();
    command.args(["serve", "--addr", "127.0.0.1:0", "--token", "s3cret"]).arg("--db").arg(&db).arg("--data-dir").arg(&data);
    let mut child = command.env_remove("WARPFOLD_TOKEN").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("visible to every user of this machine"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The whole answer, headers and body, of one request given as its head (request line and
/// headers, no blank line).
fn exchange(addr: &str, head: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(format!("{head}\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

fn status_of(response: &str) -> u16 {
    response.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A browser hands the token over once for an HttpOnly, SameSite=Strict cookie named for the port;
/// the token in an address opens nothing (it would stay in history and logs). Before the UI sends
/// the cookie to a server it has not checked, the server proves it holds the token: an HMAC of the
/// client's challenge under the key the exchange gave, which a server with another token (say,
/// another user's on the same port after this one stopped) cannot give. Before: `?token=` opened
/// the API, there was no cookie, and the UI sent its token to whatever answered.
#[test]
fn a_browser_trades_the_token_for_a_cookie_and_checks_the_server_before_sending_it() {
    use hmac::Mac;
    let (server, _dir) = fresh(&[]);
    let addr = server.addr.as_str();
    let port = addr.rsplit(':').next().unwrap();
    assert_eq!(request(addr, "GET", "/api/state?token=s3cret", None, None).0, 401, "a token in the address opens nothing");
    assert_eq!(status_of(&exchange(addr, "POST /api/session HTTP/1.1")), 401, "no cookie without the token");

    let answer = exchange(addr, "POST /api/session HTTP/1.1\r\nAuthorization: Bearer s3cret");
    assert_eq!(status_of(&answer), 200, "{answer}");
    let set_cookie = answer.lines().find_map(|l| l.strip_prefix("set-cookie: ")).unwrap_or_else(|| panic!("{answer}"));
    let cookie = set_cookie.split(';').next().unwrap();
    assert!(cookie.starts_with(&format!("warpfold_session_{port}=")), "{set_cookie}");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.split("; ").any(|a| a == attribute), "{attribute} missing: {set_cookie}");
    }
    assert!(!cookie.contains("s3cret"), "the cookie is not the token: {cookie}");
    let body: Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    let proof_key = body["proof_key"].as_str().unwrap().to_string();
    assert_eq!(proof_key.len(), 64, "{body}");

    // The cookie opens the API; one for another port or another token does not.
    let with_cookie = |cookie: &str| status_of(&exchange(addr, &format!("GET /api/state HTTP/1.1\r\nCookie: theme=dark; {cookie}")));
    assert_eq!(with_cookie(cookie), 200);
    let value = cookie.split_once('=').unwrap().1;
    assert_eq!(with_cookie(&format!("warpfold_session_1{port}={value}")), 401);
    assert_eq!(with_cookie(&format!("warpfold_session_{port}={}", "0".repeat(value.len()))), 401);

    // The proof, checked as the UI checks it.
    let key: Vec<u8> = (0..64).step_by(2).map(|i| u8::from_str_radix(&proof_key[i..i + 2], 16).unwrap()).collect();
    let expected = |challenge: &[u8]| {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
        mac.update(challenge);
        mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let proof_from = |addr: &str, challenge: &[u8]| {
        let hex: String = challenge.iter().map(|b| format!("{b:02x}")).collect();
        let (status, body) = request(addr, "GET", &format!("/api/hello?challenge={hex}"), None, None);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["proof"].as_str().unwrap().to_string()
    };
    let (a, b) = ([7u8; 32], *b"another challenge, 32 bytes long");
    assert_eq!(proof_from(addr, &a), expected(&a));
    assert_eq!(proof_from(addr, &b), expected(&b));
    assert_ne!(expected(&a), expected(&b));
    for bad in ["", "abc", "zz", "00", &"ab".repeat(65)] {
        assert_eq!(request(addr, "GET", &format!("/api/hello?challenge={bad}"), None, None).0, 400, "{bad:?}");
    }
    assert_eq!(status_of(&exchange(addr, "DELETE /api/session HTTP/1.1\r\nAuthorization: Bearer s3cret")), 204);

    // Another server (another token) cannot give this one's proof.
    let dir = tempfile::tempdir().unwrap();
    let (db, data) = (dir.path().join("i.db"), dir.path().join("data"));
    let mut command = warpfold();
    command.args(["serve", "--addr", "127.0.0.1:0", "--token", "someone-else"]).arg("--db").arg(&db).arg("--data-dir").arg(&data);
    let (impostor, _) = launch(command, 1);
    assert_ne!(proof_from(&impostor.addr, &a), expected(&a));
}

/// The events of a server-sent-event body: (name, data as JSON).
fn sse_events(body: &str) -> Vec<(String, Value)> {
    let mut events = Vec::new();
    let mut name = String::from("message");
    for line in body.lines() {
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.trim().to_string();
        } else if let Some(data) = line.strip_prefix("data: ") {
            events.push((std::mem::replace(&mut name, "message".into()), serde_json::from_str(data).unwrap_or(Value::Null)));
        }
    }
    events
}

/// POST /api/ask: the passages come first, then the answer that cites the document and page holding
/// the fact; a follow-up is searched and read with the question before it; a question that cannot
/// be asked gets its error and status, not a stream.
#[test]
fn a_question_asked_over_http_streams_its_passages_then_a_cited_answer() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(
        docs.join("lease.txt"),
        "Tenancy agreement for the flat at 14 Rue Garibaldi, Lyon.\n\nThe monthly rent is 1,450 euros. \
         The tenant pays a one-time security deposit of 2,900 euros. The deposit must be paid by 15 March 2026.\n",
    )
    .unwrap();
    std::fs::write(docs.join("bread.txt"), "A sourdough starter is flour and water kept alive by wild yeast. Feed it twice a day.\n")
        .unwrap();
    let db = dir.path().join("i.db");
    let data = dir.path().join("data");
    let (empty, _empty_dir) = fresh(&[]);
    let asked = |addr: &str, body: &str| request(addr, "POST", "/api/ask", Some("s3cret"), Some(body));
    // nothing indexed: said before any stream starts
    let (status, body) = asked(&empty.addr, r#"{"question": "How much is the deposit?"}"#);
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("nothing is indexed yet"), "{body}");
    drop(empty);

    assert!(warpfold().arg("index").arg(&docs).arg("--db").arg(&db).output().unwrap().status.success());
    let server = start(&["--db", db.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    for (body, expected) in [
        (r#"{"question": "  "}"#, "the question is empty"),
        (r#"{"question": "How much?", "passages": 9}"#, "passages must be 1 to 8, not 9"),
        (r#"{"q": "How much?"}"#, "expected {\\\"question\\\""),
        (r#"{"question": "How much?", "rerank": 41}"#, "at most 40 candidates are judged, not 41"),
    ] {
        let (status, reply) = asked(&server.addr, body);
        assert_eq!(status, 400, "{body}: {reply}");
        assert!(reply.contains(expected), "{body}: {reply}");
    }
    let (status, reply) = request(&server.addr, "POST", "/api/ask", None, Some(r#"{"question": "How much is the deposit?"}"#));
    assert_eq!(status, 401, "{reply}");

    let (status, body) = asked(&server.addr, r#"{"question": "How much is the security deposit?", "passages": 2}"#);
    assert_eq!(status, 200, "{body}");
    let events = sse_events(&body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"passages"), "{body}");
    assert_eq!(names.last(), Some(&"answer"), "{body}");
    assert!(names[1..names.len() - 1].iter().all(|n| *n == "status"), "{names:?}");
    let passages = &events[0].1["passages"];
    assert!(passages[0]["path"].as_str().unwrap().ends_with("lease.txt"), "{passages}");
    let answer = &events.last().unwrap().1;
    assert_eq!(answer["answerable"], true, "{answer}");
    assert!(answer["answer"].as_str().unwrap().contains("2,900 euros"), "{answer}");
    let citation = &answer["citations"][0];
    assert!(citation["path"].as_str().unwrap().ends_with("lease.txt") && citation["page"] == 1, "{answer}");
    assert!(answer["seconds"].as_f64().unwrap() >= answer["first_token_seconds"].as_f64().unwrap(), "{answer}");

    // a follow-up that names nothing is read with the question before it
    let follow_up = serde_json::json!({
        "question": "When must it be paid?",
        "passages": 1,
        "earlier": [{ "question": "How much is the security deposit?", "answer": answer["answer"] }],
    });
    let (status, body) = asked(&server.addr, &follow_up.to_string());
    assert_eq!(status, 200, "{body}");
    let events = sse_events(&body);
    assert!(events[0].1["passages"][0]["path"].as_str().unwrap().ends_with("lease.txt"), "{body}");
    let answer = &events.last().unwrap().1;
    assert!(answer["answer"].as_str().unwrap().contains("15 March 2026"), "{answer}");

    // asked to judge two candidates (a CPU judges none unless asked): the chat model says which
    // passage it reads, shown again in its order before the answer
    let (status, body) = asked(&server.addr, r#"{"question": "How much is the security deposit?", "passages": 1, "rerank": 2}"#);
    assert_eq!(status, 200, "{body}");
    let events = sse_events(&body);
    let passages: Vec<&Value> = events.iter().filter(|(n, _)| n == "passages").map(|(_, e)| e).collect();
    assert_eq!(passages.len(), 2, "found, then judged: {body}");
    assert!(events.iter().any(|(n, e)| n == "status" && e["status"].as_str().unwrap().starts_with("judging 2 passages")), "{body}");
    assert_eq!(passages[1]["passages"].as_array().unwrap().len(), 1, "{body}");
    assert!(passages[1]["passages"][0]["path"].as_str().unwrap().ends_with("lease.txt"), "{body}");
    let answer = &events.last().unwrap().1;
    assert!(answer["answer"].as_str().unwrap().contains("2,900 euros"), "{answer}");
}

/// A question asked while a folder's summaries are being written is answered after the round in
/// progress, not after every summary: the chat model summarizes a few documents at a time (four on
/// a CPU) and answers what was asked between rounds. Before, all the documents waiting were one
/// batch, and a question waited for the last of them.
#[test]
fn a_question_is_answered_between_rounds_of_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    for i in 0..14u32 {
        let text = format!(
            "Minutes of garden committee meeting {i}. The committee met on {} May 2026 in room {}. \
             It approved a budget of {} euros for new fruit trees and asked for three quotes.",
            i + 1,
            100 + i,
            1000 * (i + 1)
        );
        std::fs::write(docs.join(format!("minutes-{i:02}.txt")), text).unwrap();
    }
    let (db, data) = (dir.path().join("i.db"), dir.path().join("data"));
    assert!(warpfold().arg("index").arg(&docs).arg("--db").arg(&db).output().unwrap().status.success());
    // The 14 documents have no summary: all are queued when the server starts.
    let server = start(&["--db", db.to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--summarize", "--chat-model", "fast"]);
    let pending = || {
        let (status, body) = request(&server.addr, "GET", "/api/state", Some("s3cret"), None);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["summaries"]["pending"].as_u64().unwrap()
    };
    // Once a first round is written, and many remain, a question is asked. (A bound against
    // hanging only: a busy machine loads the model and writes a round slowly.)
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut queued = false;
    loop {
        let left = pending();
        assert!(!(queued && left == 0), "all 14 summaries were written at once: no round was left to ask between");
        queued |= left == 14;
        if (1..14).contains(&left) {
            break;
        }
        assert!(Instant::now() < deadline, "no first round of summaries (pending {left})");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, body) = request(
        &server.addr,
        "POST",
        "/api/ask",
        Some("s3cret"),
        Some(r#"{"question": "What budget did garden committee meeting 3 approve?", "passages": 1}"#),
    );
    assert_eq!(status, 200, "{body}");
    let left = pending();
    let events = sse_events(&body);
    assert_eq!(events.last().map(|(name, _)| name.as_str()), Some("answer"), "{body}");
    assert!(left > 0, "the answer came only after every summary was written");
}

/// The everyday controls over HTTP: pause (an upload waits), resume (it is indexed), the library
/// (filtered by type, sorted, paged), and a re-index of what the index holds.
#[test]
fn indexing_pauses_resumes_reindexes_and_the_library_lists_what_the_filters_let_through() {
    let (server, _dir) = fresh(&[]);
    let addr = server.addr.as_str();
    // A form post (no JSON) from another page cannot pause it.
    let (status, body) = request_bytes(addr, "POST", "/api/pause", "s3cret", b"x=1");
    assert_eq!(status, 400, "{body}");
    let (status, body) = request(addr, "POST", "/api/pause", Some("s3cret"), Some("{}"));
    assert_eq!((status, body.as_str()), (200, r#"{"paused":true}"#));
    let state = |key: &str| {
        serde_json::from_str::<serde_json::Value>(&request(addr, "GET", "/api/state", Some("s3cret"), None).1).unwrap()[key].clone()
    };
    assert_eq!(state("paused"), true);
    let upload = |name: &str, text: &str| {
        let (status, stored) = request_bytes(addr, "POST", &format!("/api/upload?name={name}"), "s3cret", text.as_bytes());
        assert_eq!(status, 200, "{stored}");
        serde_json::from_str::<serde_json::Value>(&stored).unwrap()["path"].as_str().unwrap().to_string()
    };
    let notes = upload("harbour-notes.txt", "The harbour master opens the lock gates at six every morning.");
    upload("budget.csv", "item;amount\nlock gate repairs;12400\npaint;800\n");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(state("documents"), 0, "nothing is indexed while paused");
    assert_eq!(request(addr, "POST", "/api/resume", Some("s3cret"), Some("{}")).1, r#"{"paused":false}"#);
    eventually("both indexed", || state("documents") == 2);

    let library = |query: &str| {
        serde_json::from_str::<serde_json::Value>(&request(addr, "GET", &format!("/api/library?{query}"), Some("s3cret"), None).1).unwrap()
    };
    let names = |view: &serde_json::Value| {
        view["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["path"].as_str().unwrap().rsplit('/').next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let all = library("sort=name");
    assert_eq!((all["total"].as_u64(), names(&all)), (Some(2), vec!["budget.csv".to_string(), "harbour-notes.txt".to_string()]));
    assert_eq!(names(&library("sort=size&desc=true&limit=1")), ["harbour-notes.txt"]);
    let csv = library("type=csv");
    assert_eq!((csv["total"].as_u64(), names(&csv)), (Some(1), vec!["budget.csv".to_string()]));
    assert_eq!(csv["documents"][0]["status"], "indexed", "a CSV is read as text");
    let (status, body) = request(addr, "GET", "/api/library?after=yesterday", Some("s3cret"), None);
    assert_eq!(status, 400, "{body}");

    let (status, body) = request(addr, "POST", "/api/reindex", Some("s3cret"), Some(&format!(r#"{{"path": "{notes}"}}"#)));
    assert_eq!((status, body.as_str()), (200, r#"{"queued":1}"#));
    let (status, body) = request(addr, "POST", "/api/reindex", Some("s3cret"), Some(r#"{"path": "/no/such/file.txt"}"#));
    assert_eq!(status, 404, "{body}");
}

/// settings.json (the settings view) asks for another embedding model than the data folder's index
/// was built with: the index is set aside under its model's name, its documents are embedded again
/// into a new index with the model asked for, their summaries kept, and the old index is removed
/// once all are. Before: the app refused to start ("built with the model ..."), which a one-off
/// `--model` still gets.
#[test]
fn a_changed_model_re_embeds_the_data_folders_index_and_keeps_the_old_one() {
    let models = crate::common::repo().join("models");
    if !models.join("multilingual-e5-small").is_dir() {
        eprintln!("skipped: multilingual-e5-small is not installed (`warpfold models fetch multilingual-e5-small`)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let bakery = {
        let server = start(&["--data-dir", data_arg, "--model", "all-MiniLM-L6-v2"]);
        let addr = server.addr.as_str();
        let (status, stored) = request_bytes(
            addr,
            "POST",
            "/api/upload?name=boulangerie.txt",
            "s3cret",
            "La boulangerie du quartier ouvre à six heures et vend des croissants au beurre.".as_bytes(),
        );
        assert_eq!(status, 200, "{stored}");
        request_bytes(addr, "POST", "/api/upload?name=harbour.txt", "s3cret", b"The harbour master opens the lock gates at six.");
        let documents = || {
            serde_json::from_str::<serde_json::Value>(&request(addr, "GET", "/api/state", Some("s3cret"), None).1).unwrap()["documents"]
                .clone()
        };
        eventually("both indexed with MiniLM", || documents() == 2);
        serde_json::from_str::<serde_json::Value>(&stored).unwrap()["path"].as_str().unwrap().to_string()
    };
    // A summary made earlier (as the summarizer stores it), which must not be written again.
    let old_db = data.join("index.db");
    let store = Store::open_existing(&old_db).unwrap();
    let hash = store.document_state(&bakery).unwrap().unwrap().content_hash;
    store
        .put_summary(&warpfold_index::summaries::StoredSummary {
            content_hash: hash,
            model: "a chat model".into(),
            path: bakery.clone(),
            summary: "La boulangerie ouvre à six heures.".into(),
            tokens_in: 20,
            tokens_out: 8,
            seconds: 1.0,
            created_at: 1,
            check: None,
        })
        .unwrap();
    drop(store);

    // A one-off flag moves nothing: refused with its way out, the index as it was.
    let out = warpfold()
        .args(["serve", "--addr", "127.0.0.1:0", "--token", "s3cret", "--data-dir", data_arg, "--model", "multilingual-e5-small"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("built with the model all-MiniLM-L6-v2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(Store::open_read_only(&old_db).unwrap().model().unwrap().map(|(m, _)| m).as_deref(), Some("all-MiniLM-L6-v2"));

    // The model chosen in the settings (settings.json, as the settings view saves it).
    std::fs::write(data.join("settings.json"), r#"{"model": "multilingual-e5-small"}"#).unwrap();
    let server = start(&["--data-dir", data_arg]);
    let addr = server.addr.as_str();
    let state = || serde_json::from_str::<serde_json::Value>(&request(addr, "GET", "/api/state", Some("s3cret"), None).1).unwrap();
    assert_eq!(state()["model"], "multilingual-e5-small");
    eventually("both embedded again", || state()["documents"] == 2);
    let new = Store::open_read_only(&old_db).unwrap();
    assert_eq!(new.model().unwrap().map(|(m, _)| m).as_deref(), Some("multilingual-e5-small"));
    assert_eq!(new.summary_for_path(&bakery).unwrap().map(|s| s.summary).as_deref(), Some("La boulangerie ouvre à six heures."));
    let (_, hits) = request(addr, "GET", "/api/search?q=%C3%A0%20quelle%20heure%20ouvre%20la%20boulangerie&k=1", Some("s3cret"), None);
    assert!(hits.contains("boulangerie.txt"), "{hits}");
    // Every document in the new index: the old one (kept until then) and its marker are gone.
    let kept = data.join("index-all-MiniLM-L6-v2.db");
    eventually("the old index removed once all are embedded again", || !kept.exists());
    assert!(!data.join("index.db.reembedding-from").exists());
}
