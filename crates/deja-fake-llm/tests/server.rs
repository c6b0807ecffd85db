//! The fake over real HTTP, spoken with a bare HTTP/1.1 client so that this crate needs none.

use deja_fake_llm::{FakeLlm, Reply, RequestKind};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, Value) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let (_, body) = response.split_once("\r\n\r\n").unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn extraction_request(answer: &str) -> String {
    json!({
        "model": "m",
        "messages": [
            {"role": "system", "content": "<<deja:issue-types>>\n(none yet)\n<</deja:issue-types>>\n<<deja:components>>\n(none yet)\n<</deja:components>>"},
            {"role": "user", "content": format!(
                "LATEST TURN (turn 1)\n<user-message>\n#disk-full on host=db-1\n</user-message>\n\
                 <agent-final-answer>\n{answer}\n</agent-final-answer>")}
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "deja_episode", "schema": {}}}
    })
    .to_string()
}

#[tokio::test]
async fn auto_answers_in_the_openai_shape_with_usage_and_records_the_request() {
    let fake = FakeLlm::start().await;
    assert!(fake.base_url().starts_with("http://127.0.0.1:"));
    let (status, body) = http(
        fake.addr(),
        "POST",
        "/v1/chat/completions",
        &extraction_request("Root cause: logs. Fixed."),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    let content: Value =
        serde_json::from_str(body["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["issue_type"], "disk-full");
    assert_eq!(content["resolved"], true);
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 10);
    assert_eq!(fake.calls(), 1);
    assert_eq!(fake.requests()[0].kind, RequestKind::Extraction);

    let (status, models) = http(fake.addr(), "GET", "/v1/models", "").await;
    assert_eq!(status, 200);
    assert_eq!(models["data"][0]["id"], "deja-fake");
}

#[tokio::test]
async fn scripted_replies_are_consumed_in_order_then_the_default_applies() {
    let fake = FakeLlm::start().await;
    let request = extraction_request("ok");
    fake.push(Reply::Status(503));
    fake.push(Reply::Garbage);
    fake.push(Reply::Truncated);
    fake.push(Reply::Json(json!({"a": 1})));
    fake.set_default(Reply::Status(429));

    let (status, body) = http(fake.addr(), "POST", "/v1/chat/completions", &request).await;
    assert_eq!(status, 503);
    assert!(body["error"]["message"].is_string());
    let (_, body) = http(fake.addr(), "POST", "/v1/chat/completions", &request).await;
    assert_eq!(
        body["choices"][0]["message"]["content"],
        deja_fake_llm::GARBAGE
    );
    let (_, body) = http(fake.addr(), "POST", "/v1/chat/completions", &request).await;
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    let content = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(serde_json::from_str::<Value>(content).is_err());
    let (_, body) = http(fake.addr(), "POST", "/v1/chat/completions", &request).await;
    assert_eq!(body["choices"][0]["message"]["content"], "{\"a\":1}");
    let (status, _) = http(fake.addr(), "POST", "/v1/chat/completions", &request).await;
    assert_eq!(status, 429);
    assert_eq!(fake.calls(), 5);

    fake.reset();
    assert_eq!(fake.calls(), 0);
    let (status, _) = http(fake.addr(), "POST", "/v1/chat/completions", &request).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn latency_and_stalls_delay_the_answer() {
    let fake = FakeLlm::start().await;
    fake.set_latency(Duration::from_millis(150));
    fake.push(Reply::Stall(Duration::from_millis(150)));
    let started = Instant::now();
    let (status, _) = http(
        fake.addr(),
        "POST",
        "/v1/chat/completions",
        &extraction_request("x"),
    )
    .await;
    assert_eq!(status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn a_body_that_is_not_json_is_a_400_and_clones_share_one_server_until_shutdown() {
    let fake = FakeLlm::start().await;
    let clone = fake.clone();
    let (status, _) = http(fake.addr(), "POST", "/v1/chat/completions", "{nope").await;
    assert_eq!(status, 400);
    clone.push(Reply::Status(500));
    let (status, _) = http(
        fake.addr(),
        "POST",
        "/v1/chat/completions",
        &extraction_request("x"),
    )
    .await;
    assert_eq!(status, 500);

    let addr = fake.addr();
    drop(clone);
    fake.shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
