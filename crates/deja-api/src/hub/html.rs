//! Tiny, dependency-free HTML helpers for the hub: escaping, URL encoding and the layout.
//! Every value that comes from the store or the request goes through [`esc`] or [`url`].

use std::fmt::Write;

/// Escapes text for HTML element content and double-quoted attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a query-string or path component.
pub fn url(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

/// The stylesheet, compiled into the binary (no CDN, no external fonts).
pub const CSS: &str = include_str!("hub.css");

/// A whole page: navigation, who is logged in, a logout form, then `body`.
pub fn page(title: &str, who: Option<&str>, csrf: &str, body: &str) -> String {
    let nav = match who {
        Some(who) => format!(
            r#"<nav><a href="/hub">Memory</a> <a href="/hub/failed">Failed extractions</a>
<a href="/hub/strategies">Strategies</a>
<span class="who">{who}</span>
<form method="post" action="/hub/logout" class="inline"><input type="hidden" name="csrf" value="{csrf}">
<button type="submit">Log out</button></form></nav>"#,
            who = esc(who),
            csrf = esc(csrf)
        ),
        None => String::new(),
    };
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · deja memory hub</title>
<link rel="stylesheet" href="/hub/assets/hub.css"></head>
<body><header><h1><a href="/hub">deja</a> memory hub</h1>{nav}</header>
<main>{body}</main></body></html>"#,
        title = esc(title),
    )
}

/// A `<select>` with `options` (value, label); `current` is selected.
pub fn select(name: &str, options: &[(&str, &str)], current: Option<&str>) -> String {
    let mut out = format!(r#"<select name="{}" id="f-{}">"#, esc(name), esc(name));
    for (value, label) in options {
        let selected = if current.unwrap_or("") == *value {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            out,
            r#"<option value="{}"{selected}>{}</option>"#,
            esc(value),
            esc(label)
        );
    }
    out.push_str("</select>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_stored_text_is_escaped() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn url_components_are_percent_encoded() {
        assert_eq!(url("a b/c:d&e"), "a%20b%2Fc%3Ad%26e");
        assert_eq!(url("ep_12-x.y~"), "ep_12-x.y~");
    }
}
