// First statement of every save: finds or creates the episode node and takes its write lock
// (the SET) before reading `version`, so the compare-and-set that follows cannot lose an
// update to a concurrent writer. A node created here has version 0, which no committed
// episode has: the caller treats 0 as "created" and rolls back when that is not what it
// expected. `_lock` never survives a commit: write.cypher removes it.
// $key: STRING
MERGE (e:Episode {key: $key})
  ON CREATE SET e.version = 0
SET e._lock = true
RETURN e.version AS version
