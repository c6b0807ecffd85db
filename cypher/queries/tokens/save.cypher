// Stores the recognition vectors of one episode of $org, replacing any earlier ones: its
// late-interaction token vectors and, when given, its cause vector (the embedding of its issue
// type and root cause, deja_domain::Episode::cause_text, which the family order compares; a
// null $cause_vector removes it). `stamp` says which text they were computed from
// (deja_domain::recognition::source_stamp of the token model and the embedded text; the cause
// text is made of the same fields): a reader ignores vectors whose stamp is not the episode's
// current one, so they may be written before or after the episode's own write.
// Returns no row when the episode does not exist in $org (deleted meanwhile: nothing stored).
// $episode_id: STRING, $org: STRING, $model: STRING, $stamp: STRING, $dims: INTEGER,
// $count: INTEGER, $vectors: BYTES (TokenVectors::to_bytes), $at: DATETIME,
// $cause_vector: LIST<FLOAT> | null, $cause_model: STRING | null
MATCH (e:Episode {id: $episode_id, org: $org})
MERGE (t:EpisodeTokens {episode_id: e.id})
SET t.org = $org,
    t.model = $model,
    t.stamp = $stamp,
    t.dims = $dims,
    t.count = $count,
    t.vectors = $vectors,
    t.cause_vector = $cause_vector,
    t.cause_model = $cause_model,
    t.updated_at = $at
RETURN t.episode_id AS episode_id
