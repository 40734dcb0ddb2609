//! Test support shared by the crates' tests and benchmarks, and nothing else. It depends on
//! `proptest` (for the strategies, a default feature) and the backend trait alone, so a crate's tests
//! can use it without linking models, SQLite or parsers, and the benchmark crate can share its
//! seeded text and its failing device without linking `proptest`.
//!
//! - [`strategies`] (feature `strategies`): text in every script for property tests;
//! - [`seeded`]: a seeded generator and the filler text of benchmarks and examples;
//! - [`faults`]: a backend that fails as a broken device would.

pub mod faults;
pub mod seeded;
#[cfg(feature = "strategies")]
pub mod strategies;
#[cfg(feature = "strategies")]
pub use strategies::*;
