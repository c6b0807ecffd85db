// Stores the late-interaction token vectors of one episode of $org, replacing any earlier
// ones. `stamp` says which text and model they were computed from
// (deja_domain::recognition::source_stamp): a reader ignores vectors whose stamp is not the
// episode's current one, so they may be written before or after the episode's own write.
// Returns no row when the episode does not exist in $org (deleted meanwhile: nothing stored).
// $episode_id: STRING, $org: STRING, $model: STRING, $stamp: STRING, $dims: INTEGER,
// $count: INTEGER, $vectors: BYTES (TokenVectors::to_bytes), $at: DATETIME
MATCH (e:Episode {id: $episode_id, org: $org})
MERGE (t:EpisodeTokens {episode_id: e.id})
SET t.org = $org,
    t.model = $model,
    t.stamp = $stamp,
    t.dims = $dims,
    t.count = $count,
    t.vectors = $vectors,
    t.updated_at = $at
RETURN t.episode_id AS episode_id
