// sources_org.cypher for a team's strategy: served by the (org, team, issue_type,
// extraction_status) index (migration 010), so it reads that team's episodes of the issue type
// only. A separate file, not `$team IS NULL OR e.team = $team`, which would keep Neo4j from
// seeking by team.
// $org, $team: STRING, then the parameters of sources_org.cypher.
MATCH (e:Episode {org: $org, team: $team, issue_type: $issue_type, extraction_status: 'ok'})
WHERE e.verdict IS NULL
  AND EXISTS {
    MATCH (e)-[:AFFECTS]->(c:Component {type: $component_type})
    WHERE toLower(c.name) = toLower($component_name)
  }
RETURN e {.*, embedding: null} AS episode
ORDER BY e.updated_at DESC, e.id
LIMIT $limit
