// Stamps the episodes a memory-search just returned with when they were recalled (the review
// listing's `recalled` order). Not a versioned write: `version` is not bumped, so it never
// makes a person's If-Match or the worker's compare-and-set fail; it only moves forward.
// $org: STRING, $ids: LIST<STRING>, $at: DATETIME
UNWIND $ids AS id
MATCH (e:Episode {id: id, org: $org})
// Locked before the stamp is compared, so two searches stamping at once keep the later one.
SET e._lock = true
REMOVE e._lock
WITH e
WHERE e.last_recalled_at IS NULL OR e.last_recalled_at < $at
SET e.last_recalled_at = $at
RETURN count(e) AS stamped
