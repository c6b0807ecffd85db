// Tenant look-ups: every read is scoped to one org (and usually one team). The composite
// indexes serve team timelines (newest confirmation first) and org listings (newest update
// first); the status index serves `deja retry` and the failed-extractions view.
CREATE INDEX episode_org IF NOT EXISTS FOR (e:Episode) ON (e.org);
CREATE INDEX episode_org_team_confirmed IF NOT EXISTS FOR (e:Episode) ON (e.org, e.team, e.last_confirmed_at);
CREATE INDEX episode_org_updated IF NOT EXISTS FOR (e:Episode) ON (e.org, e.updated_at);
CREATE INDEX episode_extraction_status IF NOT EXISTS FOR (e:Episode) ON (e.extraction_status);
