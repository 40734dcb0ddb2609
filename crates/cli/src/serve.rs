//! `warpfold serve`: the app over HTTP on loopback, guarded by a token.
//!
//! Why a server in the binary: browsers, headless boxes, tests and other local tools (LangChain,
//! LlamaIndex, editors) reach warpfold the same way. It serves the web UI (ui/, the same one the
//! desktop app shows) and the app's API (docs/api.md: state, watched folders, drops and uploads,
//! search, documents, files, and live events as server-sent events), plus an OpenAI-compatible
//! `/v1/embeddings` and Prometheus `/metrics`. All logic lives in `warpfold_app::App`; the
//! handlers only translate. The model loads once and the index's vectors stay in memory, so a
//! query pays neither. Every API request must carry the token (`Authorization: Bearer TOKEN`, or
//! `?token=TOKEN` for a page opened by hand); anything else gets 401. The UI's own files are
//! public (a page without the token shows how to get in). The listener binds 127.0.0.1 unless told
//! otherwise.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use serde::Deserialize;
use warpfold_app::{App, AppConfig, AppError, DeviceView, Origin};
use warpfold_engine::Lane;

use crate::{setup, GlobalOptions};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where to listen; loopback only unless you say otherwise.
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub addr: SocketAddr,
    /// The index (created if missing). Default: index.db in the data folder.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Where settings (watched folders) and uploaded files are kept.
    /// Default: $XDG_DATA_HOME/warpfold (~/.local/share/warpfold).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Summarize every document once it is indexed, with the local chat model (see `warpfold
    /// summarize`); without it, POST /api/summarize answers that summaries are off.
    #[arg(long)]
    pub summarize: bool,
    /// The chat model for --summarize (a .gguf, a folder with one, or a Hugging Face folder).
    /// Default: the pinned SmolLM2-135M-Instruct, fetched on first use.
    #[arg(long)]
    pub chat_model: Option<PathBuf>,
    /// The token clients must send; default: a random one, printed at start.
    #[arg(long, env = "WARPFOLD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

struct AppState {
    token: String,
    app: App,
}

type Shared = Arc<AppState>;

/// A JSON error body with its status: `{"error": {"message", "type"}}`, as OpenAI clients expect.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let kind = if status.is_client_error() { "invalid_request_error" } else { "server_error" };
    (status, Json(serde_json::json!({ "error": { "message": message.into(), "type": kind } }))).into_response()
}

/// An app error as `{"error": {"kind", "message"}}` with the status its kind means.
fn app_error(e: AppError) -> Response {
    let status = match &e {
        AppError::NotFound(_) => StatusCode::NOT_FOUND,
        AppError::InvalidInput(_) => StatusCode::BAD_REQUEST,
        AppError::PathNotAllowed(_) => StatusCode::FORBIDDEN,
        AppError::Index(_) | AppError::Engine(_) | AppError::Io(_) | AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, Json(serde_json::json!({ "error": e }))).into_response()
}

/// Runs blocking app work off the async threads and answers with its JSON.
async fn blocking<T: serde::Serialize + Send + 'static>(work: impl FnOnce() -> Result<T, AppError> + Send + 'static) -> Response {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Json(value).into_response(),
        Ok(Err(e)) => app_error(e),
        Err(_) => app_error(AppError::Internal("the request's task failed".into())),
    }
}

fn random_token() -> String {
    let mut bytes = [0u8; 24];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Constant-time comparison, so the token cannot be guessed byte by byte from response times.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn unauthorized(message: &str) -> Response {
    (StatusCode::UNAUTHORIZED, Json(serde_json::json!({ "error": { "kind": "unauthorized", "message": message, "type": "invalid_request_error" } })))
        .into_response()
}

async fn require_token(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let query = request.uri().query().and_then(|q| {
        q.split('&').find_map(|pair| pair.strip_prefix("token=")).map(str::to_string)
    });
    match bearer.or(query) {
        Some(token) if same(&token, &state.token) => next.run(request).await,
        Some(_) => unauthorized("wrong token"),
        None => unauthorized("missing token: send `Authorization: Bearer TOKEN`"),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct EmbeddingsRequest {
    input: Input,
    #[serde(default)]
    model: Option<String>,
}

async fn embeddings(State(state): State<Shared>, body: Result<Json<EmbeddingsRequest>, axum::extract::rejection::JsonRejection>) -> Response {
    let Json(request) = match body {
        Ok(body) => body,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("expected {{\"input\": string or [string]}}: {e}")),
    };
    if let Some(model) = &request.model {
        if model != state.app.model() {
            return error(StatusCode::BAD_REQUEST, format!("this server embeds with {}, not {model}", state.app.model()));
        }
    }
    let texts = match request.input {
        Input::One(t) => vec![t],
        Input::Many(v) => v,
    };
    if texts.is_empty() {
        return error(StatusCode::BAD_REQUEST, "\"input\" is empty");
    }
    let worker = state.clone();
    let result = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let pending = worker.app.embedder().submit_texts(Lane::Interactive, &refs);
        let tokens: usize = pending.tokens.iter().sum();
        (pending.wait(), tokens)
    })
    .await;
    let Ok((results, tokens)) = result else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "the embedding task failed");
    };
    let mut data = Vec::with_capacity(results.len());
    for (index, r) in results.into_iter().enumerate() {
        match r {
            Ok(v) => data.push(serde_json::json!({ "object": "embedding", "index": index, "embedding": v })),
            Err(e) => return error(StatusCode::BAD_REQUEST, format!("input {index}: {e}")),
        }
    }
    Json(serde_json::json!({
        "object": "list",
        "data": data,
        "model": state.app.model(),
        "usage": { "prompt_tokens": tokens, "total_tokens": tokens },
    }))
    .into_response()
}

#[derive(Deserialize)]
struct SearchQuery {
    q: String,
    #[serde(default = "default_k")]
    k: usize,
}

fn default_k() -> usize {
    5
}

async fn search(State(state): State<Shared>, query: Result<Query<SearchQuery>, axum::extract::rejection::QueryRejection>) -> Response {
    let Ok(Query(query)) = query else {
        return app_error(AppError::InvalidInput("expected ?q=QUERY[&k=N]".into()));
    };
    blocking(move || Ok(serde_json::json!({ "hits": state.app.search(&query.q, query.k)? }))).await
}

async fn app_state(State(state): State<Shared>) -> Response {
    blocking(move || Ok(state.app.state())).await
}

#[derive(Deserialize)]
struct PathBody {
    path: String,
}

#[derive(Deserialize)]
struct PathsBody {
    paths: Vec<String>,
}

async fn add_folder(State(state): State<Shared>, body: Result<Json<PathBody>, axum::extract::rejection::JsonRejection>) -> Response {
    let Ok(Json(body)) = body else { return app_error(AppError::InvalidInput("expected {\"path\": FOLDER}".into())) };
    blocking(move || state.app.add_folder(&body.path)).await
}

async fn remove_folder(State(state): State<Shared>, body: Result<Json<PathBody>, axum::extract::rejection::JsonRejection>) -> Response {
    let Ok(Json(body)) = body else { return app_error(AppError::InvalidInput("expected {\"path\": FOLDER}".into())) };
    blocking(move || state.app.remove_folder(&body.path)).await
}

async fn add_paths(State(state): State<Shared>, body: Result<Json<PathsBody>, axum::extract::rejection::JsonRejection>) -> Response {
    let Ok(Json(body)) = body else { return app_error(AppError::InvalidInput("expected {\"paths\": [PATH, ...]}".into())) };
    blocking(move || Ok(serde_json::json!({ "queued": state.app.add_paths(&body.paths, Origin::User)? }))).await
}

async fn summarize(State(state): State<Shared>, body: Result<Json<PathsBody>, axum::extract::rejection::JsonRejection>) -> Response {
    let Ok(Json(body)) = body else { return app_error(AppError::InvalidInput("expected {\"paths\": [PATH, ...]}".into())) };
    blocking(move || Ok(serde_json::json!({ "queued": state.app.summarize(&body.paths)? }))).await
}

#[derive(Deserialize)]
struct NameQuery {
    name: String,
}

async fn upload(State(state): State<Shared>, query: Result<Query<NameQuery>, axum::extract::rejection::QueryRejection>, body: Bytes) -> Response {
    let Ok(Query(query)) = query else { return app_error(AppError::InvalidInput("expected ?name=FILE.pdf".into())) };
    if query.name.contains('/') || query.name.contains('\\') || query.name.contains("..") {
        return app_error(AppError::InvalidInput(format!("{:?} is not a plain file name", query.name)));
    }
    blocking(move || Ok(serde_json::json!({ "queued": 1, "path": state.app.upload(&query.name, &body)? }))).await
}

async fn document(State(state): State<Shared>, query: Result<Query<PathBody>, axum::extract::rejection::QueryRejection>) -> Response {
    let Ok(Query(query)) = query else { return app_error(AppError::InvalidInput("expected ?path=FILE".into())) };
    blocking(move || state.app.document(&query.path)).await
}

async fn file(State(state): State<Shared>, query: Result<Query<PathBody>, axum::extract::rejection::QueryRejection>) -> Response {
    let Ok(Query(query)) = query else { return app_error(AppError::InvalidInput("expected ?path=FILE".into())) };
    let path = query.path.clone();
    match tokio::task::spawn_blocking(move || state.app.file_bytes(&query.path)).await {
        Ok(Ok(bytes)) => {
            let kind = match path.rsplit('.').next().map(str::to_ascii_lowercase).as_deref() {
                Some("pdf") => "application/pdf",
                Some("md") => "text/markdown; charset=utf-8",
                _ => "text/plain; charset=utf-8",
            };
            ([(header::CONTENT_TYPE, kind)], bytes).into_response()
        }
        Ok(Err(e)) => app_error(e),
        Err(_) => app_error(AppError::Internal("the request's task failed".into())),
    }
}

/// Live events as server-sent events; a client that falls behind gets `resync` and refetches state.
async fn events(State(state): State<Shared>) -> Response {
    let receiver = state.app.subscribe();
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let event = match receiver.recv().await {
            Ok(event) => Event::default().event(event.name()).data(event.data_json()),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Event::default().event("resync").data("{}"),
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
        };
        Some((Ok::<_, std::convert::Infallible>(event), receiver))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(15)).text("ping")).into_response()
}

async fn status(State(state): State<Shared>) -> Response {
    let engine = &state.app.embedder().engine;
    Json(serde_json::json!({
        "model": state.app.model(),
        "device": engine.info().device,
        "bin_tokens": engine.config().bin_tokens,
        "stats": engine.stats(),
    }))
    .into_response()
}

async fn metrics(State(state): State<Shared>) -> Response {
    let engine = &state.app.embedder().engine;
    let s = engine.stats();
    let view = state.app.state();
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        out.push_str(&format!("# HELP warpfold_{name} {help}\n# TYPE warpfold_{name} {kind}\nwarpfold_{name} {value}\n"));
    };
    metric("bins_total", "counter", "Bins the model has run.", s.bins as f64);
    metric("sequences_total", "counter", "Sequences embedded.", s.sequences as f64);
    metric("real_tokens_total", "counter", "Tokens of real text computed.", s.real_tokens as f64);
    metric("computed_tokens_total", "counter", "Tokens computed, alignment and padding included.", s.computed_tokens as f64);
    metric("padding_tokens_total", "counter", "Alignment and padding tokens computed.", (s.computed_tokens - s.real_tokens) as f64);
    metric("padded_equivalent_tokens_total", "counter", "Tokens padded batches of the same sequences would have computed.", s.padded_equivalent_tokens as f64);
    metric("failed_bins_total", "counter", "Bins with at least one failed sequence.", s.failed_bins as f64);
    metric("backend_busy_seconds_total", "counter", "Time the model spent running bins.", s.backend_busy_seconds);
    metric("oom_splits_total", "counter", "Bins split after running out of device memory.", s.oom_splits as f64);
    let fill = if s.bins > 0 { s.computed_tokens as f64 / (s.bins as f64 * engine.config().bin_tokens as f64) } else { 0.0 };
    metric("bin_fill_ratio", "gauge", "Mean share of a bin's capacity that was computed.", fill);
    metric("bin_capacity_tokens", "gauge", "Tokens one bin holds (the VRAM probe's answer on a GPU).", engine.config().bin_tokens as f64);
    let c = &view.queue.counts;
    metric("queue_depth", "gauge", "Files waiting, extracting or embedding.", (c.waiting + c.extracting + c.embedding) as f64);
    metric("documents_failed", "gauge", "Files that could not be indexed.", c.failed as f64);
    let rate = view.samples.last().map_or(0.0, |x| x.tokens_per_s);
    metric("tokens_per_second", "gauge", "Real tokens embedded per second over the last sample.", rate);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

#[cfg(ui_built)]
mod ui_files {
    pub const INDEX: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/dist/index.html"));
    pub const JS: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/dist/app.js"));
    pub const CSS: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/dist/app.css"));
}

#[cfg(not(ui_built))]
mod ui_files {
    pub const INDEX: &str = "<!doctype html><title>warpfold</title><p>This warpfold was built without its web UI: run \
        <code>cd ui &amp;&amp; npm ci &amp;&amp; npm run build</code> and build again. The API is up.</p>";
    pub const JS: &str = "";
    pub const CSS: &str = "";
}

/// The UI's own files: public, strict CSP, no caching surprises.
fn static_file(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CONTENT_SECURITY_POLICY, "default-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; frame-ancestors 'none'"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

fn router(state: Shared) -> Router {
    let api = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .route("/api/state", get(app_state))
        .route("/api/folders", post(add_folder).delete(remove_folder))
        .route("/api/paths", post(add_paths))
        .route("/api/summarize", post(summarize))
        .route("/api/upload", post(upload).layer(DefaultBodyLimit::max(512 << 20)))
        .route("/api/search", get(search))
        .route("/api/document", get(document))
        .route("/api/file", get(file))
        .route("/api/events", get(events))
        .route("/api/status", get(status))
        .route("/metrics", get(metrics))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .with_state(state);
    Router::new()
        .route("/", get(|| async { static_file(ui_files::INDEX, "text/html; charset=utf-8") }))
        .route("/index.html", get(|| async { static_file(ui_files::INDEX, "text/html; charset=utf-8") }))
        .route("/app.js", get(|| async { static_file(ui_files::JS, "text/javascript; charset=utf-8") }))
        .route("/app.css", get(|| async { static_file(ui_files::CSS, "text/css; charset=utf-8") }))
        .merge(api)
}

fn default_data_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("warpfold")
}

pub fn run(global: &GlobalOptions, args: &ServeArgs) -> Result<ExitCode> {
    let dir = setup::embedding_model_dir(global)?;
    let embedder = setup::embedder_for(global, &dir)?;
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let db = args.db.clone().unwrap_or_else(|| data_dir.join("index.db"));
    let exe = std::env::current_exe().context("finding the warpfold binary to run extraction workers")?;
    let engine = &embedder.engine;
    let device = DeviceView {
        name: engine.info().device.clone(),
        kind: if engine.info().device.starts_with("cuda") { "cuda" } else { "cpu" }.into(),
        bin_tokens: engine.config().bin_tokens,
        probe: None,
        memory_total_bytes: None,
        memory_used_bytes: None,
    };
    let mut config = AppConfig::new(db.clone(), data_dir, dir.name.clone(), exe, device);
    config.memory = setup::memory_reader(global)?;
    if args.summarize {
        config.summaries = Some(warpfold_app::summaries::SummaryConfig {
            model: crate::summarize::chat_model_path(global, args.chat_model.as_ref())?,
            device: setup::backend_device(global)?,
            auto: true,
        });
    }
    let app = App::start(config, Arc::new(embedder)).with_context(|| format!("starting on the index {}", db.display()))?;
    let token = args.token.clone().unwrap_or_else(random_token);
    let state = Arc::new(AppState { token: token.clone(), app });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr).await.with_context(|| format!("listening on {}", args.addr))?;
        let addr = listener.local_addr()?;
        println!("warpfold serve: listening on http://{addr}");
        if args.token.is_none() {
            println!("token: {token}  (clients send `Authorization: Bearer {token}`; open http://{addr}/?token={token} in a browser)");
        }
        use std::io::Write;
        std::io::stdout().flush()?;
        axum::serve(listener, router(state)).await.context("serving")
    })?;
    Ok(ExitCode::SUCCESS)
}
