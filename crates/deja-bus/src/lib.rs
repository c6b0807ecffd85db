//! RabbitMQ adapter: topology, publishing with confirms, consuming, retry and dead-letter paths.
//!
//! Layers, pure first: [`backoff`] (retry timing, and its `backon` policy) and [`topology`] (names, routing keys) do no
//! IO; `bus` owns the connection, the confirmed publisher and consumer streams; `delivery`
//! settles one message; `admin` declares the topology and offers queue tools; `dlq` lists and replays dead letters.
//!
//! Architecture invariant: every publish waits for the broker's confirm, and a message is
//! acked only after its successor (retry copy, dead-letter copy, or the committed work) is
//! safe. Delivery is at least once; consumers deduplicate by event id.
//!
//! Names and the routing-key convention are documented in this crate's `README.md`.

mod admin;
pub mod backoff;
mod bus;
mod delivery;
mod dlq;
mod error;
pub mod topology;

pub use backoff::{backoff, Exponential, Jitter};
pub use bus::{Bus, Deliveries, PublishMeta};
pub use delivery::{
    Delivery, RetryScheduled, HEADER_ATTEMPT, HEADER_ATTEMPTS, HEADER_DEAD_LETTERED_AT,
    HEADER_DETAIL, HEADER_ORIGINAL_ROUTING_KEY, HEADER_REASON, HEADER_SOURCE_QUEUE,
    MAX_DETAIL_BYTES,
};
pub use dlq::{
    DeadLetter, DlqFilter, ReplayReport, HEADER_REPLAYED_AT, UNKNOWN_REASON, UNREAD_REASON,
};
pub use error::BusError;
pub use topology::{turn_routing_key, Topology};

#[cfg(test)]
mod tests {
    /// The worker moves these into spawned tasks; losing `Send` would break it far from here.
    #[test]
    fn handles_can_cross_tasks() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<super::Bus>();
        send_sync::<super::Delivery>();
        send::<super::Deliveries>();
        send_sync::<super::BusError>();
    }
}
