//! On a CPU, a question's best passage is read first and alone; the others are read only when it
//! does not answer. Real model (the CPU default), real passages: the prompts the run prefilled are
//! counted, and the answer is the same passage's as reading them all would give.

use std::path::PathBuf;

use candle_core::Device;
use warpfold_summarize::answer::{answer_questions, Passage, Question};
use warpfold_summarize::generate::SamplingParams;
use warpfold_summarize::ChatModel;

fn model() -> ChatModel {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/Qwen2.5-Coder-1.5B-Instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    assert!(p.is_file(), "{} is missing: run `warpfold models fetch Qwen2.5-Coder-1.5B-Instruct` (scripts/setup.sh does)", p.display());
    ChatModel::load(&p, &Device::Cpu).expect("the model loads")
}

fn passage(path: &str, text: &str) -> Passage {
    Passage { path: path.into(), page: 1, text: text.into() }
}

#[test]
fn the_best_passage_is_read_alone_first_and_the_rest_only_when_it_does_not_answer() {
    let chat = model();
    let lease = passage(
        "lease.txt",
        "The tenant pays a security deposit of 2,900 euros once, when the lease is signed. The landlord returns it within thirty days.",
    );
    let orchard =
        passage("orchard.txt", "The orchard wants a sunny slope. Prune the apple trees in late winter while the buds are still closed.");
    let tides = passage("tides.txt", "Tides follow the moon: two highs and two lows a little over a day apart.");
    let sampling = SamplingParams { max_new_tokens: 60, ..SamplingParams::default() };

    // The best passage answers: one prompt in all.
    let first = [lease.clone(), orchard.clone(), tides.clone()];
    let asked = [Question { question: "How much is the security deposit?", earlier: &[], passages: &first }];
    let (answers, stats) = answer_questions(&chat, &asked, &sampling).unwrap();
    eprintln!("{:?} ({} prompts)", answers[0].answer, stats.prompts);
    assert!(answers[0].answerable && answers[0].answer.contains("2,900"), "{:?}", answers[0]);
    assert_eq!(answers[0].citations[0].path, "lease.txt");
    assert_eq!(stats.prompts, 1, "the other two passages were not read");
    assert!(stats.first_token_seconds.is_some());

    // The answer is in the third passage: the first is read alone, then the other two.
    let third = [orchard, tides, lease];
    let asked = [Question { question: "How much is the security deposit?", earlier: &[], passages: &third }];
    let (answers, stats) = answer_questions(&chat, &asked, &sampling).unwrap();
    eprintln!("{:?} ({} prompts)", answers[0].answer, stats.prompts);
    assert!(answers[0].answerable && answers[0].answer.contains("2,900"), "{:?}", answers[0]);
    assert_eq!((answers[0].citations[0].path.as_str(), answers[0].citations[0].n), ("lease.txt", 3));
    assert_eq!(stats.prompts, 3, "one prompt, then the two others");
}
