//! Every Cypher statement the store runs, embedded from `cypher/queries/<area>/<verb>.cypher`.
//! Values always travel as parameters; no statement is assembled from strings at run time.

/// One embedded statement. `name` (`area/verb`) is what errors and logs show.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cypher {
    pub name: &'static str,
    pub text: &'static str,
}

impl Cypher {
    /// A runnable statement; add parameters with [`Statement::param`].
    pub fn statement(&self) -> Statement {
        Statement {
            name: self.name,
            query: neo4rs::query(self.text),
        }
    }
}

/// A statement with its parameters, still carrying its file name for errors.
pub(crate) struct Statement {
    pub name: &'static str,
    pub query: neo4rs::Query,
}

impl Statement {
    pub fn param<T: Into<neo4rs::BoltType>>(mut self, key: &str, value: T) -> Statement {
        self.query = self.query.param(key, value);
        self
    }
}

/// The text of `cypher/<parts…>.cypher`, embedded at compile time: the one way a Cypher file
/// enters the binary (queries here and in `strategies`/`review`, migrations in `migrate`).
macro_rules! cypher_file {
    ($($part:literal),+) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../cypher/",
            $($part,)+
            ".cypher"
        ))
    };
}

/// `cypher!(NAME, "area/verb")`: a [`Cypher`] constant for `cypher/queries/area/verb.cypher`.
macro_rules! cypher {
    ($const:ident, $path:literal) => {
        pub(crate) const $const: $crate::queries::Cypher = $crate::queries::Cypher {
            name: $path,
            text: $crate::queries::cypher_file!("queries/", $path),
        };
    };
}

pub(crate) use {cypher, cypher_file};

cypher!(PING, "schema/ping");
cypher!(APPLIED_MIGRATIONS, "schema/applied");
cypher!(RECORD_MIGRATION, "schema/record");
cypher!(AWAIT_INDEXES, "schema/await_indexes");
cypher!(INDEX_OPTIONS, "schema/index_options");
cypher!(SERVER_VERSION, "schema/server_version");

cypher!(GET_BY_KEY, "episodes/get_by_key");
cypher!(GET_BY_ID, "episodes/get_by_id");
cypher!(CLAIM, "episodes/claim");
cypher!(WRITE, "episodes/write");
cypher!(SYNC_COMPONENTS, "episodes/sync_components");
cypher!(SYNC_SKILLS, "episodes/sync_skills");
cypher!(LIST, "episodes/list");
cypher!(NEEDING_RETRY, "episodes/needing_retry");
cypher!(FOR_REEMBED, "episodes/for_reembed");
cypher!(SET_EMBEDDING, "episodes/set_embedding");
cypher!(MARK_RECALLED, "episodes/mark_recalled");
cypher!(DIGEST_RELATED, "digest/related");

cypher!(SEMANTIC_EXACT_ORG, "search/semantic_exact_org");
cypher!(SEMANTIC_EXACT_TEAM, "search/semantic_exact_team");
cypher!(SEMANTIC_ANN, "search/semantic_ann");
cypher!(SEMANTIC_FILTERED_ORG, "search/semantic_filtered_org");
cypher!(SEMANTIC_FILTERED_TEAM, "search/semantic_filtered_team");
cypher!(TEXT, "search/text");
cypher!(TIMELINE, "search/timeline");
cypher!(COUNT_SEARCHABLE_ORG, "search/count_searchable_org");
cypher!(COUNT_SEARCHABLE_TEAM, "search/count_searchable_team");

cypher!(VOCABULARY_ISSUE_TYPES, "vocabulary/issue_types");
cypher!(VOCABULARY_COMPONENTS, "vocabulary/components");
cypher!(ORG_ISSUE_TYPES, "vocabulary/org_issue_types");
cypher!(ORG_COMPONENTS, "vocabulary/org_components");
cypher!(MERGE_ISSUE_TYPE, "vocab/merge_issue_type");
cypher!(RELINK_COMPONENT, "vocab/relink_component");
cypher!(SYNC_COMPONENT_LISTS, "vocab/sync_component_lists");
cypher!(DELETE_ORPHAN_COMPONENTS, "vocab/delete_orphan_components");

cypher!(SAVE_TURN_INPUT, "turn_inputs/save");
cypher!(GET_TURN_INPUT, "turn_inputs/get");

cypher!(SAVE_TOKENS, "tokens/save");
cypher!(GET_TOKENS, "tokens/get");
cypher!(TOKENS_STAMP, "tokens/stamp");
cypher!(FOR_RETOKENIZE, "tokens/for_retokenize");

/// Every statement above, so a test can check that no query file is left unused.
#[cfg(test)]
pub(crate) const ALL: &[Cypher] = &[
    PING,
    APPLIED_MIGRATIONS,
    RECORD_MIGRATION,
    AWAIT_INDEXES,
    INDEX_OPTIONS,
    SERVER_VERSION,
    GET_BY_KEY,
    GET_BY_ID,
    CLAIM,
    WRITE,
    SYNC_COMPONENTS,
    SYNC_SKILLS,
    LIST,
    NEEDING_RETRY,
    FOR_REEMBED,
    SET_EMBEDDING,
    MARK_RECALLED,
    DIGEST_RELATED,
    SEMANTIC_EXACT_ORG,
    SEMANTIC_EXACT_TEAM,
    SEMANTIC_ANN,
    SEMANTIC_FILTERED_ORG,
    SEMANTIC_FILTERED_TEAM,
    TEXT,
    TIMELINE,
    COUNT_SEARCHABLE_ORG,
    COUNT_SEARCHABLE_TEAM,
    VOCABULARY_ISSUE_TYPES,
    VOCABULARY_COMPONENTS,
    ORG_ISSUE_TYPES,
    ORG_COMPONENTS,
    MERGE_ISSUE_TYPE,
    RELINK_COMPONENT,
    SYNC_COMPONENT_LISTS,
    DELETE_ORPHAN_COMPONENTS,
    SAVE_TURN_INPUT,
    GET_TURN_INPUT,
    SAVE_TOKENS,
    GET_TOKENS,
    TOKENS_STAMP,
    FOR_RETOKENIZE,
];

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn cypher_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                cypher_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "cypher") {
                out.push(path);
            }
        }
    }

    /// `testing/` holds fixtures run by the integration tests only.
    #[test]
    fn every_query_file_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cypher/queries");
        let mut files = Vec::new();
        cypher_files(&root, &mut files);
        // Strategy statements are declared next to their code (crate::strategies).
        let embedded: Vec<&str> = super::ALL
            .iter()
            .chain(crate::strategies::QUERIES)
            .chain(crate::review::QUERIES)
            .map(|c| c.name)
            .collect();
        for file in files {
            let name = file
                .strip_prefix(&root)
                .unwrap()
                .with_extension("")
                .to_string_lossy()
                .replace('\\', "/");
            if name.starts_with("testing/") {
                continue;
            }
            assert!(embedded.contains(&name.as_str()), "{name} is not embedded");
        }
    }
}
