//! The HTTP transport handed to async-openai.
//!
//! It replaces the client's default stack for two reasons: the default retries 429/5xx three
//! times with back-off inside one call (retrying is the worker's decision, with its own
//! back-off and attempt budget), and the default loses the HTTP status when an error body is
//! not OpenAI-shaped JSON (llama-server and proxies often answer plain text), which would blur
//! the transient/permanent split.

use async_openai::error::{ApiError, ApiErrorResponse, OpenAIError, WrappedError};
use async_openai::middleware::HttpRequestFactory;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Sends each request once; any non-2xx answer becomes an `ApiError` carrying its status.
#[derive(Clone, Debug)]
pub(crate) struct SendOnce {
    http: reqwest::Client,
}

impl SendOnce {
    pub(crate) fn new(http: reqwest::Client) -> Self {
        SendOnce { http }
    }
}

type Sending = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send>>;

impl tower_service::Service<HttpRequestFactory> for SendOnce {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = Sending;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        Box::pin(async move {
            let request = factory.build().await?;
            let response = http.execute(request).await.map_err(OpenAIError::Reqwest)?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            // The status is what matters; a body that cannot be read still leaves it.
            let body = response.bytes().await.unwrap_or_default();
            let api_error = match serde_json::from_slice::<WrappedError>(&body) {
                Ok(wrapped) => wrapped.error,
                Err(_) => ApiError {
                    message: String::from_utf8_lossy(&body).into_owned(),
                    ..ApiError::default()
                },
            };
            Err(OpenAIError::ApiError(ApiErrorResponse {
                status_code: status,
                api_error,
            }))
        })
    }
}
