//! `warpfold serve`: the engine and the index over HTTP on loopback, guarded by a token.
//!
//! Why a server in the binary: browsers, headless boxes, tests and other local tools (LangChain,
//! LlamaIndex, editors) reach warpfold the same way: an OpenAI-compatible `/v1/embeddings`, a search
//! endpoint over an index, engine status and Prometheus `/metrics`. The model loads once and the
//! index's vectors stay in memory, so a query pays neither. Every request must carry the token
//! (`Authorization: Bearer TOKEN`, or `?token=TOKEN` for a page opened by hand); anything else gets
//! 401. The listener binds 127.0.0.1 unless told otherwise.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum::extract::{Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use serde::Deserialize;
use warpfold_engine::embed::Embedder;
use warpfold_engine::Lane;
use warpfold_index::search::Searcher;

use crate::{setup, GlobalOptions};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where to listen; loopback only unless you say otherwise.
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub addr: SocketAddr,
    /// The index to search (built by `warpfold index`); without it /api/search answers 404.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// The token clients must send; default: a random one, printed at start.
    #[arg(long, env = "WARPFOLD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

struct AppState {
    token: String,
    embedder: Embedder,
    model: String,
    searcher: Option<Mutex<Searcher>>,
}

type Shared = Arc<AppState>;

/// A JSON error body with its status: `{"error": {"message", "type"}}`, as OpenAI clients expect.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let kind = if status.is_client_error() { "invalid_request_error" } else { "server_error" };
    (status, Json(serde_json::json!({ "error": { "message": message.into(), "type": kind } }))).into_response()
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
        Some(_) => error(StatusCode::UNAUTHORIZED, "wrong token"),
        None => error(StatusCode::UNAUTHORIZED, "missing token: send `Authorization: Bearer TOKEN`"),
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
        if model != &state.model {
            return error(StatusCode::BAD_REQUEST, format!("this server embeds with {}, not {model}", state.model));
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
        let pending = worker.embedder.submit_texts(Lane::Interactive, &refs);
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
        "model": state.model,
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
        return error(StatusCode::BAD_REQUEST, "expected ?q=QUERY[&k=N]");
    };
    if state.searcher.is_none() {
        return error(StatusCode::NOT_FOUND, "no index: start the server with --db FILE");
    }
    let worker = state.clone();
    let result = tokio::task::spawn_blocking(move || {
        let searcher = worker.searcher.as_ref().expect("checked").lock().expect("not poisoned");
        searcher.search(&query.q, query.k.clamp(1, 100), |q| {
            worker.embedder.embed_texts(Lane::Interactive, &[q]).pop().expect("one answer").map_err(|e| e.to_string())
        })
    })
    .await;
    match result {
        Ok(Ok(hits)) => Json(hits).into_response(),
        Ok(Err(e)) => error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the search task failed"),
    }
}

async fn status(State(state): State<Shared>) -> Response {
    let info = state.embedder.engine.info();
    let stats = state.embedder.engine.stats();
    Json(serde_json::json!({
        "model": state.model,
        "device": info.device,
        "bin_tokens": state.embedder.engine.config().bin_tokens,
        "stats": stats,
        "index": state.searcher.as_ref().map(|s| s.lock().expect("not poisoned").vectors().len()),
    }))
    .into_response()
}

async fn metrics(State(state): State<Shared>) -> Response {
    let s = state.embedder.engine.stats();
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        out.push_str(&format!("# HELP warpfold_{name} {help}\n# TYPE warpfold_{name} {kind}\nwarpfold_{name} {value}\n"));
    };
    metric("bins_total", "counter", "Bins the model has run.", s.bins as f64);
    metric("sequences_total", "counter", "Sequences embedded.", s.sequences as f64);
    metric("real_tokens_total", "counter", "Tokens of real text computed.", s.real_tokens as f64);
    metric("computed_tokens_total", "counter", "Tokens computed, alignment and padding included.", s.computed_tokens as f64);
    metric("failed_bins_total", "counter", "Bins with at least one failed sequence.", s.failed_bins as f64);
    metric("backend_busy_seconds_total", "counter", "Time the model spent running bins.", s.backend_busy_seconds);
    metric("oom_splits_total", "counter", "Bins split after running out of device memory.", s.oom_splits as f64);
    let fill = if s.bins > 0 {
        s.computed_tokens as f64 / (s.bins as f64 * state.embedder.engine.config().bin_tokens as f64)
    } else {
        0.0
    };
    metric("bin_fill_ratio", "gauge", "Mean share of a bin's capacity that was computed.", fill);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

fn router(state: Shared) -> Router {
    Router::new()
        .route("/v1/embeddings", post(embeddings))
        .route("/api/search", get(search))
        .route("/api/status", get(status))
        .route("/metrics", get(metrics))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .with_state(state)
}

pub fn run(global: &GlobalOptions, args: &ServeArgs) -> Result<ExitCode> {
    let dir = setup::embedding_model_dir(global)?;
    let embedder = setup::embedder_for(global, &dir)?;
    let searcher = match &args.db {
        Some(db) => Some(Mutex::new(Searcher::open(db).with_context(|| format!("opening the index {}", db.display()))?)),
        None => None,
    };
    let token = args.token.clone().unwrap_or_else(random_token);
    let state = Arc::new(AppState { token: token.clone(), embedder, model: dir.name.clone(), searcher });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr).await.with_context(|| format!("listening on {}", args.addr))?;
        let addr = listener.local_addr()?;
        println!("warpfold serve: listening on http://{addr}");
        if args.token.is_none() {
            println!("token: {token}  (clients send `Authorization: Bearer {token}`; a browser can open http://{addr}/api/status?token={token})");
        }
        use std::io::Write;
        std::io::stdout().flush()?;
        axum::serve(listener, router(state)).await.context("serving")
    })?;
    Ok(ExitCode::SUCCESS)
}
