//! `warpfold mcp`: the index served to AI assistants over the Model Context Protocol (MCP).
//!
//! Assistants that run on the desktop (Claude Desktop, Jan, LM Studio, Open WebUI through its
//! mcpo bridge) start local tools as child processes and speak MCP to them: JSON-RPC 2.0, one
//! JSON message a line, on the child's stdin and stdout. So this front is a command, not a port:
//! the client starts it when it needs it and it ends when stdin closes.
//!
//! Why it only reads: it serves the index the desktop app and `warpfold serve` keep (index.db in
//! their data folder, unless told otherwise) while they run. It opens it read-only, never moves a
//! file, and hands out text only for paths the index holds, so an assistant can read what the
//! user chose to index and nothing else on the disk. What the app adds meanwhile is searched from
//! the next call on: the index is opened again when SQLite says another connection changed it.
//!
//! Why stdout is taken from everyone else at start: the client parses every line there as a
//! protocol message, and one stray line (a library's warning, a `println!`) would break the
//! connection. File descriptor 1 is pointed at stderr, where the logs go, and protocol messages
//! are written to a private copy of the original stdout.
//!
//! Requests are answered one at a time, in order: the slowest, `ask`, loads the chat model on its
//! first call (seconds) and keeps it; a ping sent meanwhile waits for it.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::{json, Map, Value};
use warpfold_index::filter::Filter;
use warpfold_index::search::{Hit, SearchOptions};
use warpfold_index::store::Store;

use crate::ask::{self, AskIndex, ChatSlot, MissingModel};
use crate::GlobalOptions;

#[derive(Args, Debug)]
pub struct McpArgs {
    /// The index to read. Default: index.db in the data folder, the index the desktop app and
    /// `warpfold serve` keep.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// The app's data folder (its settings name the watched folders); the desktop app and
    /// `warpfold serve` use the same one. Default: $XDG_DATA_HOME/warpfold (~/.local/share/warpfold).
    #[arg(long, env = "WARPFOLD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The chat model the `ask` tool answers with (as for `ask --decoder`); default: the device's.
    /// It must be installed already (`warpfold models fetch`): a client would not wait for a download.
    #[arg(long)]
    pub decoder: Option<PathBuf>,
}

/// The protocol revisions this server speaks, newest first. All of them have the same messages
/// for what it offers (tools and resources without subscriptions); a client asking for another
/// is offered the newest, and decides.
const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The most text one answer carries, in bytes: a whole book would fill an assistant's context
/// (and some clients refuse large messages); the rest is read on with an `offset`.
const MAX_TEXT_BYTES: usize = 100 * 1024;
/// Documents in one page of `resources/list`.
const RESOURCES_PAGE: usize = 1000;
/// How many hits `search` returns without `k`, and at most.
const DEFAULT_HITS: i64 = 5;
const MAX_HITS: i64 = 50;
/// How many passages `ask` reads without `passages`, and at most: each costs the chat model a
/// reading (seconds on a CPU).
const DEFAULT_PASSAGES: i64 = 5;
const MAX_PASSAGES: i64 = 8;
/// The longest query or question taken, in characters.
const MAX_QUESTION_CHARS: i64 = 2_000;
/// What a document's resource URI starts with; the percent-encoded path follows.
const DOCUMENT_URI: &str = "warpfold://document/";

/// JSON-RPC's error codes, and MCP's for a resource that is not there.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;
const RESOURCE_NOT_FOUND: i64 = -32002;

pub fn run(global: &GlobalOptions, args: &McpArgs) -> Result<ExitCode> {
    let data_dir = args.data_dir.clone().unwrap_or_else(warpfold_app::settings::default_data_dir);
    // the name `warpfold serve` and the desktop app give the index in their data folder
    let db = args.db.clone().unwrap_or_else(|| data_dir.join("index.db"));
    let output = protocol_output()?;
    eprintln!("warpfold mcp: serving {} read-only over stdin and stdout", db.display());
    let mut server = McpServer::new(global, db, data_dir, args.decoder.clone());
    serve(std::io::stdin().lock(), output, &mut server)?;
    Ok(ExitCode::SUCCESS)
}

/// Where protocol messages go: a copy of stdout, after stdout itself (file descriptor 1) is
/// pointed at stderr, so that nothing else this process prints can reach the client's parser.
#[cfg(unix)]
fn protocol_output() -> Result<Box<dyn Write>> {
    use std::os::fd::AsFd;
    extern "C" {
        fn dup2(old: std::os::raw::c_int, new: std::os::raw::c_int) -> std::os::raw::c_int;
    }
    std::io::stdout().flush()?;
    let protocol = std::io::stdout().as_fd().try_clone_to_owned()?;
    // SAFETY: dup2 takes two descriptor numbers and touches no memory of ours; 2 and 1 are this
    // process's stderr and stdout, and Rust's `Stdout` keeps using the number 1, now stderr.
    if unsafe { dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(Box::new(std::fs::File::from(protocol)))
}

#[cfg(not(unix))]
fn protocol_output() -> Result<Box<dyn Write>> {
    Ok(Box::new(std::io::stdout()))
}

/// Reads messages a line at a time until stdin closes, writing each response as one line.
fn serve(mut input: impl BufRead, mut output: impl Write, server: &mut McpServer) -> Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let response = match std::str::from_utf8(&line) {
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => server.handle_line(text),
            Err(e) => Some(error_response(Value::Null, PARSE_ERROR, format!("a message is UTF-8 text: {e}"))),
        };
        if let Some(response) = response {
            let mut bytes = serde_json::to_vec(&response).expect("a JSON value serializes");
            bytes.push(b'\n');
            output.write_all(&bytes)?;
            output.flush()?;
        }
    }
}

fn error_response(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message.into() } })
}

/// A request's failure, answered as a JSON-RPC error.
#[derive(Debug)]
struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into() }
    }
}

/// What a tool found, for the assistant to read (`text`) and for programs (`structured`).
struct ToolOutput {
    text: String,
    structured: Option<Value>,
}

impl ToolOutput {
    fn text(text: String) -> ToolOutput {
        ToolOutput { text, structured: None }
    }
}

/// A tool's failure is its result, marked as an error, so the assistant reads why and can try
/// again; only a call the protocol cannot take (no such tool) is a JSON-RPC error.
type ToolResult = std::result::Result<ToolOutput, String>;

pub struct McpServer {
    index: SearchIndex,
    chat: ChatSlot,
    data_dir: PathBuf,
    tools: Vec<Value>,
}

impl McpServer {
    pub fn new(global: &GlobalOptions, db: PathBuf, data_dir: PathBuf, decoder: Option<PathBuf>) -> McpServer {
        McpServer {
            index: SearchIndex { db, global: global.clone(), open: None },
            chat: ChatSlot::new(global, decoder, MissingModel::Refuse),
            data_dir,
            tools: tool_definitions(),
        }
    }

    /// The response to one line from the client, or None for a notification (and for a
    /// response: this server sends no requests, so none is awaited).
    fn handle_line(&mut self, line: &str) -> Option<Value> {
        let message: Value = match serde_json::from_str(line) {
            Ok(message) => message,
            Err(e) => return Some(error_response(Value::Null, PARSE_ERROR, format!("not JSON: {e}"))),
        };
        let Some(message) = message.as_object() else {
            return Some(error_response(Value::Null, INVALID_REQUEST, "a message is a JSON object (MCP has no batches)"));
        };
        let id = message.get("id").cloned();
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Some(error_response(id.unwrap_or(Value::Null), INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\""));
        }
        let method = message.get("method").and_then(Value::as_str);
        match (method, id) {
            // initialized, cancelled (requests are answered in order, so nothing is running by
            // the time a cancellation is read), roots changed: nothing to do
            (Some(_), None) => None,
            (Some(method), Some(id)) if id.is_string() || id.is_i64() || id.is_u64() => {
                let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
                Some(match params.as_object() {
                    Some(params) => match self.request(method, params) {
                        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
                        Err(e) => error_response(id, e.code, e.message),
                    },
                    None => error_response(id, INVALID_PARAMS, "\"params\" must be an object"),
                })
            }
            (Some(_), Some(id)) => Some(error_response(id, INVALID_REQUEST, "\"id\" must be a string or an integer")),
            (None, _) if message.contains_key("result") || message.contains_key("error") => None,
            (None, id) => Some(error_response(id.unwrap_or(Value::Null), INVALID_REQUEST, "a request needs a \"method\"")),
        }
    }

    fn request(&mut self, method: &str, params: &Map<String, Value>) -> std::result::Result<Value, RpcError> {
        match method {
            "initialize" => Ok(initialize_result(params.get("protocolVersion").and_then(Value::as_str))),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({ "tools": self.tools })),
            "tools/call" => {
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| RpcError::new(INVALID_PARAMS, "tools/call needs a \"name\""))?;
                let Some(tool) = self.tools.iter().find(|t| t["name"] == name) else {
                    return Err(RpcError::new(INVALID_PARAMS, format!("no tool named {name:?}; tools/list names them")));
                };
                let schema = tool["inputSchema"].clone();
                let result = match params.get("arguments").unwrap_or(&Value::Null) {
                    Value::Null => self.call_tool(name, &schema, &Map::new()),
                    Value::Object(arguments) => self.call_tool(name, &schema, arguments),
                    _ => Err("the arguments must be a JSON object".to_string()),
                };
                Ok(tool_result(result))
            }
            "resources/list" => {
                let cursor = match params.get("cursor") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(cursor)) => Some(cursor.as_str()),
                    Some(_) => return Err(RpcError::new(INVALID_PARAMS, "\"cursor\" must be a string")),
                };
                if !self.index.db.exists() {
                    // no index yet (the app never ran): nothing to list, which is no error
                    return Ok(json!({ "resources": [] }));
                }
                let store = self.index.store().map_err(|e| RpcError::new(INTERNAL_ERROR, e))?;
                list_resources(&store, cursor, RESOURCES_PAGE).map_err(|e| RpcError::new(INTERNAL_ERROR, e))
            }
            "resources/templates/list" => Ok(json!({ "resourceTemplates": [] })),
            "resources/read" => {
                let uri = params
                    .get("uri")
                    .and_then(Value::as_str)
                    .ok_or_else(|| RpcError::new(INVALID_PARAMS, "resources/read needs a \"uri\""))?;
                let path = document_path(uri).map_err(|e| RpcError::new(INVALID_PARAMS, e))?;
                let store = self.index.store().map_err(|e| RpcError::new(RESOURCE_NOT_FOUND, e))?;
                let path = indexed_path(&store, &path).map_err(|e| RpcError::new(RESOURCE_NOT_FOUND, e))?;
                let (_, text) = store
                    .document_text(&path)
                    .map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))?
                    .ok_or_else(|| RpcError::new(RESOURCE_NOT_FOUND, format!("{path} has no text in the index")))?;
                let text = window(&text, 0, "the get_document tool reads on from offset").map_err(|e| RpcError::new(INTERNAL_ERROR, e))?;
                Ok(json!({ "contents": [{ "uri": uri, "mimeType": "text/plain", "text": text }] }))
            }
            _ => Err(RpcError::new(METHOD_NOT_FOUND, format!("method not found: {method}"))),
        }
    }

    /// Runs tool `name` on arguments already checked against its `schema`.
    fn call_tool(&mut self, name: &str, schema: &Value, arguments: &Map<String, Value>) -> ToolResult {
        check_arguments(schema, arguments)?;
        let text = |name: &str| arguments.get(name).and_then(Value::as_str);
        let number = |name: &str| arguments.get(name).and_then(Value::as_i64);
        match name {
            "search" => {
                let k = number("k").unwrap_or(DEFAULT_HITS) as usize;
                let filter = HitFilter::new(text("folder"), text("type"))?;
                self.search(required(text("query"), "query")?.trim(), k, &filter)
            }
            "get_document" => self.document(required(text("path"), "path")?, None, number("offset").unwrap_or(0) as usize),
            "get_page" => {
                let page = number("page").expect("required by the schema") as u32;
                self.document(required(text("path"), "path")?, Some(page), number("offset").unwrap_or(0) as usize)
            }
            "ask" => self.ask(required(text("question"), "question")?.trim(), number("passages").unwrap_or(DEFAULT_PASSAGES) as usize),
            "list_folders" => self.list_folders(),
            _ => unreachable!("{name} is listed in tool_definitions but has no code. This is a bug."),
        }
    }

    fn search(&mut self, query: &str, k: usize, filter: &HitFilter) -> ToolResult {
        let index = self.index.get()?;
        let options = SearchOptions { filter: filter.to_index_filter(), ..SearchOptions::default() };
        let hits: Vec<Hit> = index.search(query, k, &options).map_err(|e| format!("{e:#}"))?;
        let mut text = String::new();
        for (i, h) in hits.iter().enumerate() {
            let ocr = if h.ocr { " (read by OCR: words may be misread)" } else { "" };
            text += &format!("{}. {}  page {}{ocr}  score {:.4}\n   {}\n", i + 1, h.path, h.page, h.score, h.text);
        }
        if hits.is_empty() {
            text = match filter.describe() {
                Some(what) => format!("no hits {what} for this query"),
                None => "no hits: the index holds nothing like this query".to_string(),
            };
        }
        let structured: Vec<Value> =
            hits.iter().map(|h| json!({ "path": h.path, "page": h.page, "score": h.score, "snippet": h.text, "ocr": h.ocr })).collect();
        Ok(ToolOutput { text, structured: Some(json!({ "hits": structured })) })
    }

    /// A document's text (`page` None: every page, each after a heading), from `offset` characters on.
    fn document(&mut self, asked: &str, page: Option<u32>, offset: usize) -> ToolResult {
        let store = self.index.store()?;
        let path = indexed_path(&store, asked)?;
        let pages = document_pages(&store, &path)?;
        let count = pages.len();
        let (text, tool) = match page {
            Some(n) => {
                let Some((_, text)) = pages.into_iter().find(|(p, _)| *p == n) else {
                    return Err(format!("{path} has no page {n}: its pages are 1 to {count}"));
                };
                (text, "get_page")
            }
            None => {
                let whole = pages.iter().map(|(n, text)| format!("--- page {n} of {count} ---\n{text}\n")).collect::<Vec<_>>().join("\n");
                (whole, "get_document")
            }
        };
        Ok(ToolOutput::text(window(&text, offset, &format!("call {tool} again with offset"))?))
    }

    fn ask(&mut self, question: &str, passages: usize) -> ToolResult {
        let index = self.index.get()?;
        let answered = ask::answer(index, &mut self.chat, &[question], passages, None).map_err(|e| format!("{e:#}"))?;
        let a = &answered.answers[0];
        let mut text = a.answer.clone();
        if !a.citations.is_empty() {
            text += "\n";
        }
        for c in &a.citations {
            text += &format!("\n[{}] {}  page {}", c.n, c.path, c.page);
        }
        let citations: Vec<Value> =
            a.citations.iter().map(|c| json!({ "n": c.n, "path": c.path, "page": c.page, "text": c.text })).collect();
        Ok(ToolOutput {
            text,
            structured: Some(json!({
                "answer": a.answer,
                "answerable": a.answerable,
                "citations": citations,
                "model": answered.model,
            })),
        })
    }

    fn list_folders(&mut self) -> ToolResult {
        let folders = watched_folders(&self.data_dir)?;
        let store = self.index.store()?;
        let documents = store.documents().map_err(|e| e.to_string())?;
        let indexed: Vec<&str> = documents.iter().filter(|d| d.status == "indexed").map(|d| d.path.as_str()).collect();
        let under = |folder: &str| indexed.iter().filter(|p| Path::new(p).starts_with(folder)).count();
        let outside = indexed.iter().filter(|p| !folders.iter().any(|f| Path::new(p).starts_with(f))).count();
        let mut text = format!(
            "{} documents indexed in {}{}\n",
            indexed.len(),
            self.index.db.display(),
            match documents.len() - indexed.len() {
                0 => String::new(),
                n => format!(" ({n} more could not be read)"),
            }
        );
        if folders.is_empty() {
            text += &format!("no watched folders (the app's settings in {} name none)\n", self.data_dir.display());
        } else {
            text += "watched folders:\n";
        }
        for f in &folders {
            text += &format!("  {f}  ({} documents)\n", under(f));
        }
        if outside > 0 && !folders.is_empty() {
            text += &format!("{outside} documents are outside these folders (added one by one)\n");
        }
        let listed: Vec<Value> = folders.iter().map(|f| json!({ "path": f, "documents": under(f) })).collect();
        Ok(ToolOutput {
            text,
            structured: Some(json!({
                "index": self.index.db.display().to_string(),
                "documents": indexed.len(),
                "not_readable": documents.len() - indexed.len(),
                "folders": listed,
            })),
        })
    }
}

/// The index, opened for search on first use and again whenever another process (the app)
/// has committed to it since, so new documents are found.
struct SearchIndex {
    db: PathBuf,
    global: GlobalOptions,
    /// The open index and SQLite's `data_version` when it was opened.
    open: Option<(AskIndex, Option<i64>)>,
}

impl SearchIndex {
    fn get(&mut self) -> std::result::Result<&AskIndex, String> {
        self.check_exists()?;
        let stale = match &self.open {
            Some((index, version)) => data_version(index.searcher().store()) != *version,
            None => true,
        };
        if stale {
            let index = match &self.open {
                Some((open, _)) => open.reopen(&self.db),
                None => AskIndex::open(&self.global, &self.db),
            }
            .map_err(|e| format!("{e:#}"))?;
            let version = data_version(index.searcher().store());
            self.open = Some((index, version));
        }
        Ok(&self.open.as_ref().expect("opened above").0)
    }

    /// The index opened read-only for one request: documents and their text as they are now.
    fn store(&self) -> std::result::Result<Store, String> {
        self.check_exists()?;
        Store::open_read_only(&self.db).map_err(|e| e.to_string())
    }

    fn check_exists(&self) -> std::result::Result<(), String> {
        if self.db.exists() {
            return Ok(());
        }
        Err(format!(
            "there is no index at {} yet: add a folder in the warpfold app, or run `warpfold index FOLDER --db {}`",
            self.db.display(),
            self.db.display()
        ))
    }
}

/// SQLite's count of changes other connections committed: a new value means the index changed.
fn data_version(store: &Store) -> Option<i64> {
    store.connection().query_row("PRAGMA data_version", [], |r| r.get(0)).ok()
}

/// The `initialize` result: the client's protocol revision when this server speaks it, else the
/// newest this server speaks.
fn initialize_result(asked: Option<&str>) -> Value {
    let version = PROTOCOL_VERSIONS.iter().find(|v| Some(**v) == asked).unwrap_or(&PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false }, "resources": { "listChanged": false, "subscribe": false } },
        "serverInfo": { "name": "warpfold", "title": "warpfold", "version": env!("CARGO_PKG_VERSION") },
        "instructions": "warpfold searches and reads the documents the user indexed on this computer (PDF, text, \
            Markdown, office files, scans), read-only. Use search to find passages (with path and page), get_page or \
            get_document to read a document found, ask for an answer with citations from a local model (slow), and \
            list_folders to see which folders are indexed.",
    })
}

/// The tools, their descriptions and input schemas, as `tools/list` gives them. The schemas are
/// also what [`check_arguments`] holds a call to: what is declared is what is checked.
fn tool_definitions() -> Vec<Value> {
    let read_only = json!({ "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false });
    let path = json!({ "type": "string", "minLength": 1, "description": "A document's path exactly as search, list_folders or resources/list give it" });
    let offset = json!({ "type": "integer", "minimum": 0, "description": "Characters to skip: where a truncated answer says to read on (default 0)" });
    vec![
        json!({
            "name": "search",
            "title": "Search documents",
            "description": "Search the user's indexed documents by meaning and keywords together. Returns the best \
                passages with the document's path, the page, a score and a snippet. Read more of a hit with get_page.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": { "type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS, "description": "What to look for, in your own words or keywords" },
                    "k": { "type": "integer", "minimum": 1, "maximum": MAX_HITS, "description": format!("How many hits (default {DEFAULT_HITS}, at most {MAX_HITS})") },
                    "folder": { "type": "string", "minLength": 1, "description": "Only hits in documents under this folder (an absolute path)" },
                    "type": { "type": "string", "minLength": 1, "maxLength": 16, "description": "Only hits in documents of this file type, by extension: pdf, md, txt, docx, ..." },
                },
                "required": ["query"],
                "additionalProperties": false,
            },
            "annotations": read_only,
        }),
        json!({
            "name": "get_document",
            "title": "Read a document",
            "description": format!("The indexed text of a document, page by page, each page after a '--- page N of M ---' \
                line. At most {} KB an answer: a longer text says where to read on.", MAX_TEXT_BYTES / 1024),
            "inputSchema": {
                "type": "object",
                "properties": { "path": path, "offset": offset },
                "required": ["path"],
                "additionalProperties": false,
            },
            "annotations": read_only,
        }),
        json!({
            "name": "get_page",
            "title": "Read a page",
            "description": "The indexed text of one page of a document (pages count from 1, as search gives them).",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "path": path,
                    "page": { "type": "integer", "minimum": 1, "description": "The page, from 1" },
                    "offset": offset,
                },
                "required": ["path", "page"],
                "additionalProperties": false,
            },
            "annotations": read_only,
        }),
        json!({
            "name": "ask",
            "title": "Ask the documents",
            "description": "A short answer to a question, written by a local chat model from the best passages of the \
                indexed documents, each sentence citing its document and page; or 'Not in your documents.' when the \
                passages do not say. Slow: seconds to a minute on a CPU.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "question": { "type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS, "description": "The question, in your own words" },
                    "passages": { "type": "integer", "minimum": 1, "maximum": MAX_PASSAGES, "description": format!("How many of the best passages the model reads (default {DEFAULT_PASSAGES}, at most {MAX_PASSAGES})") },
                },
                "required": ["question"],
                "additionalProperties": false,
            },
            "annotations": read_only,
        }),
        json!({
            "name": "list_folders",
            "title": "Indexed folders",
            "description": "The folders the warpfold app watches and indexes, with how many documents each holds, and \
                the index's document count.",
            "inputSchema": { "type": "object", "properties": {}, "additionalProperties": false },
            "annotations": read_only,
        }),
    ]
}

/// `arguments` held to a tool's input schema, in the subset [`tool_definitions`] uses: string and
/// integer properties with their bounds, the required ones, no others. A null counts as absent
/// (some clients send every optional argument, unset ones as null).
fn check_arguments(schema: &Value, arguments: &Map<String, Value>) -> std::result::Result<(), String> {
    let properties = schema["properties"].as_object().expect("a tool's schema has properties");
    for name in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        if arguments.get(name).is_none_or(Value::is_null) {
            return Err(format!("missing argument `{name}`"));
        }
    }
    for (name, value) in arguments.iter().filter(|(_, v)| !v.is_null()) {
        let Some(spec) = properties.get(name) else {
            let known: Vec<String> = properties.keys().map(|k| format!("`{k}`")).collect();
            return Err(match known.is_empty() {
                true => format!("unknown argument `{name}`: this tool takes none"),
                false => format!("unknown argument `{name}`: this tool takes {}", known.join(", ")),
            });
        };
        let bound = |key: &str| spec.get(key).and_then(Value::as_i64);
        match spec["type"].as_str() {
            Some("string") => {
                let Some(s) = value.as_str() else { return Err(format!("`{name}` must be a string")) };
                let chars = s.chars().count() as i64;
                if bound("minLength").is_some_and(|min| s.trim().chars().count() < min as usize) {
                    return Err(format!("`{name}` is empty"));
                }
                if let Some(max) = bound("maxLength").filter(|max| chars > *max) {
                    return Err(format!("`{name}` is {chars} characters long; at most {max} are taken"));
                }
            }
            Some("integer") => {
                let Some(n) = value.as_i64() else { return Err(format!("`{name}` must be a whole number, not {value}")) };
                let (min, max) = (bound("minimum"), bound("maximum"));
                if min.is_some_and(|min| n < min) || max.is_some_and(|max| n > max) {
                    return Err(match (min, max) {
                        (Some(min), Some(max)) => format!("`{name}` must be from {min} to {max}, not {n}"),
                        (Some(min), None) => format!("`{name}` must be at least {min}, not {n}"),
                        _ => format!("`{name}` must be at most {}, not {n}", max.expect("one bound failed")),
                    });
                }
            }
            other => unreachable!("a tool schema has a {other:?} property {name}, which check_arguments does not check. This is a bug."),
        }
    }
    Ok(())
}

/// A required argument, present once [`check_arguments`] passed.
fn required<'a>(value: Option<&'a str>, name: &str) -> std::result::Result<&'a str, String> {
    value.ok_or_else(|| format!("missing argument `{name}`"))
}

/// `tools/call`'s result for a tool's output or error.
fn tool_result(result: ToolResult) -> Value {
    match result {
        Ok(ToolOutput { text, structured: Some(structured) }) => {
            json!({ "content": [{ "type": "text", "text": text }], "structuredContent": structured, "isError": false })
        }
        Ok(ToolOutput { text, structured: None }) => json!({ "content": [{ "type": "text", "text": text }], "isError": false }),
        Err(message) => json!({ "content": [{ "type": "text", "text": message }], "isError": true }),
    }
}

/// Which hits `search` keeps: those under a folder, of a file type, or both.
#[derive(Debug, Default)]
struct HitFilter {
    folder: Option<PathBuf>,
    /// The extension, lower case, without its dot.
    extension: Option<String>,
}

impl HitFilter {
    fn new(folder: Option<&str>, extension: Option<&str>) -> std::result::Result<HitFilter, String> {
        let folder = match folder.map(str::trim) {
            None => None,
            Some(f) if !Path::new(f).is_absolute() => {
                return Err(format!("`folder` must be an absolute path (as list_folders gives them), not {f:?}"))
            }
            // indexed paths are canonical: a folder named through a link is matched where it leads
            Some(f) => Some(Path::new(f).canonicalize().unwrap_or_else(|_| PathBuf::from(f))),
        };
        let extension = match extension.map(|e| e.trim().trim_start_matches('.').to_lowercase()) {
            Some(e) if e.is_empty() || !e.chars().all(|c| c.is_alphanumeric()) => {
                return Err(format!("`type` must be a file extension such as pdf or md, not {e:?}"))
            }
            other => other,
        };
        Ok(HitFilter { folder, extension })
    }

    /// The index's filter, applied before the hits are cut to `k` (so `k` come back when enough
    /// documents match).
    fn to_index_filter(&self) -> Filter {
        Filter { folder: self.folder.clone(), extensions: self.extension.iter().cloned().collect(), ..Filter::default() }
    }

    /// "under FOLDER of type .EXT", for a search that kept nothing.
    fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(f) = &self.folder {
            parts.push(format!("under {}", f.display()));
        }
        if let Some(e) = &self.extension {
            parts.push(format!("of type .{e}"));
        }
        (!parts.is_empty()).then(|| parts.join(" "))
    }
}

/// The path as the index holds `asked`, which must be a document with text: the path as given,
/// or where it leads when it names the file through a link or `..`. Nothing else is read, so
/// no file outside what the user indexed can be read through this server.
fn indexed_path(store: &Store, asked: &str) -> std::result::Result<String, String> {
    let canonical = Path::new(asked).canonicalize().ok().map(|p| p.display().to_string());
    for candidate in std::iter::once(asked.to_string()).chain(canonical.filter(|c| c != asked)) {
        match store.document_state(&candidate).map_err(|e| e.to_string())? {
            Some(state) if state.status == "indexed" => return Ok(candidate),
            Some(state) => {
                let why = state.error.map(|e| format!(": {e}")).unwrap_or_default();
                return Err(format!("{candidate} is in the index but has no text ({}{why})", state.status.replace('_', " ")));
            }
            None => {}
        }
    }
    Err(format!("{asked} is not a document in the index; search, list_folders and resources/list give the paths it holds"))
}

/// A document's pages, in order, with their numbers (from 1).
fn document_pages(store: &Store, path: &str) -> std::result::Result<Vec<(u32, String)>, String> {
    let failed = |e: &dyn std::fmt::Display| format!("reading the pages of {path}: {e}");
    let mut statement = store
        .connection()
        .prepare_cached("SELECT page, text FROM pages WHERE document_id = (SELECT id FROM documents WHERE path = ?1) ORDER BY page")
        .map_err(|e| failed(&e))?;
    let rows = statement.query_map([path], |r| Ok((r.get::<_, u32>(0)?, r.get::<_, String>(1)?))).map_err(|e| failed(&e))?;
    rows.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| failed(&e))
}

/// `text` from character `offset` on, at most [`MAX_TEXT_BYTES`] of it; a cut text ends by saying
/// where it was cut and how to read on (`read_on`, followed by the offset to give).
fn window(text: &str, offset: usize, read_on: &str) -> std::result::Result<String, String> {
    let total = text.chars().count();
    if offset > total {
        return Err(format!("offset {offset} is past the end: the text has {total} characters"));
    }
    let start = text.char_indices().nth(offset).map_or(text.len(), |(i, _)| i);
    let rest = &text[start..];
    if rest.len() <= MAX_TEXT_BYTES {
        return Ok(rest.to_string());
    }
    let mut end = MAX_TEXT_BYTES;
    while !rest.is_char_boundary(end) {
        end -= 1;
    }
    let next = offset + rest[..end].chars().count();
    Ok(format!("{}\n\n[truncated: characters {offset} to {next} of {total} shown; {read_on} {next} to read on]", &rest[..end]))
}

/// Every indexed document as a resource, by path, [`RESOURCES_PAGE`] at a time: the cursor is the
/// last path of the page before (opaque to the client), so documents the app adds meanwhile
/// neither shift nor repeat the pages.
fn list_resources(store: &Store, cursor: Option<&str>, page: usize) -> std::result::Result<Value, String> {
    let documents = store.documents().map_err(|e| e.to_string())?;
    let mut after = documents.iter().filter(|d| d.status == "indexed" && cursor.is_none_or(|c| d.path.as_str() > c));
    let listed: Vec<_> = after.by_ref().take(page).collect();
    let resources: Vec<Value> = listed
        .iter()
        .map(|d| {
            let name = Path::new(&d.path).file_name().map_or_else(|| d.path.clone(), |n| n.to_string_lossy().into_owned());
            json!({
                "uri": document_uri(&d.path),
                "name": name,
                "description": format!("{} ({} page{})", d.path, d.pages, if d.pages == 1 { "" } else { "s" }),
                "mimeType": "text/plain",
            })
        })
        .collect();
    let mut result = json!({ "resources": resources });
    if after.next().is_some() {
        result["nextCursor"] = json!(listed.last().expect("a full page").path);
    }
    Ok(result)
}

/// `warpfold://document/` and the path, every byte but letters, digits and `-._~` percent-encoded
/// (the path's slashes too: it is one segment).
fn document_uri(path: &str) -> String {
    let mut uri = String::from(DOCUMENT_URI);
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri += &format!("%{b:02X}");
        }
    }
    uri
}

/// The path a document URI names.
fn document_path(uri: &str) -> std::result::Result<String, String> {
    let encoded = uri.strip_prefix(DOCUMENT_URI).ok_or_else(|| format!("{uri:?} is not a warpfold document URI ({DOCUMENT_URI}...)"))?;
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut rest = encoded.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = tail.get(..2).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
            bytes.push(hex.ok_or_else(|| format!("{uri:?}: a % must be followed by two hex digits"))?);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).map_err(|_| format!("{uri:?} does not name a path in UTF-8"))
}

/// The folders the app watches, from settings.json in its data folder (none when it has no
/// settings yet). Read here rather than through `warpfold_app`, whose reader moves a settings
/// file it cannot parse aside: a write this server must not make. The format is the app's
/// `Settings`: `{"folders": [...]}`.
fn watched_folders(data_dir: &Path) -> std::result::Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Settings {
        #[serde(default)]
        folders: Vec<String>,
    }
    let path = data_dir.join("settings.json");
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice::<Settings>(&bytes).map(|s| s.folders).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use warpfold_index::store::DocumentRecord;

    use super::*;
    use crate::{Cli, Command};

    /// A server on `data` (index.db and settings.json inside), parsed from the command line as
    /// `warpfold mcp` would be.
    fn server(data: &Path) -> McpServer {
        let db = data.join("index.db");
        let cli = Cli::try_parse_from(["warpfold", "mcp", "--db", db.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]).unwrap();
        let Command::Mcp(args) = cli.command else { panic!("parsed as mcp") };
        McpServer::new(&cli.global, args.db.unwrap(), args.data_dir.unwrap(), None)
    }

    /// An index of documents with these pages (no chunks: nothing here needs a model).
    fn write_index(db: &Path, documents: &[(&str, &[&str])]) {
        let mut store = Store::open(db, "test-model", 4).unwrap();
        for (path, pages) in documents {
            let record = DocumentRecord {
                path: path.to_string(),
                content_hash: format!("hash of {path}"),
                size: 1,
                mtime: 0,
                status: "indexed",
                error: None,
                pages: pages.iter().map(|p| p.to_string()).collect(),
                ocr_pages: Vec::new(),
                chunks: Vec::new(),
            };
            store.commit_document(&record, &[]).unwrap();
        }
    }

    fn send(server: &mut McpServer, message: Value) -> Value {
        server.handle_line(&message.to_string()).expect("a request is answered")
    }

    fn call(server: &mut McpServer, tool: &str, arguments: Value) -> Value {
        let response =
            send(server, json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": { "name": tool, "arguments": arguments } }));
        assert_eq!(response["id"], 7);
        response["result"].clone()
    }

    /// A tool's error message, failing the test if the call did not fail.
    fn tool_error(result: &Value) -> String {
        assert_eq!(result["isError"], true, "{result}");
        result["content"][0]["text"].as_str().unwrap().to_string()
    }

    fn tool_text(result: &Value) -> String {
        assert_eq!(result["isError"], false, "{result}");
        result["content"][0]["text"].as_str().unwrap().to_string()
    }

    #[test]
    fn a_line_that_is_not_json_is_a_parse_error_with_a_null_id() {
        let data = tempfile::tempdir().unwrap();
        let response = server(data.path()).handle_line("{\"jsonrpc\": \"2.0\", \"id\": 1,").unwrap();
        assert_eq!(response["error"]["code"], PARSE_ERROR);
        assert_eq!(response["id"], Value::Null);
        assert_eq!(response["jsonrpc"], "2.0");
    }

    #[test]
    fn batches_and_messages_without_jsonrpc_2_are_invalid_requests() {
        let data = tempfile::tempdir().unwrap();
        let mut server = server(data.path());
        let batch = server.handle_line(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).unwrap();
        assert_eq!(batch["error"]["code"], INVALID_REQUEST);
        let old = send(&mut server, json!({ "jsonrpc": "1.0", "id": 2, "method": "ping" }));
        assert_eq!((old["error"]["code"].as_i64(), old["id"].as_i64()), (Some(INVALID_REQUEST), Some(2)));
        let null_id = send(&mut server, json!({ "jsonrpc": "2.0", "id": null, "method": "ping" }));
        assert_eq!(null_id["error"]["code"], INVALID_REQUEST);
    }

    #[test]
    fn an_unknown_method_is_answered_method_not_found_with_its_id() {
        let data = tempfile::tempdir().unwrap();
        let mut server = server(data.path());
        // the probe newer clients send before falling back to initialize
        let response = send(&mut server, json!({ "jsonrpc": "2.0", "id": "probe-1", "method": "server/discover", "params": {} }));
        assert_eq!(response["error"]["code"], METHOD_NOT_FOUND);
        assert_eq!(response["id"], "probe-1");
        assert!(response.get("result").is_none());
    }

    #[test]
    fn notifications_and_responses_get_no_answer() {
        let data = tempfile::tempdir().unwrap();
        let mut server = server(data.path());
        for message in [
            json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
            json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 3 } }),
            json!({ "jsonrpc": "2.0", "method": "no/such/notification" }),
            json!({ "jsonrpc": "2.0", "id": 9, "result": {} }),
        ] {
            assert_eq!(server.handle_line(&message.to_string()), None, "{message}");
        }
    }

    #[test]
    fn initialize_agrees_on_the_clients_revision_when_it_can_and_offers_its_newest_otherwise() {
        let data = tempfile::tempdir().unwrap();
        let mut server = server(data.path());
        let init = |server: &mut McpServer, version: &str| {
            send(
                server,
                json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {}, "clientInfo": { "name": "test", "version": "0" } } }),
            )
        };
        let result = &init(&mut server, "2025-06-18")["result"];
        assert_eq!(result["protocolVersion"], "2025-06-18");
        assert_eq!(result["serverInfo"]["name"], "warpfold");
        assert!(result["capabilities"]["tools"].is_object() && result["capabilities"]["resources"].is_object(), "{result}");
        assert_eq!(init(&mut server, "1999-01-01")["result"]["protocolVersion"], PROTOCOL_VERSIONS[0]);
        assert_eq!(send(&mut server, json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" }))["result"], json!({}));
    }

    #[test]
    fn tools_list_offers_the_five_read_only_tools_with_closed_schemas() {
        let data = tempfile::tempdir().unwrap();
        let response = send(&mut server(data.path()), json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }));
        let tools = response["result"]["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["search", "get_document", "get_page", "ask", "list_folders"]);
        for tool in tools {
            assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
            assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{tool}");
            assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
            assert!(tool["description"].as_str().is_some_and(|d| d.len() > 20), "{tool}");
            for required in tool["inputSchema"]["required"].as_array().into_iter().flatten() {
                assert!(tool["inputSchema"]["properties"].get(required.as_str().unwrap()).is_some(), "{tool}");
            }
        }
        let search = &tools[0]["inputSchema"];
        assert_eq!(search["required"], json!(["query"]));
        assert_eq!(search["properties"]["k"]["maximum"], MAX_HITS);
    }

    #[test]
    fn tool_arguments_are_checked_before_anything_is_opened() {
        let data = tempfile::tempdir().unwrap();
        let mut server = server(data.path());
        let cases = [
            ("search", json!({}), "missing argument `query`"),
            ("search", json!({ "query": "   " }), "`query` is empty"),
            ("search", json!({ "query": "x", "k": 0 }), "`k` must be from 1 to 50, not 0"),
            ("search", json!({ "query": "x", "k": 51 }), "`k` must be from 1 to 50, not 51"),
            ("search", json!({ "query": "x", "k": "5" }), "`k` must be a whole number"),
            ("search", json!({ "query": "x", "k": 2.5 }), "`k` must be a whole number"),
            ("search", json!({ "query": 5 }), "`query` must be a string"),
            ("search", json!({ "query": "x".repeat(2001) }), "`query` is 2001 characters long"),
            ("search", json!({ "query": "x", "limit": 3 }), "unknown argument `limit`"),
            ("search", json!({ "query": "x", "folder": "docs/reports" }), "`folder` must be an absolute path"),
            ("search", json!({ "query": "x", "type": "p/df" }), "`type` must be a file extension"),
            ("get_page", json!({ "path": "/a.pdf" }), "missing argument `page`"),
            ("get_page", json!({ "path": "/a.pdf", "page": 0 }), "`page` must be at least 1, not 0"),
            ("ask", json!({ "question": "why?", "passages": 9 }), "`passages` must be from 1 to 8, not 9"),
            ("list_folders", json!({ "folder": "/x" }), "unknown argument `folder`: this tool takes none"),
        ];
        for (tool, arguments, expected) in cases {
            let message = tool_error(&call(&mut server, tool, arguments.clone()));
            assert!(message.contains(expected), "{tool} {arguments}: {message:?} should say {expected:?}");
        }
        // arguments that are not an object at all
        let response = send(
            &mut server,
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "search", "arguments": [1] } }),
        );
        assert!(tool_error(&response["result"]).contains("must be a JSON object"));
        // a null optional argument counts as absent: the call gets past the check, to the missing index
        let message = tool_error(&call(&mut server, "search", json!({ "query": "x", "k": null, "folder": null })));
        assert!(message.contains("there is no index at") && message.contains("index.db"), "{message}");
        // and with no index, there are no resources, which is no error
        let listed = send(&mut server, json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/list" }));
        assert_eq!(listed["result"], json!({ "resources": [] }));
    }

    #[test]
    fn an_unknown_tool_is_a_protocol_error_not_a_tool_result() {
        let data = tempfile::tempdir().unwrap();
        let response = send(
            &mut server(data.path()),
            json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": { "name": "delete_everything", "arguments": {} } }),
        );
        assert_eq!(response["error"]["code"], INVALID_PARAMS);
        assert!(response["error"]["message"].as_str().unwrap().contains("delete_everything"));
    }

    #[test]
    fn pages_and_documents_are_read_only_for_paths_the_index_holds() {
        let data = tempfile::tempdir().unwrap();
        write_index(&data.path().join("index.db"), &[("/docs/lease.pdf", &["The deposit is 1,200 euros.", "Rent is due on the 3rd."])]);
        std::fs::write(data.path().join("secret.txt"), "not indexed").unwrap();
        let mut server = server(data.path());
        assert_eq!(tool_text(&call(&mut server, "get_page", json!({ "path": "/docs/lease.pdf", "page": 2 }))), "Rent is due on the 3rd.");
        let whole = tool_text(&call(&mut server, "get_document", json!({ "path": "/docs/lease.pdf" })));
        assert_eq!(whole, "--- page 1 of 2 ---\nThe deposit is 1,200 euros.\n\n--- page 2 of 2 ---\nRent is due on the 3rd.\n");
        let message = tool_error(&call(&mut server, "get_page", json!({ "path": "/docs/lease.pdf", "page": 3 })));
        assert!(message.contains("has no page 3: its pages are 1 to 2"), "{message}");
        // a file that exists, but that the index does not hold, is not read
        let secret = data.path().join("secret.txt").display().to_string();
        let message = tool_error(&call(&mut server, "get_document", json!({ "path": secret })));
        assert!(message.contains("is not a document in the index") && !message.contains("not indexed"), "{message}");
        let message = tool_error(&call(&mut server, "get_document", json!({ "path": "/etc/passwd" })));
        assert!(message.contains("is not a document in the index"), "{message}");
    }

    #[test]
    fn a_long_text_is_cut_and_read_on_from_the_offset_it_names() {
        let data = tempfile::tempdir().unwrap();
        // three-byte characters, so the cut must fall between characters
        let long = "€".repeat(MAX_TEXT_BYTES / 3 + 500);
        write_index(&data.path().join("index.db"), &[("/docs/long.txt", &[long.as_str()])]);
        let mut server = server(data.path());
        let first = tool_text(&call(&mut server, "get_page", json!({ "path": "/docs/long.txt", "page": 1 })));
        let shown = MAX_TEXT_BYTES / 3;
        let total = long.chars().count();
        assert!(first.starts_with(&"€".repeat(shown)));
        assert!(first.ends_with(&format!(
            "[truncated: characters 0 to {shown} of {total} shown; call get_page again with offset {shown} to read on]"
        )));
        let rest = tool_text(&call(&mut server, "get_page", json!({ "path": "/docs/long.txt", "page": 1, "offset": shown })));
        assert_eq!(rest, "€".repeat(total - shown));
        let past = tool_error(&call(&mut server, "get_page", json!({ "path": "/docs/long.txt", "page": 1, "offset": total + 1 })));
        assert!(past.contains("past the end"), "{past}");
    }

    #[test]
    fn resources_list_every_indexed_document_a_page_at_a_time_and_read_its_text() {
        let data = tempfile::tempdir().unwrap();
        let paths = ["/d/a 1.txt", "/d/b%.md", "/d/c/ünïcode.pdf", "/d/d.txt", "/d/e.txt"];
        let documents: Vec<(&str, &[&str])> = paths.iter().map(|p| (*p, &["page one", "page two"][..])).collect();
        write_index(&data.path().join("index.db"), &documents);
        let store = Store::open_read_only(&data.path().join("index.db")).unwrap();
        let (mut listed, mut cursor) = (Vec::new(), None::<String>);
        for _ in 0..3 {
            let page = list_resources(&store, cursor.as_deref(), 2).unwrap();
            listed.extend(page["resources"].as_array().unwrap().iter().cloned());
            cursor = page["nextCursor"].as_str().map(String::from);
        }
        assert_eq!(cursor, None, "three pages of two hold five documents");
        assert_eq!(listed.len(), 5);
        for (resource, path) in listed.iter().zip(paths) {
            assert_eq!(document_path(resource["uri"].as_str().unwrap()).unwrap(), path);
            assert_eq!(resource["name"], Path::new(path).file_name().unwrap().to_str().unwrap());
            assert_eq!(resource["mimeType"], "text/plain");
        }
        assert_eq!(listed[0]["uri"], "warpfold://document/%2Fd%2Fa%201.txt");

        let mut server = server(data.path());
        let uri = listed[2]["uri"].clone();
        let read = send(&mut server, json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": { "uri": uri } }));
        assert_eq!(read["result"]["contents"][0]["text"], "page one\n\npage two");
        assert_eq!(read["result"]["contents"][0]["uri"], uri);
        let missing = send(
            &mut server,
            json!({ "jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": { "uri": document_uri("/etc/passwd") } }),
        );
        assert_eq!(missing["error"]["code"], RESOURCE_NOT_FOUND);
        let foreign =
            send(&mut server, json!({ "jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": { "uri": "file:///etc/passwd" } }));
        assert_eq!(foreign["error"]["code"], INVALID_PARAMS);
    }

    #[test]
    fn malformed_percent_escapes_are_refused() {
        assert!(document_path("warpfold://document/%2").is_err());
        assert!(document_path("warpfold://document/%zz").is_err());
        assert!(document_path("warpfold://document/%FF").is_err(), "not UTF-8");
        assert_eq!(document_path(&document_uri("/a/100% b+c?.txt")).unwrap(), "/a/100% b+c?.txt");
    }

    #[test]
    fn list_folders_counts_the_documents_under_each_watched_folder() {
        let data = tempfile::tempdir().unwrap();
        write_index(
            &data.path().join("index.db"),
            &[("/home/u/notes/a.md", &["a"]), ("/home/u/notes/b/c.md", &["c"]), ("/home/u/notes-old/d.md", &["d"]), ("/tmp/e.pdf", &["e"])],
        );
        std::fs::write(data.path().join("settings.json"), r#"{"folders": ["/home/u/notes", "/srv/empty"]}"#).unwrap();
        let result = call(&mut server(data.path()), "list_folders", json!({}));
        let text = tool_text(&result);
        assert!(text.starts_with("4 documents indexed in"), "{text}");
        // notes-old is not under notes: folders are compared by path components, not by prefix
        assert_eq!(
            result["structuredContent"]["folders"],
            json!([{ "path": "/home/u/notes", "documents": 2 }, { "path": "/srv/empty", "documents": 0 }])
        );
        assert!(text.contains("2 documents are outside these folders"), "{text}");
    }

    #[test]
    fn hit_filters_become_the_index_filter() {
        let filter = HitFilter::new(Some("/no/such/docs/"), Some(".PDF")).unwrap();
        let index = filter.to_index_filter();
        assert_eq!(index.folder.as_deref(), Some(Path::new("/no/such/docs/")));
        assert_eq!(index.extensions, ["pdf"]);
        assert!(HitFilter::new(None, None).unwrap().to_index_filter().is_empty());
        assert!(HitFilter::new(Some("docs"), None).unwrap_err().contains("absolute path"));
        assert!(HitFilter::new(None, Some("p/df")).unwrap_err().contains("file extension"));
    }

    #[test]
    fn responses_are_single_lines_and_blank_lines_are_skipped() {
        let data = tempfile::tempdir().unwrap();
        let mut server = server(data.path());
        let input: &[u8] = b"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\r\n  \nnot json\n\xff\xfe\n";
        let mut output = Vec::new();
        serve(input, &mut output, &mut server).unwrap();
        let lines: Vec<Value> = String::from_utf8(output).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["id"], 1);
        assert!(lines[0]["result"]["tools"].is_array());
        assert_eq!(lines[1]["error"]["code"], PARSE_ERROR);
        assert_eq!(lines[2]["error"]["code"], PARSE_ERROR);
    }
}
