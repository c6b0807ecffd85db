// Approximate nearest neighbours over every tenant's episodes. Neo4j 5.26 cannot pre-filter
// this index by org, so searches post-filter and fall back to an exact scan (docs/ranking.md,
// "Tenant scoping"). Its score for cosine is (1 + cos) / 2; the store converts it back.
CREATE VECTOR INDEX episode_embedding IF NOT EXISTS
FOR (e:Episode) ON (e.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}};
