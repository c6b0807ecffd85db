// Test fixture, run by the integration tests only: a crowd of searchable episodes of one
// other org (tests/integration/store/crowd.rs). MERGE on the key makes concurrent and
// repeated runs converge on the same nodes. scope_tokens is empty on purpose: the crowd
// must never match a tenant-restricted full-text query.
// $rows: LIST<{key, id, org, correlation_id, summary, embedding}>
UNWIND $rows AS row
MERGE (e:Episode {key: row.key})
  ON CREATE SET
    e.id = row.id,
    e.org = row.org,
    e.team = 'crowd',
    e.agent_id = 'crowd',
    e.correlation_id = row.correlation_id,
    e.agent_run_id = 'crowd',
    e.turn_count = 1,
    e.last_turn_index = 1,
    e.issue_type = 'oom-kill',
    e.issue_description = row.summary,
    e.component_types = ['service'],
    e.component_names = ['checkout'],
    e.skills_used = [],
    e.key_findings = [],
    e.key_findings_text = '',
    e.summary = row.summary,
    e.resolved = false,
    e.effectiveness_score = 0.1,
    e.embedding_model = 'crowd',
    e.extraction_status = 'ok',
    e.provenance = 'imported',
    e.event_ids = [],
    e.ruled_out = [],
    e.created_at = datetime('2026-01-01T00:00:00Z'),
    e.updated_at = datetime('2026-01-01T00:00:00Z'),
    e.last_confirmed_at = datetime('2026-01-01T00:00:00Z'),
    e.scope_tokens = '',
    e.version = 1
WITH e, row
CALL db.create.setNodeVectorProperty(e, 'embedding', row.embedding)
SET e.embedding_float32 = true
