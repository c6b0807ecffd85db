// Keeps the raw event of the newest turn of a conversation, for `deja retry`. A late, older
// turn does not replace a newer stored one (an equal index does: a redelivery or a retry).
// Only the team that owns the conversation writes its input: the episode's team, or before
// there is an episode the first team to send it — a stray event of another team reusing the
// correlation id must not make `deja retry` re-extract (or a reviewer read) its turn. An
// input another team stored before the episode existed is replaced by the owner's next turn
// whatever its index. (An input stored before teams were kept has none: it counts as the
// owner's.)
// The SET before the read takes the lock, so two concurrent saves cannot both win.
// `untrusted` gathers the owner's turns' tool outputs ($untrusted: this turn's), each turn
// once (`untrusted_turns`: not again for a redelivery or a retry of any turn already added),
// keeping the newest $max_untrusted characters: the worker's copy guard reads it beside the
// current turn's, so that an answer echoing an injection an earlier turn's tool printed is
// caught too. Returned after this turn's is added.
// $key: STRING, $org: STRING, $team: STRING, $correlation_id: STRING,
// $turn_index: INTEGER, $event_json: STRING, $untrusted: STRING, $max_untrusted: INTEGER
MERGE (t:TurnInput {key: $key})
  ON CREATE SET t.org = $org, t.correlation_id = $correlation_id, t.turn_index = -1
SET t._lock = true
WITH t
OPTIONAL MATCH (e:Episode {key: $key})
WITH t, coalesce(e.team, t.team, $team) AS owner
WITH t, owner = $team AND (coalesce(t.team, owner) <> owner OR t.turn_index <= $turn_index)
     AS newer,
     owner = $team AND $untrusted <> ''
       AND NOT $turn_index IN coalesce(t.untrusted_turns, []) AS unseen
FOREACH (_ IN CASE WHEN unseen THEN [1] ELSE [] END |
  SET t.untrusted = right(coalesce(t.untrusted, '') + '\n' + $untrusted, $max_untrusted),
      t.untrusted_turns = coalesce(t.untrusted_turns, []) + $turn_index)
FOREACH (_ IN CASE WHEN newer THEN [1] ELSE [] END |
  SET t.team = $team, t.turn_index = $turn_index, t.event_json = $event_json,
      t.stored_at = datetime())
REMOVE t._lock
RETURN newer AS stored, coalesce(t.untrusted, '') AS untrusted
