// How many episodes a semantic search of this scope could return, counting at most $cap: the
// store only needs to know whether the scope exceeds search.exact_scan_max, and counting a
// 100k-episode org in full costs ~0.5 s where stopping at the cap costs ~60 ms.
// $org: STRING, $team: STRING or null, $cap: INTEGER
MATCH (e:Episode {org: $org})
WHERE ($team IS NULL OR e.team = $team)
  AND e.extraction_status = 'ok'
  AND e.embedding IS NOT NULL
WITH e LIMIT $cap
RETURN count(e) AS searchable
