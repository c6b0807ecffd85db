//! Topology declaration and the small queue tools that tests and `deja` subcommands use.
//!
//! Each operation runs on a fresh channel: the broker closes a channel on any failed
//! declaration (e.g. a passive declare of a missing queue), and a fresh one keeps that from
//! breaking the publisher or a consumer.

use crate::bus::{short, Bus};
use crate::delivery::Delivery;
use crate::error::BusError;
use crate::topology::{Topology, TURN_BINDING};
use deja_config::QueueType;
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, ExchangeKind};

impl Bus {
    /// Declares every exchange, queue and binding of the topology. Idempotent: declaring the
    /// same settings again is a no-op. Declaring a queue with *different* arguments (another
    /// `queue_type`, changed `retry_base_ms`/`retry_max_ms`) fails with PRECONDITION_FAILED;
    /// see the crate README for how to migrate.
    pub async fn declare_topology(&self) -> Result<(), BusError> {
        let t = self.topology().clone();
        let channel = self.channel().await?;
        declare_exchange(&channel, &t.turn_exchange, ExchangeKind::Topic).await?;
        declare_exchange(&channel, &t.retry_exchange, ExchangeKind::Direct).await?;
        // Fanout: a retried message keeps its `turn.<org>.<team>` routing key when it is
        // dead-lettered back, and fanout delivers it whatever that key is.
        declare_exchange(&channel, &t.requeue_exchange, ExchangeKind::Fanout).await?;
        declare_exchange(&channel, &t.dead_letter_exchange, ExchangeKind::Fanout).await?;

        let mut extract_args = queue_type_args(t.queue_type);
        if t.queue_type == QueueType::Quorum && t.delivery_limit > 0 {
            // A message that kills the worker process (no panic to catch) is redelivered on
            // every restart; the quorum queue counts those deliveries and dead-letters it.
            extract_args.insert(
                "x-delivery-limit".into(),
                AMQPValue::LongLongInt(i64::from(t.delivery_limit)),
            );
            extract_args.insert(
                "x-dead-letter-exchange".into(),
                AMQPValue::LongString(LongString::from(t.dead_letter_exchange.as_str())),
            );
        }
        declare_queue(&channel, &t.extract_queue, extract_args).await?;
        bind(&channel, &t.extract_queue, &t.turn_exchange, TURN_BINDING).await?;
        bind(&channel, &t.extract_queue, &t.requeue_exchange, "").await?;

        for (queue, ttl_ms) in t.retry_levels() {
            // Retry levels are always classic, and hold a message for at most `retry_max_ms`.
            // The hop back (the broker dead-letters the expired copy to `{queue}.requeue`) is
            // at-most-once, unconfirmed: a copy expiring while `{queue}` is deleted or
            // unavailable is lost. The README's migration steps drain the levels first.
            let mut args = queue_type_args(QueueType::Classic);
            args.insert(
                "x-message-ttl".into(),
                AMQPValue::LongLongInt(i64::try_from(ttl_ms).unwrap_or(i64::MAX)),
            );
            args.insert(
                "x-dead-letter-exchange".into(),
                AMQPValue::LongString(LongString::from(t.requeue_exchange.as_str())),
            );
            declare_queue(&channel, &queue, args).await?;
            bind(&channel, &queue, &t.retry_exchange, &queue).await?;
        }

        declare_queue(
            &channel,
            &t.dead_letter_queue,
            queue_type_args(t.queue_type),
        )
        .await?;
        bind(&channel, &t.dead_letter_queue, &t.dead_letter_exchange, "").await?;
        declare_queue(&channel, &t.synthesis_queue, queue_type_args(t.queue_type)).await?;
        tracing::debug!(queue = %t.extract_queue, retry_levels = t.retry_ttls_ms.len(), "topology declared");
        Ok(())
    }

    /// Ready messages in `queue` (not counting unacked ones). Errors if it does not exist.
    pub async fn queue_depth(&self, queue: &str) -> Result<u32, BusError> {
        let channel = self.channel().await?;
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = channel
            .queue_declare(short("queue name", queue)?, options, FieldTable::default())
            .await
            .map_err(|e| BusError::amqp(format!("passive queue.declare {queue:?}"), e))?;
        Ok(declared.message_count())
    }

    /// Takes one message off `queue` with manual ack (`basic.get`), or `None` if it is empty.
    pub async fn get_one(&self, queue: &str) -> Result<Option<Delivery>, BusError> {
        let channel = self.channel().await?;
        let message = channel
            .basic_get(
                short("queue name", queue)?,
                BasicGetOptions { no_ack: false },
            )
            .await
            .map_err(|e| BusError::amqp(format!("basic.get {queue:?}"), e))?;
        Ok(message.map(|m| Delivery::new(m.delivery, channel, queue.to_owned(), self.topology())))
    }

    /// Drops every ready message in `queue`; returns how many.
    pub async fn purge(&self, queue: &str) -> Result<u32, BusError> {
        let channel = self.channel().await?;
        channel
            .queue_purge(short("queue name", queue)?, QueuePurgeOptions::default())
            .await
            .map_err(|e| BusError::amqp(format!("queue.purge {queue:?}"), e))
    }

    /// Deletes `queue` (no error if it is missing); returns how many messages it held.
    pub async fn delete_queue(&self, queue: &str) -> Result<u32, BusError> {
        self.queue_delete(queue, QueueDeleteOptions::default())
            .await
    }

    async fn queue_delete(
        &self,
        queue: &str,
        options: QueueDeleteOptions,
    ) -> Result<u32, BusError> {
        let channel = self.channel().await?;
        channel
            .queue_delete(short("queue name", queue)?, options)
            .await
            .map_err(|e| BusError::amqp(format!("queue.delete {queue:?}"), e))
    }

    /// Deletes `exchange` (no error if it is missing).
    pub async fn delete_exchange(&self, exchange: &str) -> Result<(), BusError> {
        let channel = self.channel().await?;
        channel
            .exchange_delete(
                short("exchange name", exchange)?,
                ExchangeDeleteOptions::default(),
            )
            .await
            .map_err(|e| BusError::amqp(format!("exchange.delete {exchange:?}"), e))
    }

    /// A tool's cleanup after its own consumers stopped: deletes the topology like
    /// [`Self::delete_topology`] unless another process still consumes one of its queues (a
    /// second run on the same names), which would lose every message published to it after
    /// the delete. Each queue is deleted with `if_unused` (the check and the delete are one
    /// broker operation), the extract queue first; at the first queue with a consumer it
    /// stops, keeps the rest and the exchanges, and answers `Ok(false)`.
    pub async fn delete_topology_if_unused(&self) -> Result<bool, BusError> {
        let t = self.topology().clone();
        let unused = QueueDeleteOptions {
            if_unused: true,
            ..QueueDeleteOptions::default()
        };
        for queue in t.all_queues() {
            match self.queue_delete(&queue, unused).await {
                Ok(_) => {}
                Err(error) if error.is_precondition_failed() => return Ok(false),
                Err(error) => return Err(error),
            }
        }
        self.delete_exchanges(&t).await?;
        Ok(true)
    }

    /// Deletes every queue and exchange of this topology: test and tool cleanup.
    pub async fn delete_topology(&self) -> Result<(), BusError> {
        let t = self.topology().clone();
        for queue in t.all_queues() {
            self.delete_queue(&queue).await?;
        }
        self.delete_exchanges(&t).await
    }

    async fn delete_exchanges(&self, t: &Topology) -> Result<(), BusError> {
        for exchange in t.all_exchanges() {
            self.delete_exchange(&exchange).await?;
        }
        Ok(())
    }
}

fn queue_type_args(queue_type: QueueType) -> FieldTable {
    let name = match queue_type {
        QueueType::Classic => "classic",
        QueueType::Quorum => "quorum",
    };
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(LongString::from(name)),
    );
    args
}

async fn declare_exchange(
    channel: &Channel,
    name: &str,
    kind: ExchangeKind,
) -> Result<(), BusError> {
    let options = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    channel
        .exchange_declare(
            short("exchange name", name)?,
            kind,
            options,
            FieldTable::default(),
        )
        .await
        .map_err(|e| BusError::amqp(format!("exchange.declare {name:?}"), e))
}

async fn declare_queue(channel: &Channel, name: &str, args: FieldTable) -> Result<(), BusError> {
    let options = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(short("queue name", name)?, options, args)
        .await
        .map(|_| ())
        .map_err(|e| BusError::amqp(format!("queue.declare {name:?}"), e))
}

async fn bind(channel: &Channel, queue: &str, exchange: &str, key: &str) -> Result<(), BusError> {
    channel
        .queue_bind(
            short("queue name", queue)?,
            short("exchange name", exchange)?,
            short("routing key", key)?,
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| BusError::amqp(format!("queue.bind {queue:?} to {exchange:?}"), e))
}
