// Benchmark fixture, run only by crates/deja-api/examples/search_bench.rs: bulk searchable
// episodes of one bench org, with their AFFECTS relationship. MERGE on the key makes an
// interrupted or repeated seeding converge. scope_tokens is empty: the bench measures
// semantic search only.
// $rows: LIST<{key, id, org, team, correlation_id, issue_type, description, summary,
//              root_cause, opening_message: STRING | null, key_findings: LIST<STRING>,
//              key_findings_text, component_key, component_type, component_name, embedding,
//              model, at: DATETIME, tokens: BYTES | null, token_stamp, token_model,
//              token_count, token_dims, cause_vector, cause_model}>
// With `tokens`, the episode's recognition vectors as tokens/save.cypher stores them.
UNWIND $rows AS row
MERGE (e:Episode {key: row.key})
  ON CREATE SET
    e.id = row.id,
    e.org = row.org,
    e.team = row.team,
    e.agent_id = 'bench',
    e.correlation_id = row.correlation_id,
    e.agent_run_id = 'bench',
    e.turn_count = 1,
    e.last_turn_index = 1,
    e.issue_type = row.issue_type,
    e.issue_description = row.description,
    e.component_types = [row.component_type],
    e.component_names = [row.component_name],
    e.skills_used = [],
    e.opening_message = row.opening_message,
    e.key_findings = row.key_findings,
    e.key_findings_text = row.key_findings_text,
    e.root_cause = row.root_cause,
    e.summary = row.summary,
    e.resolved = true,
    e.effectiveness_score = 0.8,
    e.embedding_model = row.model,
    e.extraction_status = 'ok',
    e.provenance = 'imported',
    e.event_ids = [],
    e.ruled_out = [],
    e.created_at = row.at,
    e.updated_at = row.at,
    e.last_confirmed_at = row.at,
    e.scope_tokens = '',
    e.version = 1
WITH e, row
CALL db.create.setNodeVectorProperty(e, 'embedding', row.embedding)
SET e.embedding_float32 = true
WITH e, row
MERGE (c:Component {key: row.component_key})
  ON CREATE SET c.org = e.org, c.type = row.component_type, c.name = row.component_name
MERGE (e)-[:AFFECTS]->(c)
FOREACH (_ IN CASE WHEN row.tokens IS NULL THEN [] ELSE [1] END |
  MERGE (t:EpisodeTokens {episode_id: e.id})
  SET t.org = e.org, t.model = row.token_model, t.stamp = row.token_stamp, t.dims = row.token_dims,
      t.count = row.token_count, t.vectors = row.tokens, t.cause_vector = row.cause_vector,
      t.cause_model = row.cause_model, t.updated_at = row.at)
