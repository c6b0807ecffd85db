// The strategies an episode feeds (SYNTHESIZED_FROM), for its provenance.
// $id: STRING, $org: STRING
MATCH (s:Strategy)-[:SYNTHESIZED_FROM]->(:Episode {id: $id, org: $org})
WHERE s.markdown IS NOT NULL
RETURN s.team AS team, s.issue_type AS issue_type, s.component_type AS component_type,
       s.component_name AS component_name, s.version AS version,
       s.fingerprint STARTS WITH 'stale:' AS stale
ORDER BY s.key
