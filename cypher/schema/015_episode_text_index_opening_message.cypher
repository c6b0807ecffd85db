// The full-text index also reads the episode's opening message (the first turn's user
// message, verbatim: the alert names, metric names and error strings the next alert of the
// same failure repeats). Full-text indexes cannot gain a property in place, so
// episode_search_text replaces episode_text (004) with the same properties plus
// opening_message. Both statements are no-ops when run again.
CREATE FULLTEXT INDEX episode_search_text IF NOT EXISTS
FOR (e:Episode) ON EACH [e.issue_type, e.issue_description, e.opening_message, e.summary, e.root_cause, e.key_findings_text, e.scope_tokens];
DROP INDEX episode_text IF EXISTS;
