// Deletes one episode and everything that only exists for it, in one statement: its review
// records, its stored turn input, its late-interaction token vectors and its relationships (AFFECTS, USED_SKILL, SYNTHESIZED_FROM,
// RECURRENCE_OF, and NOT_RECURRENCE_OF: the links people rejected, either way; DETACH DELETE).
// Strategies built from it are marked stale (their fingerprint can no longer
// match, so the next search that qualifies them asks for a new synthesis). The org's Component
// and Skill nodes stay. A `Review {action: 'delete'}` node without an episode is kept as the
// audit record of the deletion. Returns no row when the episode does not exist in $org, or
// when $version is given and the episode is no longer at it (an If-Match the statement itself
// checks, so a write between the caller's read and this delete is not deleted unseen).
// `stale_strategies` counts those of $teams only (every one is marked stale): a team-bound
// reviewer is not told of the org-wide strategies it may not read (review/strategies.cypher).
// $id: STRING, $org: STRING, $version: INTEGER or null, $teams: LIST<STRING> or null (null =
// every team), $at: DATETIME, $by: STRING, $changes_json: STRING
MATCH (e:Episode {id: $id, org: $org})
// The lock before the version is read: checked without it, a write committing meanwhile
// would be deleted unseen. A refused delete keeps the lock only until its statement ends.
SET e._lock = true
REMOVE e._lock
WITH e
WHERE $version IS NULL OR e.version = $version
CALL (e) {
  OPTIONAL MATCH (s:Strategy)-[:SYNTHESIZED_FROM]->(e)
  SET s.fingerprint = 'stale:source-deleted', s.stale_since = $at
  RETURN count(CASE WHEN $teams IS NULL OR s.team IN $teams THEN s END) AS stale_strategies
}
CALL (e) {
  OPTIONAL MATCH (e)-[:HAS_REVIEW]->(r:Review)
  DETACH DELETE r
  RETURN count(r) AS reviews
}
CALL (e) {
  OPTIONAL MATCH (t:TurnInput {key: e.key})
  DELETE t
  RETURN count(t) AS turn_inputs
}
CALL (e) {
  OPTIONAL MATCH (k:EpisodeTokens {episode_id: e.id})
  DELETE k
}
CREATE (:Review {at: $at, by: $by, action: 'delete', changes_json: $changes_json,
                 episode_id: e.id, org: e.org, team: e.team,
                 correlation_id: e.correlation_id})
WITH e, stale_strategies, reviews, turn_inputs
DETACH DELETE e
RETURN stale_strategies, reviews, turn_inputs
