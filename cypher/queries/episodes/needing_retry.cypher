// Conversations whose latest extraction failed (a failed episode, or an ok one with an error
// recorded beside its older conclusion): what `deja retry` re-extracts. Oldest first.
// $org: STRING or null (every org), $limit: INTEGER
MATCH (e:Episode)
WHERE ($org IS NULL OR e.org = $org)
  AND (e.extraction_status = 'failed' OR e.extraction_error IS NOT NULL)
RETURN e.org AS org, e.correlation_id AS correlation_id
ORDER BY e.updated_at, e.id
LIMIT $limit
