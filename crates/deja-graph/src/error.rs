//! One error type for the store. The split callers act on is [`GraphError::is_transient`]:
//! transient errors (Neo4j down, restarting, a timeout, a deadlock) are worth retrying later;
//! permanent ones (a bad query, bad data) are not and go to the dead-letter queue or a 4xx.

/// A store error. `query` names the Cypher file that failed, e.g. `episodes/write`.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// Neo4j could not be reached or answered with a transient failure.
    #[error("neo4j is unavailable (running {query})")]
    Unavailable {
        query: &'static str,
        #[source]
        source: neo4rs::Error,
    },
    /// Neo4j refused the query for a reason that retrying will not fix.
    #[error("neo4j failed running {query}")]
    Query {
        query: &'static str,
        #[source]
        source: neo4rs::Error,
    },
    /// A row did not have the shape the store wrote (hand-edited data, a newer schema).
    #[error("unexpected data from {query}: {detail}")]
    Decode { query: &'static str, detail: String },
    /// The caller passed something the store cannot use (e.g. a zero query vector).
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
    /// The task running the query stopped before it answered (the runtime shutting down).
    #[error("the task running {query} was stopped before it answered")]
    Interrupted { query: &'static str },
    /// The connection settings were rejected before any connection was tried.
    #[error("invalid neo4j connection settings")]
    Config {
        #[source]
        source: neo4rs::Error,
    },
}

pub type Result<T, E = GraphError> = std::result::Result<T, E>;

impl GraphError {
    /// Classifies a driver error raised while running `query`.
    pub(crate) fn neo4j(query: &'static str, source: neo4rs::Error) -> GraphError {
        if is_transient(&source) {
            GraphError::Unavailable { query, source }
        } else {
            GraphError::Query { query, source }
        }
    }

    pub(crate) fn decode(query: &'static str, detail: impl std::fmt::Display) -> GraphError {
        GraphError::Decode {
            query,
            detail: detail.to_string(),
        }
    }

    pub(crate) fn invalid(what: &'static str, detail: impl Into<String>) -> GraphError {
        GraphError::Invalid {
            what,
            detail: detail.into(),
        }
    }

    /// True when the same call may succeed later (retry with backoff, answer 503).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            GraphError::Unavailable { .. } | GraphError::Interrupted { .. }
        )
    }

    /// True when the failure cannot come from the statement or its data, though retrying at
    /// once will not fix it either: the server refused the session (authentication, e.g. after
    /// a password rotation; authorization; a database missing or read-only), failed inside
    /// (`Neo.DatabaseError.*`), or the Bolt exchange went wrong (an ignored or unexpected
    /// message). The store, not the request, is at fault: a caller treats it as an outage,
    /// which a health check of the store confirms or not, rather than spend the request's
    /// attempts on it.
    pub fn is_store_fault(&self) -> bool {
        match self {
            GraphError::Unavailable { .. } | GraphError::Interrupted { .. } => true,
            GraphError::Query { source, .. } => is_store_fault(source),
            GraphError::Decode { .. } | GraphError::Invalid { .. } | GraphError::Config { .. } => {
                false
            }
        }
    }

    /// The Neo4j status code, e.g. `Neo.ClientError.Schema.ConstraintValidationFailed`.
    pub fn neo4j_code(&self) -> Option<&str> {
        match self {
            GraphError::Unavailable { source, .. } | GraphError::Query { source, .. } => {
                match source {
                    neo4rs::Error::Neo4j(e) => Some(e.code()),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// Transient = the server or the network, not the request: connection refused or lost,
/// timeouts, an exhausted pool, and Neo4j's own `TransientError` class (deadlocks, a
/// database that is starting or stopping, lock timeouts).
pub(crate) fn is_transient(error: &neo4rs::Error) -> bool {
    use neo4rs::Error as E;
    match error {
        E::IOError { .. }
        | E::ConnectionError
        | E::ConnectionTimedOut
        | E::IncompleteBoltExchange
        | E::ServerUnavailableError(_)
        | E::RoutingTableError(_)
        | E::RoutingTableRefreshFailed(_)
        | E::RequestIgnoredError => true,
        E::Neo4j(e) => is_transient_code(e.code()),
        _ => false,
    }
}

/// neo4rs reclassifies a few codes as client errors (`Transaction.Terminated`,
/// `LockClientStopped`: someone killed the transaction); those stay permanent here too.
fn is_transient_code(code: &str) -> bool {
    code.starts_with("Neo.TransientError.")
        || matches!(
            code,
            "Neo.ClientError.Transaction.TransactionTimedOut"
                | "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration"
                | "Neo.ClientError.Cluster.NotALeader"
        )
}

/// See [`GraphError::is_store_fault`]: failures no statement or data can cause.
pub(crate) fn is_store_fault(error: &neo4rs::Error) -> bool {
    use neo4rs::Error as E;
    match error {
        E::AuthenticationError(_)
        | E::Ignored(_)
        | E::UnexpectedMessage(_)
        | E::UnknownMessage(_)
        | E::UnsupportedVersion(..)
        | E::ProtocolMismatch(_) => true,
        E::Neo4j(e) => is_store_fault_code(e.code()),
        other => is_transient(other),
    }
}

fn is_store_fault_code(code: &str) -> bool {
    is_transient_code(code)
        || code.starts_with("Neo.DatabaseError.")
        || code.starts_with("Neo.ClientError.Security.")
        || matches!(
            code,
            "Neo.ClientError.Database.DatabaseNotFound"
                | "Neo.ClientError.General.ForbiddenOnReadOnlyDatabase"
                | "Neo.ClientError.General.WriteOnReadOnlyAccessDatabase"
        )
}

/// Neo4j's deadlock detector aborted the transaction: for an optimistic writer this is a
/// lost race like a version conflict, so the save reports `Conflict` and is retried.
pub(crate) fn is_deadlock(error: &neo4rs::Error) -> bool {
    matches!(error, neo4rs::Error::Neo4j(e)
        if e.code() == "Neo.TransientError.Transaction.DeadlockDetected")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_side_transient_codes_are_transient() {
        assert!(is_transient_code(
            "Neo.TransientError.Transaction.DeadlockDetected"
        ));
        assert!(is_transient_code(
            "Neo.TransientError.General.DatabaseUnavailable"
        ));
        assert!(is_transient_code(
            "Neo.ClientError.Transaction.TransactionTimedOut"
        ));
        assert!(!is_transient_code("Neo.ClientError.Statement.SyntaxError"));
        assert!(!is_transient_code(
            "Neo.ClientError.Schema.ConstraintValidationFailed"
        ));
    }

    #[test]
    fn the_store_refusing_or_failing_is_its_fault_and_a_bad_statement_is_not() {
        for code in [
            "Neo.ClientError.Security.Unauthorized",
            "Neo.ClientError.Security.AuthenticationRateLimit",
            "Neo.ClientError.Security.Forbidden",
            "Neo.ClientError.Database.DatabaseNotFound",
            "Neo.ClientError.General.ForbiddenOnReadOnlyDatabase",
            "Neo.ClientError.General.WriteOnReadOnlyAccessDatabase",
            "Neo.DatabaseError.General.UnknownError",
            "Neo.DatabaseError.Transaction.TransactionCommitFailed",
            "Neo.TransientError.General.DatabaseUnavailable",
        ] {
            assert!(is_store_fault_code(code), "{code}");
        }
        for code in [
            "Neo.ClientError.Statement.SyntaxError",
            "Neo.ClientError.Statement.TypeError",
            "Neo.ClientError.Schema.ConstraintValidationFailed",
            "Neo.ClientError.Transaction.Terminated",
        ] {
            assert!(!is_store_fault_code(code), "{code}");
        }
        for error in [
            neo4rs::Error::AuthenticationError("The client is unauthorized".to_owned()),
            neo4rs::Error::Ignored("RUN"),
            neo4rs::Error::UnexpectedMessage("unexpected response for PULL".to_owned()),
            neo4rs::Error::ConnectionError,
        ] {
            let error = GraphError::neo4j("episodes/write", error);
            assert!(error.is_store_fault(), "{error:?}");
        }
        for error in [
            neo4rs::Error::ConversionError,
            neo4rs::Error::NotSingleResult,
        ] {
            let error = GraphError::neo4j("episodes/write", error);
            assert!(
                !error.is_transient() && !error.is_store_fault(),
                "{error:?}"
            );
        }
        assert!(!GraphError::decode("episodes/get", "no id").is_store_fault());
        assert!(!GraphError::invalid("query vector", "all zeros").is_store_fault());
    }

    #[test]
    fn network_failures_are_transient_and_bad_input_is_not() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(is_transient(&neo4rs::Error::from(refused)));
        assert!(is_transient(&neo4rs::Error::ConnectionTimedOut));
        assert!(!is_transient(&neo4rs::Error::ConversionError));
        let error = GraphError::neo4j("schema/ping", neo4rs::Error::ConnectionError);
        assert!(error.is_transient());
    }
}
