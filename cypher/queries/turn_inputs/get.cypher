// The stored newest turn event of a conversation.
// $key: STRING
MATCH (t:TurnInput {key: $key})
RETURN t.turn_index AS turn_index, t.event_json AS event_json
