//! The consumer loop: deliveries in, [`Outcome`]s applied, with bounded concurrency,
//! reconnection, outage pauses (`health.rs`), panics caught per delivery, and a graceful,
//! deadline-bounded drain on shutdown.

use crate::extract::{Extractor, Outcome};
use crate::health::{Dependency, Readiness};
use crate::metrics as m;
use crate::synthesize::Synthesizer;
use backon::BackoffBuilder;
use deja_bus::{Bus, BusError, Deliveries, Delivery, Exponential, Jitter};
use deja_config::Settings;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use std::collections::BTreeSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// Consecutive refused topology declarations before the worker gives up.
const MAX_DECLARE_FAILURES: u32 = 10;
/// An "outage" that the health probe does not confirm this many times for one delivery
/// (the dependency answers at once) is blamed on the message: it then spends attempts.
const MAX_UNCONFIRMED_OUTAGES: u32 = 3;
/// How long a delivery that could not be settled (its retry or dead-letter copy refused) holds
/// its prefetch slot before it is returned to the queue: a refusal that repeats for this message
/// then costs a try every few seconds, not a redelivery loop as fast as the broker can go.
pub(crate) const UNSETTLED_PAUSE: Duration = Duration::from_secs(2);
/// Dead letters counted per `deja_dlq_depth` refresh at most, and the most bytes of their
/// bodies one refresh holds; the rest is `deja_dlq_depth{reason="unread"}`.
const DLQ_SCAN_LIMIT: usize = 10_000;
const DLQ_SCAN_BYTES: usize = 16 * 1024 * 1024;
/// How long an outage may hold deliveries unacked. RabbitMQ closes the channel of a consumer
/// that keeps a delivery unacked past its `consumer_timeout` (30 min by default; 3.10 has no
/// per-queue or per-consumer setting), so past this the worker holds nothing: each paused
/// delivery goes back to the queue unchanged (same attempt) and the consumers are cancelled
/// (what they had prefetched goes back with their channel) until the outage ends.
const OUTAGE_HOLD: Duration = Duration::from_secs(30);
/// How often the consume loop, while it waits for a permit or a delivery, looks whether an
/// outage began meanwhile.
const PAUSE_CHECK: Duration = Duration::from_secs(1);
/// First delay before consuming again after a lost consumer; it doubles up to
/// `rabbitmq.reconnect_max_ms` while sessions keep ending at once.
const RELOST_BASE_MS: u64 = 100;
/// A session that lasted this long was healthy: the next loss starts the delays afresh.
const HEALTHY_SESSION: Duration = Duration::from_secs(60);
/// The reason of a turn dead-lettered because the broker refused its retry copy.
const RETRY_FAILED: &str = "retry_failed";
/// Publishes of one retry copy the broker refuses (not a passing failure) before the turn is
/// dead-lettered as [`RETRY_FAILED`] instead.
const RETRY_PUBLISH_TRIES: u32 = 2;

/// One turn delivery's processing: the [`Extractor`] in production; tests substitute a
/// processor that panics or fails to exercise the settling code below.
pub(crate) trait ProcessTurn: Send + Sync + 'static {
    /// `routing_key`: the key the turn was first published with (`turn.<org>.<team>`).
    fn process<'a>(
        &'a self,
        body: &'a [u8],
        routing_key: &'a str,
        attempt: u32,
    ) -> BoxFuture<'a, Outcome>;

    /// `dependency` kept failing for this delivery while it answered its health probe: the
    /// message, not an outage, is the cause. By default a retry, spending an attempt.
    fn blame<'a>(
        &'a self,
        _body: &'a [u8],
        dependency: Dependency,
        _attempt: u32,
        detail: String,
    ) -> BoxFuture<'a, Outcome> {
        let reason = dependency.failure_reason().to_owned();
        Box::pin(async move { Outcome::Retry { reason, detail } })
    }
}

impl ProcessTurn for Extractor {
    fn process<'a>(
        &'a self,
        body: &'a [u8],
        routing_key: &'a str,
        attempt: u32,
    ) -> BoxFuture<'a, Outcome> {
        Box::pin(Extractor::process_routed(
            self,
            body,
            Some(routing_key),
            attempt,
        ))
    }

    fn blame<'a>(
        &'a self,
        body: &'a [u8],
        dependency: Dependency,
        attempt: u32,
        detail: String,
    ) -> BoxFuture<'a, Outcome> {
        Box::pin(Extractor::blamed(self, body, dependency, attempt, detail))
    }
}

/// The consumers `run_worker` drives, wired by `Application::build` from the worker's
/// [`Dependencies`](crate::Dependencies).
pub(crate) struct Consumers {
    pub extractor: Extractor,
    /// Consumes strategy-synthesis jobs beside extraction; `None` disables synthesis.
    pub synthesizer: Option<Synthesizer>,
}

/// Runs until `shutdown` completes, then drains in-flight work for at most
/// `worker.shutdown_grace_secs`. Returns an error only for permanent failures (bad
/// credentials, a topology that cannot be declared).
pub(crate) async fn run_worker(
    settings: &Settings,
    consumers: Consumers,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), BusError> {
    // Counters recorded before a recorder exists are lost: install it before any work.
    let _ = deja_telemetry::prometheus();
    m::describe();
    let (stop_tx, stop_rx) = watch::channel(false);
    let readiness = consumers.extractor.readiness();
    readiness.set_consuming(false);
    let extractor = Arc::new(consumers.extractor);
    let synthesizer = consumers.synthesizer.map(Arc::new);
    let limit = Arc::new(Semaphore::new(settings.worker.concurrency));
    let mut in_flight: JoinSet<()> = JoinSet::new();
    tokio::pin!(shutdown);
    let mut declare_failures = 0u32;
    let relost_policy = Exponential::new(
        RELOST_BASE_MS,
        settings.rabbitmq.reconnect_max_ms.max(RELOST_BASE_MS),
        Jitter::Equal,
    );
    let mut relost = relost_policy.build();

    let result = loop {
        let stopped = wait_stopped(stop_rx.clone());
        let connected = tokio::select! {
            () = &mut shutdown => break Ok(()),
            bus = Bus::connect_with_retry(&settings.rabbitmq, "deja-worker", stopped) => bus,
        };
        let bus = match connected {
            Ok(Some(bus)) => bus,
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        };
        if let Err(error) = bus.declare_topology().await {
            // A broker that has just come back can refuse declarations for a moment (seen: a
            // queue.bind failing right after start_app); only a refusal that persists is a
            // configuration error worth stopping for.
            declare_failures += 1;
            if error.is_transient() || declare_failures < MAX_DECLARE_FAILURES {
                tracing::warn!(%error, attempt = declare_failures, "declaring topology failed; reconnecting");
                let _ = bus.close().await;
                tokio::time::sleep(Duration::from_millis(
                    500 * u64::from(declare_failures.min(10)),
                ))
                .await;
                continue;
            }
            break Err(error);
        }
        declare_failures = 0;
        let dlq_gauge = DlqGauge::spawn(&bus, settings.worker.dlq_metrics_secs);
        let started = Instant::now();
        let session = consume(
            Session {
                bus: &bus,
                settings,
                extractor: &extractor,
                synthesizer: synthesizer.as_ref(),
                readiness: &readiness,
                limit: &limit,
                stop: &stop_rx,
                hold: OUTAGE_HOLD,
            },
            &mut in_flight,
            &mut shutdown,
        )
        .await;
        readiness.set_consuming(false);
        drop(dlq_gauge);
        match session {
            Ok(SessionEnd::Shutdown) => break Ok(()),
            Ok(SessionEnd::ConsumerLost(error)) => {
                // The connection, or only a consumer's channel: the broker closes that for a
                // delivery held past its consumer_timeout (406 PRECONDITION_FAILED), and lapin
                // does not recover it. Either way: a new connection, new consumers.
                match &error {
                    Some(error) => tracing::warn!(error = %deja_domain::error_chain(error),
                        "rabbitmq consumer lost; reconnecting"),
                    None => tracing::warn!("rabbitmq consumer ended; reconnecting"),
                }
                reap(&mut in_flight);
                if started.elapsed() >= HEALTHY_SESSION {
                    relost = relost_policy.build();
                }
                // A consumer that is lost again at once (a broker refusing it) is not
                // reopened in a tight loop.
                let delay = relost
                    .next()
                    .unwrap_or(Duration::from_millis(RELOST_BASE_MS));
                tokio::select! {
                    () = &mut shutdown => break Ok(()),
                    () = tokio::time::sleep(delay) => {}
                }
            }
            Err(error) if error.is_transient() => {
                tracing::warn!(%error, "consuming failed; reconnecting");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => break Err(error),
        }
    };

    let _ = stop_tx.send(true);
    drain(
        &mut in_flight,
        Duration::from_secs(settings.worker.shutdown_grace_secs),
    )
    .await;
    result
}

enum SessionEnd {
    Shutdown,
    /// A consumer stream failed (`Some`: its connection or its channel closed) or ended (the
    /// broker cancelled the consumer).
    ConsumerLost(Option<BusError>),
}

/// What one consuming session (one connection) works with. `P` is the [`Extractor`] in
/// production.
struct Session<'a, P> {
    bus: &'a Bus,
    settings: &'a Settings,
    extractor: &'a Arc<P>,
    synthesizer: Option<&'a Arc<Synthesizer>>,
    readiness: &'a Readiness,
    limit: &'a Arc<Semaphore>,
    stop: &'a watch::Receiver<bool>,
    /// How long an outage may hold deliveries ([`OUTAGE_HOLD`]).
    hold: Duration,
}

/// The consumer streams of a session.
struct Streams {
    turns: Deliveries,
    jobs: Option<Deliveries>,
}

impl Streams {
    async fn open(bus: &Bus, prefetch: u16, synthesis: bool) -> Result<Streams, BusError> {
        let tag = format!("deja-worker-{}", std::process::id());
        let turns = bus
            .consume(&bus.topology().extract_queue, prefetch, &tag)
            .await?;
        let jobs = match synthesis {
            true => Some(
                bus.consume(&bus.topology().synthesis_queue, 1, &format!("{tag}-synth"))
                    .await?,
            ),
            false => None,
        };
        Ok(Streams { turns, jobs })
    }
}

async fn consume<P: ProcessTurn>(
    session: Session<'_, P>,
    in_flight: &mut JoinSet<()>,
    shutdown: &mut std::pin::Pin<&mut (impl Future<Output = ()> + Send)>,
) -> Result<SessionEnd, BusError> {
    let Session {
        bus,
        settings,
        extractor,
        synthesizer,
        readiness,
        limit,
        stop,
        hold,
    } = session;
    let queue = bus.topology().extract_queue.clone();
    let prefetch = settings.rabbitmq.prefetch;
    // `None` while a long outage has them cancelled.
    let mut streams = Some(Streams::open(bus, prefetch, synthesizer.is_some()).await?);
    tracing::info!(%queue, concurrency = settings.worker.concurrency, "worker consuming");
    readiness.set_consuming(true);
    loop {
        // Outage pause: while Neo4j or the LLM is down, take nothing new. Deliveries the
        // broker already pushed wait unacked in the consumer's buffer (bounded by prefetch),
        // for `hold` at most: then the consumers are cancelled, and what they hold goes back
        // to the queue, before the broker's consumer_timeout closes their channel.
        if readiness.is_paused() {
            let since = readiness.pauses().iter().map(|p| p.since).min();
            let deadline = since.unwrap_or_else(Instant::now) + hold;
            let holding = streams.is_some();
            tokio::select! {
                () = shutdown.as_mut() => return Ok(SessionEnd::Shutdown),
                () = readiness.wait_ready() => {}
                () = tokio::time::sleep_until(deadline.into()), if holding => {
                    streams = None;
                    tracing::warn!(
                        hold_secs = hold.as_secs(),
                        "the outage outlasts the hold; consumers cancelled until it ends, their \
                         deliveries go back to the queue unchanged"
                    );
                }
            }
            continue;
        }
        let Streams { turns, jobs } = match &mut streams {
            Some(current) => current,
            None => match Streams::open(bus, prefetch, synthesizer.is_some()).await {
                Ok(opened) => {
                    tracing::info!(%queue, "outage over; consuming again");
                    streams.insert(opened)
                }
                // The next session declares the topology again before it consumes.
                Err(error) => return Ok(SessionEnd::ConsumerLost(Some(error))),
            },
        };
        // Back-pressure: take a permit before taking the next delivery, so at most
        // `concurrency` are processed and the rest wait in the broker (bounded by prefetch).
        let permit = tokio::select! {
            () = shutdown.as_mut() => return Ok(SessionEnd::Shutdown),
            permit = limit.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                // The semaphore is never closed; treat it like a shutdown if it ever is.
                Err(_) => return Ok(SessionEnd::Shutdown),
            },
            // Every permit may be held by a delivery an outage paused: look again.
            () = tokio::time::sleep(PAUSE_CHECK) => continue,
        };
        reap(in_flight);
        let next_job = async {
            match jobs.as_mut() {
                Some(jobs) => jobs.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shutdown.as_mut() => return Ok(SessionEnd::Shutdown),
            delivery = turns.next() => match delivery {
                Some(Ok(delivery)) => {
                    let extractor = extractor.clone();
                    let bus = bus.clone();
                    let readiness = readiness.clone();
                    let stop = stop.clone();
                    in_flight.spawn(async move {
                        handle_turn(&bus, delivery, extractor.as_ref(), &readiness, stop, hold)
                            .await;
                        drop(permit);
                    });
                }
                // Whatever the error (the connection lost, or only this consumer's channel
                // closed by the broker), the consumer is gone: start again.
                Some(Err(error)) => return Ok(SessionEnd::ConsumerLost(Some(error))),
                None => return Ok(SessionEnd::ConsumerLost(None)),
            },
            // An outage may have begun meanwhile (a delivery in flight met it): look again.
            () = tokio::time::sleep(PAUSE_CHECK) => continue,
            job = next_job => match job {
                Some(Ok(delivery)) => {
                    if let Some(synthesizer) = synthesizer {
                        let synthesizer = synthesizer.clone();
                        let bus = bus.clone();
                        in_flight.spawn(async move {
                            dead_letter_on_panic(&bus, &delivery, synthesizer.handle(&bus, &delivery))
                                .await;
                            drop(permit);
                        });
                    }
                }
                Some(Err(error)) => return Ok(SessionEnd::ConsumerLost(Some(error))),
                None => return Ok(SessionEnd::ConsumerLost(None)),
            },
        }
    }
}

/// Processes one turn delivery to a settled end: an outage makes it wait (unacked, no attempt
/// spent) and go again; a panic dead-letters it as `panicked` instead of leaving it to be
/// redelivered forever; shutdown during a wait, or a wait longer than `hold`, returns it to
/// the queue unchanged.
pub(crate) async fn handle_turn<P: ProcessTurn + ?Sized>(
    bus: &Bus,
    delivery: Delivery,
    processor: &P,
    readiness: &Readiness,
    stop: watch::Receiver<bool>,
    hold: Duration,
) {
    let mut unconfirmed = 0u32;
    // After a retry the delivery's own key is the retry level's: the tenant check needs the
    // key the turn was published with.
    let routing_key = delivery.original_routing_key();
    loop {
        let processing = processor.process(delivery.body(), &routing_key, delivery.attempt());
        let outcome = match AssertUnwindSafe(processing).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(panic) => Outcome::DeadLetter {
                reason: "panicked".to_owned(),
                detail: panicked(&delivery, panic.as_ref()),
            },
        };
        let (dependency, detail) = match outcome {
            Outcome::Unavailable { dependency, detail } => (dependency, detail),
            settled => {
                settle(bus, &delivery, settled).await;
                return;
            }
        };
        if unconfirmed >= MAX_UNCONFIRMED_OUTAGES {
            // The dependency keeps answering its probe yet fails for this message.
            let blaming = processor.blame(delivery.body(), dependency, delivery.attempt(), detail);
            let outcome = match AssertUnwindSafe(blaming).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(panic) => Outcome::DeadLetter {
                    reason: "panicked".to_owned(),
                    detail: panicked(&delivery, panic.as_ref()),
                },
            };
            settle(bus, &delivery, outcome).await;
            return;
        }
        readiness.report_down(dependency, &detail);
        tokio::select! {
            () = readiness.wait_ready() => {}
            () = tokio::time::sleep(hold) => {
                // Held any longer, the broker's consumer_timeout would close the consumer's
                // channel. It is taken again, same attempt, once the outage ends.
                tracing::info!(delivery = ?delivery, hold_secs = hold.as_secs(),
                    "the outage outlasts the hold; the paused delivery goes back to the queue");
                if let Err(error) = delivery.nack_requeue().await {
                    tracing::warn!(%error, "could not requeue a paused delivery; it will be redelivered");
                }
                return;
            }
            () = wait_stopped(stop.clone()) => {
                if let Err(error) = delivery.nack_requeue().await {
                    tracing::warn!(%error, "could not requeue a paused delivery; it will be redelivered");
                }
                return;
            }
        }
        if !readiness.last_outage_confirmed(dependency) {
            unconfirmed += 1;
        }
    }
}

/// Awaits a synthesis job's `handling` (which settles the job); should it panic, the job is
/// dead-lettered as `panicked` rather than dropped unsettled, which would requeue it to panic
/// again at once, forever.
async fn dead_letter_on_panic(
    bus: &Bus,
    delivery: &Delivery,
    handling: impl std::future::Future<Output = ()>,
) {
    let Err(panic) = AssertUnwindSafe(handling).catch_unwind().await else {
        return;
    };
    let detail = panicked(delivery, panic.as_ref());
    if let Err(error) = delivery.dead_letter(bus, "panicked", &detail).await {
        tracing::warn!(%error, "could not dead-letter the job; it will be redelivered");
        tokio::time::sleep(UNSETTLED_PAUSE).await;
    }
}

/// Counts and logs a panic while processing `delivery`; the detail its dead letter carries.
fn panicked(delivery: &Delivery, panic: &(dyn std::any::Any + Send)) -> String {
    m::panicked();
    let detail = format!("processing panicked: {}", panic_message(panic));
    tracing::error!(%detail, delivery = ?delivery, "delivery panicked; dead-lettering it");
    detail
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-text panic payload".to_owned()
    }
}

/// Refreshes `deja_dlq_depth{reason}` every `interval_secs` while a session lasts (the task
/// is aborted when the guard is dropped).
struct DlqGauge(Option<tokio::task::JoinHandle<()>>);

impl DlqGauge {
    fn spawn(bus: &Bus, interval_secs: u64) -> DlqGauge {
        if interval_secs == 0 {
            return DlqGauge(None);
        }
        let bus = bus.clone();
        DlqGauge(Some(tokio::spawn(async move {
            let mut known: BTreeSet<String> = BTreeSet::new();
            let mut tick = tokio::time::interval(Duration::from_secs(interval_secs));
            loop {
                tick.tick().await;
                match bus.dead_letter_counts(DLQ_SCAN_LIMIT, DLQ_SCAN_BYTES).await {
                    Ok(counts) => {
                        for reason in &known {
                            if !counts.contains_key(reason) {
                                m::dlq_depth(reason, 0);
                            }
                        }
                        for (reason, count) in &counts {
                            m::dlq_depth(reason, *count);
                        }
                        known.extend(counts.into_keys());
                    }
                    Err(error) => tracing::debug!(%error, "could not count dead letters"),
                }
            }
        })))
    }
}

impl Drop for DlqGauge {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// Maps an outcome onto the delivery. Every branch acks only after the outcome is durable.
async fn settle(bus: &Bus, delivery: &Delivery, outcome: Outcome) {
    let result = match outcome {
        // Handled by `handle_turn`; should one arrive here, return it unchanged.
        Outcome::Unavailable { .. } => delivery.nack_requeue().await,
        Outcome::Stored { .. } => {
            m::processed();
            delivery.ack().await
        }
        Outcome::Retry { reason, detail } => retry(bus, delivery, &reason, &detail).await,
        Outcome::DeadLetter { reason, detail } => {
            m::dead_lettered(&reason);
            delivery.dead_letter(bus, &reason, &detail).await
        }
    };
    if let Err(error) = result {
        // Not settled: dropped, it is requeued (or the broker redelivers it when the channel
        // closes), and the event id makes the second pass a no-op if the write had committed.
        tracing::warn!(%error, "could not settle delivery; it will be redelivered");
        tokio::time::sleep(UNSETTLED_PAUSE).await;
    }
}

/// Sends the retry copy of a delivery that failed with `reason`, or dead-letters it: when it
/// used its last attempt, or when the broker refuses the copy (not a passing failure: a
/// property it rejects, a retry level gone) [`RETRY_PUBLISH_TRIES`] times, as
/// [`RETRY_FAILED`], rather than leave it to come back on the same attempt for ever.
async fn retry(bus: &Bus, delivery: &Delivery, reason: &str, detail: &str) -> Result<(), BusError> {
    let delay = bus.retry_delay(delivery.attempt());
    let mut tries = 0;
    let refusal = loop {
        match delivery.retry(bus, delay).await {
            Ok(_) => {
                m::retried(reason);
                return Ok(());
            }
            Err(BusError::AttemptsExhausted { .. }) => {
                m::dead_lettered(reason);
                return delivery.dead_letter(bus, reason, detail).await;
            }
            Err(error) if error.is_transient() => return Err(error),
            Err(error) => {
                tries += 1;
                tracing::warn!(error = %deja_domain::error_chain(&error), tries,
                    "the broker refused the retry copy");
                if tries >= RETRY_PUBLISH_TRIES {
                    break error;
                }
            }
        }
    };
    m::dead_lettered(RETRY_FAILED);
    let detail = format!(
        "the broker refused its retry copy ({}); it had failed with {reason}: {detail}",
        deja_domain::error_chain(&refusal)
    );
    delivery.dead_letter(bus, RETRY_FAILED, &detail).await
}

fn reap(in_flight: &mut JoinSet<()>) {
    while let Some(result) = in_flight.try_join_next() {
        if let Err(error) = result {
            if error.is_panic() {
                tracing::error!(%error, "a delivery task panicked; its message will be redelivered");
            }
        }
    }
}

async fn drain(in_flight: &mut JoinSet<()>, grace: Duration) {
    let count = in_flight.len();
    if count == 0 {
        return;
    }
    tracing::info!(
        in_flight = count,
        grace_secs = grace.as_secs(),
        "draining in-flight deliveries"
    );
    let drained = tokio::time::timeout(grace, async {
        while in_flight.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            unfinished = in_flight.len(),
            "shutdown deadline passed; unfinished deliveries are not acked and will be redelivered"
        );
        in_flight.abort_all();
        while in_flight.join_next().await.is_some() {}
    }
}

async fn wait_stopped(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The per-delivery settling code against the real RabbitMQ, with processors that panic
    //! or report outages (the extractor itself is exercised by the integration tests).
    use super::*;
    use crate::health::{Dependency, Probe};
    use deja_bus::{PublishMeta, HEADER_REASON};
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::Mutex;

    fn rabbit_settings() -> deja_config::RabbitSettings {
        let mut settings = Settings::defaults().rabbitmq;
        if let Ok(uri) = std::env::var("DEJA__RABBITMQ__URI") {
            settings.uri = deja_config::Secret::new(uri);
        }
        let prefix = format!("deja.test.{}", uuid::Uuid::new_v4().simple());
        settings.exchange = format!("{prefix}.turns");
        settings.name_prefix = prefix;
        settings.max_attempts = 5;
        settings.retry_base_ms = 100;
        settings.retry_max_ms = 400;
        settings
    }

    /// A bus with its own topology and one published turn, taken off the queue.
    async fn one_delivery() -> (Bus, Delivery) {
        let bus = Bus::connect_named(&rabbit_settings(), "deja-worker-test")
            .await
            .expect("rabbitmq is up (deploy/services.sh up)");
        bus.declare_topology().await.expect("topology");
        bus.publish_turn(
            br#"{"event_id":"evt-1"}"#,
            &PublishMeta::turn("acme", "sre"),
        )
        .await
        .expect("publish");
        let queue = bus.topology().extract_queue.clone();
        let delivery = take(&bus, &queue).await;
        (bus, delivery)
    }

    async fn take(bus: &Bus, queue: &str) -> Delivery {
        for _ in 0..200 {
            if let Some(delivery) = bus.get_one(queue).await.expect("basic.get") {
                return delivery;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("nothing arrived in {queue}");
    }

    struct Panicking;

    impl ProcessTurn for Panicking {
        fn process<'a>(&'a self, _: &'a [u8], _: &'a str, _: u32) -> BoxFuture<'a, Outcome> {
            Box::pin(async { panic!("poison message") })
        }
    }

    /// Reports an outage for the first `outages` calls, then stores; records the attempts.
    struct Outage {
        outages: u32,
        attempts: Mutex<Vec<u32>>,
    }

    impl ProcessTurn for Outage {
        fn process<'a>(&'a self, _: &'a [u8], _: &'a str, attempt: u32) -> BoxFuture<'a, Outcome> {
            Box::pin(async move {
                let mut attempts = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
                attempts.push(attempt);
                if attempts.len() as u32 <= self.outages {
                    Outcome::Unavailable {
                        dependency: Dependency::Neo4j,
                        detail: "connection refused".to_owned(),
                    }
                } else {
                    Outcome::Stored {
                        episode_id: "ep".to_owned(),
                        changed: true,
                        status: deja_domain::ExtractionStatus::Ok,
                    }
                }
            })
        }
    }

    /// Fails `failures` times, then answers.
    struct Probed {
        failures: u32,
        calls: AtomicU32,
    }

    impl Probe for Probed {
        fn probe(&self, _: Dependency) -> BoxFuture<'_, Result<(), String>> {
            Box::pin(async move {
                if self.calls.fetch_add(1, Ordering::SeqCst) < self.failures {
                    Err("connection refused".to_owned())
                } else {
                    Ok(())
                }
            })
        }
    }

    fn readiness(probe_failures: u32) -> Readiness {
        let probe = Probed {
            failures: probe_failures,
            calls: AtomicU32::new(0),
        };
        Readiness::new(Arc::new(probe), Duration::from_millis(300))
    }

    #[tokio::test]
    async fn a_delivery_that_panics_is_dead_lettered_as_panicked_instead_of_redelivered() {
        let (bus, delivery) = one_delivery().await;
        let (_stop_tx, stop) = watch::channel(false);
        handle_turn(&bus, delivery, &Panicking, &readiness(0), stop, OUTAGE_HOLD).await;
        assert_dead_lettered_as_panicked(&bus, "poison message").await;
    }

    /// The one message of `bus`'s topology sits in the dead-letter queue as `panicked`, with
    /// `detail` in its detail header, and nothing is left in the extraction queue.
    async fn assert_dead_lettered_as_panicked(bus: &Bus, detail: &str) {
        let t = bus.topology().clone();
        let letter = take(bus, &t.dead_letter_queue).await;
        assert_eq!(
            letter.header_str(HEADER_REASON).as_deref(),
            Some("panicked")
        );
        assert!(letter
            .header_str(deja_bus::HEADER_DETAIL)
            .unwrap_or_default()
            .contains(detail));
        letter.ack().await.expect("ack");
        assert_eq!(bus.queue_depth(&t.extract_queue).await.unwrap(), 0);
        let _ = bus.delete_topology().await;
    }

    #[tokio::test]
    async fn a_job_whose_handling_panics_is_dead_lettered_not_requeued() {
        let (bus, delivery) = one_delivery().await;
        dead_letter_on_panic(&bus, &delivery, async { panic!("bad strategy sources") }).await;
        drop(delivery);
        assert_dead_lettered_as_panicked(&bus, "bad strategy sources").await;
    }

    #[tokio::test]
    async fn an_outage_spends_no_attempt_and_the_delivery_is_processed_again_once_probed_healthy() {
        let (bus, delivery) = one_delivery().await;
        let (_stop_tx, stop) = watch::channel(false);
        let processor = Outage {
            outages: 2,
            attempts: Mutex::new(Vec::new()),
        };
        let readiness = readiness(2);
        handle_turn(&bus, delivery, &processor, &readiness, stop, OUTAGE_HOLD).await;
        assert_eq!(*processor.attempts.lock().unwrap(), vec![1, 1, 1]);
        assert!(!readiness.is_paused());
        let t = bus.topology().clone();
        for queue in [&t.extract_queue, &t.dead_letter_queue, &t.retry_queue(1)] {
            assert_eq!(bus.queue_depth(queue).await.unwrap(), 0, "{queue} is empty");
        }
        let _ = bus.delete_topology().await;
    }

    #[tokio::test]
    async fn an_outage_the_probe_never_confirms_is_blamed_on_the_message_after_three_passes() {
        let (bus, delivery) = one_delivery().await;
        let (_stop_tx, stop) = watch::channel(false);
        let processor = Outage {
            outages: u32::MAX,
            attempts: Mutex::new(Vec::new()),
        };
        handle_turn(&bus, delivery, &processor, &readiness(0), stop, OUTAGE_HOLD).await;
        assert_eq!(
            processor.attempts.lock().unwrap().len(),
            MAX_UNCONFIRMED_OUTAGES as usize + 1
        );
        let t = bus.topology().clone();
        let retried = take(&bus, &t.extract_queue).await;
        assert_eq!(retried.attempt(), 2, "the retry path spent one attempt");
        retried.ack().await.expect("ack");
        let _ = bus.delete_topology().await;
    }

    #[tokio::test]
    async fn a_paused_delivery_goes_back_to_the_queue_unchanged_on_shutdown() {
        let (bus, delivery) = one_delivery().await;
        let (stop_tx, stop) = watch::channel(false);
        let processor = Outage {
            outages: u32::MAX,
            attempts: Mutex::new(Vec::new()),
        };
        // The probe never succeeds: the delivery waits until shutdown.
        let readiness = readiness(u32::MAX);
        let handled = handle_turn(&bus, delivery, &processor, &readiness, stop, OUTAGE_HOLD);
        let stopper = async {
            while !readiness.is_paused() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let _ = stop_tx.send(true);
        };
        tokio::join!(handled, stopper);
        let t = bus.topology().clone();
        let back = take(&bus, &t.extract_queue).await;
        assert_eq!(back.attempt(), 1);
        assert!(back.redelivered());
        back.ack().await.expect("ack");
        assert_eq!(bus.queue_depth(&t.dead_letter_queue).await.unwrap(), 0);
        let _ = bus.delete_topology().await;
    }

    #[tokio::test]
    async fn a_delivery_paused_past_the_hold_goes_back_to_the_queue_unchanged() {
        let (bus, delivery) = one_delivery().await;
        let (_stop_tx, stop) = watch::channel(false);
        let processor = Outage {
            outages: u32::MAX,
            attempts: Mutex::new(Vec::new()),
        };
        // The probe never succeeds: only the hold ends the wait.
        let readiness = readiness(u32::MAX);
        let hold = Duration::from_millis(300);
        let handled = handle_turn(&bus, delivery, &processor, &readiness, stop, hold);
        tokio::time::timeout(Duration::from_secs(10), handled)
            .await
            .expect("the hold ends the wait");
        assert!(readiness.is_paused(), "the outage goes on");
        let t = bus.topology().clone();
        let back = take(&bus, &t.extract_queue).await;
        assert_eq!(back.attempt(), 1, "no attempt spent");
        assert!(back.redelivered());
        back.ack().await.expect("ack");
        for queue in [&t.dead_letter_queue, &t.retry_queue(1)] {
            assert_eq!(bus.queue_depth(queue).await.unwrap(), 0, "{queue} is empty");
        }
        let _ = bus.delete_topology().await;
    }

    /// Reports an outage of Neo4j while `healthy` is false, then stores; counts the stored.
    struct Switched {
        healthy: Arc<AtomicBool>,
        stored: AtomicU32,
    }

    impl ProcessTurn for Switched {
        fn process<'a>(&'a self, _: &'a [u8], _: &'a str, _: u32) -> BoxFuture<'a, Outcome> {
            Box::pin(async move {
                if !self.healthy.load(Ordering::SeqCst) {
                    return Outcome::Unavailable {
                        dependency: Dependency::Neo4j,
                        detail: "connection refused".to_owned(),
                    };
                }
                self.stored.fetch_add(1, Ordering::SeqCst);
                Outcome::Stored {
                    episode_id: "ep".to_owned(),
                    changed: true,
                    status: deja_domain::ExtractionStatus::Ok,
                }
            })
        }
    }

    /// Answers while `healthy` is true.
    struct SwitchedProbe(Arc<AtomicBool>);

    impl Probe for SwitchedProbe {
        fn probe(&self, _: Dependency) -> BoxFuture<'_, Result<(), String>> {
            Box::pin(async move {
                match self.0.load(Ordering::SeqCst) {
                    true => Ok(()),
                    false => Err("connection refused".to_owned()),
                }
            })
        }
    }

    /// Polls `ready` every 50 ms for up to `within`.
    async fn eventually<F: std::future::Future<Output = bool>>(
        within: Duration,
        ready: impl Fn() -> F,
    ) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if ready().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// RabbitMQ closes a consumer's channel when it holds a delivery unacked past its
    /// consumer_timeout: an outage longer than the hold holds nothing, neither the paused
    /// delivery nor those the consumer had prefetched, and consuming resumes when it ends.
    #[tokio::test]
    async fn an_outage_past_the_hold_cancels_the_consumer_and_returns_what_it_held_until_it_ends() {
        let mut settings = Settings::defaults();
        settings.rabbitmq = rabbit_settings();
        settings.rabbitmq.prefetch = 16;
        settings.worker.concurrency = 1;
        let bus = Bus::connect_named(&settings.rabbitmq, "deja-worker-test")
            .await
            .expect("rabbitmq is up (deploy/services.sh up)");
        bus.declare_topology().await.expect("topology");
        let t = bus.topology().clone();
        for i in 0..3 {
            let body = format!(r#"{{"event_id":"evt-{i}"}}"#);
            bus.publish_turn(body.as_bytes(), &PublishMeta::turn("acme", "sre"))
                .await
                .expect("publish");
        }
        let healthy = Arc::new(AtomicBool::new(false));
        let processor = Arc::new(Switched {
            healthy: healthy.clone(),
            stored: AtomicU32::new(0),
        });
        let readiness = Readiness::new(
            Arc::new(SwitchedProbe(healthy.clone())),
            Duration::from_millis(300),
        );
        let limit = Arc::new(Semaphore::new(settings.worker.concurrency));
        let (stop_tx, stop_rx) = watch::channel(false);
        let (end_tx, end_rx) = tokio::sync::oneshot::channel::<()>();
        let consuming = async {
            let mut in_flight = JoinSet::new();
            let shutdown = async {
                let _ = end_rx.await;
            };
            tokio::pin!(shutdown);
            let session = Session {
                bus: &bus,
                settings: &settings,
                extractor: &processor,
                synthesizer: None,
                readiness: &readiness,
                limit: &limit,
                stop: &stop_rx,
                hold: Duration::from_secs(1),
            };
            let end = consume(session, &mut in_flight, &mut shutdown).await;
            let _ = stop_tx.send(true);
            drain(&mut in_flight, Duration::from_secs(5)).await;
            end
        };
        let checking = async {
            let depth = || async { bus.queue_depth(&t.extract_queue).await.unwrap_or(0) };
            // The consumer took them all (one processed, the others prefetched) and the
            // outage paused it.
            let taken = eventually(Duration::from_secs(20), || async {
                readiness.is_paused() && depth().await == 0
            })
            .await;
            let returned =
                taken && eventually(Duration::from_secs(20), || async { depth().await == 3 }).await;
            let paused = readiness.is_paused();
            healthy.store(true, Ordering::SeqCst);
            let stored = eventually(Duration::from_secs(20), || async {
                processor.stored.load(Ordering::SeqCst) == 3 && depth().await == 0
            })
            .await;
            let _ = end_tx.send(());
            (returned, paused, stored)
        };
        let (end, (returned, paused, stored)) = tokio::join!(consuming, checking);
        let _ = bus.delete_topology().await;
        assert!(
            returned,
            "every delivery went back to the queue while the outage lasted"
        );
        assert!(paused, "the outage still lasted then");
        assert!(stored, "all three processed once it ended");
        assert!(matches!(end, Ok(SessionEnd::Shutdown)));
    }

    #[tokio::test]
    async fn a_retry_copy_the_broker_refuses_is_dead_lettered_as_retry_failed_not_requeued() {
        let (bus, delivery) = one_delivery().await;
        let t = bus.topology().clone();
        // With its retry levels gone, a retry copy is unroutable: refused for good.
        for level in 1..=t.retry_ttls_ms.len() {
            bus.delete_queue(&t.retry_queue(level))
                .await
                .expect("delete a retry level");
        }
        let outcome = Outcome::Retry {
            reason: "llm_failed".to_owned(),
            detail: "reply still invalid".to_owned(),
        };
        settle(&bus, &delivery, outcome).await;
        drop(delivery);
        let letter = take(&bus, &t.dead_letter_queue).await;
        assert_eq!(
            letter.header_str(HEADER_REASON).as_deref(),
            Some(RETRY_FAILED)
        );
        let detail = letter
            .header_str(deja_bus::HEADER_DETAIL)
            .unwrap_or_default();
        assert!(
            detail.contains("llm_failed") && detail.contains("reply still invalid"),
            "{detail}"
        );
        assert_eq!(letter.attempt(), 1);
        letter.ack().await.expect("ack");
        assert_eq!(bus.queue_depth(&t.extract_queue).await.unwrap(), 0);
        let _ = bus.delete_topology().await;
    }
}
