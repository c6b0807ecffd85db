// The issue types a team already uses, most frequent first (offered to the LLM).
// $org: STRING, $team: STRING, $limit: INTEGER
MATCH (e:Episode {org: $org, team: $team})
WHERE e.extraction_status = 'ok' AND e.issue_type <> ''
WITH e.issue_type AS issue_type, count(*) AS uses
ORDER BY uses DESC, issue_type
LIMIT $limit
RETURN issue_type
