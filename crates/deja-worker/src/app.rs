//! The worker's composition root, in the style of the API's `Application`: `build` runs the
//! startup checks and wires the extractor, the synthesizer and the status routes; the result
//! runs until a shutdown signal. `deja worker` and the integration tests start the worker
//! this way, so they run the same checks on the same wiring.

use crate::extract::Extractor;
use crate::health::{status_router, Readiness};
use crate::run::{run_worker, Consumers};
use crate::synthesize::Synthesizer;
use deja_bus::BusError;
use deja_config::Settings;
use deja_embed::{EmbedError, Embedder, LateEncoder, LocalEmbedder, Reranker};
use deja_graph::{GraphError, GraphStore};
use deja_llm::{LlmClient, LlmError};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("refusing to start: {0}")]
    Refused(String),
    #[error(transparent)]
    Index(#[from] IndexMismatch),
    #[error("could not set up the episode store")]
    Graph(#[from] GraphError),
    #[error("could not load the embedding model")]
    Embed(#[from] EmbedError),
    #[error("could not set up the LLM client")]
    Llm(#[from] LlmError),
    #[error("could not serve metrics on {address}")]
    Metrics {
        address: String,
        #[source]
        source: std::io::Error,
    },
}

/// What the worker is made of. `from_settings` builds it for `deja worker`; tests build it
/// themselves (a store on the test Neo4j, the embedder the test process shares).
pub struct Dependencies {
    pub store: GraphStore,
    pub embedder: Arc<dyn Embedder>,
    /// The cross-encoder, when `search.rerank` is on: recurrence linking reranks as
    /// memory-search does.
    pub reranker: Option<Arc<dyn Reranker>>,
    /// The late-interaction encoder that stores each episode's token vectors for
    /// memory-search, and with which recurrence linking reads its candidates; `None` stores
    /// none (linking then decides with the similarity-only calibration).
    pub late: Option<Arc<dyn LateEncoder>>,
}

impl Dependencies {
    /// A store on `neo4j`, the local embedding model (which must load: the worker cannot
    /// write searchable episodes without it), the late-interaction encoder when
    /// `late_interaction.enabled` (which may fail to load: episodes are then stored without
    /// token vectors) and, when recurrence linking is on and `search.rerank` too, the
    /// cross-encoder (which may fail to load: linking then decides without it).
    pub async fn from_settings(settings: &Settings) -> Result<Dependencies, StartupError> {
        let store = GraphStore::connect(&settings.neo4j).await?;
        let embedder = Arc::new(LocalEmbedder::load(&settings.embedding)?);
        let reranker = if settings.worker.link_recurrences {
            deja_recognition::load_reranker(settings).await
        } else {
            None
        };
        Ok(Dependencies {
            store,
            embedder,
            reranker,
            late: deja_recognition::load_late_encoder(settings).await,
        })
    }
}

/// A checked, wired worker, with its status routes bound but not yet consuming.
pub struct Application {
    settings: Settings,
    consumers: Consumers,
    readiness: Readiness,
    status: Option<(TcpListener, SocketAddr)>,
}

impl Application {
    /// Refuses to start without an LLM endpoint, or when the embedding model's dimensions
    /// differ from the vector index's ([`check_dimensions`]);
    /// binds `worker.metrics_addr` (port 0 picks a free port; empty = no status routes) for
    /// `/metrics` and `/readyz`. Synthesis jobs are consumed unless
    /// [`Application::without_synthesizer`].
    pub async fn build(
        settings: &Settings,
        deps: Dependencies,
    ) -> Result<Application, StartupError> {
        if !settings.llm.is_configured() {
            return Err(StartupError::Refused(
                "no LLM endpoint configured: set llm.base_url (DEJA__LLM__BASE_URL)".into(),
            ));
        }
        check_dimensions(
            deps.store.vector_index_dimensions().await?,
            deps.embedder.as_ref(),
        )?;
        let llm = Arc::new(LlmClient::new(&settings.llm)?);
        let synthesizer =
            Synthesizer::new(deps.store.clone(), llm.clone(), settings.llm.model.clone())
                .with_failure_cooldown(std::time::Duration::from_secs(
                    settings.search.strategy_failure_cooldown_secs,
                ));
        let extractor = Extractor::new(deps.store, llm, deps.embedder, settings)
            .with_reranker(deps.reranker)
            .with_late(deps.late);
        let readiness = extractor.readiness();
        let status = match settings.worker.metrics_addr.as_str() {
            "" => None,
            address => {
                let metrics_error = |source| StartupError::Metrics {
                    address: address.to_owned(),
                    source,
                };
                let listener = TcpListener::bind(address).await.map_err(metrics_error)?;
                let bound = listener.local_addr().map_err(metrics_error)?;
                Some((listener, bound))
            }
        };
        Ok(Application {
            settings: settings.clone(),
            consumers: Consumers {
                extractor,
                synthesizer: Some(synthesizer),
            },
            readiness,
            status,
        })
    }

    /// Consumes turns only (a synthesizer runs elsewhere, or synthesis is not wanted).
    pub fn without_synthesizer(mut self) -> Self {
        self.consumers.synthesizer = None;
        self
    }

    /// What `/readyz` answers from.
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// Where `/metrics` and `/readyz` are served, `None` when `worker.metrics_addr` is empty.
    pub fn status_address(&self) -> Option<SocketAddr> {
        self.status.as_ref().map(|(_, address)| *address)
    }

    /// Serves the status routes and consumes until `shutdown` completes, then drains
    /// in-flight work (`worker.shutdown_grace_secs`) and stops the status routes. Errors only
    /// for permanent failures (bad credentials, a topology that cannot be declared).
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), BusError> {
        let (stop_status, status_stopped) = tokio::sync::oneshot::channel::<()>();
        let status_server = self.status.map(|(listener, address)| {
            tracing::info!(%address, "worker metrics on http://{address}/metrics, readiness on /readyz");
            let routes = status_router(self.readiness.clone());
            tokio::spawn(async move {
                let served = axum::serve(listener, routes)
                    .with_graceful_shutdown(async {
                        let _ = status_stopped.await;
                    })
                    .await;
                if let Err(error) = served {
                    tracing::error!(%error, "worker status routes stopped");
                }
            })
        });
        let result = run_worker(&self.settings, self.consumers, shutdown).await;
        let _ = stop_status.send(());
        if let Some(server) = status_server {
            let _ = server.await;
        }
        result
    }
}

/// The vector index cannot hold the embedding model's vectors.
#[derive(Debug, thiserror::Error)]
pub enum IndexMismatch {
    #[error(
        "the vector index has {index} dimensions but model {model} produces {model_dimensions}; \
         change the model back or migrate the index and run `deja reembed`"
    )]
    Dimensions {
        index: usize,
        model: String,
        model_dimensions: usize,
    },
    #[error("the vector index is missing; run `deja migrate` first")]
    Missing,
}

/// Refuses an embedding model whose vectors have another dimension than the vector index
/// (`index_dimensions`, `None` when the index is missing): mixing them would make every
/// similarity meaningless. `deja reembed` and the evaluation check the same.
pub fn check_dimensions(
    index_dimensions: Option<usize>,
    embedder: &dyn Embedder,
) -> Result<(), IndexMismatch> {
    match index_dimensions {
        Some(index) if index != embedder.dimensions() => Err(IndexMismatch::Dimensions {
            index,
            model: embedder.model_id().to_owned(),
            model_dimensions: embedder.dimensions(),
        }),
        Some(_) => Ok(()),
        None => Err(IndexMismatch::Missing),
    }
}
