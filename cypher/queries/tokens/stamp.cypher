// What the stored recognition vectors of one episode of $org were computed from (no row: none
// stored), so that a writer encodes the episode's text only when its stored vectors are not
// of this text and these models.
// $episode_id: STRING, $org: STRING
MATCH (t:EpisodeTokens {episode_id: $episode_id})
WHERE t.org = $org
RETURN t.model AS model, t.stamp AS stamp, t.cause_model AS cause_model
