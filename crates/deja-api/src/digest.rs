//! The related-history digest (`POST /v1/memory/digest`, off by default): for a runtime that
//! wants context when an investigation starts, without a query. The trigger's entities come
//! from the per-signal-type JSON paths of `[digest.signals]` (`deja_domain::digest`); the
//! episodes are the scope's recent ones whose components or issue type name one of them
//! (`digest/related.cypher`). Same token, org and team rules as search. [`digest_as`] is the
//! one use case behind the HTTP endpoint, the MCP tool `memory_digest` and `deja digest`.

use crate::auth::Principal;
use crate::error::SearchError;
use crate::metrics as m;
use crate::request::{check_name, check_optional, SearchRequest, MAX_NAME_CHARS};
use crate::response::EpisodeView;
use crate::service::SearchService;
use chrono::{Duration as Days, Utc};
use deja_config::DigestSettings;
use deja_domain::digest::trigger_entities;
use deja_domain::{Scope, Trigger};
use rmcp::schemars::{self, JsonSchema};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// The longest signal type accepted (they are short names such as `alertmanager`).
const MAX_SIGNAL_TYPE_CHARS: usize = 100;

/// `POST /v1/memory/digest` body (also the arguments of the MCP tool `memory_digest`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DigestRequest {
    /// Defaults to the org of the credentials.
    #[serde(default)]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub org: Option<String>,
    /// One team; omit for the whole org (a team-bound token must name one of its teams).
    #[serde(default)]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub team: Option<String>,
    /// What started the investigation: `signal_type` and its `payload`.
    #[serde(deserialize_with = "Trigger::deserialize_strict")]
    #[schemars(with = "TriggerSchema")]
    pub trigger: Trigger,
    /// Days back (1 to 365; default `digest.window_days`).
    #[serde(default)]
    #[schemars(range(min = 1, max = 365))]
    pub window_days: Option<u32>,
    /// Episodes wanted (1 to `digest.max_episodes`, the default; never more than 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<usize>,
}

/// The JSON schema of [`Trigger`] (a domain type, which derives no schema) as a request
/// states it ([`Trigger::deserialize_strict`]): no other field, `payload` optional.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TriggerSchema {
    /// The kind of signal, e.g. `alertmanager`: it selects the entity mapping of
    /// `[digest.signals]`.
    #[schemars(length(min = 1, max = MAX_SIGNAL_TYPE_CHARS))]
    signal_type: String,
    /// The signal as received (the alert's JSON); null when omitted.
    #[serde(default)]
    payload: serde_json::Value,
}

/// `result` of a digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DigestResponse {
    /// What the trigger was read as (lowercase), by the first mapped path that named any.
    pub entities: Vec<String>,
    pub window_days: u32,
    /// Most recently confirmed first; compact views with their recurrence chain.
    pub episodes: Vec<EpisodeView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// Authorizes `request` like a search and answers it, or `not_found` when the digest is off.
pub async fn digest_as(
    service: &SearchService,
    settings: &DigestSettings,
    principal: &Principal,
    request: DigestRequest,
) -> Result<DigestResponse, SearchError> {
    let started = Instant::now();
    let result = digest(service, settings, principal, request).await;
    m::request_duration("digest", started.elapsed());
    if let Err(error) = &result {
        m::error(error.code().as_str());
        error.log();
    }
    result
}

async fn digest(
    service: &SearchService,
    settings: &DigestSettings,
    principal: &Principal,
    request: DigestRequest,
) -> Result<DigestResponse, SearchError> {
    if !settings.enabled {
        return Err(SearchError::NotFound(
            "the related-history digest is off on this server (digest.enabled = false)".into(),
        ));
    }
    // The search rules, applied to the digest's org and team: the names first (no control
    // characters, no team named like the org-wide scope, bounded), then the credentials.
    if let Some(org) = &request.org {
        check_name("org", org)?;
    }
    check_optional("team", &request.team)?;
    let mut as_search = SearchRequest {
        org: request.org.clone(),
        team: request.team.clone(),
        ..SearchRequest::default()
    };
    principal.authorize_search(&mut as_search)?;
    let org = as_search
        .org
        .filter(|o| !o.trim().is_empty())
        .ok_or_else(|| SearchError::bad_request("org", "is required"))?;
    let signal_type = request.trigger.signal_type.trim();
    if signal_type.is_empty() || signal_type.chars().count() > MAX_SIGNAL_TYPE_CHARS {
        return Err(SearchError::bad_request(
            "trigger.signal_type",
            format!("must be 1 to {MAX_SIGNAL_TYPE_CHARS} characters"),
        ));
    }
    let window_days = request.window_days.unwrap_or(settings.window_days);
    if !(1..=365).contains(&window_days) {
        return Err(SearchError::bad_request(
            "window_days",
            "must be between 1 and 365",
        ));
    }
    let limit = request.limit.unwrap_or(settings.max_episodes);
    if !(1..=settings.max_episodes).contains(&limit) {
        return Err(SearchError::bad_request(
            "limit",
            format!("must be between 1 and {}", settings.max_episodes),
        ));
    }
    let paths = settings.paths_for(signal_type);
    let entities = trigger_entities(&request.trigger, &paths);
    if entities.is_empty() {
        let tried: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
        return Ok(DigestResponse {
            entities,
            window_days,
            episodes: Vec::new(),
            notice: Some(format!(
                "the trigger's payload names no entity at the paths mapped for `{signal_type}` \
                 ({}); see [digest.signals]",
                if tried.is_empty() {
                    "none".to_owned()
                } else {
                    tried.join(", ")
                }
            )),
        });
    }
    let scope = Scope {
        org,
        team: as_search.team,
    };
    let since = Utc::now() - Days::days(i64::from(window_days));
    let limit_time = Duration::from_millis(service.settings().deadline_ms);
    let lookup = service
        .store()
        .related_episodes(&scope, &entities, since, limit);
    let episodes = match tokio::time::timeout(limit_time, lookup).await {
        Ok(found) => found?,
        Err(_) => {
            return Err(SearchError::DeadlineExceeded(
                service.settings().deadline_ms,
            ))
        }
    };
    let notice = episodes.is_empty().then(|| {
        format!(
            "no episode about {} in the last {window_days} days",
            entities.join(", ")
        )
    });
    Ok(DigestResponse {
        episodes: episodes
            .iter()
            .map(|e| EpisodeView::compact(e, None, None))
            .collect(),
        entities,
        window_days,
        notice,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema an agent reads states the bounds `digest` enforces.
    #[test]
    fn the_request_schema_states_the_bounds_the_digest_enforces() {
        let schema = serde_json::to_value(schemars::schema_for!(DigestRequest)).unwrap();
        let properties = &schema["properties"];
        let bound = |field: &str, key: &str| properties[field][key].as_f64();
        assert_eq!(bound("window_days", "minimum"), Some(1.0), "{schema:#}");
        assert_eq!(bound("window_days", "maximum"), Some(365.0), "{schema:#}");
        assert_eq!(bound("limit", "minimum"), Some(1.0), "{schema:#}");
        assert_eq!(bound("limit", "maximum"), Some(50.0), "{schema:#}");
    }
}
