// The strategies an episode feeds (SYNTHESIZED_FROM), for its provenance. With $teams, only
// those teams' strategies: the org-wide ones (team '*') are made from every team's episodes
// and only org-wide credentials review them (strategy_review.rs).
// $id: STRING, $org: STRING, $teams: LIST<STRING> or null (null = every team and '*')
MATCH (s:Strategy)-[:SYNTHESIZED_FROM]->(:Episode {id: $id, org: $org})
WHERE s.markdown IS NOT NULL
  AND ($teams IS NULL OR s.team IN $teams)
// Stale as review shows it (StoredStrategy::stale): a source deleted, fewer than two left,
// or one changed since the strategy was written.
RETURN s.team AS team, s.issue_type AS issue_type, s.component_type AS component_type,
       s.component_name AS component_name, s.version AS version,
       s.fingerprint STARTS WITH 'stale:'
         OR COUNT { (s)-[:SYNTHESIZED_FROM]->(:Episode) } < 2
         OR EXISTS { (s)-[:SYNTHESIZED_FROM]->(c:Episode)
                     WHERE c.updated_at > s.sources_read_at OR c.issue_type <> s.issue_type
                        OR c.verdict IS NOT NULL } AS stale
ORDER BY s.key
