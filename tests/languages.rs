//! Search in the languages people write: documents in French, German, Spanish, Russian, Japanese,
//! Chinese and English with planted facts (tests/data/languages), each found in the top three by a
//! question in its own language, through the real `warpfold index` and `warpfold search` with the
//! default (English) embedding model. Chinese and Japanese questions share no spaces with their
//! documents, so this also holds the keyword index's character pairs to account; only English
//! passages rank by the model's nearest vectors too, as it reads no other language (crates/index/src/language.rs).

use serde_json::Value;

use crate::common::{repo, warpfold};

#[derive(serde::Deserialize)]
struct PlantedFact {
    language: String,
    file: String,
    text: String,
    question: String,
    fact: String,
}

fn planted() -> Vec<PlantedFact> {
    let text = std::fs::read_to_string(repo().join("tests/data/languages/documents.jsonl")).unwrap();
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn each_planted_fact_is_found_in_the_top_three_by_a_question_in_its_language() {
    let facts = planted();
    let languages: std::collections::BTreeSet<&str> = facts.iter().map(|f| f.language.as_str()).collect();
    assert!(["fr", "de", "es", "ru", "ja", "zh"].iter().all(|l| languages.contains(l)), "{languages:?}");
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    for fact in &facts {
        assert!(fact.text.contains(&fact.fact), "{}: the fact is in its text", fact.file);
        std::fs::write(docs.join(&fact.file), &fact.text).unwrap();
    }
    let db = dir.path().join("index.db");
    let out = warpfold().args(["index"]).arg(&docs).arg("--db").arg(&db).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Every document's language is told and listed; the English model reads only English fully.
    let listed: Vec<(&str, f64)> = report["languages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["code"].as_str().unwrap_or("-"), l["model_weight"].as_f64().unwrap()))
        .collect();
    for (code, weight) in [("fra", 0.0), ("deu", 0.0), ("spa", 0.0), ("rus", 0.0), ("jpn", 0.0), ("cmn", 0.0), ("eng", 1.0)] {
        assert!(listed.contains(&(code, weight)), "{code} with weight {weight} in {listed:?}");
    }
    let mut misses = Vec::new();
    for fact in &facts {
        let out = warpfold().args(["search", &fact.question, "--db"]).arg(&db).args(["-k", "3", "--json"]).output().unwrap();
        assert!(out.status.success(), "{}: {}", fact.question, String::from_utf8_lossy(&out.stderr));
        let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
        let top: Vec<&str> = hits.as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap()).collect();
        if !top.iter().any(|p| p.ends_with(&format!("/{}", fact.file))) {
            misses.push(format!("{} ({}): {top:?}", fact.question, fact.file));
        }
    }
    assert!(misses.is_empty(), "questions whose document is not in the top three:\n{}", misses.join("\n"));
    // The language filter keeps one language's documents.
    let out = warpfold().args(["search", "2026", "--db"]).arg(&db).args(["-k", "10", "--json", "--language", "jpn"]).output().unwrap();
    let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
    let paths: Vec<&str> = hits.as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap()).collect();
    assert!(!paths.is_empty() && paths.iter().all(|p| p.ends_with("chintai-yamada.txt") || p.ends_with("kyoto-ryokou.txt")), "{paths:?}");
}
