//! warpfold's integration tests: one binary, a module per area (ripgrep style).
//!
//! These run the real model (all-MiniLM-L6-v2, fetched by `scripts/test.sh`) and the real `warpfold`
//! binary. The scheduler, packer and kernels have unit tests next to their code.

mod ask;
mod ask_documents;
mod cli;
mod common;
mod embedding;
mod index;
mod languages;
mod multilingual;
mod realfiles;
mod scaleout;
mod security;
mod serve;
mod setup;
mod unicode;
