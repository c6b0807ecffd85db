//! Neo4j adapter: migrations, the episode and strategy store, semantic, text and timeline search.
