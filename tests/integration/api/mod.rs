//! memory-search (issue 4) against real Neo4j, RabbitMQ and the embedding model, with the
//! worker's synthesizer stepped by hand on a fake LLM.

mod digest;
mod http;
mod hub;
mod load;
mod mcp;
mod recalled;
mod recognition;
mod recurrence;
mod review;
mod strategy;
mod strategy_store;
