// An org's strategies with the episodes they were synthesized from (switch to the graph view
// to see them around their sources). Edited strategies show who edited them; a pending
// regeneration waits in proposed_markdown for review. Bare synthesis claims (no markdown)
// are left out. Set :param team => null for every team.
:param org => 'acme';
:param team => null;
MATCH (s:Strategy {org: $org})
WHERE s.markdown IS NOT NULL
  AND ($team IS NULL OR s.team = $team OR s.team = '*')
OPTIONAL MATCH (s)-[r:SYNTHESIZED_FROM]->(e:Episode)
RETURN s.team AS team, s.issue_type AS issue_type,
       s.component_type + ' ' + s.component_name AS component,
       s.version AS version, s.generated_at AS generated_at, s.model AS model,
       s.edited_by AS edited_by, s.proposed_markdown IS NOT NULL AS proposal_pending,
       s.markdown AS markdown, collect(e.id) AS source_episodes, s, collect(r) AS links,
       collect(e) AS episodes
ORDER BY proposal_pending DESC, generated_at DESC
LIMIT 25
