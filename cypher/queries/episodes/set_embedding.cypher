// Stores a new vector only if the episode is still at the version it was read at (its text
// may have changed since), and bumps the version so that a writer holding an older copy
// re-reads instead of putting the old vector back. The SET before the read takes the lock.
// Stored as a 32-bit float array (db.create.setNodeVectorProperty), like write.cypher.
// $id: STRING, $expected_version: INTEGER, $embedding: LIST<FLOAT>, $model_id: STRING
MATCH (e:Episode {id: $id})
SET e._lock = true
WITH e, e.version = $expected_version AS current
CALL (e, current) {
  WITH e WHERE current
  CALL db.create.setNodeVectorProperty(e, 'embedding', $embedding)
  SET e.embedding_model = $model_id, e.version = e.version + 1, e.embedding_float32 = true
}
REMOVE e._lock
RETURN current AS stored
