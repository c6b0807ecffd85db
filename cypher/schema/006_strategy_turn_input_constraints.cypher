// Strategies are keyed by StrategyKey::composite() (their storage lands later). A TurnInput
// holds the newest raw turn event of a conversation for `deja retry`, keyed like its episode.
CREATE CONSTRAINT strategy_key IF NOT EXISTS FOR (s:Strategy) REQUIRE s.key IS UNIQUE;
CREATE CONSTRAINT turn_input_key IF NOT EXISTS FOR (t:TurnInput) REQUIRE t.key IS UNIQUE;
