//! The consumer loop: deliveries in, [`Outcome`]s applied, with bounded concurrency,
//! reconnection and a graceful, deadline-bounded drain on shutdown.

use crate::extract::{Extractor, Outcome};
use crate::metrics as m;
use crate::synthesize::Synthesizer;
use deja_bus::{Bus, BusError, Delivery};
use deja_config::Settings;
use futures::StreamExt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// Consecutive refused topology declarations before the worker gives up.
const MAX_DECLARE_FAILURES: u32 = 10;

/// What `run_worker` needs besides settings.
pub struct WorkerHandles {
    pub extractor: Extractor,
    /// Consumes strategy-synthesis jobs beside extraction; `None` disables synthesis.
    pub synthesizer: Option<Synthesizer>,
}

/// Runs until `shutdown` completes, then drains in-flight work for at most
/// `worker.shutdown_grace_secs`. Returns an error only for permanent failures (bad
/// credentials, a topology that cannot be declared).
pub async fn run_worker(
    settings: &Settings,
    handles: WorkerHandles,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), BusError> {
    // Counters recorded before a recorder exists are lost: install it before any work.
    let _ = deja_telemetry::prometheus();
    m::describe();
    let (stop_tx, stop_rx) = watch::channel(false);
    let extractor = Arc::new(handles.extractor);
    let synthesizer = handles.synthesizer.map(Arc::new);
    let limit = Arc::new(Semaphore::new(settings.worker.concurrency));
    let mut in_flight: JoinSet<()> = JoinSet::new();
    tokio::pin!(shutdown);
    let mut declare_failures = 0u32;

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
        let session = consume(
            &bus,
            settings,
            &extractor,
            synthesizer.as_ref(),
            &limit,
            &mut in_flight,
            &mut shutdown,
        )
        .await;
        match session {
            Ok(SessionEnd::Shutdown) => break Ok(()),
            Ok(SessionEnd::ConnectionLost) => {
                tracing::warn!("rabbitmq connection lost; reconnecting");
                reap(&mut in_flight);
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
    ConnectionLost,
}

async fn consume(
    bus: &Bus,
    settings: &Settings,
    extractor: &Arc<Extractor>,
    synthesizer: Option<&Arc<Synthesizer>>,
    limit: &Arc<Semaphore>,
    in_flight: &mut JoinSet<()>,
    shutdown: &mut std::pin::Pin<&mut (impl Future<Output = ()> + Send)>,
) -> Result<SessionEnd, BusError> {
    let tag = format!("deja-worker-{}", std::process::id());
    let queue = bus.topology().extract_queue.clone();
    let mut turns = bus
        .consume(&queue, settings.rabbitmq.prefetch, &tag)
        .await?;
    let mut jobs = match synthesizer {
        Some(_) => Some(
            bus.consume(&bus.topology().synthesis_queue, 1, &format!("{tag}-synth"))
                .await?,
        ),
        None => None,
    };
    tracing::info!(%queue, concurrency = settings.worker.concurrency, "worker consuming");
    loop {
        // Back-pressure: take a permit before taking the next delivery, so at most
        // `concurrency` are processed and the rest wait in the broker (bounded by prefetch).
        let permit = tokio::select! {
            () = shutdown.as_mut() => return Ok(SessionEnd::Shutdown),
            permit = limit.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                // The semaphore is never closed; treat it like a shutdown if it ever is.
                Err(_) => return Ok(SessionEnd::Shutdown),
            },
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
                    in_flight.spawn(async move {
                        let outcome = extractor.process(delivery.body(), delivery.attempt()).await;
                        settle(&bus, &delivery, outcome).await;
                        drop(permit);
                    });
                }
                Some(Err(error)) if error.is_connection_lost() || error.is_transient() => {
                    return Ok(SessionEnd::ConnectionLost)
                }
                Some(Err(error)) => return Err(error),
                None => return Ok(SessionEnd::ConnectionLost),
            },
            job = next_job => match job {
                Some(Ok(delivery)) => {
                    if let Some(synthesizer) = synthesizer {
                        let synthesizer = synthesizer.clone();
                        let bus = bus.clone();
                        in_flight.spawn(async move {
                            synthesizer.handle(&bus, &delivery).await;
                            drop(permit);
                        });
                    }
                }
                Some(Err(_)) | None => return Ok(SessionEnd::ConnectionLost),
            },
        }
    }
}

/// Maps an outcome onto the delivery. Every branch acks only after the outcome is durable.
async fn settle(bus: &Bus, delivery: &Delivery, outcome: Outcome) {
    let result = match outcome {
        Outcome::Stored { .. } => {
            m::processed();
            delivery.ack().await
        }
        Outcome::Retry { reason, detail } => {
            let delay = bus.retry_delay(delivery.attempt());
            match delivery.retry(bus, delay).await {
                Ok(_) => {
                    m::retried(&reason);
                    Ok(())
                }
                Err(BusError::AttemptsExhausted { .. }) => {
                    m::dead_lettered(&reason);
                    delivery.dead_letter(bus, &reason, &detail).await
                }
                Err(error) => Err(error),
            }
        }
        Outcome::DeadLetter { reason, detail } => {
            m::dead_lettered(&reason);
            delivery.dead_letter(bus, &reason, &detail).await
        }
    };
    if let Err(error) = result {
        // Not settled: the broker redelivers it when the channel closes, and the event id
        // makes the second pass a no-op if the write had committed.
        tracing::warn!(%error, "could not settle delivery; it will be redelivered");
    }
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
