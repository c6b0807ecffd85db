//! `/v1/review/...`: the review API over HTTP (behind the same authentication as search;
//! the `review` scope is checked by the use cases in [`crate::review`]).
//!
//! | method | path | body | answer |
//! |---|---|---|---|
//! | GET | `/v1/review/episodes?team&component&issue_type&significance&resolved&status&verdict&q&order&limit&offset` | | a page |
//! | GET | `/v1/review/episodes/{id}` | | the episode with provenance, `ETag` |
//! | PATCH | `/v1/review/episodes/{id}` (`If-Match` required) | an edit | the episode, `ETag` |
//! | POST | `/v1/review/episodes/{id}/mark-wrong` | `{"note"}` | the episode, `ETag` |
//! | POST | `/v1/review/episodes/{id}/clear-verdict` | | the episode, `ETag` |
//! | POST | `/v1/review/episodes/{id}/confirm` | | the episode, `ETag` |
//! | DELETE | `/v1/review/episodes/{id}` | | what was deleted |
//! | POST | `/v1/review/episodes/{id}/retry` | | `{"id", "turn_index", "queued"}` (503 when the broker cannot take it) |
//! | POST | `/v1/review/episodes/{id}/recurrences` | `{"of", "confidence"?}` | the episode |
//! | DELETE | `/v1/review/episodes/{id}/recurrences/{of}` | | the episode |
//! | GET | `/v1/review/strategy?team&issue_type&component` | | the strategy with its history, `ETag` |
//!
//! Every POST and DELETE checks `If-Match` when it is sent (412 `version_conflict`).

use crate::auth::Principal;
use crate::error::SearchError;
use crate::http::{ApiError, ApiJson, ApiPath, AppState};
use crate::response::Envelope;
use crate::review::{
    etag, parse_if_match, Action, LinkRecurrence, ListQuery, MarkWrong, ReviewedEpisode,
};
use crate::strategy_review::StrategyRef;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use deja_domain::EpisodeEdit;
use serde::{Deserialize, Serialize};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/review/episodes", get(list))
        .route(
            "/v1/review/episodes/{id}",
            get(show).patch(edit).delete(delete),
        )
        .route("/v1/review/episodes/{id}/mark-wrong", post(mark_wrong))
        .route(
            "/v1/review/episodes/{id}/clear-verdict",
            post(clear_verdict),
        )
        .route("/v1/review/episodes/{id}/confirm", post(confirm))
        .route("/v1/review/episodes/{id}/retry", post(retry))
        .route("/v1/review/episodes/{id}/recurrences", post(link))
        .route(
            "/v1/review/episodes/{id}/recurrences/{of}",
            axum::routing::delete(unlink),
        )
        .route("/v1/review/strategy", get(show_strategy))
}

/// `GET /v1/review/strategy`: `team` omitted or `*` = the org-wide strategy; `component`
/// as `type:name`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StrategyQuery {
    org: Option<String>,
    team: Option<String>,
    issue_type: String,
    component: String,
}

async fn show_strategy(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    query: Result<Query<StrategyQuery>, QueryRejection>,
) -> Response {
    let result = async {
        let Query(query) = query
            .map_err(|rejection| SearchError::bad_request("query string", rejection.body_text()))?;
        let strategy = StrategyRef::new(query.team, &query.issue_type, &query.component)?;
        state
            .review
            .strategy(&principal, query.org, &strategy)
            .await
    }
    .await;
    let tag = result.as_ref().ok().map(|s| etag(s.version));
    with_etag(respond(result), tag)
}

async fn retry(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<OrgQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let org = org_of(query)?;
        let version = if_match(&headers)?;
        state.review.retry(&principal, org, &id, version).await
    }
    .await;
    respond(result)
}

async fn link(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<OrgQuery>, QueryRejection>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<LinkRecurrence>,
) -> Response {
    let result = async {
        let org = org_of(query)?;
        let version = if_match(&headers)?;
        state
            .review
            .link(&principal, org, &id, &body, version)
            .await
    }
    .await;
    respond_episode(result)
}

async fn unlink(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath((id, of)): ApiPath<(String, String)>,
    query: Result<Query<OrgQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let org = org_of(query)?;
        let version = if_match(&headers)?;
        state
            .review
            .unlink(&principal, org, &id, &of, version)
            .await
    }
    .await;
    respond_episode(result)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OrgQuery {
    org: Option<String>,
}

fn org_of(query: Result<Query<OrgQuery>, QueryRejection>) -> Result<Option<String>, SearchError> {
    query
        .map(|Query(q)| q.org)
        .map_err(|rejection| SearchError::bad_request("query string", rejection.body_text()))
}

fn if_match(headers: &HeaderMap) -> Result<Option<i64>, SearchError> {
    headers
        .get(header::IF_MATCH)
        .map(|value| {
            value
                .to_str()
                .map_err(|_| SearchError::bad_request("If-Match", "is not visible ASCII"))
                .and_then(parse_if_match)
        })
        .transpose()
}

fn respond<T: Serialize>(result: Result<T, SearchError>) -> Response {
    match result {
        Ok(value) => Json(Envelope::ok(value)).into_response(),
        Err(error) => {
            error.log();
            ApiError(error).into_response()
        }
    }
}

/// The envelope with the episode's version as `ETag`.
fn respond_episode(result: Result<ReviewedEpisode, SearchError>) -> Response {
    let tag = result.as_ref().ok().map(|e| etag(e.version));
    with_etag(respond(result), tag)
}

fn with_etag(mut response: Response, tag: Option<String>) -> Response {
    if let Some(value) = tag.and_then(|t| HeaderValue::from_str(&t).ok()) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Response {
    match query {
        Ok(Query(query)) => respond(state.review.list(&principal, query).await),
        Err(rejection) => respond::<()>(Err(SearchError::bad_request(
            "query string",
            rejection.body_text(),
        ))),
    }
}

async fn show(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<OrgQuery>, QueryRejection>,
) -> Response {
    let result = async {
        let org = org_of(query)?;
        state.review.get(&principal, org, &id).await
    }
    .await;
    respond_episode(result)
}

async fn act(
    state: &AppState,
    principal: &Principal,
    id: &str,
    query: Result<Query<OrgQuery>, QueryRejection>,
    headers: &HeaderMap,
    action: Action,
) -> Response {
    let result = async {
        let org = org_of(query)?;
        let version = if_match(headers)?;
        state
            .review
            .apply(principal, org, id, version, action)
            .await
    }
    .await;
    respond_episode(result)
}

async fn edit(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<OrgQuery>, QueryRejection>,
    headers: HeaderMap,
    ApiJson(edit): ApiJson<EpisodeEdit>,
) -> Response {
    let action = Action::Edit(Box::new(edit));
    act(&state, &principal, &id, query, &headers, action).await
}

async fn mark_wrong(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<OrgQuery>, QueryRejection>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<MarkWrong>,
) -> Response {
    let action = Action::MarkWrong(body.note);
    act(&state, &principal, &id, query, &headers, action).await
}

async fn clear_verdict(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<OrgQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    act(
        &state,
        &principal,
        &id,
        query,
        &headers,
        Action::ClearVerdict,
    )
    .await
}

async fn confirm(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<OrgQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    act(&state, &principal, &id, query, &headers, Action::Confirm).await
}

async fn delete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<OrgQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let org = org_of(query)?;
        let version = if_match(&headers)?;
        state.review.delete(&principal, org, &id, version).await
    }
    .await;
    respond(result)
}
