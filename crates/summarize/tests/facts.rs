//! Summaries a person can trust: the CPU default's summaries of everyday documents with known
//! facts (tests/data/facts: a lease, an invoice, an offer letter, a bank letter, a handbook, a
//! form, meeting notes, instructions, and a receipt read back by OCR from its page image) state no
//! figure or name their document does not hold, once checked. Judged twice: by the summarizer's
//! own check (`grounding`, which must find nothing left) and by a cruder, independent look at the
//! numbers and names (`fact_documents::unsupported_numbers_and_names`).
//!
//! The scores (invented items in the first drafts, key facts kept) are printed; the whole set's are
//! in BENCHMARKS.md (examples/facts.rs).

mod fact_documents;

use std::path::PathBuf;

use candle_core::Device;
use warpfold_summarize::grounding::{self, Source};
use warpfold_summarize::{ChatModel, SummarizeOptions, Summarizer};

/// One document of each short kind, and a scan.
const SUBSET: &[&str] =
    &["lease-02", "invoice-01", "offer-01", "bank-01", "handbook-01", "form-01", "meeting-01", "instructions-01", "receipt-02"];

#[test]
fn summaries_by_the_cpu_default_state_no_figure_or_name_their_document_does_not() {
    let all = fact_documents::load(&fact_documents::data_file());
    assert!(all.len() >= 40 && all.iter().filter(|d| d.scan).count() >= 6, "the set: {} documents", all.len());
    let docs: Vec<&fact_documents::FactDocument> = SUBSET.iter().map(|id| all.iter().find(|d| d.id == *id).expect(id)).collect();
    assert!(docs.iter().any(|d| d.scan), "a scan is among them");
    let texts: Vec<String> = docs.iter().map(|d| fact_documents::source_text(d).unwrap_or_else(|e| panic!("{}: {e}", d.id))).collect();

    // The CPU's default chat model, as `warpfold summarize`, the server and the desktop resolve it.
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models");
    let model = warpfold_runtime::chat_model(None, &Device::Cpu, &models, |e| eprintln!("fetching {} ({})", e.name, e.source()))
        .expect("the CPU's default chat model is there or can be fetched");
    eprintln!("the CPU's default chat model: {}", model.display());
    let chat = ChatModel::load(&model, &Device::Cpu).expect("the model loads");
    let mut summarizer = Summarizer::new(&chat, SummarizeOptions::default()).unwrap();
    let results = summarizer.summarize_documents(&texts).unwrap();

    let mut problems = Vec::new();
    let (mut drafts_with_invention, mut kept, mut stated) = (0, 0, 0);
    for ((doc, text), r) in docs.iter().zip(&texts).zip(&results) {
        let source = Source::new(text);
        let draft = r.draft.as_deref().unwrap_or(&r.summary);
        let invented = grounding::check(draft, &source).into_iter().flat_map(|s| s.unsupported).collect::<Vec<_>>();
        drafts_with_invention += usize::from(!invented.is_empty());
        let facts = doc.key_facts_kept(&r.summary);
        kept += facts;
        stated += doc.facts.len();
        eprintln!(
            "{}: {} of {} key facts; first draft's unsupported items {invented:?}; rewritten {}, {} sentence(s) removed\n  {}",
            doc.id,
            facts,
            doc.facts.len(),
            r.check.rewritten,
            r.check.removed.len(),
            r.summary
        );
        if !r.check.checked {
            problems.push(format!("{}: not checked", doc.id));
        }
        let left: Vec<String> = grounding::check(&r.summary, &source).into_iter().flat_map(|s| s.unsupported).collect();
        if !left.is_empty() {
            problems.push(format!("{}: the check left {left:?} in {:?}", doc.id, r.summary));
        }
        let crude = fact_documents::unsupported_numbers_and_names(&r.summary, text);
        if !crude.is_empty() {
            problems.push(format!("{}: numbers or names not in the document: {crude:?} in {:?}", doc.id, r.summary));
        }
    }
    eprintln!("first drafts with an unsupported item: {drafts_with_invention} of {}; key facts kept {kept} of {stated}", docs.len());
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        results.iter().filter(|r| !r.summary.trim().is_empty()).count() >= docs.len() / 2,
        "most documents keep a summary: {results:#?}"
    );
}
