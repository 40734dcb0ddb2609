//! The HTTP front (`warpfold serve`): the app over HTTP on loopback, guarded by a token. The CLI
//! maps its flags onto [`ServerOptions`] and starts the app; everything past that is here.
//!
//! Why a server at all: browsers, headless boxes, tests and other local tools (LangChain,
//! LlamaIndex, editors) reach warpfold the same way. It serves the web UI (ui/, the same one the
//! desktop app shows) and the app's API (docs/api.md: state, watched folders, drops and uploads,
//! search, documents, files, and live events as server-sent events), plus an OpenAI-compatible
//! `/v1/embeddings` and Prometheus `/metrics`. All logic lives in `warpfold_app::App`; the
//! handlers only translate. The model loads once and the index's vectors stay in memory, so a
//! query pays neither. Every API request must carry the token (`Authorization: Bearer TOKEN`, the
//! scheme in any case) or the session cookie that token was exchanged for; anything else gets
//! 401. The token is random from the operating system's generator unless given, and the server
//! refuses to start without one rather than run with a guessable token. The UI's own files are
//! public (a page without the token shows how to get in). The listener binds 127.0.0.1 unless told
//! otherwise.
//!
//! Why a cookie, and why the server proves itself: a browser page opened as `/?token=T` hands the
//! token over once (`POST /api/session`) for an HttpOnly, SameSite=Strict cookie and forgets it, so
//! no script, history entry or session file keeps the token, and a document opened by address
//! (`/api/file`, sandboxed) is fetched with the cookie instead of a same-origin `blob:` page.
//! Cookies are sent to whatever answers on the address later, and after this server stops another
//! local user may bind its port: so before the UI sends anything credentialed to a server it has
//! not yet checked (at start, after any dropped connection), it asks `GET /api/hello?challenge=N`
//! without credentials, and the server answers with an HMAC of the challenge under a key derived
//! from the token (the `proof_key` the exchange gave the page; the key itself opens nothing). A
//! server that cannot answer is not reconnected to.
//!
//! Why a Host allowlist on every route: a web page on another site can point its own DNS name at
//! 127.0.0.1 (DNS rebinding) and then talk to this server as same-origin, reading the UI and
//! probing the API. Its requests carry that foreign name in `Host`, so only IP literals,
//! `localhost` and names given with `--allow-host` are answered; anything else gets 421.
//!
//! Why limits and cancellation: one request must not hold the machine. Uploads are streamed to
//! disk up to `--max-upload-mib` (413 past it); `/v1/embeddings` takes at most 2,048 inputs
//! (OpenAI's limit) and 8 MiB of text, and when its client hangs up the request's sequences still
//! queued are cancelled (hyper drops the handler of a closed HTTP/1 connection, and a guard in the
//! handler cancels on drop), so abandoned work does not keep the interactive lane busy.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::uri::Authority;
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use futures_util::TryStreamExt;
use parking_lot::Mutex;
use serde::Deserialize;
use tokio_util::io::{StreamReader, SyncIoBridge};
use warpfold_app::ask::{AskEvent, AskRequest, AskSink};
use warpfold_app::served::ServedBody;
use warpfold_app::{day_start, inbox, App, AppError, Filter, LibraryOrder, LibraryQuery, Origin, SearchOptions};
use warpfold_engine::embed::EmbedError;
use warpfold_engine::scheduler::Cancel;
use warpfold_engine::Lane;

/// How the server listens and whom it answers.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Where to listen (loopback unless the user says otherwise).
    pub addr: SocketAddr,
    /// The token clients must send; `None`: a random one from the operating system, printed.
    pub token: Option<String>,
    /// Host names answered besides IP literals and localhost.
    pub allowed_hosts: Vec<String>,
    /// The largest upload taken, in bytes (413 past it).
    pub max_upload_bytes: u64,
}

/// Serves until stopped: the token first (from `random`, the operating system's generator, unless
/// given: without one nothing is loaded or created), then the app `start_app` builds, then the
/// router on `options.addr`.
pub fn serve(
    options: &ServerOptions,
    random: impl FnOnce(&mut [u8]) -> Result<(), getrandom::Error>,
    start_app: impl FnOnce() -> Result<App>,
) -> Result<()> {
    let token = server_token(options.token.as_deref(), random)?;
    let app = start_app()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(options.addr).await.with_context(|| format!("listening on {}", options.addr))?;
        let addr = listener.local_addr()?;
        let state = Arc::new(AppState {
            credentials: Credentials::new(&token, addr.port()),
            app,
            allowed_hosts: options.allowed_hosts.clone(),
            max_upload_bytes: options.max_upload_bytes,
        });
        println!("warpfold serve: listening on http://{addr}");
        if options.token.is_none() {
            println!("token: {token}  (clients send `Authorization: Bearer {token}`; open http://{addr}/?token={token} in a browser)");
        }
        use std::io::Write;
        std::io::stdout().flush()?;
        axum::serve(listener, router(state)).await.context("serving")
    })
}

/// What the token opens, and what proves this server holds it.
struct Credentials {
    token: String,
    /// The session cookie's name: with the port in it, since browsers send a host's cookies to
    /// every port of it, and two servers on one machine must not overwrite each other's.
    cookie_name: String,
    /// The session cookie's value: derived from the token, so a restart with the same token keeps
    /// the browser signed in, and a new token signs it out.
    session: String,
    /// The key this server proves itself with ([`hello`]); given to a page at the exchange.
    proof_key: [u8; 32],
}

impl Credentials {
    fn new(token: &str, port: u16) -> Self {
        Credentials {
            token: token.to_string(),
            cookie_name: format!("warpfold_session_{port}"),
            session: hex(&hmac_sha256(token.as_bytes(), b"warpfold session cookie")),
            proof_key: hmac_sha256(token.as_bytes(), b"warpfold server proof key"),
        }
    }

    /// Whether `request` carries the token or this server's session cookie; the reason when not.
    fn check(&self, request: &Request) -> Result<(), &'static str> {
        let headers = request.headers();
        if let Some(given) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_token) {
            return if same(given, &self.token) { Ok(()) } else { Err("wrong token") };
        }
        let cookies = headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';'));
        let mut stale = false;
        for (name, value) in cookies.filter_map(|c| c.trim().split_once('=')) {
            if name == self.cookie_name {
                if same(value, &self.session) {
                    return Ok(());
                }
                stale = true;
            }
        }
        Err(if stale {
            "the session cookie is from another token: open the page with the new one"
        } else {
            "missing token: send `Authorization: Bearer TOKEN`"
        })
    }
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct AppState {
    credentials: Credentials,
    app: App,
    /// Host names answered besides IP literals and localhost (`--allow-host`).
    allowed_hosts: Vec<String>,
    max_upload_bytes: u64,
}

/// OpenAI's limit on inputs in one embeddings request.
const MAX_INPUTS: usize = 2048;
/// Text in one embeddings request: 2,048 inputs of 4 KiB, about what the longest input a
/// 512-token model takes runs to.
const MAX_INPUT_BYTES: usize = 8 << 20;
/// The JSON body of an embeddings request: the text above, escaped (413 past it).
const MAX_EMBEDDINGS_BODY: usize = 16 << 20;

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
        AppError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
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

/// The token clients must send: the one given, else 24 bytes from `fill` (the operating system's
/// generator) as 48 hex digits. Without a generator there is no token, and no server: a token of
/// zeros would let anyone in.
pub fn server_token(given: Option<&str>, fill: impl FnOnce(&mut [u8]) -> Result<(), getrandom::Error>) -> Result<String> {
    if let Some(token) = given {
        if token.trim().is_empty() {
            bail!("the token (--token or WARPFOLD_TOKEN) is empty");
        }
        return Ok(token.to_string());
    }
    let mut bytes = [0u8; 24];
    fill(&mut bytes).map_err(|e| {
        anyhow!(
            "the operating system's random number generator failed ({e}): refusing to start without a secret token (give one with --token)"
        )
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Constant-time comparison, so the token cannot be guessed byte by byte from response times.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn unauthorized(message: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(serde_json::json!({ "error": { "kind": "unauthorized", "message": message, "type": "invalid_request_error" } })),
    )
        .into_response()
}

/// The token of an `Authorization: Bearer TOKEN` header; the scheme is case-insensitive (RFC 9110).
fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(|c: char| c.is_ascii_whitespace())?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

async fn require_token(State(state): State<Shared>, request: Request, next: Next) -> Response {
    match state.credentials.check(&request) {
        Ok(()) => next.run(request).await,
        Err(reason) => unauthorized(reason),
    }
}

/// `POST /api/session` (with the token): the session cookie, and the key the page checks this
/// server with before it sends the cookie again after a dropped connection.
async fn start_session(State(state): State<Shared>) -> Response {
    let c = &state.credentials;
    let cookie = format!("{}={}; Path=/; HttpOnly; SameSite=Strict", c.cookie_name, c.session);
    ([(header::SET_COOKIE, cookie)], Json(serde_json::json!({ "proof_key": hex(&c.proof_key) }))).into_response()
}

/// `DELETE /api/session`: signs this browser out (the cookie is cleared).
async fn end_session(State(state): State<Shared>) -> Response {
    let cookie = format!("{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0", state.credentials.cookie_name);
    ([(header::SET_COOKIE, cookie)], StatusCode::NO_CONTENT).into_response()
}

#[derive(Deserialize)]
struct HelloQuery {
    challenge: String,
}

/// `GET /api/hello?challenge=HEX` (public): proves this server holds the token, by an HMAC of the
/// client's fresh challenge (16 to 64 bytes, as hex) under the proof key.
async fn hello(State(state): State<Shared>, query: Result<Query<HelloQuery>, axum::extract::rejection::QueryRejection>) -> Response {
    let Ok(Query(HelloQuery { challenge })) = query else { return error(StatusCode::BAD_REQUEST, "expected ?challenge=HEX") };
    let bytes: Option<Vec<u8>> = (challenge.len() % 2 == 0)
        .then(|| (0..challenge.len()).step_by(2).map(|i| u8::from_str_radix(challenge.get(i..i + 2)?, 16).ok()).collect())
        .flatten();
    match bytes {
        Some(bytes) if (16..=64).contains(&bytes.len()) => {
            Json(serde_json::json!({ "server": "warpfold", "proof": hex(&hmac_sha256(&state.credentials.proof_key, &bytes)) }))
                .into_response()
        }
        _ => error(StatusCode::BAD_REQUEST, "the challenge must be 16 to 64 bytes written as hex digits"),
    }
}

/// Is `host` (a `Host` header: a name or an IP address, and maybe a port) one this server answers
/// to: an IP literal, `localhost`, or a name in `allowed`?
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let Ok(authority) = host.parse::<Authority>() else { return false };
    let name = authority.host();
    let name = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
    name.parse::<IpAddr>().is_ok() || name.eq_ignore_ascii_case("localhost") || allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

async fn require_known_host(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).map(str::to_string);
    match host {
        Some(host) if host_allowed(&host, &state.allowed_hosts) => next.run(request).await,
        Some(host) => misdirected(&format!(
            "this server does not answer to the host {host:?} (a guard against DNS rebinding): use its IP address or localhost, or start it with --allow-host NAME"
        )),
        None => misdirected("the request names no host (send a Host header)"),
    }
}

fn misdirected(message: &str) -> Response {
    (
        StatusCode::MISDIRECTED_REQUEST,
        Json(serde_json::json!({ "error": { "kind": "misdirected", "message": message, "type": "invalid_request_error" } })),
    )
        .into_response()
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
    #[serde(default)]
    encoding_format: Option<String>,
}

/// How vectors are written in the answer, as OpenAI's `encoding_format` says.
#[derive(Debug, Clone, Copy, PartialEq)]
enum EncodingFormat {
    /// A JSON array of numbers (the default).
    Float,
    /// Base64 of the vector's little-endian f32 bytes: a third of the size, nothing lost.
    Base64,
}

impl EncodingFormat {
    fn parse(name: Option<&str>) -> Result<Self, String> {
        match name {
            None | Some("float") => Ok(EncodingFormat::Float),
            Some("base64") => Ok(EncodingFormat::Base64),
            Some(other) => Err(format!("\"encoding_format\" must be \"float\" or \"base64\", not {other:?}")),
        }
    }

    fn encode(self, vector: &[f32]) -> serde_json::Value {
        match self {
            EncodingFormat::Float => serde_json::json!(vector),
            EncodingFormat::Base64 => {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        }
    }
}

/// Inputs one request may carry: at least one, at most [`MAX_INPUTS`] and [`MAX_INPUT_BYTES`].
fn check_inputs(texts: &[String]) -> Result<(), String> {
    if texts.is_empty() {
        return Err("\"input\" is empty".into());
    }
    if texts.len() > MAX_INPUTS {
        return Err(format!(
            "\"input\" has {} items; at most {MAX_INPUTS} are taken per request (send the rest in more requests)",
            texts.len()
        ));
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    if bytes > MAX_INPUT_BYTES {
        return Err(format!("\"input\" holds {bytes} bytes of text; at most {} MiB are taken per request", MAX_INPUT_BYTES >> 20));
    }
    Ok(())
}

/// Whether a request's client has gone, and how to cancel what it queued: shared by the handler
/// (which is dropped when the client hangs up) and the blocking task that submits and waits (which
/// is not, and may not have submitted yet when that happens).
#[derive(Clone, Default)]
struct Abandonment(Arc<Mutex<AbandonState>>);

#[derive(Default)]
struct AbandonState {
    abandoned: bool,
    cancel: Option<Cancel>,
}

impl Abandonment {
    /// Records the request's queued work; when the client has already gone, cancels it and says so.
    fn attach(&self, cancel: Cancel) -> bool {
        let mut state = self.0.lock();
        if state.abandoned {
            cancel.cancel();
            return false;
        }
        state.cancel = Some(cancel);
        true
    }

    fn is_abandoned(&self) -> bool {
        self.0.lock().abandoned
    }

    fn abandon(&self) {
        let mut state = self.0.lock();
        state.abandoned = true;
        if let Some(cancel) = state.cancel.take() {
            cancel.cancel();
        }
    }
}

/// Abandons the request when dropped before [`AbandonOnDrop::answered`]: the handler's future was
/// dropped, which hyper does when the client closes the connection.
struct AbandonOnDrop {
    abandonment: Abandonment,
    answered: bool,
}

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        if !self.answered {
            self.abandonment.abandon();
        }
    }
}

/// Each input's vector (or why not), and the tokens embedded.
type Embedded = (Vec<Result<Vec<f32>, EmbedError>>, usize);

/// Tokenizes and queues `texts` on the interactive lane and waits for them, unless the client has
/// gone (None). Blocking.
fn embed_for(app: &App, texts: &[String], abandonment: &Abandonment) -> Option<Embedded> {
    if abandonment.is_abandoned() {
        return None;
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let pending = app.embedder().submit_texts(Lane::Interactive, &refs);
    if !abandonment.attach(pending.canceller()) {
        return None;
    }
    let tokens = pending.tokens.iter().sum();
    Some((pending.wait(), tokens))
}

async fn embeddings(
    State(state): State<Shared>,
    body: Result<Json<EmbeddingsRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(request) = match body {
        Ok(body) => body,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return error(e.status(), format!("the request body is larger than the limit of {} MiB", MAX_EMBEDDINGS_BODY >> 20))
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("expected {{\"input\": string or [string]}}: {e}")),
    };
    if let Some(model) = &request.model {
        if model != state.app.model() {
            return error(StatusCode::BAD_REQUEST, format!("this server embeds with {}, not {model}", state.app.model()));
        }
    }
    let format = match EncodingFormat::parse(request.encoding_format.as_deref()) {
        Ok(format) => format,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let texts = match request.input {
        Input::One(t) => vec![t],
        Input::Many(v) => v,
    };
    if let Err(message) = check_inputs(&texts) {
        return error(StatusCode::BAD_REQUEST, message);
    }
    let abandonment = Abandonment::default();
    let mut guard = AbandonOnDrop { abandonment: abandonment.clone(), answered: false };
    let worker = state.clone();
    let result = tokio::task::spawn_blocking(move || embed_for(&worker.app, &texts, &abandonment)).await;
    guard.answered = true;
    let Ok(Some((results, tokens))) = result else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "the embedding task failed");
    };
    let mut data = Vec::with_capacity(results.len());
    for (index, r) in results.into_iter().enumerate() {
        match r {
            Ok(v) => data.push(serde_json::json!({ "object": "embedding", "index": index, "embedding": format.encode(&v) })),
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
    #[serde(flatten)]
    filter: FilterParams,
    /// Rank by score alone (by default one document takes at most two of the first five places).
    #[serde(default)]
    all_from_document: bool,
}

/// Which documents a search or the library takes, as query parameters.
#[derive(Deserialize)]
struct FilterParams {
    /// Only documents inside this folder.
    folder: Option<String>,
    /// Only these file types: extensions, comma-separated.
    #[serde(rename = "type")]
    types: Option<String>,
    /// Only documents modified on or after / before this day (YYYY-MM-DD, UTC).
    after: Option<String>,
    before: Option<String>,
    /// Only chunks in this language (ISO 639-3: deu, fra, jpn; as the state's `languages` list).
    language: Option<String>,
}

impl FilterParams {
    fn filter(&self) -> Result<Filter, AppError> {
        let day = |name: &str, value: &Option<String>| {
            value
                .as_deref()
                .filter(|v| !v.trim().is_empty())
                .map(|v| day_start(v).map_err(|e| AppError::InvalidInput(format!("{name}: {e}"))))
                .transpose()
        };
        let types =
            self.types.as_deref().unwrap_or_default().split(',').map(str::trim).filter(|t| !t.is_empty()).map(String::from).collect();
        Ok(Filter {
            folder: self.folder.as_deref().map(str::trim).filter(|f| !f.is_empty()).map(Into::into),
            extensions: types,
            modified_from: day("after", &self.after)?,
            modified_before: day("before", &self.before)?,
            language: self.language.as_deref().map(str::trim).filter(|l| !l.is_empty()).map(String::from),
        })
    }
}

/// `GET /api/library`: the filters of a search, an order and a page.
#[derive(Deserialize)]
struct LibraryParams {
    #[serde(flatten)]
    filter: FilterParams,
    #[serde(default)]
    sort: LibraryOrder,
    #[serde(default)]
    desc: bool,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

async fn library(State(state): State<Shared>, query: Result<Query<LibraryParams>, axum::extract::rejection::QueryRejection>) -> Response {
    let Ok(Query(p)) = query else {
        return app_error(AppError::InvalidInput(
            "expected ?[folder=DIR][&type=pdf,md][&after=YYYY-MM-DD][&before=YYYY-MM-DD][&language=deu][&sort=name|modified|size|pages|indexed][&desc=true][&offset=N][&limit=N]".into(),
        ));
    };
    let filter = match p.filter.filter() {
        Ok(filter) => filter,
        Err(e) => return app_error(e),
    };
    let query = LibraryQuery { filter, order: p.sort, descending: p.desc, offset: p.offset, limit: p.limit };
    blocking(move || state.app.library(&query)).await
}

impl SearchQuery {
    fn options(&self) -> Result<SearchOptions, AppError> {
        Ok(SearchOptions {
            per_document_in_top_five: if self.all_from_document { None } else { SearchOptions::default().per_document_in_top_five },
            filter: self.filter.filter()?,
        })
    }
}

fn default_k() -> usize {
    5
}

async fn search(State(state): State<Shared>, query: Result<Query<SearchQuery>, axum::extract::rejection::QueryRejection>) -> Response {
    let Ok(Query(query)) = query else {
        return app_error(AppError::InvalidInput(
            "expected ?q=QUERY[&k=N][&folder=DIR][&type=pdf,md][&after=YYYY-MM-DD][&before=YYYY-MM-DD][&all_from_document=true]".into(),
        ));
    };
    let options = match query.options() {
        Ok(options) => options,
        Err(e) => return app_error(e),
    };
    blocking(move || Ok(serde_json::json!({ "hits": state.app.search_with(&query.q, query.k, &options)? }))).await
}

async fn app_state(State(state): State<Shared>) -> Response {
    blocking(move || Ok(state.app.state())).await
}

async fn settings_view(State(state): State<Shared>) -> Response {
    blocking(move || state.app.settings_view()).await
}

/// `PUT /api/settings` with the settings to save (docs/settings.md keys; a key left out takes its
/// default): checked, written to settings.json, applied at the next start.
async fn save_settings(
    State(state): State<Shared>,
    body: Result<Json<warpfold_app::settings::Settings>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match body {
        Ok(Json(body)) => body,
        Err(e) => return app_error(AppError::InvalidInput(format!("expected the settings as JSON (docs/settings.md): {e}"))),
    };
    blocking(move || state.app.save_settings(body)).await
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
    blocking(move || state.app.add_folder(&body.path, Origin::User)).await
}

#[derive(Deserialize)]
struct RemoveFolderBody {
    path: String,
    /// Forget its documents too (no text of them left in the index).
    #[serde(default)]
    forget: bool,
}

/// `DELETE /api/folders {"path", "forget"?}`: the folders left; with `forget`, each document
/// forgotten is also announced by a `removed` event.
async fn remove_folder(
    State(state): State<Shared>,
    body: Result<Json<RemoveFolderBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Ok(Json(body)) = body else {
        return app_error(AppError::InvalidInput("expected {\"path\": FOLDER, \"forget\": true|false}".into()));
    };
    blocking(move || state.app.remove_folder_and(&body.path, body.forget).map(|(folders, _)| folders)).await
}

/// `POST /api/forget {"paths": [..]}`: documents (or folders of them) forgotten for good.
async fn forget(State(state): State<Shared>, body: Result<Json<PathsBody>, axum::extract::rejection::JsonRejection>) -> Response {
    let Ok(Json(body)) = body else { return app_error(AppError::InvalidInput("expected {\"paths\": [PATH, ...]}".into())) };
    blocking(move || Ok(serde_json::json!({ "forgotten": state.app.forget(&body.paths)? }))).await
}

async fn add_paths(State(state): State<Shared>, body: Result<Json<PathsBody>, axum::extract::rejection::JsonRejection>) -> Response {
    let Ok(Json(body)) = body else { return app_error(AppError::InvalidInput("expected {\"paths\": [PATH, ...]}".into())) };
    blocking(move || Ok(serde_json::json!({ "queued": state.app.add_paths(&body.paths, Origin::User)? }))).await
}

/// Reads a document, or the documents under a folder, again, changed or not.
async fn reindex(State(state): State<Shared>, body: Result<Json<PathBody>, axum::extract::rejection::JsonRejection>) -> Response {
    let Ok(Json(body)) = body else { return app_error(AppError::InvalidInput("expected {\"path\": FILE_OR_FOLDER}".into())) };
    blocking(move || Ok(serde_json::json!({ "queued": state.app.reindex(&body.path, Origin::User)? }))).await
}

/// Pauses indexing (the files being read finish; nothing new starts) or resumes it. The body is
/// JSON (`{}`), as for every other change: a plain form posted by another page on this machine
/// cannot send that type, so it cannot pause the app with the person's cookie.
async fn pause(State(state): State<Shared>, body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>) -> Response {
    set_paused(&state, body.is_ok(), true)
}

async fn resume(State(state): State<Shared>, body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>) -> Response {
    set_paused(&state, body.is_ok(), false)
}

fn set_paused(state: &Shared, json: bool, paused: bool) -> Response {
    if !json {
        return app_error(AppError::InvalidInput("expected a JSON body ({}) with Content-Type: application/json".into()));
    }
    Json(serde_json::json!({ "paused": state.app.set_paused(paused) })).into_response()
}

async fn summarize(State(state): State<Shared>, body: Result<Json<PathsBody>, axum::extract::rejection::JsonRejection>) -> Response {
    let Ok(Json(body)) = body else { return app_error(AppError::InvalidInput("expected {\"paths\": [PATH, ...]}".into())) };
    blocking(move || Ok(serde_json::json!({ "queued": state.app.summarize(&body.paths)? }))).await
}

#[derive(Deserialize)]
struct NameQuery {
    name: String,
}

/// The body's declared length, if any (`Content-Length`).
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// Streams the body into the inbox (never all of it in memory); a body declared larger than the
/// limit is refused before a byte of it is read.
async fn upload(
    State(state): State<Shared>,
    query: Result<Query<NameQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Ok(Query(query)) = query else { return app_error(AppError::InvalidInput("expected ?name=FILE.pdf".into())) };
    let max = state.max_upload_bytes;
    if declared_length(&headers).is_some_and(|length| length > max) {
        return app_error(inbox::too_large(max));
    }
    let reader = SyncIoBridge::new(StreamReader::new(body.into_data_stream().map_err(std::io::Error::other)));
    blocking(move || Ok(serde_json::json!({ "queued": 1, "path": state.app.upload(&query.name, reader, max)? }))).await
}

async fn document(State(state): State<Shared>, query: Result<Query<PathBody>, axum::extract::rejection::QueryRejection>) -> Response {
    let Ok(Query(query)) = query else { return app_error(AppError::InvalidInput("expected ?path=FILE".into())) };
    blocking(move || state.app.document(&query.path)).await
}

async fn file(State(state): State<Shared>, query: Result<Query<PathBody>, axum::extract::rejection::QueryRejection>) -> Response {
    let Ok(Query(query)) = query else { return app_error(AppError::InvalidInput("expected ?path=FILE".into())) };
    let path = query.path.clone();
    match tokio::task::spawn_blocking(move || state.app.served_document(&query.path)).await {
        Ok(Ok(served)) => {
            let (length, body) = match served.body {
                // Streamed from the checked handle, in blocks: a file of gigabytes costs no more
                // memory than a small one. A file that grows meanwhile is sent as long as it was.
                ServedBody::File(file, size) => {
                    use tokio::io::AsyncReadExt;
                    (size, Body::from_stream(tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file).take(size))))
                }
                ServedBody::Bytes(bytes) => (bytes.len() as u64, Body::from(bytes)),
            };
            // A document opened by address runs nothing: sandboxed, no scripts, no requests, never
            // sniffed into another type, and named as the file it is.
            let name = std::path::Path::new(&path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let encoded: String = name
                .bytes()
                .map(|b| if b.is_ascii_alphanumeric() || b"-._".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
                .collect();
            let disposition = if served.download { "attachment" } else { "inline" };
            (
                [
                    (header::CONTENT_TYPE, served.content_type.to_string()),
                    (header::CONTENT_LENGTH, length.to_string()),
                    (header::CONTENT_SECURITY_POLICY, "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'".to_string()),
                    (header::CONTENT_DISPOSITION, format!("{disposition}; filename*=UTF-8''{encoded}")),
                ],
                body,
            )
                .into_response()
        }
        Ok(Err(e)) => app_error(e),
        Err(_) => app_error(AppError::Internal("the request's task failed".into())),
    }
}

/// A question answered from the index, streamed as server-sent events: `passages` (found at once),
/// `status` while the chat model loads or reads, then `answer` (the checked answer with its
/// citations) or `error`, which ends the stream. A question that cannot be asked (empty, too long,
/// nothing indexed) is answered with its error and status instead of a stream.
async fn ask(State(state): State<Shared>, body: Result<Json<AskRequest>, axum::extract::rejection::JsonRejection>) -> Response {
    let Ok(Json(request)) = body else {
        return app_error(AppError::InvalidInput(
            "expected {\"question\": TEXT, \"passages\"?: N, \"earlier\"?: [{\"question\": TEXT, \"answer\": TEXT}]}".into(),
        ));
    };
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel::<AskEvent>();
    let sink: AskSink = Box::new(move |event| drop(sender.send(event)));
    let app = state.app.clone();
    match tokio::task::spawn_blocking(move || app.ask(request, sink)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return app_error(e),
        Err(_) => return app_error(AppError::Internal("the request's task failed".into())),
    }
    // the stream ends when the question's sink goes, after its answer or error
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let event = receiver.recv().await?;
        let data = serde_json::to_string(&event)
            .unwrap_or_else(|e| format!("{{\"event\":\"error\",\"error\":{{\"kind\":\"internal\",\"message\":\"{e}\"}}}}"));
        Some((Ok::<_, std::convert::Infallible>(Event::default().event(event.name()).data(data)), receiver))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(15)).text("ping")).into_response()
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
    metric(
        "padded_equivalent_tokens_total",
        "counter",
        "Tokens padded batches of the same sequences would have computed.",
        s.padded_equivalent_tokens as f64,
    );
    metric("failed_bins_total", "counter", "Bins with at least one failed sequence.", s.failed_bins as f64);
    metric("backend_busy_seconds_total", "counter", "Time the model spent running bins.", s.backend_busy_seconds);
    metric("oom_splits_total", "counter", "Bins split after running out of device memory.", s.oom_splits as f64);
    metric(
        "device_starved_seconds_total",
        "counter",
        "Seconds a device waited for a bin while sequences waited to be packed.",
        s.starved_seconds,
    );
    metric("cancelled_sequences_total", "counter", "Sequences never run because their client went away.", s.cancelled_sequences as f64);
    metric("bin_fill_ratio", "gauge", "Mean share of a bin's capacity that was computed.", s.fill(engine.config().bin_tokens));
    metric(
        "bulk_bin_fill_ratio",
        "gauge",
        "Mean share of a bin's capacity computed by the bulk lane (indexing), without the bins that answered queries at once.",
        s.bulk_fill(engine.config().bin_tokens),
    );
    metric("interactive_bins_total", "counter", "Bins packed at once for queries (the interactive lane).", s.interactive_bins as f64);
    metric("bin_capacity_tokens", "gauge", "Tokens one bin holds (the VRAM probe's answer on a GPU).", engine.config().bin_tokens as f64);
    let c = &view.queue.counts;
    metric("queue_depth", "gauge", "Files waiting, extracting or embedding.", (c.waiting + c.extracting + c.embedding) as f64);
    metric("documents_failed", "gauge", "Files that could not be indexed.", c.failed as f64);
    let rate = view.samples.last().map_or(0.0, |x| x.tokens_per_s);
    metric("tokens_per_second", "gauge", "Real tokens embedded per second over the last sample.", rate);
    if view.summaries.is_some() {
        let t = state.app.summary_totals();
        metric("summary_documents_total", "counter", "Documents summarized.", t.documents as f64);
        metric("summary_prompt_tokens_total", "counter", "Prompt tokens the chat model prefilled.", t.prompt_tokens as f64);
        metric("summary_prefill_seconds_total", "counter", "Time the chat model spent in prefills.", t.prefill_seconds);
        metric("summary_decode_tokens_total", "counter", "Tokens the chat model generated in decode steps.", t.decode_tokens as f64);
        metric("summary_decode_steps_total", "counter", "Decode steps the chat model ran.", t.decode_steps as f64);
        metric("summary_decode_seconds_total", "counter", "Time the chat model spent in decode steps.", t.decode_seconds);
        metric("summary_model_seconds_total", "counter", "Time in the chat model, tokenizing included.", t.model_seconds);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

#[cfg(ui_built)]
mod ui_files {
    pub const INDEX: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../ui/dist/index.html"));
    pub const JS: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../ui/dist/app.js"));
    pub const CSS: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../ui/dist/app.css"));
}

#[cfg(not(ui_built))]
mod ui_files {
    pub const INDEX: &str = "<!doctype html><title>warpfold</title><p>This warpfold was built without its web UI: run \
        <code>cd ui &amp;&amp; npm ci &amp;&amp; npm run build</code> and build again. The API is up.</p>";
    pub const JS: &str = "";
    pub const CSS: &str = "";
}

/// Every API answer: never stored by a browser or proxy (search hits and documents are the user's
/// text; the browser's disk cache would keep them), and never sniffed into another type.
async fn api_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, header::HeaderValue::from_static("nosniff"));
    response
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
        .route("/v1/embeddings", post(embeddings).layer(DefaultBodyLimit::max(MAX_EMBEDDINGS_BODY)))
        .route("/api/state", get(app_state))
        .route("/api/settings", get(settings_view).put(save_settings))
        .route("/api/folders", post(add_folder).delete(remove_folder))
        .route("/api/paths", post(add_paths))
        .route("/api/forget", post(forget))
        .route("/api/summarize", post(summarize))
        .route("/api/reindex", post(reindex))
        .route("/api/pause", post(pause))
        .route("/api/resume", post(resume))
        .route("/api/upload", post(upload))
        .route("/api/search", get(search))
        .route("/api/library", get(library))
        .route("/api/ask", post(ask))
        .route("/api/document", get(document))
        .route("/api/file", get(file))
        .route("/api/events", get(events))
        .route("/api/status", get(status))
        .route("/metrics", get(metrics))
        .route("/api/session", post(start_session).delete(end_session))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .route("/api/hello", get(hello))
        .layer(middleware::from_fn(api_headers))
        .with_state(state.clone());
    Router::new()
        .route("/", get(|| async { static_file(ui_files::INDEX, "text/html; charset=utf-8") }))
        .route("/index.html", get(|| async { static_file(ui_files::INDEX, "text/html; charset=utf-8") }))
        .route("/app.js", get(|| async { static_file(ui_files::JS, "text/javascript; charset=utf-8") }))
        .route("/app.css", get(|| async { static_file(ui_files::CSS, "text/css; charset=utf-8") }))
        .merge(api)
        .layer(middleware::from_fn_with_state(state, require_known_host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(_: &mut [u8]) -> Result<(), getrandom::Error> {
        Err(getrandom::Error::UNSUPPORTED)
    }

    #[test]
    fn a_given_token_needs_no_generator_and_an_empty_one_is_refused() {
        assert_eq!(server_token(Some("s3cret"), failing).unwrap(), "s3cret");
        assert!(server_token(Some(" "), failing).unwrap_err().to_string().contains("empty"));
        let err = server_token(None, failing).unwrap_err().to_string();
        assert!(err.contains("random number generator failed") && err.contains("refusing to start"), "{err}");
    }

    #[test]
    fn random_tokens_are_48_hex_digits_fresh_each_time_and_never_zeros() {
        let a = server_token(None, getrandom::fill).unwrap();
        let b = server_token(None, getrandom::fill).unwrap();
        for token in [&a, &b] {
            assert_eq!(token.len(), 48, "{token}");
            assert!(token.bytes().all(|c| c.is_ascii_hexdigit()), "{token}");
            assert!(token.bytes().any(|c| c != b'0'), "{token}");
        }
        assert_ne!(a, b);
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for header in ["Bearer abc", "bearer abc", "BEARER abc", "  Bearer   abc  ", "bEaReR\tabc"] {
            assert_eq!(bearer_token(header), Some("abc"), "{header:?}");
        }
        for header in ["Basic abc", "Bearer", "Bearer   ", "Bearerabc", "abc", ""] {
            assert_eq!(bearer_token(header), None, "{header:?}");
        }
    }

    #[test]
    fn only_ip_literals_localhost_and_allowed_names_are_answered() {
        let allowed = vec!["warpfold.lan".to_string()];
        for host in [
            "127.0.0.1:8787",
            "127.0.0.1",
            "[::1]:8787",
            "[::1]",
            "10.1.2.3:80",
            "localhost:8787",
            "LocalHost",
            "warpfold.lan:8787",
            "WARPFOLD.LAN",
        ] {
            assert!(host_allowed(host, &allowed), "{host}");
        }
        for host in ["evil.example", "evil.example:8787", "localhost.evil.example", "127.0.0.1.nip.io:8787", "lan", "", "[::1", "a b"] {
            assert!(!host_allowed(host, &allowed), "{host}");
        }
        assert!(!host_allowed("warpfold.lan", &[]), "names must be allowed explicitly");
    }

    #[test]
    fn base64_embeddings_are_the_little_endian_f32_bytes_and_unknown_formats_are_refused() {
        use base64::Engine as _;
        let vector = [1.0f32, -2.5, 3.25e-7];
        let encoded = EncodingFormat::parse(Some("base64")).unwrap().encode(&vector);
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded.as_str().unwrap()).unwrap();
        let decoded: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(decoded, vector);
        assert_eq!(EncodingFormat::parse(None).unwrap().encode(&vector), serde_json::json!(vector));
        assert_eq!(EncodingFormat::parse(Some("float")), Ok(EncodingFormat::Float));
        assert!(EncodingFormat::parse(Some("int8")).unwrap_err().contains("\"float\" or \"base64\""));
    }

    #[test]
    fn embeddings_inputs_are_capped_in_number_and_size() {
        assert!(check_inputs(&[]).unwrap_err().contains("empty"));
        assert_eq!(check_inputs(&vec!["x".to_string(); MAX_INPUTS]), Ok(()));
        assert!(check_inputs(&vec!["x".to_string(); MAX_INPUTS + 1]).unwrap_err().contains("at most 2048"));
        let big = vec!["x".repeat(MAX_INPUT_BYTES / 2 + 1); 2];
        assert!(check_inputs(&big).unwrap_err().contains("at most 8 MiB"));
    }

    #[test]
    fn hmac_sha256_gives_rfc_4231s_answer() {
        // RFC 4231, test case 1.
        let mac = hmac_sha256(&[0x0b; 20], b"Hi There");
        assert_eq!(hex(&mac), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    }

    fn with_headers(headers: &[(&str, &str)]) -> Request {
        let mut request = Request::builder().uri("/api/state");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(Body::empty()).unwrap()
    }

    #[test]
    fn the_token_or_this_ports_cookie_for_this_token_opens_the_api() {
        let c = Credentials::new("s3cret", 8787);
        let ours = format!("warpfold_session_8787={}", c.session);
        assert_eq!(c.check(&with_headers(&[("authorization", "Bearer s3cret")])), Ok(()));
        assert_eq!(c.check(&with_headers(&[("cookie", &format!("a=b; {ours}; c=d"))])), Ok(()));
        assert_eq!(c.check(&with_headers(&[("cookie", "a=b"), ("cookie", &ours)])), Ok(()), "cookies in two headers");
        assert_eq!(c.check(&with_headers(&[("authorization", "Bearer nope"), ("cookie", &ours)])), Err("wrong token"));
        let other_port = format!("warpfold_session_8788={}", c.session);
        assert!(c.check(&with_headers(&[("cookie", &other_port)])).unwrap_err().starts_with("missing token"));
        let other_token = format!("warpfold_session_8787={}", Credentials::new("other", 8787).session);
        assert!(c.check(&with_headers(&[("cookie", &other_token)])).unwrap_err().contains("another token"));
        assert_ne!(c.session, "s3cret");
        assert_ne!(c.proof_key, Credentials::new("other", 8787).proof_key);
        assert_eq!(c.proof_key, Credentials::new("s3cret", 9000).proof_key, "the proof follows the token, not the port");
    }
}
