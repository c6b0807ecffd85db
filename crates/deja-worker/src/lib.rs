//! The extractor worker: turn events from RabbitMQ become extracted, embedded episodes in Neo4j; plus the strategy synthesizer.
