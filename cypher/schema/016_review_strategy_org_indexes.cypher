// An org's audit records by action (`review/deleted.cypher`, read by every `deja import`; the
// Browser's review history) and an org's strategies (`strategies/list.cypher`,
// `strategies/failures.cypher`, the hub and Browser listings) are found by index, not by a
// scan of every org's nodes of the label.
CREATE INDEX review_org_action IF NOT EXISTS FOR (r:Review) ON (r.org, r.action);
CREATE INDEX strategy_org IF NOT EXISTS FOR (s:Strategy) ON (s.org);
