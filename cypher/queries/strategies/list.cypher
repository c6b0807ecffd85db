// An org's strategies (or one team's, and the org-wide ones when $org_wide), for review:
// pending proposals first, then most recently generated. Bare claims are not strategies.
// With each, the sources that changed since it was written (as get.cypher).
// $org: STRING, $team: STRING or null, $org_wide: BOOLEAN, $offset: INTEGER, $limit: INTEGER
MATCH (s:Strategy {org: $org})
WHERE s.markdown IS NOT NULL
  AND ($team IS NULL OR s.team = $team OR ($org_wide AND s.team = '*'))
RETURN s {.*, source_ids: [(s)-[:SYNTHESIZED_FROM]->(e:Episode) | e.id],
          changed_source_ids: [(s)-[:SYNTHESIZED_FROM]->(c:Episode)
                              WHERE c.updated_at > s.sources_read_at OR c.issue_type <> s.issue_type
                                 OR c.verdict IS NOT NULL | c.id]} AS strategy
ORDER BY s.proposed_markdown IS NULL, s.generated_at DESC, s.key
SKIP $offset
LIMIT $limit
