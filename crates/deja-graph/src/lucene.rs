//! Full-text query building: tenant scope tokens and the escaping of user text.
//!
//! Users paste error strings, host names and stack traces. Lucene's classic query syntax
//! gives meaning to `+ - && || ! ( ) { } [ ] ^ " ~ * ? : \ /` and to the words `AND OR NOT
//! TO`; none of it may reach the parser as syntax. Each whitespace-separated word becomes
//! either a plain lowercase term (only letters and digits: lowercasing defuses the operator
//! words, and the analyzer lowercases anyway) or a quoted phrase (anything else: inside
//! quotes only `"` and `\` are special, and a phrase keeps `ip-10-42-7-201` together).
//! Words without a letter or digit produce no token under the analyzer and are dropped.

use deja_domain::Scope;
use sha2::{Digest, Sha256};

/// More words than this are dropped: Lucene refuses boolean queries over 1024 clauses, and
/// the first words of a pasted log carry the signal.
const MAX_TERMS: usize = 64;

/// The opaque full-text token of an org: hex of a hash, so the standard analyzer keeps it as
/// one token and no user word can match it by accident.
pub(crate) fn org_token(org: &str) -> String {
    token('o', &["org", org])
}

/// The opaque full-text token of one team of an org.
pub(crate) fn team_token(org: &str, team: &str) -> String {
    token('t', &["team", org, team])
}

/// The value of an episode's `scope_tokens` property.
pub(crate) fn scope_tokens(org: &str, team: &str) -> String {
    format!("{} {}", org_token(org), team_token(org, team))
}

fn token(prefix: char, parts: &[&str]) -> String {
    let digest = Sha256::digest(parts.join("\u{1f}").as_bytes());
    format!("{prefix}{}", &hex::encode(digest)[..32])
}

/// The Lucene query for `user` text within `scope`, or `None` when the text has no word to
/// search for. The scope token is required (`+`), so Lucene only ranks the tenant's episodes
/// and other tenants cannot push them out of the result limit.
pub(crate) fn scoped_query(scope: &Scope, user: &str) -> Option<String> {
    let terms = escape_user_text(user)?;
    let scope_token = match &scope.team {
        Some(team) => team_token(&scope.org, team),
        None => org_token(&scope.org),
    };
    Some(format!("+scope_tokens:{scope_token} +({terms})"))
}

/// User text as space-separated Lucene terms with no syntax left in them (any term matches).
pub fn escape_user_text(user: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in user.split_whitespace() {
        if !word.chars().any(char::is_alphanumeric) {
            continue;
        }
        let word = word.to_lowercase();
        let term = if word.chars().all(char::is_alphanumeric) {
            word
        } else {
            let mut phrase = String::with_capacity(word.len() + 2);
            phrase.push('"');
            for c in word.chars() {
                if matches!(c, '"' | '\\') {
                    phrase.push('\\');
                }
                phrase.push(c);
            }
            phrase.push('"');
            phrase
        };
        if !terms.contains(&term) {
            terms.push(term);
        }
        if terms.len() == MAX_TERMS {
            break;
        }
    }
    (!terms.is_empty()).then(|| terms.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy as _;

    #[test]
    fn plain_words_are_lowercased_so_operators_lose_their_meaning() {
        assert_eq!(
            escape_user_text("OOMKilled AND exit OR code NOT 137 TO").as_deref(),
            Some("oomkilled and exit or code not 137 to")
        );
    }

    #[test]
    fn words_with_punctuation_become_phrases() {
        assert_eq!(
            escape_user_text("ip-10-42-7-201 redis:6379 a/b").as_deref(),
            Some(r#""ip-10-42-7-201" "redis:6379" "a/b""#)
        );
    }

    #[test]
    fn quotes_and_backslashes_are_escaped_inside_phrases() {
        assert_eq!(
            escape_user_text(r#"say"hi" C:\tmp\x end}"#).as_deref(),
            Some(r#""say\"hi\"" "c:\\tmp\\x" "end}""#)
        );
    }

    #[test]
    fn syntax_only_words_are_dropped() {
        assert_eq!(escape_user_text("} : \\ \" * ? ( ) && || !"), None);
        assert_eq!(escape_user_text("   \n\t "), None);
        assert_eq!(
            escape_user_text("MATCH (n) DETACH DELETE n").as_deref(),
            Some(r#"match "(n)" detach delete n"#)
        );
    }

    #[test]
    fn unicode_words_are_kept_and_repeats_collapse() {
        assert_eq!(
            escape_user_text("Zürich zürich 東京 café").as_deref(),
            Some("zürich 東京 café")
        );
    }

    #[test]
    fn very_long_text_is_bounded() {
        let text: String = (0..500).map(|i| format!("w{i} ")).collect();
        let escaped = escape_user_text(&text).unwrap();
        assert_eq!(escaped.split(' ').count(), MAX_TERMS);
    }

    #[test]
    fn scope_tokens_are_single_opaque_words_per_tenant() {
        let tokens = scope_tokens("acme", "checkout");
        let words: Vec<&str> = tokens.split(' ').collect();
        assert_eq!(words.len(), 2);
        assert!(words
            .iter()
            .all(|w| w.chars().all(|c| c.is_ascii_alphanumeric())));
        assert_ne!(org_token("acme"), org_token("acme2"));
        assert_ne!(team_token("a", "bc"), team_token("ab", "c"));
        let query = scoped_query(&Scope::team("acme", "checkout"), "timeout").unwrap();
        assert_eq!(query, format!("+scope_tokens:{} +(timeout)", words[1]));
    }

    /// Cases per property: `PROPTEST_CASES` when set, else a CI-sized default. More:
    /// `PROPTEST_CASES=100000 cargo test -p deja-graph --lib --release lucene`.
    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64)
    }

    /// Checks one term of the output: a plain alphanumeric word, or a quoted phrase in which
    /// every `"` and `\` is escaped. Returns what is wrong.
    fn term_problem(term: &str) -> Option<String> {
        if term.is_empty() {
            return Some("empty term".into());
        }
        if term.chars().all(char::is_alphanumeric) {
            return None;
        }
        let Some(inner) = term
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .filter(|_| term.len() >= 2)
        else {
            return Some(format!("unquoted syntax in {term:?}"));
        };
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' if !matches!(chars.next(), Some('"' | '\\')) => {
                    return Some(format!("stray backslash in {term:?}"));
                }
                '"' => return Some(format!("unescaped quote in {term:?}")),
                c if c.is_whitespace() => return Some(format!("whitespace in {term:?}")),
                _ => {}
            }
        }
        None
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(cases()))]

        #[test]
        fn the_query_builder_never_emits_lucene_syntax(
            user in proptest::prop_oneof![
                "\\PC{0,200}",
                "[ a-zA-Z0-9+\\-&|!(){}\\[\\]^\"~*?:\\\\/\t\n]{0,120}",
                proptest::collection::vec("(AND|OR|NOT|TO|\\*|\"|\\\\|[a-z]{1,6})", 0..80)
                    .prop_map(|words| words.join(" ")),
            ],
            team in proptest::option::of("\\PC{1,20}"),
        ) {
            let has_word = user
                .split_whitespace()
                .any(|w| w.chars().any(char::is_alphanumeric));
            let escaped = escape_user_text(&user);
            proptest::prop_assert_eq!(escaped.is_some(), has_word);
            if let Some(escaped) = escaped {
                let terms: Vec<&str> = escaped.split(' ').collect();
                proptest::prop_assert!(terms.len() <= MAX_TERMS);
                for term in &terms {
                    if let Some(problem) = term_problem(term) {
                        proptest::prop_assert!(false, "{} (input {:?})", problem, user);
                    }
                }
                let scope = match &team {
                    Some(team) => Scope::team("acme", team.clone()),
                    None => Scope::org("acme"),
                };
                let query = scoped_query(&scope, &user).unwrap();
                let expected_suffix = format!("+({escaped})");
                proptest::prop_assert!(query.starts_with("+scope_tokens:"));
                proptest::prop_assert!(query.ends_with(&expected_suffix));
            }
        }
    }
}
