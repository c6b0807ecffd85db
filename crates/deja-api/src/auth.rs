//! Who is asking, and what they may read.
//!
//! - A bearer token from `api.tokens` maps to one org, its allowed teams (empty = all) and
//!   its scopes (`search` is needed to search and read episodes, `review` to list, edit,
//!   mark wrong, confirm and delete them). Its `name` is who audit records name.
//! - Another org, or a team outside the token → 403. No or unknown token → 401.
//! - An org-wide search (no `team`) with a team-restricted token → 403: the token cannot
//!   read the whole org, and silently narrowing the scope would make results look complete
//!   when they are not. The message tells the caller to pass `team`.
//! - Dev mode without tokens (loopback only, see `Application::build`) allows everything;
//!   with tokens configured, a request without one is 401 even in dev mode.
//! - Tokens are compared in constant time, length included (SHA-256 digests compared).
//! - The MCP stdio server is trusted local use scoped by the CLI's `--org`/`--team`.

use crate::error::SearchError;
use crate::request::{GetRequest, SearchRequest};
use deja_config::ApiSettings;
use subtle::ConstantTimeEq;

pub const SCOPE_SEARCH: &str = "search";
/// Needed to list, read with provenance, edit, mark wrong, confirm and delete episodes.
pub const SCOPE_REVIEW: &str = "review";

/// The caller of one request, as established by authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `None` = any org (dev mode).
    org: Option<String>,
    /// Empty = every team of the org.
    teams: Vec<String>,
    scopes: Vec<String>,
    /// Filled in when a request names no team (the stdio server's `--team`).
    default_team: Option<String>,
    /// Who this is in audit records: the token's name, `dev`, or the local user.
    name: String,
}

impl Principal {
    /// Dev mode: no credentials, everything readable.
    pub fn dev() -> Self {
        Principal {
            org: None,
            teams: Vec::new(),
            scopes: vec![SCOPE_SEARCH.to_owned(), SCOPE_REVIEW.to_owned()],
            default_team: None,
            name: "dev".to_owned(),
        }
    }

    /// A local, trusted caller bound to one org and optionally one team (`deja mcp`).
    pub fn local(org: impl Into<String>, team: Option<String>) -> Self {
        Principal {
            org: Some(org.into()),
            teams: team.iter().cloned().collect(),
            scopes: vec![SCOPE_SEARCH.to_owned()],
            default_team: team,
            name: "local".to_owned(),
        }
    }

    /// A person at the command line (`deja episode ...`): reads and reviews one org, and
    /// is recorded as `name` in the audit records.
    pub fn local_reviewer(org: impl Into<String>, name: impl Into<String>) -> Self {
        Principal {
            org: Some(org.into()),
            teams: Vec::new(),
            scopes: vec![SCOPE_SEARCH.to_owned(), SCOPE_REVIEW.to_owned()],
            default_team: None,
            name: name.into(),
        }
    }

    /// Names this principal (audit records).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Who this is in audit records.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn token(org: impl Into<String>, teams: Vec<String>, scopes: Vec<String>) -> Self {
        Principal {
            org: Some(org.into()),
            teams,
            scopes,
            default_team: None,
            name: "token".to_owned(),
        }
    }

    pub fn org(&self) -> Option<&str> {
        self.org.as_deref()
    }

    fn require_scope(&self, scope: &str) -> Result<(), SearchError> {
        if self.scopes.iter().any(|s| s == scope) {
            Ok(())
        } else {
            Err(SearchError::Forbidden(format!(
                "these credentials lack the `{scope}` scope"
            )))
        }
    }

    /// Fills in the org (and the bound team) the request left out, then checks it.
    fn resolve_org(&self, requested: &mut Option<String>) -> Result<(), SearchError> {
        match (&self.org, requested.as_deref()) {
            (Some(own), None) => *requested = Some(own.clone()),
            (Some(own), Some(asked)) if own != asked => {
                return Err(SearchError::Forbidden(format!(
                    "these credentials cannot read org `{asked}`"
                )))
            }
            _ => {}
        }
        Ok(())
    }

    /// The teams these credentials are limited to; `None` when they read the whole org.
    pub fn team_limit(&self) -> Option<&[String]> {
        (!self.teams.is_empty()).then_some(self.teams.as_slice())
    }

    /// True when an episode of `team` is readable.
    pub fn may_read_team(&self, team: &str) -> bool {
        self.teams.is_empty() || self.teams.iter().any(|t| t == team)
    }

    /// Checks a search and fills in what the credentials imply.
    pub fn authorize_search(&self, request: &mut SearchRequest) -> Result<(), SearchError> {
        self.require_scope(SCOPE_SEARCH)?;
        self.resolve_org(&mut request.org)?;
        if request.team.is_none() {
            request.team = self.default_team.clone();
        }
        match request.team.as_deref() {
            Some(team) if !self.may_read_team(team) => Err(SearchError::Forbidden(format!(
                "these credentials cannot read team `{team}`"
            ))),
            None if !self.teams.is_empty() => Err(SearchError::Forbidden(format!(
                "these credentials are limited to teams {}; pass `team` to search one of them",
                self.teams.join(", ")
            ))),
            _ => Ok(()),
        }
    }

    /// Checks a review request: the `review` scope and the org (filled in when left out).
    /// A listing (`listing = true`) follows the team rules of search: a team-restricted
    /// token must name one of its teams. One episode's team is checked once it is loaded.
    pub fn authorize_review(
        &self,
        org: &mut Option<String>,
        team: &Option<String>,
        listing: bool,
    ) -> Result<(), SearchError> {
        self.require_scope(SCOPE_REVIEW)?;
        self.resolve_org(org)?;
        if org.is_none() {
            return Err(SearchError::bad_request("org", "is required"));
        }
        match team.as_deref() {
            Some(team) if !self.may_read_team(team) => Err(SearchError::Forbidden(format!(
                "these credentials cannot read team `{team}`"
            ))),
            None if listing && !self.teams.is_empty() => Err(SearchError::Forbidden(format!(
                "these credentials are limited to teams {}; pass `team` to list one of them",
                self.teams.join(", ")
            ))),
            _ => Ok(()),
        }
    }

    /// Checks a read of one episode (its team is checked once it is loaded).
    pub fn authorize_get(&self, request: &mut GetRequest) -> Result<(), SearchError> {
        self.require_scope(SCOPE_SEARCH)?;
        self.resolve_org(&mut request.org)
    }
}

/// Maps bearer tokens to principals.
#[derive(Clone)]
pub struct Authenticator {
    /// SHA-256 of each configured token: comparing digests takes the same time whatever the
    /// length or the content of the presented token.
    tokens: Vec<([u8; 32], Principal)>,
    dev: bool,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("tokens", &self.tokens.len())
            .field("dev", &self.dev)
            .finish()
    }
}

impl Authenticator {
    pub fn from_settings(settings: &ApiSettings) -> Self {
        Authenticator {
            tokens: settings
                .tokens
                .iter()
                .map(|t| {
                    (
                        digest(t.token.expose()),
                        Principal::token(t.org.clone(), t.teams.clone(), t.scopes.clone())
                            .named(t.name.clone().unwrap_or_else(|| format!("token:{}", t.org))),
                    )
                })
                .collect(),
            dev: settings.dev,
        }
    }

    pub fn is_dev(&self) -> bool {
        self.dev
    }

    /// Requests without credentials are served: dev mode with no tokens configured. This is
    /// also when the Host header must be checked (DNS rebinding, see `guard.rs`).
    pub fn is_open(&self) -> bool {
        self.dev && self.tokens.is_empty()
    }

    /// The principal of an `Authorization` header value. In dev mode without tokens a missing
    /// header is the dev principal; a present one must still be valid.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, SearchError> {
        let Some(header) = authorization else {
            return if self.is_open() {
                Ok(Principal::dev())
            } else {
                Err(SearchError::Unauthorized(
                    "an `Authorization: Bearer <token>` header is required".into(),
                ))
            };
        };
        let token = bearer_token(header).ok_or_else(|| {
            SearchError::Unauthorized("the `Authorization` header must be `Bearer <token>`".into())
        })?;
        // Every configured token is compared in full so that timing does not reveal which
        // one, or which prefix, matched.
        let presented = digest(token);
        let mut found = None;
        for (known, principal) in &self.tokens {
            if bool::from(known.ct_eq(&presented)) {
                found = Some(principal.clone());
            }
        }
        found.ok_or_else(|| SearchError::Unauthorized("unknown api token".into()))
    }
}

/// The token of a `Bearer <token>` header value. The scheme is matched case-insensitively
/// (RFC 7235: `BEARER`, `bearer`, `Bearer`), followed by one or more spaces; a header
/// without a token is none.
pub(crate) fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// SHA-256 of a credential: what is compared, and what binds an MCP session to its token.
pub(crate) fn digest(text: &str) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn checkout_only() -> Principal {
        Principal::token("acme", vec!["checkout".into()], vec!["search".into()])
    }

    fn code(result: Result<(), SearchError>) -> Option<ErrorCode> {
        result.err().map(|e| e.code())
    }

    #[test]
    fn a_token_fills_in_its_org_and_refuses_another() {
        let principal = Principal::token("acme", vec![], vec!["search".into()]);
        let mut request = SearchRequest {
            org: None,
            ..SearchRequest::new("x", "q")
        };
        principal.authorize_search(&mut request).unwrap();
        assert_eq!(request.org.as_deref(), Some("acme"));
        let mut other = SearchRequest::new("globex", "q");
        assert_eq!(
            code(principal.authorize_search(&mut other)),
            Some(ErrorCode::Forbidden)
        );
    }

    #[test]
    fn a_team_token_may_read_its_team_only_and_never_the_whole_org() {
        let mut own = SearchRequest {
            team: Some("checkout".into()),
            ..SearchRequest::new("acme", "q")
        };
        assert_eq!(code(checkout_only().authorize_search(&mut own)), None);
        let mut other = SearchRequest {
            team: Some("payments".into()),
            ..SearchRequest::new("acme", "q")
        };
        assert_eq!(
            code(checkout_only().authorize_search(&mut other)),
            Some(ErrorCode::Forbidden)
        );
        let mut org_wide = SearchRequest::new("acme", "q");
        assert_eq!(
            code(checkout_only().authorize_search(&mut org_wide)),
            Some(ErrorCode::Forbidden)
        );
    }

    #[test]
    fn a_token_without_the_search_scope_is_refused() {
        let principal = Principal::token("acme", vec![], vec!["review".into()]);
        let mut request = SearchRequest::new("acme", "q");
        assert_eq!(
            code(principal.authorize_search(&mut request)),
            Some(ErrorCode::Forbidden)
        );
    }

    #[test]
    fn review_needs_the_review_scope_and_a_team_token_must_name_its_team() {
        let search_only = Principal::token("acme", vec![], vec!["search".into()]);
        assert_eq!(
            code(search_only.authorize_review(&mut None, &None, true)),
            Some(ErrorCode::Forbidden)
        );
        let reviewer = Principal::token("acme", vec!["checkout".into()], vec!["review".into()]);
        let mut org = None;
        assert_eq!(
            code(reviewer.authorize_review(&mut org, &None, true)),
            Some(ErrorCode::Forbidden)
        );
        assert_eq!(
            code(reviewer.authorize_review(&mut org, &Some("checkout".into()), true)),
            None
        );
        assert_eq!(org.as_deref(), Some("acme"));
        assert_eq!(
            code(reviewer.authorize_review(&mut Some("globex".into()), &None, false)),
            Some(ErrorCode::Forbidden)
        );
    }

    #[test]
    fn the_local_principal_defaults_to_its_team() {
        let principal = Principal::local("acme", Some("checkout".into()));
        let mut request = SearchRequest::new("acme", "q");
        principal.authorize_search(&mut request).unwrap();
        assert_eq!(request.team.as_deref(), Some("checkout"));
    }

    #[test]
    fn the_bearer_scheme_is_matched_whatever_its_case() {
        for header in ["Bearer t0k", "bearer t0k", "BEARER t0k", "BeArEr  t0k "] {
            assert_eq!(bearer_token(header), Some("t0k"), "{header}");
        }
        for header in ["Basic t0k", "Bearert0k", "Bearer ", "Bearer", "t0k"] {
            assert_eq!(bearer_token(header), None, "{header}");
        }
    }

    #[test]
    fn missing_or_unknown_tokens_are_unauthorized_unless_in_dev_mode() {
        let mut settings = deja_config::Settings::defaults().api;
        settings.tokens = vec![deja_config::ApiToken {
            token: deja_config::Secret::new("0123456789abcdef-acme"),
            org: "acme".into(),
            teams: vec![],
            scopes: vec!["search".into()],
            name: Some("ci-agent".into()),
        }];
        let auth = Authenticator::from_settings(&settings);
        assert_eq!(
            auth.authenticate(None).unwrap_err().code(),
            ErrorCode::Unauthorized
        );
        assert_eq!(
            auth.authenticate(Some("Bearer nope")).unwrap_err().code(),
            ErrorCode::Unauthorized
        );
        let principal = auth
            .authenticate(Some("Bearer 0123456789abcdef-acme"))
            .unwrap();
        assert_eq!(principal.org(), Some("acme"));
        assert_eq!(principal.name(), "ci-agent");
        settings.dev = true;
        let dev_with_tokens = Authenticator::from_settings(&settings);
        assert_eq!(
            dev_with_tokens.authenticate(None).unwrap_err().code(),
            ErrorCode::Unauthorized,
            "configured tokens are required even in dev mode"
        );
        settings.tokens.clear();
        let dev = Authenticator::from_settings(&settings);
        assert_eq!(dev.authenticate(None).unwrap(), Principal::dev());
    }

    #[test]
    fn tokens_match_only_in_full_whatever_their_length() {
        let mut settings = deja_config::Settings::defaults().api;
        settings.tokens = vec![deja_config::ApiToken {
            token: deja_config::Secret::new("0123456789abcdef-acme"),
            org: "acme".into(),
            teams: vec![],
            scopes: vec!["search".into()],
            name: None,
        }];
        let auth = Authenticator::from_settings(&settings);
        for wrong in ["0123456789abcdef-acm", "0123456789abcdef-acmee", "", "x"] {
            assert!(
                auth.authenticate(Some(&format!("Bearer {wrong}"))).is_err(),
                "{wrong}"
            );
        }
        assert!(auth
            .authenticate(Some("Bearer 0123456789abcdef-acme"))
            .is_ok());
    }
}
