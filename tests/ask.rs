//! `warpfold ask` with the CPU's default chat model, end to end: the documents of
//! tests/data/facts indexed by the real binary (the four long reports as PDFs of several pages),
//! questions of tests/data/qa asked through `ask --questions`. Each answerable question's answer
//! must hold its fact and cite the page of its document that holds it; each unanswerable one must
//! be answered "Not in your documents". A subset runs here (the whole set is measured by
//! bench/qa/run.sh).

use crate::ask_documents::{lines, normalized, page_of, write_documents, Question};
use crate::common::{repo, warpfold};

/// Asked here: two questions on pages past the first of the long reports, a lease, an invoice, a
/// letter in Spanish, a parking-permit form; three whose answer no document holds (one names a real landlord).
const SUBSET: &[&str] = &["q001", "q058", "q064", "q080", "q010", "q030", "q084", "q093", "q095"];

#[test]
fn answers_hold_the_fact_and_cite_its_page_or_say_it_is_not_in_the_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let docs_dir = tmp.path().join("docs");
    std::fs::create_dir(&docs_dir).unwrap();
    let docs = write_documents(&docs_dir, &repo());
    assert!(docs.iter().any(|(_, _, pages)| pages.len() >= 5), "the reports span pages");
    let db = tmp.path().join("index.db");
    let out = warpfold().arg("index").arg(&docs_dir).arg("--db").arg(&db).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let all: Vec<Question> = lines(&repo().join("tests/data/qa/questions.jsonl"));
    let asked: Vec<&Question> = SUBSET.iter().map(|id| all.iter().find(|q| q.id == *id).expect("a question of the set")).collect();
    let file = tmp.path().join("questions.jsonl");
    std::fs::write(&file, asked.iter().map(|q| serde_json::to_string(q).unwrap() + "\n").collect::<String>()).unwrap();
    let out = warpfold().args(["ask", "--db"]).arg(&db).arg("--questions").arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answers: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), asked.len());

    // every answer is judged before anything is asserted, so that a failure shows them all
    let (mut right, mut refused, mut answerable_asked) = (0, 0, 0);
    let mut misses = Vec::new();
    for (q, a) in asked.iter().zip(&answers) {
        let text = a["answer"].as_str().unwrap();
        let answerable = a["answerable"].as_bool().unwrap();
        let cited: Vec<(String, u64)> = a["citations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["path"].as_str().unwrap().to_string(), c["page"].as_u64().unwrap()))
            .collect();
        eprintln!("{} {}\n  -> {text} {cited:?} removed {}", q.id, q.question, a["removed"]);
        // what holds for every answer: one that answers cites a passage and holds only what it
        // cites; one that does not says so in the agreed words and cites nothing
        assert_eq!(answerable, !cited.is_empty(), "{}: {a}", q.id);
        if !answerable {
            assert_eq!(text, "Not in your documents.", "{}", q.id);
        }
        if !q.answerable {
            refused += usize::from(!answerable);
            if answerable {
                misses.push(format!("{}: answered {text:?}, but no document holds the answer", q.id));
            }
            continue;
        }
        answerable_asked += 1;
        let (_, path, pages) = docs.iter().find(|(id, _, _)| Some(id) == q.doc.as_ref()).expect("the question's document");
        let evidence = q.evidence.as_deref().expect("an answerable question's evidence");
        let page = page_of(pages, evidence).expect("the evidence is on a page") as u64;
        let missing: Vec<&String> = q.answer_keys.iter().filter(|k| !normalized(text).contains(&normalized(k))).collect();
        let path = path.canonicalize().unwrap().display().to_string();
        let cites_page = cited.iter().any(|(p, n)| *p == path && *n == page);
        if answerable && missing.is_empty() && cites_page {
            right += 1;
        } else {
            misses.push(format!("{}: {text:?} (missing {missing:?}), cites {cited:?}; the fact is on page {page} of {path}", q.id));
        }
    }
    eprintln!(
        "{right} of {answerable_asked} answered with the fact and its page; {refused} of {} refused; misses: {misses:#?}",
        asked.len() - answerable_asked
    );
    // A floor one below what this model holds (Qwen2.5-Coder-1.5B, greedy; 2-core Intel Xeon, 2026-12-06: 4 of 6
    // and 2 of 3, the misses a question on a long report answered from the wrong passage, a penalty
    // left unread, and an address given as a date of birth). The whole set: BENCHMARKS.md.
    assert!(right >= 3, "{right} of {answerable_asked} answerable questions answered with the fact and its page: {misses:#?}");
    assert!(refused >= 2, "{refused} unanswerable questions refused: {misses:#?}");
}
