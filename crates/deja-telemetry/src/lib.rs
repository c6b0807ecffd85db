//! Logging and metrics setup shared by every deja process.
//!
//! Metrics go through the `metrics` facade; one Prometheus recorder per process is installed
//! lazily here, so a test that runs the worker and the API in one process gets one registry.

use deja_config::{LogFormat, LogSettings};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::sync::OnceLock;

/// Installs the global tracing subscriber, writing to stderr. A second call is a no-op
/// (tests call it from many places).
pub fn init_logging(settings: &LogSettings) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&settings.filter));
    // Colour only for a person at a terminal: a log file or a pipe gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match settings.format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Pretty => builder.compact().try_init(),
    };
}

static RECORDER: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's Prometheus handle, installing the recorder on first use.
pub fn prometheus() -> PrometheusHandle {
    RECORDER
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder was installed first, in which case our handle
            // renders an empty registry; deja installs no other recorder.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// A `GET /metrics` route rendering the process's registry.
pub fn metrics_router<S: Clone + Send + Sync + 'static>() -> axum::Router<S> {
    let handle = prometheus();
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let handle = handle.clone();
            async move { handle.render() }
        }),
    )
}

/// Serves `/metrics` alone on `addr` in a background task; returns the bound address.
pub async fn serve_metrics(addr: &str) -> std::io::Result<SocketAddr> {
    serve_router(addr, metrics_router()).await
}

/// Serves `app` (e.g. `/metrics` plus a process's `/readyz`) on `addr` in a background task;
/// returns the bound address.
pub async fn serve_router(addr: &str, app: axum::Router) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "metrics endpoint stopped");
        }
    });
    Ok(bound)
}
