// Semantic search plans on (org, team) or org alone: these composite indexes answer the scope
// (and the `ok` status) with an index seek, so a team's exact scan and searchable count read
// that team's episodes only, never the rest of its org (docs/ranking.md, "Search plan").
CREATE INDEX episode_org_team_status IF NOT EXISTS FOR (e:Episode) ON (e.org, e.team, e.extraction_status);
CREATE INDEX episode_org_status IF NOT EXISTS FOR (e:Episode) ON (e.org, e.extraction_status);
