// The strategy step reads the newest episodes of one (org, team or whole org, issue type)
// that affect one component (strategies/sources_team.cypher, sources_org.cypher). Seeking
// these indexes reads that issue type's episodes of the scope only, instead of every episode
// of the org, which cost ~0.5 s per qualifying search at 100k episodes (docs/BENCHMARKS.md).
CREATE INDEX episode_org_team_issue_status IF NOT EXISTS FOR (e:Episode) ON (e.org, e.team, e.issue_type, e.extraction_status);
CREATE INDEX episode_org_issue_status IF NOT EXISTS FOR (e:Episode) ON (e.org, e.issue_type, e.extraction_status);
