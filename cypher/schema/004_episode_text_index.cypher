// Full-text search over what an episode is about. Full-text indexes only take string
// properties, hence `key_findings_text` (the findings joined by newlines). `scope_tokens`
// holds opaque per-org and per-team tokens so that a query can be restricted to one tenant
// inside Lucene, before its limit applies (docs/ranking.md, "Tenant scoping").
CREATE FULLTEXT INDEX episode_text IF NOT EXISTS
FOR (e:Episode) ON EACH [e.issue_type, e.issue_description, e.summary, e.root_cause, e.key_findings_text, e.scope_tokens];
