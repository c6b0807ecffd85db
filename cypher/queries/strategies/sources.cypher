// The episodes a strategy is synthesized from: ok episodes of the key's org (and team, unless
// the strategy is org-wide) with the key's issue type that affect the key's component and
// that no person marked wrong (`verdict` set), newest update first. Component names compare case-insensitively, like the qualification rule.
// The search fingerprints exactly this set, so it must use the same $limit as the synthesizer
// (deja_domain::strategy::MAX_STRATEGY_SOURCES).
// $org: STRING, $team: STRING or null (org-wide), $issue_type: STRING,
// $component_type: STRING, $component_name: STRING, $limit: INTEGER
MATCH (c:Component {type: $component_type})<-[:AFFECTS]-(e:Episode {org: $org})
WHERE toLower(c.name) = toLower($component_name)
  AND ($team IS NULL OR e.team = $team)
  AND e.issue_type = $issue_type
  AND e.extraction_status = 'ok'
  AND e.verdict IS NULL
WITH DISTINCT e
RETURN e {.*, embedding: null} AS episode
ORDER BY e.updated_at DESC, e.id
LIMIT $limit
