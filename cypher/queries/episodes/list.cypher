// An org's or team's episodes, failed extractions included, most recently updated first.
// The embedding is left out of listings (callers that need it read one episode by key/id).
// $org: STRING, $team: STRING or null, $status: STRING or null, $pending_error: BOOLEAN,
// $provenance: STRING or null, $offset: INTEGER, $limit: INTEGER
MATCH (e:Episode {org: $org})
WHERE ($team IS NULL OR e.team = $team)
  AND ($status IS NULL OR e.extraction_status = $status)
  AND (NOT $pending_error OR e.extraction_error IS NOT NULL)
  AND ($provenance IS NULL OR e.provenance = $provenance)
RETURN e {.*, embedding: null} AS episode
ORDER BY e.updated_at DESC, e.id
SKIP $offset
LIMIT $limit
