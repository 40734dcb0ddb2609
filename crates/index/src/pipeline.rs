//! Files to index entries: walk, extract, chunk, embed, commit.
//!
//! Why three stages with bounded queues: extraction (a process per PDF) and tokenization are I/O-
//! and CPU-bound work that must not leave the compute backend waiting, so `jobs` workers run them
//! side by side and feed the engine's bulk lane as soon as each document is ready; a single writer
//! commits documents in order as their embeddings come back, those ready together in one
//! transaction (per-document transactions bound a GPU run: BENCHMARKS.md, issue 14). Every
//! queue is bounded, so memory stays flat however many files arrive.
//!
//! ```text
//!  paths ─▶ [worker × jobs: hash, skip?, extract (isolated), chunk] ─▶ submit to engine ─▶ [writer: wait, commit]
//! ```

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{bounded, TryRecvError};
use parking_lot::{Condvar, Mutex};
use serde::Serialize;
use sha2::{Digest, Sha256};
use warpfold_engine::embed::Embedder;
use warpfold_engine::scheduler::Ticket;
use warpfold_engine::tokenize::TextRole;
use warpfold_engine::Lane;

use crate::chunk::chunk_document;
use crate::extract::{extract_opened, extract_text_file, file_kind, ExtractError, FileKind, Isolation};
use crate::files::{self, Collected, ReadError};
use crate::store::{Commit, DocumentCommit, DocumentRecord, Store, StoreError};

/// Text files larger than this are refused by default (see [`IndexOptions::max_text_bytes`]).
pub const DEFAULT_MAX_TEXT_BYTES: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("{0}: no such file or folder")]
    NotFound(String),
    #[error("{path}: {source}")]
    Walk { path: String, source: std::io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sharded run on the wrong index (see [`crate::shard`]).
    #[error("{0}")]
    Shard(String),
}

impl IndexError {
    /// Whether the index could not be written for want of space (SQLite's "database or disk is
    /// full", or the system's ENOSPC): a failure that passes when space is freed.
    pub fn disk_full(&self) -> bool {
        let text = self.to_string();
        text.contains("database or disk is full") || text.contains("No space left on device") || text.contains("os error 28")
    }
}

#[derive(Debug, Clone)]
pub struct IndexOptions {
    pub isolation: Isolation,
    /// Extraction and tokenization workers.
    pub jobs: usize,
    /// Tokens shared by consecutive chunks.
    pub overlap: usize,
    /// Remove documents whose file no longer exists.
    pub prune: bool,
    /// Read again files that failed before even if they did not change.
    pub retry_failed: bool,
    /// Read every file again, indexed or not, changed or not: a re-index the person asked for
    /// (after new OCR languages, say). Passages whose text is unchanged keep their vectors.
    pub reread: bool,
    /// The largest text file read, in bytes (0: no limit). A text file's words, chunks and token
    /// ids are all held while it is indexed, so this bounds a run's memory.
    pub max_text_bytes: u64,
    /// Bins' worth of tokens submitted and not yet committed ([`in_flight_budget`]); 8 by
    /// default, a knob for measurements (the front's `WARPFOLD_IN_FLIGHT_BINS`).
    pub in_flight_bins: u64,
}

impl IndexOptions {
    /// Defaults for everything but the extraction workers: one job, 32-token overlap, no pruning,
    /// failed files left alone, text files up to [`DEFAULT_MAX_TEXT_BYTES`].
    pub fn new(isolation: Isolation) -> IndexOptions {
        IndexOptions {
            isolation,
            jobs: 1,
            overlap: 32,
            prune: false,
            retry_failed: false,
            reread: false,
            max_text_bytes: DEFAULT_MAX_TEXT_BYTES,
            in_flight_bins: DEFAULT_IN_FLIGHT_BINS,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub path: String,
    pub error: String,
    /// `failed`, or `no_text` for a file with nothing to index (a scan, a blank file).
    pub status: String,
}

/// What `warpfold index --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct IndexReport {
    pub documents_total: u64,
    pub documents_indexed: u64,
    pub documents_skipped: u64,
    pub documents_failed: u64,
    pub documents_pruned: u64,
    pub failures: Vec<Failure>,
    /// Files deliberately not read (a symbolic link out of the chosen folder), with the reason.
    pub skipped: Vec<Failure>,
    /// Indexed files that lost something on the way (an unreadable page), with what.
    pub warnings: Vec<Failure>,
    pub pruned: Vec<String>,
    /// Chunks written for the documents indexed in this run.
    pub chunks: u64,
    /// Of those, chunks whose text had no stored embedding and went through the model.
    pub chunks_embedded: u64,
    /// Chunks embedded again because their stored vector went away while the run was under way
    /// (another document that shared the text changed in the same run).
    pub chunks_reembedded: u64,
    /// Real tokens embedded, and the pad/alignment tokens computed alongside them.
    pub tokens: u64,
    pub pad_tokens: u64,
    pub bins: u64,
    /// Time the model spent computing bins during the run: how busy the pipeline kept it.
    pub backend_busy_seconds: f64,
    /// Where the run's time went, stage by stage (seconds summed over the threads doing it).
    pub stages: StageSeconds,
    /// Seconds a device sat idle waiting for a bin while chunks were waiting to be packed.
    pub device_starved_seconds: f64,
    /// Mean share of a bin's capacity computed by the bulk lane's bins (tokens computed / (bins x
    /// capacity)); bins that answered queries at once are left out.
    pub mean_bin_fill: f64,
    pub seconds: f64,
    pub tokens_per_second: f64,
    pub documents_per_second: f64,
}

/// Seconds spent in each stage of [`index_collected`], summed over the threads that ran it (the
/// workers run read, extract and chunk side by side, so these may add up to more than the wall
/// time): what binds a run. `embed_wait` is the writer waiting for the engine's answers, `write`
/// its SQLite transactions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StageSeconds {
    pub read: f64,
    pub extract: f64,
    pub chunk: f64,
    pub submit: f64,
    pub embed_wait: f64,
    pub write: f64,
    /// Of `write`, the processor time the writer's thread got: far below `write`, the writer waited
    /// (for the disk, a lock, or a core) rather than worked.
    pub write_cpu: f64,
    /// Transactions the writer committed (documents arrive in groups, see `GROUP_DOCUMENTS`).
    pub write_transactions: u64,
}

/// Nanosecond counters behind [`StageSeconds`], shared by the run's threads.
#[derive(Default)]
struct StageClock {
    read: AtomicU64,
    extract: AtomicU64,
    chunk: AtomicU64,
    submit: AtomicU64,
    embed_wait: AtomicU64,
    write: AtomicU64,
    write_cpu: AtomicU64,
    write_transactions: AtomicU64,
}

impl StageClock {
    fn add(counter: &AtomicU64, since: Instant) {
        counter.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// Nanoseconds of processor time this thread has had.
    fn thread_cpu_nanos() -> u64 {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec we own; on failure it stays zero.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }

    fn seconds(&self) -> StageSeconds {
        let s = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64 / 1e9;
        StageSeconds {
            read: s(&self.read),
            extract: s(&self.extract),
            chunk: s(&self.chunk),
            submit: s(&self.submit),
            embed_wait: s(&self.embed_wait),
            write: s(&self.write),
            write_cpu: s(&self.write_cpu),
            write_transactions: self.write_transactions.load(Ordering::Relaxed),
        }
    }
}

/// Live counters for a progress display, and an optional observer of each file's stage.
#[derive(Default)]
pub struct Progress {
    pub files_total: AtomicU64,
    pub files_done: AtomicU64,
    pub chunks_embedded: AtomicU64,
    pub observer: Option<Arc<dyn FileObserver>>,
    /// While this says so, no new file is started (the ones being read finish): the person paused
    /// indexing. Asked before each file.
    pub hold: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
    /// Once this is set, no new file is started (the app is stopping); the files being read
    /// finish, the rest stay where they were.
    pub cancel: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl Progress {
    fn stage(&self, path: &str, stage: FileStage) {
        if let Some(observer) = &self.observer {
            observer.file_stage(path, stage);
        }
    }
}

/// Where one file is on its way through [`index_collected`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileStage {
    /// A worker is reading, hashing and extracting it.
    Extracting,
    /// Its new chunks are queued in (or running on) the engine.
    Embedding { chunks: u64 },
    /// Its content is unchanged since it was indexed; nothing was done.
    Unchanged,
    /// Committed: `indexed`, `no_text` or `failed`, with the error or warnings.
    Finished { status: &'static str, error: Option<String>, chunks: u64, pages: u32 },
}

/// Told of every stage change of every file (from the indexer's threads: keep it quick).
pub trait FileObserver: Send + Sync {
    fn file_stage(&self, path: &str, stage: FileStage);
}

/// Every file under `paths` that warpfold reads, as real paths (see [`files::collect`]: folders
/// recursively, links out of a folder not followed, only regular files), plus what was refused.
pub fn collect_files(paths: &[PathBuf]) -> Result<Collected, IndexError> {
    files::collect(paths).map_err(|_| IndexError::NotFound(paths_text(paths)))
}

fn paths_text(paths: &[PathBuf]) -> String {
    paths.iter().filter(|p| std::fs::symlink_metadata(p).is_err()).map(|p| files::display_lossless(p)).collect::<Vec<_>>().join(", ")
}

/// Lowers this thread's CPU priority (nice 10; the PDF worker processes it starts inherit it).
///
/// Why: extraction and tokenization keep every core busy, and then the two threads that pace the
/// whole run, the one feeding the device (a GPU bin is hundreds of kernel launches and waits, each
/// a wake-up the scheduler may delay behind a busy core) and the writer, got a core only now and
/// then: on a 16-core machine a 5k-token MiniLM bin took ~38 ms while indexing against ~3 ms
/// alone, and the writer spent 13 ms per document. At a lower priority the workers still take
/// every idle cycle, and the pacing threads run the moment they are ready.
fn yield_to_the_device() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on this thread's own id; failure only leaves the priority as it was.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, WORKER_NICE);
    }
}

/// The nice value of extraction and tokenization workers (see [`yield_to_the_device`]).
pub const WORKER_NICE: i32 = 10;

/// A document on its way to the writer.
struct Prepared {
    record: DocumentRecord,
    /// Hashes sent to the model, in the order of the ticket's answers.
    submitted: Vec<[u8; 32]>,
    ticket: Option<Ticket>,
    /// Its tokens counted in [`InFlight`].
    tokens: u64,
}

/// Most documents the writer commits in one transaction, and the longest it holds the first of them
/// back waiting for more: large enough that a transaction's fixed costs are shared, small enough
/// that the queue shows progress (documents come out a quarter of a second apart at worst).
const GROUP_DOCUMENTS: usize = 64;
const GROUP_SECONDS: f64 = 0.25;

/// At most this many documents wait between submission and commit (documents without new chunks
/// cost no tokens, so the token budget alone would not bound them).
const COMMIT_QUEUE_DOCUMENTS: usize = 4096;

/// The tokens submitted and not yet committed may reach eight bins of the engine's capacity (at
/// least 32,768): enough to fill the next bins while the device runs one, bounded for memory (a
/// few MB of text). Four were too few on a GPU: the writer releases a document's tokens only
/// when its last chunk is answered and every document before it too, so part of the budget is
/// always held by answered chunks, and BERT-large's bins left 57-64% full (BENCHMARKS.md).
fn in_flight_budget(bin_tokens: u32, bins: u64) -> u64 {
    (bins.max(1) * bin_tokens as u64).max(32_768)
}

/// [`IndexOptions::in_flight_bins`]'s default.
pub const DEFAULT_IN_FLIGHT_BINS: u64 = 8;

/// A budget of tokens between the submitter and the writer.
struct InFlight {
    budget: u64,
    used: Mutex<u64>,
    freed: Condvar,
}

impl InFlight {
    fn new(budget: u64) -> InFlight {
        InFlight { budget, used: Mutex::new(0), freed: Condvar::new() }
    }

    /// Waits until `tokens` fit (a document larger than the whole budget goes alone).
    fn acquire(&self, tokens: u64) {
        let mut used = self.used.lock();
        while *used > 0 && *used + tokens > self.budget {
            self.freed.wait(&mut used);
        }
        *used += tokens;
    }

    fn release(&self, tokens: u64) {
        let mut used = self.used.lock();
        *used = used.saturating_sub(tokens);
        drop(used);
        self.freed.notify_all();
    }
}

enum Outcome {
    Skipped,
    Ready(DocumentRecord),
}

/// A file's identity in the index: the SHA-256 of its bytes, in hex. Summaries and rename
/// detection key on the same value, so it is computed in one place.
pub fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn failed_record(path: String, hash: String, size: u64, mtime: i64, error: &ExtractError) -> DocumentRecord {
    DocumentRecord {
        path,
        content_hash: hash,
        size,
        mtime,
        status: error.status(),
        error: Some(error.to_string()),
        pages: Vec::new(),
        ocr_pages: Vec::new(),
        chunks: Vec::new(),
    }
}

fn mtime_of(meta: &std::fs::Metadata) -> i64 {
    meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_secs() as i64).unwrap_or(0)
}

fn read_error(e: ReadError) -> ExtractError {
    match e {
        ReadError::TooLarge { size_mib, limit_mib } => ExtractError::TooLarge { size_mib: format!("{size_mib:.1}"), limit_mib },
        other => ExtractError::Io(other.to_string()),
    }
}

/// The SHA-256 of a file read in blocks ([`content_hash`]'s value for its bytes), from a handle
/// opened by [`files::open_checked`].
pub fn hash_file(mut file: &std::fs::File) -> std::io::Result<String> {
    use std::io::Read;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// What [`prepare`] read of a file: a text file's bytes, or the checked open file the extraction
/// worker reads.
enum Read {
    Bytes(Vec<u8>),
    File(std::fs::File),
}

/// Reads, hashes, extracts and chunks one file (a worker's whole job for it). Text files are read
/// once, under the size limit, and the bytes hashed are the bytes indexed; a PDF or another
/// document format is hashed as a stream and read again by its isolated worker.
fn prepare(path: &Path, store: &Store, embedder: &Embedder, options: &IndexOptions, progress: &Progress, clock: &StageClock) -> Outcome {
    let path_text = path.display().to_string();
    let read_started = Instant::now();
    let kind = file_kind(path);
    let read = match kind {
        Some(FileKind::Text) => {
            files::read_checked(path, options.max_text_bytes).map(|(bytes, meta)| (content_hash(&bytes), Some(Read::Bytes(bytes)), meta))
        }
        _ => files::open_checked(path).and_then(|(file, meta)| {
            let hash = hash_file(&file).map_err(|e| ReadError::Io(e.to_string()))?;
            Ok((hash, Some(Read::File(file)), meta))
        }),
    };
    StageClock::add(&clock.read, read_started);
    let (hash, contents, meta) = match read {
        Ok(read) => read,
        Err(e) => return Outcome::Ready(failed_record(path_text, String::new(), 0, 0, &read_error(e))),
    };
    let (size, mtime) = (meta.len(), mtime_of(&meta));
    if let Ok(Some(state)) = store.document_state(&path_text) {
        // A failure that may pass without the file changing (OCR missing or off, the worker or the
        // engine unable to run) is tried again; one about the file itself is not, unless asked.
        let retry = options.retry_failed || state.error.as_deref().is_some_and(crate::extract::may_pass);
        if !options.reread && state.content_hash == hash && (state.status == "indexed" || !retry) {
            return Outcome::Skipped;
        }
    }
    progress.stage(&path_text, FileStage::Extracting);
    let extract_started = Instant::now();
    let extracted = match (kind, contents) {
        (Some(FileKind::Text), Some(Read::Bytes(bytes))) => extract_text_file(&bytes),
        // The worker reads the open file that was hashed, not the path again.
        (Some(FileKind::Pdf | FileKind::Document(_) | FileKind::Image(_)), Some(Read::File(file))) => {
            extract_opened(path, &file, &options.isolation)
        }
        _ => Err(ExtractError::Unsupported(
            path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_else(|| "(no extension)".into()),
        )),
    };
    StageClock::add(&clock.extract, extract_started);
    let extracted = match extracted {
        Ok(extracted) => extracted,
        Err(error) => return Outcome::Ready(failed_record(path_text, hash, size, mtime, &error)),
    };
    let chunk_started = Instant::now();
    let chunked = chunk_document(&embedder.encoder, &extracted.pages, options.overlap);
    StageClock::add(&clock.chunk, chunk_started);
    match chunked {
        Ok(chunks) if chunks.is_empty() => {
            let error = ExtractError::NoTextLayer { pages: extracted.pages.len() };
            Outcome::Ready(failed_record(path_text, hash, size, mtime, &error))
        }
        Ok(chunks) => Outcome::Ready(DocumentRecord {
            path: path_text,
            content_hash: hash,
            size,
            mtime,
            status: "indexed",
            error: (!extracted.warnings.is_empty()).then(|| extracted.warnings.join("; ")),
            pages: extracted.pages,
            ocr_pages: extracted.ocr_pages,
            chunks,
        }),
        Err(e) => Outcome::Ready(DocumentRecord {
            status: "failed",
            error: Some(format!("tokenization failed: {e}")),
            ..failed_record(path_text, hash, size, mtime, &ExtractError::Blank)
        }),
    }
}

/// Commits one document; when a chunk's vector is missing at commit time (another document of
/// this run held the same text, was committed first and took the vector with it) the store
/// refuses inside the transaction, the missing texts are embedded now, and the commit is made
/// again, so no chunk is ever written without its vector. Returns how many were embedded here.
fn commit_with_vectors(
    store: &mut Store,
    embedder: &Embedder,
    record: &mut DocumentRecord,
    new_embeddings: &mut Vec<([u8; 32], Vec<f32>)>,
) -> Result<u64, StoreError> {
    let mut reembedded = 0;
    loop {
        let missing = match store.commit_document(record, new_embeddings)? {
            Commit::Done => return Ok(reembedded),
            Commit::MissingVectors(missing) => missing,
        };
        let mut ids = Vec::with_capacity(missing.len());
        for hash in &missing {
            let chunk = record.chunks.iter().find(|c| &c.text_hash == hash).expect("the store names the record's own chunks");
            ids.push(chunk.ids.clone());
        }
        let answers = embedder.engine.submit(Lane::Bulk, ids).wait();
        if let Some(err) = answers.iter().find_map(|a| a.as_ref().err()) {
            record.status = "failed";
            record.error = Some(format!("embedding failed: {err}"));
            record.pages.clear();
            record.chunks.clear();
            new_embeddings.clear();
            continue;
        }
        reembedded += missing.len() as u64;
        new_embeddings.extend(missing.into_iter().zip(answers.into_iter().map(|a| a.expect("checked"))));
    }
}

/// Chunks that have no vector (an index written before this check existed, or damaged by hand),
/// embedded and stored: what `warpfold index --check` and the app's start run.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub chunks_without_vectors: u64,
    pub texts_reembedded: u64,
    pub failures: Vec<String>,
}

/// Finds every chunk whose text has no stored embedding and embeds it.
pub fn repair_missing_vectors(db: &Path, embedder: &Embedder, model: &str) -> Result<CheckReport, IndexError> {
    let mut store = Store::open(db, model, embedder.engine.info().output_dim)?;
    let missing = store.chunks_without_vectors()?;
    let chunks_without_vectors = missing.iter().map(|m| m.chunks).sum();
    let mut failures = Vec::new();
    let mut texts = Vec::new();
    let mut ids = Vec::new();
    for m in missing {
        match embedder.encoder.encode_as(TextRole::Passage, &m.text) {
            Ok(encoded) => {
                texts.push(m.text_hash);
                ids.push(encoded);
            }
            Err(e) => failures.push(format!("a chunk of {}: {e}", m.example_path)),
        }
    }
    let mut vectors = Vec::with_capacity(ids.len());
    if !ids.is_empty() {
        for (hash, answer) in texts.into_iter().zip(embedder.engine.submit(Lane::Bulk, ids).wait()) {
            match answer {
                Ok(v) => vectors.push((hash, v)),
                Err(e) => failures.push(format!("embedding failed: {e}")),
            }
        }
    }
    store.add_embeddings(&vectors)?;
    Ok(CheckReport { chunks_without_vectors, texts_reembedded: vectors.len() as u64, failures })
}

/// Indexes the files collected (by [`collect_files`] from paths, or [`files::collect_within`] from
/// a watched root) into the database at `db` with `embedder` (whose model is `model`); what the
/// collection refused is reported as failed or skipped, each with its reason.
pub fn index_collected(
    collected: Collected,
    db: &Path,
    embedder: &Embedder,
    model: &str,
    options: &IndexOptions,
    progress: &Progress,
) -> Result<IndexReport, IndexError> {
    let started = Instant::now();
    let dim = embedder.engine.info().output_dim;
    let mut writer_store = Store::open(db, model, dim)?;
    let Collected { files, refused } = collected;
    progress.files_total.store((files.len() + refused.len()) as u64, Ordering::Relaxed);
    let mut skipped_files = Vec::new();
    let mut refused_failures = Vec::new();
    for r in refused {
        progress.stage(&r.path, FileStage::Finished { status: r.status, error: Some(r.error.clone()), chunks: 0, pages: 0 });
        progress.files_done.fetch_add(1, Ordering::Relaxed);
        let failure = Failure { path: r.path, error: r.error, status: r.status.into() };
        if r.status == "skipped" {
            skipped_files.push(failure)
        } else {
            refused_failures.push(failure)
        }
    }
    let stats_before = embedder.engine.stats();
    let jobs = options.jobs.max(1);

    let skipped = AtomicU64::new(0);
    let tokens = AtomicU64::new(0);
    let failures = Mutex::new(refused_failures);
    let warnings = Mutex::new(Vec::new());
    let (mut indexed, mut chunks_written, mut chunks_embedded, mut chunks_reembedded) = (0u64, 0u64, 0u64, 0u64);
    let mut write_error: Option<StoreError> = None;
    // Set with the first failed write (a full disk, say): the workers read no more files, so a run
    // does not extract and embed hundreds of documents it cannot write.
    let halted = std::sync::atomic::AtomicBool::new(false);

    let worker_stores = (0..jobs).map(|_| Store::open_existing(db)).collect::<Result<Vec<_>, _>>()?;
    let submit_store = Store::open_existing(db)?;
    let (work_tx, work_rx) = bounded::<PathBuf>(jobs * 4);
    // Each document travels with its span (`document`, its path): extraction and chunking run in
    // it, and the engine's bins that embed its chunks follow from it.
    let (ready_tx, ready_rx) = bounded::<(DocumentRecord, tracing::Span)>(jobs * 2);
    // Documents between submission and commit: bounded by their tokens, not their number, so the
    // engine always holds several bins' worth (a fixed count of 64 small documents kept GPU bins
    // under a tenth full), and memory stays bounded however large each document is.
    let (commit_tx, commit_rx) = bounded::<Prepared>(COMMIT_QUEUE_DOCUMENTS);
    let in_flight = InFlight::new(in_flight_budget(embedder.engine.config().bin_tokens, options.in_flight_bins));
    let clock = StageClock::default();

    std::thread::scope(|scope| {
        scope.spawn(move || {
            let cancelled = || progress.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed));
            for file in files {
                while progress.hold.as_ref().is_some_and(|hold| hold()) && !cancelled() {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                if cancelled() || work_tx.send(file).is_err() {
                    break;
                }
            }
        });
        for store in worker_stores {
            let (work_rx, ready_tx) = (work_rx.clone(), ready_tx.clone());
            let (skipped, progress, clock, halted) = (&skipped, progress, &clock, &halted);
            scope.spawn(move || {
                yield_to_the_device();
                for path in work_rx {
                    if halted.load(Ordering::Relaxed) {
                        break; // the files not read stay where they were (the caller's queue)
                    }
                    let span = tracing::info_span!(parent: None, "document", path = %path.display());
                    match span.in_scope(|| prepare(&path, &store, embedder, options, progress, clock)) {
                        Outcome::Skipped => {
                            progress.stage(&path.display().to_string(), FileStage::Unchanged);
                            skipped.fetch_add(1, Ordering::Relaxed);
                            progress.files_done.fetch_add(1, Ordering::Relaxed);
                        }
                        Outcome::Ready(record) => {
                            if ready_tx.send((record, span)).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
        drop((work_rx, ready_tx));

        // Submitter: queue each document's new chunk texts in the engine as soon as it is ready.
        let (tokens_ref, in_flight_ref, clock_ref) = (&tokens, &in_flight, &clock);
        scope.spawn(move || {
            for (record, span) in ready_rx {
                let submit_started = Instant::now();
                let mut submitted = Vec::new();
                let mut ids = Vec::new();
                if !record.chunks.is_empty() {
                    let hashes: Vec<[u8; 32]> = record.chunks.iter().map(|c| c.text_hash).collect();
                    let known = submit_store.embedded_hashes(&hashes).unwrap_or_default();
                    let mut seen = HashSet::new();
                    for chunk in &record.chunks {
                        if !known.contains(&chunk.text_hash) && seen.insert(chunk.text_hash) {
                            submitted.push(chunk.text_hash);
                            tokens_ref.fetch_add(chunk.ids.len() as u64, Ordering::Relaxed);
                            ids.push(chunk.ids.clone());
                        }
                    }
                }
                let doc_tokens: u64 = ids.iter().map(|i| i.len() as u64).sum();
                StageClock::add(&clock_ref.submit, submit_started);
                in_flight_ref.acquire(doc_tokens);
                progress.stage(&record.path, FileStage::Embedding { chunks: ids.len() as u64 });
                let ticket = (!ids.is_empty()).then(|| span.in_scope(|| embedder.engine.submit(Lane::Bulk, ids)));
                if commit_tx.send(Prepared { record, submitted, ticket, tokens: doc_tokens }).is_err() {
                    break;
                }
            }
        });

        // Writer (this thread): documents in submission order, committed in groups (see
        // [`Store::commit_documents`]): a group is written when the next document's answers are
        // not in yet (so nothing waits behind the device), or at GROUP_DOCUMENTS or GROUP_SECONDS
        // (so the queue shows documents indexed soon after their embeddings came back).
        let mut group: Vec<DocumentCommit> = Vec::new();
        let mut group_started = Instant::now();
        let mut write_group = |group: &mut Vec<DocumentCommit>| {
            if group.is_empty() {
                return;
            }
            if let Some(e) = &write_error {
                // Keep draining so the other stages finish (the error is returned below), and say
                // of every document left what became of it: none stays "embedding" with no answer.
                let error = format!("not written: the index could not be written earlier in this run ({e})");
                for (record, _) in group.drain(..) {
                    progress.stage(&record.path, FileStage::Finished { status: "failed", error: Some(error.clone()), chunks: 0, pages: 0 });
                }
                return;
            }
            let write_started = Instant::now();
            let cpu_started = StageClock::thread_cpu_nanos();
            clock.write_transactions.fetch_add(1, Ordering::Relaxed);
            let commits = writer_store.commit_documents(group.iter().map(|(r, v)| (r, v.as_slice())));
            let commits = match commits {
                Ok(commits) => commits,
                Err(e) => {
                    for (record, _) in group.drain(..) {
                        progress
                            .stage(&record.path, FileStage::Finished { status: "failed", error: Some(e.to_string()), chunks: 0, pages: 0 });
                    }
                    write_error = Some(e);
                    halted.store(true, Ordering::Relaxed);
                    StageClock::add(&clock.write, write_started);
                    clock.write_cpu.fetch_add(StageClock::thread_cpu_nanos().saturating_sub(cpu_started), Ordering::Relaxed);
                    return;
                }
            };
            for ((mut record, mut new_embeddings), commit) in group.drain(..).zip(commits) {
                if let Commit::MissingVectors(_) = commit {
                    // Rolled back alone: embed what is missing and commit it by itself.
                    match commit_with_vectors(&mut writer_store, embedder, &mut record, &mut new_embeddings) {
                        Ok(reembedded) => chunks_reembedded += reembedded,
                        Err(e) => {
                            progress.stage(
                                &record.path,
                                FileStage::Finished { status: "failed", error: Some(e.to_string()), chunks: 0, pages: 0 },
                            );
                            write_error = Some(e);
                            halted.store(true, Ordering::Relaxed);
                            continue;
                        }
                    }
                }
                progress.stage(
                    &record.path,
                    FileStage::Finished {
                        status: record.status,
                        error: record.error.clone(),
                        chunks: record.chunks.len() as u64,
                        pages: record.pages.len() as u32,
                    },
                );
                if record.status == "indexed" {
                    indexed += 1;
                    chunks_written += record.chunks.len() as u64;
                    chunks_embedded += new_embeddings.len() as u64;
                    progress.chunks_embedded.fetch_add(new_embeddings.len() as u64, Ordering::Relaxed);
                    if let Some(warning) = &record.error {
                        warnings.lock().push(Failure { path: record.path.clone(), error: warning.clone(), status: "indexed".into() });
                    }
                } else {
                    failures.lock().push(Failure {
                        path: record.path.clone(),
                        error: record.error.clone().unwrap_or_default(),
                        status: record.status.into(),
                    });
                }
            }
            StageClock::add(&clock.write, write_started);
            clock.write_cpu.fetch_add(StageClock::thread_cpu_nanos().saturating_sub(cpu_started), Ordering::Relaxed);
        };
        loop {
            let next = if group.is_empty() {
                commit_rx.recv().ok()
            } else {
                match commit_rx.try_recv() {
                    Ok(p) => {
                        let ready = p.ticket.as_ref().is_none_or(Ticket::is_answered);
                        if !ready || group.len() >= GROUP_DOCUMENTS || group_started.elapsed().as_secs_f64() >= GROUP_SECONDS {
                            write_group(&mut group);
                        }
                        Some(p)
                    }
                    Err(TryRecvError::Empty) => {
                        write_group(&mut group);
                        commit_rx.recv().ok()
                    }
                    Err(TryRecvError::Disconnected) => None,
                }
            };
            let Some(Prepared { mut record, submitted, ticket, tokens: doc_tokens }) = next else { break };
            let mut new_embeddings = Vec::with_capacity(submitted.len());
            if let Some(ticket) = ticket {
                let wait_started = Instant::now();
                let answers = ticket.wait();
                StageClock::add(&clock.embed_wait, wait_started);
                match answers.iter().find_map(|a| a.as_ref().err()) {
                    Some(err) => {
                        record.status = "failed";
                        record.error = Some(format!("embedding failed: {err}"));
                        record.pages.clear();
                        record.chunks.clear();
                    }
                    None => {
                        new_embeddings = submitted.into_iter().zip(answers.into_iter().map(|a| a.expect("checked"))).collect();
                    }
                }
            }
            // The engine is done with this document's tokens: the submitter may queue more.
            in_flight.release(doc_tokens);
            progress.files_done.fetch_add(1, Ordering::Relaxed);
            if group.is_empty() {
                group_started = Instant::now();
            }
            group.push((record, new_embeddings));
        }
        write_group(&mut group);
    });
    if let Some(e) = write_error {
        return Err(e.into());
    }
    let pruned = if options.prune { writer_store.prune_missing()? } else { Vec::new() };

    let stats_after = embedder.engine.stats();
    let seconds = started.elapsed().as_secs_f64();
    let mut failures = failures.into_inner();
    failures.sort_by(|a, b| a.path.cmp(&b.path));
    let mut warnings = warnings.into_inner();
    warnings.sort_by(|a, b| a.path.cmp(&b.path));
    let tokens = tokens.into_inner();
    let total = progress.files_total.load(Ordering::Relaxed);
    Ok(IndexReport {
        documents_total: total,
        documents_indexed: indexed,
        documents_skipped: skipped.into_inner(),
        documents_failed: failures.len() as u64,
        documents_pruned: pruned.len() as u64,
        failures,
        skipped: skipped_files,
        warnings,
        pruned,
        chunks: chunks_written,
        chunks_embedded,
        chunks_reembedded,
        tokens,
        pad_tokens: (stats_after.computed_tokens - stats_after.real_tokens)
            .saturating_sub(stats_before.computed_tokens - stats_before.real_tokens),
        bins: stats_after.bins - stats_before.bins,
        backend_busy_seconds: stats_after.backend_busy_seconds - stats_before.backend_busy_seconds,
        stages: clock.seconds(),
        device_starved_seconds: stats_after.starved_seconds - stats_before.starved_seconds,
        mean_bin_fill: stats_after.since(&stats_before).bulk_fill(embedder.engine.config().bin_tokens),
        seconds,
        tokens_per_second: tokens as f64 / seconds.max(1e-9),
        documents_per_second: total as f64 / seconds.max(1e-9),
    })
}
