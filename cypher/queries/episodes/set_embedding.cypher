// Stores a new vector only if the episode is still at the version it was read at (its text
// may have changed since), and bumps the version so that a writer holding an older copy
// re-reads instead of putting the old vector back. The SET before the read takes the lock.
// $id: STRING, $expected_version: INTEGER, $embedding: LIST<FLOAT>, $model_id: STRING
MATCH (e:Episode {id: $id})
SET e._lock = true
WITH e, e.version = $expected_version AS current
FOREACH (_ IN CASE WHEN current THEN [1] ELSE [] END |
  SET e.embedding = $embedding, e.embedding_model = $model_id, e.version = e.version + 1)
REMOVE e._lock
RETURN current AS stored
