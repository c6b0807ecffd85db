//! `deja serve`: building the application (bound, not yet serving) and running it until a
//! shutdown signal, in the style of zero-to-production's `Application`.

use crate::auth::Authenticator;
use crate::guard::McpSessions;
use crate::http::{router, AppState};
use crate::jobs::SynthesisQueue;
use crate::mcp::{mcp_http_service, mcp_session_manager};
use crate::service::SearchService;
use crate::verify::Verifier;
use deja_config::{ApiSettings, Settings, VerifyMode};
use deja_embed::{CachingEmbedder, Embedder, LateEncoder, LocalEmbedder, Reranker};
use deja_graph::{GraphError, GraphStore};
use deja_llm::LlmClient;
use deja_recognition::{load_late_encoder, load_reranker};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("refusing to start: {0}")]
    Refused(String),
    #[error("could not bind the api to {address}")]
    Bind {
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not set up the episode store")]
    Graph(#[from] GraphError),
}

/// What the search service is made of. Tests build it themselves (a store on the test
/// Neo4j, a shared embedder, a queue with a unique prefix).
pub struct Dependencies {
    pub store: GraphStore,
    /// `None` when no model could be loaded: searches fall back to text, `/readyz` says so.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// `None` when reranking is off or its model could not be loaded: the similarity-only
    /// calibration decides.
    pub reranker: Option<Arc<dyn Reranker>>,
    /// `None` when late interaction is off or its model could not be loaded: candidates are
    /// decided without it (and review edits store no token vectors).
    pub late: Option<Arc<dyn LateEncoder>>,
    /// The LLM of the optional verification stage (`search.verify = "llm"`), else `None`.
    pub verifier: Option<Arc<Verifier>>,
    /// `None` = never request strategies (serve stored ones only).
    pub jobs: Option<Arc<SynthesisQueue>>,
}

impl Dependencies {
    /// From the settings: a lazily connecting store and bus, and the local embedding model
    /// (a model that fails to load is logged and left out rather than stopping the API)
    /// behind an LRU of query vectors (`embedding.query_cache_size`), warmed up with one
    /// embedding so that the first search does not pay the session's first inference.
    pub async fn from_settings(settings: &Settings) -> Result<Dependencies, StartupError> {
        let store = GraphStore::connect(&settings.neo4j).await?;
        let embedding = settings.embedding.clone();
        let load = move || {
            let model = LocalEmbedder::load(&embedding)?;
            let cached = CachingEmbedder::new(model, embedding.query_cache_size);
            if let Err(error) = cached.warm_up() {
                tracing::warn!(%error, "embedding warm-up failed");
            }
            Ok::<_, deja_embed::EmbedError>(cached)
        };
        let embedder = match tokio::task::spawn_blocking(load).await {
            Ok(Ok(embedder)) => Some(Arc::new(embedder) as Arc<dyn Embedder>),
            Ok(Err(error)) => {
                tracing::warn!(error = %deja_domain::error_chain(&error),
                    "embedding model not loaded; semantic search will fall back to text");
                None
            }
            Err(error) => {
                tracing::warn!(%error, "embedding model loader crashed; semantic search will fall back to text");
                None
            }
        };
        Ok(Dependencies {
            store,
            embedder,
            reranker: load_reranker(settings).await,
            late: load_late_encoder(settings).await,
            verifier: verifier(settings)?,
            jobs: Some(Arc::new(SynthesisQueue::new(settings))),
        })
    }

    pub fn service(self, settings: &Settings) -> SearchService {
        SearchService::new(self.store, self.embedder, self.jobs, &settings.search)
            .with_reranker(self.reranker)
            .with_late(self.late)
            .with_verifier(self.verifier)
    }
}

/// The verification stage's LLM client when `search.verify = "llm"` (validation already
/// made sure the LLM is configured).
pub fn verifier(settings: &Settings) -> Result<Option<Arc<Verifier>>, StartupError> {
    if settings.search.verify != VerifyMode::Llm {
        return Ok(None);
    }
    let client = LlmClient::new(&settings.llm)
        .map_err(|e| StartupError::Refused(format!("search.verify = \"llm\": {e}")))?;
    Ok(Some(Arc::new(Verifier::new(
        client,
        settings.search.verify_cache_entries,
    ))))
}

/// A bound, ready-to-run API server.
pub struct Application {
    listener: TcpListener,
    address: SocketAddr,
    router: axum::Router,
    service: SearchService,
    cancel: CancellationToken,
}

impl Application {
    /// Binds `api.bind` (port 0 picks a free port) and builds every route. Refuses to start
    /// without tokens unless in dev mode, and in dev mode unless bound to loopback.
    pub async fn build(
        settings: &Settings,
        deps: Dependencies,
    ) -> Result<Application, StartupError> {
        check_tokens(&settings.api)?;
        let bind_error = |source| StartupError::Bind {
            address: settings.api.bind.clone(),
            source,
        };
        let listener = TcpListener::bind(&settings.api.bind)
            .await
            .map_err(bind_error)?;
        let address = listener.local_addr().map_err(bind_error)?;
        if settings.api.dev {
            if !address.ip().is_loopback() {
                return Err(StartupError::Refused(format!(
                    "api.dev serves without authentication and may only bind a loopback \
                     address, not {address}"
                )));
            }
            if settings.api.tokens.is_empty() {
                tracing::warn!(%address,
                    "dev mode: the api answers WITHOUT authentication, on loopback only \
                     and to loopback Host names; configure api.tokens for anything else");
            }
        }
        let review = crate::review::Review::new(deps.store.clone(), deps.embedder.clone())
            .with_late(deps.late.clone())
            .with_queue(deps.jobs.clone());
        let service = deps.service(settings);
        let auth = Arc::new(Authenticator::from_settings(&settings.api));
        let cancel = CancellationToken::new();
        let digest = Arc::new(settings.digest.clone());
        let live_sessions = Arc::new(mcp_session_manager());
        let mcp = mcp_http_service(
            service.clone(),
            digest.clone(),
            live_sessions.clone(),
            !auth.is_open(),
            cancel.child_token(),
        );
        let state = AppState {
            service: service.clone(),
            auth,
            mcp_sessions: Arc::new(McpSessions::new(live_sessions)),
            review,
            neo4j_browser: crate::hub::neo4j_browser_link(
                settings.api.neo4j_browser_url.as_deref(),
                &settings.neo4j.uri,
            ),
            dead_letter_queue: settings.rabbitmq.dead_letter_queue(),
            digest,
        };
        let router = router(state, mcp, settings.api.preamble_enabled);
        tracing::info!(%address, preamble = settings.api.preamble_enabled, "api bound");
        Ok(Application {
            listener,
            address,
            router,
            service,
            cancel,
        })
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn service(&self) -> &SearchService {
        &self.service
    }

    /// Serves until `shutdown` completes, then stops accepting, ends MCP sessions and
    /// drains in-flight requests (each bounded by the search deadline).
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let cancel = self.cancel.clone();
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(async move {
                shutdown.await;
                tracing::info!("api shutting down");
                // Open MCP streams would otherwise hold the graceful shutdown forever.
                cancel.cancel();
            })
            .await
    }
}

fn check_tokens(api: &ApiSettings) -> Result<(), StartupError> {
    if api.tokens.is_empty() && !api.dev {
        return Err(StartupError::Refused(
            "no api.tokens are configured; add tokens, or set api.dev = true to serve \
             without authentication on a loopback address"
                .into(),
        ));
    }
    Ok(())
}
