// The issue types an org already uses (every team), most used first, each with a short
// description: the root cause of its latest resolved episode, else its latest description.
// Offered to the LLM for reuse and listed by `deja vocab list`. Offered for a later turn of a
// conversation, its own episode is left out ($besides = its correlation id): an earlier turn's
// type is the stored episode's, not the org's, and offered as both it outlived the guess it
// named (docs/EVALUATION.md, "An issue type that names a ruled-out hypothesis").
// $org: STRING, $limit: INTEGER, $besides: STRING or null (every episode)
MATCH (e:Episode {org: $org})
WHERE e.extraction_status = 'ok' AND e.issue_type <> ''
  AND ($besides IS NULL OR e.correlation_id <> $besides)
WITH e
ORDER BY e.root_cause IS NULL, e.updated_at DESC
WITH e.issue_type AS issue_type, count(*) AS uses,
     collect(coalesce(e.root_cause, e.issue_description))[0] AS description
ORDER BY uses DESC, issue_type
LIMIT $limit
RETURN issue_type, uses, coalesce(description, '') AS description
