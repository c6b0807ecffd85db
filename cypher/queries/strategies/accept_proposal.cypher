// A reviewer accepts the pending regenerated version: it becomes the current strategy, its
// sources become the SYNTHESIZED_FROM set, and the strategy counts as machine-written again
// (edited_by cleared, reviewed_by recorded), so later regenerations replace it directly.
// With $expected_version (the version the reviewer read; null = unconditional), a strategy
// that moved on meanwhile is left as it is (`applied = false`, its current version). With
// $audit, the audit record `(s)-[:HAS_REVIEW]->(:Review {action: 'accept_proposal'})` is
// written in the same statement.
// Returns no row when there is no pending proposal under the key.
// $key: STRING, $reviewer: STRING, $expected_version: INTEGER or null, $audit: BOOLEAN,
// $at: DATETIME, $changes_json: STRING
MATCH (s:Strategy {key: $key})
WHERE s.proposed_markdown IS NOT NULL
SET s._lock = true
WITH s, ($expected_version IS NULL OR coalesce(s.version, 0) = $expected_version) AS applied
CALL (s, applied) {
  WITH s
  WHERE applied
  SET s.markdown = s.proposed_markdown,
      s.playbook_json = s.proposed_playbook_json,
      s.fingerprint = s.proposed_fingerprint,
      s.model = s.proposed_model,
      s.generated_at = s.proposed_at,
      s.sources_read_at = s.proposed_sources_read_at,
      s.reviewed_by = $reviewer,
      s.reviewed_at = datetime(),
      s.version = coalesce(s.version, 0) + 1
  WITH s, coalesce(s.proposed_source_ids, []) AS source_ids
  REMOVE s.edited_by, s.edited_at, s.proposed_markdown, s.proposed_playbook_json,
         s.proposed_fingerprint, s.proposed_model, s.proposed_at, s.proposed_source_ids,
         s.proposed_sources_read_at
  WITH s, source_ids
  CALL (s) {
    MATCH (s)-[old:SYNTHESIZED_FROM]->()
    DELETE old
  }
  CALL (s, source_ids) {
    UNWIND source_ids AS source_id
    MATCH (e:Episode {id: source_id})
    WHERE e.org = s.org
    MERGE (s)-[:SYNTHESIZED_FROM]->(e)
  }
  FOREACH (_ IN CASE WHEN $audit THEN [1] ELSE [] END |
    CREATE (s)-[:HAS_REVIEW]->(:Review {at: $at, by: $reviewer, action: 'accept_proposal',
                                        changes_json: $changes_json, version: s.version}))
}
REMOVE s._lock
RETURN s.version AS version, applied
