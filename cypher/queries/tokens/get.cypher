// The stored recognition vectors of a few episodes of one org (the kept candidates of a
// search), with what they were computed from; the caller compares `stamp` and `model` with
// the episode's current text and the encoder it runs, and `cause_model` with its embedder.
// Ids of another org are left out.
// $org: STRING, $ids: LIST<STRING>
MATCH (t:EpisodeTokens)
WHERE t.episode_id IN $ids AND t.org = $org
RETURN t.episode_id AS episode_id, t.model AS model, t.stamp AS stamp, t.dims AS dims,
       t.vectors AS vectors, t.cause_vector AS cause_vector, t.cause_model AS cause_model
