// One episode by its composite key, embedding included (the worker keeps the vector when
// the embedded text did not change).
// $key: STRING (EpisodeKey::composite())
MATCH (e:Episode {key: $key})
RETURN e {.*} AS episode
