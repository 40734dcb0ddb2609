//! `warpfold serve` as a client sees it: the token guard, the OpenAI-compatible embeddings, search
//! over an index, metrics.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use serde_json::Value;

use crate::common::{cosine, load, minilm_dir, warpfold};

/// The server, killed when dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(extra: &[&str]) -> Server {
    let mut child = warpfold()
        .args(["serve", "--addr", "127.0.0.1:0", "--token", "s3cret"])
        .args(extra)
        .env_remove("WARPFOLD_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap_or_else(|| panic!("no address in {line:?}")).to_string();
    Server { child, addr }
}

/// One HTTP/1.1 request; (status, body).
fn request(addr: &str, method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> (u16, String) {
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
    let direct = engine.embed(
        warpfold_engine::Lane::Bulk,
        vec![encoder.encode("The first text.").unwrap(), encoder.encode("Another one here.").unwrap()],
    );
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

    // Search over the index, with the token in the query string as a browser would send it.
    let (status, body) = request(addr, "GET", "/api/search?q=pick%20tomatoes%20ripen%20indoors&k=2&token=s3cret", None, None);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let hits = &v["hits"];
    assert!(hits[0]["path"].as_str().unwrap().ends_with("tomatoes.pdf"), "{hits:#}");
    assert_eq!(hits[0]["page"], 2);

    let (status, body) = request(addr, "GET", "/metrics", Some("s3cret"), None);
    assert_eq!(status, 200);
    let bins: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix("warpfold_bins_total "))
        .unwrap_or_else(|| panic!("{body}"))
        .parse()
        .unwrap();
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
    events
        .write_all(format!("GET /api/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer s3cret\r\n\r\n").as_bytes())
        .unwrap();
    events.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();

    // The UI's files are public; the API is not.
    let (status, page) = request(addr, "GET", "/", None, None);
    assert_eq!(status, 200);
    assert!(page.contains("<html") || page.contains("<!doctype") || page.contains("<!DOCTYPE"), "{page}");

    let (status, body) = request_bytes(addr, "POST", "/api/upload?name=kestrels.txt", "s3cret", b"Kestrels hover over motorway verges hunting voles.");
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

    // Summaries are off unless the server was started with --summarize.
    let (status, body) = request(addr, "POST", "/api/summarize", Some("s3cret"), Some(&format!(r#"{{"paths": ["{path}"]}}"#)));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("--summarize"), "{body}");

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
    let server = start(&["--db", dir.path().join("i.db").to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--summarize"]);
    let addr = server.addr.as_str();
    let mut events = TcpStream::connect(addr).unwrap();
    events
        .write_all(format!("GET /api/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer s3cret\r\n\r\n").as_bytes())
        .unwrap();
    events.set_read_timeout(Some(std::time::Duration::from_secs(300))).unwrap();
    let text = "Tomatoes need six to eight hours of sun a day. Plant them deep, water at the base two or three \
                times a week, and pick them when they start to colour; they ripen indoors on a windowsill.";
    let (status, body) = request_bytes(addr, "POST", "/api/upload?name=tomatoes.txt", "s3cret", text.as_bytes());
    assert_eq!(status, 200, "{body}");
    let path = serde_json::from_str::<Value>(&body).unwrap()["path"].as_str().unwrap().to_string();

    // Indexed, then summarized on its own (auto), announced by a `summary` event.
    let mut reader = BufReader::new(events);
    let mut seen = String::new();
    while !seen.contains("event: summary") {
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
    // Asking again answers from the index (the same text is never summarized twice).
    let (status, body) = request(addr, "POST", "/api/summarize", Some("s3cret"), Some(&format!(r#"{{"paths": ["{path}"]}}"#)));
    assert_eq!((status, serde_json::from_str::<Value>(&body).unwrap()["queued"].as_u64()), (200, Some(1)), "{body}");
}
