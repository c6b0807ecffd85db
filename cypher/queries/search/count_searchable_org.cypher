// How many episodes an org-wide semantic search could return, counting at most $cap: the store
// only needs to know whether the scope exceeds search.exact_scan_max. Served by the
// (org, extraction_status) index; team-scoped searches use count_searchable_team.cypher.
// $org: STRING, $cap: INTEGER
MATCH (e:Episode {org: $org, extraction_status: 'ok'})
WHERE e.embedding IS NOT NULL
WITH e LIMIT $cap
RETURN count(e) AS searchable
