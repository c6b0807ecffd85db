// What people changed, newest first: episode edits, verdicts, confirmations and deletions (a
// deleted episode keeps its `Review {action: 'delete'}` record, without the episode), and
// strategy edits and accepted proposals (`kind` says which; `subject` is the episode id or
// the strategy's team/issue type/component).
:param org => 'acme';
MATCH (r:Review)
OPTIONAL MATCH (e:Episode)-[:HAS_REVIEW]->(r)
OPTIONAL MATCH (s:Strategy)-[:HAS_REVIEW]->(r)
WITH r, e, s
WHERE e.org = $org OR s.org = $org OR r.org = $org
RETURN r.at AS at, r.by AS by, r.action AS action,
       CASE WHEN s IS NULL THEN 'episode' ELSE 'strategy' END AS kind,
       coalesce(e.id, r.episode_id,
                s.team + '/' + s.issue_type + '/' + s.component_type + ':' + s.component_name)
         AS subject,
       coalesce(e.team, r.team, s.team) AS team, r.changes_json AS changes, r.version AS version
ORDER BY r.at DESC
LIMIT 100
