// Stores a synthesized strategy. If a person edited the current one (`edited_by` set), it is
// never overwritten: the new text is kept as `proposed_*` for review and `proposed` is true.
// Either write moves the version on: a reviewer accepts the proposal they read, and one
// that a newer synthesis replaced meanwhile is a version conflict, not a silent swap.
// Otherwise the strategy is replaced (version + 1, any old proposal dropped) and its
// SYNTHESIZED_FROM relationships become exactly $source_ids (episodes of the same org only).
// Freshness: a write whose sources were read before those of the stored strategy (or of its
// pending proposal) is refused (`stale` true, nothing written), so a slow synthesis of an
// older source set never replaces a newer strategy.
// $key, $org, $team, $issue_type, $component_type, $component_name, $markdown,
// $playbook_json, $fingerprint, $model: STRING, $generated_at, $sources_read_at: DATETIME,
// $source_ids: LIST<STRING>
MERGE (s:Strategy {key: $key})
  ON CREATE SET s.org = $org, s.team = $team, s.issue_type = $issue_type,
                s.component_type = $component_type, s.component_name = $component_name,
                s.version = 0
SET s._lock = true
WITH s, (coalesce(s.sources_read_at, $sources_read_at) > $sources_read_at
         OR coalesce(s.proposed_sources_read_at, $sources_read_at) > $sources_read_at) AS stale
WITH s, stale, (NOT stale AND s.edited_by IS NOT NULL AND s.markdown IS NOT NULL) AS proposed
CALL (s, proposed) {
  WITH s
  WHERE proposed
  SET s.proposed_markdown = $markdown,
      s.proposed_playbook_json = $playbook_json,
      s.proposed_fingerprint = $fingerprint,
      s.proposed_model = $model,
      s.proposed_at = $generated_at,
      s.proposed_source_ids = $source_ids,
      s.proposed_sources_read_at = $sources_read_at,
      s.version = coalesce(s.version, 0) + 1
}
CALL (s, proposed, stale) {
  WITH s
  WHERE NOT proposed AND NOT stale
  SET s.markdown = $markdown,
      s.playbook_json = $playbook_json,
      s.fingerprint = $fingerprint,
      s.model = $model,
      s.generated_at = $generated_at,
      s.sources_read_at = $sources_read_at,
      s.version = coalesce(s.version, 0) + 1
  REMOVE s.proposed_markdown, s.proposed_playbook_json, s.proposed_fingerprint,
         s.proposed_model, s.proposed_at, s.proposed_source_ids, s.proposed_sources_read_at
  WITH s
  CALL (s) {
    MATCH (s)-[old:SYNTHESIZED_FROM]->()
    DELETE old
  }
  WITH s
  UNWIND $source_ids AS source_id
  MATCH (e:Episode {id: source_id})
  WHERE e.org = s.org
  MERGE (s)-[:SYNTHESIZED_FROM]->(e)
}
// A written strategy supersedes an earlier failed synthesis (release_claim.cypher).
FOREACH (_ IN CASE WHEN stale THEN [] ELSE [1] END |
  REMOVE s.failed_fingerprint, s.failed_at, s.failed_reason)
REMOVE s._lock
RETURN proposed, stale
