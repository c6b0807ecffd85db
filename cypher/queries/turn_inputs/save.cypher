// Keeps the raw event of the newest turn of a conversation, for `deja retry`. A late, older
// turn does not replace a newer stored one (an equal index does: a redelivery or a retry).
// The SET before the read takes the lock, so two concurrent saves cannot both win.
// $key: STRING, $org: STRING, $correlation_id: STRING, $turn_index: INTEGER,
// $event_json: STRING
MERGE (t:TurnInput {key: $key})
  ON CREATE SET t.org = $org, t.correlation_id = $correlation_id, t.turn_index = -1
SET t._lock = true
WITH t, t.turn_index <= $turn_index AS newer
FOREACH (_ IN CASE WHEN newer THEN [1] ELSE [] END |
  SET t.turn_index = $turn_index, t.event_json = $event_json, t.stored_at = datetime())
REMOVE t._lock
RETURN newer AS stored
