//! `deja_worker::Application`: the startup checks `deja worker` and the test workers share.

use deja_tests::worker_app::worker_settings;
use deja_worker::{check_dimensions, Application, Dependencies, IndexMismatch, StartupError};

async fn dependencies(settings: &deja_config::Settings) -> Dependencies {
    Dependencies {
        store: deja_tests::store_for(settings).await,
        embedder: deja_tests::embedder(),
        reranker: None,
        late: None,
    }
}

#[tokio::test]
async fn a_worker_without_an_llm_endpoint_refuses_to_start() {
    let mut settings = worker_settings("http://127.0.0.1:9");
    settings.llm.base_url = String::new();
    let deps = dependencies(&settings).await;
    match Application::build(&settings, deps).await {
        Err(StartupError::Refused(reason)) => assert!(reason.contains("llm.base_url"), "{reason}"),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a worker without an LLM must not start"),
    }
}

#[tokio::test]
async fn an_embedding_model_of_another_dimension_than_the_index_is_refused() {
    let settings = worker_settings("http://127.0.0.1:9");
    let deps = dependencies(&settings).await;
    let index = deps
        .store
        .vector_index_dimensions()
        .await
        .expect("read the vector index");
    let model = deps.embedder.dimensions();
    assert_eq!(index, Some(model), "the test index matches the test model");
    check_dimensions(index, deps.embedder.as_ref()).expect("same dimensions are accepted");
    match check_dimensions(Some(model + 1), deps.embedder.as_ref()) {
        Err(IndexMismatch::Dimensions {
            index,
            model_dimensions,
            ..
        }) => assert_eq!((index, model_dimensions), (model + 1, model)),
        other => panic!("another dimension must be refused, got {other:?}"),
    }
    assert!(matches!(
        check_dimensions(None, deps.embedder.as_ref()),
        Err(IndexMismatch::Missing)
    ));
}

#[tokio::test]
async fn a_metrics_address_already_in_use_stops_the_startup_with_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let address = taken.local_addr().expect("its address").to_string();
    let mut settings = worker_settings("http://127.0.0.1:9");
    settings.worker.metrics_addr = address.clone();
    let deps = dependencies(&settings).await;
    match Application::build(&settings, deps).await {
        Err(StartupError::Metrics { address: shown, .. }) => assert_eq!(shown, address),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("the metrics address is taken"),
    }
}
