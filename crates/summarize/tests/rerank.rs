//! The CPU's default chat model as a reranker, on real pairs: the passage that answers a question
//! must be judged more relevant than passages on the same subject that do not, and than passages
//! on other subjects.

use std::path::PathBuf;

use candle_core::Device;
use warpfold_summarize::{rerank, ChatModel};

fn model() -> ChatModel {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/Qwen2.5-Coder-1.5B-Instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    assert!(p.is_file(), "{} is missing: run `warpfold models fetch Qwen2.5-Coder-1.5B-Instruct` (scripts/setup.sh does)", p.display());
    ChatModel::load(&p, &Device::Cpu).expect("the model loads")
}

#[test]
fn the_passage_that_answers_is_judged_most_relevant() {
    let chat = model();
    let cases: [(&str, [&str; 3]); 2] = [
        (
            "How many days of annual leave do employees get?",
            [
                "Sick leave. Employees who are ill must tell their manager before 10 am. Up to 10 days of sick leave a year are paid in full.",
                "Annual leave. Every employee is entitled to 25 days of paid annual leave per calendar year, plus public holidays.",
                "The orchard wants a sunny slope. Prune the apple trees in late winter while the buds are still closed.",
            ],
        ),
        (
            "What is the late payment interest on the invoice?",
            [
                "Invoice 2026-0412. Consulting services, March 2026: 4,200.00 EUR. Payment is due within 30 days.",
                "Tides follow the moon: two highs and two lows a little over a day apart.",
                "Overdue amounts accrue interest of 1.5% per month from the due date until payment is received.",
            ],
        ),
    ];
    for (question, passages) in cases {
        let scores = rerank::relevance(&chat, question, &passages).unwrap();
        eprintln!("{question}: {scores:?}");
        let best = (0..3).max_by(|&a, &b| scores[a].total_cmp(&scores[b])).unwrap();
        let answering = passages.iter().position(|p| p.contains("25 days") || p.contains("1.5% per month")).unwrap();
        assert_eq!(best, answering, "{question}: {scores:?}");
    }
    // one bin or several: the same judgement
    let alone = rerank::relevance(&chat, cases[0].0, &cases[0].1[1..2]).unwrap();
    let together = rerank::relevance(&chat, cases[0].0, &cases[0].1).unwrap();
    assert!((alone[0] - together[1]).abs() < 0.05, "{alone:?} {together:?}");
}
