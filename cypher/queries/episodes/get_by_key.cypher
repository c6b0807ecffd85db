// One episode by its composite key, embedding included (the worker keeps the vector when
// the embedded text did not change). The SET takes the episode's write lock so that the
// read sees one committed version, not a mix of two; the caller rolls the transaction back,
// so nothing is written (GraphStore::read_episode).
// $key: STRING (EpisodeKey::composite())
MATCH (e:Episode {key: $key})
SET e._lock = true
RETURN e {.*} AS episode
