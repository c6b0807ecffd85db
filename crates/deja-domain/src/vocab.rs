//! One vocabulary per org: the spelling rules that make `redis-sessions`, `redis sessions` and
//! `Redis_Sessions` the same component, and `OOM kill` the same issue type as `oom-killed`.
//!
//! Applied to every extracted or given conclusion before it is merged, and by `deja vocab
//! merge` to the names a person asks to merge, so that what the graph stores is already in
//! normal form and exact comparison is enough everywhere else.

use crate::episode::Component;

/// Known spellings of one component type, normalised first.
const COMPONENT_TYPE_ALIASES: &[(&str, &str)] = &[
    ("svc", "service"),
    ("services", "service"),
    ("db", "database"),
    ("databases", "database"),
    ("topic", "queue"),
    ("node", "host"),
    ("k8s-cluster", "cluster"),
];

/// Known spellings of one component name, normalised first. Only whole names: `orders-pg`
/// stays what it is.
const COMPONENT_NAME_ALIASES: &[(&str, &str)] = &[
    ("postgresql", "postgres"),
    ("k8s", "kubernetes"),
    ("elastic-search", "elasticsearch"),
    ("rabbit-mq", "rabbitmq"),
    ("mongo-db", "mongodb"),
];

/// Known spellings of one issue type, normalised first.
const ISSUE_TYPE_ALIASES: &[(&str, &str)] = &[
    ("oom", "oom-killed"),
    ("oom-kill", "oom-killed"),
    ("oomkilled", "oom-killed"),
    ("out-of-memory", "oom-killed"),
    ("cert-expiry", "certificate-expiry"),
    ("tls-cert-expiry", "certificate-expiry"),
    ("tls-certificate-expiry", "certificate-expiry"),
];

/// An issue type in normal form: lowercase kebab-case slug, known aliases resolved.
pub fn normalize_issue_type(text: &str) -> String {
    alias(crate::extraction::slug(text), ISSUE_TYPE_ALIASES)
}

/// A component type in normal form: lowercase kebab-case slug, known aliases resolved.
pub fn normalize_component_type(text: &str) -> String {
    alias(crate::extraction::slug(text), COMPONENT_TYPE_ALIASES)
}

/// A component name in normal form: trimmed, lowercase, every run of spaces, `_` and `-`
/// written as one `-` (none at either end), other characters kept (`api.example.com`,
/// `eu-west-1/web` stay readable), known aliases resolved.
pub fn normalize_component_name(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_separator = false;
    for c in text.trim().chars().flat_map(char::to_lowercase) {
        if c.is_whitespace() || c == '_' || c == '-' {
            pending_separator = !out.is_empty();
        } else {
            if pending_separator {
                out.push('-');
                pending_separator = false;
            }
            out.push(c);
        }
    }
    alias(out, COMPONENT_NAME_ALIASES)
}

/// Components in normal form (type and name), without duplicates or empty parts: what an
/// extraction, an import, a person's edit and a search filter all compare.
pub fn normalize_components(components: Vec<Component>) -> Vec<Component> {
    let mut out: Vec<Component> = Vec::new();
    for c in components {
        let c = Component::new(
            normalize_component_type(&c.kind),
            normalize_component_name(&c.name),
        );
        if c.kind.is_empty() || c.name.is_empty() {
            continue;
        }
        if !out.iter().any(|o| o.kind == c.kind && o.name == c.name) {
            out.push(c);
        }
    }
    out
}

fn alias(normal: String, aliases: &[(&str, &str)]) -> String {
    match aliases.iter().find(|(from, _)| *from == normal) {
        Some((_, to)) => (*to).to_owned(),
        None => normal,
    }
}

/// Which kind of name a vocabulary operation is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VocabKind {
    IssueType,
    Component,
}

impl VocabKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VocabKind::IssueType => "issue-type",
            VocabKind::Component => "component",
        }
    }

    /// The normal form of a name of this kind.
    pub fn normalize(self, name: &str) -> String {
        match self {
            VocabKind::IssueType => normalize_issue_type(name),
            VocabKind::Component => normalize_component_name(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spellings_of_one_component_name_meet() {
        for spelling in [
            "redis-sessions",
            "redis sessions",
            "Redis_Sessions",
            " REDIS -- sessions ",
        ] {
            assert_eq!(
                normalize_component_name(spelling),
                "redis-sessions",
                "{spelling}"
            );
        }
        assert_eq!(
            normalize_component_name("api.example.com"),
            "api.example.com"
        );
        assert_eq!(normalize_component_name("PostgreSQL"), "postgres");
        assert_eq!(normalize_component_name("orders-pg"), "orders-pg");
    }

    #[test]
    fn issue_types_are_slugs_with_known_aliases_resolved() {
        assert_eq!(
            normalize_issue_type("Connection Pool_Exhaustion"),
            "connection-pool-exhaustion"
        );
        assert_eq!(normalize_issue_type("OOMKilled"), "oom-killed");
        assert_eq!(normalize_issue_type("OOM kill"), "oom-killed");
        assert_eq!(normalize_component_type("SVC"), "service");
        assert_eq!(
            VocabKind::IssueType.normalize("Cache Eviction"),
            "cache-eviction"
        );
    }

    proptest! {
        #[test]
        fn normalising_is_idempotent(text in "\\PC{0,40}") {
            let once = normalize_component_name(&text);
            prop_assert_eq!(normalize_component_name(&once), once.clone());
            let issue = normalize_issue_type(&text);
            prop_assert_eq!(normalize_issue_type(&issue), issue.clone());
            let kind = normalize_component_type(&text);
            prop_assert_eq!(normalize_component_type(&kind), kind);
        }

        #[test]
        fn case_and_separators_never_change_the_normal_form(
            words in proptest::collection::vec("[a-z0-9]{1,8}", 1..5),
            separators in proptest::collection::vec(prop_oneof![Just(" "), Just("_"), Just("-"), Just(" - "), Just("__")], 4),
            upper in any::<bool>(),
        ) {
            let plain = words.join("-");
            let mut spelled = String::new();
            for (i, word) in words.iter().enumerate() {
                if i > 0 {
                    spelled.push_str(separators[i - 1]);
                }
                spelled.push_str(&if upper { word.to_uppercase() } else { word.clone() });
            }
            prop_assert_eq!(normalize_component_name(&spelled), normalize_component_name(&plain));
            prop_assert_eq!(normalize_issue_type(&spelled), normalize_issue_type(&plain));
        }

        #[test]
        fn a_normal_name_has_no_uppercase_and_no_loose_separators(text in "\\PC{0,40}") {
            let name = normalize_component_name(&text);
            prop_assert!(!name.starts_with('-') && !name.ends_with('-'));
            prop_assert!(!name.contains("--") && !name.contains('_'));
            prop_assert!(!name.chars().any(char::is_whitespace));
            prop_assert_eq!(name.to_lowercase(), name);
        }
    }
}
