//! Every exchange and queue name, derived once from `RabbitSettings`, and the routing-key
//! convention. `README.md` in this crate documents the same names for operators.

use crate::backoff::{backoff_cap_ms, retry_level_ttls_ms};
use deja_config::{QueueType, RabbitSettings};

/// Routing keys of turn events start with this word; the extraction queue binds `turn.#`.
pub const TURN_KEY_PREFIX: &str = "turn";
/// Binding of the extraction queue to the turn-event exchange.
pub const TURN_BINDING: &str = "turn.#";
/// A routing-key segment is cut to this many bytes so that a key always fits AMQP's 255.
const MAX_SEGMENT_BYTES: usize = 100;

/// The routing key of a turn event: `turn.<org>.<team>`.
///
/// Dots, `*` and `#` inside org or team are replaced by `_` so that each is exactly one word
/// for topic matching (`turn.acme.*` must not match team `a.b`); an empty segment becomes `_`.
/// Each segment is cut to 100 bytes. The key is for routing and observation only: the worker
/// reads org and team from the event body.
pub fn turn_routing_key(org: &str, team: &str) -> String {
    format!(
        "{TURN_KEY_PREFIX}.{}.{}",
        routing_segment(org),
        routing_segment(team)
    )
}

fn routing_segment(text: &str) -> String {
    let cleaned: String = text[..text.floor_char_boundary(MAX_SEGMENT_BYTES)]
        .chars()
        .map(|c| if matches!(c, '.' | '*' | '#') { '_' } else { c })
        .collect();
    if cleaned.is_empty() {
        "_".to_owned()
    } else {
        cleaned
    }
}

/// The names and retry timing of one deja topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Durable topic exchange for turn events (`settings.exchange`).
    pub turn_exchange: String,
    /// The extraction queue (`settings.name_prefix`), bound to `turn_exchange` with `turn.#`.
    pub extract_queue: String,
    pub queue_type: QueueType,
    /// Quorum queues only: deliveries of one message (crashes included) before the broker
    /// dead-letters it to `dead_letter_exchange`; 0 = no limit.
    pub delivery_limit: u32,
    /// Direct exchange in front of the retry levels: `{prefix}.retry`; retry level `n` is the
    /// queue `{retry_exchange}.{n}`.
    pub retry_exchange: String,
    /// Fanout exchange retry levels dead-letter into; bound to the extraction queue:
    /// `{queue}.requeue`.
    pub requeue_exchange: String,
    /// Fanout exchange for messages deja gave up on: `{queue}.dlx`.
    pub dead_letter_exchange: String,
    /// `{queue}.dlq`, bound to `dead_letter_exchange`.
    pub dead_letter_queue: String,
    /// `{queue}.synthesize`, fed through the default exchange.
    pub synthesis_queue: String,
    /// TTL in ms of retry level `n` at index `n - 1`.
    pub retry_ttls_ms: Vec<u64>,
    pub max_attempts: u32,
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
}

impl Topology {
    pub fn from_settings(settings: &RabbitSettings) -> Topology {
        Topology {
            turn_exchange: settings.exchange.clone(),
            extract_queue: settings.extract_queue(),
            queue_type: settings.queue_type,
            delivery_limit: settings.delivery_limit,
            retry_exchange: settings.retry_exchange(),
            requeue_exchange: settings.requeue_exchange(),
            dead_letter_exchange: settings.dead_letter_exchange(),
            dead_letter_queue: settings.dead_letter_queue(),
            synthesis_queue: settings.synthesis_queue(),
            retry_ttls_ms: retry_level_ttls_ms(
                settings.max_attempts,
                settings.retry_base_ms,
                settings.retry_max_ms,
            ),
            max_attempts: settings.max_attempts,
            retry_base_ms: settings.retry_base_ms,
            retry_max_ms: settings.retry_max_ms,
        }
    }

    /// Retry level `n` (1-based): `{prefix}.retry.{n}`.
    pub fn retry_queue(&self, level: usize) -> String {
        format!("{}.{level}", self.retry_exchange)
    }

    /// All retry level queues with their TTLs, shortest first.
    pub fn retry_levels(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.retry_ttls_ms
            .iter()
            .enumerate()
            .map(|(i, &ttl)| (self.retry_queue(i + 1), ttl))
    }

    /// Every queue of this topology, for tests and tools that clean up.
    pub fn all_queues(&self) -> Vec<String> {
        let mut queues = vec![
            self.extract_queue.clone(),
            self.dead_letter_queue.clone(),
            self.synthesis_queue.clone(),
        ];
        queues.extend(self.retry_levels().map(|(name, _)| name));
        queues
    }

    /// Every exchange this topology declares.
    pub fn all_exchanges(&self) -> Vec<String> {
        vec![
            self.turn_exchange.clone(),
            self.retry_exchange.clone(),
            self.requeue_exchange.clone(),
            self.dead_letter_exchange.clone(),
        ]
    }

    /// The un-jittered backoff for `attempt`, from the settings.
    pub fn backoff_cap_ms(&self, attempt: u32) -> u64 {
        backoff_cap_ms(attempt, self.retry_base_ms, self.retry_max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_keys_keep_org_and_team_one_word_each() {
        assert_eq!(turn_routing_key("acme", "checkout"), "turn.acme.checkout");
        assert_eq!(turn_routing_key("a.b", "x*#y"), "turn.a_b.x__y");
        assert_eq!(turn_routing_key("", "t"), "turn._.t");
    }

    #[test]
    fn routing_keys_fit_amqp_even_for_huge_multibyte_names() {
        let long = "é".repeat(400);
        let key = turn_routing_key(&long, &long);
        assert!(key.len() <= 255, "{}", key.len());
        assert!(key.starts_with("turn.é"));
    }

    #[test]
    fn names_follow_the_queue_prefix() {
        let mut settings = deja_config::Settings::defaults().rabbitmq;
        settings.name_prefix = "q".to_owned();
        settings.max_attempts = 3;
        let topology = Topology::from_settings(&settings);
        assert_eq!(topology.retry_queue(2), "q.retry.2");
        assert_eq!(topology.requeue_exchange, "q.requeue");
        assert_eq!(topology.dead_letter_exchange, "q.dlx");
        assert_eq!(topology.dead_letter_queue, "q.dlq");
        assert_eq!(topology.synthesis_queue, "q.synthesize");
        assert_eq!(
            topology.all_queues(),
            vec!["q", "q.dlq", "q.synthesize", "q.retry.1", "q.retry.2"]
        );
    }
}
