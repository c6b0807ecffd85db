// One episode by id, optionally restricted to an org (API callers are always scoped).
// $id: STRING, $org: STRING or null
MATCH (e:Episode {id: $id})
WHERE $org IS NULL OR e.org = $org
RETURN e {.*} AS episode
