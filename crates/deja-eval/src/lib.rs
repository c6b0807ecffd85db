//! Measuring memory quality on a labelled corpus (docs/EVALUATION.md), for `deja eval`.
//!
//! - [`retrieval`]: imports labelled incidents into a fresh org and scores the production
//!   search path on the queries, with ranking variants side by side.
//! - [`extraction`]: replays conversations through the real pipeline (RabbitMQ → worker →
//!   LLM → Neo4j) and scores the extracted episodes against the gold incidents, then the
//!   queries against those episodes (end-to-end recall).
//!
//! Every run writes into its own `eval-...` org and nothing else: it never reads or changes
//! real tenants, and it leaves its episodes behind for inspection in the Browser. Each run
//! returns its report (serialisable: `--json`) and has a `print` for people.

mod corpus;
mod error;
pub mod extraction;
mod extraction_score;
mod links;
mod metrics;
mod replay;
mod report;
pub mod retrieval;
mod scoring;
mod search;
mod services;
mod variants;

pub use error::EvalError;
