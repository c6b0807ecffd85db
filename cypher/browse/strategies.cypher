// An org's strategies with the episodes they were synthesized from (switch to the graph view
// to see them around their sources). Edited strategies show who edited them; a pending
// regeneration waits in proposed_markdown for review. A source set whose last synthesis
// failed shows when and why (failed_at, failed_reason; markdown null when none was ever
// stored): the job is in the dead-letter queue. Bare synthesis claims are left out. Set
// :param team => null for every team. `withheld`: search does not serve this text now (not
// edited by a person, and a source was deleted or marked wrong: the next qualifying search
// asks for a new one); `stale`: as review shows it (a source deleted, fewer than two left,
// or one changed since it was written); `wrong_sources`: sources a person marked wrong.
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
       s.edited_by IS NULL
         AND (s.fingerprint STARTS WITH 'stale:'
              OR EXISTS { (s)-[:SYNTHESIZED_FROM]->(w:Episode) WHERE w.verdict = 'wrong' })
         AS withheld,
       s.fingerprint STARTS WITH 'stale:'
         OR COUNT { (s)-[:SYNTHESIZED_FROM]->(:Episode) } < 2
         OR EXISTS { (s)-[:SYNTHESIZED_FROM]->(c:Episode)
                     WHERE c.updated_at > s.sources_read_at OR c.issue_type <> s.issue_type
                        OR c.verdict IS NOT NULL } AS stale,
       [x IN collect(e) WHERE x.verdict IS NOT NULL | x.id] AS wrong_sources,
       s.markdown AS markdown, collect(e.id) AS source_episodes, s, collect(r) AS links,
       collect(e) AS episodes
ORDER BY failed_at IS NULL, proposal_pending DESC, generated_at DESC
LIMIT 25
