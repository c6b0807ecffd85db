//! The client: one chat completion per attempt, a strict JSON schema as response format, the
//! reply validated again in Rust, and at most one repair round trip.

use crate::error::{bounded, classify, LlmError};
use crate::transport::SendOnce;
use crate::{metrics, prompt, Extraction, ExtractionRequest, Usage};
use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
    CreateChatCompletionRequest, FinishReason, ResponseFormat, ResponseFormatJsonSchema,
};
use async_openai::Client;
use deja_config::LlmSettings;
use deja_domain::poisoning::CopyGuard;
use deja_domain::recognition::verify::VerifyReply;
use deja_domain::second_look::{self, CauseDoubt, RestatedCause};
use deja_domain::strategy::{Playbook, StrategyKey};
use deja_domain::type_look::{RenamedType, TypeDoubt};
use deja_domain::{Episode, ExtractedEpisode, Vocabulary};
use std::time::{Duration, Instant};
use tracing::Instrument as _;

/// Connecting should never take long, even when a generous request timeout is configured for a
/// slow CPU-bound model.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The production LLM adapter. Cheap to clone: the HTTP client is shared.
#[derive(Clone, Debug)]
pub struct LlmClient {
    client: Client<OpenAIConfig>,
    model: String,
    max_tokens: u32,
    temperature: f32,
}

/// The messages and response format of one call.
struct Prompt {
    system: String,
    user: String,
    format: ResponseFormat,
}

/// A validated reply, with what it cost.
struct Called<T> {
    value: T,
    usage: Usage,
    latency: Duration,
}

/// One model answer, reduced to what the validation loop needs.
struct Answer {
    content: String,
    cut_off: bool,
}

impl LlmClient {
    pub fn new(settings: &LlmSettings) -> Result<LlmClient, LlmError> {
        if !settings.is_configured() {
            return Err(LlmError::Permanent(
                "`llm.base_url` is not configured".into(),
            ));
        }
        if settings.model.trim().is_empty() {
            return Err(LlmError::Permanent("`llm.model` is empty".into()));
        }
        if settings.timeout_secs == 0 || settings.max_tokens == 0 {
            return Err(LlmError::Permanent(
                "`llm.timeout_secs` and `llm.max_tokens` must be positive".into(),
            ));
        }
        // async-openai builds the Authorization header with an unwrap: refuse a key that is not
        // a valid header value here rather than panic on the first request.
        if settings
            .api_key
            .expose()
            .chars()
            .any(|c| !c.is_ascii() || c.is_ascii_control())
        {
            return Err(LlmError::Permanent(
                "`llm.api_key` contains characters not allowed in an http header".into(),
            ));
        }
        let timeout = Duration::from_secs(settings.timeout_secs);
        // The whole request (connect, send, wait, read) is bounded, so a stalled server becomes
        // a transient timeout instead of a stuck worker slot.
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(MAX_CONNECT_TIMEOUT))
            .build()
            .map_err(|e| LlmError::Permanent(format!("cannot build the http client: {e}")))?;
        // Every field set explicitly: the defaults read OPENAI_* environment variables.
        let config = OpenAIConfig::new()
            .with_api_base(settings.base_url.trim().trim_end_matches('/'))
            .with_api_key(settings.api_key.expose())
            .with_org_id("")
            .with_project_id("");
        Ok(LlmClient {
            client: Client::with_config(config).with_http_service(SendOnce::new(http)),
            model: settings.model.trim().to_owned(),
            max_tokens: settings.max_tokens,
            temperature: settings.temperature,
        })
    }

    /// Extracts the episode as it stands after `req.event`.
    pub async fn extract(&self, req: &ExtractionRequest<'_>) -> Result<Extraction, LlmError> {
        let span = tracing::info_span!(
            "llm_extract",
            org = %req.event.org,
            team = %req.event.team,
            correlation_id = %req.event.correlation_id,
            turn_index = req.event.turn_index,
            model = %self.model,
        );
        let limits = *req.limits;
        let prompt = Prompt {
            system: prompt::extraction_system(req.vocabulary, req.limits),
            user: prompt::extraction_user(req.event, req.existing, req.given),
            format: schema_format(
                prompt::EPISODE_SCHEMA_NAME,
                "an incident memory episode",
                ExtractedEpisode::json_schema(req.limits),
            ),
        };
        let called = self
            .call("extract", prompt, |reply| {
                ExtractedEpisode::parse(reply, &limits).map_err(|v| v.problems)
            })
            .instrument(span)
            .await?;
        Ok(Extraction {
            episode: called.value,
            usage: called.usage,
            latency: called.latency,
        })
    }

    /// Writes a playbook for `key` from its source episodes.
    pub async fn synthesize(
        &self,
        key: &StrategyKey,
        sources: &[Episode],
    ) -> Result<(Playbook, Usage), LlmError> {
        let span = tracing::info_span!(
            "llm_synthesize",
            org = %key.org,
            team = %key.team,
            issue_type = %key.issue_type,
            sources = sources.len(),
            model = %self.model,
        );
        let prompt = Prompt {
            system: prompt::synthesis_system(),
            user: prompt::synthesis_user(key, sources),
            format: schema_format(
                prompt::PLAYBOOK_SCHEMA_NAME,
                "an investigation playbook",
                Playbook::json_schema(),
            ),
        };
        let called = self
            .call("synthesize", prompt, |reply| {
                Playbook::parse(reply).map_err(|p| vec![p])
            })
            .instrument(span)
            .await?;
        Ok((called.value, called.usage))
    }

    /// Asks what cause `final_answer` concludes, given the phrases it rules out (a second look
    /// at a doubtful extracted cause, `deja_domain::second_look`). `None`: the model reads no
    /// cause in the answer; a reply that still names a ruled-out phrase after its repair is
    /// [`LlmError::InvalidReply`].
    pub async fn restate_cause(
        &self,
        final_answer: &str,
        doubt: &CauseDoubt,
    ) -> Result<Option<String>, LlmError> {
        let span = tracing::info_span!(
            "llm_restate_cause",
            reason = doubt.reason.as_str(),
            model = %self.model,
        );
        // A small model with little to read sometimes answers with the instructions.
        let system = prompt::cause_system();
        let instructions = CopyGuard::new([system.as_str()]);
        let prompt = Prompt {
            system,
            user: prompt::cause_user(final_answer, &doubt.ruled_out_text()),
            format: schema_format(
                prompt::CAUSE_SCHEMA_NAME,
                "the root cause the final answer concludes",
                RestatedCause::json_schema(),
            ),
        };
        let refused = doubt.refused();
        let called = self
            .call("restate_cause", prompt, |reply| {
                let cause = RestatedCause::parse(reply, &refused)?;
                match cause {
                    Some(cause) if instructions.copies(&cause) => {
                        Err(vec![second_look::repeats_the_instructions()])
                    }
                    cause => Ok(cause),
                }
            })
            .instrument(span)
            .await?;
        Ok(called.value)
    }

    /// Asks for the issue type of `doubt`'s root cause, the ruled-out hypotheses named as not
    /// the answer (a second look at an extracted type, `deja_domain::type_look`), with the
    /// org's `vocabulary` to reuse. A reply that still names a ruled-out hypothesis, or keeps
    /// the doubted type, after its repair is [`LlmError::InvalidReply`].
    pub async fn rename_issue_type(
        &self,
        doubt: &TypeDoubt,
        vocabulary: &Vocabulary,
    ) -> Result<String, LlmError> {
        let span = tracing::info_span!("llm_rename_issue_type", model = %self.model);
        let prompt = Prompt {
            system: prompt::issue_type_system(vocabulary),
            user: prompt::issue_type_user(&doubt.root_cause, &doubt.ruled_out),
            format: schema_format(
                prompt::ISSUE_TYPE_SCHEMA_NAME,
                "the failure mechanism of the root cause",
                RenamedType::json_schema(),
            ),
        };
        let called = self
            .call("rename_issue_type", prompt, |reply| {
                RenamedType::parse(reply, doubt)
            })
            .instrument(span)
            .await?;
        Ok(called.value)
    }

    /// Asks, for each candidate, whether it is the same failure mechanism as `evidence`
    /// (memory-search's optional verification stage).
    pub async fn verify(
        &self,
        evidence: &str,
        candidates: &[&Episode],
    ) -> Result<VerifyReply, LlmError> {
        let span = tracing::info_span!(
            "llm_verify",
            candidates = candidates.len(),
            model = %self.model,
        );
        let asked: Vec<String> = candidates.iter().map(|e| e.id.clone()).collect();
        let prompt = Prompt {
            system: prompt::verification_system(),
            user: prompt::verification_user(evidence, candidates),
            format: schema_format(
                prompt::VERIFICATION_SCHEMA_NAME,
                "same failure mechanism or not, per past incident",
                VerifyReply::json_schema(),
            ),
        };
        let called = self
            .call("verify", prompt, |reply| VerifyReply::parse(reply, &asked))
            .instrument(span)
            .await?;
        Ok(called.value)
    }

    /// One tiny chat completion (a few tokens, no response format): does the endpoint answer
    /// a real request right now? The worker calls this while paused by an LLM outage; a model
    /// list alone would say "up" while completions still fail with 5xx or 429.
    pub async fn probe(&self) -> Result<(), LlmError> {
        #[allow(deprecated)]
        let request = CreateChatCompletionRequest {
            model: self.model.clone(),
            messages: vec![ChatCompletionRequestUserMessage::from("Reply with: ok").into()],
            temperature: Some(self.temperature),
            max_tokens: Some(4),
            ..Default::default()
        };
        self.client
            .chat()
            .create(request)
            .await
            .map(|_| ())
            .map_err(classify)
    }

    /// One call of `kind`: [`Self::complete`], timed, its outcome recorded (metrics and one
    /// log line).
    async fn call<T>(
        &self,
        kind: &'static str,
        prompt: Prompt,
        validate: impl Fn(&str) -> Result<T, Vec<String>>,
    ) -> Result<Called<T>, LlmError> {
        let started = Instant::now();
        let mut usage = Usage::default();
        let result = self
            .complete(
                prompt.system,
                prompt.user,
                prompt.format,
                validate,
                &mut usage,
            )
            .await;
        let latency = started.elapsed();
        finish(kind, result, latency, &usage).map(|value| Called {
            value,
            usage,
            latency,
        })
    }

    /// Asks once; when the answer is cut off or fails validation, asks once more with the
    /// problems listed. The bool says whether the repair was needed.
    ///
    /// A rejected reply is shown back to the model so that it can fix what it wrote, except a
    /// cut-off one: it says nothing worth keeping, and a prompt near the context size plus
    /// the cut-off reply would not fit in the model's context at all.
    async fn complete<T>(
        &self,
        system: String,
        user: String,
        format: ResponseFormat,
        validate: impl Fn(&str) -> Result<T, Vec<String>>,
        usage: &mut Usage,
    ) -> Result<(T, bool), LlmError> {
        let mut messages: Vec<ChatCompletionRequestMessage> = vec![
            ChatCompletionRequestSystemMessage::from(system).into(),
            ChatCompletionRequestUserMessage::from(user).into(),
        ];
        let first = self.ask(&messages, &format, usage).await?;
        let problems = match check(&first, &validate) {
            Ok(value) => return Ok((value, false)),
            Err(problems) => problems,
        };
        tracing::debug!(problems = %problems.join("; "), "llm reply rejected, asking for a repair");
        if !first.cut_off {
            messages.push(
                ChatCompletionRequestAssistantMessage::from(prompt::previous_reply(&first.content))
                    .into(),
            );
        }
        messages
            .push(ChatCompletionRequestUserMessage::from(prompt::repair_user(&problems)).into());
        let second = match self.ask(&messages, &format, usage).await {
            // The first request fit; the repair did not, for the reply it carries. What failed
            // is the reply (another attempt may write a valid one), not a prompt too long for
            // the model: an invalid reply, retried, rather than a failed extraction at once.
            Err(LlmError::ContextOverflow(detail)) => {
                return Err(LlmError::InvalidReply(bounded(&format!(
                    "{}; its repair did not fit in the model's context ({detail})",
                    problems.join("; ")
                ))))
            }
            answer => answer?,
        };
        check(&second, &validate)
            .map(|value| (value, true))
            .map_err(|problems| LlmError::InvalidReply(bounded(&problems.join("; "))))
    }

    async fn ask(
        &self,
        messages: &[ChatCompletionRequestMessage],
        format: &ResponseFormat,
        usage: &mut Usage,
    ) -> Result<Answer, LlmError> {
        #[allow(deprecated)]
        let request = CreateChatCompletionRequest {
            model: self.model.clone(),
            messages: messages.to_vec(),
            response_format: Some(format.clone()),
            temperature: Some(self.temperature),
            // `max_tokens`, not `max_completion_tokens`: llama-server, vLLM and other
            // OpenAI-compatible servers honour the former.
            max_tokens: Some(self.max_tokens),
            ..Default::default()
        };
        usage.calls += 1;
        let response = self.client.chat().create(request).await.map_err(classify)?;
        if let Some(reported) = &response.usage {
            usage.prompt_tokens += u64::from(reported.prompt_tokens);
            usage.completion_tokens += u64::from(reported.completion_tokens);
        }
        // No choice at all is an invalid reply (worth the repair attempt), not a transport error.
        let Some(choice) = response.choices.into_iter().next() else {
            return Ok(Answer {
                content: String::new(),
                cut_off: false,
            });
        };
        Ok(Answer {
            content: choice.message.content.unwrap_or_default(),
            cut_off: choice.finish_reason == Some(FinishReason::Length),
        })
    }
}

fn check<T>(
    answer: &Answer,
    validate: &impl Fn(&str) -> Result<T, Vec<String>>,
) -> Result<T, Vec<String>> {
    if answer.cut_off {
        // Even if the cut happened to leave valid JSON, some field lost its end.
        return Err(vec![
            "the reply was cut off at the token limit: write shorter fields".to_owned(),
        ]);
    }
    if answer.content.trim().is_empty() {
        return Err(vec!["the reply was empty".to_owned()]);
    }
    validate(&answer.content)
}

fn schema_format(name: &str, description: &str, schema: serde_json::Value) -> ResponseFormat {
    ResponseFormat::JsonSchema {
        json_schema: ResponseFormatJsonSchema {
            name: name.to_owned(),
            description: Some(description.to_owned()),
            schema,
            strict: Some(true),
        },
    }
}

/// Records metrics and the outcome log line for one call.
fn finish<T>(
    kind: &'static str,
    result: Result<(T, bool), LlmError>,
    latency: Duration,
    usage: &Usage,
) -> Result<T, LlmError> {
    match result {
        Ok((value, repaired)) => {
            let outcome = if repaired { "repaired" } else { "ok" };
            metrics::record(kind, outcome, latency, usage);
            tracing::debug!(
                outcome,
                latency_ms = latency.as_millis() as u64,
                prompt_tokens = usage.prompt_tokens,
                completion_tokens = usage.completion_tokens,
                calls = usage.calls,
                "llm call done"
            );
            Ok(value)
        }
        Err(error) => {
            metrics::record(kind, error.outcome(), latency, usage);
            tracing::warn!(
                outcome = error.outcome(),
                latency_ms = latency.as_millis() as u64,
                calls = usage.calls,
                error = %error,
                "llm call failed"
            );
            Err(error)
        }
    }
}
