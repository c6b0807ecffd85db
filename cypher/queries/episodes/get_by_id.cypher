// One episode by id, optionally restricted to an org (API callers are always scoped). The
// SET takes the episode's write lock so that the read sees one committed version, not a mix
// of two; the caller rolls the transaction back, so nothing is written
// (GraphStore::read_episode).
// $id: STRING, $org: STRING or null
MATCH (e:Episode {id: $id})
WHERE $org IS NULL OR e.org = $org
SET e._lock = true
RETURN e {.*} AS episode
