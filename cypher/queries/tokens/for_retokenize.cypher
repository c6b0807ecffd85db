// One page of ok episodes with the stamp and model of their stored token vectors and the
// model of their cause vector (null when none), in id order so that a run can resume after
// the last id it finished ($after_id = '' to start); the caller re-encodes those whose stamp
// is not their text's or whose cause vector is missing or of another model.
// $org: STRING ('' = every org), $after_id: STRING, $batch: INTEGER
MATCH (e:Episode)
WHERE e.id > $after_id
  AND ($org = '' OR e.org = $org)
  AND e.extraction_status = 'ok'
OPTIONAL MATCH (t:EpisodeTokens {episode_id: e.id})
RETURN e.id AS id, e.org AS org, e.issue_type AS issue_type,
       e.issue_description AS issue_description, e.opening_message AS opening_message,
       e.summary AS summary, e.key_findings AS key_findings,
       e.root_cause AS root_cause, t.stamp AS stamp, t.model AS model,
       t.cause_model AS cause_model
ORDER BY e.id
LIMIT $batch
