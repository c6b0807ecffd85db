// Late-interaction token vectors: one (:EpisodeTokens) node per episode, keyed by the episode's
// id, apart from the episode so that no episode read carries its ~60 KB (docs/ranking.md,
// "Late interaction").
CREATE CONSTRAINT episode_tokens_episode_id IF NOT EXISTS
FOR (t:EpisodeTokens) REQUIRE t.episode_id IS UNIQUE;
