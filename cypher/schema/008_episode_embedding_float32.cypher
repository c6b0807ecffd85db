// Stores existing embeddings as 32-bit float arrays (what db.create.setNodeVectorProperty
// writes) instead of Cypher's 64-bit float lists: half the bytes, and the exact cosine scan
// reads them ~30% faster (docs/BENCHMARKS.md). New vectors are written this way by
// episodes/write.cypher and episodes/set_embedding.cypher. Rewriting an already converted
// vector stores the same values, so a re-run or a concurrent run is harmless. Batched, so a
// large store never holds one huge transaction. Cypher cannot tell a float32 vector from a
// list, so every vector write marks its episode `embedding_float32`: a re-run (an interrupted
// migrate, or the idempotence test) skips what is converted instead of rewriting, and
// locking, every episode of the store.
MATCH (e:Episode)
WHERE e.embedding IS NOT NULL AND e.embedding_float32 IS NULL
CALL (e) {
  CALL db.create.setNodeVectorProperty(e, 'embedding', e.embedding)
  SET e.embedding_float32 = true
} IN TRANSACTIONS OF 2000 ROWS;
