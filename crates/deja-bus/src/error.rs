//! One error type for the bus. The split callers act on is [`BusError::is_transient`]:
//! transient errors are worth retrying (reconnect, back off), permanent ones are not.

use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
use lapin::ErrorKind;

#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// The first connection (or a reconnection) to the broker failed. `endpoint` has no
    /// credentials in it.
    #[error("could not connect to rabbitmq at {endpoint}")]
    Connect {
        endpoint: String,
        #[source]
        source: lapin::Error,
    },
    /// An AMQP operation failed; `op` names it, e.g. `queue.declare deja.extract`.
    #[error("rabbitmq {op} failed")]
    Amqp {
        op: String,
        #[source]
        source: lapin::Error,
    },
    /// The broker refused responsibility for a published message (`basic.nack`).
    #[error("rabbitmq nacked the message published to exchange `{exchange}` with routing key `{routing_key}`")]
    Nacked {
        exchange: String,
        routing_key: String,
    },
    /// No queue is bound for the message; usually the topology was not declared.
    #[error("message to exchange `{exchange}` with routing key `{routing_key}` was unroutable ({reply})")]
    Unroutable {
        exchange: String,
        routing_key: String,
        reply: String,
    },
    /// The delivery's channel is gone (connection lost, channel closed) or the delivery was
    /// already settled. The broker redelivers unsettled messages, so nothing is lost.
    #[error("delivery {delivery_tag} can no longer be settled on its channel; the broker will redeliver it")]
    NotSettled { delivery_tag: u64 },
    /// `retry` was asked for a message that already used every attempt; dead-letter it.
    #[error(
        "message used {attempt} of {max_attempts} attempts; it must be dead-lettered, not retried"
    )]
    AttemptsExhausted { attempt: u32, max_attempts: u32 },
    /// A name, routing key or id is over AMQP's 255-byte short-string limit.
    #[error("{what} is {len} bytes, over the 255-byte AMQP limit")]
    TooLong { what: &'static str, len: usize },
}

impl BusError {
    pub(crate) fn amqp(op: impl Into<String>, source: lapin::Error) -> BusError {
        BusError::Amqp {
            op: op.into(),
            source,
        }
    }

    /// The broker refused the operation's precondition: an `if_unused` delete of a queue
    /// that has consumers, or a declaration that differs from the existing one.
    pub fn is_precondition_failed(&self) -> bool {
        match self {
            BusError::Connect { source, .. } | BusError::Amqp { source, .. } => matches!(
                source.kind(),
                ErrorKind::ProtocolError(amqp)
                    if amqp.kind() == &AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED)
            ),
            _ => false,
        }
    }

    /// True when trying again later (after a reconnect or a backoff) can succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            BusError::Connect { source, .. } | BusError::Amqp { source, .. } => {
                lapin_is_transient(source)
            }
            // A nack means the broker could not take the message right now (e.g. an internal
            // queue error); the publish can be tried again.
            BusError::Nacked { .. } | BusError::NotSettled { .. } => true,
            BusError::Unroutable { .. }
            | BusError::AttemptsExhausted { .. }
            | BusError::TooLong { .. } => false,
        }
    }

    /// True when the connection (not just one operation) is gone, so the caller should drop
    /// this `Bus` and connect again.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            BusError::Connect { .. } => true,
            BusError::Amqp { source, .. } => {
                matches!(
                    source.kind(),
                    ErrorKind::IOError(_)
                        | ErrorKind::InvalidConnectionState(_)
                        | ErrorKind::MissingHeartbeatError
                ) || source.is_amqp_hard_error()
            }
            _ => false,
        }
    }
}

fn lapin_is_transient(error: &lapin::Error) -> bool {
    match error.kind() {
        ErrorKind::IOError(_)
        | ErrorKind::InvalidChannelState(..)
        | ErrorKind::InvalidConnectionState(_)
        | ErrorKind::InvalidChannel(_)
        | ErrorKind::MissingHeartbeatError
        | ErrorKind::ChannelsLimitReached => true,
        ErrorKind::ProtocolError(amqp) => match amqp.kind() {
            // A shut-down or restarting broker closes connections with CONNECTION_FORCED;
            // resource alarms and internal errors clear on their own.
            AMQPErrorKind::Hard(hard) => matches!(
                hard,
                AMQPHardError::CONNECTIONFORCED
                    | AMQPHardError::RESOURCEERROR
                    | AMQPHardError::INTERNALERROR
            ),
            // NOT_FOUND, PRECONDITION_FAILED (topology mismatch), ACCESS_REFUSED need a
            // human; RESOURCE_LOCKED (exclusive queue held elsewhere) clears on its own.
            AMQPErrorKind::Soft(soft) => matches!(soft, AMQPSoftError::RESOURCELOCKED),
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_are_transient_and_lose_the_connection() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        let err = BusError::amqp("basic.publish", lapin::Error::from(io));
        assert!(err.is_transient());
        assert!(err.is_connection_lost());
    }

    #[test]
    fn exhausted_attempts_and_long_names_are_permanent() {
        assert!(!BusError::AttemptsExhausted {
            attempt: 5,
            max_attempts: 5
        }
        .is_transient());
        assert!(!BusError::TooLong {
            what: "queue name",
            len: 300
        }
        .is_transient());
    }
}
