//! warpfold's document indexer: files in, a searchable local index out.
//!
//! - [`extract`]: PDF, text and Markdown to page texts; PDFs in an isolated, time- and
//!   memory-limited worker process, every failure a specific error for that file.
//! - [`files`]: which files a run reads (links out of a chosen folder, FIFOs and undecodable
//!   names refused with reasons) and reading them bounded, from the path that was checked.
//! - [`chunk`]: token-aware, overlapping chunks that cover every token, with page spans and
//!   character offsets.
//! - [`store`]: the SQLite index (documents, pages, chunks, embeddings by text hash, FTS5).
//! - [`keyword`]: BM25 keyword and phrase rankings over the store's FTS5 index; [`segment`]: words
//!   in scripts written without spaces (Chinese, Japanese, Korean) cut into character pairs for it.
//! - [`language`]: each chunk's and query's language, and how much an embedding model counts in
//!   it when rankings are fused.
//! - [`summaries`]: document summaries in the index, by content hash and model.
//! - [`search`]: cosine + BM25 merged by reciprocal rank fusion, at most two hits of a document
//!   in the first five; [`filter`]: by folder, file type and modification time, inside each
//!   ranking; [`snippet`]: the sentence of a hit that answers, and the words to mark
//!   ([`stopwords`] never among them).
//! - [`shard`], [`merge`], [`shard_search`]: one corpus split over many runs by a stable path hash, the
//!   shard indexes merged into one, or searched together as if merged.
//! - [`pipeline`]: the parallel, bounded, resumable run that ties them together.
//! - [`poppler`]: Poppler's pdftoppm and pdftotext, fed the checked bytes on stdin.
//! - [`sandbox`]: the extraction worker's Landlock sandbox (reads of the system only).
//! - [`pdfgen`]: PDFs with known content, for the tests and the bundled samples.
//!
//! No Tauri and no CUDA here: the desktop shell and the GPU backend plug in from outside.

pub mod chunk;
pub mod docgen;
pub mod extract;
pub mod files;
pub mod filter;
pub mod formats;
pub mod keyword;
pub mod language;
pub mod merge;
pub mod ocr;
pub mod pdfgen;
pub mod pdfpages;
pub mod pipeline;
pub mod poppler;
pub mod samples;
pub mod sandbox;
pub mod scangen;
pub mod search;
pub mod segment;
pub mod shard;
pub mod shard_search;
pub mod snippet;
pub mod stem;
pub mod stopwords;
pub mod store;
pub mod summaries;
pub mod text;

pub use pipeline::{collect_files, index_collected, IndexOptions, IndexReport, Progress};
