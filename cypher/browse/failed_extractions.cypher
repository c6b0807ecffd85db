// Extractions that failed (whole episodes, or the newest turn of an ok one), with the turn
// that `deja retry` would re-extract (null: none stored for the episode's team, so nothing
// to retry from).
:param org => 'acme';
MATCH (e:Episode {org: $org})
WHERE e.extraction_status = 'failed' OR e.extraction_error IS NOT NULL
OPTIONAL MATCH (t:TurnInput {key: e.key})
  WHERE (t.team IS NULL OR t.team = e.team) AND t.event_json IS NOT NULL
RETURN e.updated_at AS updated_at, e.team AS team, e.correlation_id AS conversation,
       e.extraction_status AS status, e.extraction_error AS error,
       t.turn_index AS stored_turn_index
ORDER BY e.updated_at DESC
LIMIT 50
