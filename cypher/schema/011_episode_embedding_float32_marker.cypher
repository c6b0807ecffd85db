// Marks the vectors migration 008 converted before vector writes began to mark their episode
// `embedding_float32` themselves (008's file explains why): once 008 is applied every stored
// vector is a float32 array, so this only records it, and a later re-run of 008 skips them.
// A boolean per episode, no vector rewritten; batched like 008. A re-run finds nothing.
MATCH (e:Episode)
WHERE e.embedding IS NOT NULL AND e.embedding_float32 IS NULL
CALL (e) {
  SET e.embedding_float32 = true
} IN TRANSACTIONS OF 10000 ROWS;
