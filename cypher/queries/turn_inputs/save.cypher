// Keeps the raw event of the newest turn of a conversation, for `deja retry`. A late, older
// turn does not replace a newer stored one (an equal index does: a redelivery or a retry),
// and neither does a turn of another team: the first team to send the conversation owns
// its input, as it owns its episode — a stray event reusing the correlation id must not
// make `deja retry` re-extract another team's turn. (An input stored before teams were
// kept has none and takes the next writer's.)
// The SET before the read takes the lock, so two concurrent saves cannot both win.
// $key: STRING, $org: STRING, $team: STRING, $correlation_id: STRING,
// $turn_index: INTEGER, $event_json: STRING
MERGE (t:TurnInput {key: $key})
  ON CREATE SET t.org = $org, t.correlation_id = $correlation_id, t.turn_index = -1
SET t._lock = true
WITH t, t.turn_index <= $turn_index AND coalesce(t.team, $team) = $team AS newer
FOREACH (_ IN CASE WHEN newer THEN [1] ELSE [] END |
  SET t.team = $team, t.turn_index = $turn_index, t.event_json = $event_json,
      t.stored_at = datetime())
REMOVE t._lock
RETURN newer AS stored
