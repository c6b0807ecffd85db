//! The production stores an evaluation reads and writes through, checked as `deja reembed`
//! and the worker check them: an embedding model the vector index cannot hold would make
//! every figure meaningless.

use crate::EvalError;
use deja_config::Settings;
use deja_embed::{Embedder, LocalEmbedder};
use deja_graph::GraphStore;
use std::sync::Arc;

pub async fn connect_store(settings: &Settings) -> Result<GraphStore, EvalError> {
    GraphStore::connect(&settings.neo4j)
        .await
        .map_err(|source| EvalError::Connect {
            uri: settings.neo4j.uri.clone(),
            source,
        })
}

pub fn load_embedder(settings: &Settings) -> Result<Arc<dyn Embedder>, EvalError> {
    let embedder = LocalEmbedder::load(&settings.embedding).map_err(EvalError::LoadEmbedder)?;
    Ok(Arc::new(embedder))
}

pub async fn check_dimensions(
    store: &GraphStore,
    embedder: &dyn Embedder,
) -> Result<(), EvalError> {
    deja_worker::check_dimensions(store.vector_index_dimensions().await?, embedder)?;
    Ok(())
}
