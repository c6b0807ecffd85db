// An episode's recurrence chain: every episode reachable over RECURRENCE_OF in either
// direction (bounded), how many they are, when the pattern was first and last seen, and the
// episode's own links; `chain` lists every episode of the chain, this one included, oldest
// first (what the hub draws as the chain). With $teams, only the chain members and links of
// those teams count and are listed, as in search (search/semantic_exact_team.cypher): a
// person may link across teams, and a team-bound reviewer must not see the other team's
// episodes or dates. `rejected` lists the pairs a person unlinked (NOT_RECURRENCE_OF, both
// directions): the worker's automatic linking never makes them again until a person links
// the pair.
// $org: STRING, $id: STRING, $teams: LIST<STRING> or null (null = every team)
MATCH (e:Episode {id: $id, org: $org})
OPTIONAL MATCH (e)-[:RECURRENCE_OF*1..10]-(x:Episode {org: $org})
WHERE $teams IS NULL OR x.team IN $teams
WITH e, [n IN collect(DISTINCT x) WHERE n <> e] AS chain
WITH e, chain, [n IN chain + [e] | n.created_at] AS seen
RETURN size(chain) AS recurrence_count,
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
