//! warpfold's benchmarks, kept out of the engine and the fronts. The commands (the CLI's `bench`,
//! `bench --devices-compare`, `bench-index` and `corpus` call in here with a [`harness::Harness`]
//! made from their flags):
//!
//! - [`embed`]: packed against padded, and against sentence-transformers, on the seeded corpora.
//! - [`devices`]: one device against several, the same ids in one process (failover included).
//! - [`index`]: indexing throughput on generated PDFs, search latency on a large index.
//! - [`ids`]: a corpus as token ids, so every system (and every script on the GPU) scores the same.
//!
//! What they share: the seeded corpora ([`corpus`]), fault injection for failover runs
//! ([`faults`]), and the machine, date, memory and vector comparisons every report carries
//! ([`report`]). The GPU and peer scripts are in bench/ at the repository's root.

pub mod corpus;
pub mod devices;
pub mod embed;
pub mod faults;
pub mod harness;
pub mod ids;
pub mod index;
pub mod report;
