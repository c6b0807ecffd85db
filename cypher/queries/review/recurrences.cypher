// An episode's recurrence chain: every episode reachable over RECURRENCE_OF in either
// direction (bounded), how many they are, when the pattern was first and last seen, and the
// episode's own links; `chain` lists every episode of the chain, this one included, oldest
// first (what the hub draws as the chain). With $teams, only the chain members and links of
// those teams count and are listed, as in search (search/semantic_exact_team.cypher): a
// person may link across teams, and a team-bound reviewer must not see the other team's
// episodes or dates. `rejected` lists the pairs a person unlinked (NOT_RECURRENCE_OF, both
// directions): the worker's automatic linking never makes them again until a person links
// the pair.
// An episode a person marked wrong (`verdict`) is listed in `chain`, for people to see, but
// counts as search counts it (search/semantic_exact_team.cypher): neither it nor what is
// reached only across it is in `recurrence_count`, `first_seen` or `last_seen`, and a wrong
// episode's own count is 0.
// $org: STRING, $id: STRING, $teams: LIST<STRING> or null (null = every team)
MATCH (e:Episode {id: $id, org: $org})
OPTIONAL MATCH p = (e)-[:RECURRENCE_OF*1..10]-(x:Episode {org: $org})
WHERE x <> e AND ($teams IS NULL OR all(m IN nodes(p) WHERE m.team IN $teams))
WITH e, x, max(CASE WHEN none(m IN nodes(p) WHERE coalesce(m.verdict, '') = 'wrong')
                    THEN 1 ELSE 0 END) AS clean
WITH e, collect(x) AS chain, collect(CASE WHEN clean = 1 THEN x END) AS counted
WITH e, chain, counted, [n IN counted + [e] | n.created_at] AS seen
RETURN size(counted) AS recurrence_count,
       [n IN chain + [e] | {id: n.id, team: n.team, issue_type: n.issue_type,
                            created_at: n.created_at, verdict: n.verdict}] AS chain,
       reduce(m = e.created_at, t IN seen | CASE WHEN t < m THEN t ELSE m END) AS first_seen,
       reduce(m = e.created_at, t IN seen | CASE WHEN t > m THEN t ELSE m END) AS last_seen,
       [(e)-[r:RECURRENCE_OF]->(o:Episode) WHERE $teams IS NULL OR o.team IN $teams |
          {direction: 'of', id: o.id, team: o.team,
          issue_type: o.issue_type, created_at: o.created_at, detected_at: r.detected_at,
          confidence: r.confidence, by: r.by, confirmed_by: r.confirmed_by}] +
       [(e)<-[r:RECURRENCE_OF]-(o:Episode) WHERE $teams IS NULL OR o.team IN $teams |
          {direction: 'recurred_in', id: o.id, team: o.team,
          issue_type: o.issue_type, created_at: o.created_at, detected_at: r.detected_at,
          confidence: r.confidence, by: r.by, confirmed_by: r.confirmed_by}] AS links,
       [(e)-[r:NOT_RECURRENCE_OF]->(o:Episode) WHERE $teams IS NULL OR o.team IN $teams |
          {direction: 'of', id: o.id, team: o.team, issue_type: o.issue_type, by: r.by,
           at: r.at}] +
       [(e)<-[r:NOT_RECURRENCE_OF]-(o:Episode) WHERE $teams IS NULL OR o.team IN $teams |
          {direction: 'recurred_in', id: o.id, team: o.team, issue_type: o.issue_type,
           by: r.by, at: r.at}] AS rejected
