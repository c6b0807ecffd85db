//! What can stop an evaluation run. Messages are the ones `deja eval` prints (with their
//! causes), so each names the file, line, query or record at fault.

use deja_api::SearchError;
use deja_bus::BusError;
use deja_embed::EmbedError;
use deja_graph::GraphError;
use deja_worker::jobs::ImportError;
use deja_worker::{IndexMismatch, StartupError};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The corpus, the transcripts or the options cannot be evaluated (the message names
    /// the file and line, or the option).
    #[error("{0}")]
    Input(String),
    #[error("could not read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A line of the corpus is not JSON of the expected shape.
    #[error("{location}: not a valid {what}")]
    Line {
        location: String,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("could not connect to neo4j at {uri}")]
    Connect {
        uri: String,
        #[source]
        source: GraphError,
    },
    #[error("could not load the embedding model")]
    LoadEmbedder(#[source] EmbedError),
    #[error(transparent)]
    Index(#[from] IndexMismatch),
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error("importing {id}")]
    Import {
        id: String,
        #[source]
        source: ImportError,
    },
    #[error("publishing {event_id}")]
    Publish {
        event_id: String,
        #[source]
        source: Box<BusError>,
    },
    #[error("query {id}")]
    Query {
        id: String,
        #[source]
        source: SearchError,
    },
    #[error("interrupted")]
    Interrupted,
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// Boxed, like the publishing error: a broker error is large and rare.
    #[error(transparent)]
    Bus(Box<BusError>),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<BusError> for EvalError {
    fn from(error: BusError) -> EvalError {
        EvalError::Bus(Box::new(error))
    }
}
