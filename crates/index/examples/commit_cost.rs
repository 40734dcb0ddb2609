//! What the writer's SQLite transactions cost per document, alone or in groups: the stage that
//! bound the app core's indexing on a GPU (BENCHMARKS.md, issue 14). Documents of `CHUNKS` chunks
//! of ~1,000 characters of varied words and 384-dim vectors (MiniLM's) are committed into a fresh
//! index one per transaction, then in groups of several sizes.
//!
//! With `readers` > 0, that many threads meanwhile ask the index what the indexer's workers ask it
//! (which chunk texts have vectors, a document's state), each in its own short read, as they do
//! during a run.
//!
//! cargo run --release -p warpfold-index --example commit_cost -- [documents] [chunks] [readers]

use std::time::Instant;

use sha2::{Digest, Sha256};
use warpfold_index::chunk::DocumentChunk;
use warpfold_index::store::{Commit, DocumentCommit, DocumentRecord, Store};

const WORDS: &[&str] = &[
    "bridge",
    "river",
    "council",
    "budget",
    "steel",
    "cable",
    "inspection",
    "report",
    "tender",
    "engineer",
    "traffic",
    "load",
    "span",
    "north",
    "south",
    "repair",
    "contract",
    "winter",
    "salt",
    "corrosion",
    "survey",
    "deck",
    "pier",
    "funding",
    "delay",
    "schedule",
    "crew",
    "weld",
    "paint",
    "concrete",
    "joint",
    "bearing",
    "vote",
    "mayor",
];

fn text(seed: &mut u64, chars: usize) -> String {
    let mut out = String::with_capacity(chars + 16);
    while out.len() < chars {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        out.push_str(WORDS[(*seed >> 33) as usize % WORDS.len()]);
        out.push_str(if (*seed >> 20).is_multiple_of(13) { ". " } else { " " });
        if (*seed >> 40).is_multiple_of(7) {
            out.push_str(&format!("{} ", (*seed >> 44) % 10_000));
        }
    }
    out
}

fn record(i: usize, chunks: usize, seed: &mut u64) -> DocumentCommit {
    let mut cs = Vec::new();
    let mut vectors = Vec::new();
    let mut pages = Vec::new();
    for c in 0..chunks {
        let t = text(seed, 1000);
        let hash: [u8; 32] = Sha256::digest(t.as_bytes()).into();
        let v: Vec<f32> = (0..384).map(|k| ((k as u64 ^ *seed) % 1000) as f32 / 1000.0).collect();
        vectors.push((hash, v));
        pages.push(t.clone());
        cs.push(DocumentChunk {
            ordinal: c,
            text: t,
            text_hash: hash,
            ids: vec![0; 250],
            page_start: c as u32 + 1,
            page_end: c as u32 + 1,
            page_breaks: vec![(0, c as u32 + 1)],
            char_start: c * 1000,
            char_end: c * 1000 + 1000,
        });
    }
    let record = DocumentRecord {
        path: format!("/docs/{i:05}.txt"),
        content_hash: format!("{i:064x}"),
        size: 1000 * chunks as u64,
        mtime: 0,
        status: "indexed",
        error: None,
        pages,
        ocr_pages: Vec::new(),
        chunks: cs,
    };
    (record, vectors)
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("numbers")).collect();
    let documents = args.first().copied().unwrap_or(300);
    let chunks = args.get(1).copied().unwrap_or(30);
    let readers = args.get(2).copied().unwrap_or(0);
    let dir = tempfile::tempdir().unwrap();
    println!(
        "{documents} documents of {chunks} chunks (~1,000 characters, 384-dim vectors) into a fresh index in {}, {readers} readers",
        dir.path().display()
    );
    for group in [1usize, 8, 32, 128] {
        let db = dir.path().join(format!("group-{group}.db"));
        let mut store = Store::open(&db, "bench", 384).unwrap();
        let mut seed = 7u64;
        let docs: Vec<_> = (0..documents).map(|i| record(i, chunks, &mut seed)).collect();
        let done = std::sync::atomic::AtomicBool::new(false);
        let hashes: Vec<[u8; 32]> = docs.iter().flat_map(|(_, v)| v.iter().map(|(h, _)| *h)).collect();
        let s = std::thread::scope(|scope| {
            for r in 0..readers {
                let (db, done, hashes) = (&db, &done, &hashes);
                scope.spawn(move || {
                    let reader = Store::open_existing(db).unwrap();
                    let mut i = r;
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        reader.embedded_hashes(&hashes[i % hashes.len()..][..8.min(hashes.len() - i % hashes.len())]).unwrap();
                        reader.document_state(&format!("/docs/{:05}.txt", i % documents)).unwrap();
                        i += 7;
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                });
            }
            let started = Instant::now();
            for batch in docs.chunks(group) {
                let results = store.commit_documents(batch.iter().map(|(r, v)| (r, v.as_slice()))).unwrap();
                assert!(results.iter().all(|r| matches!(r, Commit::Done)));
            }
            let s = started.elapsed().as_secs_f64();
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            s
        });
        println!("groups of {group:>3}: {:>7.2} ms per document ({:.2} s in all)", s * 1000.0 / documents as f64, s);
    }
}
