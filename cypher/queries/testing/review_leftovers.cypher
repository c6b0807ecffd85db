// Test check: what is left of a deleted episode. Every count but deletion_records must be 0.
// $id: STRING (episode id), $key: STRING (its composite key)
OPTIONAL MATCH (e:Episode {id: $id})
WITH count(e) AS episodes
OPTIONAL MATCH (t:TurnInput {key: $key})
WITH episodes, count(t) AS turn_inputs
OPTIONAL MATCH (d:Review {episode_id: $id, action: 'delete'})
WITH episodes, turn_inputs, count(d) AS deletion_records
OPTIONAL MATCH (r:Review)
WHERE r.action <> 'delete' AND NOT (r)<-[:HAS_REVIEW]-(:Episode|Strategy)
RETURN episodes, turn_inputs, deletion_records, count(r) AS orphan_reviews
