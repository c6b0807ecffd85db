// How many episodes a semantic search of this scope could return; the store compares it
// with search.exact_scan_max to pick the exact scan or the vector index.
// $org: STRING, $team: STRING or null
MATCH (e:Episode {org: $org})
WHERE ($team IS NULL OR e.team = $team)
  AND e.extraction_status = 'ok'
  AND e.embedding IS NOT NULL
RETURN count(e) AS searchable
