// The review listing: an org's (or one team's) episodes, failed extractions included, with
// every filter of the review API (each null = no filter; they combine with AND). Fetches
// $limit rows after $offset; callers ask one more than a page to know whether more follow.
// $order: 'updated' (default), 'created', 'confirmed' (last_confirmed_at) or 'recalled'
// (last_recalled_at: when a memory-search last returned it; never recalled = last), newest
// first.
// $org: STRING, $team: STRING or null, $issue_type: STRING or null,
// $significance: STRING or null, $resolved: BOOLEAN or null, $status: STRING or null,
// $pending_error: BOOLEAN, $verdict: STRING or null ('none' = no verdict),
// $component_type: STRING or null, $component_name: STRING or null,
// $text: STRING or null (lowercase, substring of the episode's text fields),
// $order: STRING, $offset: INTEGER, $limit: INTEGER
MATCH (e:Episode {org: $org})
WHERE ($team IS NULL OR e.team = $team)
  AND ($issue_type IS NULL OR e.issue_type = $issue_type)
  AND ($significance IS NULL OR e.significance = $significance)
  AND ($resolved IS NULL OR e.resolved = $resolved)
  AND ($status IS NULL OR e.extraction_status = $status)
  AND (NOT $pending_error OR e.extraction_error IS NOT NULL)
  AND ($verdict IS NULL
       OR ($verdict = 'none' AND e.verdict IS NULL)
       OR e.verdict = $verdict)
  AND ($component_name IS NULL
       OR any(i IN range(0, size(coalesce(e.component_names, [])) - 1)
              WHERE toLower(e.component_names[i]) = toLower($component_name)
                AND ($component_type IS NULL OR e.component_types[i] = $component_type)))
  AND ($text IS NULL
       OR toLower(coalesce(e.issue_type, '') + ' ' + coalesce(e.issue_description, '') + ' ' +
                  coalesce(e.summary, '') + ' ' + coalesce(e.root_cause, '') + ' ' +
                  coalesce(e.key_findings_text, '') + ' ' + e.correlation_id)
          CONTAINS $text)
RETURN e {.*, embedding: null} AS episode
ORDER BY CASE $order
           WHEN 'created' THEN e.created_at
           WHEN 'confirmed' THEN e.last_confirmed_at
           WHEN 'recalled' THEN coalesce(e.last_recalled_at, datetime({epochMillis: 0}))
           ELSE e.updated_at
         END DESC, e.id
SKIP $offset
LIMIT $limit
