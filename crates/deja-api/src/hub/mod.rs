//! The Memory hub: server-rendered pages at `/hub` over the review use cases
//! ([`crate::review`]) and the strategy store. No JavaScript is needed; assets are compiled
//! into the binary.
//!
//! Sessions: the login form takes an API token and keeps it in the `deja_hub` cookie
//! (`HttpOnly`, `SameSite=Strict`, `Path=/hub`); every request authenticates it exactly as
//! a bearer token. In dev mode (loopback only) the hub is open, like the API.
//!
//! CSRF: every form post carries a `csrf` field derived from the session (SHA-256 of a
//! per-process random secret and the token) that a cross-site page cannot read; a post
//! without the right value is refused (403) before anything is done. `SameSite=Strict`
//! already keeps the cookie off cross-site requests: the field is the second lock. The login
//! form has no session yet: a login post from another site (its `Origin` not this host, or
//! `Sec-Fetch-Site: cross-site`) is refused, so that a page elsewhere cannot log a visitor
//! into someone else's session (login CSRF).
//!
//! Team-bound tokens: a listing (memory, failed extractions, strategies) needs a team, as
//! the review API's does; the hub fills in the token's only team, or lets a token of several
//! teams pick one.

mod html;
mod views;

use crate::auth::Principal;
use crate::error::SearchError;
use crate::http::AppState;
use crate::review::{Action, LinkRecurrence, ListQuery, MarkWrong};
use crate::strategy_review::StrategyRef;
use axum::extract::{Form, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use deja_domain::strategy::ORG_WIDE_TEAM;
use deja_domain::{Component, EpisodeEdit};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::OnceLock;

const COOKIE: &str = "deja_hub";

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/hub", get(list))
        .route("/hub/", get(list))
        .route("/hub/assets/hub.css", get(css))
        .route("/hub/login", get(login_form).post(login))
        .route("/hub/logout", post(logout))
        .route("/hub/episodes/{id}", get(detail))
        .route(
            "/hub/episodes/{id}/{action}",
            get(back_to_episode).post(act),
        )
        .route("/hub/strategies", get(strategies))
        .route("/hub/strategy", get(strategy))
        .route(
            "/hub/strategy/{action}",
            get(|| async { Redirect::to("/hub/strategies") }).post(strategy_act),
        )
        .route("/hub/failed", get(failed))
        .route("/hub/{*rest}", get(no_such_page))
}

/// An action's address opened as a page (Enter in the address bar after a 412 or an error
/// page, a new tab): the episode's page, not the API's 405 envelope.
async fn back_to_episode(
    Path((id, _action)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Redirect {
    let org = query
        .get("org")
        .map(|o| format!("?org={}", html::url(o)))
        .unwrap_or_default();
    Redirect::to(&format!("/hub/episodes/{}{org}", html::url(&id)))
}

/// A mistyped hub address: a page that says so, not the API's JSON 404.
async fn no_such_page(session: Session, Path(rest): Path<String>) -> Response {
    error_page(
        &session,
        &SearchError::NotFound(format!("no hub page `/hub/{rest}`")),
    )
}

/// Who is using the hub, and the CSRF value their forms must carry.
pub(crate) struct Session {
    principal: Principal,
    csrf: String,
    /// `None` in dev mode (no token, no org): the org comes from the `org` query field.
    org: Option<String>,
}

fn secret() -> &'static [u8; 32] {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    SECRET.get_or_init(rand::random)
}

fn csrf_for(token: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(secret());
    hasher.update(b"\x1fdeja-hub-csrf\x1f");
    hasher.update(token.as_bytes());
    hex::encode(hasher.finalize())
}

fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
        .filter(|v| !v.is_empty())
}

/// The session of a request, or the response to send instead (the login page).
fn session(state: &AppState, headers: &HeaderMap) -> Result<Session, Redirect> {
    match cookie_token(headers) {
        Some(token) => match state.auth.authenticate(Some(&format!("Bearer {token}"))) {
            Ok(principal) => Ok(Session {
                org: principal.org().map(str::to_owned),
                principal,
                csrf: csrf_for(&token),
            }),
            // Open (dev mode, no tokens): a cookie left from a server that had tokens would
            // otherwise send every page to a login that accepts no token.
            Err(_) if state.auth.is_open() => Ok(dev_session()),
            Err(_) => Err(Redirect::to("/hub/login?expired=1")),
        },
        // Only when `/v1` serves requests without credentials too: dev mode with tokens
        // configured needs a login here as it needs a token there.
        None if state.auth.is_open() => Ok(dev_session()),
        None => Err(Redirect::to("/hub/login")),
    }
}

fn dev_session() -> Session {
    Session {
        principal: Principal::dev(),
        csrf: csrf_for("dev"),
        org: None,
    }
}

/// Every hub page but the login form needs a session: a handler that takes one is served
/// only with it, and anyone without is sent to the login form.
impl FromRequestParts<AppState> for Session {
    type Rejection = Redirect;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Redirect> {
        session(state, &parts.headers)
    }
}

fn check_csrf(session: &Session, form: &HashMap<String, String>) -> Result<(), SearchError> {
    let sent = form.get("csrf").map(String::as_str).unwrap_or("");
    let expected = session.csrf.as_bytes();
    let same = sent.len() == expected.len()
        && sent
            .bytes()
            .zip(expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if same {
        Ok(())
    } else {
        Err(SearchError::Forbidden(
            "the form's CSRF token is missing or stale; reload the page".into(),
        ))
    }
}

/// A form post must carry the session's CSRF token; without it the answer is the error page.
fn require_csrf(session: &Session, form: &HashMap<String, String>) -> Result<(), Box<Response>> {
    check_csrf(session, form).map_err(|error| Box::new(error_page(session, &error)))
}

fn html(status: StatusCode, body: String) -> Response {
    let mut response = (status, Html(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    response
}

fn error_page(session: &Session, error: &SearchError) -> Response {
    // As the `/v1` handlers do: a store failure behind a page is the operator's to read.
    error.log();
    let status = StatusCode::from_u16(error.code().http_status())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    html(status, views::error(session, error))
}

/// The seal of a message the hub itself put in a redirect (`flash=`, `deleted=`): a page shows
/// the message only with it, so a link elsewhere cannot make the hub's green banner say
/// what its author wants ("re-enter your token at ...").
pub(crate) fn seal(message: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(secret());
    hasher.update(b"\x1fdeja-hub-flash\x1f");
    hasher.update(message.as_bytes());
    hex::encode(&hasher.finalize()[..12])
}

/// The message of `name` in `query` when the hub sealed it (`name` + `_seal`).
pub(crate) fn sealed<'a>(query: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    let message = query.get(name)?;
    let sent = query.get(&format!("{name}_seal"))?;
    (*sent == seal(message)).then_some(message.as_str())
}

/// The org of a request: the token's, or (dev mode) the `org` field.
fn org_of(session: &Session, requested: Option<&String>) -> Option<String> {
    session
        .org
        .clone()
        .or_else(|| requested.filter(|o| !o.is_empty()).cloned())
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        html::CSS,
    )
        .into_response()
}

async fn login_form(Query(query): Query<HashMap<String, String>>) -> Response {
    let message = query
        .contains_key("expired")
        .then_some("That token is not valid (any more). Log in again.");
    html(StatusCode::OK, views::login(message))
}

/// The first value of a request header, if it is text.
fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// True when a browser says the request comes from another site. Every current browser sends
/// `Sec-Fetch-Site`, and it alone decides: `same-origin` or `none` (typed, bookmarked) is
/// ours, `same-site` and `cross-site` are not. It holds behind a reverse proxy that rewrites
/// `Host` to the upstream address (nginx's default), where comparing `Origin` with `Host`
/// would refuse every login. Without it (an older browser), an `Origin` whose host and port
/// are not the `Host` (or a proxy's `X-Forwarded-Host`) is refused. A request with neither
/// header (a non-browser client) is not.
fn from_another_site(headers: &HeaderMap) -> bool {
    if let Some(site) = header_text(headers, "sec-fetch-site") {
        return !(site.eq_ignore_ascii_case("same-origin") || site.eq_ignore_ascii_case("none"));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    // `null` (a sandboxed or privacy-sensitive context) or not text: no origin of ours.
    let Some((scheme, authority)) = origin.to_str().ok().and_then(|o| o.split_once("://")) else {
        return true;
    };
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        ":443"
    } else {
        ":80"
    };
    let ours = |host: &str| {
        let host = host.trim();
        let host = host.strip_suffix(default_port).unwrap_or(host);
        !host.is_empty() && host.eq_ignore_ascii_case(authority)
    };
    let forwarded = header_text(headers, "x-forwarded-host").and_then(|h| h.split(',').next());
    !(header_text(headers, header::HOST.as_str()).is_some_and(ours) || forwarded.is_some_and(ours))
}

/// True when the browser reached the hub over https: a TLS-terminating proxy in front of it
/// says so with `X-Forwarded-Proto` (`deja serve` itself speaks plain http).
fn over_https(headers: &HeaderMap) -> bool {
    header_text(headers, "x-forwarded-proto")
        .and_then(|p| p.split(',').next())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}

/// The session cookie's attributes (`Secure` when the browser came over https).
fn cookie_attributes(headers: &HeaderMap) -> &'static str {
    if over_https(headers) {
        "HttpOnly; SameSite=Strict; Path=/hub; Secure"
    } else {
        "HttpOnly; SameSite=Strict; Path=/hub"
    }
}

async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    // Login CSRF: a page elsewhere posting its author's token would log the visitor into the
    // author's session, where what they then write is the author's to read.
    if from_another_site(&headers) {
        return html(
            StatusCode::FORBIDDEN,
            views::login(Some(
                "This login came from another site and was refused. Log in from this page.",
            )),
        );
    }
    let token = form.get("token").map(|t| t.trim()).unwrap_or("");
    // Only the characters a bearer token may have: the value goes into a header.
    let plausible = !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b';' && b != b',');
    if !plausible
        || state
            .auth
            .authenticate(Some(&format!("Bearer {token}")))
            .is_err()
    {
        return html(
            StatusCode::UNAUTHORIZED,
            views::login(Some("Unknown token.")),
        );
    }
    let cookie = format!(
        "{COOKIE}={token}; {}; Max-Age=43200",
        cookie_attributes(&headers)
    );
    let mut response = Redirect::to("/hub").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn logout(
    session: Session,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(response) = require_csrf(&session, &form) {
        return *response;
    }
    let mut response = Redirect::to("/hub/login").into_response();
    let cookie = format!("{COOKIE}=; {}; Max-Age=0", cookie_attributes(&headers));
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// The team a listing shows: the one asked for, else the only team of a token limited to
/// one. `Err` with the token's teams when it is limited to several and none was asked for:
/// the page lets the person pick one (a listing of a team-bound token needs a team).
fn listing_team(session: &Session, asked: Option<String>) -> Result<Option<String>, Vec<String>> {
    match (asked, session.principal.team_limit()) {
        (Some(team), _) => Ok(Some(team)),
        (None, None) => Ok(None),
        (None, Some([only])) => Ok(Some(only.clone())),
        (None, Some(teams)) => Err(teams.to_vec()),
    }
}

/// The listing's team, filled into `query` (its filter form and links then carry it), or
/// the page that lets a token of several teams pick one.
fn listing_team_in(
    session: &Session,
    path: &str,
    query: &mut HashMap<String, String>,
) -> Result<Option<String>, Box<Response>> {
    let asked = query.get("team").filter(|t| !t.is_empty()).cloned();
    match listing_team(session, asked) {
        Ok(team) => {
            if let Some(team) = &team {
                query.insert("team".into(), team.clone());
            }
            Ok(team)
        }
        Err(teams) => Err(Box::new(html(
            StatusCode::OK,
            views::pick_team(session, path, query, &teams),
        ))),
    }
}

async fn list(
    State(state): State<AppState>,
    session: Session,
    Query(mut query): Query<HashMap<String, String>>,
) -> Response {
    let team = match listing_team_in(&session, "/hub", &mut query) {
        Ok(team) => team,
        Err(page) => return *page,
    };
    let field = |name: &str| query.get(name).filter(|v| !v.is_empty()).cloned();
    let list_query = ListQuery {
        org: org_of(&session, query.get("org")),
        team,
        component: field("component"),
        issue_type: field("issue_type"),
        significance: field("significance"),
        resolved: field("resolved").and_then(|r| r.parse().ok()),
        status: field("status"),
        verdict: field("verdict"),
        q: field("q"),
        order: field("order"),
        limit: Some(25),
        offset: field("offset").and_then(|o| o.parse().ok()),
    };
    if list_query.org.is_none() {
        return html(StatusCode::OK, views::list(&session, &query, None));
    }
    match state.review.list(&session.principal, list_query).await {
        Ok(page) => html(StatusCode::OK, views::list(&session, &query, Some(&page))),
        Err(error) => error_page(&session, &error),
    }
}

async fn detail(
    State(state): State<AppState>,
    session: Session,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let org = org_of(&session, query.get("org"));
    match state.review.get(&session.principal, org.clone(), &id).await {
        Ok(episode) => html(
            StatusCode::OK,
            views::detail(
                &session,
                org.as_deref(),
                &episode,
                sealed(&query, "flash"),
                None,
                neo4j_browser(&state),
            ),
        ),
        Err(error) => error_page(&session, &error),
    }
}

fn neo4j_browser(state: &AppState) -> Option<String> {
    state.neo4j_browser.clone()
}

/// Where the hub links to Neo4j Browser: `api.neo4j_browser_url` when set, else Browser on
/// port 7474 of a loopback Bolt URI (deja's own launcher). Any other URI names a host as the
/// server sees it (`bolt://neo4j:7687` in Compose, a cluster address), which a person's
/// browser may not reach: no link rather than a broken one.
pub(crate) fn neo4j_browser_link(configured: Option<&str>, bolt_uri: &str) -> Option<String> {
    if let Some(url) = configured.map(str::trim).filter(|u| !u.is_empty()) {
        return Some(url.to_owned());
    }
    let (scheme, rest) = bolt_uri.split_once("://")?;
    if !matches!(scheme, "bolt" | "neo4j") {
        return None;
    }
    let authority = rest.split(['/', '?']).next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => format!("[{}]", v6.split(']').next()?),
        None => authority.split(':').next()?.to_owned(),
    };
    matches!(host.as_str(), "127.0.0.1" | "localhost" | "[::1]")
        .then(|| format!("http://{host}:7474/browser/"))
}

/// Fields of the edit form shown as a one-line `<input>` (short words: browsers drop the
/// line breaks of such a value); every other field is a `<textarea>`.
pub(crate) const ONE_LINE_FIELDS: &[&str] =
    &["issue_type", "root_cause_confidence", "significance"];
/// Fields of the edit form edited one item per line.
const LIST_FIELDS: &[&str] = &["components", "ruled_out", "key_findings"];

/// A form value with the line breaks browsers send (`\r\n`) as stored (`\n`).
fn unix_lines(value: &str) -> String {
    value.replace("\r\n", "\n").replace('\r', "\n")
}

/// A field's value as the edit form shows it and a browser sends it back untouched: line
/// breaks as `\n`, none in a one-line field, no surrounding blanks, list items one per line.
fn as_shown(field: &str, value: &str) -> String {
    let value = unix_lines(value);
    if LIST_FIELDS.contains(&field) {
        let items: Vec<&str> = value
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        items.join("\n")
    } else if ONE_LINE_FIELDS.contains(&field) {
        value.replace('\n', "").trim().to_owned()
    } else {
        value.trim().to_owned()
    }
}

/// What the edit form carries beside each field (`was_<field>`): a digest of the value it
/// showed. A field sent back with the same digest was left alone and is not part of the
/// edit, so it is neither rewritten nor pinned.
pub(crate) fn shown_digest(field: &str, value: &str) -> String {
    hex::encode(&Sha256::digest(as_shown(field, value).as_bytes())[..12])
}

/// True when the form sends `field` back as it showed it (see [`shown_digest`]).
pub(crate) fn left_alone(form: &HashMap<String, String>, field: &str) -> bool {
    match (form.get(field), form.get(&format!("was_{field}"))) {
        (Some(value), Some(was)) => *was == shown_digest(field, value),
        _ => false,
    }
}

/// Form fields of the edit form → an edit of the fields the person changed: a field the
/// form showed and got back unchanged is left out (a form without `was_` values, such as a
/// script's post, edits every field it sends; unchanged ones change nothing).
fn edit_from_form(form: &HashMap<String, String>) -> Result<EpisodeEdit, SearchError> {
    let sent = |name: &str| form.get(name).filter(|_| !left_alone(form, name));
    let text = |name: &str| sent(name).map(|v| unix_lines(v));
    let lines = |name: &str| {
        sent(name).map(|v| {
            v.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
    };
    let components = match lines("components") {
        Some(lines) => Some(
            lines
                .iter()
                .map(|l| {
                    l.split_once(':')
                        .map(|(k, n)| Component::new(k.trim(), n.trim()))
                        .ok_or_else(|| {
                            SearchError::bad_request(
                                "components",
                                format!("`{l}` is not type:name"),
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    Ok(EpisodeEdit {
        issue_type: text("issue_type"),
        issue_description: text("issue_description"),
        components,
        root_cause: text("root_cause"),
        root_cause_confidence: text("root_cause_confidence"),
        ruled_out: lines("ruled_out"),
        key_findings: lines("key_findings"),
        resolution: text("resolution"),
        significance: text("significance"),
        summary: text("summary"),
    })
}

async fn act(
    State(state): State<AppState>,
    session: Session,
    Path((id, action)): Path<(String, String)>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(response) = require_csrf(&session, &form) {
        return *response;
    }
    let org = org_of(&session, form.get("org"));
    let version = form.get("version").and_then(|v| v.parse::<i64>().ok());
    let back = |flash: &str| {
        let org_part = match (&session.org, &org) {
            (None, Some(org)) => format!("&org={}", html::url(org)),
            _ => String::new(),
        };
        Redirect::to(&format!(
            "/hub/episodes/{}?flash={}&flash_seal={}{org_part}",
            html::url(&id),
            html::url(flash),
            seal(flash)
        ))
        .into_response()
    };
    let review = &state.review;
    let principal = &session.principal;
    // Links do not move the episode's version: for them an unmoved version is no sign that
    // nothing changed.
    let links = matches!(action.as_str(), "link" | "confirm-link" | "unlink");
    // A link of a recurrence card: this episode's own (`of`: it recurs of `other`), or the
    // newer episode's that recurs of this one (`in`), whose version the page did not read.
    let other = form.get("other").map(|o| o.trim()).unwrap_or("");
    let (source, target, link_version) = match form.get("direction").map(String::as_str) {
        Some("in") => (other, id.as_str(), None),
        _ => (id.as_str(), other, version),
    };
    let certain = |of: &str| LinkRecurrence {
        of: of.to_owned(),
        confidence: 1.0,
    };
    let result = match action.as_str() {
        "link" => {
            let of = form.get("of").map(|o| o.trim()).unwrap_or("");
            if of.is_empty() {
                return back("Name the earlier episode (ep_...) this one is a recurrence of.");
            }
            review
                .link(principal, org.clone(), &id, &certain(of), version)
                .await
        }
        "confirm-link" => {
            review
                .link(
                    principal,
                    org.clone(),
                    source,
                    &certain(target),
                    link_version,
                )
                .await
        }
        "unlink" => {
            review
                .unlink(principal, org.clone(), source, target, link_version)
                .await
        }
        "edit" => match edit_from_form(&form) {
            Ok(edit) if edit == EpisodeEdit::default() => {
                return back("Nothing to save: no field was changed.");
            }
            Ok(edit) => {
                review
                    .apply(
                        principal,
                        org.clone(),
                        &id,
                        version,
                        Action::Edit(Box::new(edit)),
                    )
                    .await
            }
            Err(error) => Err(error),
        },
        "mark-wrong" => {
            let note = MarkWrong {
                note: form.get("note").cloned().unwrap_or_default(),
            };
            review
                .apply(
                    principal,
                    org.clone(),
                    &id,
                    version,
                    Action::MarkWrong(note.note),
                )
                .await
        }
        "clear-verdict" => {
            review
                .apply(principal, org.clone(), &id, version, Action::ClearVerdict)
                .await
        }
        "confirm" => {
            review
                .apply(principal, org.clone(), &id, version, Action::Confirm)
                .await
        }
        "retry" => {
            return match review.retry(principal, org.clone(), &id, version).await {
                Ok(r) => back(&format!(
                    "Turn {} sent back to the worker; reload in a moment.",
                    r.turn_index
                )),
                Err(error) => error_page(&session, &error),
            };
        }
        "delete" => {
            if form.get("really").map(String::as_str) != Some("yes") {
                return back("Tick the box to confirm the deletion.");
            }
            // Back to the list of the episode's team for a team-bound token (the form
            // carries it), whose listing needs one.
            let team = form
                .get("team")
                .filter(|_| principal.team_limit().is_some())
                .map(|t| format!("&team={}", html::url(t)))
                .unwrap_or_default();
            return match review.delete(principal, org.clone(), &id, version).await {
                Ok(_) => Redirect::to(&format!(
                    "/hub?deleted={}&deleted_seal={}{}{team}",
                    html::url(&id),
                    seal(&id),
                    org.as_ref()
                        .filter(|_| session.org.is_none())
                        .map(|o| format!("&org={}", html::url(o)))
                        .unwrap_or_default()
                ))
                .into_response(),
                Err(error) => error_page(&session, &error),
            };
        }
        _ => Err(SearchError::NotFound(format!("no hub action `{action}`"))),
    };
    match result {
        // The version did not move: the action changed nothing (a verdict already clear, an
        // edit that normalises to the stored value), and nothing was recorded.
        Ok(now) if !links && version == Some(now.version) => back("Nothing changed."),
        Ok(_) => back(&match action.as_str() {
            "link" | "confirm-link" => "Recurrence link saved.".to_owned(),
            "unlink" => {
                "Recurrence link removed: automatic linking keeps away from this pair.".to_owned()
            }
            other => format!("{} saved.", other.replace('-', " ")),
        }),
        Err(SearchError::VersionConflict {
            expected, current, ..
        }) => {
            // Show the person the episode as it is now, and what they tried to change.
            match review.get(principal, org.clone(), &id).await {
                Ok(now) => html(
                    StatusCode::PRECONDITION_FAILED,
                    views::detail(
                        &session,
                        org.as_deref(),
                        &now,
                        None,
                        Some(views::Conflict {
                            expected,
                            current,
                            attempted: &form,
                            action: &action,
                        }),
                        neo4j_browser(&state),
                    ),
                ),
                Err(error) => error_page(&session, &error),
            }
        }
        Err(error) => error_page(&session, &error),
    }
}

/// The most strategies one page of `/hub/strategies` shows (pending proposals first, then
/// the most recently generated); past it a link to the next.
const STRATEGY_PAGE: usize = 100;
/// The most failed extractions one page of `/hub/failed` shows; past it a link to the next.
const FAILED_PAGE: usize = 100;

async fn strategies(
    State(state): State<AppState>,
    session: Session,
    Query(mut query): Query<HashMap<String, String>>,
) -> Response {
    let mut org = org_of(&session, query.get("org"));
    if org.is_none() {
        return html(
            StatusCode::OK,
            views::pick_org(&session, "/hub/strategies", "Strategies"),
        );
    }
    let team = match listing_team_in(&session, "/hub/strategies", &mut query) {
        Ok(team) => team,
        Err(page) => return *page,
    };
    if let Err(error) = session.principal.authorize_review(&mut org, &team, true) {
        return error_page(&session, &error);
    }
    let org = org.unwrap_or_default();
    let offset = query
        .get("offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    // Org-wide strategies are made from every team's episodes: only for credentials that
    // may read them (`/hub/strategy?team=*` asks the same).
    let org_wide = session.principal.may_read_team(ORG_WIDE_TEAM);
    match state
        .service
        .store()
        .list_strategies_from(&org, team.as_deref(), org_wide, offset, STRATEGY_PAGE + 1)
        .await
    {
        Ok(mut list) => {
            let next = (list.len() > STRATEGY_PAGE).then_some(offset.saturating_add(STRATEGY_PAGE));
            list.truncate(STRATEGY_PAGE);
            // The failed syntheses head the first page: nothing else tells a person that a
            // strategy is not coming.
            let failures = if offset == 0 {
                match state
                    .service
                    .store()
                    .synthesis_failures(&org, team.as_deref(), org_wide, STRATEGY_PAGE)
                    .await
                {
                    Ok(failures) => failures,
                    Err(error) => return error_page(&session, &SearchError::from(error)),
                }
            } else {
                Vec::new()
            };
            html(
                StatusCode::OK,
                views::strategies(&session, &org, &query, &list, &failures, offset, next),
            )
        }
        Err(error) => error_page(&session, &SearchError::from(error)),
    }
}

/// The strategy named by the `team`, `issue_type` and `component` (`type:name`) fields.
fn strategy_ref(fields: &HashMap<String, String>) -> Result<StrategyRef, SearchError> {
    let field = |name: &str| fields.get(name).map(String::as_str).unwrap_or("");
    StrategyRef::new(
        Some(field("team").to_owned()),
        field("issue_type"),
        field("component"),
    )
}

async fn strategy(
    State(state): State<AppState>,
    session: Session,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let org = org_of(&session, query.get("org"));
    let found = match strategy_ref(&query) {
        Ok(strategy) => {
            state
                .review
                .strategy(&session.principal, org, &strategy)
                .await
        }
        Err(error) => Err(error),
    };
    match found {
        Ok(s) => html(
            StatusCode::OK,
            views::strategy(&session, &s.key.org, &s, sealed(&query, "flash"), None),
        ),
        Err(error) => error_page(&session, &error),
    }
}

/// `edit` (with the version read: a stale one shows the 412 page) or `accept` (the
/// pending proposal): the use cases of `deja strategy edit|accept`.
async fn strategy_act(
    State(state): State<AppState>,
    session: Session,
    Path(action): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(response) = require_csrf(&session, &form) {
        return *response;
    }
    let org = org_of(&session, form.get("org"));
    let strategy = match strategy_ref(&form) {
        Ok(strategy) => strategy,
        Err(error) => return error_page(&session, &error),
    };
    let review = &state.review;
    let principal = &session.principal;
    // A textarea's line breaks come as `\r\n`: stored as `\n`, so that saving a text
    // untouched leaves it as agents already read it.
    let markdown = unix_lines(form.get("markdown").map(String::as_str).unwrap_or(""));
    let markdown = markdown.as_str();
    let version = form.get("version").and_then(|v| v.parse::<i64>().ok());
    let result = match action.as_str() {
        "edit" => review
            .edit_strategy(principal, org.clone(), &strategy, markdown, version)
            .await
            .map(|v| format!("Strategy saved (version {v}).")),
        "accept" => review
            .accept_strategy(principal, org.clone(), &strategy, version)
            .await
            .map(|v| format!("Proposal accepted (version {v}).")),
        _ => Err(SearchError::NotFound(format!("no hub action `{action}`"))),
    };
    // Whatever happened, show the strategy as it is now.
    let now = review.strategy(principal, org.clone(), &strategy).await;
    match (result, now) {
        (Ok(flash), Ok(s)) => {
            Redirect::to(&views::strategy_href(&session, &s.key, Some(&flash))).into_response()
        }
        (
            Err(SearchError::VersionConflict {
                expected, current, ..
            }),
            Ok(s),
        ) => html(
            StatusCode::PRECONDITION_FAILED,
            views::strategy(
                &session,
                &s.key.org,
                &s,
                None,
                Some(views::StrategyConflict {
                    expected,
                    current,
                    attempted: (action == "edit").then_some(markdown),
                }),
            ),
        ),
        (Err(error), _) | (Ok(_), Err(error)) => error_page(&session, &error),
    }
}

async fn failed(
    State(state): State<AppState>,
    session: Session,
    Query(mut query): Query<HashMap<String, String>>,
) -> Response {
    let team = match listing_team_in(&session, "/hub/failed", &mut query) {
        Ok(team) => team,
        Err(page) => return *page,
    };
    let Some(org) = org_of(&session, query.get("org")) else {
        return html(
            StatusCode::OK,
            views::pick_org(&session, "/hub/failed", "Failed extractions"),
        );
    };
    let list_query = ListQuery {
        org: Some(org),
        team,
        status: Some("pending_error".into()),
        limit: Some(FAILED_PAGE),
        offset: query.get("offset").and_then(|o| o.parse().ok()),
        ..Default::default()
    };
    let page = match state.review.list(&session.principal, list_query).await {
        Ok(page) => page,
        Err(error) => return error_page(&session, &error),
    };
    // One dead-letter queue holds every org's failed turns: its depth is for a credential
    // of no single org (dev mode, on loopback), not a tenant's to learn.
    let dead_letters = match (&state.service.inner.jobs, session.principal.org()) {
        (_, Some(_)) => views::DeadLetters::Shared,
        (Some(jobs), None) => views::DeadLetters::Depth(jobs.dead_letter_depth().await.ok()),
        (None, None) => views::DeadLetters::Depth(None),
    };
    html(
        StatusCode::OK,
        views::failed(
            &session,
            &query,
            &page,
            dead_letters,
            &state.dead_letter_queue,
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neo4j_browser_is_linked_only_where_a_person_can_reach_it() {
        assert_eq!(
            neo4j_browser_link(None, "bolt://127.0.0.1:7687").as_deref(),
            Some("http://127.0.0.1:7474/browser/")
        );
        assert_eq!(
            neo4j_browser_link(None, "neo4j://[::1]:7687").as_deref(),
            Some("http://[::1]:7474/browser/")
        );
        // Compose's service name, a remote server, TLS schemes: no guess.
        assert_eq!(neo4j_browser_link(None, "bolt://neo4j:7687"), None);
        assert_eq!(
            neo4j_browser_link(None, "neo4j+s://x.databases.neo4j.io"),
            None
        );
        assert_eq!(neo4j_browser_link(None, "bolt://10.0.0.5:7687"), None);
        assert_eq!(
            neo4j_browser_link(Some(" https://browser.example/ "), "bolt://neo4j:7687").as_deref(),
            Some("https://browser.example/")
        );
        assert_eq!(
            neo4j_browser_link(Some(""), "bolt://localhost:7687").as_deref(),
            Some("http://localhost:7474/browser/")
        );
    }

    #[test]
    fn only_a_message_the_hub_sealed_is_shown() {
        let mut query = HashMap::from([("flash".to_owned(), "edit saved.".to_owned())]);
        assert_eq!(sealed(&query, "flash"), None);
        query.insert("flash_seal".into(), seal("edit saved."));
        assert_eq!(sealed(&query, "flash"), Some("edit saved."));
        query.insert(
            "flash".into(),
            "Re-enter your token at https://evil.example".into(),
        );
        assert_eq!(sealed(&query, "flash"), None);
    }
}
