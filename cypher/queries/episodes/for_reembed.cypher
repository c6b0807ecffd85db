// One page of ok episodes whose vector is missing or from another model (every ok episode when
// $all: after an upgrade that changed what is embedded), in id order so that a re-embedding
// run can resume after the last id it finished ($after_id = '' to start).
// $org: STRING ('' = every org), $model_id: STRING, $all: BOOLEAN, $after_id: STRING,
// $batch: INTEGER
MATCH (e:Episode)
WHERE e.id > $after_id
  AND ($org = '' OR e.org = $org)
  AND e.extraction_status = 'ok'
  AND ($all OR e.embedding IS NULL OR e.embedding_model IS NULL
       OR e.embedding_model <> $model_id)
WITH e
ORDER BY e.id
LIMIT $batch
// Takes the page's write locks so that each text is read with its own version (the caller
// rolls back; see GraphStore::fetch_locked).
SET e._lock = true
RETURN e.id AS id, e.org AS org, e.correlation_id AS correlation_id, e.version AS version,
       e.issue_type AS issue_type, e.issue_description AS issue_description,
       e.opening_message AS opening_message, e.summary AS summary,
       e.key_findings AS key_findings, e.root_cause AS root_cause
ORDER BY id
