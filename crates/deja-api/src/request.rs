//! What a caller asks: the JSON body of `POST /v1/memory/search`, the arguments of the MCP
//! tools, and what the CLI builds. One type for every transport, validated in one place.

use crate::error::SearchError;
use deja_config::SearchSettings;
use deja_domain::{Component, Scope};
use deja_graph::SearchFilters;
use rmcp::schemars::{self, JsonSchema};
use serde::{Deserialize, Serialize};

/// Longest accepted query, in characters: a symptom, a component and a system fit in far
/// less; the bound keeps a pasted log from reaching the embedder and Lucene.
pub const MAX_QUERY_CHARS: usize = 2000;
/// Most component filters in one request.
pub const MAX_COMPONENTS: usize = 20;
/// Longest accepted identifier (org, team, issue type, ids...).
pub const MAX_NAME_CHARS: usize = 200;
/// The `limit` bounds and default the request's JSON schema states: those of the default
/// settings (`search.max_limit`, `search.default_limit`; a unit test keeps them equal). The
/// MCP server offers its own settings' instead (`mcp.rs`), and validation always checks the
/// configured ones.
pub const SCHEMA_MAX_LIMIT: usize = 50;
pub const SCHEMA_DEFAULT_LIMIT: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Meaning-based: the query is embedded and compared with every episode of the scope.
    Semantic,
    /// Literal: full-text search for error strings and identifiers.
    Text,
    /// Newest first: episodes touching `components` (or the whole scope); no query needed.
    Timeline,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Semantic => "semantic",
            Mode::Text => "text",
            Mode::Timeline => "timeline",
        }
    }
}

/// Something an incident touched, e.g. `{"type": "service", "name": "checkout"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComponentRef {
    /// Conventional kinds: service, database, queue, cache, cluster, host, network,
    /// pipeline, library.
    #[serde(rename = "type")]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub kind: String,
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub name: String,
}

impl From<&Component> for ComponentRef {
    fn from(c: &Component) -> Self {
        ComponentRef {
            kind: c.kind.clone(),
            name: c.name.clone(),
        }
    }
}

impl From<&ComponentRef> for Component {
    fn from(c: &ComponentRef) -> Self {
        Component::new(c.kind.clone(), c.name.clone())
    }
}

/// A memory search. Only `query` is needed in the common case.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// The org to search. Defaults to the org of your credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub org: Option<String>,
    /// One team of the org; omit to search the whole org.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub team: Option<String>,
    /// Symptom + component + system, e.g. "Maven OOM surveys-module test failure Jenkins".
    /// Required except in timeline mode.
    #[serde(default)]
    #[schemars(length(max = MAX_QUERY_CHARS))]
    pub query: String,
    /// semantic (default), text or timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// Only episodes that touched at least one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_COMPONENTS))]
    pub components: Vec<ComponentRef>,
    /// Only episodes of this issue type, e.g. "cache-eviction".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub issue_type: Option<String>,
    /// Only resolved (true) or unresolved (false) episodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<bool>,
    /// Only episodes with this reviewed significance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub significance: Option<String>,
    /// How many episodes to return: default 3, at most 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = SCHEMA_MAX_LIMIT), extend("default" = SCHEMA_DEFAULT_LIMIT))]
    pub limit: Option<usize>,
    /// Add description, key findings, score breakdown and provenance to each episode.
    #[serde(default)]
    pub details: bool,
    /// Leave out this conversation (the one you are searching from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub exclude_correlation_id: Option<String>,
}

impl SearchRequest {
    /// A semantic search of `query` in `org`.
    pub fn new(org: impl Into<String>, query: impl Into<String>) -> Self {
        SearchRequest {
            org: Some(org.into()),
            query: query.into(),
            ..Default::default()
        }
    }
}

/// `memory_get` / `GET /v1/memory/episodes/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetRequest {
    /// An episode id from a search result (`ep_...`).
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub id: String,
    /// The org of the episode. Defaults to the org of your credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub org: Option<String>,
}

/// A request that passed validation, in the store's terms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ValidSearch {
    pub scope: Scope,
    pub query: String,
    /// `None` = omitted: semantic, falling back to text without an embedder.
    pub mode: Option<Mode>,
    pub components: Vec<Component>,
    pub filters: SearchFilters,
    pub limit: usize,
    pub details: bool,
}

/// A name that normalizes to nothing ("--", "??") names nothing the graph can hold.
fn names_something(field: &str, normalized: &str) -> Result<(), SearchError> {
    if normalized.is_empty() {
        return Err(SearchError::bad_request(
            field,
            "names nothing once normalized",
        ));
    }
    Ok(())
}

pub(crate) fn check_name(field: &str, value: &str) -> Result<(), SearchError> {
    if value.trim().is_empty() {
        return Err(SearchError::bad_request(field, "must not be empty"));
    }
    if value.chars().count() > MAX_NAME_CHARS {
        return Err(SearchError::bad_request(
            field,
            format!("must be at most {MAX_NAME_CHARS} characters"),
        ));
    }
    // Control characters (composite keys join ids with U+001F) and a team named like the
    // org-wide strategy scope (`*`), as the turn-event contract refuses them.
    deja_domain::event::check_id(field, value)
        .map_err(|problem| SearchError::bad_request(field, problem))
}

pub(crate) fn check_optional(field: &str, value: &Option<String>) -> Result<(), SearchError> {
    value.as_deref().map_or(Ok(()), |v| check_name(field, v))
}

impl SearchRequest {
    pub(crate) fn validate(&self, settings: &SearchSettings) -> Result<ValidSearch, SearchError> {
        let org = self
            .org
            .as_deref()
            .ok_or_else(|| SearchError::bad_request("org", "is required"))?;
        check_name("org", org)?;
        check_optional("team", &self.team)?;
        check_optional("issue_type", &self.issue_type)?;
        check_optional("significance", &self.significance)?;
        check_optional("exclude_correlation_id", &self.exclude_correlation_id)?;
        let query = self.query.trim();
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(SearchError::bad_request(
                "query",
                format!("must be at most {MAX_QUERY_CHARS} characters"),
            ));
        }
        if query.is_empty() && self.mode != Some(Mode::Timeline) {
            return Err(SearchError::bad_request(
                "query",
                "is required (symptom + component + system) except in timeline mode",
            ));
        }
        let limit = self.limit.unwrap_or(settings.default_limit);
        if limit == 0 || limit > settings.max_limit {
            return Err(SearchError::bad_request(
                "limit",
                format!("must be between 1 and {}", settings.max_limit),
            ));
        }
        if self.components.len() > MAX_COMPONENTS {
            return Err(SearchError::bad_request(
                "components",
                format!("at most {MAX_COMPONENTS} are allowed"),
            ));
        }
        for component in &self.components {
            check_name("components.type", &component.kind)?;
            check_name("components.name", &component.name)?;
            // Dropped silently, it would widen the search to every component.
            names_something(
                "components.type",
                &deja_domain::vocab::normalize_component_type(&component.kind),
            )?;
            names_something(
                "components.name",
                &deja_domain::vocab::normalize_component_name(&component.name),
            )?;
        }
        if let Some(issue_type) = &self.issue_type {
            names_something(
                "issue_type",
                &deja_domain::vocab::normalize_issue_type(issue_type),
            )?;
        }
        // In the normal form the graph stores (`deja_domain::vocab`): a filter on "Redis" or on
        // type "svc" finds what extraction stored as `redis` and `service`.
        let components: Vec<Component> = deja_domain::vocab::normalize_components(
            self.components.iter().map(Component::from).collect(),
        );
        Ok(ValidSearch {
            scope: Scope {
                org: org.to_owned(),
                team: self.team.clone(),
            },
            query: query.to_owned(),
            mode: self.mode,
            filters: SearchFilters {
                // Timeline passes its components separately (they are what it lists).
                components: if self.mode == Some(Mode::Timeline) {
                    Vec::new()
                } else {
                    components.clone()
                },
                issue_type: self
                    .issue_type
                    .as_deref()
                    .map(deja_domain::vocab::normalize_issue_type),
                resolved: self.resolved,
                significance: self.significance.clone(),
                exclude_correlation_id: self.exclude_correlation_id.clone(),
            },
            components,
            limit,
            details: self.details,
        })
    }
}

impl GetRequest {
    pub(crate) fn validate(&self) -> Result<(String, String), SearchError> {
        check_name("id", &self.id)?;
        let org = self
            .org
            .as_deref()
            .ok_or_else(|| SearchError::bad_request("org", "is required"))?;
        check_name("org", org)?;
        Ok((org.to_owned(), self.id.trim().to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> SearchSettings {
        deja_config::Settings::defaults().search
    }

    #[test]
    fn a_bare_query_gets_the_default_limit_and_no_mode() {
        let valid = SearchRequest::new("acme", " redis evictions ")
            .validate(&settings())
            .unwrap();
        assert_eq!(valid.limit, 3);
        assert_eq!(valid.mode, None);
        assert_eq!(valid.query, "redis evictions");
        assert_eq!(valid.scope, Scope::org("acme"));
    }

    #[test]
    fn each_invalid_field_is_named() {
        let cases: Vec<(SearchRequest, &str)> = vec![
            (
                SearchRequest {
                    org: None,
                    ..SearchRequest::new("x", "q")
                },
                "org",
            ),
            (SearchRequest::new("acme", "  "), "query"),
            (
                SearchRequest {
                    limit: Some(51),
                    ..SearchRequest::new("acme", "q")
                },
                "limit",
            ),
            (
                SearchRequest {
                    limit: Some(0),
                    ..SearchRequest::new("acme", "q")
                },
                "limit",
            ),
            (
                SearchRequest {
                    team: Some(String::new()),
                    ..SearchRequest::new("acme", "q")
                },
                "team",
            ),
            (
                SearchRequest {
                    team: Some("*".into()),
                    ..SearchRequest::new("acme", "q")
                },
                "team",
            ),
            (
                SearchRequest {
                    team: Some("check\u{1f}out".into()),
                    ..SearchRequest::new("acme", "q")
                },
                "team",
            ),
            (
                SearchRequest {
                    components: vec![ComponentRef {
                        kind: "service".into(),
                        name: " ".into(),
                    }],
                    ..SearchRequest::new("acme", "q")
                },
                "components.name",
            ),
            (
                SearchRequest {
                    mode: Some(Mode::Timeline),
                    components: vec![ComponentRef {
                        kind: "service".into(),
                        name: "--".into(),
                    }],
                    ..SearchRequest::new("acme", "")
                },
                "components.name",
            ),
            (
                SearchRequest {
                    components: vec![ComponentRef {
                        kind: "?".into(),
                        name: "redis".into(),
                    }],
                    ..SearchRequest::new("acme", "q")
                },
                "components.type",
            ),
            (
                SearchRequest {
                    issue_type: Some("??".into()),
                    ..SearchRequest::new("acme", "q")
                },
                "issue_type",
            ),
        ];
        for (request, field) in cases {
            match request.validate(&settings()) {
                Err(SearchError::BadRequest { field: named, .. }) => assert_eq!(named, field),
                other => panic!("{field}: expected a bad request, got {other:?}"),
            }
        }
    }

    #[test]
    fn timeline_needs_no_query_and_lists_its_components_itself() {
        let request = SearchRequest {
            mode: Some(Mode::Timeline),
            components: vec![ComponentRef {
                kind: "service".into(),
                name: "checkout".into(),
            }],
            ..SearchRequest::new("acme", "")
        };
        let valid = request.validate(&settings()).unwrap();
        assert!(valid.filters.components.is_empty());
        assert_eq!(valid.components.len(), 1);
    }

    #[test]
    fn the_schemas_limit_bounds_are_the_default_settings() {
        assert_eq!(SCHEMA_MAX_LIMIT, settings().max_limit);
        assert_eq!(SCHEMA_DEFAULT_LIMIT, settings().default_limit);
    }

    #[test]
    fn unknown_fields_and_modes_are_refused_by_name() {
        let error = serde_json::from_str::<SearchRequest>(r#"{"query":"x","limt":3}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("limt"), "{error}");
        let error = serde_json::from_str::<SearchRequest>(r#"{"query":"x","mode":"fuzzy"}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("fuzzy"), "{error}");
    }
}
