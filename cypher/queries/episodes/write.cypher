// Writes every property of a claimed episode (see claim.cypher) and releases the lock flag.
// Null parameters remove their property. Review state (verdict, human_pinned, proposals_json)
// and provenance (turns_json) travel with the episode so that no writer can drop them. Timestamps are DateTime (nanosecond precision).
// Components are two parallel lists (type i goes with name i) for fast reads; the AFFECTS
// relationships are synced by sync_components.cypher in the same transaction.
// The embedding is stored as a 32-bit float array by db.create.setNodeVectorProperty (half
// the size of a LIST<FLOAT>, faster to scan); a null $embedding removes it.
MATCH (e:Episode {key: $key})
SET e.id = $id,
    e.org = $org,
    e.team = $team,
    e.agent_id = $agent_id,
    e.correlation_id = $correlation_id,
    e.agent_run_id = $agent_run_id,
    e.turn_count = $turn_count,
    e.last_turn_index = $last_turn_index,
    e.issue_type = $issue_type,
    e.issue_description = $issue_description,
    e.opening_message = $opening_message,
    e.component_types = $component_types,
    e.component_names = $component_names,
    e.skills_used = $skills_used,
    e.key_findings = $key_findings,
    e.key_findings_text = $key_findings_text,
    e.root_cause = $root_cause,
    e.summary = $summary,
    e.resolved = $resolved,
    e.effectiveness_score = $effectiveness_score,
    e.embedding_model = $embedding_model,
    e.extraction_status = $extraction_status,
    e.extraction_error = $extraction_error,
    e.failed_turn_index = $failed_turn_index,
    e.provenance = $provenance,
    e.event_ids = $event_ids,
    e.significance = $significance,
    e.root_cause_confidence = $root_cause_confidence,
    e.ruled_out = $ruled_out,
    e.resolution = $resolution,
    e.created_at = $created_at,
    e.updated_at = $updated_at,
    e.last_confirmed_at = $last_confirmed_at,
    e.scope_tokens = $scope_tokens,
    e.version = $version,
    e.verdict = $verdict,
    e.verdict_note = $verdict_note,
    e.human_pinned = $human_pinned,
    e.proposals_json = $proposals_json,
    e.turns_json = $turns_json
REMOVE e._lock
WITH e
CALL (e) {
  WITH e WHERE $embedding IS NOT NULL
  CALL db.create.setNodeVectorProperty(e, 'embedding', $embedding)
  SET e.embedding_float32 = true
}
FOREACH (_ IN CASE WHEN $embedding IS NULL THEN [1] ELSE [] END |
  REMOVE e.embedding, e.embedding_float32)
