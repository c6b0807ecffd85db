//! The hub's pages as HTML strings. Every stored or requested value is escaped.

use super::html::{esc, page, select, url};
use super::Session;
use crate::error::SearchError;
use crate::review::{HistoryEntry, ListResponse, ReviewedEpisode};
use crate::strategy_review::ReviewedStrategy;
use deja_domain::strategy::StrategyKey;
use deja_graph::{StoredStrategy, SynthesisFailure};
use std::collections::HashMap;
use std::fmt::Write;

/// A 412 to show: the version the person edited, the one stored now, what they sent.
pub struct Conflict<'a> {
    pub expected: i64,
    pub current: i64,
    pub attempted: &'a HashMap<String, String>,
    pub action: &'a str,
}

fn who(session: &Session) -> String {
    match &session.org {
        Some(org) => format!("{} · {}", session.principal.name(), org),
        None => format!("{} (dev mode)", session.principal.name()),
    }
}

fn hidden(session: &Session, org: Option<&str>, version: Option<i64>) -> String {
    let mut out = format!(
        r#"<input type="hidden" name="csrf" value="{}">"#,
        esc(&session.csrf)
    );
    if let (None, Some(org)) = (&session.org, org) {
        let _ = write!(
            out,
            r#"<input type="hidden" name="org" value="{}">"#,
            esc(org)
        );
    }
    if let Some(version) = version {
        let _ = write!(
            out,
            r#"<input type="hidden" name="version" value="{version}">"#
        );
    }
    out
}

fn org_query(session: &Session, org: Option<&str>) -> String {
    match (&session.org, org) {
        (None, Some(org)) => format!("?org={}", url(org)),
        _ => String::new(),
    }
}

pub fn login(message: Option<&str>) -> String {
    let message = message
        .map(|m| format!(r#"<p class="error" id="login-error">{}</p>"#, esc(m)))
        .unwrap_or_default();
    page(
        "Log in",
        None,
        "",
        &format!(
            r#"<div class="card narrow"><h2>Log in</h2>{message}
<p class="muted">Paste an API token with the <code>review</code> scope (<code>[[api.tokens]]</code>
in deja.toml). It is kept in an HttpOnly cookie for this site only.</p>
<form method="post" action="/hub/login"><p><label for="token">API token</label><br><input type="password" name="token" id="token"
autocomplete="current-password" size="40" required></p>
<button class="primary" type="submit" id="login">Log in</button></form></div>"#
        ),
    )
}

pub fn error(session: &Session, error: &SearchError) -> String {
    page(
        "Error",
        Some(&who(session)),
        &session.csrf,
        &format!(
            r#"<p class="error" id="error"><strong>{}</strong> — {}</p><p><a href="/hub">Back to the memory list</a></p>"#,
            esc(error.code().as_str()),
            esc(&error.to_string())
        ),
    )
}

pub fn list(
    session: &Session,
    query: &HashMap<String, String>,
    page_: Option<&ListResponse>,
) -> String {
    let value = |name: &str| esc(query.get(name).map(String::as_str).unwrap_or(""));
    let current = |name: &str| query.get(name).map(String::as_str);
    let mut body = String::new();
    if let Some(deleted) = super::sealed(query, "deleted") {
        let _ = write!(
            body,
            r#"<p class="flash" id="flash">Deleted {}.</p>"#,
            esc(deleted)
        );
    }
    let org_field = if session.org.is_none() {
        format!(
            r#"<label>org<input type="text" name="org" id="f-org" value="{}" required></label>"#,
            value("org")
        )
    } else {
        String::new()
    };
    let _ = write!(
        body,
        r#"<form class="filters" method="get" action="/hub" id="filters">{org_field}
<label>team<input type="text" name="team" id="f-team" value="{team}"></label>
<label>component<input type="text" name="component" id="f-component" value="{component}" placeholder="type:name"></label>
<label>issue type<input type="text" name="issue_type" id="f-issue_type" value="{issue_type}"></label>
<label>significance<input type="text" name="significance" id="f-significance" value="{significance}"></label>
<label>resolved{resolved}</label><label>extraction{status}</label><label>verdict{verdict}</label>
<label>text<input type="text" name="q" id="f-q" value="{q}"></label><label>order{order}</label>
<button type="submit" class="primary" id="apply-filters">Filter</button></form>"#,
        team = value("team"),
        component = value("component"),
        issue_type = value("issue_type"),
        significance = value("significance"),
        q = value("q"),
        resolved = select(
            "resolved",
            &[("", "any"), ("true", "yes"), ("false", "no")],
            current("resolved")
        ),
        status = select(
            "status",
            &[
                ("", "any"),
                ("ok", "ok"),
                ("failed", "failed"),
                ("pending_error", "failed turn")
            ],
            current("status")
        ),
        verdict = select(
            "verdict",
            &[
                ("", "any"),
                ("wrong", "marked wrong"),
                ("none", "no verdict")
            ],
            current("verdict")
        ),
        order = select(
            "order",
            &[
                ("updated", "last updated"),
                ("created", "newest"),
                ("confirmed", "last confirmed"),
                ("recalled", "last recalled")
            ],
            current("order")
        ),
    );
    let Some(page_) = page_ else {
        body.push_str(r#"<p class="muted">Name the org to list its episodes (dev mode).</p>"#);
        return page("Memory", Some(&who(session)), &session.csrf, &body);
    };
    body.push_str(r#"<table id="episodes"><thead><tr><th>updated</th><th>recalled</th><th>team</th><th>issue type</th><th>summary</th><th>root cause</th><th>state</th></tr></thead><tbody>"#);
    for e in &page_.episodes {
        let v = &e.view;
        let details = v.details.as_ref();
        let org = details.map(|d| d.org.as_str());
        let mut state = String::new();
        if let Some(verdict) = &v.verdict {
            let _ = write!(state, r#"<span class="tag wrong">{}</span>"#, esc(verdict));
        }
        if details.is_some_and(|d| d.extraction_status == "failed") || e.extraction_error.is_some()
        {
            state.push_str(r#"<span class="tag failed">extraction failed</span>"#);
        }
        if v.resolved {
            state.push_str(r#"<span class="tag">resolved</span>"#);
        }
        if !e.human_pinned.is_empty() {
            state.push_str(r#"<span class="tag">edited</span>"#);
        }
        let _ = write!(
            body,
            r#"<tr class="episode" data-id="{id}"><td>{updated}</td><td>{recalled}</td><td>{team}</td><td>{issue}</td><td><a href="/hub/episodes/{id_url}{orgq}">{summary}</a></td><td>{root}</td><td>{state}</td></tr>"#,
            id = esc(&v.id),
            id_url = url(&v.id),
            orgq = org_query(session, org),
            updated = v.updated_at.format("%Y-%m-%d %H:%M"),
            recalled = e
                .last_recalled_at
                .map_or("—".to_owned(), |t| t.format("%Y-%m-%d %H:%M").to_string()),
            team = esc(details.map_or("", |d| d.team.as_str())),
            issue = esc(&v.issue_type),
            summary = esc(if v.summary.is_empty() {
                "(no summary)"
            } else {
                &v.summary
            }),
            root = esc(v.root_cause.as_deref().unwrap_or("—")),
        );
    }
    body.push_str("</tbody></table>");
    if page_.episodes.is_empty() {
        body.push_str(r#"<p class="muted" id="empty">No episode matches.</p>"#);
    }
    if let Some(next) = page_.next_offset {
        let _ = write!(
            body,
            r#"<p><a id="next" href="{}">Next page →</a></p>"#,
            esc(&with_query(
                "/hub",
                query,
                &["offset", "deleted", "deleted_seal"],
                &[("offset", &next.to_string())]
            ))
        );
    }
    page("Memory", Some(&who(session)), &session.csrf, &body)
}

/// `path` with the non-empty parameters of `query` but those in `drop`, then `add`.
fn with_query(
    path: &str,
    query: &HashMap<String, String>,
    drop: &[&str],
    add: &[(&str, &str)],
) -> String {
    let mut params: Vec<String> = query
        .iter()
        .filter(|(k, v)| !drop.contains(&k.as_str()) && !v.is_empty())
        .map(|(k, v)| format!("{}={}", url(k), url(v)))
        .collect();
    params.sort();
    params.extend(add.iter().map(|(k, v)| format!("{}={}", url(k), url(v))));
    if params.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", params.join("&"))
    }
}

/// A listing asked for without a team by a token limited to several: one link per team.
pub fn pick_team(
    session: &Session,
    path: &str,
    query: &HashMap<String, String>,
    teams: &[String],
) -> String {
    let mut body = String::from(
        r#"<div class="card" id="pick-team"><h2>Which team?</h2><p class="muted">These credentials read the episodes and strategies of several teams, one team at a time.</p><ul>"#,
    );
    for team in teams {
        let _ = write!(
            body,
            r#"<li><a class="team-link" href="{}">{}</a></li>"#,
            esc(&with_query(
                path,
                query,
                &["team", "offset"],
                &[("team", team)]
            )),
            esc(team)
        );
    }
    body.push_str("</ul></div>");
    page("Pick a team", Some(&who(session)), &session.csrf, &body)
}

/// Dev mode (no token, so no org): the org a page of `path` shows, asked for first.
pub fn pick_org(session: &Session, path: &str, title: &str) -> String {
    let body = format!(
        r#"<div class="card narrow" id="pick-org"><h2>Which org?</h2><form method="get" action="{}"><p><label for="f-org">org</label><br><input type="text" name="org" id="f-org" required></p><button class="primary" type="submit">Show</button></form></div>"#,
        esc(path)
    );
    page(title, Some(&who(session)), &session.csrf, &body)
}

/// A small SVG of the episode's neighbourhood: components and recurrences around it.
fn neighbourhood(e: &ReviewedEpisode) -> String {
    let mut nodes: Vec<(String, &str)> = e
        .view
        .components
        .iter()
        .map(|c| (format!("{}:{}", c.kind, c.name), "component"))
        .collect();
    nodes.extend(e.recurrences.iter().map(|r| (r.id.clone(), "recurrence")));
    nodes.extend(e.view.skills_used.iter().map(|s| (s.clone(), "skill")));
    nodes.truncate(12);
    let (w, h, cx, cy, r) = (520.0_f64, 260.0_f64, 260.0_f64, 130.0_f64, 100.0_f64);
    let mut svg = format!(
        r#"<svg id="graph" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="episode neighbourhood">"#
    );
    let n = nodes.len().max(1) as f64;
    for (i, (label, kind)) in nodes.iter().enumerate() {
        let angle = std::f64::consts::TAU * (i as f64) / n;
        let (x, y) = (cx + r * 1.9 * angle.cos(), cy + r * angle.sin());
        let colour = match *kind {
            "component" => "#2457c5",
            "recurrence" => "#b3261e",
            _ => "#1e7d32",
        };
        let _ = write!(
            svg,
            r##"<line x1="{cx}" y1="{cy}" x2="{x:.0}" y2="{y:.0}" stroke="#c5ccd4"/><circle cx="{x:.0}" cy="{y:.0}" r="6" fill="{colour}"/><text x="{x:.0}" y="{ty:.0}" text-anchor="middle">{label}</text>"##,
            ty = y - 9.0,
            label = esc(&truncate(label, 28))
        );
    }
    let _ = write!(
        svg,
        r##"<circle cx="{cx}" cy="{cy}" r="9" fill="#1d232a"/><text x="{cx}" y="{ty}" text-anchor="middle">{label}</text></svg>
<p class="muted"><span class="dot-component">●</span> components <span class="dot-skill">●</span> skills <span class="dot-recurrence">●</span> recurrences</p>"##,
        ty = cy + 22.0,
        label = esc(&truncate(&e.view.issue_type, 30))
    );
    svg
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(max - 1).collect::<String>())
    }
}

pub fn detail(
    session: &Session,
    org: Option<&str>,
    e: &ReviewedEpisode,
    flash: Option<&str>,
    conflict: Option<Conflict<'_>>,
    neo4j_browser: Option<String>,
) -> String {
    let v = &e.view;
    let d = v.details.as_ref();
    let org = org.or(d.map(|d| d.org.as_str()));
    let mut body = String::new();
    if let Some(flash) = flash {
        let _ = write!(body, r#"<p class="flash" id="flash">{}</p>"#, esc(flash));
    }
    if let Some(c) = &conflict {
        let mut attempted = String::new();
        // What the person changed: not the form's bookkeeping, nor a field sent back as shown.
        let mut sent: Vec<_> = c
            .attempted
            .iter()
            .filter(|(k, _)| {
                !["csrf", "version", "org", "team"].contains(&k.as_str())
                    && !k.starts_with("was_")
                    && !super::left_alone(c.attempted, k)
            })
            .collect();
        sent.sort();
        for (k, val) in sent {
            let _ = write!(
                attempted,
                "<div class=\"k\">{}</div><div>{}</div>",
                esc(k),
                esc(val)
            );
        }
        let _ = write!(
            body,
            r#"<div class="conflict" id="conflict"><strong>Not saved: someone changed this episode while you were editing.</strong>
You edited version {}, it is now at version {}. Below is the episode as it is now; your {} was not applied.
Re-apply what you still want. What you sent:<div class="grid">{attempted}</div></div>"#,
            c.expected,
            c.current,
            esc(c.action)
        );
    }
    if let Some(verdict) = &v.verdict {
        let _ = write!(
            body,
            r#"<div class="verdict" id="verdict">Marked <strong>{}</strong>: {}</div>"#,
            esc(verdict),
            esc(v.verdict_note.as_deref().unwrap_or(""))
        );
    }
    let field =
        |k: &str, val: &str| format!(r#"<div class="k">{}</div><div>{}</div>"#, esc(k), val);
    let components = v
        .components
        .iter()
        .map(|c| {
            let spec = format!("{}:{}", c.kind, c.name);
            let mut orgp = match (&session.org, org) {
                (None, Some(o)) => format!("&org={}", url(o)),
                _ => String::new(),
            };
            // A team-bound token lists one team at a time: the episode's.
            if let (Some(_), Some(d)) = (session.principal.team_limit(), d) {
                let _ = write!(orgp, "&team={}", url(&d.team));
            }
            format!(
                r#"<a class="tag" href="/hub?component={}{orgp}">{}</a>"#,
                url(&spec),
                esc(&spec)
            )
        })
        .collect::<Vec<_>>()
        .join(" ");
    let _ = write!(
        body,
        r#"<div class="card" id="fields"><h2>{issue} <span class="muted">{id} · version <span id="version">{version}</span></span></h2><div class="grid">"#,
        issue = esc(&v.issue_type),
        id = esc(&v.id),
        version = e.version
    );
    if let Some(d) = d {
        body.push_str(&field("team", &esc(&d.team)));
        body.push_str(&field("description", &esc(&d.description)));
    }
    if let Some(opening) = &e.opening_message {
        body.push_str(&field(
            "opened by",
            &format!(
                r#"<span id="opening-message">{}</span> <span class="muted">(the first turn's message, verbatim)</span>"#,
                esc(opening)
            ),
        ));
    }
    body.push_str(&field(
        "summary",
        &format!(r#"<span id="summary">{}</span>"#, esc(&v.summary)),
    ));
    body.push_str(&field(
        "root cause",
        &format!(
            r#"<span id="root-cause">{}</span>"#,
            esc(v.root_cause.as_deref().unwrap_or("—"))
        ),
    ));
    if let Some(d) = d {
        body.push_str(&field(
            "confidence",
            &esc(d.root_cause_confidence.as_deref().unwrap_or("—")),
        ));
        body.push_str(&field("ruled out", &esc(&d.ruled_out.join("; "))));
        body.push_str(&field(
            "resolution",
            &esc(d.resolution.as_deref().unwrap_or("—")),
        ));
        body.push_str(&field(
            "significance",
            &esc(d.significance.as_deref().unwrap_or("—")),
        ));
        body.push_str(&field("key findings", &esc(&d.key_findings.join("; "))));
        body.push_str(&field(
            "status",
            &format!(
                "{} · {} · {} turn(s){}",
                esc(&d.extraction_status),
                esc(&d.provenance),
                d.turn_count,
                if v.resolved { " · resolved" } else { "" }
            ),
        ));
        body.push_str(&field(
            "last confirmed",
            &d.last_confirmed_at.format("%Y-%m-%d %H:%M UTC").to_string(),
        ));
    }
    body.push_str(&field("components", &components));
    if let Some(error) = &e.extraction_error {
        body.push_str(&field(
            "extraction error",
            &format!(
                r#"{}<br><form method="post" action="/hub/episodes/{}/retry" class="inline">{}<button type="submit" id="retry">Retry extraction</button></form> (or <code>deja retry {}</code>)"#,
                esc(error),
                url(&v.id),
                hidden(session, org, None),
                esc(&v.id)
            ),
        ));
    }
    if !e.human_pinned.is_empty() {
        body.push_str(&field("edited by people", &esc(&e.human_pinned.join(", "))));
    }
    for (k, val) in &e.proposals {
        body.push_str(&field(
            &format!("agent proposes {k}"),
            &format!(r#"<span class="proposal">{}</span>"#, esc(&val.to_string())),
        ));
    }
    body.push_str("</div></div>");

    // Actions.
    let h = hidden(session, org, Some(e.version));
    let id_url = url(&v.id);
    // Each field carries a digest of the value shown (`was_<name>`): one sent back unchanged
    // is left out of the edit, so saving one field never rewrites, nor pins, the others.
    let was = |name: &str, value: &str| {
        format!(
            r#"<input type="hidden" name="was_{name}" value="{}">"#,
            super::shown_digest(name, value)
        )
    };
    // A one-line input only for short words; text that may hold line breaks is a textarea
    // (an input would drop them).
    let edit_field = |name: &str, label: &str, value: &str| {
        let input = if super::ONE_LINE_FIELDS.contains(&name) {
            format!(
                r#"<input type="text" name="{name}" id="e-{name}" value="{}" size="60">"#,
                esc(value)
            )
        } else {
            format!(
                r#"<textarea name="{name}" id="e-{name}">{}</textarea>"#,
                esc(value)
            )
        };
        format!(
            r#"<p><label>{label}<br>{input}</label>{}</p>"#,
            was(name, value)
        )
    };
    let team_field = d
        .map(|d| {
            format!(
                r#"<input type="hidden" name="team" value="{}">"#,
                esc(&d.team)
            )
        })
        .unwrap_or_default();
    let comp_lines = v
        .components
        .iter()
        .map(|c| format!("{}:{}", c.kind, c.name))
        .collect::<Vec<_>>()
        .join("\n");
    let _ = write!(
        body,
        r#"<div class="card"><h2>Correct it</h2><form method="post" action="/hub/episodes/{id_url}/edit" id="edit-form">{h}
{issue}{desc}{summary}{comps}{root}{conf}{ruled}{findings}{resolution}{signif}
<button type="submit" class="primary" id="save-edit">Save changes</button></form></div>
<div class="actions">
<form method="post" action="/hub/episodes/{id_url}/mark-wrong" id="mark-wrong-form">{h}<label>Why is it wrong?<br><input type="text" name="note" id="note" size="40"></label> <button type="submit" class="danger" id="mark-wrong">Mark wrong</button></form>
<form method="post" action="/hub/episodes/{id_url}/clear-verdict">{h}<button type="submit" id="clear-verdict">Clear verdict</button></form>
<form method="post" action="/hub/episodes/{id_url}/confirm">{h}<button type="submit" id="confirm">Confirm it still holds</button></form>
<form method="post" action="/hub/episodes/{id_url}/delete" id="delete-form">{h}{team_field}<label><input type="checkbox" name="really" value="yes" id="really"> really delete</label> <button type="submit" class="danger" id="delete">Delete</button></form>
</div>"#,
        issue = edit_field("issue_type", "issue type", &v.issue_type),
        desc = edit_field(
            "issue_description",
            "description",
            d.map_or("", |d| d.description.as_str())
        ),
        summary = edit_field("summary", "summary", &v.summary),
        comps = edit_field(
            "components",
            "components (type:name, one per line)",
            &comp_lines
        ),
        root = edit_field(
            "root_cause",
            "root cause",
            v.root_cause.as_deref().unwrap_or("")
        ),
        conf = edit_field(
            "root_cause_confidence",
            "root cause confidence",
            d.and_then(|d| d.root_cause_confidence.as_deref())
                .unwrap_or("")
        ),
        ruled = edit_field(
            "ruled_out",
            "ruled out (one per line)",
            &d.map(|d| d.ruled_out.join("\n")).unwrap_or_default()
        ),
        findings = edit_field(
            "key_findings",
            "key findings (one per line)",
            &d.map(|d| d.key_findings.join("\n")).unwrap_or_default()
        ),
        resolution = edit_field(
            "resolution",
            "resolution",
            d.and_then(|d| d.resolution.as_deref()).unwrap_or("")
        ),
        signif = edit_field(
            "significance",
            "significance",
            d.and_then(|d| d.significance.as_deref()).unwrap_or("")
        ),
    );

    // Neighbourhood, turns, recurrences, strategies, history.
    let _ = write!(
        body,
        r#"<div class="card"><h2>Neighbourhood</h2>{}"#,
        neighbourhood(e)
    );
    if let Some(browser) = neo4j_browser {
        let query = format!(
            "MATCH (e:Episode {{id: '{}'}}) OPTIONAL MATCH (e)-[r]-(n) RETURN e, r, n",
            v.id.replace('\'', "")
        );
        let _ = write!(
            body,
            r#"<p><a id="neo4j-browser" href="{}{}cmd=edit&amp;arg={}">Open in Neo4j Browser</a></p>"#,
            esc(&browser),
            // A configured address may carry its own query (`?dbms=neo4j://host:7687`).
            if browser.contains('?') { "&amp;" } else { "?" },
            url(&query)
        );
    }
    body.push_str("</div>");
    body.push_str(r#"<div class="card"><h2>Turns</h2><table id="turns"><tr><th>#</th><th>agent run</th><th>ended</th><th>event</th></tr>"#);
    for t in &e.turns {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            t.turn_index,
            esc(&t.agent_run_id),
            t.ended_at.format("%Y-%m-%d %H:%M:%S"),
            esc(&t.event_id)
        );
    }
    body.push_str("</table>");
    if let Some(input) = &e.turn_input {
        let _ = write!(
            body,
            "<details><summary>Stored input of turn {} (what a retry re-extracts)</summary><pre>{}</pre></details>",
            input.turn_index,
            esc(&input.event_json)
        );
    }
    body.push_str("</div>");
    let _ = write!(
        body,
        r#"<div class="card" id="recurrences"><h2>Recurrences ({})</h2>"#,
        e.view.recurrence_count.unwrap_or(0)
    );
    if let (Some(first), Some(last)) = (e.view.first_seen, e.view.last_seen) {
        let _ = write!(
            body,
            r#"<p class="muted">first seen {} · last seen {}</p>"#,
            first.format("%Y-%m-%d"),
            last.format("%Y-%m-%d")
        );
    }
    if !e.chain.is_empty() {
        // The whole chain, oldest first: how often this failure came back, and when.
        body.push_str(r#"<ol class="chain" id="recurrence-chain">"#);
        for c in &e.chain {
            let this = c.id == v.id;
            let _ = write!(
                body,
                r#"<li{}>{} · {} · {}{}</li>"#,
                if this { r#" class="this""# } else { "" },
                c.created_at.format("%Y-%m-%d %H:%M"),
                esc(&c.team),
                if this {
                    format!("{} (this episode)", esc(&c.issue_type))
                } else {
                    format!(
                        r#"<a href="/hub/episodes/{}{}">{}</a>"#,
                        url(&c.id),
                        org_query(session, org),
                        esc(&c.issue_type)
                    )
                },
                if c.verdict.is_some() {
                    r#" <span class="tag wrong">wrong</span>"#
                } else {
                    ""
                }
            );
        }
        body.push_str("</ol>");
    }
    for r in &e.recurrences {
        // A person confirms the recognizer's guess, or says it is not the same failure.
        let fields = format!(
            r#"{}<input type="hidden" name="other" value="{}"><input type="hidden" name="direction" value="{}">"#,
            hidden(session, org, Some(e.version)),
            esc(&r.id),
            if r.direction == "of" { "of" } else { "in" }
        );
        let confirm = if r.confirmed_by.is_none() {
            format!(
                r#"<form method="post" action="/hub/episodes/{id}/confirm-link" class="inline">{fields}<button type="submit" class="confirm-link">Confirm</button></form> "#,
                id = url(&v.id)
            )
        } else {
            String::new()
        };
        let _ = write!(
            body,
            r#"<div class="recurrence">{} <a href="/hub/episodes/{}{}">{}</a> ({}, confidence {:.2}, by {}{}) {confirm}<form method="post" action="/hub/episodes/{}/unlink" class="inline">{fields}<button type="submit" class="danger unlink">Not a recurrence</button></form></div>"#,
            if r.direction == "of" {
                "recurs"
            } else {
                "recurred in"
            },
            url(&r.id),
            org_query(session, org),
            esc(&r.id),
            esc(&r.issue_type),
            r.confidence,
            esc(&r.by),
            r.confirmed_by
                .as_deref()
                .map(|c| format!(", confirmed by {}", esc(c)))
                .unwrap_or_default(),
            url(&v.id)
        );
    }
    let _ = write!(
        body,
        r#"<form method="post" action="/hub/episodes/{}/link" id="link-recurrence">{}<label for="link-of">A recurrence of the earlier episode</label> <input type="text" name="of" id="link-of" placeholder="ep_..." required> <button type="submit">Link</button></form>"#,
        url(&v.id),
        hidden(session, org, Some(e.version))
    );
    if !e.rejected.is_empty() {
        // What a person said is not the same failure: automatic linking keeps away from it.
        body.push_str(r#"<ul id="rejected-links">"#);
        for r in &e.rejected {
            let other = format!(
                r#"<a href="/hub/episodes/{}{}">{}</a> ({})"#,
                url(&r.id),
                org_query(session, org),
                esc(&r.id),
                esc(&r.issue_type)
            );
            let _ = write!(
                body,
                "<li>{}; unlinked by {} on {}</li>",
                crate::review::rejected_pair(r, &other),
                esc(&r.by),
                r.at.format("%Y-%m-%d %H:%M")
            );
        }
        body.push_str("</ul>");
    }
    body.push_str("</div>");
    body.push_str(r#"<div class="card"><h2>Strategies built from it</h2>"#);
    if e.strategies.is_empty() {
        body.push_str(r#"<p class="muted">None.</p>"#);
    }
    for s in &e.strategies {
        let _ = write!(
            body,
            "<p>{} / {} / {}:{}{}</p>",
            esc(&s.team),
            esc(&s.issue_type),
            esc(&s.component.kind),
            esc(&s.component.name),
            if s.stale {
                " <span class=\"tag failed\">stale</span>"
            } else {
                ""
            }
        );
    }
    body.push_str("</div>");
    history_card(&mut body, &e.history);
    page(&v.issue_type, Some(&who(session)), &session.csrf, &body)
}

/// What people changed (an episode's or a strategy's audit records), newest first.
fn history_card(body: &mut String, history: &[HistoryEntry]) {
    body.push_str(r#"<div class="card"><h2>History</h2><table id="history"><tr><th>when</th><th>who</th><th>what</th><th>changes</th></tr>"#);
    for h in history {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            h.at.format("%Y-%m-%d %H:%M:%S"),
            esc(&h.by),
            esc(&h.action),
            esc(&h.changes.to_string())
        );
    }
    body.push_str("</table></div>");
}

/// One page of the strategies of `org` (of the `team` of `query` when given), from
/// `offset`; `next`: the offset of the next page, when there are more.
pub fn strategies(
    session: &Session,
    org: &str,
    query: &HashMap<String, String>,
    list: &[StoredStrategy],
    failures: &[SynthesisFailure],
    offset: usize,
    next: Option<usize>,
) -> String {
    let scope = match query.get("team").filter(|t| !t.is_empty()) {
        Some(team) => format!("{} · team {}", esc(org), esc(team)),
        None => esc(org),
    };
    let mut body = format!(
        r#"<p class="muted">Strategies of {scope}: open one to edit it or accept its proposal (or <code>deja strategy edit|accept</code>).</p>"#
    );
    if !failures.is_empty() {
        body.push_str(r#"<h2>Last synthesis failed</h2><p class="muted">Searches ask again once the cool-down ends or the sources change; the job is in <code>deja dlq list</code>.</p><table id="synthesis-failures"><tr><th>team</th><th>issue type</th><th>component</th><th>failed at</th><th>served</th><th>asked again</th><th>reason</th></tr>"#);
        for f in failures {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}:{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&f.team),
                esc(&f.issue_type),
                esc(&f.component_type),
                esc(&f.component_name),
                f.failed_at.format("%Y-%m-%d %H:%M"),
                if f.has_strategy {
                    "an earlier version"
                } else {
                    "none"
                },
                f.asked_again_at.map_or_else(
                    || "no".to_owned(),
                    |at| format!("at {} (on its way)", at.format("%Y-%m-%d %H:%M"))
                ),
                esc(&f.reason)
            );
        }
        body.push_str("</table>");
    }
    body.push_str(r#"<table id="strategies"><tr><th>team</th><th>issue type</th><th>component</th><th>sources</th><th>state</th><th>playbook</th></tr>"#);
    for s in list {
        let mut state = String::new();
        if let Some(editor) = &s.edited_by {
            let _ = write!(state, "edited by {} ", esc(editor));
        }
        if s.proposed_markdown.is_some() {
            state.push_str(r#"<span class="tag failed">proposal pending</span>"#);
        }
        if let Some(why) = s.stale() {
            let _ = write!(
                state,
                r#"<span class="tag failed" title="{}">stale</span>"#,
                esc(why)
            );
        }
        let _ = write!(
            body,
            r#"<tr><td>{}</td><td>{}</td><td><a class="strategy-link" href="{}">{}:{}</a></td><td>{}</td><td>{}</td><td><details><summary>show</summary><pre>{}</pre></details></td></tr>"#,
            esc(&s.key.team),
            esc(&s.key.issue_type),
            strategy_href(session, &s.key, None),
            esc(&s.key.component.kind),
            esc(&s.key.component.name),
            s.source_ids.len(),
            state,
            esc(&s.markdown)
        );
    }
    body.push_str("</table>");
    if list.is_empty() {
        body.push_str(r#"<p class="muted">No strategy yet.</p>"#);
    }
    if let Some(next) = next {
        let _ = write!(
            body,
            r#"<p id="truncated">Showing strategies {} to {} (pending proposals first, then the most recently generated); more: <a id="next" href="{}">next page →</a></p>"#,
            offset + 1,
            offset + list.len(),
            esc(&with_query(
                "/hub/strategies",
                query,
                &["offset"],
                &[("offset", &next.to_string())]
            ))
        );
    }
    page("Strategies", Some(&who(session)), &session.csrf, &body)
}

/// The strategy page's address (`flash` = a message to show there).
pub fn strategy_href(session: &Session, key: &StrategyKey, flash: Option<&str>) -> String {
    let mut href = format!(
        "/hub/strategy?team={}&issue_type={}&component={}",
        url(&key.team),
        url(&key.issue_type),
        url(&format!("{}:{}", key.component.kind, key.component.name))
    );
    if session.org.is_none() {
        let _ = write!(href, "&org={}", url(&key.org));
    }
    if let Some(flash) = flash {
        let _ = write!(
            href,
            "&flash={}&flash_seal={}",
            url(flash),
            super::seal(flash)
        );
    }
    href
}

/// A stale strategy edit or acceptance (412): the version read, the one stored now, and the
/// text an edit sent (`None` for an acceptance).
pub struct StrategyConflict<'a> {
    pub expected: i64,
    pub current: i64,
    pub attempted: Option<&'a str>,
}

/// One strategy: its playbook, a form to replace it, the pending proposal to accept.
pub fn strategy(
    session: &Session,
    org: &str,
    s: &ReviewedStrategy,
    flash: Option<&str>,
    conflict: Option<StrategyConflict<'_>>,
) -> String {
    let mut body = String::new();
    if let Some(flash) = flash {
        let _ = write!(body, r#"<p class="flash" id="flash">{}</p>"#, esc(flash));
    }
    match &conflict {
        Some(StrategyConflict {
            expected,
            current,
            attempted: Some(attempted),
        }) => {
            let _ = write!(
                body,
                r#"<div class="conflict" id="conflict"><strong>Not saved: someone changed this strategy while you were editing.</strong>
You edited version {expected}, it is now at version {current}. Below is the strategy as it is now; your text was not applied. What you sent:<pre>{}</pre></div>"#,
                esc(attempted)
            );
        }
        Some(StrategyConflict {
            expected,
            current,
            attempted: None,
        }) => {
            let _ = write!(
                body,
                r#"<div class="conflict" id="conflict"><strong>Not accepted: this strategy changed since you read it.</strong>
You read version {expected}, it is now at version {current} (an edit, or a newer proposal). Below is the strategy as it is now: read its proposal again before accepting it.</div>"#
            );
        }
        None => {}
    }
    let key_fields = format!(
        r#"<input type="hidden" name="team" value="{}"><input type="hidden" name="issue_type" value="{}"><input type="hidden" name="component" value="{}">"#,
        esc(&s.key.team),
        esc(&s.key.issue_type),
        esc(&format!(
            "{}:{}",
            s.key.component.kind, s.key.component.name
        ))
    );
    let org_field = if session.org.is_none() {
        Some(org)
    } else {
        None
    };
    let mut state = format!("version {}", s.version);
    if let Some(editor) = &s.edited_by {
        let _ = write!(state, " · edited by {}", esc(editor));
    }
    if let Some(reviewer) = &s.reviewed_by {
        let _ = write!(state, " · proposal accepted by {}", esc(reviewer));
    }
    if let Some(why) = s.stale {
        let _ = write!(
            state,
            r#" <span class="tag failed">stale: {}</span>"#,
            esc(why)
        );
    }
    let _ = write!(
        body,
        r#"<div class="card"><h2>{} / {} / {}:{}</h2><p class="muted" id="strategy-state">{} · built from {} episode(s)</p><pre id="strategy-markdown">{}</pre></div>"#,
        esc(&s.key.team),
        esc(&s.key.issue_type),
        esc(&s.key.component.kind),
        esc(&s.key.component.name),
        state,
        s.source_ids.len(),
        esc(&s.markdown)
    );
    if let Some(proposal) = &s.proposed_markdown {
        let _ = write!(
            body,
            r#"<div class="card" id="proposal"><h2>Proposal pending</h2><p class="muted">Regenerated from newer episodes{}; your edited text stays until you accept it.</p><pre>{}</pre><form method="post" action="/hub/strategy/accept">{}{}<button type="submit" id="accept-proposal">Accept proposal</button></form></div>"#,
            s.proposed_at
                .map(|t| format!(" on {}", t.format("%Y-%m-%d %H:%M")))
                .unwrap_or_default(),
            esc(proposal),
            hidden(session, org_field, Some(s.version)),
            key_fields
        );
    }
    let _ = write!(
        body,
        r#"<div class="card"><h2>Edit</h2><p class="muted">Your text replaces the playbook agents receive; later regenerations become proposals instead of overwriting it.</p><form method="post" action="/hub/strategy/edit" id="strategy-edit">{}{}<label for="strategy-markdown-input">Playbook (markdown)</label><textarea name="markdown" id="strategy-markdown-input" rows="14">{}</textarea><button type="submit" id="save-strategy">Save strategy</button></form></div>"#,
        hidden(session, org_field, Some(s.version)),
        key_fields,
        esc(&s.markdown)
    );
    history_card(&mut body, &s.history);
    // A team-bound token lists its strategies one team at a time: this one's.
    let mut back = HashMap::new();
    if session.org.is_none() {
        back.insert("org".to_owned(), org.to_owned());
    }
    if session.principal.team_limit().is_some() {
        back.insert("team".to_owned(), s.key.team.clone());
    }
    let _ = write!(
        body,
        r#"<p><a href="{}">All strategies</a></p>"#,
        esc(&with_query("/hub/strategies", &back, &[], &[]))
    );
    page("Strategy", Some(&who(session)), &session.csrf, &body)
}

/// What the failed page says of the dead-letter queue.
pub enum DeadLetters {
    /// Its depth (`None`: the broker did not answer).
    Depth(Option<u32>),
    /// The queue holds every org's dead letters: an org's credentials are not told its depth.
    Shared,
}

/// One page of failed extractions (`query`: the page's own, for the link to the next).
pub fn failed(
    session: &Session,
    query: &HashMap<String, String>,
    page_: &ListResponse,
    dead_letters: DeadLetters,
    dead_letter_queue: &str,
) -> String {
    let mut body = String::new();
    let heading = match dead_letters {
        DeadLetters::Depth(depth) => format!(
            r#"Dead letters: <span id="dead-letters">{}</span>"#,
            depth.map_or("unknown (broker unreachable)".to_owned(), |n| n.to_string())
        ),
        DeadLetters::Shared => "Dead letters".to_owned(),
    };
    let _ = write!(
        body,
        r#"<div class="card"><h2>{heading}</h2><p class="muted">Turn events that could not be processed at all wait in <code>{}</code> with their reason; the queue is shared by every org, so the operator who runs deja reads it. List them with <code>deja dlq list</code>, read one with <code>deja dlq show N</code>; once the cause is fixed, <code>deja dlq replay --all</code> (or <code>--reason</code>, <code>--org</code>) sends them back to the worker.</p></div>"#,
        esc(dead_letter_queue)
    );
    let offset: usize = query
        .get("offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    // Saturating: the offset comes from the address bar.
    let (first, last) = (
        offset.saturating_add(1),
        offset.saturating_add(page_.episodes.len()),
    );
    let count = match (offset, page_.next_offset) {
        (0, None) => page_.episodes.len().to_string(),
        (_, None) => format!("{first} to {last}"),
        (_, Some(_)) => format!("{first} to {last} of more"),
    };
    let _ = write!(
        body,
        r#"<div class="card"><h2>Failed extractions ({count})</h2><p class="muted">Re-extract all with <code>deja retry --all-failed</code>, or one with <code>deja retry ID</code>.</p><table id="failed"><tr><th>updated</th><th>team</th><th>conversation</th><th>error</th><th>run</th></tr>"#
    );
    for e in &page_.episodes {
        let v = &e.view;
        let org = v.details.as_ref().map(|d| d.org.as_str());
        let _ = write!(
            body,
            r#"<tr><td>{}</td><td>{}</td><td><a href="/hub/episodes/{}{}">{}</a></td><td>{}</td><td><code>deja retry {}</code></td></tr>"#,
            v.updated_at.format("%Y-%m-%d %H:%M"),
            esc(v.details.as_ref().map_or("", |d| d.team.as_str())),
            url(&v.id),
            org_query(session, org),
            esc(&v.correlation_id),
            esc(e.extraction_error.as_deref().unwrap_or("")),
            esc(&v.id)
        );
    }
    body.push_str("</table>");
    if let Some(next) = page_.next_offset {
        let _ = write!(
            body,
            r#"<p id="truncated">Showing {count}; more: <a id="next" href="{}">next page →</a></p>"#,
            esc(&with_query(
                "/hub/failed",
                query,
                &["offset"],
                &[("offset", &next.to_string())]
            ))
        );
    }
    body.push_str("</div>");
    page(
        "Failed extractions",
        Some(&who(session)),
        &session.csrf,
        &body,
    )
}
