// Waits until every index is ONLINE, so that a search right after `migrate` sees them.
// $timeout_seconds: INTEGER
CALL db.awaitIndexes($timeout_seconds)
