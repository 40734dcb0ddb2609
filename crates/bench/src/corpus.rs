//! Seeded benchmark corpora, shaped like the source project's.
//!
//! Why generated: the same seed gives the same documents on every machine and for every system under
//! test (warpfold packed, warpfold padded, sentence-transformers), with no data set to download.
//! - `stress`: short documents of 45–130 words interleaved one for one with long ones of 1820–2000
//!   words: the mix where padded batches waste the most.
//! - `production`: document lengths uniform in 50–1900 words.

pub use warpfold_testkit::seeded::{words, Rng};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CorpusKind {
    Stress,
    Production,
}

impl CorpusKind {
    pub fn name(self) -> &'static str {
        match self {
            CorpusKind::Stress => "stress",
            CorpusKind::Production => "production",
        }
    }
}

/// `documents` documents of the given kind, reproducible from `seed`.
pub fn generate(kind: CorpusKind, documents: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed ^ kind as u64);
    (0..documents)
        .map(|i| {
            let n = match kind {
                CorpusKind::Stress if i % 2 == 0 => rng.range(45, 130),
                CorpusKind::Stress => rng.range(1820, 2000),
                CorpusKind::Production => rng.range(50, 1900),
            };
            words(&mut rng, n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_corpus_and_lengths_in_range() {
        let a = generate(CorpusKind::Stress, 6, 42);
        assert_eq!(a, generate(CorpusKind::Stress, 6, 42));
        assert_ne!(a, generate(CorpusKind::Stress, 6, 43));
        for (i, doc) in a.iter().enumerate() {
            let n = doc.split_whitespace().count();
            let range = if i % 2 == 0 { 45..=130 } else { 1820..=2000 };
            assert!(range.contains(&n), "doc {i}: {n} words");
        }
        for doc in generate(CorpusKind::Production, 20, 1) {
            assert!((50..=1900).contains(&doc.split_whitespace().count()));
        }
    }
}
