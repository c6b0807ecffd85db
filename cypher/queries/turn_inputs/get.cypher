// The stored newest turn event of a conversation, unless another team than the episode's
// stored it (a stray event that reused the correlation id before the episode existed).
// $key: STRING
MATCH (t:TurnInput {key: $key})
OPTIONAL MATCH (e:Episode {key: $key})
WITH t, e
WHERE e IS NULL OR t.team IS NULL OR t.team = e.team
RETURN t.turn_index AS turn_index, t.event_json AS event_json
