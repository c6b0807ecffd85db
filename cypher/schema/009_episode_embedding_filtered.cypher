// Needs a server with Cypher 25 vector search filters (Neo4j 2026.01+); on 5.26 this migration
// is skipped, not recorded, and applied once the server is upgraded (crate::migrate).
// The vector index declares org, team and extraction_status as filter properties, so
// `SEARCH e IN (VECTOR INDEX ... WHERE e.org = $org AND e.team = $team ...)` returns the
// tenant's own nearest neighbours: no over-fetching, no exact scan, however small the tenant
// among big ones (docs/ranking.md, "Tenant scoping"). It replaces episode_embedding, whose
// post-filtered search the store no longer needs on such a server (two vector indexes on
// one property would double every write). Both statements are no-ops when run again.
CYPHER 25
CREATE VECTOR INDEX episode_embedding_scoped IF NOT EXISTS
FOR (e:Episode) ON (e.embedding)
WITH [e.org, e.team, e.extraction_status]
OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}};
DROP INDEX episode_embedding IF EXISTS;
