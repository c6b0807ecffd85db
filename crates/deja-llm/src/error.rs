//! The adapter's one error type. The split that matters to callers is transient (retry later
//! with back-off) versus the rest (mark the extraction failed or dead-letter).

use async_openai::error::OpenAIError;

/// Server error bodies can be whole HTML pages; a log line needs the gist only.
const MAX_MESSAGE_CHARS: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// 429, 5xx, 408, timeouts, connection failures, a broken response envelope.
    #[error("llm temporarily unavailable{}: {message}", status_suffix(*.status))]
    Transient {
        status: Option<u16>,
        message: String,
    },
    /// 401, 403 or 404: usually the endpoint refusing every request (an expired key, a
    /// revoked project, a renamed model) until someone fixes the configuration. No turn's
    /// fault: like a transient error, the worker pauses on it when its probe is refused too,
    /// instead of recording every turn as a failed extraction; when the probe passes, the
    /// refusal was this request's (a provider's moderation), and the turn fails at once.
    #[error(
        "llm endpoint refuses requests (http {status}; check llm.api_key, llm.model and \
         llm.base_url): {message}"
    )]
    Refused { status: u16, message: String },
    /// The reply still violated the schema after the one repair attempt.
    #[error("llm reply invalid after a repair attempt: {0}")]
    InvalidReply(String),
    /// Any other 4xx, or a configuration problem: retrying cannot help.
    #[error("llm request failed permanently: {0}")]
    Permanent(String),
    /// A 400 saying the prompt exceeds the model's context window: the same prompt will
    /// never fit, so it is not retried.
    #[error("llm prompt exceeds the model's context window: {0}")]
    ContextOverflow(String),
}

impl LlmError {
    /// Whether the endpoint, not this request, is the problem: the caller waits for it
    /// rather than failing the request.
    pub fn is_transient(&self) -> bool {
        matches!(self, LlmError::Transient { .. } | LlmError::Refused { .. })
    }

    /// Whether asking again with the same input can succeed: transient errors and invalid
    /// replies (the model is not deterministic) can; a permanent 4xx or a context overflow
    /// cannot.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::Transient { .. } | LlmError::Refused { .. } | LlmError::InvalidReply(_)
        )
    }

    /// A short machine-readable reason, for metrics and dead-letter headers.
    pub fn reason_code(&self) -> &'static str {
        match self {
            LlmError::Transient { .. } => "llm_transient",
            LlmError::Refused { .. } => "llm_refused",
            LlmError::InvalidReply(_) => "llm_invalid_reply",
            LlmError::Permanent(_) => "llm_permanent",
            LlmError::ContextOverflow(_) => "llm_context_overflow",
        }
    }

    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            LlmError::Transient { .. } => "transient",
            LlmError::Refused { .. } => "refused",
            LlmError::InvalidReply(_) => "invalid_reply",
            LlmError::Permanent(_) => "permanent",
            LlmError::ContextOverflow(_) => "context_overflow",
        }
    }
}

fn status_suffix(status: Option<u16>) -> String {
    status.map(|s| format!(" (http {s})")).unwrap_or_default()
}

/// Maps a client error onto the transient/permanent split.
pub(crate) fn classify(error: OpenAIError) -> LlmError {
    match error {
        OpenAIError::ApiError(response) => {
            let status = response.status_code.as_u16();
            let message = bounded(&response.api_error.to_string());
            if status == 429 || status == 408 || response.status_code.is_server_error() {
                LlmError::Transient {
                    status: Some(status),
                    message,
                }
            } else if matches!(status, 401 | 403 | 404) {
                LlmError::Refused { status, message }
            } else if status == 400 && is_context_overflow(&response.api_error) {
                LlmError::ContextOverflow(format!("http {status}: {message}"))
            } else {
                LlmError::Permanent(format!("http {status}: {message}"))
            }
        }
        OpenAIError::Reqwest(error) if error.is_builder() => {
            LlmError::Permanent(format!("invalid request: {}", chain(&error)))
        }
        OpenAIError::Reqwest(error) => LlmError::Transient {
            status: error.status().map(|s| s.as_u16()),
            message: if error.is_timeout() {
                format!("timed out: {}", chain(&error))
            } else {
                chain(&error)
            },
        },
        // A 200 whose body is not a chat completion: typically a proxy's error page.
        OpenAIError::JSONDeserialize(error, content) => LlmError::Transient {
            status: None,
            message: bounded(&format!(
                "response is not a chat completion ({error}): {content}"
            )),
        },
        other => LlmError::Permanent(bounded(&other.to_string())),
    }
}

/// OpenAI says `code: context_length_exceeded`; vLLM, llama.cpp and others only say it in
/// the message.
fn is_context_overflow(error: &async_openai::error::ApiError) -> bool {
    if error.code.as_deref() == Some("context_length_exceeded") {
        return true;
    }
    let message = error.message.to_lowercase();
    [
        "context length",
        "context window",
        "context size",
        "maximum context",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// The error and its sources on one line, bounded: reqwest's own message hides the
/// interesting part ("operation timed out", "connection refused") in the source chain.
fn chain(error: &reqwest::Error) -> String {
    bounded(&deja_domain::error_chain(error))
}

pub(crate) fn bounded(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= MAX_MESSAGE_CHARS {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(MAX_MESSAGE_CHARS).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_errors_show_their_status_and_say_they_are_transient() {
        let error = LlmError::Transient {
            status: Some(503),
            message: "loading model".into(),
        };
        assert!(error.is_transient());
        assert_eq!(
            error.to_string(),
            "llm temporarily unavailable (http 503): loading model"
        );
        assert!(!LlmError::Permanent("x".into()).is_transient());
        assert!(!LlmError::InvalidReply("x".into()).is_transient());
    }

    #[test]
    fn a_context_overflow_is_neither_transient_nor_retryable() {
        let error = LlmError::ContextOverflow("http 400: too long".into());
        assert!(!error.is_transient());
        assert!(!error.is_retryable());
        assert_eq!(error.reason_code(), "llm_context_overflow");
        assert!(LlmError::InvalidReply("x".into()).is_retryable());
    }

    #[test]
    fn long_server_messages_are_cut_to_one_bounded_line() {
        let text = format!("<html>\n{}</html>", "x".repeat(1_000));
        let cut = bounded(&text);
        assert!(!cut.contains('\n'));
        assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS + 1);
    }
}
