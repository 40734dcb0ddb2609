//! Long documents by map-reduce: chunk summaries, then a summary of the summaries.
//!
//! Why not truncate: a summary of the first pages presented as a summary of the document is wrong
//! without saying so. Every document is cut into consecutive chunks that cover all of its text;
//! each chunk is summarized, then the chunk summaries (in order) are summarized together. When
//! even the summaries do not fit one prompt, they are cut and summarized again, a level up, until
//! they do. The chunks of *all* documents go to the model in one call per level, so that the
//! generator packs and batches them together.
//!
//! The orchestration is generic over [`Summarize`] so that tests can check coverage with a
//! stand-in model.

use std::ops::Range;

/// What a task asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    /// The whole document fits one prompt.
    Whole,
    /// Part `index` (from 0) of `of` consecutive parts, at map level `level` (0: the document's
    /// own text; above: summaries of the level below).
    Part { level: usize, index: usize, of: usize },
    /// Summaries of every part, joined in order, to make one.
    Combine,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub document: usize,
    pub kind: TaskKind,
    pub text: String,
    /// The English name of the whole document's language when it is not English
    /// ([`crate::language_name`]): every task of a document is written in it. Told from a part, or
    /// from summaries of parts, a long Russian manual page came out in English (the parts' option
    /// lists read as English, and the English summaries of those made the whole English).
    pub language: Option<&'static str>,
}

/// What the model made of a task.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    pub summary: String,
    pub prompt_tokens: usize,
    pub output_tokens: usize,
    /// When it finished, in seconds since the run began (what a document's `seconds` reports).
    pub finished_at: f64,
    /// The first attempt looped and this is a second one (its tokens are counted in too).
    pub retried: bool,
}

/// The model side of map-reduce.
pub trait Summarize {
    type Error;
    /// Tokens of `text` as the model counts them.
    fn count_tokens(&self, text: &str) -> usize;
    /// One summary per task, in order; the implementation should run them together.
    fn summarize(&mut self, tasks: &[Task]) -> Result<Vec<Done>, Self::Error>;
}

/// A document's result.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DocumentSummary {
    pub summary: String,
    /// Tokens of the document's own text.
    pub document_tokens: usize,
    /// Prompt tokens over every task of this document.
    pub tokens_in: usize,
    /// Generated tokens over every task of this document.
    pub tokens_out: usize,
    /// Chunks of the document's own text.
    pub chunks: usize,
    /// Model calls that included this document (1: it fitted one prompt).
    pub rounds: usize,
    /// Seconds from the start of the run until this document's summary was ready.
    pub seconds: f64,
    /// Summaries of this document (of its chunks, or the final one) that looped and were written
    /// again.
    pub retried: usize,
    /// What the check against the document found ([`crate::grounding`]); unchecked until
    /// [`crate::Summarizer::summarize_documents`] checks it.
    pub check: crate::grounding::SummaryCheck,
    /// The model's first summary, when the one kept differs from it (written again or trimmed by
    /// the check): what the check caught, for measuring it.
    pub draft: Option<String>,
}

/// Why map-reduce could not finish.
#[derive(Debug, thiserror::Error)]
pub enum MapReduceError<E> {
    #[error(transparent)]
    Model(E),
    #[error("document {document}: the summaries stopped getting shorter after {rounds} rounds (chunk limit {chunk_tokens} tokens)")]
    NoProgress { document: usize, rounds: usize, chunk_tokens: usize },
}

/// Most levels before giving up: with summaries at most half a chunk, each level at least halves.
const MAX_ROUNDS: usize = 24;

/// Consecutive byte ranges covering all of `text`, each at most `max_tokens` by `count`, cut after
/// whitespace where possible (inside a word only when one word alone is too long).
pub fn split_by_tokens(text: &str, max_tokens: usize, count: &dyn Fn(&str) -> usize) -> Vec<Range<usize>> {
    let max_tokens = max_tokens.max(1);
    if text.is_empty() {
        return Vec::new();
    }
    // 1. Units: a word with the whitespace that follows it.
    let mut units: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            in_space = true;
        } else if in_space {
            units.push(start..i);
            start = i;
            in_space = false;
        }
    }
    units.push(start..text.len());
    // 2. Greedy runs of units whose summed counts fit; a unit too long alone is cut by characters.
    let mut pieces: Vec<Range<usize>> = Vec::new();
    let mut current: Option<(Range<usize>, usize)> = None;
    for u in units {
        let n = count(&text[u.clone()]);
        if n > max_tokens {
            if let Some((r, _)) = current.take() {
                pieces.push(r);
            }
            pieces.extend(split_chars(text, u, max_tokens, count));
            continue;
        }
        current = match current {
            Some((r, total)) if total + n <= max_tokens => Some((r.start..u.end, total + n)),
            Some((r, _)) => {
                pieces.push(r);
                Some((u, n))
            }
            None => Some((u, n)),
        };
    }
    if let Some((r, _)) = current {
        pieces.push(r);
    }
    // 3. Counts are not always additive (merges across a unit boundary): check each piece whole and
    //    halve any that is over, at a unit boundary.
    let mut out = Vec::with_capacity(pieces.len());
    let mut stack: Vec<Range<usize>> = pieces.into_iter().rev().collect();
    while let Some(r) = stack.pop() {
        if count(&text[r.clone()]) <= max_tokens {
            out.push(r);
            continue;
        }
        let mid = r.start + (r.end - r.start) / 2;
        let cut = text[mid..r.end]
            .char_indices()
            .find(|&(i, c)| c.is_whitespace() && i > 0)
            .map(|(i, _)| mid + i)
            .or_else(|| (mid + 1..r.end).find(|&i| text.is_char_boundary(i)))
            .filter(|&c| c > r.start && c < r.end);
        match cut {
            Some(c) => {
                stack.push(c..r.end);
                stack.push(r.start..c);
            }
            None => out.push(r),
        }
    }
    out
}

/// Cuts one long unit by characters into pieces of at most `max_tokens`.
fn split_chars(text: &str, unit: Range<usize>, max_tokens: usize, count: &dyn Fn(&str) -> usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = unit.start;
    while start < unit.end {
        // The longest prefix that fits, by bisection on char boundaries.
        let bounds: Vec<usize> = text[start..unit.end].char_indices().map(|(i, _)| start + i).skip(1).chain([unit.end]).collect();
        let (mut lo, mut hi) = (0usize, bounds.len() - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if count(&text[start..bounds[mid]]) <= max_tokens {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        out.push(start..bounds[lo]);
        start = bounds[lo];
    }
    out
}

/// Summarizes every document, long ones by map-reduce with pieces of at most `chunk_tokens`.
pub fn summarize_documents<S: Summarize>(
    model: &mut S,
    documents: &[String],
    chunk_tokens: usize,
) -> Result<Vec<DocumentSummary>, MapReduceError<S::Error>> {
    let mut results: Vec<DocumentSummary> = vec![DocumentSummary::default(); documents.len()];
    // Per document, the tasks of the next call (empty: done).
    let mut pending: Vec<Vec<Task>> = Vec::with_capacity(documents.len());
    for (d, text) in documents.iter().enumerate() {
        let count = |s: &str| model.count_tokens(s);
        results[d].document_tokens = model.count_tokens(text);
        let pieces = split_by_tokens(text, chunk_tokens, &count);
        results[d].chunks = pieces.len();
        pending.push(tasks_for(d, text, &pieces, 0, crate::language_name(text)));
    }
    let mut level = vec![0usize; documents.len()];
    loop {
        let tasks: Vec<Task> = pending.iter().flatten().cloned().collect();
        if tasks.is_empty() {
            return Ok(results);
        }
        let done = model.summarize(&tasks).map_err(MapReduceError::Model)?;
        let mut done = done.into_iter();
        for d in 0..documents.len() {
            let doc_tasks = std::mem::take(&mut pending[d]);
            if doc_tasks.is_empty() {
                continue;
            }
            let outs: Vec<Done> = doc_tasks.iter().map(|_| done.next().expect("one result per task. This is a bug.")).collect();
            let r = &mut results[d];
            r.rounds += 1;
            for o in &outs {
                r.tokens_in += o.prompt_tokens;
                r.tokens_out += o.output_tokens;
                r.retried += usize::from(o.retried);
            }
            let language = doc_tasks[0].language;
            match doc_tasks[0].kind {
                TaskKind::Whole | TaskKind::Combine => {
                    let o = outs.into_iter().next().expect("one task. This is a bug.");
                    r.summary = o.summary;
                    r.seconds = o.finished_at;
                }
                TaskKind::Part { .. } => {
                    if r.rounds > MAX_ROUNDS {
                        return Err(MapReduceError::NoProgress { document: d, rounds: r.rounds, chunk_tokens });
                    }
                    let joined = outs.iter().map(|o| o.summary.trim()).collect::<Vec<_>>().join("\n\n");
                    let count = |s: &str| model.count_tokens(s);
                    if count(&joined) <= chunk_tokens {
                        pending[d] = vec![Task { document: d, kind: TaskKind::Combine, text: joined, language }];
                    } else {
                        level[d] += 1;
                        let pieces = split_by_tokens(&joined, chunk_tokens, &count);
                        if pieces.len() >= doc_tasks.len() {
                            return Err(MapReduceError::NoProgress { document: d, rounds: r.rounds, chunk_tokens });
                        }
                        pending[d] = tasks_for(d, &joined, &pieces, level[d], language);
                    }
                }
            }
        }
    }
}

fn tasks_for(document: usize, text: &str, pieces: &[Range<usize>], level: usize, language: Option<&'static str>) -> Vec<Task> {
    match pieces.len() {
        0 => Vec::new(),
        1 if level == 0 => vec![Task { document, kind: TaskKind::Whole, text: text.to_string(), language }],
        of => pieces
            .iter()
            .enumerate()
            .map(|(index, r)| Task { document, kind: TaskKind::Part { level, index, of }, text: text[r.clone()].to_string(), language })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> usize {
        s.split_whitespace().count()
    }

    /// Summarizes a task as a fixed number of marker words naming it, and records every call.
    struct Recorder {
        calls: Vec<Vec<Task>>,
        summary_words: usize,
    }

    impl Summarize for Recorder {
        type Error = String;
        fn count_tokens(&self, text: &str) -> usize {
            words(text)
        }
        fn summarize(&mut self, tasks: &[Task]) -> Result<Vec<Done>, String> {
            let n = self.calls.iter().map(|c| c.len()).sum::<usize>();
            let out = tasks
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let id = format!("S{}", n + i);
                    Done {
                        summary: vec![id; self.summary_words].join(" "),
                        prompt_tokens: words(&t.text),
                        output_tokens: self.summary_words,
                        finished_at: 0.0,
                        retried: false,
                    }
                })
                .collect();
            self.calls.push(tasks.to_vec());
            Ok(out)
        }
    }

    fn document(n: usize, seed: u64) -> String {
        let mut x = seed;
        (0..n)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let sep = if (x >> 60) == 0 { "\n\n" } else { " " };
                format!("w{i}{sep}")
            })
            .collect()
    }

    #[test]
    fn splitting_covers_the_text_in_order_within_the_limit() {
        let text = format!("{} {} end", document(500, 3), "x".repeat(90));
        // A token per 8 bytes: the 90-byte word alone is 12 tokens, over the limit of 10.
        let count = |s: &str| s.len().div_ceil(8);
        let pieces = split_by_tokens(&text, 10, &count);
        assert_eq!(pieces.first().unwrap().start, 0);
        assert_eq!(pieces.last().unwrap().end, text.len());
        for w in pieces.windows(2) {
            assert_eq!(w[0].end, w[1].start, "consecutive, no gap, no overlap");
        }
        for p in &pieces {
            assert!(count(&text[p.clone()]) <= 10, "{:?}", &text[p.clone()]);
            assert!(!p.is_empty());
        }
        assert!(split_by_tokens("", 10, &count).is_empty());
        // Multi-byte characters are never cut.
        let wide = "é".repeat(100);
        let pieces = split_by_tokens(&wide, 3, &count);
        assert_eq!(pieces.iter().map(|r| &wide[r.clone()]).collect::<String>(), wide);
    }

    #[test]
    fn map_reduce_covers_every_chunk_of_every_document() {
        let docs = vec![document(40, 1), document(1000, 2), String::new(), document(3000, 3)];
        let mut model = Recorder { calls: Vec::new(), summary_words: 30 };
        let out = summarize_documents(&mut model, &docs, 100).unwrap();
        // The short document is one Whole task; the empty one asks for nothing.
        assert_eq!(out[0].chunks, 1);
        assert_eq!(out[0].rounds, 1);
        assert_eq!(out[2], DocumentSummary::default());
        for d in [1, 3] {
            // Level 0: the parts, in order, are exactly the document.
            let parts: Vec<&Task> = model.calls[0].iter().filter(|t| t.document == d).collect();
            assert!(parts.len() >= 10, "document {d}: {} parts", parts.len());
            assert_eq!(parts.iter().map(|t| t.text.as_str()).collect::<String>(), docs[d], "document {d}");
            assert_eq!(out[d].chunks, parts.len());
            // Every level's summaries all reach the next level, in order, and the last call is one
            // Combine holding every summary of the level below.
            let mut prev: Vec<String> = Vec::new();
            let mut seen = 0;
            for (c, call) in model.calls.iter().enumerate() {
                let mine: Vec<&Task> = call.iter().filter(|t| t.document == d).collect();
                if mine.is_empty() {
                    continue;
                }
                if c > 0 {
                    let text: String = mine.iter().map(|t| t.text.as_str()).collect::<Vec<_>>().join("");
                    let mut at = 0;
                    for s in &prev {
                        let found = text[at..].find(s.as_str()).unwrap_or_else(|| panic!("document {d}, call {c}: summary {s:?} lost"));
                        at += found + s.len();
                    }
                }
                let base: usize = model.calls[..c].iter().map(|k| k.len()).sum();
                prev = call
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.document == d)
                    .map(|(i, _)| vec![format!("S{}", base + i); 30].join(" "))
                    .collect();
                seen += 1;
            }
            let last = model.calls.iter().rev().find_map(|c| c.iter().find(|t| t.document == d)).unwrap();
            assert_eq!(last.kind, TaskKind::Combine, "document {d}");
            assert_eq!(out[d].rounds, seen);
            assert!(out[d].summary.starts_with('S'));
        }
        // 3000 words in 100-word chunks make 30 summaries of 30 words: more than a chunk, so the
        // long document needed a second map level.
        assert!(model.calls.iter().flatten().any(|t| t.document == 3 && matches!(t.kind, TaskKind::Part { level: 1, .. })));
        // All documents' tasks of a level go in one call.
        assert!(model.calls[0].iter().any(|t| t.document == 0) && model.calls[0].iter().any(|t| t.document == 3));
        assert_eq!(out[1].tokens_out, model.calls.iter().flatten().filter(|t| t.document == 1).count() * 30);
    }

    /// A long Russian manual page whose parts are half option lists in English: every task of it,
    /// the summaries of its parts (in English here) included, is written in Russian.
    #[test]
    fn every_task_of_a_document_is_written_in_its_language() {
        // from Debian's Russian ls(1)
        let russian = "Выводит информацию о ФАЙЛАХ (текущий каталог по умолчанию). Сортирует записи в алфавитном порядке, \
            если не указан ни --sort, ни один из параметров -cftuvSUX. Аргументы, обязательные для длинных параметров, \
            обязательны и для коротких. ";
        let options = "-a, --all do not ignore entries starting with . -l use a long listing format ";
        let long = format!("{}{}", russian.repeat(30), options.repeat(10));
        let docs = vec![long, "A short English note about the office.".to_string()];
        let mut model = Recorder { calls: Vec::new(), summary_words: 30 };
        summarize_documents(&mut model, &docs, 100).unwrap();
        let tasks: Vec<&Task> = model.calls.iter().flatten().collect();
        assert!(tasks.iter().any(|t| t.document == 0 && t.kind == TaskKind::Combine));
        for t in &tasks {
            assert_eq!(t.language, if t.document == 0 { Some("Russian") } else { None }, "{:?}", t.kind);
        }
    }

    #[test]
    fn summaries_that_do_not_shrink_are_an_error_not_a_loop() {
        let docs = vec![document(1000, 5)];
        let mut model = Recorder { calls: Vec::new(), summary_words: 100 };
        let err = summarize_documents(&mut model, &docs, 100).unwrap_err();
        assert!(matches!(err, MapReduceError::NoProgress { document: 0, .. }), "{err}");
    }
}
