// An org's strategies (or one team's, and the org-wide ones when $org_wide), for review:
// pending proposals first, then most recently generated. Bare claims are not strategies.
// $org: STRING, $team: STRING or null, $org_wide: BOOLEAN, $offset: INTEGER, $limit: INTEGER
MATCH (s:Strategy {org: $org})
WHERE s.markdown IS NOT NULL
  AND ($team IS NULL OR s.team = $team OR ($org_wide AND s.team = '*'))
RETURN s {.*, source_ids: [(s)-[:SYNTHESIZED_FROM]->(e:Episode) | e.id]} AS strategy
ORDER BY s.proposed_markdown IS NULL, s.generated_at DESC, s.key
SKIP $offset
LIMIT $limit
