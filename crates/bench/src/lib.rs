//! What warpfold's benchmarks share, kept out of the engine and the fronts: the seeded corpora
//! ([`corpus`]), fault injection for failover runs ([`faults`]), and the machine, date, memory and
//! vector comparisons every report carries ([`report`]). The commands that run benchmarks
//! (`warpfold bench`, `bench-index`, `bench-summarize`, `corpus`) are the command line's; the
//! GPU and peer scripts are in bench/ at the repository's root.

pub mod corpus;
pub mod faults;
pub mod report;
