// An org's strategies with the episodes they were synthesized from (switch to the graph view
// to see them around their sources). Edited strategies show who edited them; a pending
// regeneration waits in proposed_markdown for review. A source set whose last synthesis
// failed shows when and why (failed_at, failed_reason; markdown null when none was ever
// stored): the job is in the dead-letter queue. Bare synthesis claims are left out. Set
// :param team => null for every team.
:param org => 'acme';
:param team => null;
MATCH (s:Strategy {org: $org})
WHERE (s.markdown IS NOT NULL OR s.failed_at IS NOT NULL)
  AND ($team IS NULL OR s.team = $team OR s.team = '*')
OPTIONAL MATCH (s)-[r:SYNTHESIZED_FROM]->(e:Episode)
RETURN s.team AS team, s.issue_type AS issue_type,
       s.component_type + ' ' + s.component_name AS component,
       s.version AS version, s.generated_at AS generated_at, s.model AS model,
       s.edited_by AS edited_by, s.proposed_markdown IS NOT NULL AS proposal_pending,
       s.failed_at AS failed_at, s.failed_reason AS failed_reason,
       s.markdown AS markdown, collect(e.id) AS source_episodes, s, collect(r) AS links,
       collect(e) AS episodes
ORDER BY failed_at IS NULL, proposal_pending DESC, generated_at DESC
LIMIT 25
