//! A deterministic, scriptable OpenAI-compatible chat completions server for tests and
//! benchmarks. It is the only fake in deja's test suite: everything else runs for real.
//!
//! Replies are scripted per request ([`FakeLlm::push`]) or fall back to a default, by default
//! [`Reply::Auto`]: an extraction (or playbook) derived deterministically from the prompt
//! layout of `deja-llm` (see `crates/deja-llm/PROMPT.md` and [`auto`]).
//!
//! Architecture invariant: `Auto` reads the user message, the agent's final answer, the stored
//! episode and the vocabulary, never the text between the first `<tool-call` and the last
//! `</tool-call>`, so a poisoned tool output cannot reach an episode through the fake either.

pub mod auto;
pub mod parse;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::oneshot;

/// What the fake answers to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A valid reply derived from the prompt.
    Auto,
    /// An error status with an OpenAI-shaped error body.
    Status(u16),
    /// A 200 whose message content is not JSON.
    Garbage,
    /// Waits this long, then answers like `Auto` (if the client is still there).
    Stall(Duration),
    /// The first half of the `Auto` reply with `finish_reason: "length"`.
    Truncated,
    /// A 200 whose message content is this value, serialised.
    Json(Value),
    /// The 400 an OpenAI-compatible server answers when the prompt exceeds the model's
    /// context window (`code: context_length_exceeded`).
    ContextOverflow,
}

/// What a request asked for, from `response_format.json_schema.name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Extraction,
    Synthesis,
    /// memory-search's optional verification of its decision.
    Verification,
    /// The worker's second look at a doubtful root cause.
    Cause,
    /// The worker's second look at an issue type that names a ruled-out hypothesis.
    IssueType,
    /// No json schema named by deja: answered like an extraction.
    Other,
}

impl RequestKind {
    pub fn of(body: &Value) -> RequestKind {
        let name = body
            .pointer("/response_format/json_schema/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if name.contains("playbook") {
            RequestKind::Synthesis
        } else if name.contains("verification") {
            RequestKind::Verification
        } else if name.contains("cause") {
            RequestKind::Cause
        } else if name.contains("issue_type") {
            RequestKind::IssueType
        } else if name.contains("episode") {
            RequestKind::Extraction
        } else {
            RequestKind::Other
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub body: Value,
    pub kind: RequestKind,
}

impl RecordedRequest {
    /// The first message of `role`, as text.
    pub fn message(&self, role: &str) -> Option<String> {
        parse::messages(&self.body)
            .into_iter()
            .find(|(r, _)| r == role)
            .map(|(_, text)| text)
    }

    /// Every message, in order, as `(role, text)`.
    pub fn messages(&self) -> Vec<(String, String)> {
        parse::messages(&self.body)
    }
}

struct Script {
    queue: VecDeque<Reply>,
    default: Reply,
    /// Defaults of one kind of request, before `default`.
    default_of: Vec<(RequestKind, Reply)>,
    latency: Duration,
    requests: Vec<RecordedRequest>,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            queue: VecDeque::new(),
            default: Reply::Auto,
            default_of: Vec::new(),
            latency: Duration::ZERO,
            requests: Vec::new(),
        }
    }
}

#[derive(Default)]
struct Shared {
    script: Mutex<Script>,
}

impl Shared {
    /// A test that panicked while holding the lock must not wedge every later request.
    fn script(&self) -> MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Stops the server when the last clone of the handle goes away.
struct Stopper(Mutex<Option<oneshot::Sender<()>>>);

impl Stopper {
    fn stop(&self) {
        let sender = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(sender) = sender {
            let _ = sender.send(());
        }
    }
}

impl Drop for Stopper {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A running fake. Clones share the server and its script.
#[derive(Clone)]
pub struct FakeLlm {
    shared: Arc<Shared>,
    stopper: Arc<Stopper>,
    addr: SocketAddr,
}

impl FakeLlm {
    /// Starts on a random loopback port. Panics when no loopback port can be bound: this is a
    /// test fixture and there is nothing sensible to do without one.
    pub async fn start() -> FakeLlm {
        match FakeLlm::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await {
            Ok(fake) => fake,
            Err(error) => panic!("deja-fake-llm cannot bind a loopback port: {error}"),
        }
    }

    pub async fn bind(addr: SocketAddr) -> std::io::Result<FakeLlm> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(models))
            .with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(error) = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::warn!(%error, "deja-fake-llm server stopped");
            }
        });
        Ok(FakeLlm {
            shared,
            stopper: Arc::new(Stopper(Mutex::new(Some(stop)))),
            addr,
        })
    }

    /// `http://127.0.0.1:PORT/v1`, what `llm.base_url` expects.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues one reply; requests consume the queue in order.
    pub fn push(&self, reply: Reply) {
        self.shared.script().queue.push_back(reply);
    }

    /// What to answer when the queue is empty (initially `Auto`).
    pub fn set_default(&self, reply: Reply) {
        self.shared.script().default = reply;
    }

    /// What to answer requests of `kind` when the queue is empty, before the default: an
    /// endpoint that fails one kind of request (extractions) while answering the rest (the
    /// worker's health probe).
    pub fn set_default_of(&self, kind: RequestKind, reply: Reply) {
        let mut script = self.shared.script();
        script.default_of.retain(|(k, _)| *k != kind);
        script.default_of.push((kind, reply));
    }

    /// Added before every answer, to model a slow model in benchmarks.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.script().latency = latency;
    }

    /// Every chat completion request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.script().requests.clone()
    }

    pub fn calls(&self) -> usize {
        self.shared.script().requests.len()
    }

    /// Back to the initial state: empty queue and log, `Auto`, no latency.
    pub fn reset(&self) {
        *self.shared.script() = Script::default();
    }

    /// Stops accepting connections (also done when the last clone is dropped).
    pub fn shutdown(&self) {
        self.stopper.stop();
    }
}

async fn models() -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{"id": "deja-fake", "object": "model", "created": 0, "owned_by": "deja"}]
    }))
}

async fn chat_completions(State(shared): State<Arc<Shared>>, body: axum::body::Bytes) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(error) => return error_reply(400, &format!("request body is not json: {error}")),
    };
    let kind = RequestKind::of(&body);
    let (reply, latency) = {
        let mut script = shared.script();
        script.requests.push(RecordedRequest {
            body: body.clone(),
            kind,
        });
        let reply = script.queue.pop_front().unwrap_or_else(|| {
            script
                .default_of
                .iter()
                .find(|(k, _)| *k == kind)
                .map_or_else(|| script.default.clone(), |(_, reply)| reply.clone())
        });
        (reply, script.latency)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    match reply {
        Reply::Auto => completion(&body, auto::reply(&body, kind), "stop"),
        Reply::Status(code) => error_reply(code, "scripted failure"),
        Reply::Garbage => completion(&body, GARBAGE.to_owned(), "stop"),
        Reply::Stall(duration) => {
            tokio::time::sleep(duration).await;
            completion(&body, auto::reply(&body, kind), "stop")
        }
        Reply::Truncated => {
            let full = auto::reply(&body, kind);
            let half: String = full.chars().take(full.chars().count() / 2).collect();
            completion(&body, half, "length")
        }
        Reply::Json(value) => completion(&body, value.to_string(), "stop"),
        Reply::ContextOverflow => {
            let body = json!({"error": {
                "message": "This model's maximum context length is 4096 tokens. However, your \
                            messages resulted in 9000 tokens. Please reduce the length of the \
                            messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded"
            }});
            (StatusCode::BAD_REQUEST, Json(body)).into_response()
        }
    }
}

/// What a small model says when it ignores the response format.
pub const GARBAGE: &str = "Sure! Here is the summary you asked for: the root cause is {probably";

fn completion(request: &Value, content: String, finish_reason: &str) -> Response {
    let prompt_tokens: usize = parse::messages(request)
        .iter()
        .map(|(_, text)| estimate_tokens(text))
        .sum();
    let completion_tokens = estimate_tokens(&content);
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("deja-fake");
    Json(json!({
        "id": "chatcmpl-deja-fake",
        "object": "chat.completion",
        "created": 1_767_225_600u32,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": finish_reason
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        }
    }))
    .into_response()
}

fn error_reply(code: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body =
        json!({"error": {"message": message, "type": "deja_fake", "param": null, "code": null}});
    (status, Json(body)).into_response()
}

/// Deterministic: a quarter of the characters, rounded up.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}
