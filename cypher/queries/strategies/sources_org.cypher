// The episodes an org-wide strategy is synthesized from: ok episodes of the key's org with the
// key's issue type that affect the key's component and that no person marked wrong (`verdict`
// set), newest update first. Component names compare case-insensitively, like the
// qualification rule. Served by the (org, issue_type, extraction_status) index (migration 010):
// it reads that issue type's episodes only, never the whole org. Team strategies use
// sources_team.cypher.
// The search fingerprints exactly this set, so it must use the same $limit as the synthesizer
// (deja_domain::strategy::MAX_STRATEGY_SOURCES).
// $org: STRING, $issue_type: STRING, $component_type: STRING, $component_name: STRING,
// $limit: INTEGER
MATCH (e:Episode {org: $org, issue_type: $issue_type, extraction_status: 'ok'})
WHERE e.verdict IS NULL
  AND EXISTS {
    MATCH (e)-[:AFFECTS]->(c:Component {type: $component_type})
    WHERE toLower(c.name) = toLower($component_name)
  }
RETURN e {.*, embedding: null} AS episode
ORDER BY e.updated_at DESC, e.id
LIMIT $limit
